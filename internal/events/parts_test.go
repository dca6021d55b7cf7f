package events

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

// A member list past one item is split so that the record and every part encode within
// PartBytes, and joining the parts back gives the list in its order; a list past
// MemberListBytes is refused; a small one is not split.
func TestSplitMembersRoundTrips(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	renamed := &GroupRenamed{Group: Group{ID: "g1", Key: "huge", Name: "Huge", Version: 12}, PreviousName: "Big", PreviousKey: "big", PreviousVersion: 11}
	deleted := &GroupDeleted{Group: Group{Key: "big", Name: "Big", Version: 12, Deleted: true}, PreviousID: "g1"}
	for i := range 10_000 {
		name := fmt.Sprintf("%s%05d", strings.Repeat("m", 59), i)
		renamed.Members = append(renamed.Members, RenamedMember{Username: name, UserID: fmt.Sprintf("id-%05d", i), MembershipRev: 3, AddedAt: at})
		deleted.Members = append(deleted.Members, Member{Username: name, UserID: fmt.Sprintf("id-%05d", i), MembershipRev: 3})
	}
	for _, p := range []Payload{renamed, deleted} {
		head, parts, err := SplitMembers(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(parts) < 2 {
			t.Fatalf("%s: %d parts, want the list spread over several", p.EventType(), len(parts))
		}
		joined := head
		for i, part := range append([]Payload{head}, parts...) {
			b, err := Encode(part)
			if err != nil || len(b) > PartBytes {
				t.Fatalf("%s: piece %d encodes to %d bytes (%v), more than %d", p.EventType(), i, len(b), err, PartBytes)
			}
			if i > 0 {
				if err := JoinMembers(joined, part); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !reflect.DeepEqual(joined, p) {
			t.Errorf("%s: the joined payload differs from the whole", p.EventType())
		}
	}
	small := &GroupDeleted{Members: []Member{{Username: "ann", UserID: "u1"}}}
	if head, parts, err := SplitMembers(small); err != nil || head != Payload(small) || len(parts) != 0 {
		t.Errorf("a small list: %v parts, %v", len(parts), err)
	}
	huge := &GroupRenamed{}
	for i := range 40_000 {
		huge.Members = append(huge.Members, RenamedMember{Username: fmt.Sprintf("%s%05d", strings.Repeat("m", 59), i), AddedAt: at})
	}
	if _, _, err := SplitMembers(huge); !errors.Is(err, ErrMemberListTooLong) {
		t.Errorf("a list past MemberListBytes: %v, want ErrMemberListTooLong", err)
	}
}
