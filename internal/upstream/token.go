package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// redacted is what every printed form of a secret shows.
const redacted = "[redacted]"

// Token is a bearer access token; every printed or logged form of it is "[redacted]".
type Token string

// String returns "[redacted]" so that a token never reaches a log line or an error by accident.
func (Token) String() string { return redacted }

// GoString returns "[redacted]" so that %#v does not print the token either.
func (Token) GoString() string { return redacted }

// Format prints "[redacted]" for every fmt verb.
func (Token) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }

// LogValue makes slog record the token as "[redacted]".
func (Token) LogValue() slog.Value { return slog.StringValue(redacted) }

// Reveal returns the raw token, for the one place that needs it: the Authorization header.
func (t Token) Reveal() string { return string(t) }

// TokenSource supplies the bearer token; the client asks it once per attempt.
type TokenSource interface {
	// Token returns the access token to send now.
	Token(ctx context.Context) (Token, error)
}

// Refresher is implemented by a TokenSource that can obtain a new access token. When the
// service answers 401 "unauthorized", Call asks it once for a replacement of the token the
// service refused and retries the request once, whatever the operation: a 401 means nothing
// was processed. The retry does not count against the RetryPolicy.
type Refresher interface {
	// Refresh returns the access token to use instead of rejected ("" when not known). It may
	// return a token someone else obtained in the meantime instead of refreshing again. When
	// the user must sign in again (the grant expired, was revoked or is gone), its error is or
	// wraps an *AuthError.
	Refresh(ctx context.Context, rejected Token) (Token, error)
}

// AuthError is the error of a TokenSource or Refresher that cannot supply a token until the
// user signs in again. Call reports it as an *Error with Status 401, Code "unauthorized" and
// this Message, so that a caller showing Error.Message shows the user what to do.
type AuthError struct {
	Message string // one sentence fit to show a person, saying how to sign in again
	Err     error  // the cause, for logs (never a token); may be nil
}

// Error returns the message, followed by the cause when there is one.
func (e *AuthError) Error() string {
	if e.Err == nil {
		return e.Message
	}
	return e.Message + " (" + e.Err.Error() + ")"
}

// Unwrap returns the cause.
func (e *AuthError) Unwrap() error { return e.Err }

// sentToken records the token an attempt sent, so that a refresh can name the rejected one.
type sentToken struct {
	mu  sync.Mutex
	tok Token
}

func (s *sentToken) set(t Token) {
	s.mu.Lock()
	s.tok = t
	s.mu.Unlock()
}

func (s *sentToken) get() Token {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tok
}

type sentTokenKey struct{}

// StaticToken is a TokenSource that always returns the same token.
type StaticToken Token

// Token returns the static token; an empty one is an error.
func (s StaticToken) Token(context.Context) (Token, error) {
	if s == "" {
		return "", errors.New("static token is empty")
	}
	return Token(s), nil
}

// String returns "[redacted]".
func (StaticToken) String() string { return redacted }

// GoString returns "[redacted]".
func (StaticToken) GoString() string { return redacted }

// Format prints "[redacted]" for every fmt verb.
func (StaticToken) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, redacted) }

// LogValue makes slog record the token as "[redacted]".
func (StaticToken) LogValue() slog.Value { return slog.StringValue(redacted) }

// tokenError marks a failure of the TokenSource, which is never retried.
type tokenError struct{ err error }

// Error says that the token could not be obtained.
func (e *tokenError) Error() string { return "get access token: " + e.err.Error() }

// Unwrap returns the token source's error.
func (e *tokenError) Unwrap() error { return e.err }
