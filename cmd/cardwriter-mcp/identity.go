package main

import (
	"fmt"
	"net/http"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// identityOperation is the operationId of the identity operation: the API document names it
// but shows no path, so the contract's is a guess that --contract may correct.
const identityOperation = "getMe"

// identitySource says, for doctor and probe, whose revisions and exports are (the source of
// identity in use) and what the identity operation answered (status 0: not asked). No write
// depends on that operation: over stdio revisions are the local profile's; over HTTP the
// grant's user learned at sign-in (or the grant), in passthrough the service's user when the
// operation answers, else a digest of the token (docs/revisions.md, "Whose").
func identitySource(table *schema.Table, status int, profile string) string {
	op := identityOperation + " (the contract's guess)"
	if o, ok := table.Lookup(identityOperation); ok {
		op = fmt.Sprintf("%s (%s %s", o.ID, o.Method, o.Path)
		if src := table.Source(); src != "" {
			op += ", corrected by " + src
		} else if o.Assumed {
			op += ", a guess"
		}
		op += ")"
	}
	var answer string
	switch {
	case status == 0:
		answer = "not asked"
	case status/100 == 2:
		answer = "answers: it names the user in whoami, audit lines and limits"
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented:
		answer = fmt.Sprintf("answers %d: missing here (correct it with --contract); writes do not need it", status)
	default:
		answer = fmt.Sprintf("answers %d", status)
	}
	return fmt.Sprintf("revisions and exports here are the local profile's (%s); over HTTP, the signed-in user's (else the grant's, or in passthrough the token's digest). Identity operation %s %s",
		profile, op, answer)
}
