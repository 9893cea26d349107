package tools

import (
	"context"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// Caching hints (MCP 2026-07-28: ttlMs and cacheScope on list and read results) that say what
// each answer is: the tool list (unless --dynamic-toolsets changes it during a session), the
// prompts, the resource templates, server/discover and the card preview's page (the 412 KB MCP
// App bundle) are the same for every user of a server version, so clients and shared caches
// may keep them for staticTTL; resources/list (the caller's export links) and every other
// resources/read (a user's cards and exports) are private and fetched again each time.
const staticTTL = time.Hour

// cacheOptions returns the server options that set the hints of the static answers.
func cacheOptions(dynamic bool) []server.ServerOption {
	ttl := staticTTL.Milliseconds()
	opts := []server.ServerOption{
		server.WithCacheHints(0, mcp.CacheScopePrivate),
		server.WithMethodCacheHints(mcp.MethodPromptsList, ttl, mcp.CacheScopePublic),
		server.WithMethodCacheHints(mcp.MethodResourcesTemplatesList, ttl, mcp.CacheScopePublic),
		server.WithMethodCacheHints(mcp.MethodServerDiscover, ttl, mcp.CacheScopePublic),
	}
	if !dynamic {
		opts = append(opts, server.WithMethodCacheHints(mcp.MethodToolsList, ttl, mcp.CacheScopePublic))
	}
	return opts
}

// cachePreviewRead marks a resources/read of the card preview's page as static: public, for
// staticTTL (other reads keep the private default).
func cachePreviewRead(hooks *server.Hooks) {
	hooks.AddAfterReadResource(func(_ context.Context, _ any, req *mcp.ReadResourceRequest, res *mcp.ReadResourceResult) {
		if res != nil && req.Params.URI == previewURI {
			res.SetCacheHints(staticTTL.Milliseconds(), mcp.CacheScopePublic)
		}
	})
}
