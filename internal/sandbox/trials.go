package sandbox

import (
	"net/http"
	"slices"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/jsontext"
)

// trialFields are the six card fields a trial summary digests, in the order changed lists them.
var trialFields = []string{"roleName", "roleDesc", "roleWelcome", "welcomeAlternates", "prologue", "sections"}

// trialCard is the card of a trial as last written; omitted fields hold "", [] or {}.
type trialCard struct {
	RoleName          string            `json:"roleName"`
	RoleDesc          string            `json:"roleDesc"`
	RoleWelcome       string            `json:"roleWelcome"`
	WelcomeAlternates []string          `json:"welcomeAlternates"`
	Prologue          []string          `json:"prologue"`
	Sections          map[string]string `json:"sections"`
}

func (c *trialCard) normalize() {
	c.WelcomeAlternates = orEmpty(c.WelcomeAlternates)
	c.Prologue = orEmpty(c.Prologue)
	if c.Sections == nil {
		c.Sections = map[string]string{}
	}
}

// digests returns the lowercase hex SHA-256 of each field's canonical JSON.
func (c *trialCard) digests() (map[string]string, error) {
	values := map[string]any{
		"roleName": c.RoleName, "roleDesc": c.RoleDesc, "roleWelcome": c.RoleWelcome,
		"welcomeAlternates": c.WelcomeAlternates, "prologue": c.Prologue, "sections": c.Sections,
	}
	return jsontext.Digests(values)
}

// trial is a stored trial card with the summary of its last upsert.
type trial struct {
	ClientKey   string            `json:"clientKey"`
	Owner       string            `json:"owner"`
	RoleID      string            `json:"roleId"`
	WorldbookID string            `json:"worldbookId"`
	Card        trialCard         `json:"card"`
	Entries     []*entry          `json:"entries"`
	ExpiresAt   time.Time         `json:"expiresAt"`
	Created     bool              `json:"created"`
	Digests     map[string]string `json:"digests"`
	Changed     []string          `json:"changed"`
	WBCreated   int               `json:"wbCreated"`
	WBDeleted   int               `json:"wbDeleted"`
}

type slots struct {
	Used int `json:"used"`
	Max  int `json:"max"`
}

type trialWorldbook struct {
	WorldbookID string `json:"worldbookId"`
	Entries     int    `json:"entries"`
	Created     int    `json:"created"`
	Deleted     int    `json:"deleted"`
}

type trialSummary struct {
	ClientKey string            `json:"clientKey"`
	RoleID    string            `json:"roleId"`
	Created   bool              `json:"created"`
	ExpiresAt string            `json:"expiresAt"`
	Slots     slots             `json:"slots"`
	Sections  map[string]string `json:"sections"`
	Changed   []string          `json:"changed"`
	Worldbook trialWorldbook    `json:"worldbook"`
}

func (tr *trial) summary(sl slots) trialSummary {
	return trialSummary{
		ClientKey: tr.ClientKey, RoleID: tr.RoleID, Created: tr.Created, ExpiresAt: rfc3339(tr.ExpiresAt),
		Slots: sl, Sections: tr.Digests, Changed: orEmpty(tr.Changed),
		Worldbook: trialWorldbook{tr.WorldbookID, len(tr.Entries), tr.WBCreated, tr.WBDeleted},
	}
}

// liveTrials returns the user's trials after purging the expired ones.
func (s *Service) liveTrials(userID string) map[string]*trial {
	m := s.st.Trials[userID]
	if m == nil {
		m = map[string]*trial{}
		s.st.Trials[userID] = m
	}
	now := s.now()
	for key, tr := range m {
		if !now.Before(tr.ExpiresAt) {
			delete(m, key)
			s.changed()
		}
	}
	return m
}

func (s *Service) slots(live map[string]*trial) slots {
	return slots{Used: len(live), Max: s.opts.TrialSlots}
}

func (s *Service) upsertTrialCard(rq *request) (int, any, error) {
	var in struct {
		Card      trialCard `json:"card"`
		Worldbook *struct {
			Entries []entryFields `json:"entries"`
		} `json:"worldbook"`
	}
	if err := decodeBody(rq, &in); err != nil {
		return 0, nil, err
	}
	key := rq.path["clientKey"]
	now := s.now()
	live := s.liveTrials(rq.userID)
	tr := live[key]
	creating := tr == nil
	if creating && len(live) >= s.opts.TrialSlots {
		sl := s.slots(live)
		return 0, nil, newError(codeTrialSlotsFull, "All trial slots are in use; delete a trial card or wait for one to expire.",
			map[string]any{"used": sl.Used, "max": sl.Max})
	}
	var entries []*entry
	if in.Worldbook != nil {
		entries = make([]*entry, 0, len(in.Worldbook.Entries))
		for i := range in.Worldbook.Entries {
			e, ok := newEntry(&in.Worldbook.Entries[i], formatNative, nextSortOrder(entries), now)
			if !ok {
				return 0, nil, errMatchOptions(i, formatNative)
			}
			entries = append(entries, e)
		}
	}
	in.Card.normalize()
	digests, err := in.Card.digests()
	if err != nil {
		return 0, nil, err
	}
	changed := []string{}
	if creating {
		tr = &trial{ClientKey: key, Owner: rq.userID, RoleID: newID("tr_"), WorldbookID: newID("wb_"), Entries: []*entry{}}
		changed = slices.Clone(trialFields)
	} else {
		for _, f := range trialFields {
			if digests[f] != tr.Digests[f] {
				changed = append(changed, f)
			}
		}
	}
	tr.WBCreated, tr.WBDeleted = 0, 0
	if entries != nil {
		tr.WBCreated, tr.WBDeleted = len(entries), len(tr.Entries)
		tr.Entries = entries
	}
	tr.Card, tr.Digests, tr.Changed, tr.Created = in.Card, digests, changed, creating
	tr.ExpiresAt = now.Add(s.opts.TrialTTL)
	live[key] = tr
	s.changed()
	status := http.StatusOK
	if creating {
		status = http.StatusCreated
	}
	return status, tr.summary(s.slots(live)), nil
}

func (s *Service) getTrialCard(rq *request) (int, any, error) {
	live := s.liveTrials(rq.userID)
	tr := live[rq.path["clientKey"]]
	if tr == nil {
		return 0, nil, errTrialNotFound()
	}
	return 0, tr.summary(s.slots(live)), nil
}

func (s *Service) listTrialCards(rq *request) (int, any, error) {
	live := s.liveTrials(rq.userID)
	sl := s.slots(live)
	keys := make([]string, 0, len(live))
	for k := range live {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	list := make([]trialSummary, len(keys))
	for i, k := range keys {
		list[i] = live[k].summary(sl)
	}
	ttlHours := int((s.opts.TrialTTL + time.Hour - 1) / time.Hour)
	return 0, struct {
		List     []trialSummary `json:"list"`
		Slots    slots          `json:"slots"`
		TTLHours int            `json:"ttlHours"`
	}{list, sl, max(ttlHours, 1)}, nil
}

func (s *Service) deleteTrialCard(rq *request) (int, any, error) {
	key := rq.path["clientKey"]
	live := s.liveTrials(rq.userID)
	if live[key] == nil {
		return 0, nil, errTrialNotFound()
	}
	delete(live, key)
	s.changed()
	return 0, struct {
		ClientKey string `json:"clientKey"`
		Removed   bool   `json:"removed"`
	}{key, true}, nil
}
