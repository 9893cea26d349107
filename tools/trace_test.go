package tools

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// headerSpy records the traceparent of the requests that reach the card service.
type headerSpy struct {
	next http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (h *headerSpy) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.seen = append(h.seen, r.Header.Get("Traceparent"))
	h.mu.Unlock()
	return h.next.RoundTrip(r)
}

// TestTracing: a tool call is a server span, the child of the traceparent in the request's
// _meta; each card service attempt a client span under it, with the traceparent sent along;
// no attribute holds the arguments' text or the token.
func TestTracing(t *testing.T) {
	t.Parallel()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	spy := &headerSpy{}
	e, _ := newTavernEnv(t, tavernEnvConfig{
		opts:   Options{Tracer: tp},
		wrap:   func(rt http.RoundTripper) http.RoundTripper { spy.next = rt; return spy },
		client: []upstream.Option{upstream.WithTracer(tp)},
	})
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	res := e.callMeta("create_card", `{"roleName":"Secret Captain"}`, &mcp.Meta{AdditionalFields: map[string]any{"traceparent": parent}})
	if res.IsError {
		t.Fatalf("create_card: %v", res.Content)
	}
	e.fail("get_card", `{"roleId":"nope"}`)
	if _, err := e.client.ListTools(context.Background(), mcp.ListToolsRequest{}); err != nil {
		t.Fatal(err)
	}

	spans := exp.GetSpans()
	byName := map[string]tracetest.SpanStub{}
	for _, s := range spans {
		byName[s.Name] = s
		for _, a := range s.Attributes {
			if v := a.Value.Emit(); strings.Contains(v, "Secret") || strings.Contains(v, demoToken) {
				t.Errorf("span %s attribute %s holds content or the token: %s", s.Name, a.Key, v)
			}
		}
	}
	call, ok := byName["tools/call create_card"]
	if !ok {
		t.Fatalf("no tool call span among %d spans", len(spans))
	}
	if call.SpanKind != trace.SpanKindServer || call.Parent.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || !call.Parent.IsRemote() {
		t.Errorf("the call span is not the child of the request's traceparent: %+v", call.Parent)
	}
	attrs := map[string]string{}
	for _, a := range call.Attributes {
		attrs[string(a.Key)] = a.Value.Emit()
	}
	if attrs["mcp.method.name"] != "tools/call" || attrs["gen_ai.tool.name"] != "create_card" || attrs["gen_ai.operation.name"] != "execute_tool" {
		t.Errorf("call span attributes: %v", attrs)
	}
	up, ok := byName["POST /role"]
	if !ok || up.SpanKind != trace.SpanKindClient || up.Parent.SpanID() != call.SpanContext.SpanID() {
		t.Fatalf("no client span under the call: %+v", up)
	}
	upAttrs := map[string]string{}
	for _, a := range up.Attributes {
		upAttrs[string(a.Key)] = a.Value.Emit()
	}
	if upAttrs["http.response.status_code"] != "201" || upAttrs["url.template"] != "/role" || upAttrs["cardwriter.operation"] != "createCard" {
		t.Errorf("client span attributes: %v", upAttrs)
	}
	if list, ok := byName["tools/list"]; !ok || list.SpanKind != trace.SpanKindServer {
		t.Errorf("no span for tools/list: %+v", list)
	}
	if _, dup := byName["tools/call"]; dup {
		t.Error("tools/call traced twice")
	}
	failed := byName["tools/call get_card"]
	if failed.Status.Description != "role_not_found" {
		t.Errorf("the failed call's span status: %+v", failed.Status)
	}
	spy.mu.Lock()
	defer spy.mu.Unlock()
	if len(spy.seen) == 0 || !strings.HasPrefix(spy.seen[0], "00-4bf92f3577b34da6a3ce929d0e0e4736-") {
		t.Errorf("the card service did not get the trace context: %q", spy.seen)
	}
}
