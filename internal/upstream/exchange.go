package upstream

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// Exchange is one request of an operation and the service's answer as it came: what a probe
// of the service compares with the contract.
type Exchange struct {
	Operation schema.Operation // as the client's contract has it
	Status    int
	Header    http.Header
	Body      []byte // at most the client's response size cap
}

// Contract returns the operations the client calls.
func (c *Client) Contract() *schema.Table { return c.table }

// Exchange sends one request of the operation operationID, built as Call builds it (params,
// body, the token), once, with no retry and no refresh, and returns the answer whatever its
// status. Its error is for a request that could not be built or sent.
func (c *Client) Exchange(ctx context.Context, operationID string, params map[string]string, body any) (*Exchange, error) {
	op, ok := c.table.Lookup(operationID)
	if !ok {
		return nil, fmt.Errorf("upstream: the contract has no operation %q", operationID)
	}
	target, err := c.target(op, params)
	if err != nil {
		return nil, fmt.Errorf("card service: %s: %w", op.ID, err)
	}
	payload, err := encodeBody(op, body)
	if err != nil {
		return nil, fmt.Errorf("card service: %s: %w", op.ID, err)
	}
	req, err := http.NewRequestWithContext(ctx, op.Method, target, bytes.NewReader(payload))
	if err != nil {
		return nil, fmt.Errorf("card service: %s: build request: %w", op.ID, err)
	}
	if payload == nil {
		req.Body = http.NoBody
	} else {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, c.transportError(op, err)
	}
	defer resp.Body.Close()
	data, err := readAll(resp.Body, c.maxBytes, resp.ContentLength)
	if err != nil {
		return nil, c.transportError(op, fmt.Errorf("read the response: %w", err))
	}
	return &Exchange{Operation: op, Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}
