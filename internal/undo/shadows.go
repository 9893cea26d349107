package undo

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Trial shadows (what this server last wrote under a trial's clientKey, revisions.Store.Shadow)
// are counted per user (Env.Shadows), and live no longer than their trial: a write the card
// service refuses leaves no shadow of its own, and a deleted trial's is removed.

// shadowOwner names the user of a shadow in the ledger.
func shadowOwner(user revisions.User) string { return user.BaseURL + " " + user.ID }

// reserveShadow counts the shadow of clientKey for user before it is saved: a new one past the
// user's quota refuses the write before anything is sent.
func (r *Run) reserveShadow(ctx context.Context, user revisions.User, key string) error {
	if r.Shadows == nil {
		return nil
	}
	var expires time.Time
	if keep := r.Store.Retention().MaxAge; keep > 0 {
		expires = time.Now().Add(keep)
	}
	_, err := r.Shadows.Reserve(ctx, shadowOwner(user), key, 1, expires)
	return err
}

// forgetShadow removes the shadow of clientKey for user and its place in the ledger; a failure
// is logged (the write it follows was decided).
func (r *Run) forgetShadow(ctx context.Context, user revisions.User, key string) {
	err := r.Store.SaveShadow(ctx, user, key, nil)
	if err == nil && r.Shadows != nil {
		err = r.Shadows.Release(ctx, shadowOwner(user), key)
	}
	if err != nil && r.Log != nil {
		r.Log.LogAttrs(ctx, slog.LevelWarn, "forget a trial card's shadow", slog.String("err", err.Error()))
	}
}

// AfterWrite runs, after the call's write, what depends on its outcome (err, the write's error):
// on a refusal by the card service (an answer with an error: nothing was applied), the undo of
// what was kept for it.
func (r *Run) AfterWrite(ctx context.Context, err error) {
	var apiErr *upstream.Error
	if err != nil && errors.As(err, &apiErr) && r.refused != nil {
		r.refused(context.WithoutCancel(ctx))
	}
	r.refused = nil
}

// ForgetTrial removes the shadow of the trial clientKey that a call just deleted.
func (r *Run) ForgetTrial(ctx context.Context, key string) {
	if r.Store == nil {
		return
	}
	user, err := r.Owner(ctx)
	if err != nil {
		return
	}
	r.forgetShadow(context.WithoutCancel(ctx), user, key)
}
