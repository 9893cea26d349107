package sandbox

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
)

// Inventory is what one user holds in the sandbox, counted, with a digest of all of it: how a
// test tells whether a failed call wrote anything and a repeated one wrote nothing twice.
type Inventory struct {
	Cards, Published, Images, Worldbooks, Entries, Trials int
	// Digest changes with any change of the user's cards, images, worldbooks or trials.
	Digest string
}

// Inventory returns what the user of the bearer token holds; the zero Inventory for an
// unknown token.
func (s *Service) Inventory(token string) Inventory {
	s.mu.Lock()
	defer s.mu.Unlock()
	uid, ok := s.tokens[token]
	if !ok {
		return Inventory{}
	}
	var inv Inventory
	var held []any
	for _, id := range slices.Sorted(maps.Keys(s.st.Cards)) {
		if c := s.st.Cards[id]; c.Owner == uid {
			inv.Cards++
			if c.ReviewStatus != reviewDraft {
				inv.Published++
			}
			held = append(held, c)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.st.Images)) {
		if im := s.st.Images[id]; im.Owner == uid {
			inv.Images++
			held = append(held, im)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.st.Worldbooks)) {
		if wb := s.st.Worldbooks[id]; wb.Owner == uid {
			inv.Worldbooks++
			inv.Entries += len(wb.Entries)
			held = append(held, wb)
		}
	}
	trials := s.st.Trials[uid]
	for _, key := range slices.Sorted(maps.Keys(trials)) {
		inv.Trials++
		held = append(held, trials[key])
	}
	data, _ := json.Marshal(held) // plain data: cannot fail
	sum := sha256.Sum256(data)
	inv.Digest = hex.EncodeToString(sum[:8])
	return inv
}
