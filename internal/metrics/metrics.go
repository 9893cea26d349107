// Package metrics is cardwriter-mcp's Prometheus metrics: an Observer of the tools (calls,
// sessions, the kept-aside store) and of the card service client (attempts, retries, token
// refreshes). No label holds a user, card or id: tools, operations, statuses and outcomes only.
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// knownOutcomes bounds the outcome label: a code the card service makes up becomes "other".
var knownOutcomes = map[string]bool{
	"ok": true, "invalid_arguments": true, "invalid_request": true, "unauthorized": true, "forbidden": true,
	"not_found": true, "role_not_found": true, "worldbook_not_found": true, "trial_not_found": true,
	"conflict": true, "trial_slots_full": true, "payload_too_large": true, "validation_failed": true,
	"rate_limited": true, "internal": true, "unavailable": true, "unexpected_response": true,
	"cancelled": true, "invalid_file": true, "input_required": true,
	"declined": true, "revision_not_kept": true, "revision_not_found": true, "not_restorable": true,
	"budget_exceeded": true, "quota_exceeded": true,
}

// Metrics holds the collectors and their registry.
type Metrics struct {
	reg             *prometheus.Registry
	toolCalls       *prometheus.CounterVec
	toolDuration    *prometheus.HistogramVec
	sessions        prometheus.Gauge
	storeErrors     prometheus.Counter
	storeFailures   *prometheus.CounterVec
	storeFailovers  prometheus.Counter
	upstreamReqs    *prometheus.CounterVec
	upstreamLatency *prometheus.HistogramVec
	retries         *prometheus.CounterVec
	refreshes       *prometheus.CounterVec
	signIns         *prometheus.CounterVec
	revisions       *prometheus.CounterVec
	refused         *prometheus.CounterVec
	userStorage     *prometheus.HistogramVec
	quotaRefusals   *prometheus.CounterVec
}

// New returns the metrics, registered with a registry of their own (with the Go runtime's and
// the process's collectors).
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		toolCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardwriter_tool_calls_total", Help: "Tool calls by tool and outcome (ok or the error code).",
		}, []string{"tool", "outcome"}),
		toolDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cardwriter_tool_call_duration_seconds", Help: "Tool call duration, card service calls included.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"tool"}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "cardwriter_mcp_sessions_active", Help: "MCP sessions open now.",
		}),
		storeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardwriter_store_errors_total", Help: "Failures of the store of kept-aside tavern data.",
		}),
		storeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardwriter_store_unavailable_total", Help: "Redis operations failed retryably, by reason (unavailable: Redis did not answer or refused; replica_wait: too few replicas confirmed a write of what must not be lost).",
		}, []string{"reason"}),
		storeFailovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cardwriter_store_failovers_total", Help: "Changes of Redis primary (Sentinel or Cluster) this server followed.",
		}),
		upstreamReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardwriter_upstream_requests_total", Help: "Card service request attempts by operation and HTTP status (0: no answer).",
		}, []string{"operation", "status"}),
		upstreamLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cardwriter_upstream_request_duration_seconds", Help: "Card service request attempt duration by operation.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"operation"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardwriter_upstream_retries_total", Help: "Card service calls retried, by operation and reason.",
		}, []string{"operation", "reason"}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardwriter_token_refreshes_total", Help: "Access token refreshes after the card service refused a token, by outcome.",
		}, []string{"outcome"}),
		signIns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardwriter_signins_total", Help: "Returns from the card service's sign-in through the HTTP server's authorization server, by outcome (ok, denied, failed).",
		}, []string{"outcome"}),
		revisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardwriter_revisions_total", Help: "Revisions kept before writes, dropped by the retention, and restored, by event.",
		}, []string{"event"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardwriter_http_refused_total", Help: "HTTP requests and connections refused by a limit, by limit (connections, body_timeout, message, user_sessions, user_initialize_rate).",
		}, []string{"limit"}),
		// Per user without a label per user: each change of a user's usage is observed, so the
		// buckets show how many writes found their user near a quota, and the sum's growth
		// the storage added; the largest users are named (by principal digest) only in the
		// log line of a refusal.
		userStorage: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cardwriter_user_storage", Help: "A user's usage of a quota after each change of it, by kind (exports and kept-aside data in bytes, trial shadows in trial cards).",
			Buckets: []float64{1, 4, 16, 1 << 10, 64 << 10, 1 << 20, 8 << 20, 32 << 20, 64 << 20, 128 << 20, 256 << 20},
		}, []string{"kind"}),
		quotaRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "cardwriter_quota_refusals_total", Help: "Writes refused because they would pass a user's quota, by kind.",
		}, []string{"kind"}),
	}
	m.reg.MustRegister(m.userStorage, m.quotaRefusals, m.revisions, m.refused, m.signIns, m.toolCalls, m.toolDuration, m.sessions, m.storeErrors, m.storeFailures, m.storeFailovers, m.upstreamReqs, m.upstreamLatency,
		m.retries, m.refreshes, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// ToolCall counts a tool call (tools.Observer).
func (m *Metrics) ToolCall(tool, outcome string, d time.Duration) {
	if !knownOutcomes[outcome] {
		outcome = "other"
	}
	m.toolCalls.WithLabelValues(tool, outcome).Inc()
	m.toolDuration.WithLabelValues(tool).Observe(d.Seconds())
}

// Sessions moves the open sessions gauge (tools.Observer).
func (m *Metrics) Sessions(delta int) { m.sessions.Add(float64(delta)) }

// StoreError counts a kept-aside store failure (tools.Observer).
func (m *Metrics) StoreError() { m.storeErrors.Inc() }

// StoreUnavailable counts a Redis operation failed retryably (store.Observer).
func (m *Metrics) StoreUnavailable(reason string) { m.storeFailures.WithLabelValues(reason).Inc() }

// StoreFailover counts a change of Redis primary followed (store.Observer).
func (m *Metrics) StoreFailover() { m.storeFailovers.Inc() }

// Attempt counts a card service request attempt (upstream.Observer).
func (m *Metrics) Attempt(operation string, status int, d time.Duration) {
	m.upstreamReqs.WithLabelValues(operation, strconv.Itoa(status)).Inc()
	m.upstreamLatency.WithLabelValues(operation).Observe(d.Seconds())
}

// Retry counts a retried card service call (upstream.Observer).
func (m *Metrics) Retry(operation, reason string) {
	// "429 rate_limited": the status alone (the code is the service's); kinds are a fixed set.
	if status, _, ok := strings.Cut(reason, " "); ok && strings.Trim(status, "0123456789") == "" {
		reason = status
	}
	m.retries.WithLabelValues(operation, reason).Inc()
}

// Refresh counts a token refresh by outcome (upstream.Observer).
func (m *Metrics) Refresh(outcome string) { m.refreshes.WithLabelValues(outcome).Inc() }

// ConnectionRefused counts a connection refused by --max-connections.
func (m *Metrics) ConnectionRefused() { m.Refused("connections") }

// Refused counts a request or connection refused by the limit named (a fixed set of names).
func (m *Metrics) Refused(limit string) { m.refused.WithLabelValues(limit).Inc() }

// SignIn counts a sign-in through the HTTP server's authorization server by outcome.
func (m *Metrics) SignIn(outcome string) { m.signIns.WithLabelValues(outcome).Inc() }

// Revisions counts n revisions kept, dropped or restored (tools.RevisionObserver).
func (m *Metrics) Revisions(event string, n int) { m.revisions.WithLabelValues(event).Add(float64(n)) }

// knownQuotas bounds the kind label of the quota metrics.
var knownQuotas = map[string]bool{"exports": true, "kept-aside data": true, "trial shadows": true}

// Quota observes a user's usage of the quota of kind after a change, or a refusal by it
// (quota.Observer).
func (m *Metrics) Quota(kind string, used int64, refused bool) {
	if !knownQuotas[kind] {
		kind = "other"
	}
	if refused {
		m.quotaRefusals.WithLabelValues(kind).Inc()
		return
	}
	m.userStorage.WithLabelValues(kind).Observe(float64(used))
}
