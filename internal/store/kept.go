package store

import "strings"

// keptByReplica lists the key prefixes of what must not be lost when a Redis primary fails: a
// write of such a key is acknowledged only once a replica holds it (Redis WAIT, when the
// deployment has replicas). Everything else (MCP sessions and their event streams, the proxy's
// session owners and refresh leases, the readiness probe) may be lost in a failover: a client
// whose session is gone is told 404 and starts a new one. This is the one place of the policy;
// docs/replicas.md's "What a failover risks" says the same in words.
var keptByReplica = []string{
	"proxy:client:",        // registered OAuth clients
	"proxy:consent:",       // the user's consents
	"proxy:request:",       // sign-ins under way
	"proxy:grant:",         // grants: the card service's tokens, sealed
	"proxy:grant-secrets:", // the codes and tokens issued from a grant
	"proxy:secret:",        // codes and refresh tokens (and their single use)
	"proxy:upstream:",      // the card service's registrations
	"aside:",               // kept-aside tavern data
	"rev:",                 // revisions of what writes replaced (internal/revisions.Prefixes)
	"export:",              // exports sent by resource_link, until they expire (tools)
	"exports-of:",          // the list of a user's exports, for resources/list (tools)
	"signing:",             // the key of confirmation tokens and download URLs (tools)
	"confirm:",             // confirmation tokens spent: a token is good once (tools)
}

// KeptByReplica reports whether key is one of what must not be lost (its write waits for a
// replica).
func KeptByReplica(key string) bool {
	for _, p := range keptByReplica {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}
