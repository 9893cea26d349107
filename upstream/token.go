package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
