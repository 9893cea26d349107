package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/cardwriter/cardwriter-mcp/internal/upstream"
	"github.com/cardwriter/cardwriter-mcp/schema"
)

// exitCode is an error that ends the process with its code, its explanation already printed.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// probeCheck is one exchange of the probe and how it differs from the contract.
type probeCheck struct {
	Operation   string   `json:"operation"`
	Method      string   `json:"method"`
	Path        string   `json:"path"`
	Status      int      `json:"status"`
	Differences []string `json:"differences"`
}

// probeReport is what `cardwriter-mcp probe --json` prints.
type probeReport struct {
	Service     string       `json:"service"`
	Contract    string       `json:"contract"`
	Checks      []probeCheck `json:"checks"`
	Differences int          `json:"differences"`
	// Identity says whose revisions and exports are, and what the identity operation answered.
	Identity string `json:"identity"`
}

func runProbe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("probe", "probe [--api-host URL | --sandbox] [--contract FILE] [--json]", stdout, stderr, cliEnv...)
	var f serverFlags
	cliFlags(fs, &f) // the token: CARDWRITER_TOKEN or the sign-in saved by login
	asJSON := cliOnlyBool(fs, "json", "print the report as JSON")
	if err := parseFlags(fs, args, nil); err != nil {
		return helpOK(err)
	}
	logger, err := f.logger(stderr)
	if err != nil {
		return err
	}
	client, _, err := f.newClient(logger, "")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	p := &prober{client: client, table: client.Contract()}
	if err := p.run(ctx); err != nil {
		return err
	}
	rep := probeReport{Service: client.BaseURL(), Contract: "embedded", Checks: p.checks}
	if src := p.table.Source(); src != "" {
		rep.Contract = "embedded, corrected by " + src
	}
	meStatus := 0
	for _, c := range p.checks {
		rep.Differences += len(c.Differences)
		if c.Operation == identityOperation {
			meStatus = c.Status
		}
	}
	_, profile := stdioRevisions(io.Discard)
	rep.Identity = identitySource(p.table, meStatus, profile)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		printProbe(stdout, rep, p.signInFailed)
	}
	if p.signInFailed {
		return exitCode(2)
	}
	if rep.Differences > 0 {
		return exitCode(1)
	}
	return nil
}

// printProbe prints the report; signInFailed (the token refused) says what to do about that
// instead of pointing at the contract, which is not at fault.
func printProbe(w io.Writer, rep probeReport, signInFailed bool) {
	fmt.Fprintf(w, "Probed %s against the %s contract.\n", rep.Service, rep.Contract)
	defer fmt.Fprintf(w, "Identity: %s.\n", rep.Identity)
	for _, c := range rep.Checks {
		mark := "ok"
		if len(c.Differences) > 0 {
			mark = fmt.Sprintf("%d difference(s)", len(c.Differences))
		}
		fmt.Fprintf(w, "%-22s %-6s %-32s %3d  %s\n", c.Operation, c.Method, c.Path, c.Status, mark)
		for _, d := range c.Differences {
			fmt.Fprintf(w, "    - %s\n", d)
		}
	}
	if signInFailed {
		host := strings.TrimSuffix(rep.Service, "/open/v1")
		if os.Getenv("CARDWRITER_TOKEN") != "" {
			fmt.Fprintf(w, "%s Nothing else was probed.\n", refusedEnvToken(host))
			return
		}
		fmt.Fprintf(w, "The card service refused the token, so nothing else was probed: run `cardwriter-mcp login --api-host %s` (or set CARDWRITER_TOKEN to a valid access token), then probe again.\n", host)
		return
	}
	if rep.Differences == 0 {
		fmt.Fprintln(w, "No differences: the service answers as the contract says.")
		return
	}
	fmt.Fprintf(w, "%d difference(s). Correct the contract's guesses with --contract FILE (see docs/contract.md).\n", rep.Differences)
}

// prober runs the probe's exchanges and compares each answer with the contract.
type prober struct {
	client       *upstream.Client
	table        *schema.Table
	checks       []probeCheck
	signInFailed bool
}

func (p *prober) run(ctx context.Context) error {
	me, err := p.exchange(ctx, identityOperation, nil, nil, http.StatusOK)
	if err != nil {
		return err
	}
	if me.Status == http.StatusUnauthorized {
		p.signInFailed = true
		return nil
	}
	if wbs, err := p.exchange(ctx, "listWorldbooks", nil, nil, http.StatusOK); err != nil {
		return err
	} else if id := firstID(wbs.Body, "list", "worldbookId"); id != "" {
		if _, err := p.exchange(ctx, "getWorldbook", map[string]string{"worldbookId": id}, nil, http.StatusOK); err != nil {
			return err
		}
		if _, err := p.exchange(ctx, "listWorldbookEntries", map[string]string{"worldbookId": id}, nil, http.StatusOK); err != nil {
			return err
		}
	}
	if _, err := p.exchange(ctx, "listTrialCards", nil, nil, http.StatusOK); err != nil {
		return err
	}
	// The harmless write round trip: a trial under a fresh key, read, deleted (always), gone.
	key := "cardwriter-probe-" + randomHex(6)
	params := map[string]string{"clientKey": key}
	body := map[string]any{"card": map[string]any{"roleName": "cardwriter-mcp probe", "sections": map[string]any{"description": "A trial made by cardwriter-mcp probe; it deletes it at once."}}}
	up, err := p.exchange(ctx, "upsertTrialCard", params, body, 0)
	if err != nil {
		return err
	}
	if up.Status < 200 || up.Status > 299 {
		return nil
	}
	deleted := false
	defer func() {
		if !deleted { // delete it even when the probe is cut short
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_, _ = p.client.Exchange(dctx, "deleteTrialCard", params, nil)
		}
	}()
	if _, err := p.exchange(ctx, "getTrialCard", params, nil, http.StatusOK); err != nil {
		return err
	}
	del, err := p.exchange(ctx, "deleteTrialCard", params, nil, 0)
	if err != nil {
		return err
	}
	deleted = del.Status >= 200 && del.Status < 300
	gone, err := p.exchange(ctx, "getTrialCard", params, nil, -1)
	if err != nil {
		return err
	}
	if gone.Status >= 200 && gone.Status < 300 {
		p.note("the trial is still there after deleteTrialCard answered")
	} else if code := errorCode(gone.Body); code != "trial_not_found" {
		p.note(fmt.Sprintf("a deleted trial gives error %q; the API document names trial_not_found", code))
	}
	return nil
}

// note adds a difference to the last check.
func (p *prober) note(d string) {
	if n := len(p.checks); n > 0 {
		p.checks[n-1].Differences = append(p.checks[n-1].Differences, d)
	}
}

// exchange sends one request and records how the answer differs from the contract. want is
// the status expected (0: any 2xx; -1: an error envelope).
func (p *prober) exchange(ctx context.Context, id string, params map[string]string, body any, want int) (*upstream.Exchange, error) {
	ex, err := p.client.Exchange(ctx, id, params, body)
	if err != nil {
		return nil, fmt.Errorf("probe %s: %w", id, err)
	}
	op := ex.Operation
	check := probeCheck{Operation: id, Method: op.Method, Path: op.Path, Status: ex.Status, Differences: []string{}}
	check.Differences = p.compare(op, ex, want)
	p.checks = append(p.checks, check)
	return ex, nil
}

// compare lists how one answer differs from what the contract says of op.
func (p *prober) compare(op schema.Operation, ex *upstream.Exchange, want int) []string {
	diffs := []string{}
	ok2xx := ex.Status >= 200 && ex.Status < 300
	hint := ""
	if op.Assumed {
		hint = " (the contract guessed this operation: correct it with --contract)"
	}
	switch {
	case ex.Status == http.StatusUnauthorized && os.Getenv("CARDWRITER_TOKEN") != "":
		return append(diffs, "the service refused the token in CARDWRITER_TOKEN (401)")
	case ex.Status == http.StatusUnauthorized:
		return append(diffs, "the service refused the access token (401): sign in again (`cardwriter-mcp login`) or set CARDWRITER_TOKEN")
	case want >= 0 && !ok2xx && (ex.Status == http.StatusNotFound || ex.Status == http.StatusMethodNotAllowed) && errorCode(ex.Body) == "":
		return append(diffs, fmt.Sprintf("the service does not take %s %s: it answered %d%s", op.Method, op.Path, ex.Status, hint))
	case want >= 0 && !ok2xx:
		return append(diffs, fmt.Sprintf("status %d %s (%s), where the contract expects success%s", ex.Status, http.StatusText(ex.Status), errorSummary(ex.Body), hint))
	case want == -1 && ok2xx:
		return diffs // noted by the caller
	}
	r, documented := op.Response(ex.Status)
	if !documented || (ok2xx && r.Status != ex.Status) {
		diffs = append(diffs, fmt.Sprintf("status %d is not a documented success status of the contract (%s)%s", ex.Status, successStatuses(op), hint))
		if !documented {
			return diffs
		}
	}
	if r.Schema == "" {
		return diffs
	}
	if len(strings.TrimSpace(string(ex.Body))) == 0 {
		if op.Ack {
			return append(diffs, fmt.Sprintf("no body where the contract expects one; cardwriter-mcp takes this (x-ack: any 2xx is success), but the contract's response could say so%s", hint))
		}
		return append(diffs, "no body where the contract expects one"+hint)
	}
	if mt, _, _ := mime.ParseMediaType(ex.Header.Get("Content-Type")); mt != "application/json" {
		diffs = append(diffs, fmt.Sprintf("Content-Type %q, not application/json", ex.Header.Get("Content-Type")))
	}
	inst, err := schema.DecodeJSON(ex.Body)
	if err != nil {
		return append(diffs, "the body is not JSON: "+err.Error())
	}
	v, err := p.table.Compile(r.Schema)
	if err != nil {
		return append(diffs, "the contract's response schema does not compile: "+err.Error())
	}
	if err := v.Validate(inst); err != nil {
		if ve, ok := err.(*schema.ValidationError); ok {
			for _, prob := range ve.Problems {
				diffs = append(diffs, fmt.Sprintf("the body does not fit the contract at %s%s", prob.String(), hint))
			}
		} else {
			diffs = append(diffs, err.Error())
		}
	}
	if s, err := p.table.Inline(r.Schema); err == nil {
		var extra []string
		unknownFields(s, inst, "", &extra)
		for _, path := range extra {
			diffs = append(diffs, fmt.Sprintf("field %s is not in the contract (cardwriter-mcp passes it on)", path))
		}
	}
	return diffs
}

// unknownFields appends the paths of the object fields of v that s names nowhere.
func unknownFields(s map[string]any, v any, at string, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		props := map[string]any{}
		collectProperties(s, props)
		if _, open := s["additionalProperties"].(map[string]any); open {
			return // a map of named values: no field is unknown
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			ps, known := props[k]
			if !known {
				*out = append(*out, at+"/"+k)
				continue
			}
			if m, ok := ps.(map[string]any); ok {
				unknownFields(m, x[k], at+"/"+k, out)
			}
		}
	case []any:
		items, _ := s["items"].(map[string]any)
		if items == nil {
			return
		}
		for i, e := range x {
			unknownFields(items, e, fmt.Sprintf("%s/%d", at, i), out)
		}
	}
}

// collectProperties gathers the properties s names itself and in its allOf/anyOf/oneOf branches.
func collectProperties(s map[string]any, into map[string]any) {
	if p, ok := s["properties"].(map[string]any); ok {
		for k, v := range p {
			if cur, has := into[k].(map[string]any); !has || len(cur) == 0 {
				into[k] = v
			}
		}
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		list, _ := s[k].([]any)
		for _, b := range list {
			if m, ok := b.(map[string]any); ok {
				collectProperties(m, into)
			}
		}
	}
}

func successStatuses(op schema.Operation) string {
	var out []string
	for _, r := range op.Responses {
		if r.Status >= 200 && r.Status < 300 {
			out = append(out, fmt.Sprint(r.Status))
		}
	}
	return strings.Join(out, ", ")
}

// errorCode returns the "error" of an error envelope body, "" when it is none.
func errorCode(body []byte) string {
	var env struct {
		Error string `json:"error"`
	}
	_ = json.Unmarshal(body, &env)
	return env.Error
}

func errorSummary(body []byte) string {
	var env struct {
		Error   string `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &env) != nil || env.Error == "" {
		return "no error envelope"
	}
	return env.Error + ": " + env.Message
}

// firstID returns list[0][field] of a JSON body, "" when there is none.
func firstID(body []byte, list, field string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	var items []map[string]any
	if json.Unmarshal(m[list], &items) != nil || len(items) == 0 {
		return ""
	}
	id, _ := items[0][field].(string)
	return id
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
