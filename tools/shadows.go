package tools

import (
	"context"

	"github.com/cardwriter/cardwriter-mcp/internal/quota"
)

// DefaultTrialShadows is how many trial cards' shadows one user may have kept when
// Options.TrialShadowsPerUser is 0.
const DefaultTrialShadows = 20

// newShadowLedger returns the ledger of trial shadows per user in opts' store (undo.Env.Shadows).
func newShadowLedger(opts Options, x *exports) *quota.Ledger {
	limit := opts.TrialShadowsPerUser
	if limit == 0 {
		limit = DefaultTrialShadows
	}
	return quota.New(x.kv, "trial shadows", int64(max(limit, 0)), "trial cards", "--trial-shadows-per-user",
		"Delete trial cards you no longer need with delete_trial_card, or reuse the clientKey of one.")
}

// afterWrite runs, after the call's write, what depends on its outcome (undo.Run.AfterWrite).
func (c *Call) afterWrite(ctx context.Context, err error) {
	if c.revs != nil {
		c.revs.AfterWrite(ctx, err)
	}
}

// forgetDeletedTrial removes the shadow of the trial delete_trial_card just deleted.
func (c *Call) forgetDeletedTrial(ctx context.Context, key string) {
	if c.revs != nil {
		c.revs.ForgetTrial(ctx, key)
	}
}
