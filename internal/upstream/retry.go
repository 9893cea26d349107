package upstream

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// RetryPolicy bounds the retries of one call: capped exponential backoff with full jitter;
// a client made without WithRetry uses 4 attempts, 100ms and 2s.
type RetryPolicy struct {
	MaxAttempts int           // attempts in all, the first included; 1 disables retries
	BaseDelay   time.Duration // the cap of the first wait
	MaxDelay    time.Duration // the cap of every wait
}

var defaultRetryPolicy = RetryPolicy{MaxAttempts: 4, BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second}

func (p RetryPolicy) validate() error {
	switch {
	case p.MaxAttempts < 1:
		return errors.New("retry policy: MaxAttempts must be at least 1")
	case p.BaseDelay < 0 || p.MaxDelay < 0:
		return errors.New("retry policy: delays must not be negative")
	case p.MaxDelay < p.BaseDelay:
		return errors.New("retry policy: MaxDelay must not be less than BaseDelay")
	}
	return nil
}

// backoff returns the wait before retry number n (1 for the first retry): a random
// duration in [0, min(MaxDelay, BaseDelay*2^(n-1))].
func (p RetryPolicy) backoff(n int) time.Duration {
	ceiling := p.BaseDelay
	for i := 1; i < n && ceiling < p.MaxDelay; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, p.MaxDelay)
	if ceiling <= 0 {
		return 0
	}
	return rand.N(ceiling + 1)
}

// retryDecision says whether err may be retried for an operation and why, in words fit for a
// log line (never the request URL or a header).
func retryDecision(err error, idempotent bool) (retry bool, reason string) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false, "context done"
	}
	var apiErr *Error
	if errors.As(err, &apiErr) {
		reason = statusName(apiErr.Status) + " " + apiErr.Code
		if apiErr.Status == http.StatusTooManyRequests {
			return true, reason
		}
		if !idempotent {
			return false, reason
		}
		switch apiErr.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true, reason
		}
		return apiErr.Retryable, reason
	}
	var tokErr *tokenError
	if errors.As(err, &tokErr) || errors.Is(err, ErrCrossOriginRedirect) {
		return false, "not retryable"
	}
	if kind := dialFailure(err); kind != "" {
		// The connection was never made, so the request was certainly not processed.
		return true, kind
	}
	if !idempotent {
		return false, "not retried: the request may have been processed"
	}
	if kind := connectionFailure(err); kind != "" {
		return true, kind
	}
	return false, "not retryable"
}

// NotSent reports whether a failed call certainly never reached the card service: the
// connection was never made. Any other transport failure may have come after the service
// received, and applied, the request.
func NotSent(err error) bool { return dialFailure(err) != "" }

// dialFailure names a failure to connect (refused, unreachable, dial timeout); "" otherwise.
// A name that does not resolve is not retried.
func dialFailure(err error) string {
	var opErr *net.OpError
	if !errors.As(err, &opErr) || opErr.Op != "dial" {
		return ""
	}
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) && !dnsErr.IsTemporary && !dnsErr.IsTimeout {
		return ""
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return "connection refused"
	}
	return "dial failed"
}

// connectionFailure names a connection that broke before the answer was complete; "" otherwise.
func connectionFailure(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return "connection reset"
	case errors.Is(err, syscall.EPIPE):
		return "broken pipe"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return "connection closed before the answer was complete"
	case strings.Contains(err.Error(), "server closed idle connection"),
		strings.Contains(err.Error(), "transport connection broken"):
		return "connection closed before the answer was complete"
	}
	return ""
}

// failureKind names a failed exchange for a log line, without the URL or any header.
func failureKind(err error) string {
	var tokErr *tokenError
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline exceeded"
	case errors.As(err, &tokErr):
		return "no access token"
	case errors.Is(err, ErrCrossOriginRedirect):
		return "redirect to another origin refused"
	}
	if kind := dialFailure(err); kind != "" {
		return kind
	}
	if kind := connectionFailure(err); kind != "" {
		return kind
	}
	return "transport error"
}

// sleepCtx waits for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
