package auth

import (
	"io"
	"strings"
	"testing"
)

// TestReadPasted: what a person pastes into login is taken as the browser's redirect would be:
// the whole address, its query or the code alone answer the sign-in; an address of another
// sign-in (its state) is refused and the wait goes on; an error answer ends it.
func TestReadPasted(t *testing.T) {
	t.Parallel()
	const state, issuer = "the-state", "https://api.example.com"
	tests := []struct {
		name     string
		pasted   string
		wantCode string // "" when no code is taken
		wantFail bool   // the sign-in ends with an error
		wantOut  string
	}{
		{"the address", "http://127.0.0.1:4711/callback?code=abc&state=the-state&iss=https%3A%2F%2Fapi.example.com\n", "abc", false, "Received"},
		{"the query", "code=abc&state=the-state\n", "abc", false, "Received"},
		{"the code alone, after blank lines", "\n  \nabc\n", "abc", false, "Received"},
		{"another sign-in, then this one", "http://127.0.0.1:1/callback?code=x&state=other\ncode=abc&state=the-state\n", "abc", false, "Unknown sign-in"},
		{"another server", "http://127.0.0.1:1/callback?code=x&state=the-state&iss=https%3A%2F%2Fevil.example\n", "", true, "Sign-in refused"},
		{"a refusal", "http://127.0.0.1:1/callback?error=access_denied&state=the-state\n", "", true, "did not grant access"},
		{"not an address", "http://[::1/callback?code=x\n", "", false, "not an address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cb := newCallback(state, &Metadata{Issuer: issuer})
			var out strings.Builder
			readPasted(strings.NewReader(tt.pasted), &out, cb)
			select {
			case code := <-cb.codes:
				if code != tt.wantCode {
					t.Errorf("code %q, want %q", code, tt.wantCode)
				}
			case err := <-cb.failures:
				if !tt.wantFail {
					t.Errorf("failed: %v", err)
				}
			default:
				if tt.wantCode != "" || tt.wantFail {
					t.Errorf("nothing taken from %q", tt.pasted)
				}
			}
			if !strings.Contains(out.String(), tt.wantOut) {
				t.Errorf("said %q, want %q", out.String(), tt.wantOut)
			}
		})
	}
}

// FuzzReadPasted: whatever is pasted, readPasted neither panics nor takes more than one answer.
func FuzzReadPasted(f *testing.F) {
	for _, s := range []string{"abc", "code=abc&state=s", "http://127.0.0.1:1/callback?code=a&state=s&iss=x", "?", "=", "%zz", "http://[::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pasted string) {
		cb := newCallback("s", &Metadata{Issuer: "https://api.example.com", AuthorizationResponseIssParameterSupported: true})
		readPasted(strings.NewReader(pasted+"\n"+pasted), io.Discard, cb)
		if n := len(cb.codes) + len(cb.failures); n > 1 {
			t.Fatalf("%d answers taken from %q", n, pasted)
		}
	})
}
