package store

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The forms of a Redis --store (docs/replicas.md documents them):
//
//	redis://[user:password@]host:port[/db][?namespace=p:&replicas=N]     one server (rediss:// for TLS)
//	redis-sentinel://[user:password@]host:port[,host:port...]/MASTER[?db=N&sentinel_user=u&sentinel_password=p&namespace=p:&replicas=N]
//	redis-cluster://[user:password@]host:port[,host:port...][?namespace=p:&replicas=N]
//
// with rediss-sentinel:// and rediss-cluster:// for TLS (to the sentinels and the servers
// alike). The password in the user info is the servers'; the sentinels' is sentinel_password.
// replicas is how many replicas must hold a write of what must not be lost before it is
// acknowledged (WAIT): by default 1 for Sentinel and Cluster, 0 for one server.
const (
	schemeRedis          = "redis"
	schemeRedisTLS       = "rediss"
	schemeSentinel       = "redis-sentinel"
	schemeSentinelTLS    = "rediss-sentinel"
	schemeCluster        = "redis-cluster"
	schemeClusterTLS     = "rediss-cluster"
	maxRedisReplicasWait = 16
)

// redisForm is a parsed Redis --store: exactly one of single, failover and cluster is set.
type redisForm struct {
	single   *redis.Options
	failover *redis.FailoverOptions
	cluster  *redis.ClusterOptions
	ns       string
	replicas int
	name     string // for logs and /readyz, without credentials
}

// isRedisURL reports whether spec names one of the Redis forms.
func isRedisURL(spec string) bool {
	scheme, _, ok := strings.Cut(spec, "://")
	if !ok {
		return false
	}
	switch scheme {
	case schemeRedis, schemeRedisTLS, schemeSentinel, schemeSentinelTLS, schemeCluster, schemeClusterTLS:
		return true
	}
	return false
}

// parseRedisURL reads a Redis --store. Its errors name what was wrong and never hold the
// password.
func parseRedisURL(raw string) (*redisForm, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return nil, errors.New("not a URL: want redis://, rediss://, redis-sentinel://, rediss-sentinel://, redis-cluster:// or rediss-cluster://")
	}
	rest, query, _ := strings.Cut(rest, "?")
	if strings.Contains(rest, "#") || strings.Contains(query, "#") {
		return nil, errors.New("a fragment (#...) has no meaning here; a '#' in a password must be written %23")
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("the query (after '?') is not key=value pairs joined by '&': %v", err)
	}
	f := &redisForm{ns: DefaultNamespace}
	if v, ok := one(q, "namespace"); ok {
		if strings.ContainsAny(v, "{}") {
			return nil, fmt.Errorf("namespace %q holds '{' or '}': on a Redis Cluster they would put every key in one hash slot", v)
		}
		f.ns = v
	}
	replicas, hasReplicas := one(q, "replicas")
	if hasReplicas {
		n, err := strconv.Atoi(replicas)
		if err != nil || n < 0 || n > maxRedisReplicasWait {
			return nil, fmt.Errorf("replicas=%q: want how many replicas must hold a write before it is acknowledged, 0 to %d", replicas, maxRedisReplicasWait)
		}
		f.replicas = n
	}
	for k, v := range q {
		if len(v) > 1 {
			return nil, fmt.Errorf("query parameter %q is given %d times", k, len(v))
		}
	}

	if scheme == schemeRedis || scheme == schemeRedisTLS {
		// One server: go-redis's own URL format, less our parameters.
		q.Del("namespace")
		q.Del("replicas")
		u := scheme + "://" + rest
		if len(q) > 0 {
			u += "?" + q.Encode()
		}
		opts, err := redis.ParseURL(u)
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			return nil, ue.Err // url.Error repeats the URL, password and all
		} else if err != nil {
			return nil, err
		}
		f.single = opts
		f.name = "redis " + opts.Addr + "/" + strconv.Itoa(opts.DB)
		return f, nil
	}
	tlsOn := false
	switch scheme {
	case schemeSentinelTLS, schemeClusterTLS:
		tlsOn = true
	case schemeSentinel, schemeCluster:
	default:
		return nil, fmt.Errorf("scheme %q is not one of redis, rediss, redis-sentinel, rediss-sentinel, redis-cluster, rediss-cluster", scheme)
	}
	if !hasReplicas {
		f.replicas = 1
	}
	hosts, path, _ := strings.Cut(rest, "/")
	var user, password string
	if at := strings.LastIndex(hosts, "@"); at >= 0 {
		info := hosts[:at]
		hosts = hosts[at+1:]
		u, p, hasPass := strings.Cut(info, ":")
		if !hasPass {
			return nil, errors.New("the user info must be [user]:password@ (a ':' before the password)")
		}
		if user, err = url.PathUnescape(u); err != nil {
			return nil, errors.New("the user name is not properly %-escaped")
		}
		if password, err = url.PathUnescape(p); err != nil {
			return nil, errors.New("the password is not properly %-escaped")
		}
	}
	addrs, err := parseHosts(hosts)
	if err != nil {
		return nil, err
	}
	var tlsConf *tls.Config
	if tlsOn {
		host, _, _ := net.SplitHostPort(addrs[0])
		tlsConf = &tls.Config{MinVersion: tls.VersionTLS12, ServerName: host}
	}
	known := map[string]bool{"namespace": true, "replicas": true}
	if scheme == schemeCluster || scheme == schemeClusterTLS {
		if path != "" {
			return nil, fmt.Errorf("a Redis Cluster has one database: no path (/%s) after the addresses", path)
		}
		for k := range q {
			if !known[k] {
				return nil, fmt.Errorf("query parameter %q is not one of namespace, replicas", k)
			}
		}
		f.cluster = &redis.ClusterOptions{Addrs: addrs, Username: user, Password: password, TLSConfig: tlsConf}
		f.name = "redis cluster " + strings.Join(addrs, ",")
		return f, nil
	}
	// Sentinel.
	master, extra, _ := strings.Cut(path, "/")
	if master == "" {
		return nil, errors.New("no master name: want redis-sentinel://host:port[,host:port...]/MASTER_NAME (the name the sentinels monitor)")
	}
	if extra != "" {
		return nil, fmt.Errorf("%q after the master name: the database is ?db=N", "/"+extra)
	}
	if master, err = url.PathUnescape(master); err != nil || strings.ContainsAny(master, " \t\r\n") {
		return nil, fmt.Errorf("master name %q is not a name the sentinels could monitor", path)
	}
	fo := &redis.FailoverOptions{MasterName: master, SentinelAddrs: addrs, Username: user, Password: password, TLSConfig: tlsConf}
	known["db"], known["sentinel_user"], known["sentinel_password"] = true, true, true
	for k := range q {
		if !known[k] {
			return nil, fmt.Errorf("query parameter %q is not one of db, sentinel_user, sentinel_password, namespace, replicas", k)
		}
	}
	if v, ok := one(q, "db"); ok {
		if fo.DB, err = strconv.Atoi(v); err != nil || fo.DB < 0 {
			return nil, fmt.Errorf("db=%q: want a database number, 0 or more", v)
		}
	}
	fo.SentinelUsername, _ = one(q, "sentinel_user")
	fo.SentinelPassword, _ = one(q, "sentinel_password")
	f.failover = fo
	f.name = "redis sentinel " + strings.Join(addrs, ",") + " master " + master + "/" + strconv.Itoa(fo.DB)
	return f, nil
}

// one returns a query parameter's value, and whether it is there.
func one(q url.Values, k string) (string, bool) {
	v, ok := q[k]
	if !ok || len(v) == 0 {
		return "", false
	}
	return v[0], true
}

// parseHosts reads a comma-separated list of host:port.
func parseHosts(s string) ([]string, error) {
	if s == "" {
		return nil, errors.New("no addresses: want host:port[,host:port...] after '://'")
	}
	var out []string
	seen := map[string]bool{}
	for _, hp := range strings.Split(s, ",") {
		host, port, err := net.SplitHostPort(hp)
		if err != nil || host == "" {
			return nil, fmt.Errorf("address %q is not host:port (an IPv6 address in brackets: [::1]:26379)", hp)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("address %q: the port must be a number from 1 to 65535", hp)
		}
		if strings.ContainsAny(host, "/?#@ ") {
			return nil, fmt.Errorf("address %q: %q is not a host name", hp, host)
		}
		a := net.JoinHostPort(host, port)
		if seen[a] {
			return nil, fmt.Errorf("address %q is given twice", hp)
		}
		seen[a] = true
		out = append(out, a)
	}
	return out, nil
}
