package schema_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/schema"
)

// TestContractCompiles compiles every schema the contract points at: each component schema and
// each operation's parameters, request body and responses.
func TestContractCompiles(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(schema.Contract(), &doc); err != nil {
		t.Fatal(err)
	}
	for name := range doc.Components.Schemas {
		if _, err := schema.Compile("#/components/schemas/" + name); err != nil {
			t.Errorf("component %s: %v", name, err)
		}
	}
	ops, err := schema.Operations()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		for _, p := range op.Params {
			if _, err := schema.Compile(p.Schema); err != nil {
				t.Errorf("%s param %s: %v", op.ID, p.Name, err)
			}
		}
		if op.Body != nil {
			if _, err := schema.Compile(op.Body.Schema); err != nil {
				t.Errorf("%s body: %v", op.ID, err)
			}
		}
		for _, r := range op.Responses {
			if r.Schema == "" {
				continue
			}
			if _, err := schema.Compile(r.Schema); err != nil {
				t.Errorf("%s response %d: %v", op.ID, r.Status, err)
			}
		}
	}
}

// TestOperations checks the operation table: every operation the card-writer tools need is there,
// with a unique id, and every assumed operation says why.
func TestOperations(t *testing.T) {
	t.Parallel()
	ops, err := schema.Operations()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"getMe": "GET /me", "createCard": "POST /role", "getCard": "GET /role/detail",
		"setOpeningLines": "PATCH /role/{roleId}/welcome", "updateCardProfile": "PATCH /role/{roleId}",
		"writeCardDocument": "POST /role/{roleId}/document", "setCardVisibility": "POST /role/{roleId}/visibility",
		"validateCard": "GET /role/validate", "publishCard": "POST /role/{roleId}/publish",
		"uploadImage": "POST /image/upload", "listCardAssets": "GET /role/assets",
		"listWorldbooks": "GET /worldbook/list", "createWorldbook": "POST /worldbook",
		"getWorldbook": "GET /worldbook/detail", "listCardWorldbooks": "GET /worldbook/bound",
		"listWorldbookEntries": "GET /worldbook/entry/list", "writeWorldbookDocument": "POST /worldbook/{worldbookId}/document",
		"listTrialCards": "GET /trial-cards", "getTrialCard": "GET /trial-cards/{clientKey}",
		"upsertTrialCard": "PUT /trial-cards/{clientKey}", "deleteTrialCard": "DELETE /trial-cards/{clientKey}",
		"getAuthorizationServerMetadata": "GET /.well-known/oauth-authorization-server",
		"authorize":                      "GET /oauth/authorize", "registerClient": "POST /oauth/register",
		"exchangeToken": "POST /oauth/token", "revokeToken": "POST /oauth/revoke",
		"authorizeDevice": "POST /oauth/device_authorization",
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.ID] {
			t.Errorf("duplicate operationId %s", op.ID)
		}
		seen[op.ID] = true
		if got := op.Method + " " + op.Path; want[op.ID] != got {
			t.Errorf("%s: got %q, want %q", op.ID, got, want[op.ID])
		}
		if op.Assumed != (op.Note != "") {
			t.Errorf("%s: x-assumed (%v) and x-assumed-note (%q) must come together", op.ID, op.Assumed, op.Note)
		}
		if op.Server == schema.ServerAPI && !op.Secured {
			t.Errorf("%s is under {base_url} but needs no token", op.ID)
		}
		if op.Server == schema.ServerHost && op.Secured {
			t.Errorf("%s is an OAuth endpoint but asks for a bearer token", op.ID)
		}
		if op.Server == schema.ServerAPI {
			if r, ok := op.Response(599); !ok || !strings.HasSuffix(r.Schema, "ErrorEnvelope") && !strings.Contains(r.Schema, "responses/Error") {
				t.Errorf("%s: errors do not use the error envelope (%+v)", op.ID, r)
			}
		}
	}
	for id := range want {
		if !seen[id] {
			t.Errorf("contract lacks operation %s", id)
		}
	}
	if op := schema.MustLookup("createCard"); !op.Idempotent || op.IdempotencyKey != "idempotencyKey" {
		t.Errorf("createCard must be retry-safe through its idempotency key: %+v", op)
	}
	for _, id := range []string{"uploadImage", "createWorldbook", "writeWorldbookDocument", "publishCard"} {
		if schema.MustLookup(id).Idempotent {
			t.Errorf("%s creates or submits something: it must not be marked x-idempotent", id)
		}
	}
}

// TestDocumentedRules checks that the rules the API document states are in the contract.
func TestDocumentedRules(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		component string
		instance  string
		problems  []string // exact "location: message" lines; nil means valid
	}{
		{"opening lines valid", "OpeningLinesInput", `{"roleWelcome":"Hi","alternates":[],"prologue":["a"]}`, nil},
		{"opening lines wrong types", "OpeningLinesInput", `{"roleWelcome":5,"alternates":"x"}`,
			[]string{"/alternates: got string, want array", "/roleWelcome: got number, want string"}},
		{"opening lines need roleWelcome", "OpeningLinesInput", `{"prologue":[]}`, []string{"/: missing property 'roleWelcome'"}},
		{"card create needs roleName", "CardCreateInput", `{"language":"en"}`, []string{"/: missing property 'roleName'"}},
		{"card create unknown field", "CardCreateInput", `{"roleName":"A","rolename":"B"}`, []string{"/: additional properties 'rolename' not allowed"}},
		{"selectiveLogic at most 3", "MatchOptions", `{"caseSensitive":true,"matchWholeWords":false,"selectiveLogic":4}`,
			[]string{"/selectiveLogic: maximum: got 4, want 3"}},
		{"matchOptions may be null", "MatchOptions", `null`, nil},
		{"matchOptions complete", "MatchOptions", `{"caseSensitive":true}`, []string{"/: missing properties 'matchWholeWords', 'selectiveLogic'"}},
		{"listed entry has no op", "WorldbookEntry", `{"entryId":"e","name":"n","content":"c","keywords":[],"secondaryKeywords":[],"matchOptions":null,"category":"","isEnabled":true,"isConstant":false,"priority":0,"sortOrder":0,"lastUpdateTime":"t","activationCount":0,"op":"create"}`,
			[]string{"/: additional properties 'op' not allowed"}},
		{"listed keywords always arrays", "WorldbookEntry", `{"entryId":"e","name":"n","content":"c","keywords":"k","secondaryKeywords":null,"matchOptions":null,"category":"","isEnabled":true,"isConstant":false,"priority":0,"sortOrder":0,"lastUpdateTime":"t","activationCount":0}`,
			[]string{"/keywords: got string, want array", "/secondaryKeywords: got null, want array"}},
		{"create op needs name content keywords", "WorldbookEntryOp", `{"op":"create","name":"n"}`, []string{"/: missing properties 'content', 'keywords'"}},
		{"create op takes no entryId", "WorldbookEntryOp", `{"op":"create","entryId":"e","name":"n","content":"c","keywords":[]}`, []string{"/entryId: not allowed here"}},
		{"update op needs entryId", "WorldbookEntryOp", `{"op":"update","name":"n"}`, []string{"/: missing property 'entryId'"}},
		{"delete op takes entryId only", "WorldbookEntryOp", `{"op":"delete","entryId":"e","content":"c"}`, []string{"/content: not allowed here"}},
		{"unknown op", "WorldbookEntryOp", `{"op":"upsert","entryId":"e"}`, []string{"/op: value must be one of 'create', 'update', 'delete'"}},
		{"worldbook document at most 500 entries", "WorldbookDocumentInput", `{"entries":[` + strings.Repeat(`{"op":"delete","entryId":"e"},`, 500) + `{"op":"delete","entryId":"e"}]}`,
			[]string{"/entries: maxItems: got 501, want 500"}},
		{"visibility private only", "VisibilityInput", `{"visibility":"public"}`, []string{"/visibility: value must be 'private'"}},
		{"trial card needs roleName", "TrialUpsertInput", `{"card":{"roleDesc":"x"}}`, []string{"/card: missing property 'roleName'"}},
		{"trial digests are sha-256 hex", "TrialSummary", `{"clientKey":"k","roleId":"r","created":true,"expiresAt":"2026-01-01T00:00:00Z","slots":{"used":1,"max":5},"sections":{"roleName":"xyz"},"changed":[],"worldbook":{"worldbookId":"w","entries":0,"created":0,"deleted":0}}`,
			[]string{"/sections/roleName: '" + "xyz" + "' does not match pattern '^[0-9a-f]{64}$'"}},
		{"error envelope", "ErrorEnvelope", `{"error":"trial_not_found","message":"The trial has expired.","retryable":false,"detail":{"clientKey":"k"}}`, nil},
		{"error envelope needs message", "ErrorEnvelope", `{"error":"x"}`, []string{"/: missing property 'message'"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := schema.Component(tc.component).ValidateJSON([]byte(tc.instance))
			var got []string
			if err != nil {
				ve, ok := err.(*schema.ValidationError)
				if !ok {
					t.Fatalf("error is %T, want *schema.ValidationError: %v", err, err)
				}
				for _, p := range ve.Problems {
					got = append(got, p.String())
				}
			}
			if strings.Join(got, "\n") != strings.Join(tc.problems, "\n") {
				t.Errorf("problems:\n got  %q\n want %q", got, tc.problems)
			}
		})
	}
}

func TestValidationErrorIsSortedAndComplete(t *testing.T) {
	t.Parallel()
	err := schema.Component("WorldbookDocumentInput").ValidateJSON([]byte(
		`{"entries":[{"op":"update"},{"op":"create"}],"binding":{},"metadata":{"name":1}}`))
	want := "/binding: missing property 'roleId'; /entries/0: missing property 'entryId'; " +
		"/entries/1: missing properties 'name', 'content', 'keywords'; /metadata/name: got number, want string"
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
}

func TestDecodeJSON(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{``, `{`, `{} {}`, `{}x`, `nul`} {
		if _, err := schema.DecodeJSON([]byte(bad)); err == nil {
			t.Errorf("DecodeJSON(%q) accepted", bad)
		}
	}
	v, err := schema.DecodeJSON([]byte(` {"n": 12345678901234567890} `))
	if err != nil {
		t.Fatal(err)
	}
	if n := v.(map[string]any)["n"].(json.Number); n.String() != "12345678901234567890" {
		t.Errorf("number not kept exact: %s", n)
	}
}

// FuzzValidateJSON feeds arbitrary documents to a validator: it must never panic, and every
// failure must carry at least one problem with a JSON-pointer location.
func FuzzValidateJSON(f *testing.F) {
	for _, s := range []string{`{}`, `{"entries":[{"op":"create"}]}`, `[1,2]`, `"x"`, `{"metadata":{"tags":[1]}}`, `{"entries":[{"op":"delete","entryId":"e","matchOptions":{"selectiveLogic":9}}]}`} {
		f.Add([]byte(s))
	}
	v := schema.Component("WorldbookDocumentInput")
	f.Fuzz(func(t *testing.T, data []byte) {
		err := v.ValidateJSON(data)
		if err == nil {
			return
		}
		ve, ok := err.(*schema.ValidationError)
		if !ok || len(ve.Problems) == 0 {
			t.Fatalf("unexpected error %T %v", err, err)
		}
		for _, p := range ve.Problems {
			if !strings.HasPrefix(p.InstanceLocation, "/") || p.Message == "" {
				t.Fatalf("bad problem %+v", p)
			}
		}
	})
}

// TestEntryFieldNamesAgree keeps the property names that WorldbookEntry, WorldbookEntryOp and
// TrialEntryInput declare in step with WorldbookEntryFields, where their types live.
func TestEntryFieldNamesAgree(t *testing.T) {
	t.Parallel()
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(schema.Contract(), &doc); err != nil {
		t.Fatal(err)
	}
	fields := doc.Components.Schemas["WorldbookEntryFields"].Properties
	for _, name := range []string{"WorldbookEntry", "WorldbookEntryOp", "TrialEntryInput"} {
		props := doc.Components.Schemas[name].Properties
		for f := range fields {
			if string(props[f]) != "true" {
				t.Errorf("%s does not declare entry field %s", name, f)
			}
		}
		for f, v := range props {
			if string(v) == "true" && fields[f] == nil {
				t.Errorf("%s declares %s, which WorldbookEntryFields lacks", name, f)
			}
		}
	}
}
