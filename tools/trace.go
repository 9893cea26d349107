package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// metaCarrier reads the W3C trace context a client sends in a request's _meta (traceparent,
// tracestate), as the MCP OpenTelemetry conventions put it.
type metaCarrier map[string]any

func (m metaCarrier) Get(key string) string { s, _ := m[key].(string); return s }
func (m metaCarrier) Set(string, string)    {}
func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}

// startCallSpan starts the server span of a tool call (OpenTelemetry semantic conventions for
// MCP: "tools/call {tool}", mcp.method.name, gen_ai.tool.name, mcp.session.id), the child of
// the trace context in the request's _meta when there is one. Never an argument or a token.
func startCallSpan(ctx context.Context, tracer trace.Tracer, t *Tool, req mcp.CallToolRequest) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, nil
	}
	if meta := req.Params.Meta; meta != nil && meta.AdditionalFields != nil {
		ctx = propagation.TraceContext{}.Extract(ctx, metaCarrier(meta.AdditionalFields))
	}
	attrs := []attribute.KeyValue{
		attribute.String("mcp.method.name", string(mcp.MethodToolsCall)),
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", t.Name),
	}
	if cs := server.ClientSessionFromContext(ctx); cs != nil && cs.SessionID() != "" {
		attrs = append(attrs, attribute.String("mcp.session.id", cs.SessionID()))
	}
	return tracer.Start(ctx, string(mcp.MethodToolsCall)+" "+t.Name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
}

// endCallSpan ends a tool call's span with its outcome.
func endCallSpan(span trace.Span, code string) {
	if span == nil {
		return
	}
	if code != "ok" {
		span.SetAttributes(attribute.String("error.type", code))
		span.SetStatus(codes.Error, code)
	}
	span.End()
}

// traceRequests adds to hooks a server span for every MCP request other than tools/call (which
// toolHandler traces itself, with the tool's attributes): "{method}", with mcp.method.name,
// mcp.session.id and jsonrpc.request.id, the child of the traceparent in the request's _meta.
func traceRequests(tracer trace.Tracer, hooks *server.Hooks) {
	var spans sync.Map // session id + request id -> trace.Span
	key := func(ctx context.Context, id any) string {
		sid := ""
		if cs := server.ClientSessionFromContext(ctx); cs != nil {
			sid = cs.SessionID()
		}
		return sid + "\x00" + fmt.Sprint(id)
	}
	hooks.AddBeforeAny(func(ctx context.Context, id any, method mcp.MCPMethod, message any) {
		if method == mcp.MethodToolsCall || id == nil {
			return
		}
		if meta := requestMeta(message); meta != nil {
			ctx = propagation.TraceContext{}.Extract(ctx, metaCarrier(meta))
		}
		attrs := []attribute.KeyValue{attribute.String("mcp.method.name", string(method)), attribute.String("jsonrpc.request.id", fmt.Sprint(id))}
		if cs := server.ClientSessionFromContext(ctx); cs != nil && cs.SessionID() != "" {
			attrs = append(attrs, attribute.String("mcp.session.id", cs.SessionID()))
		}
		_, span := tracer.Start(ctx, string(method), trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
		spans.Store(key(ctx, id), span)
	})
	end := func(ctx context.Context, id any, err error) {
		v, ok := spans.LoadAndDelete(key(ctx, id))
		if !ok {
			return
		}
		span := v.(trace.Span)
		if err != nil {
			span.SetAttributes(attribute.String("error.type", "jsonrpc_error"))
			span.SetStatus(codes.Error, "JSON-RPC error")
		}
		span.End()
	}
	hooks.AddOnSuccess(func(ctx context.Context, id any, _ mcp.MCPMethod, _ any, _ any) { end(ctx, id, nil) })
	hooks.AddOnError(func(ctx context.Context, id any, _ mcp.MCPMethod, _ any, err error) { end(ctx, id, err) })
}

// requestMeta returns the _meta fields of a request message, or nil.
func requestMeta(message any) map[string]any {
	data, err := json.Marshal(message)
	if err != nil {
		return nil
	}
	var m struct {
		Params struct {
			Meta map[string]any `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	return m.Params.Meta
}
