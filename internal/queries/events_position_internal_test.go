package queries

import (
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/changefeed"
)

func TestEventsCursorPositionReadsTheTenantsFeedCursorsOnly(t *testing.T) {
	s := &Service{cursors: cursors{key: make([]byte, 32)}}
	at := time.UnixMilli(1_800_000_000_123)
	c, err := s.eventsCursor("acme", "eu", changefeed.Position{After: 42, Seen: at})
	if err != nil {
		t.Fatal(err)
	}
	p, err := EventsCursorPosition(c, "acme", "eu", "after")
	if err != nil || p.After != 42 || !p.Seen.Equal(at) {
		t.Fatalf("position %+v, %v", p, err)
	}
	other, _ := s.eventsCursor("acme", "us", changefeed.Position{After: 1, Seen: at})
	users, _ := s.cursors.encode(listID{System: "acme", Tenant: "eu", List: "users"}, nil)
	for _, bad := range []string{"", "x", "!!!", other, users, c[:len(c)-3]} {
		if _, err := EventsCursorPosition(bad, "acme", "eu", "after"); err == nil {
			t.Errorf("%q taken", bad)
		}
	}
}
