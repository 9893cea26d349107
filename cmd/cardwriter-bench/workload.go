package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// worldbookEntries is how many entries each worldbook document call carries.
const worldbookEntries = 50

// An op is one of the four measured operations, as a REST request and as a tool call.
type op struct {
	Name   string // the contract operationId
	Method string
	Path   string // under /open/v1, with the query
	Body   []byte // nil for none
	Tool   string // our tool
	Peer   string // the peer's tool
	Args   json.RawMessage
}

// seeded is the state each cell's fresh sandbox is given before it is measured.
type seeded struct {
	roleID      string
	worldbookID string
	entryIDs    []string
}

// rest is a minimal client of the sandbox's API, for seeding.
type rest struct {
	base   string // .../open/v1
	token  string
	client *http.Client
}

func (r *rest) do(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, data)
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// seed creates the card, the worldbook with its entries (bound to the card) and two trial cards.
func seed(ctx context.Context, r *rest) (seeded, error) {
	var s seeded
	var card struct {
		RoleID string `json:"roleId"`
	}
	if err := r.do(ctx, "POST", "/role", map[string]any{"roleName": "Captain Mira"}, &card); err != nil {
		return s, err
	}
	s.roleID = card.RoleID
	var wb struct {
		WorldbookID string `json:"worldbookId"`
	}
	if err := r.do(ctx, "POST", "/worldbook", map[string]any{"name": "The Kestrel's lore"}, &wb); err != nil {
		return s, err
	}
	s.worldbookID = wb.WorldbookID
	creates := make([]map[string]any, worldbookEntries)
	for i := range creates {
		creates[i] = map[string]any{"op": "create", "name": fmt.Sprintf("Entry %d", i),
			"content": "Seed text.", "keywords": []string{fmt.Sprintf("kw%d", i)}}
	}
	var doc struct {
		Created []string `json:"createdEntryIds"`
	}
	if err := r.do(ctx, "POST", "/worldbook/"+s.worldbookID+"/document",
		map[string]any{"entries": creates, "binding": map[string]any{"roleId": s.roleID}}, &doc); err != nil {
		return s, err
	}
	if len(doc.Created) != worldbookEntries {
		return s, fmt.Errorf("seeding created %d worldbook entries, want %d", len(doc.Created), worldbookEntries)
	}
	s.entryIDs = doc.Created
	for _, key := range []string{"bench-a", "bench-b"} {
		if err := r.do(ctx, "PUT", "/trial-cards/"+key, map[string]any{"card": map[string]any{
			"roleName": "Trial " + key, "roleWelcome": "Hello there."}}, nil); err != nil {
			return s, err
		}
	}
	return s, nil
}

// ops builds the four operations against the seeded state. The worldbook document call
// rewrites all 50 entries (update ops with name, content and keywords), so that the
// worldbook stays the same size however many calls are made.
func ops(s seeded) []op {
	welcome := map[string]any{
		"roleWelcome": "The Kestrel shudders as it drops out of the jump. Mira looks up from the console: \"You're awake. Good. We have company.\"",
		"alternates":  []string{"Mira is already at the airlock when you wake.", "\"Don't touch that,\" Mira says, not turning around."},
		"prologue":    []string{"Who's following us?", "Where are we?"},
	}
	entries := make([]map[string]any, len(s.entryIDs))
	for i, id := range s.entryIDs {
		entries[i] = map[string]any{"op": "update", "entryId": id, "name": fmt.Sprintf("Entry %d", i),
			"content":  fmt.Sprintf("Lore entry %d: the Kestrel's crew keeps a log of every port, every debt and every promise made along the outer ring.", i),
			"keywords": []string{fmt.Sprintf("kw%d", i), "Kestrel"}}
	}
	doc := map[string]any{"entries": entries}
	withParam := func(body map[string]any, k, v string) json.RawMessage {
		m := map[string]any{k: v}
		for kk, vv := range body {
			m[kk] = vv
		}
		return mustJSON(m)
	}
	return []op{
		{Name: "getCard", Method: "GET", Path: "/role/detail?roleId=" + s.roleID,
			Tool: "get_card", Args: mustJSON(map[string]any{"roleId": s.roleID})},
		{Name: "setOpeningLines", Method: "PATCH", Path: "/role/" + s.roleID + "/welcome", Body: mustJSON(welcome),
			Tool: "set_opening_lines", Args: withParam(welcome, "roleId", s.roleID)},
		{Name: "writeWorldbookDocument", Method: "POST", Path: "/worldbook/" + s.worldbookID + "/document", Body: mustJSON(doc),
			Tool: "write_worldbook_document", Args: withParam(doc, "worldbookId", s.worldbookID)},
		{Name: "listTrialCards", Method: "GET", Path: "/trial-cards",
			Tool: "list_trial_cards", Args: json.RawMessage(`{}`)},
	}
}

// preReads are the reads a write makes before it to keep a revision of the worldbook it
// replaces (tools' worldbookSnapshot): bench/stub must answer them too.
func preReads(s seeded) []op {
	return []op{
		{Name: "getWorldbook", Method: "GET", Path: "/worldbook/detail?worldbookId=" + s.worldbookID},
		{Name: "listWorldbookEntries", Method: "GET", Path: "/worldbook/entry/list?worldbookId=" + s.worldbookID},
	}
}

func mustJSON(v any) json.RawMessage {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return data
}

// A caller makes one call of an operation and reports whether it succeeded.
type caller interface {
	call(ctx context.Context, o *op) error
}

// floorCaller sends the operation straight to the sandbox.
type floorCaller struct {
	base   string
	token  string
	client *http.Client
}

func (f *floorCaller) call(ctx context.Context, o *op) error {
	var body io.Reader
	if o.Body != nil {
		body = bytes.NewReader(o.Body)
	}
	req, err := http.NewRequestWithContext(ctx, o.Method, f.base+o.Path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+f.token)
	req.Header.Set("Accept", "application/json")
	if o.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", o.Name, resp.Status)
	}
	return nil
}

// stubAnswer is one of bench/stub's fixed answers (its Answer).
type stubAnswer struct {
	Method string          `json:"method"`
	Path   string          `json:"path"` // under /open/v1, without the query
	Status int             `json:"status"`
	Body   json.RawMessage `json:"body"`
}

// recordAnswer sends the operation to the sandbox at api and returns its answer for the stub.
func recordAnswer(ctx context.Context, client *http.Client, api, token string, o op) (stubAnswer, error) {
	var body io.Reader
	if o.Body != nil {
		body = bytes.NewReader(o.Body)
	}
	req, err := http.NewRequestWithContext(ctx, o.Method, api+o.Path, body)
	if err != nil {
		return stubAnswer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if o.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return stubAnswer{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return stubAnswer{}, fmt.Errorf("%s: %w", o.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return stubAnswer{}, fmt.Errorf("%s: %s: %s", o.Name, resp.Status, data)
	}
	return stubAnswer{Method: o.Method, Path: req.URL.Path[len("/open/v1"):], Status: resp.StatusCode, Body: data}, nil
}

// mcpCaller calls the operation's tool over an MCP session.
type mcpCaller struct {
	session *mcp.ClientSession
	peer    bool // call the peer's tool names
}

func (m *mcpCaller) call(ctx context.Context, o *op) error {
	name := o.Tool
	if m.peer {
		name = o.Peer
	}
	res, err := m.session.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: o.Args})
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		return fmt.Errorf("%s: isError: %s", name, resultText(res))
	}
	if m.peer {
		// A generic server reports the upstream status in its text; make sure it was a success.
		if t := resultText(res); strings.HasPrefix(t, "Error") {
			return fmt.Errorf("%s: %s", name, t)
		}
	}
	return nil
}

func resultText(res *mcp.CallToolResult) string {
	var sb strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			sb.WriteString(t.Text)
		}
	}
	s := sb.String()
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// newHTTPClient is a keep-alive client whose pool holds conns idle connections to one host.
func newHTTPClient(conns int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			MaxIdleConns:        conns,
			MaxIdleConnsPerHost: conns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
	}
}
