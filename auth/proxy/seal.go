package proxy

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// KeySize is the size of the state key, in bytes.
const KeySize = 32

// KeyFile is the name of the state key's file in the state directory, when the key is not
// given.
const KeyFile = "state.key"

// LoadKey returns the state key: value (the base64 of 32 bytes) when it is not empty;
// otherwise the key in dir/state.key, generated there (0600) when missing. generated reports
// a key made now.
func LoadKey(value, dir string) (key []byte, generated bool, err error) {
	if value != "" {
		key, err := decodeKey(value)
		if err != nil {
			return nil, false, fmt.Errorf("proxy: the state key: %w", err)
		}
		return key, false, nil
	}
	if dir == "" {
		return nil, false, errors.New("proxy: no state key and no state directory to keep one in")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("proxy: state directory: %w", err)
	}
	path := filepath.Join(dir, KeyFile)
	raw, err := os.ReadFile(path)
	if err == nil {
		key, err := decodeKey(string(raw))
		if err != nil {
			return nil, false, fmt.Errorf("proxy: the state key in %s: %w", path, err)
		}
		return key, false, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("proxy: read the state key: %w", err)
	}
	key = make([]byte, KeySize)
	_, _ = rand.Read(key)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("proxy: create the state key: %w", err)
	}
	_, werr := f.WriteString(base64.StdEncoding.EncodeToString(key) + "\n")
	serr := f.Sync()
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		_ = os.Remove(path)
		return nil, false, fmt.Errorf("proxy: write the state key: %w", err)
	}
	return key, true, nil
}

// decodeKey reads base64 (standard or URL alphabet, padded or not) of exactly 32 bytes.
func decodeKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != KeySize {
				return nil, fmt.Errorf("it decodes to %d bytes, want %d", len(k), KeySize)
			}
			return k, nil
		}
	}
	return nil, errors.New("it is not base64 (make one with: openssl rand -base64 32)")
}

// keys are the keys derived from the state key: one seals the card service's tokens
// (AES-256-GCM), one signs cookies and CSRF tokens, one authenticates the records that grant
// access (HMAC-SHA-256 both). The keys derived from previous state keys still open, and
// verify, what was sealed or signed before a rotation; everything new is under the current key.
type keys struct {
	cur  *derived
	prev []*derived
}

type derived struct {
	aead   cipher.AEAD
	mac    []byte // cookies and CSRF tokens
	record []byte // records of the store (recordMAC)
}

func deriveKeys(stateKey []byte, previous ...[]byte) (*keys, error) {
	cur, err := derive(stateKey)
	if err != nil {
		return nil, err
	}
	k := &keys{cur: cur}
	for _, p := range previous {
		d, err := derive(p)
		if err != nil {
			return nil, fmt.Errorf("proxy: a previous state key: %w", err)
		}
		k.prev = append(k.prev, d)
	}
	return k, nil
}

func derive(stateKey []byte) (*derived, error) {
	if len(stateKey) != KeySize {
		return nil, fmt.Errorf("proxy: the state key must be %d bytes", KeySize)
	}
	var sub [3][]byte
	for i, info := range []string{"cardwriter-mcp proxy seal v1", "cardwriter-mcp proxy cookie v1", "cardwriter-mcp proxy record v1"} {
		k, err := hkdf.Key(sha256.New, stateKey, nil, info, 32)
		if err != nil {
			return nil, err
		}
		sub[i] = k
	}
	block, err := aes.NewCipher(sub[0])
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &derived{aead: aead, mac: sub[1], record: sub[2]}, nil
}

// all returns the current keys, then the previous ones.
func (k *keys) all() []*derived { return append([]*derived{k.cur}, k.prev...) }

// seal encrypts plain, bound to context (the record it belongs to): base64url(nonce ||
// ciphertext).
func (k *keys) seal(plain []byte, context string) string {
	aead := k.cur.aead
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	out := aead.Seal(nonce, nonce, plain, []byte(context))
	return base64.RawURLEncoding.EncodeToString(out)
}

// errSealed is the error of a sealed value that cannot be opened (another key, another
// record, or damaged).
var errSealed = errors.New("the sealed value cannot be opened with this state key")

// open decrypts what seal made, under the current key or a previous one.
func (k *keys) open(sealed, context string) ([]byte, error) {
	raw, err := base64.RawURLEncoding.DecodeString(sealed)
	if err != nil {
		return nil, errSealed
	}
	for _, d := range k.all() {
		n := d.aead.NonceSize()
		if len(raw) < n {
			return nil, errSealed
		}
		if plain, err := d.aead.Open(nil, raw[:n], raw[n:], []byte(context)); err == nil {
			return plain, nil
		}
	}
	return nil, errSealed
}

func hmacOf(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// sign returns the HMAC of the parts, base64url.
func (k *keys) sign(parts ...string) string { return hmacOf(k.cur.mac, parts...) }

// verify checks what sign made, under the current key or a previous one.
func (k *keys) verify(got string, parts ...string) bool {
	if got == "" {
		return false
	}
	for _, d := range k.all() {
		if hmac.Equal([]byte(got), []byte(hmacOf(d.mac, parts...))) {
			return true
		}
	}
	return false
}

// recordMAC authenticates a record of the store: its key and its JSON (without its MAC).
func (k *keys) recordMAC(key string, raw []byte) string {
	return hmacOf(k.cur.record, key, string(raw))
}

// verifyRecord checks what recordMAC made, under the current key or a previous one.
func (k *keys) verifyRecord(got, key string, raw []byte) bool {
	if got == "" {
		return false
	}
	for _, d := range k.all() {
		if hmac.Equal([]byte(got), []byte(hmacOf(d.record, key, string(raw)))) {
			return true
		}
	}
	return false
}

// newID returns a short random identifier (not a secret) after prefix.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
