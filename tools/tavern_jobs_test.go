package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/cardwriter/cardwriter-mcp/internal/aside"
)

// gateTransport holds the card service's answer to the gated-th entry write until release is
// closed (or the request is cancelled, as a real connection would be), and closes last once the
// last-th entry write has its answer.
type gateTransport struct {
	next          http.RoundTripper
	gated, last   int
	reached, done chan struct{}
	release       chan struct{}
	mu            sync.Mutex
	writes        int
}

func newGate(gated, last int) *gateTransport {
	return &gateTransport{gated: gated, last: last, reached: make(chan struct{}), done: make(chan struct{}), release: make(chan struct{})}
}

func (g *gateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/document") {
		return g.next.RoundTrip(r)
	}
	g.mu.Lock()
	g.writes++
	n := g.writes
	g.mu.Unlock()
	if n == g.gated {
		close(g.reached)
		select {
		case <-g.release:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	resp, err := g.next.RoundTrip(r)
	if n == g.last {
		close(g.done)
	}
	return resp, err
}

// TestTavernImportCutHalfway: a lorebook import whose client goes away half-way (its request
// cancelled while the second of three entry writes is under way) still completes, detached from
// the request, so no worldbook is left half-made that nobody was told of; the same import issued
// again returns that first import's result (repeated) and makes nothing more.
func TestTavernImportCutHalfway(t *testing.T) {
	t.Parallel()
	const entries = 1203 // three writes of at most 500
	gate := newGate(2, 3)
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{ResultBudget: inlineBudget},
		wrap: func(rt http.RoundTripper) http.RoundTripper { gate.next = rt; return gate }})
	args := jsonArg(t, map[string]any{"source": map[string]any{"json": json.RawMessage(bigBook(entries))}})

	ctx, cancel := context.WithCancel(context.Background())
	req := mcp.CallToolRequest{}
	req.Params.Name = "import_tavern_worldbook"
	req.Params.Arguments = json.RawMessage(args)
	resc := make(chan *mcp.CallToolResult, 1)
	go func() {
		res, err := e.client.CallTool(ctx, req)
		if err != nil {
			res = nil
		}
		resc <- res
	}()
	<-gate.reached
	cancel() // the client goes away half-way
	if res := <-resc; res != nil && !res.IsError {
		t.Fatalf("the cancelled call returned a success: %s", text(res))
	}
	close(gate.release)
	select {
	case <-gate.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the import stopped with its request: the third entry write never came")
	}
	// The run records its result right after the last write; the same import again waits for
	// it or reads it.
	again := e.ok("import_tavern_worldbook", args)
	if again["repeated"] != true || again["entryCount"] != json.Number(fmt.Sprint(entries)) {
		t.Errorf("the import issued again: repeated %v, entryCount %v", again["repeated"], again["entryCount"])
	}
	wbs := e.ok("list_worldbooks", `{}`)["list"].([]any)
	if len(wbs) != 1 {
		t.Fatalf("%d worldbooks after one import cut half-way and issued again", len(wbs))
	}
	wb := e.ok("get_worldbook", jsonArg(t, map[string]any{"worldbookId": again["worldbookId"]}))
	if wb["entryCount"] != json.Number(fmt.Sprint(entries)) {
		t.Errorf("entryCount %v, want %d", wb["entryCount"], entries)
	}
}

// TestTavernImportIdempotencyKey: the same idempotencyKey returns the first import's result; the
// same file under another key is a new import; the key reused for another file is refused.
func TestTavernImportIdempotencyKey(t *testing.T) {
	t.Parallel()
	e, _ := newTavernEnv(t, tavernEnvConfig{})
	book := func(content string) map[string]any {
		return map[string]any{"json": map[string]any{"name": "Shoals", "entries": map[string]any{
			"0": map[string]any{"uid": 0, "key": []any{"kraken"}, "content": content, "comment": "Kraken"}}}}
	}
	first := e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": book("A kraken."), "idempotencyKey": "shoals-1"}))
	if first["idempotencyKey"] != "shoals-1" || first["repeated"] != nil {
		t.Fatalf("first import: %v", first)
	}
	same := e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": book("A kraken."), "idempotencyKey": "shoals-1"}))
	if same["worldbookId"] != first["worldbookId"] || same["repeated"] != true {
		t.Errorf("the same key again: %v", same)
	}
	other := e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": book("A kraken."), "idempotencyKey": "shoals-2"}))
	if other["worldbookId"] == first["worldbookId"] {
		t.Error("another key gave the first import's worldbook")
	}
	env, _ := e.fail("import_tavern_worldbook", jsonArg(t, map[string]any{"source": book("Two krakens."), "idempotencyKey": "shoals-1"}))
	if env["error"] != "conflict" {
		t.Errorf("a key reused for another file: %v", env)
	}
	// No key: derived from the file and target, so the same call twice is one import.
	a := e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": book("Three.")}))
	b := e.ok("import_tavern_worldbook", jsonArg(t, map[string]any{"source": book("Three.")}))
	if a["worldbookId"] != b["worldbookId"] || b["repeated"] != true {
		t.Errorf("the same file twice without a key: %v then %v", a["worldbookId"], b["worldbookId"])
	}
	if n := len(e.ok("list_worldbooks", `{}`)["list"].([]any)); n != 3 {
		t.Errorf("%d worldbooks; want 3 (two keys and one derived)", n)
	}
}

// importFailingAside fails every Put of an import record once armed, as a full disk would.
type importFailingAside struct {
	AsideStore
	mu    sync.Mutex
	armed bool
	after int // import-record Puts that succeed once armed
}

func (s *importFailingAside) Put(ctx context.Context, key AsideKey, data []byte) error {
	s.mu.Lock()
	fail := s.armed && key.Kind == aside.KindImport && s.after <= 0
	if s.armed && key.Kind == aside.KindImport {
		s.after--
	}
	s.mu.Unlock()
	if fail {
		return fmt.Errorf("aside: write %s: no space left on device", key)
	}
	return s.AsideStore.Put(ctx, key, data)
}

// TestTavernImportStoreFailsAfterCreate (issue 30): the store refuses the import's record right
// after the worldbook is created; the import is refused naming it, and the same import run
// again once the store is back finishes that worldbook instead of making a second one.
func TestTavernImportStoreFailsAfterCreate(t *testing.T) {
	t.Parallel()
	st := &importFailingAside{AsideStore: aside.NewMemory(), armed: true, after: 2} // the job, and the one naming the create
	e, _ := newTavernEnv(t, tavernEnvConfig{opts: Options{Aside: st, ResultBudget: inlineBudget}})
	args := jsonArg(t, map[string]any{"source": map[string]any{"json": json.RawMessage(bigBook(600))}})
	env, msg := e.fail("import_tavern_worldbook", args)
	detail, _ := env["detail"].(map[string]any)
	wbID, _ := detail["worldbookId"].(string)
	if wbID == "" || !strings.Contains(msg, wbID) || !strings.Contains(msg, "again") {
		t.Fatalf("the refusal does not name the worldbook made, or how to finish it: %v", env)
	}
	st.mu.Lock()
	st.armed = false
	st.mu.Unlock()
	done := e.ok("import_tavern_worldbook", args)
	if done["worldbookId"] != wbID || done["entryCount"] != json.Number("600") {
		t.Errorf("the rerun: worldbook %v with %v entries; want %s with 600", done["worldbookId"], done["entryCount"], wbID)
	}
	if n := len(e.ok("list_worldbooks", `{}`)["list"].([]any)); n != 1 {
		t.Errorf("%d worldbooks after a refused import and its rerun", n)
	}
}
