package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/client"
)

// TestChangeMembers adds and removes members in one command against the real services:
// one group version, the 404 naming every unknown user with nothing changed, an
// Idempotency-Key replay, and one activity item per member.
func TestChangeMembers(t *testing.T) {
	t.Parallel()
	_, ten := newTenant(t)
	ctx := context.Background()
	for _, u := range []string{"ann", "bob", "cid"} {
		if _, err := ten.CreateUser(ctx, client.NewUser{Username: u, Email: u + "@example.com"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ten.CreateGroup(ctx, client.NewGroup{Name: "Ops"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ten.AddMember(ctx, "ops", "cid"); err != nil {
		t.Fatal(err)
	}

	_, err := ten.ChangeMembers(ctx, "ops", client.MembersChange{Add: []string{"ann", "nobody"}, Remove: []string{"ghost"}})
	e := problemOf(t, err)
	var named []string
	for _, f := range e.Errors {
		named = append(named, f.Field+": "+f.Message)
	}
	if e.Status != 404 || !slices.Equal(named, []string{"add: no user nobody", "remove: no user ghost"}) {
		t.Fatalf("unknown users: %d %v, want 404 naming nobody and ghost", e.Status, named)
	}

	change := client.MembersChange{Add: []string{"Ann", "bob"}, Remove: []string{"cid"}}
	g, err := ten.ChangeMembers(ctx, "OPS", change, client.IfMatch(2), client.IdempotencyKey("ops-1"))
	if err != nil || g.Version != 3 || g.Name != "Ops" {
		t.Fatalf("change: %+v %v, want the group at version 3", g, err)
	}
	if again, err := ten.ChangeMembers(ctx, "OPS", change, client.IfMatch(2), client.IdempotencyKey("ops-1")); err != nil || again.Version != 3 {
		t.Fatalf("replayed change: %+v %v, want the first answer", again, err)
	}
	if same, err := ten.ChangeMembers(ctx, "ops", change); err != nil || same.Version != 3 {
		t.Fatalf("a change that changes nothing: %+v %v, want version 3", same, err)
	}
	if _, err := ten.GetGroup(ctx, "ops", client.MinVersion(3)); err != nil {
		t.Fatal(err)
	}
	// The memberships and activity items follow the view.
	var members []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		members = nil
		for _, u := range collect(t, ten.GroupMembers(ctx, "ops", 0)) {
			members = append(members, u.Username)
		}
		if slices.Equal(members, []string{"ann", "bob"}) {
			break
		}
	}
	if !slices.Equal(members, []string{"ann", "bob"}) {
		t.Fatalf("members %v, want ann and bob", members)
	}
	want := []string{"group.member_added ann", "group.member_added bob", "group.member_removed cid"}
	var got []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		got = nil
		for _, a := range collect(t, ten.Activity(ctx, client.ActivityFilter{Entity: client.GroupEntity("ops")})) {
			if a.Version == 3 {
				member := a.Changes["member"].New
				if member == nil {
					member = a.Changes["member"].Old
				}
				got = append(got, fmt.Sprint(a.Type, " ", member))
			}
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
	}
	t.Fatalf("activity of version 3: %v, want %v", got, want)
}

// TestMembersChunks splits long lists by count and by body size.
func TestMembersChunks(t *testing.T) {
	var add []string
	for i := range 2500 {
		add = append(add, fmt.Sprintf("user%05d", i))
	}
	chunks := client.MembersChunks(add, []string{"gone"})
	if len(chunks) != 3 || len(chunks[0].Add) != 1000 || len(chunks[2].Add) != 500 || !slices.Equal(chunks[2].Remove, []string{"gone"}) {
		t.Fatalf("chunks of %d, %d, %d", len(chunks[0].Add), len(chunks[1].Add), len(chunks[2].Add))
	}
	long := strings.Repeat("x", 128)
	add = nil
	for i := range 1000 {
		add = append(add, fmt.Sprintf("%s%04d", long[:124], i))
	}
	total := 0
	for _, c := range client.MembersChunks(add, nil) {
		b, _ := json.Marshal(c)
		if len(b) > 64<<10 {
			t.Errorf("a chunk of %d bytes is over the 64 KiB body limit", len(b))
		}
		total += len(c.Add)
	}
	if total != 1000 {
		t.Errorf("chunks hold %d usernames, want 1000", total)
	}
}
