package upstream

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits protect the card service, and the users of a shared server from one another: how
// many calls may be under way at once in all and per user, and how many one user may start per
// second. A call over a limit is not sent: it fails at once with an *Error "rate_limited"
// (retryable, with RetryAfter), which the tools show the model as a result it can act on.
type Limits struct {
	Concurrency     int           // calls under way at once, all users together; 0: no limit
	UserConcurrency int           // calls under way at once per user; 0: no limit
	UserRate        float64       // calls started per second per user; 0: no limit
	UserBurst       int           // calls a user may start at once above UserRate; 0: 2 x UserRate
	Wait            time.Duration // how long a call waits for a free slot before it fails; 0: 1 s
}

// WithLimits makes the client apply l to its calls; a user is told apart by the card service's
// user id (the identity in the call's context, or the user GET /me named for its token), and
// only until that is known by a digest of the access token.
func WithLimits(l Limits) Option { return func(o *options) { o.limits = &l } }

// limiter applies Limits.
type limiter struct {
	l     Limits
	total chan struct{} // nil: no total limit

	mu    sync.Mutex
	users map[string]*userLimit
}

type userLimit struct {
	slots   chan struct{} // nil: no per-user limit
	rate    *rate.Limiter // nil: no rate limit
	lastUse time.Time
}

func newLimiter(l Limits) *limiter {
	if l.Wait <= 0 {
		l.Wait = time.Second
	}
	if l.UserBurst <= 0 {
		l.UserBurst = max(1, int(math.Ceil(2*l.UserRate)))
	}
	lm := &limiter{l: l, users: map[string]*userLimit{}}
	if l.Concurrency > 0 {
		lm.total = make(chan struct{}, l.Concurrency)
	}
	return lm
}

// user returns the limits of the user named key (Client.limitKey), making them on first use
// (and forgetting those unused for ten minutes).
func (lm *limiter) user(key string) *userLimit {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	now := time.Now()
	u := lm.users[key]
	if u == nil {
		if len(lm.users) > 1000 {
			for k, v := range lm.users {
				if now.Sub(v.lastUse) > 10*time.Minute && len(v.slots) == 0 {
					delete(lm.users, k)
				}
			}
		}
		u = &userLimit{}
		if lm.l.UserConcurrency > 0 {
			u.slots = make(chan struct{}, lm.l.UserConcurrency)
		}
		if lm.l.UserRate > 0 {
			u.rate = rate.NewLimiter(rate.Limit(lm.l.UserRate), lm.l.UserBurst)
		}
		lm.users[key] = u
	}
	u.lastUse = now
	return u
}

// acquire takes what a call of op needs, or returns the *Error that refuses it; release gives
// it back.
func (lm *limiter) acquire(ctx context.Context, op string, user string) (release func(), err error) {
	u := lm.user(user)
	if u.rate != nil {
		r := u.rate.Reserve()
		if d := r.Delay(); d > 0 {
			r.Cancel()
			return nil, lm.refuse(op, d, fmt.Sprintf("cardwriter-mcp lets one user start at most %g card service calls per second; try again in %s.",
				lm.l.UserRate, roundUp(d)))
		}
	}
	var held []chan struct{}
	release = func() {
		for _, c := range held {
			<-c
		}
	}
	wait := time.NewTimer(lm.l.Wait)
	defer wait.Stop()
	for _, slots := range []struct {
		c   chan struct{}
		msg string
	}{
		{u.slots, fmt.Sprintf("cardwriter-mcp lets one user have at most %d card service calls under way; wait for one to finish.", lm.l.UserConcurrency)},
		{lm.total, "cardwriter-mcp has as many card service calls under way as it allows; try again in a moment."},
	} {
		if slots.c == nil {
			continue
		}
		select {
		case slots.c <- struct{}{}:
			held = append(held, slots.c)
		case <-wait.C:
			release()
			return nil, lm.refuse(op, time.Second, slots.msg)
		case <-ctx.Done():
			release()
			return nil, ctx.Err()
		}
	}
	return release, nil
}

func (lm *limiter) refuse(op string, after time.Duration, msg string) *Error {
	return &Error{Operation: op, Status: http.StatusTooManyRequests, Code: "rate_limited", Message: msg, Retryable: true, RetryAfter: after}
}

func roundUp(d time.Duration) time.Duration {
	return (d + time.Second - 1).Truncate(time.Second)
}
