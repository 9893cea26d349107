package tools

import (
	"context"

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
