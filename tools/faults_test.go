package tools

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/sandbox"
	"github.com/cardwriter/cardwriter-mcp/internal/tavern/taverntest"
	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
)

// writeCell is one write tool of the safety matrix: the operation faults hit, how to call it
// once its fixtures exist, and what one success adds.
type writeCell struct {
	tool string
	op   string // the operation the fault hits (its first request)
	args func(f *matrixFixtures) string
	adds func(before, after sandbox.Inventory) bool // one application, exactly
}

// matrixFixtures are what a cell's call needs, made before the fault is armed.
type matrixFixtures struct {
	roleID, readyRoleID, worldbookID, trialKey string
	png                                        string // a small PNG, base64
}

func countsAdd(field string, n int) func(before, after sandbox.Inventory) bool {
	return func(b, a sandbox.Inventory) bool {
		get := func(i sandbox.Inventory) int {
			return map[string]int{"cards": i.Cards, "images": i.Images, "worldbooks": i.Worldbooks, "entries": i.Entries,
				"trials": i.Trials, "published": i.Published}[field]
		}
		return get(a)-get(b) == n
	}
}

func changed(b, a sandbox.Inventory) bool { return a.Digest != b.Digest && a.Cards == b.Cards }

var writeCells = []writeCell{
	{"create_card", "createCard", func(*matrixFixtures) string { return `{"roleName":"Matrix"}` }, countsAdd("cards", 1)},
	{"set_opening_lines", "setOpeningLines", func(f *matrixFixtures) string { return `{"roleId":"` + f.roleID + `","roleWelcome":"Changed."}` }, changed},
	{"update_card_profile", "updateCardProfile", func(f *matrixFixtures) string { return `{"roleId":"` + f.roleID + `","roleDesc":"Changed."}` }, changed},
	{"write_card_document", "writeCardDocument", func(f *matrixFixtures) string {
		return `{"roleId":"` + f.roleID + `","sections":{"scenario":"Changed."}}`
	}, changed},
	{"set_card_visibility", "setCardVisibility", func(f *matrixFixtures) string { return `{"roleId":"` + f.roleID + `","visibility":"private"}` },
		func(b, a sandbox.Inventory) bool { return a.Cards == b.Cards }}, // private already: applying changes nothing
	{"publish_card", "publishCard", func(f *matrixFixtures) string { return `{"roleId":"` + f.readyRoleID + `"}` }, countsAdd("published", 1)},
	{"upload_image", "uploadImage", func(f *matrixFixtures) string {
		return jsonArgs(map[string]any{"purpose": "avatar", "roleId": f.roleID, "contentType": "image/png", "dataBase64": f.png})
	}, countsAdd("images", 1)},
	{"create_worldbook", "createWorldbook", func(*matrixFixtures) string { return `{"name":"Matrix"}` }, countsAdd("worldbooks", 1)},
	{"write_worldbook_document", "writeWorldbookDocument", func(f *matrixFixtures) string {
		return `{"worldbookId":"` + f.worldbookID + `","entries":[{"op":"create","name":"Kraken","content":"It waits.","keywords":["kraken"]}]}`
	}, countsAdd("entries", 1)},
	{"upsert_trial_card", "upsertTrialCard", func(*matrixFixtures) string { return `{"clientKey":"matrix-new","card":{"roleName":"Matrix"}}` }, countsAdd("trials", 1)},
	{"delete_trial_card", "deleteTrialCard", func(f *matrixFixtures) string { return `{"clientKey":"` + f.trialKey + `"}` }, countsAdd("trials", -1)},
	{"import_tavern_card", "createCard", func(*matrixFixtures) string {
		return jsonArgs(map[string]any{"source": map[string]any{"json": taverntest.V1Card()}})
	}, countsAdd("cards", 1)},
	{"import_tavern_worldbook", "createWorldbook", func(*matrixFixtures) string {
		return `{"source":{"json":{"name":"Shoals","entries":{"0":{"uid":0,"key":["kraken"],"content":"A kraken.","comment":"Kraken"}}}}}`
	}, countsAdd("worldbooks", 1)},
}

func jsonArgs(v any) string {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

var matrixFaults = []sandbox.Fault{sandbox.FaultRateLimited, sandbox.FaultInternal, sandbox.FaultUnavailable,
	sandbox.FaultResetBefore, sandbox.FaultResetAfter, sandbox.FaultTruncate, sandbox.FaultSlowBody, sandbox.FaultStall}

// TestWriteSafetyMatrix drives every write tool, through the MCP layer, into each fault of the
// sandbox (on the first request of its main operation), with the production retry policy, and
// compares what the sandbox then holds with what the result told the model: a success was
// applied exactly once; a plain failure applied nothing (the model may try again); an answer
// that may or may not have been applied says so (with the read or the key that settles it) and
// following that advice never applies the write twice.
func TestWriteSafetyMatrix(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	table := map[string]map[sandbox.Fault]string{}
	t.Run("cells", func(t *testing.T) {
		for _, cell := range writeCells {
			for _, fault := range matrixFaults {
				t.Run(cell.tool+"/"+string(fault), func(t *testing.T) {
					t.Parallel()
					outcome := runWriteCell(t, cell, fault)
					mu.Lock()
					defer mu.Unlock()
					if table[cell.tool] == nil {
						table[cell.tool] = map[sandbox.Fault]string{}
					}
					table[cell.tool][fault] = outcome
				})
			}
		}
	})
	var sb strings.Builder
	sb.WriteString("| Tool |")
	for _, f := range matrixFaults {
		sb.WriteString(" " + string(f) + " |")
	}
	sb.WriteString("\n|---|" + strings.Repeat("---|", len(matrixFaults)) + "\n")
	for _, cell := range writeCells {
		sb.WriteString("| `" + cell.tool + "` |")
		for _, f := range matrixFaults {
			sb.WriteString(" " + table[cell.tool][f] + " |")
		}
		sb.WriteString("\n")
	}
	t.Logf("write-safety matrix (tool x fault -> what the model was told):\n%s", sb.String())
}

// runWriteCell runs one cell and returns its outcome for the table.
func runWriteCell(t *testing.T, cell writeCell, fault sandbox.Fault) string {
	t.Helper()
	faults := &sandbox.Faults{Seed: 1, Operations: []string{cell.op}, Limit: 1, Rates: map[sandbox.Fault]float64{}}
	svc, err := sandbox.New(sandbox.Options{DemoToken: demoToken, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := newTavernEnv(t, tavernEnvConfig{svc: svc, client: []upstream.Option{
		upstream.WithRetry(upstream.RetryPolicy{MaxAttempts: 4, BaseDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond}),
		upstream.WithTimeout(1500 * time.Millisecond), // a stalled answer ends the call; a Retry-After of 1 s fits
	}})
	f := &matrixFixtures{trialKey: "matrix-old", png: b64(taverntest.Image(t, 2, 2))}
	f.roleID = e.ok("create_card", `{"roleName":"Fixture"}`)["roleId"].(string)
	f.readyRoleID = e.ok("create_card", `{"roleName":"Ready"}`)["roleId"].(string)
	e.ok("set_opening_lines", `{"roleId":"`+f.readyRoleID+`","roleWelcome":"Hello."}`)
	e.ok("write_card_document", `{"roleId":"`+f.readyRoleID+`","sections":{"description":"Ready."}}`)
	f.worldbookID = e.ok("create_worldbook", `{"name":"Fixture"}`)["worldbookId"].(string)
	e.ok("upsert_trial_card", `{"clientKey":"matrix-old","card":{"roleName":"Old"}}`)

	faults.Rates[fault] = 1 // armed: the cell's first request of cell.op meets it
	before := svc.Inventory(demoToken)
	res := e.call(cell.tool, cell.args(f))
	after := svc.Inventory(demoToken)
	applied := cell.adds(before, after)
	nothing := after.Digest == before.Digest

	if !res.IsError {
		if !applied {
			t.Fatalf("%s under %s: success, but the sandbox holds %+v (before %+v)", cell.tool, fault, after, before)
		}
		return "ok"
	}
	env, ok := ErrorEnvelope(res)
	if !ok {
		t.Fatalf("%s under %s: an error without an envelope", cell.tool, fault)
	}
	msg, _ := env["message"].(string)
	if !strings.Contains(msg, "may have been applied") {
		// A plain failure: nothing may have been applied, or a model's retry would apply it twice.
		if !nothing {
			t.Fatalf("%s under %s: %q, but the write was applied (%+v -> %+v)", cell.tool, fault, msg, before, after)
		}
		return fmt.Sprintf("failed, not applied (%s)", env["error"])
	}
	// Ambiguous: applied at most once, and the advice settles it without a second application.
	if !applied && !nothing {
		t.Fatalf("%s under %s: ambiguous, and the sandbox changed otherwise: %+v -> %+v", cell.tool, fault, before, after)
	}
	detail, _ := env["detail"].(map[string]any)
	if strings.Contains(msg, "repeating the same call is safe") {
		if env["retryable"] != true {
			t.Fatalf("%s under %s: safe to repeat, but not retryable", cell.tool, fault)
		}
		e.ok(cell.tool, cell.args(f))
		if again := svc.Inventory(demoToken); !cell.adds(before, again) {
			t.Fatalf("%s under %s: repeated, the sandbox holds %+v (before %+v)", cell.tool, fault, again, before)
		}
		return "unknown: repeating is safe"
	}
	if key, _ := detail["idempotencyKey"].(string); key != "" {
		var args map[string]any
		_ = json.Unmarshal([]byte(cell.args(f)), &args)
		args["idempotencyKey"] = key
		e.ok(cell.tool, jsonArgs(args))
		if again := svc.Inventory(demoToken); !cell.adds(before, again) {
			t.Fatalf("%s under %s: repeated with the named key, the sandbox holds %+v (before %+v)", cell.tool, fault, again, before)
		}
		return "unknown: repeat with the key it names"
	}
	check := ""
	for _, name := range toolNames() {
		if strings.Contains(msg, "check with "+name) {
			check = name
		}
	}
	if check == "" {
		t.Fatalf("%s under %s: ambiguous without the read that settles it: %q", cell.tool, fault, msg)
	}
	if applied {
		return "unknown (it was applied): check with " + check
	}
	return "unknown (it was not): check with " + check
}

func toolNames() []string {
	var names []string
	for _, t := range All() {
		names = append(names, t.Name)
	}
	slices.Sort(names)
	return names
}
