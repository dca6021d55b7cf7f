// Package erasuretest writes, straight into a tenant's write table, a user with a long
// history and a tenant full of other people: what the erasure's bound is tested on.
package erasuretest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// Spec is what Seed writes.
type Spec struct {
	// Username has History records (created, then updates) and is a member of Groups
	// groups, each group's history naming them.
	Username string
	History  int
	Groups   int
	// Others is about how many items of other users (their history and state, ten per
	// user) the table gets beside.
	Others int
	// Mark, when set, is an attribute every seeded item carries (a test's stream player
	// skips them).
	Mark string
	// At is the records' time (zero: now).
	At time.Time
}

// Seeded is what Seed wrote of the user.
type Seeded struct {
	User events.User
	// Envelopes are the user's and the groups' records, for a projection of the read side.
	Envelopes []events.Envelope
	Groups    []string
}

// Seed writes spec into table with BatchWriteItem, eight requests at a time.
func Seed(ctx context.Context, db *dynamodb.Client, table string, spec Spec) (Seeded, error) {
	at := spec.At
	if at.IsZero() {
		at = time.Now().UTC().Truncate(time.Millisecond)
	}
	var items []map[string]types.AttributeValue
	var out Seeded
	add := func(it map[string]types.AttributeValue, err error) error {
		if err != nil {
			return err
		}
		items = append(items, it)
		return nil
	}
	user := func(username string, n int, keep bool) (events.User, error) {
		u := events.User{ID: "id-" + username, Username: username, Email: username + "@example.org", FirstName: "F", LastName: "L",
			IsActive: true, CreatedAt: at, UpdatedAt: at}
		for v := 1; v <= n; v++ {
			u.Version = int64(v)
			u.FirstName = fmt.Sprintf("F%d", v)
			var pl events.Payload = &events.UserUpdated{User: u}
			if v == 1 {
				pl = &events.UserCreated{User: u}
			}
			env := events.Envelope{EventID: fmt.Sprintf("%s-%d", username, v), Type: pl.EventType(), SchemaVersion: events.SchemaVersion,
				Kind: events.KindUser, Key: username, Version: int64(v), Actor: "seed", OccurredAt: at,
				Changes: map[string]events.Change{"first_name": {New: u.FirstName}}, Payload: pl}
			if keep {
				out.Envelopes = append(out.Envelopes, env)
			}
			if err := add(dynamo.EncodeRecord(env, at, 0)); err != nil {
				return u, err
			}
		}
		if err := add(dynamo.UserConfigItem(u, "", false)); err != nil {
			return u, err
		}
		return u, add(dynamo.EmailGuardItem(u.Email, u.Username), nil)
	}
	u, err := user(spec.Username, spec.History, true)
	if err != nil {
		return out, err
	}
	out.User = u
	for i := range spec.Groups {
		key := fmt.Sprintf("%s-g%d", spec.Username, i)
		g := events.Group{ID: "gid-" + key, Key: key, Name: key, Version: 2, CreatedAt: at, UpdatedAt: at}
		env := events.Envelope{EventID: key + "-2", Type: events.GroupMemberAddedType, SchemaVersion: events.SchemaVersion,
			Kind: events.KindGroup, Key: key, Version: 2, Actor: "seed", OccurredAt: at,
			Changes: map[string]events.Change{"member": {New: spec.Username}},
			Payload: &events.GroupMemberAdded{Group: g, Username: spec.Username, UserID: u.ID, MembershipRev: 1}}
		out.Envelopes = append(out.Envelopes, env)
		out.Groups = append(out.Groups, key)
		if err := add(dynamo.EncodeRecord(env, at, 0)); err != nil {
			return out, err
		}
		if err := add(dynamo.GroupConfigItem(g, false, nil)); err != nil {
			return out, err
		}
		items = append(items, dynamo.MemberItem(key, spec.Username, u.ID, 1, 2, dynamo.FormatTime(at)))
		// As the command store writes it with the record (a table created empty is indexed).
		items = append(items, dynamo.MemberIndexItems(env)...)
	}
	for i := 0; i < spec.Others/10; i++ {
		if _, err := user(fmt.Sprintf("other-%s-%d", spec.Username, i), 8, false); err != nil {
			return out, err
		}
	}
	if spec.Mark != "" {
		for _, it := range items {
			it[spec.Mark] = &types.AttributeValueMemberS{Value: "1"}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for chunk := range slices.Chunk(items, 25) {
		reqs := make([]types.WriteRequest, len(chunk))
		for i, it := range chunk {
			reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: it}}
		}
		g.Go(func() error { return dynamo.BatchWrite(gctx, db, table, reqs) })
	}
	return out, g.Wait()
}
