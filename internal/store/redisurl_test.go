package store

import (
	"strings"
	"testing"
)

func TestParseRedisURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want string // the error's words, or for a good URL the form and its name
	}{
		{"redis://127.0.0.1:6379/2", "single redis 127.0.0.1:6379/2"},
		{"redis://:pw@127.0.0.1:6379/0?namespace=x:&replicas=1", "single redis 127.0.0.1:6379/0"},
		{"redis-sentinel://:secret@10.0.0.1:26379,10.0.0.2:26379/mymaster?db=3&sentinel_password=s2", "failover redis sentinel 10.0.0.1:26379,10.0.0.2:26379 master mymaster/3"},
		{"rediss-sentinel://s1:26379/m", "failover redis sentinel s1:26379 master m/0"},
		{"redis-cluster://:secret@n1:7000,n2:7001,[::1]:7002", "cluster redis cluster n1:7000,n2:7001,[::1]:7002"},
		{"rediss-cluster://n1:7000", "cluster redis cluster n1:7000"},
		{"redis-sentinel://s1:26379", "no master name"},
		{"redis-sentinel://s1:26379/", "no master name"},
		{"redis-sentinel://s1:26379/m/extra", "after the master name"},
		{"redis-sentinel://s1/m", `address "s1" is not host:port`},
		{"redis-sentinel://s1:0/m", "port must be a number"},
		{"redis-sentinel://s1:99999/m", "port must be a number"},
		{"redis-sentinel://s1:1,,s2:2/m", `address "" is not host:port`},
		{"redis-sentinel://s1:1,s1:1/m", "given twice"},
		{"redis-sentinel:///m", "no addresses"},
		{"redis-sentinel://s1:1/m?db=x", `db="x"`},
		{"redis-sentinel://s1:1/m?db=-1", `db="-1"`},
		{"redis-sentinel://s1:1/m?color=red", `"color" is not one of`},
		{"redis-sentinel://s1:1/m?db=1&db=2", "given 2 times"},
		{"redis-sentinel://secret@s1:1/m", "user info must be"},
		{"redis-cluster://n1:7000/0", "one database"},
		{"redis-cluster://n1:7000?db=1", `"db" is not one of`},
		{"redis-cluster://n1:7000?replicas=99", "replicas="},
		{"redis-cluster://n1:7000?namespace={x}", "hash slot"},
		{"redis-cluster://n1:7000#frag", "fragment"},
		{"redis-cluster://n1:7000?%zz", "query"},
		{"memcache://h:1", `scheme "memcache" is not one of`},
		{"no-scheme", "not a URL"},
		{"redis://u:secret@h:1/%zz", "invalid"},
	} {
		f, err := parseRedisURL(tc.url)
		got := ""
		switch {
		case err != nil:
			got = err.Error()
		case f.single != nil:
			got = "single " + f.name
		case f.failover != nil:
			got = "failover " + f.name
		case f.cluster != nil:
			got = "cluster " + f.name
		}
		if !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.url, got, tc.want)
		}
		if strings.Contains(got, "secret") {
			t.Errorf("%s: the password is in %q", tc.url, got)
		}
	}
	f, err := parseRedisURL("redis-sentinel://u:p%40w@s1:1/m?sentinel_user=su&sentinel_password=sp&namespace=n:")
	if err != nil {
		t.Fatal(err)
	}
	if o := f.failover; o.Username != "u" || o.Password != "p@w" || o.SentinelUsername != "su" || o.SentinelPassword != "sp" || f.ns != "n:" || f.replicas != 1 {
		t.Errorf("sentinel options: %+v ns %q replicas %d", o, f.ns, f.replicas)
	}
	if f, _ := parseRedisURL("rediss-cluster://n1:7000?replicas=0"); f.cluster.TLSConfig == nil || f.cluster.TLSConfig.ServerName != "n1" || f.replicas != 0 {
		t.Errorf("rediss-cluster: %+v", f)
	}
	if f, _ := parseRedisURL("redis://h:1/0"); f.replicas != 0 {
		t.Errorf("one server waits for %d replicas by default", f.replicas)
	}
}

// The redacted form of any URL holds neither its password nor a sentinel_password.
func TestRedactURL(t *testing.T) {
	t.Parallel()
	got := redactURL("rediss-sentinel://user:hunter2@h1:1,h2:2/m?sentinel_password=hunter3&db=1")
	if strings.Contains(got, "hunter") || got != "rediss-sentinel://REDACTED@h1:1,h2:2/m?sentinel_password=REDACTED&db=1" {
		t.Errorf("redacted: %q", got)
	}
}

// FuzzParseRedisURL: no input panics, and no error repeats a password.
func FuzzParseRedisURL(f *testing.F) {
	for _, s := range []string{"redis-sentinel://:pw@h:1,h:2/m?db=1", "redis-cluster://h:1,[::1]:2?replicas=1", "redis://u:pw@h:1/0",
		"rediss-sentinel://a@b@c:1/m", "redis-cluster://:%zz@h:1", "redis-sentinel://h:1/m?sentinel_password=pw"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		form, err := parseRedisURL(raw)
		if err == nil && form.single == nil && form.failover == nil && form.cluster == nil {
			t.Fatalf("%q: no form and no error", raw)
		}
		if err != nil {
			if _, rest, ok := strings.Cut(raw, "://"); ok {
				hosts, _, _ := strings.Cut(rest, "/")
				if at := strings.LastIndex(hosts, "@"); at >= 0 {
					if _, pw, ok := strings.Cut(hosts[:at], ":"); ok && len(pw) >= 6 && strings.Contains(err.Error(), pw) {
						t.Fatalf("%q: the password is in the error %q", raw, err)
					}
				}
			}
		}
		red := redactURL(raw)
		if _, rest, ok := strings.Cut(raw, "://"); ok {
			hosts, _, _ := strings.Cut(strings.SplitN(rest, "?", 2)[0], "/")
			if at := strings.LastIndex(hosts, "@"); at >= 0 && !strings.Contains(red, "REDACTED@") {
				t.Fatalf("%q redacted to %q", raw, red)
			}
		}
	})
}
