package oauthserver

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
)

// NewSecret returns 256 random bits in base64url after prefix: a token, code, request or
// session id.
func NewSecret(prefix string) string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Digest is how a code or token is stored: its SHA-256, hex.
func Digest(v string) string {
	sum := sha256.Sum256([]byte(v))
	return hex.EncodeToString(sum[:])
}
