package upstream

import (
	"context"
	"errors"
)

// A server that acts for many users (the HTTP transport) cannot give its Client one token:
// each request brings its own. It builds the Client with ContextTokenSource and puts the
// request's TokenSource in the context of every call with WithTokenSource.

type tokenSourceKey struct{}

// WithTokenSource returns a copy of ctx that carries ts, the TokenSource that a Client built
// with ContextTokenSource uses for the calls made with that context.
func WithTokenSource(ctx context.Context, ts TokenSource) context.Context {
	return context.WithValue(ctx, tokenSourceKey{}, ts)
}

// TokenSourceFrom returns the TokenSource ctx carries, or nil.
func TokenSourceFrom(ctx context.Context) TokenSource {
	ts, _ := ctx.Value(tokenSourceKey{}).(TokenSource)
	return ts
}

// ContextTokenSource is a TokenSource (and Refresher) that delegates to the TokenSource the
// call's context carries (WithTokenSource). A call whose context carries none fails with an
// *AuthError: nobody is signed in for it.
type ContextTokenSource struct{}

// errNoCallToken is the cause of the AuthError of a call made without a TokenSource.
var errNoCallToken = errors.New("the call's context carries no token source")

func noSignIn() error {
	return &AuthError{Message: "This request is not signed in to the card service; authorize the MCP client again.", Err: errNoCallToken}
}

// Token returns the token of the TokenSource in ctx.
func (ContextTokenSource) Token(ctx context.Context) (Token, error) {
	ts := TokenSourceFrom(ctx)
	if ts == nil {
		return "", noSignIn()
	}
	return ts.Token(ctx)
}

// Refresh asks the TokenSource in ctx for a replacement of rejected when it is a Refresher.
// One that is not cannot replace the token: the refusal is final, an *AuthError.
func (ContextTokenSource) Refresh(ctx context.Context, rejected Token) (Token, error) {
	ts := TokenSourceFrom(ctx)
	if ts == nil {
		return "", noSignIn()
	}
	if r, ok := ts.(Refresher); ok {
		return r.Refresh(ctx, rejected)
	}
	return "", &AuthError{Message: "The card service refused the access token; authorize the MCP client again."}
}
