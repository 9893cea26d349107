package tools

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// Confirmation of what cannot be undone (publish_card, delete_trial_card).
//
// The operator's policy (--confirm) decides how the author is asked:
//   - elicit (the default): with a form (MCP elicitation, form mode) when the client declared
//     form mode; a client that declared no elicitation at all is not asked (its own approval of
//     tool calls stands, as in Gemini CLI); a client that declared only URL mode, or a host that
//     closed the form faster than a person can read it (headless Claude Code answers cancel
//     within milliseconds, unseen), is asked in the conversation instead.
//   - conversation: the call returns a one-time confirmationToken instead of acting; the model
//     asks the author and, once the author said yes, calls again with the same arguments and
//     the token.
//   - never: nobody is asked.
//
// A token is an HMAC under the server's key over user, tool and arguments, with an expiry; it
// is spent once, recorded in the server's store so that replicas agree. A 2026-07-28 answer
// (multi round-trip) counts only with the request state the server sent with its question,
// signed the same way and spent once: a client cannot answer before it is asked.

// ConfirmPolicy is how the author is asked before what cannot be undone (--confirm).
type ConfirmPolicy string

// The confirmation policies.
const (
	ConfirmElicit       ConfirmPolicy = "elicit"
	ConfirmConversation ConfirmPolicy = "conversation"
	ConfirmNever        ConfirmPolicy = "never"
)

// DefaultConfirmPolicy is the policy when none is given.
const DefaultConfirmPolicy = ConfirmElicit

// ParseConfirmPolicy returns the policy s names ("" is the default).
func ParseConfirmPolicy(s string) (ConfirmPolicy, error) {
	switch p := ConfirmPolicy(strings.TrimSpace(s)); p {
	case "":
		return DefaultConfirmPolicy, nil
	case ConfirmElicit, ConfirmConversation, ConfirmNever:
		return p, nil
	}
	return "", fmt.Errorf("--confirm %q: give elicit, conversation or never", s)
}

// confirmInputID names the confirmation among a modern request's input responses.
const confirmInputID = "confirm"

// confirmTimeout bounds how long a client may take to answer a confirmation, and how long a
// 2026-07-28 question's request state stays good.
const confirmTimeout = 10 * time.Minute

// confirmTokenTTL is how long a confirmationToken stays good: time for the author to answer.
const confirmTokenTTL = 30 * time.Minute

// unseenCancel is the quickest a person can read a question and close it: a cancel sooner
// than this was the host's, without showing it (headless Claude Code answers in ~10 ms).
const unseenCancel = time.Second

// The outcomes of a call not confirmed: nothing was done.
const (
	codeDeclined             = "declined"              // the author declined, cancelled or answered no
	codeConfirmationRequired = "confirmation_required" // ask the author, then call again with confirmationToken
	codeConfirmationInvalid  = "confirmation_invalid"  // the token is not good for this call
)

// confirmSpentPrefix starts the store keys of spent tokens and request states.
const confirmSpentPrefix = "confirm:spent:"

// tokenPrefix starts a confirmationToken; statePrefix a 2026-07-28 request state.
const (
	tokenPrefix = "ct1_"
	statePrefix = "cs1_"
)

// confirmer asks for confirmations under a policy and checks their tokens.
type confirmer struct {
	policy ConfirmPolicy
	kv     store.KV // the spent tokens
	keys   *signer
	now    func() time.Time
}

// newConfirmer returns the confirmer of a server with opts, keeping spent tokens in kv.
func newConfirmer(opts Options, kv store.KV, keys *signer) *confirmer {
	c := &confirmer{policy: opts.Confirm, kv: kv, keys: keys, now: opts.now}
	if c.policy == "" {
		c.policy = DefaultConfirmPolicy
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c
}

// binding is what a token or request state is good for: who, which tool, which arguments
// (those sent to the card service and the server's own, such as ifVersion).
func binding(ctx context.Context, c *Call) []byte {
	id := c.Client.Identity(ctx)
	h := sha256.New()
	for _, part := range []string{id.UserID, id.GrantID, c.Tool.Name} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	for _, k := range slices.Sorted(maps.Keys(c.Params)) {
		h.Write([]byte(k + "=" + c.Params[k]))
		h.Write([]byte{0})
	}
	h.Write(compactBytes(c.Body))
	h.Write([]byte{0})
	var extra map[string]any // the server's own arguments (ifVersion), but the token
	if json.Unmarshal(c.Extra, &extra) == nil {
		delete(extra, "confirmationToken")
		raw, _ := json.Marshal(extra) // decoded JSON: cannot fail; map keys sorted
		h.Write(raw)
	}
	return h.Sum(nil)
}

// sealLen is the length of a token's body: nonce (9 bytes), expiry (Unix milliseconds, 6
// bytes), MAC (16 bytes).
const sealLen = 9 + 6 + 16

// seal returns a one-time token of kind (tokenPrefix or statePrefix) bound to the call, good
// until exp.
func (cf *confirmer) seal(ctx context.Context, c *Call, kind string, exp time.Time) (string, error) {
	key, err := cf.keys.secret(ctx)
	if err != nil {
		return "", err
	}
	buf := make([]byte, sealLen)
	if _, err := rand.Read(buf[:9]); err != nil {
		return "", err
	}
	var e [8]byte
	binary.BigEndian.PutUint64(e[:], uint64(exp.UnixMilli()))
	copy(buf[9:15], e[2:])
	copy(buf[15:], sealMAC(key, kind, buf[:15], binding(ctx, c)))
	return kind + base64.RawURLEncoding.EncodeToString(buf), nil
}

func sealMAC(key []byte, kind string, head, bound []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(kind))
	m.Write(head)
	m.Write(bound)
	return m.Sum(nil)[:16]
}

// errBadSeal is why a token or request state does not count; one answer for every reason
// but expiry, so that a guess learns nothing.
var errBadSeal = errors.New("not one this server issued for this user, tool and arguments")

// errSpent is the error of a token or request state already used.
var errSpent = errors.New("already used")

// errExpired is the error of a token or request state past its time.
var errExpired = errors.New("expired")

// open checks a token of kind against the call, spends it (once, across replicas) and returns
// its expiry.
func (cf *confirmer) open(ctx context.Context, c *Call, kind, token string) (time.Time, error) {
	buf, exp, ok := parseSeal(kind, token)
	if !ok {
		return time.Time{}, errBadSeal
	}
	key, err := cf.keys.secret(ctx)
	if err != nil {
		return time.Time{}, err
	}
	if !hmac.Equal(buf[15:], sealMAC(key, kind, buf[:15], binding(ctx, c))) {
		return time.Time{}, errBadSeal
	}
	ttl := exp.Sub(cf.now())
	if ttl <= 0 {
		return exp, errExpired
	}
	fresh, err := cf.kv.Create(ctx, confirmSpentPrefix+hex.EncodeToString(buf[:9]), []byte{1}, ttl+time.Minute)
	if err != nil {
		return exp, fmt.Errorf("record the confirmation as used: %w", err)
	}
	if !fresh {
		return exp, errSpent
	}
	return exp, nil
}

// parseSeal reads a token of kind as seal made it: its bytes (nonce, expiry, MAC) and expiry;
// ok is false for anything else. It checks no MAC.
func parseSeal(kind, token string) (buf []byte, exp time.Time, ok bool) {
	rest, ok := strings.CutPrefix(token, kind)
	if !ok || len(rest) > 2*sealLen {
		return nil, time.Time{}, false
	}
	buf, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil || len(buf) != sealLen {
		return nil, time.Time{}, false
	}
	var e [8]byte
	copy(e[2:], buf[9:15])
	return buf, time.UnixMilli(int64(binary.BigEndian.Uint64(e[:]))), true
}

// confirmArgs are the arguments tools.json's extensions give a tool that confirms.
type confirmArgs struct {
	ConfirmationToken string `json:"confirmationToken"`
}

// confirm asks the author, as the policy says, whether to do what cannot be undone; action is
// the question's title and message says what will happen. It returns nil to go ahead, a
// *needInput for a 2026-07-28 question, or a *Failure saying why nothing was done and what to do.
func confirm(ctx context.Context, c *Call, action, message string) error {
	cf := c.confirm
	if cf == nil || cf.policy == ConfirmNever {
		return nil
	}
	var args confirmArgs
	if len(c.Extra) > 0 {
		if err := json.Unmarshal(c.Extra, &args); err != nil {
			return fmt.Errorf("read the confirmation arguments: %w", err)
		}
	}
	if args.ConfirmationToken != "" {
		return cf.checkToken(ctx, c, args.ConfirmationToken, action)
	}
	if cf.policy == ConfirmConversation {
		return cf.askInConversation(ctx, c, action, "")
	}
	caps, modern := clientElicitation(ctx)
	switch {
	case caps == nil:
		return nil // the client cannot ask; its own approval of tool calls stands
	case caps.Form == nil && caps.URL != nil:
		return cf.askInConversation(ctx, c, action, "This client can show no confirmation form (it declared only URL-mode elicitation).")
	}
	params := mcp.ElicitationParams{Mode: "form", Message: message, RequestedSchema: confirmSchema(action)}
	var res *mcp.ElicitationResult
	var asked time.Time
	if modern {
		var err error
		if res, asked, err = cf.modernAnswer(ctx, c); err != nil {
			return err
		}
		if res == nil {
			state, err := cf.seal(ctx, c, statePrefix, cf.now().Add(confirmTimeout))
			if err != nil {
				return err
			}
			return &needInput{result: server.NewInputRequestBuilder(state).Elicit(confirmInputID, params).ToolResult()}
		}
	} else {
		srv := server.ServerFromContext(ctx)
		if srv == nil {
			return nil
		}
		ectx, cancel := context.WithTimeout(ctx, confirmTimeout)
		defer cancel()
		asked = cf.now()
		var err error
		res, err = srv.RequestElicitation(ectx, mcp.ElicitationRequest{Params: params})
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			c.Log.LogAttrs(ctx, slog.LevelInfo, "confirmation not obtained", slog.String("tool", c.Tool.Name), slog.String("err", err.Error()))
			if ectx.Err() == nil {
				// The host answered with an error: it showed nothing.
				return cf.askInConversation(ctx, c, action, "The host could not show the confirmation (it answered the question with an error), so the author was not asked.")
			}
			res = nil // no answer in time
		}
	}
	if res != nil && res.Action == mcp.ElicitationResponseActionAccept {
		if content, ok := res.Content.(map[string]any); ok && content["confirm"] == true {
			return nil
		}
	}
	if took := cf.now().Sub(asked); res != nil && res.Action == mcp.ElicitationResponseActionCancel && took < unseenCancel {
		return cf.askInConversation(ctx, c, action, fmt.Sprintf(
			"The host closed the confirmation %d ms after it was sent, sooner than anyone can read it: it was not shown (a headless host, such as claude -p, does this), so the author did not cancel. The operator can run the server with --confirm=conversation to skip the form in this host.", took.Milliseconds()))
	}
	answer := "did not confirm it"
	if res != nil {
		switch res.Action {
		case mcp.ElicitationResponseActionDecline:
			answer = "declined"
		case mcp.ElicitationResponseActionCancel:
			answer = "cancelled the question"
		}
	}
	return &Failure{Code: codeDeclined, Detail: map[string]any{"answer": answer},
		Message: fmt.Sprintf("Nothing was done: the user %s (%s). Ask the user before trying again.", answer, action)}
}

// clientElicitation returns the elicitation modes the client declared (nil: none; an empty
// declaration is form mode, as the 2025-11-25 revision reads it) and whether it speaks
// 2026-07-28.
func clientElicitation(ctx context.Context) (*mcp.ElicitationCapability, bool) {
	var caps *mcp.ElicitationCapability
	modern := false
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		modern = true
		if info.ClientCapabilities != nil {
			caps = info.ClientCapabilities.Elicitation
		}
	} else if session, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
		caps = session.GetClientCapabilities().Elicitation
	}
	if caps != nil && caps.Form == nil && caps.URL == nil {
		caps = &mcp.ElicitationCapability{Form: &struct{}{}}
	}
	return caps, modern
}

// modernAnswer returns the answer a 2026-07-28 client sent to the server's question and when
// the question was asked; nil when there is none that counts (no answer, or an answer without
// the request state the server sent, or with one already used): the question is asked again.
func (cf *confirmer) modernAnswer(ctx context.Context, c *Call) (*mcp.ElicitationResult, time.Time, error) {
	res := server.ElicitationResponse(c.Request.Params.InputResponses, confirmInputID)
	if _, answered := c.Request.Params.InputResponses[confirmInputID]; !answered {
		return nil, time.Time{}, nil
	}
	exp, err := cf.open(ctx, c, statePrefix, c.Request.Params.RequestState)
	switch {
	case errors.Is(err, errBadSeal) || errors.Is(err, errSpent) || errors.Is(err, errExpired):
		c.Log.LogAttrs(ctx, slog.LevelWarn, "confirmation answer without a request state of ours; asking again", slog.String("tool", c.Tool.Name), slog.String("reason", err.Error()))
		return nil, time.Time{}, nil
	case err != nil:
		return nil, time.Time{}, err
	}
	if res == nil {
		res = &mcp.ElicitationResult{} // answered, but not with an elicitation result: not a yes
	}
	return res, exp.Add(-confirmTimeout), nil
}

// askInConversation is the Failure that asks the model to ask the author: a one-time
// confirmationToken, and why (why, when the policy is not conversation).
func (cf *confirmer) askInConversation(ctx context.Context, c *Call, action, why string) error {
	exp := cf.now().Add(confirmTokenTTL).UTC().Truncate(time.Second)
	token, err := cf.seal(ctx, c, tokenPrefix, exp)
	if err != nil {
		return err
	}
	msg := fmt.Sprintf("Nothing was done yet: ask the author to confirm (%s). Only once they say yes, call %s again with the same arguments and confirmationToken %q (good once, until %s).",
		action, c.Tool.Name, token, exp.Format(time.RFC3339))
	if why != "" {
		msg = why + " " + msg
	}
	return &Failure{Code: codeConfirmationRequired, Message: msg,
		Detail: map[string]any{"confirmationToken": token, "expiresAt": exp.Format(time.RFC3339)}}
}

// checkToken lets a call with a good confirmationToken go ahead, and refuses any other.
func (cf *confirmer) checkToken(ctx context.Context, c *Call, token, action string) error {
	_, err := cf.open(ctx, c, tokenPrefix, token)
	var why string
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errBadSeal):
		why = "is " + err.Error() + " (the arguments must be exactly the ones it was given for)"
	case errors.Is(err, errSpent), errors.Is(err, errExpired):
		why = "was " + err.Error()
		if errors.Is(err, errExpired) {
			why = "has expired"
		}
	default:
		return err
	}
	return &Failure{Code: codeConfirmationInvalid, Detail: map[string]any{"reason": why},
		Message: fmt.Sprintf("Nothing was done: the confirmationToken %s. Call %s without it to get a new one, and ask the author again (%s).", why, c.Tool.Name, action)}
}

// confirmSchema is the form a confirmation shows: one yes/no field.
func confirmSchema(action string) map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"confirm": map[string]any{"type": "boolean", "title": action, "description": "Yes to go ahead."},
		},
		"required": []any{"confirm"},
	}
}
