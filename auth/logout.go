package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// LogoutResult says what Logout did.
type LogoutResult struct {
	Deleted   []Grant // the grants removed from the store (print them through LogValue only)
	RevokeErr error   // why revocation failed, nil when every token was revoked
}

// Logout deletes the saved grants for apiHost's open API from the store, then asks the
// authorization server to revoke their tokens (RFC 7009: the refresh token, which ends the
// grant, then the access token). Revocation is best effort: its failure is reported in the
// result, and the grants are deleted either way. The client registration is kept.
func Logout(ctx context.Context, store *Store, apiHost string, hc *http.Client, log *slog.Logger) (*LogoutResult, error) {
	resource, err := Resource(apiHost)
	if err != nil {
		return nil, err
	}
	if hc == nil {
		hc = NewHTTPClient()
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var gone []Grant
	if err := store.Update(ctx, func(d *Data) error {
		gone = d.DeleteGrants(resource)
		return nil
	}); err != nil {
		return nil, err
	}
	res := &LogoutResult{Deleted: gone}
	var errs []error
	for _, g := range gone {
		for _, t := range []struct {
			hint  string
			token upstream.Token
		}{{"refresh_token", g.RefreshToken}, {"access_token", g.AccessToken}} {
			if t.token == "" {
				continue
			}
			if err := revoke(ctx, hc, g.RevocationEndpoint, g.ClientID, t.token, t.hint); err != nil {
				errs = append(errs, fmt.Errorf("revoke the %s: %w", hintName(t.hint), err))
				log.Warn("token revocation failed", "issuer", g.Issuer, "token", hintName(t.hint), "err", err)
				continue
			}
			log.Info("token revoked", "issuer", g.Issuer, "token", hintName(t.hint))
		}
	}
	res.RevokeErr = errors.Join(errs...)
	return res, nil
}

func hintName(hint string) string {
	if hint == "refresh_token" {
		return "refresh token"
	}
	return "access token"
}
