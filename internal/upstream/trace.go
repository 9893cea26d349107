package upstream

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// WithTracer makes the client trace every attempt of a card service call as a client span
// (OpenTelemetry HTTP semantic conventions; the path template, never the URL with its ids or
// query) and send the W3C traceparent with it.
func WithTracer(tp trace.TracerProvider) Option { return func(o *options) { o.tracer = tp } }

// startAttempt starts the span of one attempt and puts its context in the request's headers.
func (c *Client) startAttempt(ctx context.Context, op schema.Operation, req *http.Request, n int) (context.Context, trace.Span) {
	if c.tracer == nil {
		return ctx, nil
	}
	ctx, span := c.tracer.Start(ctx, op.Method+" "+op.Path, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String("http.request.method", op.Method),
			attribute.String("url.template", op.Path),
			attribute.String("server.address", req.URL.Hostname()),
			attribute.String("cardwriter.operation", op.ID),
			attribute.Int("http.request.resend_count", n-1),
		))
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	return ctx, span
}

// endAttempt ends an attempt's span with its status code or failure.
func endAttempt(span trace.Span, status int, err error) {
	if span == nil {
		return
	}
	if status > 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", status))
	}
	if err != nil {
		kind := failureKind(err)
		if apiErr, ok := err.(*Error); ok {
			kind = apiErr.Code
		}
		span.SetAttributes(attribute.String("error.type", kind))
		span.SetStatus(codes.Error, kind)
	}
	span.End()
}
