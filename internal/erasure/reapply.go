package erasure

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// Restored names the tables a restore brought back (point-in-time recovery restores into
// new tables): the tenant's three, or none for tables restored under the tenant's current
// names; and each of the stage's shared tables restored into a new table (the others are
// swept where they are).
type Restored struct {
	CommandsTable, UsersTable, ActivitiesTable string
	// IdempotencyTable, DeadLettersTable and SyncStatusTable are restored copies of the
	// stage's shared tables; empty: the stage's own.
	IdempotencyTable, DeadLettersTable, SyncStatusTable string
	// EventsTable is a restored copy of the stage's change feed ({p}_events); empty: the
	// stage's own. The person's changes are found by their erased ids (and usernames, in
	// others' membership changes), as in the live feed.
	EventsTable string
}

// ReapplyResult says what a re-application found.
type ReapplyResult struct {
	// Erasures is how many ledger entries the tenant has; Users how many erased users the
	// restored write table held again (and were erased again).
	Erasures, Users int
}

// Reapply erases again, from restored tables, every user the tenant's ledger has erased
// (docs/erasure.md, "Backups"): it finds them by the hashes of their ids, which every
// incarnation's records carry, so a user created later under the same name is left alone.
// Nothing streams into restored tables, so both passes run at once. The tables every
// tenant shares (Idempotency-Key records, dead letters, the sync status, the change feed; restored copies
// when r names them) are swept too, by the erased ids where a record holds one and by the
// time the erased incarnation held the name where it holds none (from its creation to
// the erasure's completion), so that a later user of the name is never touched. The
// erasures' pointer items (`erasure#<id>`) of erasures done are removed from the restored
// write table.
func (x *Eraser) Reapply(ctx context.Context, system, tenant string, r Restored) (ReapplyResult, error) {
	set := 0
	for _, n := range []string{r.CommandsTable, r.UsersTable, r.ActivitiesTable} {
		if n != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		// Half the tables restored and half live would sweep live tables by name, where a
		// later user may have taken the erased one.
		return ReapplyResult{}, apperr.Invalid("name all three restored tables (commands, users, activities), or none")
	}
	row, err := x.tenants.Get(ctx, system, tenant)
	if err != nil {
		return ReapplyResult{}, err
	}
	if r.CommandsTable != "" {
		row.CommandsTable = r.CommandsTable
	}
	if r.UsersTable != "" {
		row.UsersTable, row.NextUsersTable = r.UsersTable, ""
	}
	if r.ActivitiesTable != "" {
		row.ActivitiesTable, row.NextActivitiesTable = r.ActivitiesTable, ""
	}
	if r.UsersTable != "" || r.ActivitiesTable != "" {
		// Restored into new tables: only those are swept, never the live ones, where a
		// later user may have taken the erased name.
		row.Generation = -1
	}
	entries, err := x.ledger.List(ctx, system, tenant)
	if err != nil {
		return ReapplyResult{}, err
	}
	y := *x
	y.shared = SharedTables{Idempotency: r.IdempotencyTable, DeadLetters: r.DeadLettersTable, SyncStatus: r.SyncStatusTable,
		Events: r.EventsTable}
	res := ReapplyResult{Erasures: len(entries)}
	byHash := map[string]string{}   // id hash → erasure id
	all := map[string]bool{}        // erasure id → its AllIncarnations
	until := map[string]time.Time{} // erasure id → when it was done (zero: pending)
	for _, e := range entries {
		all[e.ErasureID] = e.AllIncarnations
		if e.CompletedAt != nil {
			if at, err := dynamo.ParseTime(*e.CompletedAt); err == nil {
				until[e.ErasureID] = at
			}
		}
		if e.Places[commands.PlaceWriteModel] == dynamo.ErasureStatusDone {
			// The pointer went with the tombstone; a restore from before brings it back.
			if err := y.forgetPointer(ctx, row, e.ErasureID); err != nil {
				return res, err
			}
		}
		for _, h := range e.IDHashes {
			byHash[h] = e.ErasureID
		}
	}
	if len(byHash) == 0 {
		return res, nil
	}
	// The passes leave the change feed alone (feedByIDs): it is swept below by the ids and
	// by the names only within the time each was the person's (heldName).
	y.feedByIDs = true
	found, err := x.erasedUsernames(ctx, row.CommandsTable, byHash)
	if err != nil {
		return res, err
	}
	held := heldNames{}
	for username, erasureID := range found {
		subj := NewSubject(username)
		subj.IDOnly = !all[erasureID]
		subj.Until = until[erasureID]
		groups, err := y.firstPass(ctx, row, subj, erasureID, nil, true)
		if err != nil {
			return res, err
		}
		if err := y.secondPass(ctx, row, subj, erasureID, groups, false, true); err != nil {
			return res, err
		}
		held.add(username, subj.Since, subj.Until)
		for _, f := range subj.Former {
			held.add(f.Username, f.From, f.Until)
		}
		res.Users++
	}
	// The feed (a restored copy, else the stage's) is swept by the ledger's ids themselves
	// (their hashes): it holds the erased aggregates' changes whether or not the write
	// table still names them; and by a name only in a change made while the person held
	// it (a later user of the name has changes naming it too).
	erased := func(id string) bool { return id != "" && byHash[identity.ErasedIDHash(id)] != "" }
	if _, err := changefeed.EraseRestored(ctx, x.db, or(r.EventsTable, changefeed.TableName(x.names)), system, tenant, erased, held.named); err != nil && !missing(err) {
		return res, err
	}
	return res, nil
}

// heldNames are the usernames erased persons held, each with the times they held it:
// from (zero: since the first incarnation) until (zero: still, the erasure pending).
type heldNames map[string][][2]time.Time

func (h heldNames) add(name string, from, until time.Time) {
	h[name] = append(h[name], [2]time.Time{from, until})
}

// named reports whether name was an erased person's at time at.
func (h heldNames) named(name string, at time.Time) bool {
	for _, w := range h[name] {
		if (w[0].IsZero() || !at.Before(w[0])) && (w[1].IsZero() || !at.After(w[1])) {
			return true
		}
	}
	return false
}

// erasedUsernames scans a write table for the user partitions whose records carry an
// erased id: username → the erasure that erased it.
func (x *Eraser) erasedUsernames(ctx context.Context, table string, byHash map[string]string) (map[string]string, error) {
	out := map[string]string{}
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(table),
		FilterExpression:          aws.String("begins_with(id, :u)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":u": s("user#")},
		ConsistentRead:            aws.Bool(true),
	}
	for {
		page, err := x.db.Scan(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", table, dynamo.Translate(err))
		}
		for _, it := range page.Items {
			username := strings.TrimPrefix(attrS(it, "id"), "user#")
			var ids []string
			sk := attrS(it, "sk")
			switch {
			case sk == dynamo.SKConfig:
				ids = append(ids, attrS(it, "user_id"))
			case dynamo.IsHistorySK(sk):
				env, err := dynamo.DecodeRecord(x.reg, it)
				if err != nil {
					return nil, err
				}
				if u, ok := events.UserState(env.Payload); ok {
					ids = append(ids, u.ID)
				}
				switch p := env.Payload.(type) {
				case *events.UserDeleted:
					ids = append(ids, p.PreviousID)
				case *events.UserErased:
					ids = append(ids, p.PreviousID)
				}
			}
			for _, id := range ids {
				if id == "" {
					continue
				}
				if e, ok := byHash[identity.ErasedIDHash(id)]; ok {
					out[username] = e
				}
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}
