package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// runHealthcheck asks a running server whether it lives, for container health checks (the
// image has no shell or curl): exit 0 on an answer below 500 within --timeout.
func runHealthcheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("healthcheck", "healthcheck [--url http://127.0.0.1:8080/healthz]", stdout, stderr)
	url := fs.String("url", "http://127.0.0.1:8080/healthz", "the address to ask: /healthz of `http`, or any path of `sandbox`")
	timeout := fs.Duration("timeout", 3*time.Second, "how long to wait for the answer")
	if err := parseFlags(fs, args, nil); err != nil {
		return helpOK(err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, *url, nil)
	if err != nil {
		return fmt.Errorf("--url: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("unhealthy: %s does not answer: %w", *url, err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 500 {
		return fmt.Errorf("unhealthy: %s answered %s", *url, resp.Status)
	}
	_, err = fmt.Fprintf(stdout, "healthy: %s answered %s\n", *url, resp.Status)
	return err
}
