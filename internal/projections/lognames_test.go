package projections_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// TestErrorsNameNoUser: the projector's errors reach its logs and its dead letters'
// reasons, which name users by id only (STYLE.md). A record that cannot be written (its
// tables are gone) or that does not add up fails with an error that holds neither the
// username nor the email of the user it is about.
func TestErrorsNameNoUser(t *testing.T) {
	t.Parallel()
	const canary, email = "zcanary7q", "zcanary7q@example.org"
	db := client(t)
	p := projections.New(db, projections.Options{})
	gone := projections.Tables{Users: "no_such_users_table", Activities: "no_such_activities_table"}
	w := newWorld(t)
	created := w.createUser(canary, email, "Zed", "Canary")
	w.createGroup("G", "")
	added := w.addMember("g", canary)
	deleted := w.deleteUser(canary)
	mismatch := created
	mismatch.Key = "mallory" // the payload names the canary

	for _, tc := range []struct {
		name   string
		e      []events.Envelope
		tables projections.Tables
	}{
		{"a user created into tables that are gone", []events.Envelope{created}, gone},
		{"a member added into tables that are gone", []events.Envelope{added}, gone},
		{"a user deleted from tables that are gone", []events.Envelope{deleted}, gone},
		{"a payload for another user", []events.Envelope{mismatch}, newTables(t, db)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := p.Apply(context.Background(), tc.tables, tc.e[0])
			if err == nil {
				t.Fatal("no error: the test proves nothing")
			}
			if s := err.Error(); strings.Contains(s, canary) || strings.Contains(s, "Zed") {
				t.Errorf("the error names the user: %s", s)
			}
			if err := p.ApplyBatch(context.Background(), tc.tables, tc.e); err == nil {
				t.Error("the batch: no error")
			} else if s := err.Error(); strings.Contains(s, canary) || strings.Contains(s, "Zed") {
				t.Errorf("the batch's error names the user: %s", s)
			}
		})
	}
}
