package storetest

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ClusterSet is a Redis Cluster of three primaries, each with a replica, that fails a primary
// over after a second without an answer.
type ClusterSet struct {
	t     testing.TB
	Nodes []*RedisServer
}

// ClusterRedis starts six cluster-enabled servers, makes them a cluster with redis-cli
// --cluster create (three primaries, a replica each), and waits until every node sees the
// cluster ok and every replica is in sync.
func ClusterRedis(t testing.TB) *ClusterSet {
	t.Helper()
	cli := Need(t, "redis-cli", "redis-tools")
	c := &ClusterSet{t: t}
	args := []string{"--cluster", "create"}
	for range 6 {
		dir := t.TempDir()
		n := redisWith(t, "--cluster-enabled", "yes", "--cluster-config-file", dir+"/nodes.conf", "--cluster-node-timeout", "1000")
		c.Nodes = append(c.Nodes, n)
		args = append(args, n.Addr())
	}
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, n := range c.Nodes {
		waitFor(t, n.Addr()+" to see the cluster ok", func(ctx context.Context) bool {
			cl := redis.NewClient(&redis.Options{Addr: n.Addr(), MaxRetries: -1})
			defer cl.Close()
			info, err := cl.ClusterInfo(ctx).Result()
			if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:6") {
				return false
			}
			repl, err := cl.Info(ctx, "replication").Result()
			return err == nil && (strings.Contains(repl, "role:master") || replicaInSync(ctx, n.Addr()))
		})
	}
	return c
}

// URL returns the cluster's redis-cluster:// URL (every node a seed).
func (c *ClusterSet) URL() string {
	addrs := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		addrs[i] = n.Addr()
	}
	return "redis-cluster://" + strings.Join(addrs, ",")
}

// PrimaryOf returns the node that serves key's hash slot now.
func (c *ClusterSet) PrimaryOf(key string) *RedisServer {
	c.t.Helper()
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.Nodes[0].Addr()}})
	defer cl.Close()
	node, err := cl.MasterForKey(context.Background(), key)
	if err != nil {
		c.t.Fatalf("the primary of %q: %v", key, err)
	}
	for _, n := range c.Nodes {
		if n.Addr() == node.Options().Addr {
			return n
		}
	}
	c.t.Fatalf("the primary of %q is %s, none of the nodes", key, node.Options().Addr)
	return nil
}
