// Package page pages a whole list that a service returns at once: it cuts the list into pages
// that fit a budget (in whatever unit the caller measures items: tokens), and carries the
// position between pages in an opaque, stateless cursor that any replica can read after any
// restart. A cursor names the list it came from (a scope: the tool and the arguments that chose
// the list) and the list's fingerprint when it was made; the next page continues after the last
// item given, by the item's place in a stable order, so an item that stayed in the list is
// never skipped or repeated, and a list changed between two pages is noticed.
package page

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Item is one item of a list, as paging sees it.
type Item struct {
	// Order places the item in the list's stable order: pages go in ascending Order, and the
	// Orders of a list are distinct (end them with the item's id). Build it from what does not
	// change when the item is edited where you can (an id), or from a rank then the id.
	Order string
	// Version changes whenever the item does (a digest of its content); "" when unknown.
	Version string
}

// Cursor is where the next page of a list starts. Its fields are the package's; callers pass
// it around only as the string Encode makes.
type Cursor struct {
	Scope string `json:"s"`           // Scope digest of the list it pages
	After string `json:"a"`           // the Order of the last item given
	Given int    `json:"g"`           // how many items the pages before gave
	Total int    `json:"t"`           // how many items the list had then
	List  string `json:"f,omitempty"` // the list's Fingerprint then
}

// version is the first byte of every encoded cursor, so that a format change is a clear error.
const version = 1

// sumLen is the length of the checksum that ends an encoded cursor.
const sumLen = 8

// maxCursor bounds an encoded cursor's length: longer input is refused before decoding.
const maxCursor = 4096

// Encode returns the cursor as an opaque URL-safe string: a version byte, the cursor as JSON
// and a checksum, in unpadded base64url. The checksum makes a cursor that was cut, joined or
// edited by hand a clear error rather than a wrong page; it is no secret (a cursor only says
// where a page starts, of a list the caller may read anyway).
func (c Cursor) Encode() string {
	body, _ := json.Marshal(c) // strings and ints: cannot fail
	buf := make([]byte, 0, 1+len(body)+sumLen)
	buf = append(buf, version)
	buf = append(buf, body...)
	sum := sha256.Sum256(buf)
	buf = append(buf, sum[:sumLen]...)
	return base64.RawURLEncoding.EncodeToString(buf)
}

// ErrInvalid is the error of a cursor that is no cursor this package made (cut, edited, or of
// another format); Decode wraps it with what was wrong.
var ErrInvalid = errors.New("invalid cursor")

// ErrScope is the error of a cursor made for another list (another tool, or other arguments).
var ErrScope = errors.New("the cursor belongs to another list")

// Decode reads a cursor Encode made. Any other input is an error wrapping ErrInvalid; Decode
// never panics, whatever s holds (FuzzDecode).
func Decode(s string) (Cursor, error) {
	if len(s) > maxCursor {
		return Cursor{}, fmt.Errorf("%w: too long", ErrInvalid)
	}
	buf, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return Cursor{}, fmt.Errorf("%w: not base64url", ErrInvalid)
	}
	if len(buf) < 1+sumLen+2 {
		return Cursor{}, fmt.Errorf("%w: too short", ErrInvalid)
	}
	if buf[0] != version {
		return Cursor{}, fmt.Errorf("%w: unknown version %d", ErrInvalid, buf[0])
	}
	body, sum := buf[:len(buf)-sumLen], buf[len(buf)-sumLen:]
	want := sha256.Sum256(body)
	if string(want[:sumLen]) != string(sum) {
		return Cursor{}, fmt.Errorf("%w: checksum mismatch", ErrInvalid)
	}
	var c Cursor
	if err := json.Unmarshal(body[1:], &c); err != nil {
		return Cursor{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if c.Given < 0 || c.Total < 0 {
		return Cursor{}, fmt.Errorf("%w: negative count", ErrInvalid)
	}
	return c, nil
}

// Scope returns the digest that names a list: the tool and the arguments that chose it
// (everything but the cursor and the limit), in a fixed order. A cursor is only good for the
// scope it was made in.
func Scope(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Fingerprint returns the digest of a list: its items' Orders and Versions, in order. Two
// fingerprints differ when an item was added, removed, moved or (when Versions are given)
// changed.
func Fingerprint(items []Item) string {
	h := sha256.New()
	for _, it := range items {
		h.Write([]byte(it.Order))
		h.Write([]byte{0})
		h.Write([]byte(it.Version))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Request is what a caller asks of a list.
type Request struct {
	Scope  string // Scope of the list
	Cursor string // "" for the first page
	Limit  int    // at most this many items; 0 for no limit but the budget
	Budget int    // the items' sizes on a page add up to at most this; 0 for no budget
}

// Page is one page of a list: the items [Start, End) of the list given to Make.
type Page struct {
	Start, End int
	Total      int    // how many items the list has now
	Given      int    // how many items the pages before this one gave
	Next       string // the cursor of the next page; "" when this page is the last
	// Changed reports a list that is not the one the cursor was made from (items added,
	// removed or changed since): the page still continues after the last item given.
	Changed bool
	// TotalBefore is how many items the list had when the cursor was made (Changed or not).
	TotalBefore int
	// Cut reports a page that ends before Limit because of the budget.
	Cut bool
}

// Count is how many items the page holds.
func (p Page) Count() int { return p.End - p.Start }

// Make cuts the page Request asks for out of items, which must be sorted by Order (ascending,
// distinct). size returns the size of item i in the budget's unit; it is called only for the
// items that may go on the page. A page holds at least one item when any is left, even one
// larger than the budget: the caller shortens what cannot fit. The error of a bad cursor wraps
// ErrInvalid or ErrScope.
func Make(items []Item, req Request, size func(i int) int) (Page, error) {
	if !slices.IsSortedFunc(items, func(a, b Item) int { return strings.Compare(a.Order, b.Order) }) {
		return Page{}, errors.New("page: items are not sorted by Order")
	}
	fp := Fingerprint(items)
	p := Page{Total: len(items), TotalBefore: len(items)}
	if req.Cursor != "" {
		c, err := Decode(req.Cursor)
		if err != nil {
			return Page{}, err
		}
		if c.Scope != req.Scope {
			return Page{}, ErrScope
		}
		// The first item after the last one given, whether that one is still there or not.
		p.Start, _ = slices.BinarySearchFunc(items, c.After, func(it Item, after string) int {
			if it.Order <= after {
				return -1
			}
			return 1
		})
		p.Given, p.TotalBefore, p.Changed = c.Given, c.Total, c.List != fp
	}
	p.End = p.Start
	used := 0
	for p.End < len(items) {
		if req.Limit > 0 && p.End-p.Start >= req.Limit {
			break
		}
		s := 0
		if size != nil && req.Budget > 0 {
			s = size(p.End)
			if p.End > p.Start && used+s > req.Budget {
				p.Cut = true
				break
			}
		}
		used += s
		p.End++
	}
	if p.End < len(items) {
		p.Next = Cursor{Scope: req.Scope, After: items[p.End-1].Order, Given: p.Given + p.Count(), Total: len(items), List: fp}.Encode()
	}
	return p, nil
}

// maxRank bounds the scores Ranked orders.
const maxRank = 999_999_999

// Ranked returns an Order that puts higher scores first and, among equal scores, ids in
// ascending order. Scores are clamped to [0, 999,999,999].
func Ranked(score int, id string) string {
	score = min(max(score, 0), maxRank)
	return fmt.Sprintf("%09d\x00%s", maxRank-score, id)
}
