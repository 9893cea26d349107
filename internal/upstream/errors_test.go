package upstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// TestErrorResponses drives non-2xx answers through a real server; uploadImage is not
// retried on them, so each answer is seen exactly once.
func TestErrorResponses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		step          step
		wantStatus    int
		wantCode      string
		wantMessage   string // substring
		wantRetryable bool
		wantDetail    bool
	}{
		{
			name:       "envelope with detail",
			step:       reply(400, `{"error":"invalid_request","message":"purpose must be avatar or background.","retryable":false,"detail":{"field":"purpose","index":3}}`),
			wantStatus: 400, wantCode: "invalid_request", wantMessage: "purpose must be avatar or background.", wantDetail: true,
		},
		{
			name:       "payload too large",
			step:       reply(413, `{"error":"payload_too_large","message":"The image is over 8 MiB."}`),
			wantStatus: 413, wantCode: "payload_too_large", wantMessage: "over 8 MiB",
		},
		{
			name:       "HTML 502 page",
			step:       replyRaw(502, "text/html", "<html><head><title>502 Bad Gateway</title></head><body><h1>Bad Gateway</h1></body></html>"),
			wantStatus: 502, wantCode: "unavailable", wantMessage: "The card service answered 502 Bad Gateway without an error envelope.", wantRetryable: true,
		},
		{
			name:       "empty 404",
			step:       replyRaw(404, "", ""),
			wantStatus: 404, wantCode: "not_found", wantMessage: "The card service answered 404 Not Found with an empty body.",
		},
		{
			name: "truncated envelope",
			step: func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", "200")
				w.WriteHeader(409)
				_, _ = io.WriteString(w, `{"error":"trial_slots_full","mess`)
				http.NewResponseController(w).Flush()
				conn, _, _ := http.NewResponseController(w).Hijack()
				if conn != nil {
					_ = conn.Close()
				}
			},
			wantStatus: 409, wantCode: "conflict", wantMessage: "409 Conflict without an error envelope",
		},
		{
			name:       "envelope without message",
			step:       reply(402, `{"error":"insufficient_credits"}`),
			wantStatus: 402, wantCode: "insufficient_credits", wantMessage: "402 Payment Required (insufficient_credits) without a message",
		},
		{
			name:       "oversize error body",
			step:       reply(500, `{"error":"internal","message":"`+strings.Repeat("x", 100<<10)+`"}`),
			wantStatus: 500, wantCode: "internal", wantMessage: "without an error envelope", wantRetryable: true,
		},
		{
			name:       "unknown 4xx",
			step:       replyRaw(418, "text/plain", "teapot"),
			wantStatus: 418, wantCode: "invalid_request", wantMessage: "418 I'm a teapot",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, sc := serve(t, tt.step)
			c, _ := newClient(t, srv.URL)
			_, err := c.UploadImage(context.Background(), upstream.ImageUploadInput{Purpose: "avatar", ContentType: "image/png", DataBase64: "AAAA"})
			var e *upstream.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v (%T), want *Error", err, err)
			}
			if e.Operation != "uploadImage" || e.Status != tt.wantStatus || e.Code != tt.wantCode ||
				!strings.Contains(e.Message, tt.wantMessage) || e.Retryable != tt.wantRetryable {
				t.Errorf("got %+v\nwant status %d code %s message ~%q retryable %v", e, tt.wantStatus, tt.wantCode, tt.wantMessage, tt.wantRetryable)
			}
			if (e.Detail != nil) != tt.wantDetail {
				t.Errorf("Detail = %v", e.Detail)
			}
			if len(sc.requests()) != 1 {
				t.Errorf("requests = %d", len(sc.requests()))
			}
			// The envelope is what the service sent, and satisfies the contract.
			env := e.Envelope()
			if env["error"] != e.Code || env["message"] != e.Message || env["retryable"] != e.Retryable {
				t.Errorf("Envelope = %v", env)
			}
			data, _ := json.Marshal(env)
			if err := schema.Component("ErrorEnvelope").ValidateJSON(data); err != nil {
				t.Errorf("envelope %s: %v", data, err)
			}
		})
	}
}

func TestErrorString(t *testing.T) {
	t.Parallel()
	e := upstream.DecodeError("getCard", 404, http.Header{}, []byte(`{"error":"role_not_found","message":"No card has this roleId."}`))
	if got, want := e.Error(), "card service: getCard: 404 role_not_found: No card has this roleId."; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if _, has := e.Envelope()["detail"]; has {
		t.Errorf("Envelope has a detail the service did not send")
	}
	if e.Retryable {
		t.Errorf("404 is not retryable")
	}
}

func TestDecodeErrorEnvelopeFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status        int
		body          string
		wantCode      string
		wantRetryable bool
		wantDetail    map[string]any
	}{
		{429, `{"error":"rate_limited","message":"m"}`, "rate_limited", true, nil},
		{503, `{"error":"unavailable","message":"m","retryable":false}`, "unavailable", false, nil},
		{409, `{"error":"conflict","message":"m","retryable":true}`, "conflict", true, nil},
		{400, `{"error":"invalid_request","message":"m","detail":{"index":2}}`, "invalid_request", false, map[string]any{"index": json.Number("2")}},
		{400, `{"error":"invalid_request","message":"m","detail":"oops"}`, "invalid_request", false, nil},
		{400, `{"error":"invalid_request","message":"m","retryable":"yes"}`, "invalid_request", false, nil},
		{500, `{"error":7,"message":"m"}`, "internal", true, nil},
		{500, `{"error":"","message":"m"}`, "internal", true, nil},
		{404, `null`, "not_found", false, nil},
		{404, `[]`, "not_found", false, nil},
		{301, `moved`, "internal", false, nil},
		{599, ``, "internal", true, nil},
		{422, `{"error":"validation_failed","message":"Fix the errors first."}`, "validation_failed", false, nil},
		{401, `{}`, "unauthorized", false, nil},
		{403, `x`, "forbidden", false, nil},
		{504, `x`, "unavailable", true, nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d %s", tt.status, tt.body), func(t *testing.T) {
			t.Parallel()
			e := upstream.DecodeError("op", tt.status, http.Header{}, []byte(tt.body))
			if e.Code != tt.wantCode || e.Retryable != tt.wantRetryable || !reflect.DeepEqual(e.Detail, tt.wantDetail) {
				t.Errorf("got code %q retryable %v detail %v, want %q %v %v", e.Code, e.Retryable, e.Detail, tt.wantCode, tt.wantRetryable, tt.wantDetail)
			}
			if e.Message == "" {
				t.Error("empty Message")
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 7 ", 7 * time.Second},
		{"0", 0},
		{"-5", 0},
		{"1.5", 0},
		{"soon", 0},
		{"99999999999", time.Hour},
		{now.Add(10 * time.Second).Format(http.TimeFormat), 10 * time.Second},
		{now.Add(-10 * time.Second).Format(http.TimeFormat), 0},
		{"Sunday, 01-Mar-26 12:00:30 GMT", 30 * time.Second}, // RFC 850
	}
	for _, tt := range tests {
		if got := upstream.ParseRetryAfter(tt.in, now); got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
	e := upstream.DecodeError("op", 429, http.Header{"Retry-After": {"4"}}, nil)
	if e.RetryAfter != 4*time.Second {
		t.Errorf("RetryAfter = %v", e.RetryAfter)
	}
}

func FuzzDecodeError(f *testing.F) {
	seeds := []struct {
		status     int
		body       string
		retryAfter string
	}{
		{404, `{"error":"role_not_found","message":"No such card."}`, ""},
		{400, `{"error":"invalid_request","message":"bad","detail":{"index":1,"path":"/entries/1"}}`, ""},
		{429, `{"error":"rate_limited","message":"slow","retryable":true}`, "2"},
		{502, `<html><body>Bad Gateway</body></html>`, ""},
		{503, ``, "Wed, 21 Oct 2015 07:28:00 GMT"},
		{500, `{"error":`, ""},
		{409, `{"error":""}`, ""},
		{418, `[1,2,3]`, "-1"},
		{200, `null`, ""},
		{0, `{"error":"x","message":7,"retryable":"no","detail":[]}`, ""},
		{-1, "\xff\xfe", ""},
		{999, `{"error":"x","detail":{"a":1e400}}`, ""},
	}
	for _, s := range seeds {
		f.Add(s.status, []byte(s.body), s.retryAfter)
	}
	f.Fuzz(func(t *testing.T, status int, body []byte, retryAfter string) {
		h := http.Header{}
		h.Set("Retry-After", retryAfter)
		e := upstream.DecodeError("fuzzOp", status, h, body)
		if e == nil {
			t.Fatal("nil *Error")
		}
		if e.Status != status || e.Operation != "fuzzOp" {
			t.Errorf("Status = %d, Operation = %q", e.Status, e.Operation)
		}
		if e.Code == "" || strings.TrimSpace(e.Message) == "" {
			t.Errorf("Code %q, Message %q", e.Code, e.Message)
		}
		if e.RetryAfter < 0 {
			t.Errorf("RetryAfter = %v", e.RetryAfter)
		}
		if !strings.HasPrefix(e.Error(), "card service: fuzzOp: ") {
			t.Errorf("Error() = %q", e.Error())
		}
		if _, err := json.Marshal(e.Envelope()); err != nil {
			t.Errorf("Envelope does not encode: %v", err)
		}
	})
}
