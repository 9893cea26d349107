package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/auth"
)

func runWhoami(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	logger, store, apiHost, err := savedSignIn("whoami", args, stdout, stderr)
	if err != nil {
		return helpOK(err)
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
	if _, err := io.WriteString(stdout, w.String()); err != nil {
		return err
	}
	if os.Getenv("CARDWRITER_TOKEN") != "" {
		fmt.Fprintln(stderr, "Note: CARDWRITER_TOKEN is set; `cardwriter-mcp stdio` uses it instead of this sign-in.")
	}
	return nil
}
