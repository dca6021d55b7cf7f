package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// workload sends a mix of commands (creates, updates, deactivations, deletes and
// re-creates, group changes, joins and leaves) with a few workers until n were accepted.
func workload(t *testing.T, base string, n int, seed uint64) int64 {
	t.Helper()
	var accepted atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(w)))
			for accepted.Load() < int64(n) {
				u := fmt.Sprintf("u%d", rng.IntN(120))
				g := fmt.Sprintf("Group %d", rng.IntN(12))
				var r response
				switch op := rng.IntN(11); op {
				case 0, 1:
					r = call(t, "POST", base+"/users", map[string]any{"username": u, "email": u + "@example.com",
						"first_name": "F" + u, "last_name": "L" + strconv.Itoa(rng.IntN(50)), "password": "password-" + u})
				case 2:
					r = call(t, "PATCH", base+"/users/"+u, map[string]any{"last_name": "N" + strconv.Itoa(rng.IntN(50)),
						"attributes": map[string][]string{"n": {strconv.Itoa(rng.IntN(9))}}})
				case 3:
					r = call(t, "POST", base+"/users/"+u+"/deactivate", nil)
				case 4:
					r = call(t, "DELETE", base+"/users/"+u, nil)
				case 5:
					r = call(t, "POST", base+"/groups", map[string]any{"name": g, "description": "d"})
				case 6, 7:
					r = call(t, "PUT", base+"/groups/"+escape(g)+"/members/"+u, nil)
				case 8:
					r = call(t, "DELETE", base+"/groups/"+escape(g)+"/members/"+u, nil)
				case 9:
					if rng.IntN(4) == 0 {
						r = call(t, "DELETE", base+"/groups/"+escape(g), nil)
					} else {
						r = call(t, "PATCH", base+"/groups/"+escape(g), map[string]any{"description": "d" + strconv.Itoa(rng.IntN(99))})
					}
				case 10:
					// Many members at once; an unknown user refuses the whole change (404).
					add, remove := []string{}, []string{}
					for range 1 + rng.IntN(6) {
						v := fmt.Sprintf("u%d", rng.IntN(120))
						if rng.IntN(3) == 0 {
							remove = append(remove, v)
						} else if !slices.Contains(remove, v) {
							add = append(add, v)
						}
					}
					add = slices.DeleteFunc(add, func(v string) bool { return slices.Contains(remove, v) })
					r = call(t, "POST", base+"/groups/"+escape(g)+"/members", map[string]any{"add": add, "remove": remove})
				}
				switch {
				case r.status >= 500:
					t.Errorf("command answered %d: %s", r.status, r.body)
					return
				case r.status < 300:
					accepted.Add(1)
				}
			}
		}(w)
	}
	wg.Wait()
	return accepted.Load()
}

func escape(s string) string {
	out := ""
	for _, r := range s {
		if r == ' ' {
			out += "%20"
		} else {
			out += string(r)
		}
	}
	return out
}

// expectedViews builds the read model and activity feed from the command log alone, with
// the projections package into fresh tables: what the live tables must equal. history is
// the activity items they must hold: one per event, one per member of a members change.
func expectedViews(t *testing.T, e *env, commandsTable string) (users, activities string, history int) {
	t.Helper()
	return expectedViewsNamed(t, e, commandsTable, e.prefix+"_expected_users", e.prefix+"_expected_activities")
}

// expectedViewsNamed builds the expected views into the named tables.
func expectedViewsNamed(t *testing.T, e *env, commandsTable, users, activities string) (string, string, int) {
	t.Helper()
	es, items := logOf(t, e, commandsTable)
	buildViews(t, e, es, users, activities)
	return users, activities, items
}

// logOf reads the command log's events, and counts the activity items they make (one per
// event, one per member of a members change).
func logOf(t *testing.T, e *env, commandsTable string) (es []events.Envelope, items int) {
	t.Helper()
	reg := events.NewRegistry()
	for _, it := range scan(t, e.db, commandsTable) {
		if !dynamo.IsHistorySK(dynamo.StringAttr(it, "sk")) {
			continue
		}
		env, err := dynamo.DecodeRecord(reg, it)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, env)
	}
	p := projections.New(e.db, projections.Options{Retention: 2160 * time.Hour})
	for _, env := range es {
		fx, err := p.Effects(env)
		if err != nil {
			t.Fatal(err)
		}
		items += len(fx.Activities)
	}
	return es, items
}

// buildViews projects es into the named tables (made if missing) with the projections
// package.
func buildViews(t *testing.T, e *env, es []events.Envelope, users, activities string) {
	t.Helper()
	ctx := context.Background()
	for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(users), dynamo.ActivitiesTable(activities)} {
		if err := dynamo.EnsureTable(ctx, e.db, spec); err != nil {
			t.Fatal(err)
		}
	}
	p := projections.New(e.db, projections.Options{Retention: 2160 * time.Hour})
	for start := 0; start < len(es); start += 200 {
		if err := p.ApplyBatch(ctx, projections.Tables{Users: users, Activities: activities}, es[start:min(start+200, len(es))]); err != nil {
			t.Fatal(err)
		}
	}
}

func count(t *testing.T, db *dynamodb.Client, table string) int {
	t.Helper()
	n := 0
	p := dynamodb.NewScanPaginator(db, &dynamodb.ScanInput{TableName: &table, Select: types.SelectCount})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		n += int(page.Count)
	}
	return n
}

// TestProjectorSurvivesKills drives thousands of commands through the command API while
// the projector is killed mid-batch and started again; at the end the read tables equal a
// fresh build from the command log, and the activity feed has exactly one item per event.
// It runs in both modes, side by side: long-running projector processes killed with
// SIGKILL (two at once part of the time), and the projector function under the Runtime
// Interface Emulator fed by an ESM player, its environment killed every few seconds
// (lambda_test.go; a thousand commands there, as each race-built environment takes one
// request at a time).
func TestProjectorSurvivesKills(t *testing.T) {
	t.Parallel()
	for name, mode := range map[string]func(*testing.T){"long-running": projectorProcessesSurviveKills, "lambda": projectorFunctionSurvivesKills} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			mode(t)
		})
	}
}

func projectorProcessesSurviveKills(t *testing.T) {
	e := newEnv(t)
	api := e.start("command-api")
	base := "http://" + api.addr + provision(t, api, "crash", "t1")
	lease := "SSO_STREAM_LEASE=3s"

	done := make(chan int64)
	go func() { done <- workload(t, base, 2500, 7) }()

	var live []*service
	kills := 0
	func() {
		for round := 0; ; round++ {
			select {
			case n := <-done:
				t.Logf("workload: %d commands accepted", n)
				return
			default:
			}
			live = append(live, e.start("projector", lease))
			if round%2 == 1 {
				live = append(live, e.start("projector", lease)) // two at once for a while
			}
			time.Sleep(time.Duration(800+round*150) * time.Millisecond)
			for _, p := range live {
				p.kill()
				kills++
			}
			live = nil
		}
	}()
	if kills < 3 {
		t.Logf("only %d kills happened during the workload", kills)
	}
	final := e.start("projector", lease)
	second := e.start("projector", lease)
	eventually(t, 90*time.Second, "the projectors to catch up", freshBuild(t, e, "crash", "t1"))
	second.stop(t)
	final.stop(t)
	t.Logf("%d kills", kills)
}

// freshBuild builds the tenant's views afresh from its command log as it is now, and
// returns a check of the live views against them: equal, with exactly one activity item
// per event, and as-of answers that match the log (asOfMatchesLog), or how they differ.
func freshBuild(t *testing.T, e *env, system, tenant string) func() (bool, string) {
	t.Helper()
	names := dynamo.Names{Prefix: e.prefix}
	wantUsers, wantActivities, history := expectedViews(t, e, names.Commands(system, tenant))
	want, wantAct := snapshot(t, e.db, wantUsers), snapshot(t, e.db, wantActivities)
	return func() (bool, string) {
		if n := count(t, e.db, names.Activities(system, tenant, 0)); n != history {
			return false, fmt.Sprintf("%d activity items for %d events", n, history)
		}
		if d := diff(want, snapshot(t, e.db, names.Users(system, tenant, 0))); d != "" {
			return false, "read model differs from a fresh build:\n" + d
		}
		if d := diff(wantAct, snapshot(t, e.db, names.Activities(system, tenant, 0))); d != "" {
			return false, "activity feed differs from a fresh build:\n" + d
		}
		return asOfMatchesLog(t, e, names.Commands(system, tenant), names.Users(system, tenant, 0))
	}
}
