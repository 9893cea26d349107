package sessions

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"golang.org/x/time/rate"

	"github.com/cardwriter/cardwriter-mcp/internal/store"
)

// keyUserSessions + a user's key: the sessions the user opened that may still be open, as
// {session id or pending ticket: unix seconds after which the entry no longer counts}.
const keyUserSessions = "mcp:user-sessions:"

const (
	// userIndexTTL is how long a user's index of sessions lives after their last initialize.
	userIndexTTL = 24 * time.Hour
	// ticketTTL bounds how long an initialize under way holds a place in its user's count.
	ticketTTL    = time.Minute
	ticketPrefix = "pending:"
)

// Limits bound what one user may open: sessions at once, and initialize requests per second.
// A request over a limit is answered 429 with Retry-After and a JSON-RPC error that says which
// limit and what to do, before mcp-go sees it.
type Limits struct {
	// User returns the key of the user a request acts for (after authorization); "" exempts
	// the request (a server without authorization has no users to tell apart).
	User func(r *http.Request) string
	// MaxSessions is the most sessions one user may have open (0: no limit); a session
	// counts until it is ended (DELETE) or expires idle.
	MaxSessions int
	// InitializeRate is how many initialize requests one user may send per second, with bursts
	// of InitializeBurst (0: no limit).
	InitializeRate  float64
	InitializeBurst int
	// Refused, when set, is called with "user_sessions" or "user_initialize_rate" for each
	// request refused.
	Refused func(limit string)
}

// userLimits applies Limits.
type userLimits struct {
	Limits
	mu    sync.Mutex
	rates map[string]*userRate
}

type userRate struct {
	l       *rate.Limiter
	lastUse time.Time
}

// SetLimits makes the gate apply l to the initialize requests of each user.
func (s *Sessions) SetLimits(l Limits) {
	if l.InitializeBurst <= 0 {
		l.InitializeBurst = max(1, int(math.Ceil(10*l.InitializeRate)))
	}
	s.limits = &userLimits{Limits: l, rates: map[string]*userRate{}}
}

// refusal is an initialize refused by a limit.
type refusal struct {
	limit      string
	retryAfter time.Duration
	message    string
}

// allowRate takes one initialize from the user's bucket, or says when to try again.
func (u *userLimits) allowRate(user string) *refusal {
	if u.InitializeRate <= 0 {
		return nil
	}
	now := time.Now()
	u.mu.Lock()
	r := u.rates[user]
	if r == nil {
		if len(u.rates) > 1000 {
			for k, v := range u.rates {
				if now.Sub(v.lastUse) > 10*time.Minute {
					delete(u.rates, k)
				}
			}
		}
		r = &userRate{l: rate.NewLimiter(rate.Limit(u.InitializeRate), u.InitializeBurst)}
		u.rates[user] = r
	}
	r.lastUse = now
	res := r.l.ReserveN(now, 1)
	d := res.DelayFrom(now)
	if d > 0 {
		res.CancelAt(now)
	}
	u.mu.Unlock()
	if d <= 0 {
		return nil
	}
	wait := (d + time.Second - 1).Truncate(time.Second)
	return &refusal{limit: "user_initialize_rate", retryAfter: wait, message: fmt.Sprintf(
		"Too many new sessions: this server lets one user start at most %g per second, in bursts of %d (--user-initialize-rate); try again in %s, or reuse an open session.",
		u.InitializeRate, u.InitializeBurst, wait)}
}

// admit checks an initialize of user against the limits; on success, when sessions are
// counted, it returns the ticket that holds the new session's place until admitted replaces it.
func (s *Sessions) admit(ctx context.Context, user string) (ticket string, refused *refusal, err error) {
	u := s.limits
	if refused := u.allowRate(user); refused != nil {
		return "", refused, nil
	}
	if u.MaxSessions <= 0 {
		return "", nil, nil
	}
	key := keyUserSessions + user
	now := time.Now()
	// The sessions of the index that ended, found before the update (reads of other keys do
	// not belong inside it): at most MaxSessions reads, the index holding no more.
	gone := map[string]bool{}
	if raw, err := s.kv.Get(ctx, key); err == nil {
		for id, until := range decodeIndex(raw) {
			if until < now.Unix() {
				gone[id] = true
				continue
			}
			if len(id) > len(ticketPrefix) && id[:len(ticketPrefix)] == ticketPrefix {
				continue
			}
			rec, err := s.load(ctx, id)
			switch {
			case errors.Is(err, store.ErrNotFound) || (err == nil && rec.Terminated):
				gone[id] = true
			case err != nil:
				return "", nil, err
			}
		}
	} else if !errors.Is(err, store.ErrNotFound) {
		return "", nil, err
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	ticket = ticketPrefix + hex.EncodeToString(b[:])
	errFull := errors.New("full")
	_, err = s.kv.Update(ctx, key, userIndexTTL, func(old []byte) ([]byte, error) {
		idx := decodeIndex(old)
		for id, until := range idx {
			if gone[id] || until < now.Unix() {
				delete(idx, id)
			}
		}
		if len(idx) >= u.MaxSessions {
			return nil, errFull
		}
		idx[ticket] = now.Add(ticketTTL).Unix()
		return json.Marshal(idx)
	})
	if errors.Is(err, errFull) {
		return "", &refusal{limit: "user_sessions", retryAfter: time.Minute, message: fmt.Sprintf(
			"Too many open sessions: this server lets one user have at most %d MCP sessions open (--user-sessions). End the sessions no longer in use (the client's DELETE, or closing it), or wait until an idle one expires (after %s without a request).",
			u.MaxSessions, s.idle)}, nil
	}
	if err != nil {
		return "", nil, err
	}
	return ticket, nil, nil
}

// admitted replaces the ticket of an initialize with the session it opened (none: the ticket
// is dropped).
func (s *Sessions) admitted(ctx context.Context, user, ticket, sid string) {
	if ticket == "" {
		return
	}
	now := time.Now()
	_, err := s.kv.Update(ctx, keyUserSessions+user, userIndexTTL, func(old []byte) ([]byte, error) {
		if old == nil {
			return nil, store.ErrNotFound
		}
		idx := decodeIndex(old)
		delete(idx, ticket)
		if sid != "" {
			// Counted until the session record says it ended, or at the latest until the
			// index itself would expire.
			idx[sid] = now.Add(userIndexTTL).Unix()
		}
		return json.Marshal(idx)
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("a new session could not be counted for its user", "err", err)
	}
}

func decodeIndex(raw []byte) map[string]int64 {
	idx := map[string]int64{}
	if raw != nil {
		_ = json.Unmarshal(raw, &idx)
	}
	return idx
}

// limitInitialize applies the limits to a request that opens a session (an initialize without
// a session id, before 2026-07-28): it reports whether the request was refused (answered
// here), and else returns what to call once the response is written.
func (s *Sessions) limitInitialize(w http.ResponseWriter, r *http.Request) (refused bool, done func(sid string)) {
	none := func(string) {}
	if s.limits == nil || r.Method != http.MethodPost || r.Header.Get(server.HeaderKeySessionID) != "" || modern(r) {
		return false, none
	}
	user := s.limits.User(r)
	if user == "" {
		return false, none
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil || !bytes.Contains(body, []byte(`initialize`)) {
		return false, none
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(body, &m) != nil || m.Method != string(mcp.MethodInitialize) {
		return false, none
	}
	ticket, ref, err := s.admit(r.Context(), user)
	if err != nil {
		s.log.Error("mcp request refused: the session store failed", "err", err)
		unavailable(w)
		return true, none
	}
	if ref != nil {
		if s.limits.Refused != nil {
			s.limits.Refused(ref.limit)
		}
		s.log.Warn("a new session refused by a limit", "limit", ref.limit)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", strconv.Itoa(int(ref.retryAfter.Seconds())))
		w.WriteHeader(http.StatusTooManyRequests)
		id := m.ID
		if len(id) == 0 {
			id = json.RawMessage("null")
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": id,
			"error": map[string]any{"code": -32000, "message": ref.message}})
		return true, none
	}
	return false, func(sid string) { s.admitted(context.WithoutCancel(r.Context()), user, ticket, sid) }
}
