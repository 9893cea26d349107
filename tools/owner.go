package tools

import (
	"context"
	"errors"

	"github.com/cardwriter/cardwriter-mcp/internal/revisions"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// Owner says whose a call's revisions and exports are (docs/revisions.md, "Whose"). It never
// asks the card service: an identity operation that is missing or answers otherwise than we
// guessed must not fail a write.
type Owner func(ctx context.Context) (revisions.User, error)

// LocalOwner is the owner of every call of a server run for one person (stdio, the import and
// export commands): the local profile (profile, its config directory) on the card service at
// baseURL.
func LocalOwner(baseURL, profile string) Owner {
	u := revisions.LocalUser(baseURL, profile)
	return func(context.Context) (revisions.User, error) { return u, nil }
}

// RequestOwner is the owner of an HTTP request on client's card service: the service's
// user its authorization names (proxy mode: learned at sign-in; passthrough: the identity
// operation's answer), else its grant (proxy mode, a service that names nobody), else the
// digest of the token it forwards (passthrough, a service without the identity operation).
func RequestOwner(client *upstream.Client) Owner {
	baseURL := client.BaseURL()
	return func(ctx context.Context) (revisions.User, error) {
		if id := upstream.IdentityFrom(ctx); id != nil {
			switch {
			case id.UserID != "":
				return revisions.User{BaseURL: baseURL, ID: id.UserID}, nil
			case id.GrantID != "":
				return revisions.User{BaseURL: baseURL, ID: "grant:" + id.GrantID}, nil
			}
		}
		if d := client.TokenDigest(ctx); d != "" {
			return revisions.User{BaseURL: baseURL, ID: "token:" + d}, nil
		}
		return revisions.User{}, errNoOwner
	}
}

// errNoOwner is the error of a request no authorization names (a server misconfigured).
var errNoOwner = errors.New("this request carries no signed-in user or token: its revisions and exports would be nobody's")
