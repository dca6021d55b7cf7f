package asof

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"math/bits"
)

// cursor continues an as-of list. It carries what the list's first page read once — the
// group's id (the user's hash), and which levels of the instant's path are left and which
// of those are known to hold items — so a later page reads only the nodes it continues in.
// It is signed (HMAC-SHA256 over the list's scope, its name and the body), so a cursor
// continues only the list, tenant, name and instant it was made for, and its levels cannot
// be edited to skip part of an answer.
type cursor struct {
	Kind  string `json:"k"`
	Of    string `json:"o"`
	At    int64  `json:"t"`
	Level int    `json:"l"`
	SK    string `json:"s"`
	// Rest: the used levels below Level still to read (bit l: level l); Known: those of
	// them that a read found items at (the others are unread: a page probes them together).
	Rest  uint64 `json:"r"`
	Known uint64 `json:"n"`
}

// maxCursor bounds what is decoded before the signature is checked.
const maxCursor = 1024

// signer signs the cursors of a Reader: key is the service's cursor key (nil in tests:
// the cursors are then only checksummed), scope the tenant the lists belong to ("" binds
// them to the table).
type signer struct {
	key   []byte
	scope string
}

func (g signer) mac(table, name string, body []byte) []byte {
	m := hmac.New(sha256.New, g.key)
	scope := g.scope
	if scope == "" {
		scope = "table:" + table
	}
	for _, p := range []string{"asof-cursor", scope, name} {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	m.Write(body)
	return m.Sum(nil)
}

func (g signer) encode(c cursor, table, name string) *string {
	body, _ := json.Marshal(c)
	v := base64.RawURLEncoding.EncodeToString(append(g.mac(table, name, body), body...))
	return &v
}

// decode checks a cursor of list kind of name at instant at; nil for the first page.
func (g signer) decode(v, table, kind, name string, at int64) (*cursor, error) {
	if v == "" {
		return nil, nil
	}
	if len(v) > maxCursor {
		return nil, ErrBadCursor
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || len(raw) <= sha256.Size {
		return nil, ErrBadCursor
	}
	sum, body := raw[:sha256.Size], raw[sha256.Size:]
	if !hmac.Equal(sum, g.mac(table, name, body)) {
		return nil, ErrBadCursor
	}
	var c cursor
	if json.Unmarshal(body, &c) != nil || c.Kind != kind || c.Of == "" || c.At != at || c.Level < 0 || c.Level > Depth || c.SK == "" ||
		c.Rest>>c.Level != 0 || c.Known&^c.Rest != 0 {
		return nil, ErrBadCursor
	}
	return &c, nil
}

// levelsOf lists the levels of a bit set, highest first (the path's order).
func levelsOf(set uint64) []int {
	var out []int
	for set != 0 {
		l := 63 - bits.LeadingZeros64(set)
		out = append(out, l)
		set &^= 1 << l
	}
	return out
}
