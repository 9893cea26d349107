package oauthserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/url"
	"strings"
)

// CheckChallenge checks the PKCE parameters of an authorization request: S256 only (plain is
// refused), and a challenge that is the base64url SHA-256 of a verifier.
func CheckChallenge(q url.Values) *Error {
	switch m := q.Get("code_challenge_method"); {
	case m == "":
		return BadRequest("invalid_request", "PKCE is required: send code_challenge with code_challenge_method=S256.")
	case m != "S256":
		return BadRequest("invalid_request", "code_challenge_method must be S256.")
	}
	c := q.Get("code_challenge")
	if c == "" {
		return BadRequest("invalid_request", "PKCE is required: code_challenge is missing.")
	}
	if !ValidChallenge(c) {
		return BadRequest("invalid_request", "code_challenge must be the base64url (no padding) SHA-256 of the code verifier: 43 characters.")
	}
	return nil
}

// ValidChallenge accepts an S256 code challenge: base64url without padding of 32 bytes.
func ValidChallenge(c string) bool {
	if len(c) != 43 {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(c)
	return err == nil
}

// ValidVerifier accepts a PKCE code verifier (RFC 7636 section 4.1).
func ValidVerifier(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for _, c := range v {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("-._~", c)) {
			return false
		}
	}
	return true
}

// S256 is the S256 code challenge of a verifier (RFC 7636 section 4.2).
func S256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// VerifierMatches reports whether verifier is a valid code verifier whose S256 challenge is
// challenge, compared in constant time.
func VerifierMatches(verifier, challenge string) bool {
	return ValidVerifier(verifier) && subtle.ConstantTimeCompare([]byte(S256(verifier)), []byte(challenge)) == 1
}
