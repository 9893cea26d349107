package upstream

import (
	"context"
	"time"
)

// SetSleep replaces the wait between attempts, so that tests record delays instead of sleeping.
func SetSleep(c *Client, sleep func(ctx context.Context, d time.Duration) error) { c.sleep = sleep }

// DecodeError exposes decodeError to the tests.
var DecodeError = decodeError

// ParseRetryAfter exposes parseRetryAfter to the tests.
var ParseRetryAfter = parseRetryAfter
