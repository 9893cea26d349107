package schema

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// trialPostOverride turns the trial upsert into POST, as the README's example does.
const trialPostOverride = `{
  "openapi": "3.1.0",
  "info": {"title": "corrections", "version": "1"},
  "paths": {
    "/trial-cards/{clientKey}": {
      "post": {
        "operationId": "upsertTrialCard",
        "parameters": [{"$ref": "#/components/parameters/ClientKeyPath"}],
        "requestBody": {"required": true, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/TrialUpsertInput"}}}},
        "responses": {
          "200": {"description": "Saved.", "content": {"application/json": {"schema": {"$ref": "#/components/schemas/TrialSummary"}}}},
          "default": {"$ref": "#/components/responses/Error"}
        }
      }
    }
  }
}`

func TestLoadOverride(t *testing.T) {
	t.Parallel()
	table, err := LoadOverride("fix.json", []byte(trialPostOverride))
	if err != nil {
		t.Fatal(err)
	}
	op, ok := table.Lookup("upsertTrialCard")
	if !ok || op.Method != "POST" || op.Path != "/trial-cards/{clientKey}" || !op.Idempotent || !op.Assumed {
		t.Fatalf("upsertTrialCard = %+v", op)
	}
	if r, ok := op.Response(200); !ok || r.Schema == "" {
		t.Errorf("no 200 response: %+v", op.Responses)
	}
	// The others are the embedded contract's, the trial read and delete included.
	for _, id := range []string{"getTrialCard", "deleteTrialCard", "getCard"} {
		got, _ := table.Lookup(id)
		want, _ := Embedded().Lookup(id)
		if got.Method != want.Method || got.Path != want.Path {
			t.Errorf("%s: %s %s, want %s %s", id, got.Method, got.Path, want.Method, want.Path)
		}
	}
	if emb, _ := Embedded().Lookup("upsertTrialCard"); emb.Method != "PUT" {
		t.Errorf("the embedded table changed: %s", emb.Method)
	}
	if _, err := table.Compile(op.Body.Schema); err != nil {
		t.Error(err)
	}
}

func TestLoadOverrideMovesAParameter(t *testing.T) {
	t.Parallel()
	doc := `{"openapi":"3.1.0","paths":{"/role/{roleId}/validate":{"get":{"operationId":"validateCard",
		"parameters":[{"name":"roleId","in":"path","required":true,"schema":{"type":"string"}}],
		"responses":{"200":{"description":"ok","content":{"application/json":{"schema":{"type":"object","properties":{"ok":{"type":"boolean"}}}}}}}}}}}`
	table, err := LoadOverride("v.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	op, _ := table.Lookup("validateCard")
	if op.Path != "/role/{roleId}/validate" || op.Params[0].In != "path" {
		t.Errorf("validateCard = %+v", op)
	}
	r, _ := op.Response(200)
	v, err := table.Compile(r.Schema)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Validate(map[string]any{"ok": "yes"}); err == nil {
		t.Error("the override's response schema is not the one compiled")
	}
}

func TestLoadOverrideErrors(t *testing.T) {
	t.Parallel()
	op := func(path, method, body string) string {
		return `{"openapi":"3.1.0","paths":{"` + path + `":{"` + method + `":` + body + `}}}`
	}
	upsertBody := `"requestBody":{"content":{"application/json":{"schema":{"type":"object"}}}}`
	tests := []struct{ name, doc, want string }{
		{"not JSON", "{\n  \"openapi\": \"3.1.0\",\n  oops\n}", "line 3, column 3"},
		{"not an object", `[1]`, "must be a JSON object"},
		{"no openapi", `{"paths":{}}`, `"openapi" must be "3.1.x"`},
		{"nothing to override", `{"openapi":"3.1.0"}`, `"paths" holds no operation`},
		{"unknown operation", op("/x", "get", `{"operationId":"getEverything"}`), `no operation "getEverything"`},
		{"no operationId", op("/x", "get", `{}`), "no operationId"},
		{"an empty path item", `{"openapi":"3.1.0","paths":{"/nope":{}}}`, `"paths" holds no operation that differs`},
		{"an OAuth operation", op("/oauth/token2", "post", `{"operationId":"exchangeToken"}`), "OAuth operation"},
		{"not a method", op("/trial-cards/{clientKey}", "fetch", `{"operationId":"upsertTrialCard"}`), "not an HTTP method"},
		{"path without a slash", op("trial-cards/{clientKey}", "post", `{"operationId":"upsertTrialCard","parameters":[{"name":"clientKey","in":"path","schema":{"type":"string"}}],`+upsertBody+`}`), "must start with /"},
		{"a parameter missing", op("/trial-cards", "post", `{"operationId":"upsertTrialCard",`+upsertBody+`}`), "parameter clientKey is missing"},
		{"a parameter the tool does not fill", op("/trial-cards/{clientKey}", "post", `{"operationId":"upsertTrialCard","parameters":[{"name":"clientKey","in":"path","schema":{"type":"string"}},{"name":"tenant","in":"query","schema":{"type":"string"}}],`+upsertBody+`}`), "parameter tenant is not one the tool fills"},
		{"a header parameter", op("/trial-cards", "post", `{"operationId":"upsertTrialCard","parameters":[{"name":"clientKey","in":"header","schema":{"type":"string"}}],`+upsertBody+`}`), `in must be path or query, not "header"`},
		{"a path name that is no parameter", op("/trial-cards/{key}", "post", `{"operationId":"upsertTrialCard","parameters":[{"name":"clientKey","in":"query","schema":{"type":"string"}}],`+upsertBody+`}`), "{key} is not a path parameter"},
		{"a path parameter not in the path", op("/trial-cards", "post", `{"operationId":"upsertTrialCard","parameters":[{"name":"clientKey","in":"path","schema":{"type":"string"}}],`+upsertBody+`}`), "does not appear in the path"},
		{"no body", op("/trial-cards/{clientKey}", "post", `{"operationId":"upsertTrialCard","parameters":[{"name":"clientKey","in":"path","schema":{"type":"string"}}]}`), "requestBody is missing"},
		{"a $ref that does not resolve", op("/trial-cards/{clientKey}", "post", `{"operationId":"upsertTrialCard","parameters":[{"name":"clientKey","in":"path","schema":{"type":"string"}}],"requestBody":{"content":{"application/json":{"schema":{"$ref":"#/components/schemas/Nope"}}}}}`), "$ref #/components/schemas/Nope does not resolve"},
		{"a bad status", op("/trial-cards/{clientKey}", "post", `{"operationId":"upsertTrialCard","parameters":[{"name":"clientKey","in":"path","schema":{"type":"string"}}],`+upsertBody+`,"responses":{"2xx":{"description":"ok"}}}`), `response code "2xx"`},
		{"twice", `{"openapi":"3.1.0","paths":{"/a/{clientKey}":{"post":{"operationId":"upsertTrialCard","parameters":[{"name":"clientKey","in":"path","schema":{"type":"string"}}],` + upsertBody + `}},"/b/{clientKey}":{"post":{"operationId":"upsertTrialCard","parameters":[{"name":"clientKey","in":"path","schema":{"type":"string"}}],` + upsertBody + `}}}}`, "overridden twice"},
		{"onto another operation", op("/trial-cards/{clientKey}", "get", `{"operationId":"deleteTrialCard","parameters":[{"name":"clientKey","in":"path","schema":{"type":"string"}}]}`), "is another operation of the contract"},
		{"other components", `{"openapi":"3.1.0","paths":{},"components":{"securitySchemes":{}}}`, "only schemas, parameters and responses"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := LoadOverride("fix.json", []byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("LoadOverride: %v; want %q", err, tt.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "contract override fix.json: ") {
				t.Errorf("the error does not name the file: %v", err)
			}
		})
	}
}

// FuzzLoadOverride: any input gives a table or an *OverrideError, never a panic.
func FuzzLoadOverride(f *testing.F) {
	f.Add([]byte(trialPostOverride))
	f.Add([]byte(`{"openapi":"3.1.0","paths":{"/x":{"get":{"operationId":"getCard","parameters":[1]}}}}`))
	f.Add([]byte(`{"openapi":"3.1.0","paths":{"/x":null},"components":{"schemas":[]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		table, err := LoadOverride("fuzz.json", data)
		if err == nil && table == nil {
			t.Fatal("no table and no error")
		}
	})
}

// TestLoadOverrideWholeContract: a whole copy of the contract with one operation changed is
// the correction of that operation (the unchanged ones are passed over); a whole copy with
// nothing changed corrects nothing and says so.
func TestLoadOverrideWholeContract(t *testing.T) {
	t.Parallel()
	copyWith := func(t *testing.T, edit func(paths map[string]any)) []byte {
		t.Helper()
		var doc map[string]any
		dec := json.NewDecoder(bytes.NewReader(contract))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			t.Fatal(err)
		}
		edit(doc["paths"].(map[string]any))
		out, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// The trial upsert as POST, the rest as shipped.
	moved := copyWith(t, func(paths map[string]any) {
		item := paths["/trial-cards/{clientKey}"].(map[string]any)
		item["post"] = item["put"]
		delete(item, "put")
	})
	table, err := LoadOverride("whole.json", moved)
	if err != nil {
		t.Fatalf("a whole copy with one method changed: %v", err)
	}
	if op, _ := table.Lookup("upsertTrialCard"); op.Method != "POST" {
		t.Errorf("upsertTrialCard = %s, want POST", op.Method)
	}
	for _, id := range operationIDs(Embedded()) {
		if id == "upsertTrialCard" {
			continue
		}
		got, _ := table.Lookup(id)
		want, _ := Embedded().Lookup(id)
		if got.Method != want.Method || got.Path != want.Path {
			t.Errorf("%s moved: %s %s", id, got.Method, got.Path)
		}
	}
	if w := table.Warnings(); len(w) != 0 {
		t.Errorf("warnings for an x-assumed correction: %q", w)
	}

	if _, err := LoadOverride("same.json", copyWith(t, func(map[string]any) {})); err == nil || !strings.Contains(err.Error(), "no operation that differs") {
		t.Errorf("an unchanged copy: %v", err)
	}

	// A documented operation that the real service does differently can be corrected, and
	// the table names it.
	documented := copyWith(t, func(paths map[string]any) {
		item := paths["/trial-cards/{clientKey}"].(map[string]any)
		get := item["get"].(map[string]any)
		paths["/trial-cards/{clientKey}/detail"] = map[string]any{"get": get}
		delete(item, "get")
	})
	table, err = LoadOverride("documented.json", documented)
	if err != nil {
		t.Fatalf("a documented operation corrected: %v", err)
	}
	if op, _ := table.Lookup("getTrialCard"); op.Path != "/trial-cards/{clientKey}/detail" {
		t.Errorf("getTrialCard at %s", op.Path)
	}
	if w := table.Warnings(); len(w) != 1 || !strings.Contains(w[0], "getTrialCard is shown by the API document") {
		t.Errorf("warnings: %q", w)
	}

	// The sign-in endpoints stay the service's metadata's.
	oauth := copyWith(t, func(paths map[string]any) {
		paths["/oauth/token2"] = paths["/oauth/token"]
		delete(paths, "/oauth/token")
	})
	if _, err := LoadOverride("oauth.json", oauth); err == nil || !strings.Contains(err.Error(), "OAuth operation") {
		t.Errorf("an OAuth operation moved: %v", err)
	}
}
