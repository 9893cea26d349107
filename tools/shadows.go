package tools

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/quota"
	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Trial shadows (what this server last wrote under a trial's clientKey, revisions.Store.Shadow)
// are counted per user, and live no longer than their trial: a write the card service refuses
// leaves no shadow of its own, and delete_trial_card removes the trial's.

// DefaultTrialShadows is how many trial cards' shadows one user may have kept when
// Options.TrialShadowsPerUser is 0.
const DefaultTrialShadows = 20

// newShadowLedger returns the ledger of trial shadows per user in opts' store.
func newShadowLedger(opts Options, x *exports) *quota.Ledger {
	limit := opts.TrialShadowsPerUser
	if limit == 0 {
		limit = DefaultTrialShadows
	}
	return quota.New(x.kv, "trial shadows", int64(max(limit, 0)), "trial cards", "--trial-shadows-per-user",
		"Delete trial cards you no longer need with delete_trial_card, or reuse the clientKey of one.")
}

// shadowOwner names the user of a shadow in the ledger.
func shadowOwner(user revisions.User) string { return user.BaseURL + " " + user.ID }

// reserveShadow counts the shadow of clientKey for user before it is saved: a new one past the
// user's quota refuses the write before anything is sent (quota_exceeded).
func (c *Call) reserveShadow(ctx context.Context, user revisions.User, key string) error {
	keep := c.revs.d.revs.Retention().MaxAge
	var expires time.Time
	if keep > 0 {
		expires = time.Now().Add(keep)
	}
	_, err := c.revs.d.shadows.Reserve(ctx, shadowOwner(user), key, 1, expires)
	return err
}

// forgetShadowOnRefusal arranges that, when the card service refuses the write about to go out,
// the shadow just saved for a trial that did not exist before is removed (a refused upsert keeps
// nothing).
func (c *Call) forgetShadowOnRefusal(user revisions.User, key string) {
	c.revs.refused = func(ctx context.Context) { c.forgetShadow(ctx, user, key) }
}

// forgetShadow removes the shadow of clientKey for user and its place in the ledger; a failure
// is logged (the write it follows was decided).
func (c *Call) forgetShadow(ctx context.Context, user revisions.User, key string) {
	err := c.revs.d.revs.SaveShadow(ctx, user, key, nil)
	if err == nil {
		err = c.revs.d.shadows.Release(ctx, shadowOwner(user), key)
	}
	if err != nil {
		c.Log.LogAttrs(ctx, slog.LevelWarn, "forget a trial card's shadow", slog.String("err", err.Error()))
	}
}

// afterWrite runs, after the call's write, what depends on its outcome: on a refusal by the
// card service (an answer with an error: nothing was applied), the undo of what was kept for it.
func (c *Call) afterWrite(ctx context.Context, err error) {
	if c.revs == nil {
		return
	}
	var apiErr *upstream.Error
	if err != nil && errors.As(err, &apiErr) && c.revs.refused != nil {
		c.revs.refused(context.WithoutCancel(ctx))
	}
	c.revs.refused = nil
}

// forgetDeletedTrial removes the shadow of the trial delete_trial_card just deleted.
func (c *Call) forgetDeletedTrial(ctx context.Context, key string) {
	if c.revs == nil {
		return
	}
	user, err := c.revs.d.serviceUser(ctx)
	if err != nil {
		return
	}
	c.forgetShadow(context.WithoutCancel(ctx), user, key)
}
