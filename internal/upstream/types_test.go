package upstream_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// contractDoc is the contract, decoded for walking by JSON pointer.
func contractDoc(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(schema.Contract(), &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// resolve returns the node at a "#/..." pointer.
func resolve(t *testing.T, doc map[string]any, ptr string) map[string]any {
	t.Helper()
	var node any = doc
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "#/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		m, ok := node.(map[string]any)
		if !ok {
			t.Fatalf("%s: %q is not under an object", ptr, tok)
		}
		node = m[tok]
	}
	m, ok := node.(map[string]any)
	if !ok {
		t.Fatalf("%s is not an object", ptr)
	}
	return m
}

// objectShape returns the properties and required names of an object schema, following a
// "$ref" beside them (as WorldbookEntry does with WorldbookEntryFields).
func objectShape(t *testing.T, doc map[string]any, ptr string) (props, required map[string]bool) {
	t.Helper()
	props, required = map[string]bool{}, map[string]bool{}
	node := resolve(t, doc, ptr)
	if ref, ok := node["$ref"].(string); ok {
		p, r := objectShape(t, doc, ref)
		for k := range p {
			props[k] = true
		}
		for k := range r {
			required[k] = true
		}
	}
	if p, ok := node["properties"].(map[string]any); ok {
		for k := range p {
			props[k] = true
		}
	}
	if r, ok := node["required"].([]any); ok {
		for _, k := range r {
			required[k.(string)] = true
		}
	}
	return props, required
}

const comp = "#/components/schemas/"

// typeSchemas pairs every struct type of the package with the contract schema it mirrors.
var typeSchemas = []struct {
	v     any
	ptr   string
	input bool // a request body part: optional fields must be omitted when unset
}{
	{upstream.Me{}, comp + "Me", false},
	{upstream.CardCreateInput{}, comp + "CardCreateInput", true},
	{upstream.CardCreated{}, comp + "CardCreated", false},
	{upstream.CardSections{}, comp + "CardSections", true},
	{upstream.Card{}, comp + "Card", false},
	{upstream.OpeningLinesInput{}, comp + "OpeningLinesInput", true},
	{upstream.RoleSaved{}, comp + "RoleSaved", false},
	{upstream.CardProfileInput{}, comp + "CardProfileInput", true},
	{upstream.CardDocumentInput{}, comp + "CardDocumentInput", true},
	{upstream.VisibilityInput{}, comp + "VisibilityInput", true},
	{upstream.VisibilityResult{}, comp + "VisibilityResult", false},
	{upstream.ValidationIssue{}, comp + "ValidationIssue", false},
	{upstream.ValidationReport{}, comp + "ValidationReport", false},
	{upstream.PublishInput{}, comp + "PublishInput", true},
	{upstream.PublishResult{}, comp + "PublishResult", false},
	{upstream.ImageUploadInput{}, comp + "ImageUploadInput", true},
	{upstream.ImageUploaded{}, comp + "ImageUploaded", false},
	{upstream.CardImage{}, comp + "CardAssets/properties/images/items", false},
	{upstream.CardAssets{}, comp + "CardAssets", false},
	{upstream.Worldbook{}, comp + "Worldbook", false},
	{upstream.WorldbookList{}, comp + "WorldbookList", false},
	{upstream.BoundWorldbooks{}, comp + "BoundWorldbooks", false},
	{upstream.WorldbookCreateInput{}, comp + "WorldbookCreateInput", true},
	{upstream.WorldbookCreated{}, comp + "WorldbookCreated", false},
	{upstream.MatchOptions{}, comp + "MatchOptions", false},
	{upstream.WorldbookEntry{}, comp + "WorldbookEntry", false},
	{upstream.WorldbookEntryList{}, comp + "WorldbookEntryList", false},
	{upstream.WorldbookEntryOp{}, comp + "WorldbookEntryOp", true},
	{upstream.WorldbookMetadata{}, comp + "WorldbookDocumentInput/properties/metadata", true},
	{upstream.WorldbookBinding{}, comp + "WorldbookDocumentInput/properties/binding", true},
	{upstream.WorldbookDocumentInput{}, comp + "WorldbookDocumentInput", true},
	{upstream.WorldbookDocumentResult{}, comp + "WorldbookDocumentResult", false},
	{upstream.TrialEntryInput{}, comp + "TrialEntryInput", true},
	{upstream.TrialCardInput{}, comp + "TrialCardInput", true},
	{upstream.TrialWorldbookInput{}, comp + "TrialUpsertInput/properties/worldbook", true},
	{upstream.TrialUpsertInput{}, comp + "TrialUpsertInput", true},
	{upstream.Slots{}, comp + "Slots", false},
	{upstream.TrialWorldbookSummary{}, comp + "TrialSummary/properties/worldbook", false},
	{upstream.TrialSummary{}, comp + "TrialSummary", false},
	{upstream.TrialList{}, comp + "TrialList", false},
	{upstream.TrialRemoved{}, comp + "TrialRemoved", false},
}

// TestTypesMatchContract checks every struct field for field against its schema: the same
// JSON names, required ones never omitted, optional request fields omitted when unset.
func TestTypesMatchContract(t *testing.T) {
	t.Parallel()
	doc := contractDoc(t)
	for _, ts := range typeSchemas {
		typ := reflect.TypeOf(ts.v)
		t.Run(typ.Name(), func(t *testing.T) {
			props, required := objectShape(t, doc, ts.ptr)
			fields := map[string]string{} // json name -> options
			for f := range typ.Fields() {
				tag := f.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				fields[name] = opts
			}
			for name, opts := range fields {
				if !props[name] {
					t.Errorf("field %q is not a property of %s", name, ts.ptr)
				}
				omits := strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")
				if required[name] && omits {
					t.Errorf("required field %q is omitted when empty", name)
				}
				if ts.input && !required[name] && !omits {
					t.Errorf("optional request field %q is sent even when unset", name)
				}
			}
			for name := range props {
				if _, ok := fields[name]; !ok {
					t.Errorf("property %q of %s has no field", name, ts.ptr)
				}
			}
		})
	}
	// Every exported struct type of the package is in the table.
	covered := map[string]bool{}
	for _, ts := range typeSchemas {
		covered[reflect.TypeOf(ts.v).Name()] = true
	}
	for _, name := range exportedStructs() {
		if !covered[name] {
			t.Errorf("struct %s is not checked against the contract", name)
		}
	}
}

// exportedStructs lists the package's exported struct types that are JSON bodies, by their
// appearance in the typed methods' signatures and in the table above.
func exportedStructs() []string {
	c := reflect.TypeFor[*upstream.Client]()
	seen := map[string]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() != c.Elem().PkgPath() || seen[t.Name()] {
			return
		}
		if t == reflect.TypeFor[upstream.Client]() || t == reflect.TypeFor[upstream.Error]() || t == reflect.TypeFor[upstream.ArgumentError]() || t == reflect.TypeFor[upstream.RetryPolicy]() || t == reflect.TypeFor[upstream.Exchange]() || t == reflect.TypeFor[upstream.Identity]() {
			return
		}
		seen[t.Name()] = true
		for f := range t.Fields() {
			walk(f.Type)
		}
	}
	for m := range c.Methods() {
		for in := range m.Type.Ins() {
			walk(in)
		}
		for out := range m.Type.Outs() {
			walk(out)
		}
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range seen {
			if !yield(n) {
				return
			}
		}
	})
	return names
}

// filled holds one value of each body with every field set, per operation.
func filled() map[string]struct{ req, resp any } {
	when := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	digest := strings.Repeat("ab", 32)
	sections := &upstream.CardSections{
		Description: new("d"), Personality: new("p"), Scenario: new("s"), ExampleDialogue: new("e"),
		SystemPrompt: new("sp"), PostHistoryInstructions: new("ph"), CreatorNotes: new(""),
	}
	mo := &upstream.MatchOptions{CaseSensitive: true, MatchWholeWords: true, SelectiveLogic: 3}
	card := upstream.Card{
		RoleID: "r1", RoleName: "Mira", RoleDesc: "d", RoleWelcome: "w", WelcomeAlternates: []string{"a"}, Prologue: []string{"p"},
		RoleVisibility: "private", ReviewStatus: "none", Tags: []string{"t"}, Language: "en", CardType: "character",
		ContentRatingIntent: "general", AvatarImageID: "i1", BackgroundImageID: "i2", Sections: sections,
		LastUpdateTime: when.Format(time.RFC3339), Extra: map[string]json.RawMessage{"likes": json.RawMessage(`3`)},
	}
	wb := upstream.Worldbook{WorldbookID: "w1", Name: "n", Description: "d", Tags: []string{"t"}, Format: upstream.WorldbookTavern, EntryCount: 1, BoundRoleIDs: []string{"r1"}}
	trial := upstream.TrialSummary{
		ClientKey: "k1", RoleID: "r1", Created: true, ExpiresAt: when, Slots: upstream.Slots{Used: 1, Max: 5},
		Sections: map[string]string{"roleName": digest}, Changed: []string{"roleName"},
		Worldbook: upstream.TrialWorldbookSummary{WorldbookID: "w1", Entries: 1, Created: 1, Deleted: 1},
	}
	return map[string]struct{ req, resp any }{
		"getMe": {nil, upstream.Me{UserID: "u1", Nickname: "n", Scopes: []string{"mcp:card-writer"}}},
		"createCard": {
			upstream.CardCreateInput{RoleName: "Mira", Language: "en", CardType: "character", ContentRatingIntent: "general", IdempotencyKey: "k"},
			upstream.CardCreated{RoleID: "r1", RoleVisibility: "private", ReviewStatus: "none"},
		},
		"getCard": {nil, card},
		"setOpeningLines": {
			upstream.OpeningLinesInput{RoleWelcome: "w", Alternates: []string{"a"}, Prologue: []string{}},
			upstream.RoleSaved{RoleID: "r1", OK: true},
		},
		"updateCardProfile": {
			upstream.CardProfileInput{RoleName: new("Mira"), RoleDesc: new("d"), Tags: []string{"t"}, Language: new("en"),
				ContentRatingIntent: new("general"), AvatarImageID: new("i1"), BackgroundImageID: new("")},
			card,
		},
		"writeCardDocument": {upstream.CardDocumentInput{Sections: *sections}, upstream.RoleSaved{RoleID: "r1", OK: true}},
		"setCardVisibility": {
			upstream.VisibilityInput{Visibility: upstream.VisibilityPrivate},
			upstream.VisibilityResult{RoleID: "r1", RoleVisibility: "private"},
		},
		"validateCard": {nil, upstream.ValidationReport{RoleID: "r1", Ready: true, Issues: []upstream.ValidationIssue{{Field: "f", Severity: "warning", Message: "m"}}}},
		"publishCard":  {upstream.PublishInput{}, upstream.PublishResult{RoleID: "r1", ReviewStatus: "pending"}},
		"uploadImage": {
			upstream.ImageUploadInput{Purpose: "avatar", RoleID: "r1", ContentType: "image/png", DataBase64: "iVBORw0KGgo="},
			upstream.ImageUploaded{ImageID: "i1", URL: "https://cdn.example.com/i1.png", Width: 1, Height: 1},
		},
		"listCardAssets": {nil, upstream.CardAssets{RoleID: "r1", Images: []upstream.CardImage{{ImageID: "i1", Purpose: "avatar", URL: "https://cdn.example.com/i1.png"}}}},
		"listWorldbooks": {nil, upstream.WorldbookList{List: []upstream.Worldbook{wb}}},
		"createWorldbook": {
			upstream.WorldbookCreateInput{Name: "n", Description: "d", Tags: []string{"t"}, Format: upstream.WorldbookNative},
			upstream.WorldbookCreated{WorldbookID: "w1"},
		},
		"getWorldbook":       {nil, wb},
		"listCardWorldbooks": {nil, upstream.BoundWorldbooks{RoleID: "r1", List: []upstream.Worldbook{wb}}},
		"listWorldbookEntries": {nil, upstream.WorldbookEntryList{WorldbookID: "w1", Entries: []upstream.WorldbookEntry{{
			EntryID: "e1", Name: "n", Content: "c", Keywords: []string{"k"}, SecondaryKeywords: []string{"s"}, MatchOptions: mo,
			Category: "c", IsEnabled: true, IsConstant: true, Priority: 1, SortOrder: 1, LastUpdateTime: "2026-03-01T12:00:00Z", ActivationCount: 1,
		}}}},
		"writeWorldbookDocument": {
			upstream.WorldbookDocumentInput{
				Metadata: &upstream.WorldbookMetadata{Name: new("n"), Description: new("d"), Tags: []string{"t"}},
				Entries: []upstream.WorldbookEntryOp{{
					Op: upstream.EntryOpUpdate, EntryID: "e1", Name: new("n"), Content: new("c"), Keywords: []string{"k"},
					SecondaryKeywords: []string{}, MatchOptions: mo, Category: new("c"), IsEnabled: new(false), IsConstant: new(true),
					Priority: new(0), SortOrder: new(2),
				}},
				Binding: &upstream.WorldbookBinding{RoleID: "r1"},
			},
			upstream.WorldbookDocumentResult{CreatedEntryIDs: []string{"e2"}, UpdatedCount: 1, DeletedCount: 1, Bound: true},
		},
		"listTrialCards": {nil, upstream.TrialList{List: []upstream.TrialSummary{trial}, Slots: upstream.Slots{Used: 1, Max: 5}, TTLHours: 24}},
		"getTrialCard":   {nil, trial},
		"upsertTrialCard": {
			upstream.TrialUpsertInput{
				Card: upstream.TrialCardInput{RoleName: "Mira", RoleDesc: "d", RoleWelcome: "w", WelcomeAlternates: []string{"a"}, Prologue: []string{"p"}, Sections: sections},
				Worldbook: &upstream.TrialWorldbookInput{Entries: []upstream.TrialEntryInput{{
					Name: "n", Content: "c", Keywords: []string{"k"}, SecondaryKeywords: []string{"s"}, MatchOptions: mo,
					Category: new("c"), IsEnabled: new(true), IsConstant: new(false), Priority: new(1), SortOrder: new(1),
				}}},
			},
			trial,
		},
		"deleteTrialCard": {nil, upstream.TrialRemoved{ClientKey: "k1", Removed: true}},
	}
}

// TestFilledBodiesValidate marshals a value of every request and response type with every
// field set and validates it against the operation's schemas.
func TestFilledBodiesValidate(t *testing.T) {
	t.Parallel()
	ops, err := schema.Operations()
	if err != nil {
		t.Fatal(err)
	}
	bodies := filled()
	for _, op := range ops {
		if op.Server != schema.ServerAPI {
			continue
		}
		t.Run(op.ID, func(t *testing.T) {
			b, ok := bodies[op.ID]
			if !ok {
				t.Fatalf("no filled bodies for %s", op.ID)
			}
			if (op.Body != nil) != (b.req != nil) {
				t.Fatalf("request body: contract has %v, test has %v", op.Body != nil, b.req != nil)
			}
			if b.req != nil {
				assertAllSet(t, reflect.ValueOf(b.req), "request")
				validateValue(t, op.Body.Schema, b.req)
			}
			assertAllSet(t, reflect.ValueOf(b.resp), "response")
			resp, _ := op.Response(op.SuccessStatus())
			validateValue(t, resp.Schema, b.resp)
		})
	}
}

func validateValue(t *testing.T, ptr string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %T: %v", v, err)
	}
	if err := schema.MustCompile(ptr).ValidateJSON(data); err != nil {
		t.Errorf("%T %s\nagainst %s: %v", v, data, ptr, err)
	}
}

// assertAllSet fails for any struct field of this package left at its zero value, so that
// the filled values exercise every field.
func assertAllSet(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			assertAllSet(t, v.Elem(), path)
		}
	case reflect.Slice:
		for i := range v.Len() {
			assertAllSet(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Struct:
		if v.Type().PkgPath() != reflect.TypeFor[upstream.Card]().PkgPath() {
			return
		}
		for i := range v.NumField() {
			f := v.Field(i)
			name := path + "." + v.Type().Field(i).Name
			if f.IsZero() && f.Kind() != reflect.Bool && f.Kind() != reflect.Int {
				t.Errorf("%s is not set", name)
			}
			assertAllSet(t, f, name)
		}
	}
}

// TestPresenceSemantics checks how unset, empty and set fields are sent.
func TestPresenceSemantics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v    any
		ptr  string
		want string
	}{
		{upstream.OpeningLinesInput{RoleWelcome: "w"}, comp + "OpeningLinesInput", `{"roleWelcome":"w"}`},
		{upstream.OpeningLinesInput{RoleWelcome: "w", Alternates: []string{}, Prologue: []string{}}, comp + "OpeningLinesInput", `{"roleWelcome":"w","alternates":[],"prologue":[]}`},
		{upstream.CardProfileInput{}, comp + "CardProfileInput", `{}`},
		{upstream.CardProfileInput{RoleDesc: new(""), Tags: []string{}, AvatarImageID: new("")}, comp + "CardProfileInput", `{"roleDesc":"","tags":[],"avatarImageId":""}`},
		{upstream.CardDocumentInput{Sections: upstream.CardSections{Scenario: new("")}}, comp + "CardDocumentInput", `{"sections":{"scenario":""}}`},
		{upstream.WorldbookEntryOp{Op: upstream.EntryOpUpdate, EntryID: "e1", IsEnabled: new(false), Priority: new(0)}, comp + "WorldbookEntryOp", `{"op":"update","entryId":"e1","isEnabled":false,"priority":0}`},
		{upstream.WorldbookEntryOp{Op: upstream.EntryOpDelete, EntryID: "e1"}, comp + "WorldbookEntryOp", `{"op":"delete","entryId":"e1"}`},
		{upstream.WorldbookEntryOp{Op: upstream.EntryOpCreate, Name: new("n"), Content: new("c"), Keywords: []string{}}, comp + "WorldbookEntryOp", `{"op":"create","name":"n","content":"c","keywords":[]}`},
		{upstream.WorldbookDocumentInput{}, comp + "WorldbookDocumentInput", `{}`},
		{upstream.TrialUpsertInput{Card: upstream.TrialCardInput{RoleName: "M"}, Worldbook: &upstream.TrialWorldbookInput{}}, comp + "TrialUpsertInput", `{"card":{"roleName":"M"},"worldbook":{"entries":[]}}`},
		{upstream.TrialEntryInput{Name: "n", Content: "c"}, comp + "TrialEntryInput", `{"name":"n","content":"c","keywords":[]}`},
		{upstream.PublishInput{}, comp + "PublishInput", `{}`},
	}
	for _, tt := range tests {
		data, err := json.Marshal(tt.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != tt.want {
			t.Errorf("%T: %s, want %s", tt.v, data, tt.want)
		}
		if err := schema.MustCompile(tt.ptr).ValidateJSON(data); err != nil {
			t.Errorf("%s: %v", data, err)
		}
	}
}
