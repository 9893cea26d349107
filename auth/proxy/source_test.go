package proxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// fromSource sends a client's requests as a reverse proxy would forward them for addr.
type fromSource struct {
	addr string
	next http.RoundTripper
}

func (f fromSource) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-Forwarded-For", f.addr)
	return f.next.RoundTrip(r)
}

func via(addr string) *http.Client {
	return &http.Client{Transport: fromSource{addr: addr, next: http.DefaultTransport},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

func (e *env) count(prefix string) int {
	n := 0
	_ = e.kv.Scan(context.Background(), prefix, func(string) error { n++; return nil })
	return n
}

// TestFloodFromOneSource: a source that registers clients and starts authorizations far past
// the server-wide bounds only evicts its own oldest entries; another source registers and
// signs in all the same.
func TestFloodFromOneSource(t *testing.T) {
	e := newEnv(t, envOptions{bounds: &Options{MaxPending: 30, MaxPendingPerSource: 5, MaxClients: 30, MaxClientsPerSource: 5,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}})
	attacker := via("203.0.113.5")
	var first, last string
	for i := range 100 {
		status, id := e.registerFrom(attacker, "Flood", "https://evil.example/phish")
		if status != http.StatusCreated {
			t.Fatalf("registration %d of the flood: %d", i, status)
		}
		if first == "" {
			first = id
		}
		last = id
	}
	if n := e.count(keyClient); n > 5 {
		t.Errorf("%d clients kept from one source, want at most 5", n)
	}
	if _, err := e.store.GetClient(context.Background(), first); err == nil {
		t.Error("the source's first registration was not evicted")
	}
	flood := &client{e: e, id: last, redirectURI: "https://evil.example/phish"}
	for i := range 100 {
		resp, err := attacker.Get(flood.authURL(flood.newRequest()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/consent") {
			t.Fatalf("authorization %d of the flood: %d %s", i, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	if n := e.count(keyRequest); n > 5 {
		t.Errorf("%d authorization requests kept from one source, want at most 5", n)
	}

	// Another source registers and signs in.
	victim := via("198.51.100.7")
	status, id := e.registerFrom(victim, "Victim", "http://127.0.0.1:9/cb")
	if status != http.StatusCreated {
		t.Fatalf("another source's registration: %d", status)
	}
	c := &client{e: e, id: id, redirectURI: "http://127.0.0.1:9/cb", browser: newBrowser()}
	c.browser.Client.Transport = fromSource{addr: "198.51.100.7", next: http.DefaultTransport}
	if access, _ := c.signIn(); access == "" {
		t.Fatal("no token")
	}
	if _, err := e.store.GetClient(context.Background(), id); err != nil {
		t.Errorf("the client used to sign in: %v", err)
	}
	// More of the flood does not evict the client that signed in (another source's list).
	for range 10 {
		e.registerFrom(attacker, "Flood", "https://evil.example/phish")
	}
	if _, err := e.store.GetClient(context.Background(), id); err != nil {
		t.Errorf("after more of the flood: %v", err)
	}
}

// TestForwardedForOnlyFromTrustedProxies: without trusted proxies, X-Forwarded-For is ignored
// (every request is its remote address's); with them, the rightmost address that is not a
// trusted proxy's is the source; IPv6 sources are told apart by their /64.
func TestForwardedForOnlyFromTrustedProxies(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		trusted []string
		remote  string
		xff     []string
		want    string
	}{
		{nil, "127.0.0.1:5000", []string{"203.0.113.5"}, "127.0.0.1"},
		{nil, "192.0.2.1:5000", nil, "192.0.2.1"},
		{[]string{"127.0.0.0/8"}, "127.0.0.1:5000", []string{"203.0.113.5"}, "203.0.113.5"},
		{[]string{"127.0.0.0/8"}, "127.0.0.1:5000", []string{"198.51.100.1, 203.0.113.5"}, "203.0.113.5"},
		{[]string{"127.0.0.0/8", "10.0.0.0/8"}, "127.0.0.1:5000", []string{"203.0.113.5", "10.1.1.1"}, "203.0.113.5"},
		{[]string{"127.0.0.0/8"}, "192.0.2.9:5000", []string{"203.0.113.5"}, "192.0.2.9"},
		{[]string{"127.0.0.0/8"}, "127.0.0.1:5000", []string{"garbage"}, "127.0.0.1"},
		{[]string{"127.0.0.0/8"}, "127.0.0.1:5000", []string{"2001:db8:1:2:3:4:5:6"}, "2001:db8:1:2::/64"},
		{nil, "[2001:db8:1:2::9]:5000", nil, "2001:db8:1:2::/64"},
		{nil, "[::ffff:192.0.2.4]:5000", nil, "192.0.2.4"},
	} {
		s := &Server{}
		for _, p := range tc.trusted {
			s.opts.TrustedProxies = append(s.opts.TrustedProxies, netip.MustParsePrefix(p))
		}
		r := httptest.NewRequest(http.MethodGet, "/authorize", nil)
		r.RemoteAddr = tc.remote
		for _, v := range tc.xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		if got := s.source(r); got != tc.want {
			t.Errorf("trusted %v, remote %s, X-Forwarded-For %v: %s, want %s", tc.trusted, tc.remote, tc.xff, got, tc.want)
		}
	}
}

// TestRegistrationsExpire: a registration not used to sign in within UnusedClientTTL is gone;
// one used to sign in stays.
func TestRegistrationsExpire(t *testing.T) {
	e := newEnv(t, envOptions{})
	unused := e.register("Never used", "http://127.0.0.1:9/cb")
	used := e.register("Used", "http://127.0.0.1:9/cb")
	used.signIn()
	e.clock.Advance(DefaultUnusedClientTTL + time.Minute)
	nc := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tc := range []struct {
		c    *client
		want int
	}{{unused, http.StatusBadRequest}, {used, http.StatusSeeOther}} {
		resp, err := nc.Get(tc.c.authURL(tc.c.newRequest()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("client %s after an hour: %d, want %d", tc.c.id, resp.StatusCode, tc.want)
		}
	}
	raw, err := e.kv.Get(context.Background(), keyClient+unused.id)
	if err == nil {
		var c Client
		_ = json.Unmarshal(raw, &c)
		if !c.Unused || c.Expires.IsZero() {
			t.Errorf("the unused registration is stored without its expiry: %s", raw)
		}
	}
}

// FuzzSource: whatever the remote address and X-Forwarded-For say, the source is "unknown",
// an address or an IPv6 /64, and never a panic.
func FuzzSource(f *testing.F) {
	f.Add("127.0.0.1:5000", "203.0.113.5")
	f.Add("[::1]:1", "2001:db8::1, 10.0.0.1,,")
	f.Add("garbage", "::ffff:1.2.3.4%eth0")
	s := &Server{}
	s.opts.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.0.0.0/8")}
	f.Fuzz(func(t *testing.T, remote, xff string) {
		r := httptest.NewRequest(http.MethodGet, "/authorize", nil)
		r.RemoteAddr = remote
		r.Header.Set("X-Forwarded-For", xff)
		got := s.source(r)
		if got == "unknown" {
			return
		}
		if a, err := netip.ParseAddr(got); err == nil && a.Is4() {
			return
		}
		if p, err := netip.ParsePrefix(got); err == nil && p.Bits() == 64 && p.Addr().Is6() {
			return
		}
		t.Errorf("source %q of %q, %q", got, remote, xff)
	})
}
