package storetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the name the sentinels of SentinelRedis monitor.
const SentinelMaster = "cardwriter"

// SentinelSet is a Sentinel-managed deployment: a primary, its replica, three sentinels
// (quorum 2) that call a primary down after a second.
type SentinelSet struct {
	t         testing.TB
	Servers   [2]*RedisServer // the first starts as the primary
	Sentinels []int           // their ports
}

// SentinelRedis starts a primary, a replica of it and three sentinels, and waits until the
// replica is in sync and the sentinels know the replica and each other (so that they can fail
// over).
func SentinelRedis(t testing.TB) *SentinelSet {
	t.Helper()
	sbin := Need(t, "redis-sentinel", "redis-sentinel")
	s := &SentinelSet{t: t}
	s.Servers[0] = redisWith(t)
	s.Servers[1] = redisWith(t, "--replicaof", "127.0.0.1", strconv.Itoa(s.Servers[0].Port))
	for range 3 {
		port := FreePort(t)
		dir := t.TempDir()
		conf := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nlogfile %s\n"+
			"sentinel monitor %s 127.0.0.1 %d 2\nsentinel down-after-milliseconds %[4]s 1000\n"+
			"sentinel failover-timeout %[4]s 5000\nsentinel parallel-syncs %[4]s 1\n",
			port, dir, filepath.Join(dir, "sentinel.log"), SentinelMaster, s.Servers[0].Port)
		path := filepath.Join(dir, "sentinel.conf")
		if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(sbin, path)
		if err := cmd.Start(); err != nil {
			t.Fatalf("start redis-sentinel: %v", err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		s.Sentinels = append(s.Sentinels, port)
	}
	waitFor(t, "the replica in sync with the primary", func(ctx context.Context) bool {
		return replicaInSync(ctx, s.Servers[1].Addr())
	})
	for _, port := range s.Sentinels {
		sc := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port), MaxRetries: -1})
		waitFor(t, "sentinel "+strconv.Itoa(port)+" to know the replica and the other sentinels", func(ctx context.Context) bool {
			reps, err := sc.Replicas(ctx, SentinelMaster).Result()
			if err != nil || len(reps) == 0 {
				return false
			}
			others, err := sc.Sentinels(ctx, SentinelMaster).Result()
			return err == nil && len(others) == 2
		})
		sc.Close()
	}
	return s
}

// URL returns the deployment's redis-sentinel:// URL.
func (s *SentinelSet) URL() string {
	addrs := make([]string, len(s.Sentinels))
	for i, p := range s.Sentinels {
		addrs[i] = "127.0.0.1:" + strconv.Itoa(p)
	}
	return "redis-sentinel://" + strings.Join(addrs, ",") + "/" + SentinelMaster
}

// Primary returns the server the sentinels name the primary now.
func (s *SentinelSet) Primary() *RedisServer {
	s.t.Helper()
	sc := redis.NewSentinelClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(s.Sentinels[0]), MaxRetries: -1})
	defer sc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	hp, err := sc.GetMasterAddrByName(ctx, SentinelMaster).Result()
	if err != nil || len(hp) != 2 {
		s.t.Fatalf("the sentinels name no primary: %v", err)
	}
	for _, srv := range s.Servers {
		if strconv.Itoa(srv.Port) == hp[1] {
			return srv
		}
	}
	s.t.Fatalf("the sentinels name %v, none of the servers", hp)
	return nil
}

// replicaInSync reports whether the server at addr is a replica whose link to its primary is up.
func replicaInSync(ctx context.Context, addr string) bool {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	return err == nil && strings.Contains(info, "role:slave") && strings.Contains(info, "master_link_status:up")
}

// waitFor polls cond (every 50 ms, each try bounded to a second) until it holds, and fails the
// test after 30 s.
func waitFor(t testing.TB, what string, cond func(ctx context.Context) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ok := cond(ctx)
		cancel()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30 s for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
