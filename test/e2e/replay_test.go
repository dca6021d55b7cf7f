package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
	"github.com/ssodir/ssodir/internal/projector"
)

// caughtUp waits until the tenant's current read tables equal a fresh build of its
// command log and answer as-of reads as the log does, and returns the tenant row.
func caughtUp(t *testing.T, e *env, system, tenant string) dynamo.Tenant {
	t.Helper()
	commands := dynamo.Names{Prefix: e.prefix}.Commands(system, tenant)
	tenants := dynamo.NewTenants(e.db, dynamo.Names{Prefix: e.prefix})
	var row dynamo.Tenant
	suffix := fmt.Sprintf("_x%d", time.Now().UnixNano())
	eventually(t, 90*time.Second, "the read model to match the command log", func() (bool, string) {
		var err error
		row, err = tenants.Get(context.Background(), system, tenant)
		if err != nil {
			return false, err.Error()
		}
		// The log's activity items are counted first, from the log alone: only a read
		// model that has them all is compared with a build of the log, which makes two
		// tables and projects the whole log into them (not done on every poll while the
		// projector is still behind, where it would take the CPU the projector needs).
		es, history := logOf(t, e, commands)
		if n := count(t, e.db, row.ActivitiesTable); n != history {
			return false, fmt.Sprintf("%d activity items for %d events in %s", n, history, row.ActivitiesTable)
		}
		wantUsers, wantAct := expectedViewsInto(t, e, es, suffix)
		if d := diff(snapshot(t, e.db, wantUsers), snapshot(t, e.db, row.UsersTable)); d != "" {
			return false, "read model differs:\n" + d
		}
		if d := diff(snapshot(t, e.db, wantAct), snapshot(t, e.db, row.ActivitiesTable)); d != "" {
			return false, "activity feed differs:\n" + d
		}
		return asOfMatchesLog(t, e, commands, row.UsersTable)
	})
	return row
}

// expectedViewsInto builds es into tables named with a suffix, made afresh each call.
func expectedViewsInto(t *testing.T, e *env, es []events.Envelope, suffix string) (string, string) {
	t.Helper()
	users, act := e.prefix+"_expected_users"+suffix, e.prefix+"_expected_activities"+suffix
	for _, tb := range []string{users, act} {
		if err := dynamo.DeleteTable(context.Background(), e.db, tb); err != nil {
			t.Fatal(err)
		}
	}
	buildViews(t, e, es, users, act)
	return users, act
}

func describe(table string) *dynamodb.DescribeTableInput {
	return &dynamodb.DescribeTableInput{TableName: &table}
}

// TestReplayWhileCommandsArrive builds a tenant, replays it with the projector binary
// while commands keep arriving, and checks that the switched views equal a fresh build of
// the whole command log (so nothing accepted during the replay is missing), that the old
// tables are dropped on request, and that readers follow the switch.
func TestReplayWhileCommandsArrive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := e.start("command-api")
	e.start("projector")
	query := e.start("query-api")
	path := provision(t, api, "rp", "t1")
	base := "http://" + api.addr + path
	workload(t, base, 600, 11)
	before := caughtUp(t, e, "rp", "t1")

	done := make(chan int64)
	go func() { done <- workload(t, base, 300, 12) }()
	cmd := exec.Command(filepath.Join(binDir, "projector"), "replay", "--system", "rp", "--tenant", "t1", "--drop-old", "--workers", "2", "--segments", "7")
	cmd.Env = e.vars()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("replay: %v\n%s", err, out)
	}
	<-done
	for _, want := range []string{"in 7 segments, 2 at a time", "verified", "switched rp/t1", "dropped " + before.UsersTable} {
		if !strings.Contains(string(out), want) {
			t.Errorf("replay output lacks %q:\n%s", want, out)
		}
	}
	after := caughtUp(t, e, "rp", "t1")
	if after.UsersTable == before.UsersTable || after.Generation != before.Generation+1 {
		t.Fatalf("tenant not switched: before %s gen %d, after %s gen %d", before.UsersTable, before.Generation, after.UsersTable, after.Generation)
	}
	if _, err := e.db.DescribeTable(context.Background(), describe(before.UsersTable)); err == nil {
		t.Errorf("old table %s still exists after --drop-old", before.UsersTable)
	}
	// The query API follows the switch without a restart.
	eventually(t, 10*time.Second, "the query API to read the new tables", func() (bool, string) {
		r := call(t, "GET", "http://"+query.addr+path+"/users?limit=5", nil)
		return r.status == 200, fmt.Sprintf("%d %s", r.status, r.body)
	})
}

// TestReplayResumesAfterInterruption interrupts a replay after a few pages and runs it
// again: the second run resumes and the result equals a fresh build.
func TestReplayResumesAfterInterruption(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := e.start("command-api")
	e.start("projector")
	base := "http://" + api.addr + provision(t, api, "rp", "t2")
	workload(t, base, 400, 21)
	caughtUp(t, e, "rp", "t2")

	names := dynamo.Names{Prefix: e.prefix}
	tenants := dynamo.NewTenants(e.db, names)
	r := projector.NewReplayer(e.db, names, tenants, projections.New(e.db, projections.Options{Retention: 2160 * time.Hour}),
		events.NewRegistry(), zap.NewNop())
	ctx := context.Background()
	opts := projector.ReplayOptions{PageSize: 40, StopAfterPages: 3, SwitchWait: 2 * time.Second}
	if _, err := r.Run(ctx, "rp", "t2", opts); !errors.Is(err, projector.ErrInterrupted) {
		t.Fatalf("first run: want ErrInterrupted, got %v", err)
	}
	mid, err := tenants.Get(ctx, "rp", "t2")
	if err != nil {
		t.Fatal(err)
	}
	if mid.NextUsersTable == "" || mid.Generation != 0 {
		t.Fatalf("an interrupted replay must leave the tenant unswitched with its new tables named: %+v", mid)
	}
	opts.StopAfterPages = 0
	rep, err := r.Run(ctx, "rp", "t2", opts)
	if err != nil {
		t.Fatalf("resumed run: %v", err)
	}
	if !rep.Resumed || !rep.Switched || rep.UsersTable != mid.NextUsersTable {
		t.Fatalf("resumed run: %+v", rep)
	}
	caughtUp(t, e, "rp", "t2")
}

// live is a snapshot without tombstones: the items a reader can see.
func live(items []string) []string {
	var out []string
	for _, s := range items {
		// The group pointers in users' partitions are left by every membership ever
		// projected, also one long removed: a hint for user deletes, not what a reader sees.
		pointer := strings.Contains(s, `"id":"user#`) && strings.Contains(s, `"sk":"group#`)
		if !strings.Contains(s, `"is_deleted":true`) && !pointer {
			out = append(out, s)
		}
	}
	return out
}

// TestReplayRebuildsExpiredHistory removes old history records, as
// SSO_HISTORY_RETENTION's TTL would, and checks that a replay rebuilds every visible item
// from the state items; a dry run first reports and writes nothing.
func TestReplayRebuildsExpiredHistory(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	api := e.start("command-api")
	e.start("projector")
	base := "http://" + api.addr + provision(t, api, "rp", "t3")
	workload(t, base, 400, 31)
	before := caughtUp(t, e, "rp", "t3")
	ctx := context.Background()

	// Expire every history record but each aggregate's latest.
	latest := map[string]string{}
	items := scan(t, e.db, before.CommandsTable)
	for _, it := range items {
		id, sk := dynamo.StringAttr(it, "id"), dynamo.StringAttr(it, "sk")
		if dynamo.IsHistorySK(sk) && sk > latest[id] {
			latest[id] = sk
		}
	}
	expired := 0
	for _, it := range items {
		id, sk := dynamo.StringAttr(it, "id"), dynamo.StringAttr(it, "sk")
		if dynamo.IsHistorySK(sk) && sk != latest[id] {
			if _, err := e.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: &before.CommandsTable,
				Key: map[string]types.AttributeValue{"id": it["id"], "sk": it["sk"]}}); err != nil {
				t.Fatal(err)
			}
			expired++
		}
	}
	if expired < 100 {
		t.Fatalf("only %d history records to expire", expired)
	}

	dry := exec.Command(filepath.Join(binDir, "projector"), "replay", "--system", "rp", "--tenant", "t3", "--dry-run")
	dry.Env = e.vars()
	out, err := dry.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "dry run") {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	names := dynamo.Names{Prefix: e.prefix}
	if _, err := e.db.DescribeTable(ctx, describe(names.Users("rp", "t3", 1))); err == nil {
		t.Fatal("the dry run created a table")
	}

	tenants := dynamo.NewTenants(e.db, names)
	r := projector.NewReplayer(e.db, names, tenants, projections.New(e.db, projections.Options{Retention: 2160 * time.Hour}),
		events.NewRegistry(), zap.NewNop())
	rep, err := r.Run(ctx, "rp", "t3", projector.ReplayOptions{SwitchWait: 2 * time.Second})
	if err != nil {
		t.Fatalf("replay: %v", err)
	}
	if rep.StateRebuilt == 0 {
		t.Fatalf("nothing was rebuilt from state: %+v", rep)
	}
	want := live(snapshot(t, e.db, before.UsersTable))
	got := live(snapshot(t, e.db, rep.UsersTable))
	if d := diff(want, got); d != "" {
		t.Fatalf("the rebuilt read model differs from the one built from the full history:\n%s", d)
	}
}
