package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/streams"
)

// The restore drill of TestErasureLeavesNoCanary (docs/erasure.md, "Restoring a backup"):
// every table of the stage that can hold the person is copied before the erasure, as a
// point-in-time restore into new tables would; after the erasure a later user takes the
// name, and `ssodirctl erasures reapply` over all the copies leaves no canary but that
// later user's, whose items it leaves as they were.

// stageHit is one item of the stage holding a canary.
type stageHit struct {
	table string
	item  map[string]types.AttributeValue
	what  []string
}

// scanStageItems scans every item of every table of the installation and returns those
// that hold a canary (the change feed's user.erased aside: scanStage).
func (s *canaryScanner) scanStageItems(t *testing.T, db *dynamodb.Client, prefix string) []stageHit {
	t.Helper()
	var out []stageHit
	for _, table := range tablesOf(t, db, prefix) {
		for _, it := range scan(t, db, table) {
			var what []string
			for _, w := range s.item(it) {
				if w == "user_id" && strings.HasSuffix(table, "_events") &&
					(strings.Contains(dynamo.StringAttr(it, "event"), `"type":"io.ssodir.user.erased"`) || dynamo.StringAttr(it, "sk") == "last") {
					// The change feed's user.erased tells downstream systems which id to
					// erase (API.md: ids are not among the values an erasure removes), and
					// its guard keeps it once.
					continue
				}
				what = append(what, w)
			}
			if len(what) > 0 {
				out = append(out, stageHit{table: table, item: it, what: what})
			}
		}
	}
	return out
}

// restoreDrill holds the restored copies: flag of `erasures reapply` → the copy.
type restoreDrill struct {
	db     *dynamodb.Client
	copies map[string]string
	keys   map[string][]string // table → its key attributes
	// later are the later user's items ("table|key", the table without `_restored`), and
	// laterCopies those put into the copies, as they were put.
	later       map[string]bool
	laterCopies map[string]string
}

// restoreStage copies every table of the stage that can hold the person: the tenant's
// write, read and activity tables, and the shared Idempotency-Key, dead-letter, sync
// status and change feed tables (the SCIM and email lookups are items of the write table).
func restoreStage(t *testing.T, db *dynamodb.Client, names dynamo.Names, system, tenant string) *restoreDrill {
	t.Helper()
	d := &restoreDrill{db: db, copies: map[string]string{}, keys: map[string][]string{}}
	for flag, spec := range map[string]dynamo.TableSpec{
		"commands":     dynamo.CommandsTable(names.Commands(system, tenant) + "_restored"),
		"users":        dynamo.UsersTable(names.Users(system, tenant, 0) + "_restored"),
		"activities":   dynamo.ActivitiesTable(names.Activities(system, tenant, 0) + "_restored"),
		"idempotency":  dynamo.IdempotencyTable(names.Idempotency() + "_restored"),
		"dead-letters": {Input: streams.DeadLetterTableInput(names.DeadLetters() + "_restored"), TTLAttr: "expires_at"},
		"sync-status":  dynamo.KeycloakSyncStatusTable(names.KeycloakSyncStatus() + "_restored"),
		"events":       changefeed.Table(changefeed.TableName(names) + "_restored"),
	} {
		from := strings.TrimSuffix(aws.ToString(spec.Input.TableName), "_restored")
		copyTable(t, db, spec, from)
		d.copies[flag] = aws.ToString(spec.Input.TableName)
	}
	return d
}

// args are the flags naming every copy.
func (d *restoreDrill) args() []string {
	flags := make([]string, 0, len(d.copies))
	for f := range d.copies {
		flags = append(flags, f)
	}
	sort.Strings(flags)
	var out []string
	for _, f := range flags {
		out = append(out, "--"+f+"-table", d.copies[f])
	}
	return out
}

// key renders an item's key in its table ("table|{attr: value}", the table without
// `_restored`, so that an item and its copy have one key).
func (d *restoreDrill) key(t *testing.T, table string, it map[string]types.AttributeValue) string {
	t.Helper()
	attrs, ok := d.keys[table]
	if !ok {
		out, err := d.db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range out.Table.KeySchema {
			attrs = append(attrs, aws.ToString(k.AttributeName))
		}
		d.keys[table] = attrs
	}
	k := map[string]any{}
	for _, a := range attrs {
		k[a] = plain(it[a])
	}
	b, _ := json.Marshal(k)
	return strings.TrimSuffix(table, "_restored") + "|" + string(b)
}

// holdsThePerson fails the test unless the copies that must hold the person before the
// erasure do (the sync status names no one unless a realm failed: it is copied all the
// same).
func (d *restoreDrill) holdsThePerson(t *testing.T, hits []stageHit) {
	t.Helper()
	found := map[string]bool{}
	for _, h := range hits {
		found[h.table] = true
	}
	for _, f := range []string{"commands", "users", "activities", "idempotency", "dead-letters", "events"} {
		if !found[d.copies[f]] {
			t.Errorf("the restored %s copy holds no canary before the re-application: the drill proves nothing there", f)
		}
	}
}

// keepLater records the later user's items (every hit of the live tables, which held none
// after the erasure) and puts their Idempotency-Key records and change feed items into the
// copies beside the person's (where no item has their key): a copy holding both, which a
// match by the name alone would empty.
func (d *restoreDrill) keepLater(t *testing.T, hits []stageHit) {
	t.Helper()
	d.later, d.laterCopies = map[string]bool{}, map[string]string{}
	shared := map[string]string{
		strings.TrimSuffix(d.copies["idempotency"], "_restored"): d.copies["idempotency"],
		strings.TrimSuffix(d.copies["events"], "_restored"):      d.copies["events"],
	}
	copied := map[string]int{}
	for _, h := range hits {
		if strings.HasSuffix(h.table, "_restored") {
			continue
		}
		k := d.key(t, h.table, h.item)
		d.later[k] = true
		to, ok := shared[h.table]
		if !ok {
			continue
		}
		_, err := d.db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(to), Item: h.item,
			ConditionExpression:      aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": d.keys[h.table][0]}})
		var cf *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &cf) {
			t.Fatal(err)
		}
		if err == nil {
			d.laterCopies[to+"|"+k] = canonical(h.item)
			copied[to]++
		}
	}
	for _, to := range shared {
		if copied[to] == 0 {
			t.Errorf("no item of the later user to put into %s: the drill proves nothing of a later user there", to)
		}
	}
}

// checkAfter fails the test for every item holding a canary that is not the later user's,
// and for every item of the later user put into a copy that is gone or changed.
func (d *restoreDrill) checkAfter(t *testing.T, hits []stageHit) {
	t.Helper()
	for _, h := range hits {
		if !d.later[d.key(t, h.table, h.item)] {
			b, _ := json.Marshal(plainItem(h.item))
			t.Errorf("after the re-application: %s: %v in %.300s", h.table, h.what, b)
		}
	}
	now := map[string]string{} // "copy|key" → the item now
	for _, table := range []string{d.copies["idempotency"], d.copies["events"]} {
		for _, it := range scan(t, d.db, table) {
			now[table+"|"+d.key(t, table, it)] = canonical(it)
		}
	}
	for k, was := range d.laterCopies {
		if now[k] != was {
			t.Errorf("the later user's item %s was touched by the re-application:\nbefore %s\nafter  %s", k, was, now[k])
		}
	}
}

// canonical renders an item with the JSON documents its strings hold decoded (a rewrite
// orders a document's keys anew; only a change of what it says counts).
func canonical(it map[string]types.AttributeValue) string {
	m := plainItem(it)
	for k, v := range m {
		if s, ok := v.(string); ok && strings.HasPrefix(s, "{") {
			var doc any
			if json.Unmarshal([]byte(s), &doc) == nil {
				m[k] = doc
			}
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

// laterFeedItem reports whether the live change feed holds an item of the user id.
func laterFeedItem(t *testing.T, db *dynamodb.Client, names dynamo.Names, id string) (bool, string) {
	for _, it := range scan(t, db, changefeed.TableName(names)) {
		b, _ := json.Marshal(plainItem(it))
		if strings.Contains(string(b), id) {
			return true, ""
		}
	}
	return false, fmt.Sprintf("no item of %s in the change feed yet", id)
}
