package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

const (
	visibilityPrivate = "private"
	reviewDraft       = "draft"
	reviewPending     = "pending"
)

// cardFields are the fields a stored card and the contract's Card share, under the same names.
type cardFields struct {
	RoleName            string       `json:"roleName"`
	RoleDesc            string       `json:"roleDesc"`
	RoleWelcome         string       `json:"roleWelcome"`
	WelcomeAlternates   []string     `json:"welcomeAlternates"`
	Prologue            []string     `json:"prologue"`
	RoleVisibility      string       `json:"roleVisibility"`
	ReviewStatus        string       `json:"reviewStatus"`
	Tags                []string     `json:"tags"`
	Language            string       `json:"language"`
	CardType            string       `json:"cardType"`
	ContentRatingIntent string       `json:"contentRatingIntent"`
	AvatarImageID       string       `json:"avatarImageId"`
	BackgroundImageID   string       `json:"backgroundImageId"`
	Sections            cardSections `json:"sections"`
}

// card is a stored card.
type card struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	Seq   int64  `json:"seq"`
	cardFields
	LastUpdate time.Time `json:"lastUpdate"`
}

// cardSections holds the seven text sections; every key is always present.
type cardSections struct {
	Description             string `json:"description"`
	Personality             string `json:"personality"`
	Scenario                string `json:"scenario"`
	ExampleDialogue         string `json:"exampleDialogue"`
	SystemPrompt            string `json:"systemPrompt"`
	PostHistoryInstructions string `json:"postHistoryInstructions"`
	CreatorNotes            string `json:"creatorNotes"`
}

// sectionsInput is CardSections as a request carries it: absent keys keep the stored text.
type sectionsInput struct {
	Description             *string `json:"description"`
	Personality             *string `json:"personality"`
	Scenario                *string `json:"scenario"`
	ExampleDialogue         *string `json:"exampleDialogue"`
	SystemPrompt            *string `json:"systemPrompt"`
	PostHistoryInstructions *string `json:"postHistoryInstructions"`
	CreatorNotes            *string `json:"creatorNotes"`
}

func (in sectionsInput) applyTo(cs *cardSections) {
	set(&cs.Description, in.Description)
	set(&cs.Personality, in.Personality)
	set(&cs.Scenario, in.Scenario)
	set(&cs.ExampleDialogue, in.ExampleDialogue)
	set(&cs.SystemPrompt, in.SystemPrompt)
	set(&cs.PostHistoryInstructions, in.PostHistoryInstructions)
	set(&cs.CreatorNotes, in.CreatorNotes)
}

// set replaces *dst with *src when src is present.
func set[T any](dst *T, src *T) {
	if src != nil {
		*dst = *src
	}
}

// orEmpty turns a nil slice into an empty one, so that it encodes as [].
func orEmpty(list []string) []string {
	if list == nil {
		return []string{}
	}
	return list
}

// cardView is the contract's Card as getCard returns it.
type cardView struct {
	RoleID string `json:"roleId"`
	cardFields
	LastUpdateTime string `json:"lastUpdateTime"`
}

func (c *card) view() cardView {
	v := cardView{RoleID: c.ID, cardFields: c.cardFields, LastUpdateTime: rfc3339(c.LastUpdate)}
	v.WelcomeAlternates, v.Prologue, v.Tags = orEmpty(c.WelcomeAlternates), orEmpty(c.Prologue), orEmpty(c.Tags)
	return v
}

// cardOf returns the user's card; another user's card is reported exactly like a missing one.
func (s *Service) cardOf(userID, roleID string, detail map[string]any) (*card, error) {
	c := s.st.Cards[roleID]
	if c == nil || c.Owner != userID {
		return nil, errRoleNotFound(detail)
	}
	return c, nil
}

func (s *Service) touch(c *card) {
	c.LastUpdate = s.now()
	s.changed()
}

type roleSaved struct {
	RoleID string `json:"roleId"`
	OK     bool   `json:"ok"`
}

func (s *Service) getMe(rq *request) (int, any, error) {
	u := s.st.Users[rq.userID]
	if u == nil {
		return 0, nil, newError(codeUnauthorized, "Authentication failed; sign in again to get a new access token.", nil)
	}
	return 0, struct {
		UserID   string   `json:"userId"`
		Nickname string   `json:"nickname"`
		Scopes   []string `json:"scopes"`
	}{u.ID, u.Nickname, orEmpty(u.Scopes)}, nil
}

type cardCreated struct {
	RoleID         string `json:"roleId"`
	RoleVisibility string `json:"roleVisibility"`
	ReviewStatus   string `json:"reviewStatus"`
}

func (s *Service) createCard(rq *request) (int, any, error) {
	var in struct {
		RoleName            string `json:"roleName"`
		Language            string `json:"language"`
		CardType            string `json:"cardType"`
		ContentRatingIntent string `json:"contentRatingIntent"`
		IdempotencyKey      string `json:"idempotencyKey"`
	}
	if err := decodeBody(rq, &in); err != nil {
		return 0, nil, err
	}
	var digest string
	if in.IdempotencyKey != "" {
		inst, err := schema.DecodeJSON(rq.body)
		if err != nil {
			return 0, nil, err
		}
		canon, err := jsontext.Marshal(inst)
		if err != nil {
			return 0, nil, err
		}
		sum := sha256.Sum256(canon)
		digest = hex.EncodeToString(sum[:])
		if rec := s.st.Idempotency[rq.userID][in.IdempotencyKey]; rec != nil {
			if rec.BodyDigest != digest {
				return 0, nil, newError(codeConflict,
					"This idempotencyKey was already used with a different request body.",
					map[string]any{"field": "idempotencyKey"})
			}
			if c := s.st.Cards[rec.RoleID]; c != nil && c.Owner == rq.userID {
				return http.StatusOK, cardCreated{c.ID, c.RoleVisibility, c.ReviewStatus}, nil
			}
		}
	}
	id := newID("r_")
	for s.st.Cards[id] != nil {
		id = newID("r_")
	}
	c := &card{ID: id, Owner: rq.userID, Seq: s.st.nextSeq(), cardFields: cardFields{
		RoleName: in.RoleName, WelcomeAlternates: []string{}, Prologue: []string{}, Tags: []string{},
		RoleVisibility: visibilityPrivate, ReviewStatus: reviewDraft,
		Language: in.Language, CardType: in.CardType, ContentRatingIntent: in.ContentRatingIntent,
	}}
	s.st.Cards[id] = c
	if in.IdempotencyKey != "" {
		if s.st.Idempotency[rq.userID] == nil {
			s.st.Idempotency[rq.userID] = map[string]*idemRecord{}
		}
		s.st.Idempotency[rq.userID][in.IdempotencyKey] = &idemRecord{RoleID: id, BodyDigest: digest}
	}
	s.touch(c)
	return http.StatusCreated, cardCreated{c.ID, c.RoleVisibility, c.ReviewStatus}, nil
}

func (s *Service) getCard(rq *request) (int, any, error) {
	c, err := s.cardOf(rq.userID, rq.query["roleId"], nil)
	if err != nil {
		return 0, nil, err
	}
	return 0, c.view(), nil
}

func (s *Service) setOpeningLines(rq *request) (int, any, error) {
	var in struct {
		RoleWelcome string    `json:"roleWelcome"`
		Alternates  *[]string `json:"alternates"`
		Prologue    *[]string `json:"prologue"`
	}
	if err := decodeBody(rq, &in); err != nil {
		return 0, nil, err
	}
	c, err := s.cardOf(rq.userID, rq.path["roleId"], nil)
	if err != nil {
		return 0, nil, err
	}
	c.RoleWelcome = in.RoleWelcome
	if in.Alternates != nil {
		c.WelcomeAlternates = orEmpty(*in.Alternates)
	}
	if in.Prologue != nil {
		c.Prologue = orEmpty(*in.Prologue)
	}
	s.touch(c)
	return 0, roleSaved{c.ID, true}, nil
}

func (s *Service) updateCardProfile(rq *request) (int, any, error) {
	var in struct {
		RoleName            *string   `json:"roleName"`
		RoleDesc            *string   `json:"roleDesc"`
		Tags                *[]string `json:"tags"`
		Language            *string   `json:"language"`
		ContentRatingIntent *string   `json:"contentRatingIntent"`
		AvatarImageID       *string   `json:"avatarImageId"`
		BackgroundImageID   *string   `json:"backgroundImageId"`
	}
	if err := decodeBody(rq, &in); err != nil {
		return 0, nil, err
	}
	c, err := s.cardOf(rq.userID, rq.path["roleId"], nil)
	if err != nil {
		return 0, nil, err
	}
	if err := s.checkImageRef(rq.userID, in.AvatarImageID, "avatarImageId", purposeAvatar); err != nil {
		return 0, nil, err
	}
	if err := s.checkImageRef(rq.userID, in.BackgroundImageID, "backgroundImageId", purposeBackground); err != nil {
		return 0, nil, err
	}
	set(&c.RoleName, in.RoleName)
	set(&c.RoleDesc, in.RoleDesc)
	if in.Tags != nil {
		c.Tags = orEmpty(*in.Tags)
	}
	set(&c.Language, in.Language)
	set(&c.ContentRatingIntent, in.ContentRatingIntent)
	set(&c.AvatarImageID, in.AvatarImageID)
	set(&c.BackgroundImageID, in.BackgroundImageID)
	s.touch(c)
	return 0, c.view(), nil
}

// checkImageRef accepts an absent or empty id, or the id of the user's image of the given purpose.
func (s *Service) checkImageRef(userID string, id *string, field, purpose string) error {
	if id == nil || *id == "" {
		return nil
	}
	im := s.st.Images[*id]
	if im == nil || im.Owner != userID || im.Purpose != purpose {
		return errField(field, "The "+field+" must name an image you uploaded with purpose "+purpose+".")
	}
	return nil
}

func (s *Service) writeCardDocument(rq *request) (int, any, error) {
	var in struct {
		Sections sectionsInput `json:"sections"`
	}
	if err := decodeBody(rq, &in); err != nil {
		return 0, nil, err
	}
	c, err := s.cardOf(rq.userID, rq.path["roleId"], nil)
	if err != nil {
		return 0, nil, err
	}
	in.Sections.applyTo(&c.Sections)
	s.touch(c)
	return 0, roleSaved{c.ID, true}, nil
}

func (s *Service) setCardVisibility(rq *request) (int, any, error) {
	var in struct {
		Visibility string `json:"visibility"`
	}
	if err := decodeBody(rq, &in); err != nil {
		return 0, nil, err
	}
	c, err := s.cardOf(rq.userID, rq.path["roleId"], nil)
	if err != nil {
		return 0, nil, err
	}
	if c.RoleVisibility != in.Visibility {
		c.RoleVisibility = in.Visibility
		s.touch(c)
	}
	return 0, struct {
		RoleID         string `json:"roleId"`
		RoleVisibility string `json:"roleVisibility"`
	}{c.ID, c.RoleVisibility}, nil
}

type issue struct {
	Field    string `json:"field"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
}

// issues is the validation report of a card: errors first, then warnings.
func (c *card) issues() []issue {
	out := []issue{}
	if c.RoleWelcome == "" {
		out = append(out, issue{"roleWelcome", "error", "The card needs a first message (roleWelcome)."})
	}
	if c.Sections.Description == "" {
		out = append(out, issue{"sections.description", "error", "The card needs a description section."})
	}
	if c.RoleDesc == "" {
		out = append(out, issue{"roleDesc", "warning", "The card has no short description (roleDesc)."})
	}
	if c.AvatarImageID == "" {
		out = append(out, issue{"avatarImageId", "warning", "The card has no avatar image."})
	}
	if len(c.Prologue) == 0 {
		out = append(out, issue{"prologue", "warning", "The card suggests no first lines for the player (prologue)."})
	}
	if len(c.Tags) == 0 {
		out = append(out, issue{"tags", "warning", "The card has no tags."})
	}
	return out
}

func errorsOf(list []issue) []issue {
	out := []issue{}
	for _, is := range list {
		if is.Severity == "error" {
			out = append(out, is)
		}
	}
	return out
}

func (s *Service) validateCard(rq *request) (int, any, error) {
	c, err := s.cardOf(rq.userID, rq.query["roleId"], nil)
	if err != nil {
		return 0, nil, err
	}
	list := c.issues()
	return 0, struct {
		RoleID string  `json:"roleId"`
		Ready  bool    `json:"ready"`
		Issues []issue `json:"issues"`
	}{c.ID, len(errorsOf(list)) == 0, list}, nil
}

func (s *Service) publishCard(rq *request) (int, any, error) {
	c, err := s.cardOf(rq.userID, rq.path["roleId"], nil)
	if err != nil {
		return 0, nil, err
	}
	if errs := errorsOf(c.issues()); len(errs) > 0 {
		return 0, nil, newError(codeValidationFailed, "The card cannot be submitted for review until its errors are fixed.",
			map[string]any{"issues": errs})
	}
	if c.ReviewStatus == reviewPending {
		return 0, nil, newError(codeConflict, "The card is already waiting for review.", nil)
	}
	c.ReviewStatus = reviewPending
	s.touch(c)
	return 0, struct {
		RoleID       string `json:"roleId"`
		ReviewStatus string `json:"reviewStatus"`
	}{c.ID, c.ReviewStatus}, nil
}
