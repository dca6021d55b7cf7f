package dynamo

import (
	"slices"
	"testing"

	"github.com/ssodir/ssodir/internal/events"
)

// Every group record that names a member is in the member index: an erasure finds the
// records naming its person by the index alone, so a payload left out here keeps them.
func TestNamedMemberIDsCoverEveryRecordThatNamesAMember(t *testing.T) {
	for name, c := range map[string]struct {
		p    events.Payload
		want []string
	}{
		"added":      {&events.GroupMemberAdded{UserID: "u1"}, []string{"u1"}},
		"removed":    {&events.GroupMemberRemoved{UserID: "u1"}, []string{"u1"}},
		"expiry set": {&events.GroupMemberExpirySet{UserID: "u1"}, []string{"u1"}},
		"changed": {&events.GroupMembersChanged{Added: []events.Member{{UserID: "u2"}, {UserID: "u1"}},
			Removed: []events.Member{{UserID: "u2"}}}, []string{"u1", "u2"}},
		"renamed": {&events.GroupRenamed{Members: []events.RenamedMember{{UserID: "u3"}, {Erased: true}}}, []string{"u3"}},
		"deleted": {&events.GroupDeleted{Members: []events.Member{{UserID: "u5"}, {UserID: "u4"}, events.ErasedMember()}}, []string{"u4", "u5"}},
		"updated": {&events.GroupUpdated{}, nil},
	} {
		if got := NamedMemberIDs(c.p); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}
