package tools

import (
	"context"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// TestCacheHints: on 2026-07-28 the static answers (tools/list, prompts/list, the resource
// templates, the card preview's page) are public for an hour; a user's data (resources/list, a
// card read) is private and fetched again; with --dynamic-toolsets the tool list is private too.
func TestCacheHints(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hints := func(r *mcp.CacheableResult) (int64, mcp.CacheScope) { ttl, _ := r.TTL(); return ttl, r.CacheScope }
	check := func(t *testing.T, what string, ttl int64, scope mcp.CacheScope, wantTTL int64, wantScope mcp.CacheScope) {
		t.Helper()
		if ttl != wantTTL || scope != wantScope {
			t.Errorf("%s: ttlMs %d, cacheScope %q; want %d, %q", what, ttl, scope, wantTTL, wantScope)
		}
	}
	hour := staticTTL.Milliseconds()
	e, _ := newTavernEnv(t, tavernEnvConfig{modern: true})
	tl, err := e.client.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ttl, scope := hints(&tl.CacheableResult)
	check(t, "tools/list", ttl, scope, hour, mcp.CacheScopePublic)
	pl, err := e.client.ListPrompts(ctx, mcp.ListPromptsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ttl, scope = hints(&pl.CacheableResult)
	check(t, "prompts/list", ttl, scope, hour, mcp.CacheScopePublic)
	rl, err := e.client.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ttl, scope = hints(&rl.CacheableResult)
	check(t, "resources/list", ttl, scope, 0, mcp.CacheScopePrivate)
	read := func(uri string) *mcp.ReadResourceResult {
		req := mcp.ReadResourceRequest{}
		req.Params.URI = uri
		res, err := e.client.ReadResource(ctx, req)
		if err != nil {
			t.Fatalf("read %s: %v", uri, err)
		}
		return res
	}
	ttl, scope = hints(&read(previewURI).CacheableResult)
	check(t, "the card preview's page", ttl, scope, hour, mcp.CacheScopePublic)
	roleID := e.ok("create_card", `{"roleName":"Cached"}`)["roleId"].(string)
	ttl, scope = hints(&read("card://" + roleID).CacheableResult)
	check(t, "a card", ttl, scope, 0, mcp.CacheScopePrivate)

	d, _ := newTavernEnv(t, tavernEnvConfig{modern: true, opts: Options{Dynamic: true}})
	tl, err = d.client.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ttl, scope = hints(&tl.CacheableResult)
	check(t, "tools/list with dynamic toolsets", ttl, scope, 0, mcp.CacheScopePrivate)
}
