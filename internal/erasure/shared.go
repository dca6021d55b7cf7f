package erasure

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/bounded"
	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/streams"
)

// What an erasure sweeps in the tables every tenant of the stage shares: Idempotency-Key
// records, the stream consumers' dead letters and the Keycloak sync status.

// SharedTables are the stage's tables every tenant shares that can hold a person.
type SharedTables struct {
	Idempotency, DeadLetters, SyncStatus string
	// Events is a restored copy of the change feed ({p}_events); empty: the stage's.
	Events string
}

func (x *Eraser) idempotencyTable() string { return or(x.shared.Idempotency, x.names.Idempotency()) }
func (x *Eraser) deadLettersTable() string { return or(x.shared.DeadLetters, x.names.DeadLetters()) }
func (x *Eraser) syncStatusTable() string {
	return or(x.shared.SyncStatus, x.names.KeycloakSyncStatus())
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sweepIdempotency deletes the tenant's Idempotency-Key records of requests on the user
// (their `agg_key` is the username) made while the name was the subject's (Subject.Since,
// Until: a record holds no user id, so the erased incarnation's are told from an earlier
// or a later person's by their time). The table has no index by tenant: one Scan of a
// table whose records live 24 h, segment by segment (progress.go).
func (x *Eraser) sweepIdempotency(ctx context.Context, row dynamo.Tenant, subj *Subject, p *pass) error {
	table := x.idempotencyTable()
	current := "agg_key = :u"
	vals := map[string]types.AttributeValue{":p": s(row.SystemID + "/" + row.TenantID + "/"), ":u": s(subj.Username), ":kind": s(string(events.KindUser))}
	if !subj.Since.IsZero() {
		current += " AND (attribute_not_exists(created_at) OR created_at >= :since)"
		vals[":since"] = s(dynamo.FormatTime(subj.Since))
	}
	if !subj.Until.IsZero() {
		current += " AND (attribute_not_exists(created_at) OR created_at <= :until)"
		vals[":until"] = s(dynamo.FormatTime(subj.Until))
	}
	if former := formerIdempotencyFilter(subj, vals); former != "" {
		current = "(" + current + ") OR " + former
	}
	filter := "begins_with(#k, :p) AND kind = :kind AND (" + current + ")"
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(table),
		FilterExpression:          aws.String(filter),
		ExpressionAttributeNames:  map[string]string{"#k": "key"},
		ExpressionAttributeValues: vals,
		ProjectionExpression:      aws.String("#k"),
	}
	var keys []map[string]types.AttributeValue
	page := func(items []map[string]types.AttributeValue) error {
		keys = append(keys, items...)
		return nil
	}
	done := func() error {
		err := x.batchDelete(bounded.WithDeadline(ctx, time.Time{}), table, keys)
		keys = keys[:0]
		return err
	}
	return x.scanSegments(ctx, p, in, page, done)
}

// sweepDeadLetters deletes the dead letters of the user's aggregate, rewrites those that
// name the person as a group's member (history records), drops any other whose keys or
// images still name them, whatever aggregate it is parked under, and scrubs the reasons.
func (x *Eraser) sweepDeadLetters(ctx context.Context, row dynamo.Tenant, subj *Subject) error {
	agg := dynamo.UserID(subj.Username)
	for _, c := range Consumers {
		dls := deadletters.New(x.db, x.deadLettersTable(), c)
		_, _, err := dls.Rewrite(ctx, row.SystemID, row.TenantID, func(dl *deadletters.Letter) (bool, bool, error) {
			if f, ok := subj.formerOf(dl.Aggregate); ok {
				// Parked under a name the person held before a rename.
				return subj.formerLetter(x.reg, dl, f), false, nil
			}
			if dl.Aggregate == agg && !isErasureRecord(dl.Record) {
				// The user's own: the erased incarnation's by the id its record holds
				// (an earlier incarnation's, kept without all_incarnations, is not).
				return subj.letterOfSubject(x.reg, dl), false, nil
			}
			changed := false
			for _, img := range []*map[string]types.AttributeValue{&dl.Record.NewImage, &dl.Record.OldImage} {
				if *img == nil || !dynamo.IsHistorySK(attrS(*img, "sk")) {
					continue
				}
				out, ch, err := RewriteHistoryItem(x.reg, *img, subj)
				if err != nil {
					return false, false, err
				}
				if ch {
					*img, changed = out, true
				}
			}
			// Whatever still names the person after the history's rewrite (a membership
			// item, a guard, a lookup, a pointer, of any aggregate) is dropped: its
			// item is erased from the tables anyway, so re-driving it has nothing to do.
			// By an erased id it is the person's whenever it was written; by the name or a
			// value only while the name was the erased incarnation's (from its creation to
			// the erasure: an earlier or a later holder of the name is someone else).
			if ids := subj.idsOnly(); ids.NamedIn(dl.Record.Keys) || ids.NamedIn(dl.Record.NewImage) || ids.NamedIn(dl.Record.OldImage) {
				return true, false, nil
			}
			if subj.letterInTime(dl) && (subj.NamedIn(dl.Record.Keys) || subj.NamedIn(dl.Record.NewImage) || subj.NamedIn(dl.Record.OldImage)) {
				return true, false, nil
			}
			if r := subj.ScrubText(dl.Reason); r != dl.Reason {
				dl.Reason, changed = r, true
			}
			return false, changed, nil
		})
		if missing(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("dead letters of %s: %w", c, err)
		}
	}
	return nil
}

// scrubSyncStatus scrubs the tenant's Keycloak sync status row: its last error and the
// reason its realm was parked are messages that may name the user.
func (x *Eraser) scrubSyncStatus(ctx context.Context, row dynamo.Tenant, subj *Subject) error {
	table := x.syncStatusTable()
	k := map[string]types.AttributeValue{"system_id": s(row.SystemID), "tenant_id": s(row.TenantID)}
	out, err := x.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: k, ConsistentRead: aws.Bool(true)})
	if missing(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the sync status: %w", dynamo.Translate(err))
	}
	names := map[string]string{}
	vals := map[string]types.AttributeValue{}
	var sets []string
	for attr, v := range out.Item {
		sv, ok := v.(*types.AttributeValueMemberS)
		if !ok || attr == "system_id" || attr == "tenant_id" {
			continue
		}
		if scrubbed := subj.ScrubText(sv.Value); scrubbed != sv.Value {
			n := fmt.Sprintf("#a%d", len(sets))
			names[n] = attr
			vals[":"+n[1:]] = s(scrubbed)
			sets = append(sets, n+" = :"+n[1:])
		}
	}
	if len(sets) == 0 {
		return nil
	}
	_, err = x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: k, UpdateExpression: aws.String("SET " + strings.Join(sets, ", ")),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
	})
	if err != nil {
		return fmt.Errorf("scrub the sync status: %w", dynamo.Translate(err))
	}
	return nil
}

// isErasureRecord reports whether a record is a user.erased record: its dead letter (held
// behind an earlier dead letter of the user) is what re-driving carries the erasure out
// with, so it stays; it names the username only, and goes when it is re-driven.
func isErasureRecord(rec streams.Record) bool {
	return attrS(rec.NewImage, "event_type") == string(events.UserErasedType)
}
