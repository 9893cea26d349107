package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"
)

// Protocol version negotiation as the specification words it, where mcp-go answers otherwise:
// a request that declares a version the server does not serve gets the JSON-RPC error
// UnsupportedProtocolVersion (-32022, data {requested, supported}) on both transports, not a
// text/plain 400 or "Invalid session ID" (HTTP) and not an answer (stdio, where mcp-go serves any
// version it does not take for 2026-07-28 as a legacy request).

// unsupportedVersion returns the JSON-RPC error answering request id that declared version.
func unsupportedVersion(id any, version string, supported []string) []byte {
	e := mcp.UnsupportedProtocolVersionError{Version: version, Supported: supported}.JSONRPCError()
	e.ID = mcp.NewRequestId(id)
	e.Error.Message = "Unsupported protocol version: " + version
	data, _ := json.Marshal(e) // strings and a decoded id: cannot fail
	return data
}

// requestID returns the id of a JSON-RPC message, nil when it has none or is not one.
func requestID(msg []byte) any {
	var m struct {
		ID any `json:"id"`
	}
	_ = json.Unmarshal(msg, &m)
	return m.ID
}

// protocolHTTP is the MCP endpoint's protocol layer, in front of mcp-go's streamable HTTP
// server: a Mcp-Protocol-Version the server does not serve (1900-01-01, or 2024-11-05, which has
// no streamable HTTP) is answered 400 with UnsupportedProtocolVersion; a 2026-07-28 request's
// Last-Event-ID is ignored (its streams are not resumable), not refused; and every response that
// may stream carries X-Accel-Buffering: no, so that a proxy (nginx) passes progress and
// notifications on as they come instead of buffering the stream.
func protocolHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost || r.Method == http.MethodGet {
			w.Header().Set("X-Accel-Buffering", "no")
		}
		v := r.Header.Get(mcp.HeaderProtocolVersion)
		if v == "" {
			next.ServeHTTP(w, r)
			return
		}
		if !slices.Contains(httpProtocolVersions, v) {
			var id any
			if r.Method == http.MethodPost && r.Body != nil {
				if body, err := io.ReadAll(r.Body); err == nil {
					id = requestID(body)
				}
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(unsupportedVersion(id, v, httpProtocolVersions))
			return
		}
		if r.Method == http.MethodPost && mcp.IsModernProtocol(v) && r.Header.Get(mcp.HeaderLastEventID) != "" {
			r = r.Clone(r.Context())
			r.Header.Del(mcp.HeaderLastEventID)
		}
		next.ServeHTTP(w, r)
	})
}

// metaVersionKey is how a request's _meta names its protocol version, as JSON text.
var metaVersionKey = []byte(`"` + mcp.MetaKeyProtocolVersion + `"`)

// declaredVersion returns the protocol version a JSON-RPC line declares in its _meta, and
// whether it declares one, without decoding the line: the key is looked for as raw JSON text (in
// a string value its quotes would be escaped, so a match is a key) and its string value read.
func declaredVersion(line []byte) (string, bool) {
	i := bytes.Index(line, metaVersionKey)
	if i < 0 {
		return "", false
	}
	rest := bytes.TrimLeft(line[i+len(metaVersionKey):], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return "", false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' {
		return "", false
	}
	end := bytes.IndexByte(rest[1:], '"')
	if end < 0 {
		return "", false
	}
	return string(rest[1 : 1+end]), true
}

// stdioUnsupported returns the answer to a stdio line that declares a protocol version the
// server does not serve, nil for any other line (served as it is). A notification is dropped
// unanswered (ok true, answer nil).
func stdioUnsupported(line []byte) (answer []byte, refused bool) {
	v, ok := declaredVersion(line)
	if !ok || mcp.IsValidProtocolVersion(v) {
		return nil, false
	}
	id := requestID(line)
	if id == nil {
		return nil, true
	}
	return unsupportedVersion(id, v, mcp.ValidProtocolVersions), true
}
