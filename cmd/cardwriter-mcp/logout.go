package main

import (
	"context"
	"fmt"
	"io"

	"github.com/cardwriter/cardwriter-mcp/auth"
)

func runLogout(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	logger, store, apiHost, err := savedSignIn("logout", args, stdout, stderr)
	if err != nil {
		return helpOK(err)
	}
	res, err := auth.Logout(ctx, store, apiHost, nil, logger)
	if err != nil {
		return err
	}
	if len(res.Deleted) == 0 {
		fmt.Fprintf(stdout, "Not signed in to %s; nothing to do.\n", apiHost)
		return nil
	}
	if res.RevokeErr != nil {
		fmt.Fprintf(stderr, "The card service could not revoke the sign-in (%v); it may stay valid there until it expires.\n", res.RevokeErr)
		fmt.Fprintf(stdout, "Signed out of %s: the sign-in was deleted from %s.\n", apiHost, store.Path())
		return nil
	}
	fmt.Fprintf(stdout, "Signed out of %s: the sign-in was revoked and deleted from %s.\n", apiHost, store.Path())
	return nil
}
