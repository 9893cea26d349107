package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"
)

// errUnreachable marks an error saying that the card service could not be reached at all.
var errUnreachable = errors.New("cannot reach the card service")

// unreachable turns a failure to connect to apiHost (refused, no such host, no answer) into one
// sentence naming the address and what to check; any other error comes back unchanged.
func unreachable(apiHost string, err error) error {
	why := ""
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var netErr net.Error
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errUnreachable):
		return err
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused: nothing listens at that port"
	case errors.As(err, &dnsErr):
		why = "no such host"
	case errors.As(err, &netErr) && netErr.Timeout():
		why = "no answer in time"
	case errors.As(err, &opErr) && opErr.Op == "dial":
		why = opErr.Err.Error()
	default:
		return err
	}
	return fmt.Errorf("%w at %s (%s): check --api-host (or CARDWRITER_API_HOST), and that the service runs and this machine reaches it", errUnreachable, apiHost, why)
}

// reach asks apiHost for anything at all (its /open/v1/me without a token): nil when it answers,
// whatever the status, else unreachable's error.
func reach(ctx context.Context, apiHost string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiHost+"/open/v1/me", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return unreachable(apiHost, err)
	}
	resp.Body.Close()
	return nil
}
