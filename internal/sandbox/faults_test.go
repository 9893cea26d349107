package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParseFaults(t *testing.T) {
	t.Parallel()
	ok := []struct {
		spec string
		want func(*Faults) bool
	}{
		{"", func(f *Faults) bool { return len(f.Rates) == 0 && f.Latency == Latency{} }},
		{"seed=7,latency=5ms-40ms,429=0.1,reset-after=0.05", func(f *Faults) bool {
			return f.Seed == 7 && f.Latency == Latency{Min: 5 * time.Millisecond, Max: 40 * time.Millisecond} &&
				f.Rates[FaultRateLimited] == 0.1 && f.Rates[FaultResetAfter] == 0.05
		}},
		{"latency=20ms", func(f *Faults) bool { return f.Latency == Latency{Min: 20 * time.Millisecond} }},
		{"latency=exp:10ms,ops=createCard+uploadImage", func(f *Faults) bool {
			return f.Latency.Exponential && f.Latency.Min == 10*time.Millisecond && len(f.Operations) == 2
		}},
		{"500=0.5,503=0.5", func(f *Faults) bool { return f.Rates[FaultInternal] == 0.5 }},
	}
	for _, tt := range ok {
		f, err := ParseFaults(tt.spec)
		if err != nil || !tt.want(f) {
			t.Errorf("ParseFaults(%q) = %+v, %v", tt.spec, f, err)
		}
	}
	bad := []struct{ spec, want string }{
		{"latency", "is not key=value"},
		{"seed=-1", "seed"},
		{"latency=fast", "is not D, D1-D2 or exp:D"},
		{"latency=40ms-5ms", "is not D, D1-D2 or exp:D"},
		{"teapot=0.1", `unknown key "teapot"`},
		{"429=1.5", "not a probability"},
		{"429=0.6,500=0.6", "add up to 1.2"},
	}
	for _, tt := range bad {
		if _, err := ParseFaults(tt.spec); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseFaults(%q): %v; want %q", tt.spec, err, tt.want)
		}
	}
}

// TestFaultsDeterministic: the same seed gives the same latencies and faults.
func TestFaultsDeterministic(t *testing.T) {
	t.Parallel()
	draws := func(seed uint64) []string {
		f, err := ParseFaults("latency=1ms-9ms,429=0.2,500=0.1,reset-after=0.1,truncate=0.1")
		if err != nil {
			t.Fatal(err)
		}
		f.Seed = seed
		var out []string
		for range 200 {
			d, fault := f.draw()
			out = append(out, d.String()+" "+string(fault))
		}
		return out
	}
	a, b, c := draws(1), draws(1), draws(2)
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Error("the same seed drew differently")
	}
	if strings.Join(a, ",") == strings.Join(c, ",") {
		t.Error("another seed drew the same")
	}
	seen := map[string]int{}
	for _, d := range a {
		seen[d[strings.Index(d, " ")+1:]]++
	}
	if seen["429"] < 20 || seen[""] < 60 {
		t.Errorf("rates far from the spec: %v", seen)
	}
}

// faultEnv is a sandbox with faults on createCard only, served over real HTTP.
type faultEnv struct {
	svc    *Service
	faults *Faults
	url    string
}

func newFaultEnv(t *testing.T) *faultEnv {
	t.Helper()
	f := &Faults{Rates: map[Fault]float64{}, Operations: []string{"createCard"}}
	svc, err := New(Options{DemoToken: "fault-token", Faults: f})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(svc.Handler())
	t.Cleanup(srv.Close)
	return &faultEnv{svc: svc, faults: f, url: srv.URL}
}

func (e *faultEnv) set(fault Fault) {
	e.faults.mu.Lock()
	defer e.faults.mu.Unlock()
	e.faults.Rates = map[Fault]float64{}
	if fault != "" {
		e.faults.Rates[fault] = 1
	}
}

// create posts a card creation with key through client; it returns the status and body, or the
// transport error.
func (e *faultEnv) create(ctx context.Context, client *http.Client, base, key string) (int, string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/open/v1/role", strings.NewReader(`{"roleName":"Faulty","idempotencyKey":"`+key+`"}`))
	req.Header.Set("Authorization", "Bearer fault-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data), err
}

// TestFaults: each fault, over real HTTP and through the in-process transport; a second call
// with the same idempotency key and no fault tells whether the first was applied (200: it
// was, the card is returned again; 201: it was not, the card is made now).
func TestFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fault   Fault
		status  int    // of the faulted call; 0: a transport error
		code    string // the envelope's error
		applied bool
	}{
		{FaultRateLimited, 429, "rate_limited", false},
		{FaultInternal, 500, "internal", false},
		{FaultUnavailable, 503, "unavailable", false},
		{FaultResetBefore, 0, "", false},
		{FaultResetAfter, 0, "", true},
		{FaultTruncate, 0, "", true},
		{FaultSlowBody, 201, "", true},
	}
	for _, tt := range tests {
		for _, inProcess := range []bool{false, true} {
			name := string(tt.fault)
			if inProcess {
				name += " in-process"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				e := newFaultEnv(t)
				client, base := http.DefaultClient, e.url
				if inProcess {
					client, base = &http.Client{Transport: e.svc.RoundTripper()}, "http://sandbox.localhost"
				}
				ctx := context.Background()
				e.set(tt.fault)
				status, body, err := e.create(ctx, client, base, "k-1")
				switch {
				case tt.status == 0 && err == nil:
					t.Fatalf("want a broken connection, got %d %s", status, body)
				case tt.status != 0 && (err != nil || status != tt.status):
					t.Fatalf("got %d %s %v, want %d", status, body, err, tt.status)
				}
				if tt.code != "" {
					var env struct {
						Error     string `json:"error"`
						Retryable bool   `json:"retryable"`
					}
					if json.Unmarshal([]byte(body), &env) != nil || env.Error != tt.code || !env.Retryable {
						t.Errorf("envelope %s, want %s retryable", body, tt.code)
					}
				}
				e.set("")
				again, body, err := e.create(ctx, client, base, "k-1")
				if err != nil {
					t.Fatal(err)
				}
				if applied := again == http.StatusOK; applied != tt.applied {
					t.Errorf("applied = %v (second call %d %s), want %v", applied, again, body, tt.applied)
				}
			})
		}
	}
}

func TestFaultStall(t *testing.T) {
	t.Parallel()
	e := newFaultEnv(t)
	e.set(FaultStall)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if _, _, err := e.create(ctx, http.DefaultClient, e.url, "k-1"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a stalled answer: %v, want the client's deadline", err)
	}
	// Other operations are not faulted (ops=createCard).
	req, _ := http.NewRequest(http.MethodGet, e.url+"/open/v1/trial-cards", nil)
	req.Header.Set("Authorization", "Bearer fault-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("listTrialCards: %v %v", resp, err)
	}
	if resp != nil {
		resp.Body.Close()
	}
}
