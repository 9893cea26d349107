// Package cpubudget bounds the time a call may spend on work whose cost its caller chooses (a
// regular expression in a worldbook key): per call, and per user over a sliding minute, so one
// signed-in user cannot take the server's cores from the others.
package cpubudget

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Defaults of the budgets.
const (
	DefaultPerCall = 2 * time.Second
	DefaultPerUser = 10 * time.Second // a minute's worth
)

// window is the time over which a user's budget refills in full.
const window = time.Minute

// maxUsers bounds the users a Limiter remembers; past it, users whose budget is full again are
// forgotten (a full budget is what a new user starts with).
const maxUsers = 10_000

// Limiter hands out per-call budgets drawn from per-user ones.
type Limiter struct {
	perCall, perUser time.Duration
	now              func() time.Time

	mu    sync.Mutex
	users map[string]*bucket
}

// bucket is a user's budget: level, refilled at perUser a minute up to perUser.
type bucket struct {
	level time.Duration
	at    time.Time
}

// New returns a Limiter giving each call perCall and each user perUser a minute; 0 means the
// default, a negative value no limit.
func New(perCall, perUser time.Duration) *Limiter {
	if perCall == 0 {
		perCall = DefaultPerCall
	}
	if perUser == 0 {
		perUser = DefaultPerUser
	}
	return &Limiter{perCall: perCall, perUser: perUser, now: time.Now, users: map[string]*bucket{}}
}

// ExceededError is the error of a call whose budget is spent: retryable, it names the budget.
type ExceededError struct {
	Budget     string        // "per call" or "per user"
	Limit      time.Duration // the budget
	Flag       string        // the flag that sets it
	RetryAfter time.Duration // when the user's budget has refilled enough to try again; 0 per call
}

func (e *ExceededError) Error() string {
	return fmt.Sprintf("the %s budget of matching time (%s, %s) is spent", e.Budget, e.Limit, e.Flag)
}

// Flags naming the budgets in errors.
const (
	FlagPerCall = "--match-budget"
	FlagPerUser = "--match-user-budget"
)

// Call is one call's budget; it is not safe for concurrent use.
type Call struct {
	ctx  context.Context
	l    *Limiter
	user string
	used time.Duration
}

// Call returns the budget of a call for user ("" shares one budget among calls with no user),
// ended when ctx is. A nil Limiter gives a Call bounded only by ctx.
func (l *Limiter) Call(ctx context.Context, user string) *Call {
	return &Call{ctx: ctx, l: l, user: user}
}

// Allow returns how long the next piece of work may run, or why none may: the call's context
// ended, or a budget is spent.
func (c *Call) Allow() (time.Duration, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	if c.l == nil {
		return time.Duration(1<<63 - 1), nil
	}
	left := time.Duration(1<<63 - 1)
	if c.l.perCall > 0 {
		if left = c.l.perCall - c.used; left <= 0 {
			return 0, &ExceededError{Budget: "per call", Limit: c.l.perCall, Flag: FlagPerCall}
		}
	}
	if c.l.perUser > 0 {
		c.l.mu.Lock()
		b := c.l.bucketLocked(c.user)
		level := b.level
		c.l.mu.Unlock()
		if level <= 0 {
			// Refilled at perUser per window: the time until it is back to a tenth of it.
			wait := time.Duration(float64(c.l.perUser/10-level) / float64(c.l.perUser) * float64(window))
			return 0, &ExceededError{Budget: "per user", Limit: c.l.perUser, Flag: FlagPerUser, RetryAfter: wait.Round(time.Second)}
		}
		left = min(left, level)
	}
	return left, nil
}

// Spend records d of work done.
func (c *Call) Spend(d time.Duration) {
	c.used += d
	if c.l == nil || c.l.perUser <= 0 {
		return
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.l.bucketLocked(c.user).level -= d
}

// Used returns the work done in the call so far.
func (c *Call) Used() time.Duration { return c.used }

// bucketLocked returns user's bucket refilled up to now, made on first use; l.mu is held.
func (l *Limiter) bucketLocked(user string) *bucket {
	now := l.now()
	b, ok := l.users[user]
	if !ok {
		if len(l.users) >= maxUsers {
			l.forgetFullLocked(now)
		}
		b = &bucket{level: l.perUser, at: now}
		l.users[user] = b
		return b
	}
	if el := now.Sub(b.at); el > 0 {
		b.level = min(l.perUser, b.level+time.Duration(float64(el)/float64(window)*float64(l.perUser)))
		b.at = now
	}
	return b
}

// forgetFullLocked drops the users whose budget has refilled by now; l.mu is held.
func (l *Limiter) forgetFullLocked(now time.Time) {
	for u, b := range l.users {
		if b.level+time.Duration(float64(now.Sub(b.at))/float64(window)*float64(l.perUser)) >= l.perUser {
			delete(l.users, u)
		}
	}
}
