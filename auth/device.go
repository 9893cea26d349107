package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/oauth2"
)

// loginDevice signs in with the device authorization grant (RFC 8628): it asks for a device
// code, prints where to enter the user code, and polls the token endpoint until the person has
// allowed access on whatever device they used, or the time is up.
func loginDevice(ctx context.Context, opts LoginOptions, md *Metadata, reg *Registration, resource string) (*Grant, error) {
	cfg := oauthConfig(md, reg.ClientID, "")
	cfg.Endpoint.DeviceAuthURL = md.DeviceAuthorizationEndpoint
	hctx := context.WithValue(ctx, oauth2.HTTPClient, opts.HTTPClient)
	res := oauth2.SetAuthURLParam("resource", resource)
	da, err := cfg.DeviceAuth(hctx, res)
	if err != nil {
		return nil, fmt.Errorf("auth: device sign-in at %s: %w", md.DeviceAuthorizationEndpoint, oauth2Error(err))
	}
	if da.DeviceCode == "" || da.UserCode == "" || da.VerificationURI == "" {
		return nil, errors.New("auth: the device authorization answer lacks device_code, user_code or verification_uri")
	}
	fmt.Fprintf(opts.Out, "To sign in to %s, open this address on any device (a phone, another computer):\n\n  %s\n\nand enter the code\n\n  %s\n\n", apiHostOf(resource), Printable(da.VerificationURI, 300), Printable(da.UserCode, 40))
	if da.VerificationURIComplete != "" {
		fmt.Fprintf(opts.Out, "(or open %s, which fills the code in)\n", Printable(da.VerificationURIComplete, 400))
	}
	wait := opts.Timeout
	if !da.Expiry.IsZero() {
		wait = min(wait, time.Until(da.Expiry))
	}
	fmt.Fprintf(opts.Out, "Waiting up to %s for the sign-in to finish there...\n", wait.Round(time.Second))
	opts.Logger.Info("waiting for the device sign-in", "verification_uri", da.VerificationURI, "interval", da.Interval, "timeout", wait)
	wctx, cancel := context.WithTimeout(hctx, wait)
	defer cancel()
	now := opts.Now()
	tok, err := cfg.DeviceAccessToken(wctx, da, res)
	switch {
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil && wctx.Err() != nil:
		return nil, fmt.Errorf("auth: the sign-in was not finished within %s; run login again", wait.Round(time.Second))
	case err != nil:
		var oe *OAuthError
		if e := oauth2Error(err); errors.As(e, &oe) && oe.Code == "access_denied" {
			return nil, errors.New("auth: access was denied on the sign-in page; nothing was saved")
		} else {
			err = e
		}
		return nil, fmt.Errorf("auth: device sign-in: %w", err)
	case tok.AccessToken == "":
		return nil, errors.New("the token endpoint answered without an access_token")
	case !strings.EqualFold(tok.Type(), "Bearer"):
		return nil, fmt.Errorf("the token endpoint issued a %q token; cardwriter-mcp needs a bearer token", Printable(tok.Type(), 32))
	}
	g, err := saveGrant(ctx, opts, md, reg, tok, resource, now)
	if err != nil {
		return nil, err
	}
	opts.Logger.Info("signed in", "grant", *g)
	return g, nil
}
