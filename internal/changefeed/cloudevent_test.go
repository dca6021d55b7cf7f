package changefeed_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/events"
)

func TestFromEnvelope(t *testing.T) {
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	user := events.User{ID: "uid-1", Username: "jdoe", Email: "jdoe@example.com", Version: 3, IsActive: true}
	group := events.Group{ID: "gid-1", Key: "admins", Name: "Admins", Version: 4}
	envelope := func(kind events.AggregateKind, key string, v int64, p events.Payload) events.Envelope {
		return events.Envelope{EventID: "ev-1", Type: p.EventType(), Kind: kind, Key: key, Version: v, Actor: "bootstrap",
			OccurredAt: at, Payload: p}
	}
	tests := []struct {
		name         string
		env          events.Envelope
		id           string
		requires     int64
		wantIn       []string
		wantNotIn    []string
		subjectEmpty bool
	}{
		{name: "a created user carries its state and never its password",
			env:       envelope(events.KindUser, "jdoe", 1, &events.UserCreated{User: user, PasswordCiphertext: "c1pher"}),
			id:        "uid-1",
			wantIn:    []string{`"type":"io.ssodir.user.created"`, `"subject":"user:jdoe"`, `"source":"/v1/systems/s1/tenants/t1"`, `"specversion":"1.0"`, `"email":"jdoe@example.com"`},
			wantNotIn: []string{"c1pher", "password"}},
		{name: "a password change says nothing of the password",
			env:       envelope(events.KindUser, "jdoe", 3, &events.UserPasswordChanged{User: user, PasswordCiphertext: "c1pher"}),
			id:        "uid-1",
			wantNotIn: []string{"c1pher", "password_ciphertext"}},
		{name: "a deleted user is named by the id of the incarnation deleted",
			env: envelope(events.KindUser, "jdoe", 4, &events.UserDeleted{User: events.User{Username: "jdoe", Version: 4, Deleted: true}, PreviousID: "uid-1"}),
			id:  "uid-1"},
		{name: "a rename requires the old name's last change",
			env: envelope(events.KindUser, "jane", 7, &events.UserRenamed{User: user, PreviousUsername: "jdoe", PreviousVersion: 5}),
			id:  "uid-1", requires: 5},
		{name: "an erased user goes out with nothing that names the person",
			env: envelope(events.KindUser, "jdoe", 5, &events.UserErased{User: events.User{Username: "jdoe", Version: 5, Deleted: true},
				PreviousID: "uid-1", ErasureID: "er-1"}),
			id: "uid-1", wantNotIn: []string{"jdoe"}, subjectEmpty: true},
		{name: "a member added is in the changes",
			env:    envelope(events.KindGroup, "admins", 4, &events.GroupMemberAdded{Group: group, Username: "jdoe", UserID: "uid-1"}),
			id:     "gid-1",
			wantIn: []string{`"member":{"old":null,"new":{"user_id":"uid-1","username":"jdoe"}}`}},
		{name: "a members change lists who was added and removed",
			env: envelope(events.KindGroup, "admins", 4, &events.GroupMembersChanged{Group: group,
				Added: []events.Member{{Username: "ann", UserID: "uid-2"}}, Removed: []events.Member{{Erased: true}}}),
			id:     "gid-1",
			wantIn: []string{`"members":{"old":[{"erased":true}],"new":[{"user_id":"uid-2","username":"ann"}]}`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := changefeed.FromEnvelope("s1", "t1", tc.env)
			if err != nil {
				t.Fatal(err)
			}
			if c.Aggregate != tc.id || c.Version != tc.env.Version || c.Requires != tc.requires {
				t.Errorf("change of %s v%d requiring %d, want %s v%d requiring %d", c.Aggregate, c.Version, c.Requires, tc.id, tc.env.Version, tc.requires)
			}
			raw := string(c.Event)
			for _, s := range tc.wantIn {
				if !strings.Contains(raw, s) {
					t.Errorf("event %s lacks %s", raw, s)
				}
			}
			for _, s := range tc.wantNotIn {
				if strings.Contains(raw, s) {
					t.Errorf("event %s holds %s", raw, s)
				}
			}
			var ev changefeed.Event
			if err := json.Unmarshal(c.Event, &ev); err != nil {
				t.Fatal(err)
			}
			if (ev.Subject == "") != tc.subjectEmpty || ev.Data.ID != tc.id || ev.Data.Actor != "bootstrap" || !ev.Time.Equal(at) {
				t.Errorf("event %+v", ev)
			}
		})
	}
}
