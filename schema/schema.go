// Package schema holds the card service's upstream contract (OpenAPI 3.1) and compiles its
// JSON Schemas into validators, by JSON pointer into the one embedded document.
package schema

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

//go:embed upstream.openapi.json
var contract []byte

// ContractURL is the base URL the contract is registered under; pointers are resolved against it.
const ContractURL = "urn:cardwriter:upstream.openapi.json"

// Contract returns a copy of the embedded upstream contract document.
func Contract() []byte { return bytes.Clone(contract) }

var (
	compileMu sync.Mutex
	compiler  *jsonschema.Compiler
	compiled  = map[string]*Validator{}
	printer   = message.NewPrinter(language.English)
)

func newCompiler() (*jsonschema.Compiler, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(contract))
	if err != nil {
		return nil, fmt.Errorf("parse contract: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(ContractURL, doc); err != nil {
		return nil, fmt.Errorf("load contract: %w", err)
	}
	return c, nil
}

// Validator checks instances against one schema of the contract.
type Validator struct {
	pointer string
	schema  *jsonschema.Schema // nil until compiled when lazy
	quick   *quickSchema       // the passing case decided fast; nil: always jsonschema/v6
	lazy    *lazySchema        // set by CompileJSONLazy
}

// lazySchema is the deferred compilation of a Validator made by CompileJSONLazy.
type lazySchema struct {
	once    sync.Once
	compile func() // sets schema and quick, or err
	schema  *jsonschema.Schema
	quick   *quickSchema
	err     error
}

// Compile compiles a lazily made Validator now (a no-op for others) and reports whether its
// schema compiles.
func (v *Validator) Compile() error {
	_, _, err := v.compiled()
	return err
}

func (v *Validator) compiled() (*jsonschema.Schema, *quickSchema, error) {
	if v.lazy == nil {
		return v.schema, v.quick, nil
	}
	v.lazy.once.Do(v.lazy.compile)
	return v.lazy.schema, v.lazy.quick, v.lazy.err
}

// Compile returns the validator of the schema at pointer (a JSON pointer fragment such as
// "#/components/schemas/Card"), compiling it once and caching it.
func Compile(pointer string) (*Validator, error) {
	if !strings.HasPrefix(pointer, "#") {
		return nil, fmt.Errorf("compile schema %q: pointer must start with #", pointer)
	}
	compileMu.Lock()
	defer compileMu.Unlock()
	if v, ok := compiled[pointer]; ok {
		return v, nil
	}
	if compiler == nil {
		c, err := newCompiler()
		if err != nil {
			return nil, err
		}
		compiler = c
	}
	s, err := compiler.Compile(ContractURL + pointer)
	if err != nil {
		return nil, fmt.Errorf("compile schema %s: %w", pointer, err)
	}
	v := &Validator{pointer: pointer, schema: s}
	compiled[pointer] = v
	return v, nil
}

// MustCompile is Compile for pointers known at build time; it panics on a broken contract.
func MustCompile(pointer string) *Validator {
	v, err := Compile(pointer)
	if err != nil {
		panic(err)
	}
	return v
}

// Component returns the validator of the named component schema (#/components/schemas/NAME).
func Component(name string) *Validator {
	return MustCompile("#/components/schemas/" + name)
}

// Pointer returns the JSON pointer of the schema this validator checks.
func (v *Validator) Pointer() string { return v.pointer }

// Validate checks an instance decoded by DecodeJSON (or made of map[string]any, []any, string,
// bool, nil, json.Number, float64 and int). It returns a *ValidationError listing every failure.
func (v *Validator) Validate(instance any) error {
	sch, quick, err := v.compiled()
	if err != nil {
		return err
	}
	if quick != nil && quick.check(instance) == valid {
		return nil
	}
	err = sch.Validate(instance)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return fmt.Errorf("validate against %s: %w", v.pointer, err)
	}
	return &ValidationError{Problems: problems(ve)}
}

// ValidateJSON decodes data and validates it; a decoding failure is reported as a problem at "/".
func (v *Validator) ValidateJSON(data []byte) error {
	inst, err := DecodeJSON(data)
	if err != nil {
		return &ValidationError{Problems: []Problem{{InstanceLocation: "/", Message: err.Error()}}}
	}
	return v.Validate(inst)
}

// DecodeJSON decodes one JSON value with numbers kept exact, ready for Validate.
func DecodeJSON(data []byte) (any, error) {
	if v, ok := decodeFast(data); ok {
		return v, nil
	}
	return decodeStd(data)
}

// decodeStd is DecodeJSON with encoding/json: the reference decodeFast matches, and the
// decoder of whatever decodeFast does not accept (it words every error).
func decodeStd(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("invalid JSON: more than one value")
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("invalid JSON: trailing data")
	}
	return v, nil
}

// Problem is one failure: where in the instance, and why.
type Problem struct {
	InstanceLocation string `json:"instanceLocation"`
	Message          string `json:"message"`
}

// String renders the problem as "instanceLocation: message".
func (p Problem) String() string { return p.InstanceLocation + ": " + p.Message }

// ValidationError lists every way an instance fails its schema, sorted by location.
type ValidationError struct {
	Problems []Problem
}

// Error renders every problem as "instanceLocation: message", separated by "; ".
func (e *ValidationError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

const notAllowed = "not allowed here"

// problems flattens the library's error tree into its leaves, deduplicated and sorted.
func problems(root *jsonschema.ValidationError) []Problem {
	var out []Problem
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		msg := e.ErrorKind.LocalizedString(printer)
		if _, ok := e.ErrorKind.(*kind.FalseSchema); ok {
			msg = notAllowed
		}
		out = append(out, Problem{InstanceLocation: pointerOf(e.InstanceLocation), Message: msg})
	}
	walk(root)
	// A field that failed its own schema is also reported as unevaluated ("not allowed");
	// keep only the specific reason.
	out = slices.DeleteFunc(out, func(p Problem) bool {
		if p.Message != notAllowed {
			return false
		}
		return slices.ContainsFunc(out, func(q Problem) bool {
			return q.Message != notAllowed && (q.InstanceLocation == p.InstanceLocation ||
				strings.HasPrefix(q.InstanceLocation, p.InstanceLocation+"/"))
		})
	})
	slices.SortFunc(out, func(a, b Problem) int {
		if c := strings.Compare(a.InstanceLocation, b.InstanceLocation); c != 0 {
			return c
		}
		return strings.Compare(a.Message, b.Message)
	})
	return slices.Compact(out)
}

// pointerOf renders an instance location as a JSON pointer; the root is "/".
func pointerOf(tokens []string) string {
	if len(tokens) == 0 {
		return "/"
	}
	var sb strings.Builder
	for _, t := range tokens {
		sb.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		sb.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return sb.String()
}
