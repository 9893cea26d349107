package undo

import (
	"encoding/json"
	"slices"
)

// jsonAppender is a state that encodes itself faster than json.Marshal: its undecoded values are
// copied as they are (json.Marshal scans and compacts each again, and sorts each map's keys
// through reflection). The result means what json.Marshal's does; a value that is not compact
// leaves it not compact (revisions.Store.Keep compacts such a state).
type jsonAppender interface {
	appendJSON(dst []byte) ([]byte, error)
}

var (
	_ jsonAppender = WorldbookState{}
	_ jsonAppender = CardState{}
)

// encodeState encodes a revision's state.
func encodeState(state any) ([]byte, error) {
	if a, ok := state.(jsonAppender); ok {
		return a.appendJSON(make([]byte, 0, 1024))
	}
	return json.Marshal(state)
}

func (s WorldbookState) appendJSON(dst []byte) ([]byte, error) {
	head, err := json.Marshal(struct {
		Name         string   `json:"name"`
		Description  string   `json:"description"`
		Tags         []string `json:"tags"`
		Format       string   `json:"format"`
		BoundRoleIDs []string `json:"boundRoleIds"`
	}{s.Name, s.Description, s.Tags, s.Format, s.BoundRoleIDs})
	if err != nil {
		return nil, err
	}
	dst = append(dst, head[:len(head)-1]...)
	dst = append(dst, `,"entries":`...)
	if s.Entries == nil {
		return append(dst, "null}"...), nil
	}
	dst = append(dst, '[')
	for i, e := range s.Entries {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = appendRawMap(dst, e); err != nil {
			return nil, err
		}
	}
	return append(dst, "]}"...), nil
}

func (s CardState) appendJSON(dst []byte) ([]byte, error) {
	var err error
	dst = append(dst, '{')
	comma := false
	for _, f := range []struct {
		name string
		m    map[string]json.RawMessage
	}{{"fields", s.Fields}, {"sections", s.Sections}} {
		if len(f.m) == 0 { // omitempty
			continue
		}
		if comma {
			dst = append(dst, ',')
		}
		comma = true
		dst = append(append(append(dst, '"'), f.name...), `":`...)
		if dst, err = appendRawMap(dst, f.m); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendRawMap appends m as json.Marshal does (keys sorted; nil is null), its values as they are.
func appendRawMap(dst []byte, m map[string]json.RawMessage) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = appendKey(dst, k); err != nil {
			return nil, err
		}
		dst = append(dst, ':')
		if v := m[k]; len(v) == 0 {
			dst = append(dst, "null"...)
		} else {
			dst = append(dst, v...)
		}
	}
	return append(dst, '}'), nil
}

// appendKey appends k as a JSON string: as it is when it needs no escape, else as json.Marshal
// writes it.
func appendKey(dst []byte, k string) ([]byte, error) {
	for i := 0; i < len(k); i++ {
		if c := k[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, err := json.Marshal(k)
			return append(dst, q...), err
		}
	}
	return append(append(append(dst, '"'), k...), '"'), nil
}
