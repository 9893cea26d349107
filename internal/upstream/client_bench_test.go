package upstream

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// The client's share of an upstream call: building the request (URL from the contract's path
// template, body compacted, headers) and reading the answer, with the network replaced by a
// canned response. Run with: go test -run '^$' -bench . -benchmem ./upstream

// cannedTransport answers every request with the same 200 JSON body, draining the request.
type cannedTransport struct{ body []byte }

func (c cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(c.body)), ContentLength: int64(len(c.body)), Request: r}, nil
}

func benchDocumentBody() json.RawMessage {
	entries := make([]map[string]any, 50)
	for i := range entries {
		entries[i] = map[string]any{"op": "update", "entryId": fmt.Sprintf("e_%024d", i), "name": fmt.Sprintf("Entry %d", i),
			"content":  fmt.Sprintf("Lore entry %d: the Kestrel's crew keeps a log of every port, every debt and every promise made along the outer ring.", i),
			"keywords": []string{fmt.Sprintf("kw%d", i), "Kestrel"}}
	}
	data, _ := json.Marshal(map[string]any{"entries": entries})
	return data
}

var benchCalls = []struct {
	op     string
	params map[string]string
	body   json.RawMessage
}{
	{"getCard", map[string]string{"roleId": "r_0123456789abcdef01234567"}, nil},
	{"setOpeningLines", map[string]string{"roleId": "r_0123456789abcdef01234567"},
		json.RawMessage(`{"roleWelcome":"The Kestrel shudders as it drops out of the jump.","alternates":["a","b"],"prologue":["Who's following us?"]}`)},
	{"writeWorldbookDocument", map[string]string{"worldbookId": "wb_0123456789abcdef01234567"}, benchDocumentBody()},
	{"listTrialCards", nil, nil},
}

// BenchmarkRequestBuild is the request of each measured operation built from the contract:
// URL (path template, parameters checked), body compacted, the http.Request with its headers.
func BenchmarkRequestBuild(b *testing.B) {
	c, err := New("http://127.0.0.1:9", StaticToken("t"))
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range benchCalls {
		op, _ := schema.Lookup(bc.op)
		var body any
		if bc.body != nil {
			body = bc.body
		}
		b.Run(bc.op, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				target, err := c.target(op, bc.params)
				if err != nil {
					b.Fatal(err)
				}
				payload, err := encodeBody(op, body)
				if err != nil {
					b.Fatal(err)
				}
				var rd io.Reader
				if payload != nil {
					rd = bytes.NewReader(payload)
				}
				req, err := http.NewRequestWithContext(context.Background(), op.Method, target, rd)
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("User-Agent", c.userAgent)
				req.Header.Set("Accept", "application/json")
			}
		})
	}
}

// BenchmarkCall is a whole Call of each operation against a canned answer: the client's own
// cost per call (request, token, transport wrapper, reading and keeping the answer).
func BenchmarkCall(b *testing.B) {
	answer := []byte(`{"roleId":"r_0123456789abcdef01234567","ok":true}`)
	c, err := New("http://127.0.0.1:9", StaticToken("t"), WithTransport(cannedTransport{answer}))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, bc := range benchCalls {
		var body any
		if bc.body != nil {
			body = bc.body
		}
		b.Run(bc.op, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var out json.RawMessage
				if err := c.Call(ctx, bc.op, bc.params, body, &out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
