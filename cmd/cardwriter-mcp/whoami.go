package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

func runWhoami(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	logger, store, apiHost, err := savedSignIn("whoami", args, stdout, stderr)
	if err != nil {
		if errors.Is(err, errNoSavedHost) && os.Getenv("CARDWRITER_TOKEN") != "" {
			return errors.New("CARDWRITER_TOKEN is set: give --api-host URL (or CARDWRITER_API_HOST) to test it against the card service")
		}
		return helpOK(err)
	}
	if token := os.Getenv("CARDWRITER_TOKEN"); token != "" {
		return whoamiVariable(ctx, token, apiHost, logger, stdout)
	}
	me, src, err := whoamiCall(ctx, store, apiHost, logger)
	if errors.Is(err, auth.ErrNotSignedIn) {
		return fmt.Errorf("not signed in to %s: run `cardwriter-mcp login --api-host %s`", apiHost, apiHost)
	}
	if err != nil {
		return err
	}
	g, err := src.Grant(ctx)
	if err != nil {
		return err
	}
	w := &strings.Builder{}
	fmt.Fprintf(w, "Card service:  %s\n", strings.TrimSuffix(g.Resource, "/open/v1"))
	fmt.Fprintf(w, "User:          %s (%s)\n", me.Nickname, me.UserID)
	fmt.Fprintf(w, "Scopes:        %s\n", strings.Join(me.Scopes, " "))
	if g.Expiry.IsZero() {
		fmt.Fprintf(w, "Access token:  expiry not known\n")
	} else {
		fmt.Fprintf(w, "Access token:  expires %s (in %s)\n", g.Expiry.Local().Format(time.RFC3339), time.Until(g.Expiry).Round(time.Second))
	}
	if g.RefreshToken != "" {
		fmt.Fprintf(w, "Refresh:       yes, automatically\n")
	} else {
		fmt.Fprintf(w, "Refresh:       no refresh token; run login again when the access token expires\n")
	}
	fmt.Fprintf(w, "Signed in:     %s, client %s at %s\n", g.ObtainedAt.Local().Format(time.RFC3339), g.ClientID, g.Issuer)
	fmt.Fprintf(w, "Saved in:      %s\n", store.Path())
	_, err = io.WriteString(stdout, w.String())
	return err
}

// whoamiVariable tests CARDWRITER_TOKEN, which stdio and the other commands use instead of the
// saved sign-in: who it belongs to, or the service's refusal naming the variable.
func whoamiVariable(ctx context.Context, token, apiHost string, logger *slog.Logger, stdout io.Writer) error {
	client, err := upstream.New(apiHost, newVariableToken(token, apiHost, true), upstream.WithUserAgent(userAgent()), upstream.WithLogger(logger))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	me, err := client.GetMe(ctx)
	var apiErr *upstream.Error
	if errors.As(err, &apiErr) && apiErr.Code == "unauthorized" {
		return errors.New(apiErr.Message)
	}
	if err != nil {
		return unreachable(apiHost, err)
	}
	w := &strings.Builder{}
	fmt.Fprintf(w, "Card service:  %s\n", apiHost)
	fmt.Fprintf(w, "Token:         CARDWRITER_TOKEN (used instead of any saved sign-in)\n")
	fmt.Fprintf(w, "User:          %s (%s)\n", me.Nickname, me.UserID)
	fmt.Fprintf(w, "Scopes:        %s\n", strings.Join(me.Scopes, " "))
	if when := savedSignInDate(apiHost); when != "" {
		fmt.Fprintf(w, "Saved sign-in: of %s, unused while CARDWRITER_TOKEN is set\n", when)
	}
	_, err = io.WriteString(stdout, w.String())
	return err
}
