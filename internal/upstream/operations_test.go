package upstream_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// typedCall is one typed method, called with the parameters it should send.
type typedCall struct {
	params map[string]string
	call   func(ctx context.Context, c *upstream.Client, req any) (any, error)
}

// typedCalls maps every operation of the open API to its typed method.
var typedCalls = map[string]typedCall{
	"getMe": {nil, func(ctx context.Context, c *upstream.Client, _ any) (any, error) { return c.GetMe(ctx) }},
	"createCard": {nil, func(ctx context.Context, c *upstream.Client, req any) (any, error) {
		out, _, err := c.CreateCard(ctx, req.(upstream.CardCreateInput))
		return out, err
	}},
	"getCard": {map[string]string{"roleId": "r 1"}, func(ctx context.Context, c *upstream.Client, _ any) (any, error) { return c.GetCard(ctx, "r 1") }},
	"setOpeningLines": {map[string]string{"roleId": "r1"}, func(ctx context.Context, c *upstream.Client, req any) (any, error) {
		return c.SetOpeningLines(ctx, "r1", req.(upstream.OpeningLinesInput))
	}},
	"updateCardProfile": {map[string]string{"roleId": "r:1"}, func(ctx context.Context, c *upstream.Client, req any) (any, error) {
		return c.UpdateCardProfile(ctx, "r:1", req.(upstream.CardProfileInput))
	}},
	"writeCardDocument": {map[string]string{"roleId": "r1"}, func(ctx context.Context, c *upstream.Client, req any) (any, error) {
		return c.WriteCardDocument(ctx, "r1", req.(upstream.CardDocumentInput))
	}},
	"setCardVisibility": {map[string]string{"roleId": "r1"}, func(ctx context.Context, c *upstream.Client, req any) (any, error) {
		return c.SetCardVisibility(ctx, "r1", req.(upstream.VisibilityInput))
	}},
	"validateCard": {map[string]string{"roleId": "r&1"}, func(ctx context.Context, c *upstream.Client, _ any) (any, error) { return c.ValidateCard(ctx, "r&1") }},
	"publishCard":  {map[string]string{"roleId": "r1"}, func(ctx context.Context, c *upstream.Client, _ any) (any, error) { return c.PublishCard(ctx, "r1") }},
	"uploadImage": {nil, func(ctx context.Context, c *upstream.Client, req any) (any, error) {
		return c.UploadImage(ctx, req.(upstream.ImageUploadInput))
	}},
	"listCardAssets": {map[string]string{"roleId": "r1"}, func(ctx context.Context, c *upstream.Client, _ any) (any, error) { return c.ListCardAssets(ctx, "r1") }},
	"listWorldbooks": {nil, func(ctx context.Context, c *upstream.Client, _ any) (any, error) { return c.ListWorldbooks(ctx) }},
	"createWorldbook": {nil, func(ctx context.Context, c *upstream.Client, req any) (any, error) {
		return c.CreateWorldbook(ctx, req.(upstream.WorldbookCreateInput))
	}},
	"getWorldbook": {map[string]string{"worldbookId": "w1"}, func(ctx context.Context, c *upstream.Client, _ any) (any, error) { return c.GetWorldbook(ctx, "w1") }},
	"listCardWorldbooks": {map[string]string{"roleId": "r1"}, func(ctx context.Context, c *upstream.Client, _ any) (any, error) {
		return c.ListCardWorldbooks(ctx, "r1")
	}},
	"listWorldbookEntries": {map[string]string{"worldbookId": "w1", "category": "places & people"}, func(ctx context.Context, c *upstream.Client, _ any) (any, error) {
		return c.ListWorldbookEntries(ctx, "w1", "places & people")
	}},
	"writeWorldbookDocument": {map[string]string{"worldbookId": "w é"}, func(ctx context.Context, c *upstream.Client, req any) (any, error) {
		return c.WriteWorldbookDocument(ctx, "w é", req.(upstream.WorldbookDocumentInput))
	}},
	"listTrialCards": {nil, func(ctx context.Context, c *upstream.Client, _ any) (any, error) { return c.ListTrialCards(ctx) }},
	"getTrialCard":   {map[string]string{"clientKey": "k-1"}, func(ctx context.Context, c *upstream.Client, _ any) (any, error) { return c.GetTrialCard(ctx, "k-1") }},
	"upsertTrialCard": {map[string]string{"clientKey": "k.1"}, func(ctx context.Context, c *upstream.Client, req any) (any, error) {
		return c.UpsertTrialCard(ctx, "k.1", req.(upstream.TrialUpsertInput))
	}},
	"deleteTrialCard": {map[string]string{"clientKey": "k_1"}, func(ctx context.Context, c *upstream.Client, _ any) (any, error) {
		return c.DeleteTrialCard(ctx, "k_1")
	}},
}

// TestEveryOperationHasATypedMethod calls every typed method against a server that checks the
// request against the contract (method, path template, parameters, body schema) and answers
// a schema-valid body, which must decode back to the same JSON.
func TestEveryOperationHasATypedMethod(t *testing.T) {
	t.Parallel()
	ops, err := schema.Operations()
	if err != nil {
		t.Fatal(err)
	}
	bodies := filled()
	api := map[string]bool{}
	for _, op := range ops {
		if op.Server != schema.ServerAPI {
			continue
		}
		api[op.ID] = true
		t.Run(op.ID, func(t *testing.T) {
			t.Parallel()
			tc, ok := typedCalls[op.ID]
			if !ok {
				t.Fatalf("operation %s has no typed method", op.ID)
			}
			canned, err := json.Marshal(bodies[op.ID].resp)
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var seen []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				seen = append(seen, r.Method+" "+r.URL.Path)
				mu.Unlock()
				if problem := checkRequest(op, tc.params, r); problem != "" {
					t.Errorf("request %s %s: %s", r.Method, r.RequestURI, problem)
					http.Error(w, problem, http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(op.SuccessStatus())
				_, _ = w.Write(canned)
			}))
			defer srv.Close()
			c, _ := newClient(t, srv.URL)
			got, err := tc.call(context.Background(), c, bodies[op.ID].req)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if len(seen) != 1 {
				t.Errorf("server saw %v, want one request", seen)
			}
			again, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var want, have any
			_ = json.Unmarshal(canned, &want)
			_ = json.Unmarshal(again, &have)
			if !reflect.DeepEqual(want, have) {
				t.Errorf("decoded answer\n got %s\nwant %s", again, canned)
			}
		})
	}
	for id := range typedCalls {
		if !api[id] {
			t.Errorf("typed call %s is not an operation of the open API", id)
		}
	}
}

// checkRequest compares a received request with the contract's operation; "" when it matches.
func checkRequest(op schema.Operation, params map[string]string, r *http.Request) string {
	if r.Method != op.Method {
		return "method is not " + op.Method
	}
	pattern := "^/open/v1" + regexp.MustCompile(`\\\{(\w+)\\\}`).ReplaceAllString(regexp.QuoteMeta(op.Path), `(?P<$1>[^/]+)`) + "$"
	re := regexp.MustCompile(pattern)
	m := re.FindStringSubmatch(r.URL.Path)
	if m == nil {
		return "path does not match " + op.Path
	}
	if r.Header.Get("Authorization") != "Bearer "+secret {
		return "no bearer token"
	}
	query := r.URL.Query()
	for _, p := range op.Params {
		want := params[p.Name]
		var got string
		switch p.In {
		case "path":
			got = m[re.SubexpIndex(p.Name)]
		case "query":
			got = query.Get(p.Name)
			query.Del(p.Name)
		}
		if got != want {
			return p.Name + " = " + got + ", want " + want
		}
	}
	if len(query) > 0 {
		return "undeclared query parameters " + r.URL.RawQuery
	}
	if op.Body == nil {
		if r.ContentLength > 0 {
			return "a body was sent"
		}
		return ""
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		return "Content-Type is " + r.Header.Get("Content-Type")
	}
	var body json.RawMessage
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		return "body: " + err.Error()
	}
	if err := schema.MustCompile(op.Body.Schema).ValidateJSON(body); err != nil {
		return "body " + string(body) + ": " + err.Error()
	}
	return ""
}
