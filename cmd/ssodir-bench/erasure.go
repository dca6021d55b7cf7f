package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/erasure/erasuretest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/projections"
)

// erasureSize is the erased user of the erasure scenario: history records and groups
// (full: the 10,000 and 100).
func erasureSize(sc scale) (history, groups int) {
	switch sc.Name {
	case "full":
		return 10000, 100
	case "small":
		return 1000, 10
	}
	return 50, 3
}

// countingDB counts the DynamoDB calls an erasure makes, by operation.
type countingDB struct {
	*dynamodb.Client
	mu    sync.Mutex
	calls map[string]float64
	// busy is the time spent in calls, by operation and table (seconds, summed over
	// concurrent calls): where the erasure's time goes.
	busy map[string]float64
	// writeTable is the tenant's write table, whose Scans are counted apart.
	writeTable string
	// kinds names the tenant's tables (write, users, activities) in busy's keys; the
	// others are the stage's shared ones.
	kinds map[string]string
}

func (c *countingDB) count(op string) {
	c.mu.Lock()
	c.calls[op]++
	c.mu.Unlock()
}

// timed counts a call of op on table and, when it returns, adds its time to busy.
func (c *countingDB) timed(op, table string) func() {
	c.count(op)
	start := time.Now()
	return func() {
		d := time.Since(start).Seconds()
		kind := c.kinds[table]
		if kind == "" {
			kind = "shared"
		}
		c.mu.Lock()
		c.busy[op+"_"+kind] += d
		c.mu.Unlock()
	}
}

func firstTable[V any](m map[string]V) string {
	for t := range m {
		return t
	}
	return ""
}

func (c *countingDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	defer c.timed("GetItem", aws.ToString(in.TableName))()
	return c.Client.GetItem(ctx, in, o...)
}
func (c *countingDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	defer c.timed("PutItem", aws.ToString(in.TableName))()
	return c.Client.PutItem(ctx, in, o...)
}
func (c *countingDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	defer c.timed("UpdateItem", aws.ToString(in.TableName))()
	return c.Client.UpdateItem(ctx, in, o...)
}
func (c *countingDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	defer c.timed("DeleteItem", aws.ToString(in.TableName))()
	return c.Client.DeleteItem(ctx, in, o...)
}
func (c *countingDB) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	defer c.timed("Query", aws.ToString(in.TableName))()
	return c.Client.Query(ctx, in, o...)
}
func (c *countingDB) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	defer c.timed("Scan", aws.ToString(in.TableName))()
	if aws.ToString(in.TableName) == c.writeTable {
		c.count("ScanOfTheWriteTable")
	}
	return c.Client.Scan(ctx, in, o...)
}
func (c *countingDB) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	defer c.timed("BatchGetItem", firstTable(in.RequestItems))()
	return c.Client.BatchGetItem(ctx, in, o...)
}
func (c *countingDB) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	defer c.timed("BatchWriteItem", firstTable(in.RequestItems))()
	return c.Client.BatchWriteItem(ctx, in, o...)
}

// benchErasure measures what one erasure costs: a user with the 10,000 history
// records (their feed and view projected) and memberships of 100 groups, each group's
// history naming them, erased by the projector's two passes (in-process, the settle wait
// left out), against the least any erasure must do: deleting the user's own items with
// BatchWriteItem. The design adds nothing to a create or an update (no per-user key, no
// extra item or call): the create and update scenarios measure the same path as before.
func benchErasure(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	e, api, err := apiEnv(ctx, b, sc, true)
	if err != nil {
		return nil, err
	}
	defer e.close()
	if err := api.stop(); err != nil {
		return nil, err
	}
	nHistory, nGroups := erasureSize(sc)
	r := &result{
		Name: fmt.Sprintf("erase a user with %s history records and %d groups, %s other items", quantity(nHistory), nGroups, quantity(sc.EraseOthers)), Unit: "s", BaselineUnit: "s",
		What:         "erasure.Eraser first and second pass in-process (the projector's work on user.erased, SSO_ERASURE_SETTLE left out); calls_* count its DynamoDB calls",
		BaselineWhat: "BatchWriteItem deletes of the user's own write-model, view and feed items, 25 at a time, 4 batches at once (as the erasure's deletes)",
		Notes: []string{"every create and update: no added call (the design keeps no per-user key)",
			fmt.Sprintf("the erasure finds the group records naming the user by the member index (a Query of the user's id, BatchGetItem of the records), never a Scan of the tenant's write table, which holds %s items of other users beside the user and the groups (calls_Scan counts the Scans of the stage's shared Idempotency-Key table)", quantity(sc.EraseOthers)),
			"ratio wall_s = erasure / baseline (medians); pair_ratio_wall: the median of each repetition's erasure / its own baseline"},
	}
	row, err := dynamo.NewTenants(e.db, e.names).Get(ctx, benchSystem, benchTenant)
	if err != nil {
		return nil, err
	}
	p := projections.New(e.db, projections.Options{Retention: activityRetention})
	if _, err := erasuretest.Seed(ctx, e.db, row.CommandsTable, erasuretest.Spec{Username: "bystander", History: 10, Others: sc.EraseOthers}); err != nil {
		return nil, err
	}
	v := 2.0 // the erasure within 2x the raw deletes (ratio wall_s)
	r.Target = &target{Of: "ratios", Key: "wall_s", Max: &v}
	for rep := range sc.Reps {
		// The erasure and its baseline, each on a user of its own seeded just before;
		// which goes first alternates from one repetition to the next (the tenant grows).
		var fig, base map[string]float64
		for _, raw := range []bool{rep%2 == 1, rep%2 == 0} {
			var err error
			if raw {
				base, err = rawErasee(ctx, e, p, row, rep, nHistory, nGroups)
			} else {
				fig, err = eraseErasee(ctx, e, p, row, rep, nHistory, nGroups)
			}
			if err != nil {
				return nil, err
			}
		}
		fig["pair_ratio_wall"] = fig["wall_s"] / base["wall_s"] // its median is the median of the pairs
		r.add(fig, base)
		b.logf("   erasure %d: %.1fs (first pass %.1fs), %.0f calls; raw deletes %.1fs", rep, fig["wall_s"], fig["first_pass_s"], fig["calls"], base["wall_s"])
	}
	f, err := benchErasureFilter(ctx, e, sc)
	if err != nil {
		return nil, err
	}
	return []*result{r, f}, nil
}

// eraseErasee seeds a user and erases them with the projector's two passes; its figures
// are the time and the calls.
func eraseErasee(ctx context.Context, e *env, p *projections.Projector, row dynamo.Tenant, rep, nHistory, nGroups int) (map[string]float64, error) {
	username := fmt.Sprintf("erasee-%d", rep)
	id := fmt.Sprintf("00000000-0000-0000-0000-%012d", rep)
	if _, err := seedErasee(ctx, e, p, row, username, id, rep, nHistory, nGroups); err != nil {
		return nil, err
	}
	put, err := dynamo.ErasureLedgerPut(e.names.Erasures(), benchSystem, benchTenant, commands.Erasure{ID: id, RequestedAt: time.Now(),
		Actor: "bench", Reason: "bench", UserIDHashes: []string{identity.ErasedIDHash("id-" + username)}, Places: commands.ErasurePlaces})
	if err != nil {
		return nil, err
	}
	if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: put.TableName, Item: put.Item}); err != nil {
		return nil, err
	}
	cdb := &countingDB{Client: e.db, calls: map[string]float64{"ScanOfTheWriteTable": 0}, busy: map[string]float64{}, writeTable: row.CommandsTable,
		kinds: map[string]string{row.CommandsTable: "write", row.UsersTable: "users", row.ActivitiesTable: "activities"}}
	x := erasure.NewEraser(cdb, e.names, dynamo.NewTenants(e.db, e.names), events.NewRegistry(), erasure.Options{})
	before := e.cpu()
	start := time.Now()
	subj := erasure.NewSubject(username, "id-"+username)
	groups, err := x.FirstPass(ctx, row, subj, id, nil)
	if err != nil {
		return nil, err
	}
	first := time.Since(start)
	if err := x.SecondPass(ctx, row, erasure.NewSubject(username), id, groups); err != nil {
		return nil, err
	}
	wall := time.Since(start)
	// The tombstone is gone (the second pass released the name): the pass did its work.
	left, err := e.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(row.CommandsTable), ConsistentRead: aws.Bool(true),
		Key: item{"id": s(dynamo.UserID(username)), "sk": s(dynamo.SKConfig)}})
	if err != nil {
		return nil, err
	}
	if left.Item != nil {
		return nil, fmt.Errorf("erasure %s: the second pass left the tombstone of %s", id, username)
	}
	fig := map[string]float64{"wall_s": wall.Seconds(), "first_pass_s": first.Seconds(), "second_pass_s": (wall - first).Seconds(),
		"groups_found": float64(len(groups))}
	for k, v := range cdb.busy {
		fig["busy_s_"+k] = v
	}
	total := 0.0
	for op, n := range cdb.calls {
		fig["calls_"+op] = n
		if op != "ScanOfTheWriteTable" { // counted in Scan too
			total += n
		}
	}
	fig["calls"] = total
	e.addCPU(fig, before, 1)
	return fig, nil
}

// rawErasee seeds the same user and deletes its own items raw: the baseline.
func rawErasee(ctx context.Context, e *env, p *projections.Projector, row dynamo.Tenant, rep, nHistory, nGroups int) (map[string]float64, error) {
	username := fmt.Sprintf("erasee-%d-raw", rep)
	keys, err := seedErasee(ctx, e, p, row, username, fmt.Sprintf("00000000-0000-0000-0001-%012d", rep), rep+1000, nHistory, nGroups)
	if err != nil {
		return nil, err
	}
	before := e.cpu()
	start := time.Now()
	if err := rawDelete(ctx, e.db, keys); err != nil {
		return nil, err
	}
	base := map[string]float64{"wall_s": time.Since(start).Seconds()}
	// The CPU DynamoDB Local spends: a ratio that the machine's other load moves less.
	e.addCPU(base, before, 1)
	return base, nil
}

// benchErasureFilter measures what the erasure filter reads to decide a record: the
// ledger items per record of distinct users (each read once, then cached for the TTL), in
// a tenant with 10,000 erasures against one with 1.
func benchErasureFilter(ctx context.Context, e *env, sc scale) (*result, error) {
	r := &result{
		Name: "erasure filter: ledger items read per record, 10,000 erasures in the tenant", Unit: "items", BaselineUnit: "items",
		What:         "erasure.Filter.Apply on user records of distinct users (one read each) then the same again (cached), in a tenant with 10,000 erasures",
		BaselineWhat: "the same in a tenant with 1 erasure",
		Notes:        []string{"ratio reads_per_record = 10,000 erasures / 1 erasure; the target is the same reads (1.0)"},
		Target:       &target{Of: "ratios", Key: "reads_per_record", Max: ptr(1.0)},
	}
	ledger := erasure.NewLedger(e.db, e.names)
	index := func(tenant string, n int) error {
		hashes := make([]string, 0, n)
		for i := range n {
			hashes = append(hashes, identity.ErasedIDHash(fmt.Sprintf("id-erased-%d", i)))
		}
		return ledger.IndexIDHashes(ctx, benchSystem, tenant, "bench", hashes)
	}
	if err := index("filter-many", 10000); err != nil {
		return nil, err
	}
	if err := index("filter-one", 1); err != nil {
		return nil, err
	}
	records := 500
	if sc.Name == "full" {
		records = 2000
	}
	measure := func(tenant string) (float64, error) {
		f := erasure.NewFilter(ledger, time.Hour)
		for pass := range 2 {
			for i := range records {
				username := fmt.Sprintf("u%d", i)
				if i%10 == 0 {
					username = fmt.Sprintf("erased-%d", i) // one record in ten of an erased user
				}
				u := events.User{ID: "id-" + username, Username: username, Version: int64(pass + 2)}
				env := &events.Envelope{Type: events.UserUpdatedType, Kind: events.KindUser, Key: username, Version: u.Version, Payload: &events.UserUpdated{User: u}}
				if _, err := f.Apply(ctx, benchSystem, tenant, env); err != nil {
					return 0, err
				}
			}
		}
		return float64(f.ItemsRead()) / float64(2*records), nil
	}
	for range sc.Reps {
		many, err := measure("filter-many")
		if err != nil {
			return nil, err
		}
		one, err := measure("filter-one")
		if err != nil {
			return nil, err
		}
		r.add(map[string]float64{"reads_per_record": many}, map[string]float64{"reads_per_record": one})
	}
	return r, nil
}

// seedErasee writes a user with nHistory history records (projected: view and feed) and a
// membership of nGroups groups (each group's history names them), erased by erasureID as
// the erase command leaves them; it returns the user's own items by table.
func seedErasee(ctx context.Context, e *env, p *projections.Projector, row dynamo.Tenant, username, erasureID string, rep, nHistory, nGroups int) (map[string][]item, error) {
	at := time.Now().UTC().Truncate(time.Millisecond)
	u := events.User{ID: "id-" + username, Username: username, Email: username + "@example.org", FirstName: "F", LastName: "L",
		IsActive: true, CreatedAt: at, UpdatedAt: at}
	var hist, feed []item
	var envs []events.Envelope
	for v := 1; v <= nHistory; v++ {
		u.Version = int64(v)
		u.FirstName = fmt.Sprintf("F%d", v)
		var pl events.Payload = &events.UserUpdated{User: u}
		if v == 1 {
			pl = &events.UserCreated{User: u}
		}
		env := events.Envelope{EventID: fmt.Sprintf("%s-%d", username, v), Type: pl.EventType(), SchemaVersion: events.SchemaVersion,
			Kind: events.KindUser, Key: username, Version: int64(v), Actor: "bench", OccurredAt: at,
			Changes: map[string]events.Change{"first_name": {New: u.FirstName}}, Payload: pl}
		envs = append(envs, env)
		hist = append(hist, history(env))
	}
	var groupItems []item
	var groupKeys []string
	for i := range nGroups {
		g := events.Group{ID: fmt.Sprintf("gid-%d-%d", rep, i), Key: fmt.Sprintf("eg-%d-%d", rep, i), Name: fmt.Sprintf("eg-%d-%d", rep, i), Version: 2, CreatedAt: at, UpdatedAt: at}
		env := events.Envelope{EventID: fmt.Sprintf("%s-g%d", username, i), Type: events.GroupMemberAddedType, SchemaVersion: events.SchemaVersion,
			Kind: events.KindGroup, Key: g.Key, Version: 2, Actor: "bench", OccurredAt: at,
			Changes: map[string]events.Change{"member": {New: username}},
			Payload: &events.GroupMemberAdded{Group: g, Username: username, UserID: u.ID, MembershipRev: int64(i + 1)}}
		envs = append(envs, env)
		groupKeys = append(groupKeys, g.Key)
		groupItems = append(groupItems, history(env), must(dynamo.GroupConfigItem(g, false, nil)),
			dynamo.MemberItem(g.Key, username, u.ID, int64(i+1), 2, dynamo.FormatTime(at)))
		// The member index item the command store writes with the record.
		groupItems = append(groupItems, dynamo.MemberIndexItems(env)...)
	}
	// As the erase command leaves the user: its user.erased record, and a tombstone that
	// holds the name for the erasure (which the second pass releases).
	tomb := events.User{Username: username, Version: int64(nHistory + 1), CreatedAt: at, UpdatedAt: at, Deleted: true}
	erased := events.Envelope{EventID: fmt.Sprintf("%s-%d", username, nHistory+1), Type: events.UserErasedType, SchemaVersion: events.SchemaVersion,
		Kind: events.KindUser, Key: username, Version: tomb.Version, Actor: "bench", OccurredAt: at,
		Payload: &events.UserErased{User: tomb, PreviousID: u.ID, Groups: groupKeys, ErasureID: erasureID}}
	config := userConfig(tomb)
	config["erasure_id"] = s(erasureID)
	hist = append(hist, history(erased), config, emailGuard(u))
	if err := batchWrite(ctx, e.db, row.CommandsTable, writeConcurrency, append(hist, groupItems...)); err != nil {
		return nil, err
	}
	if err := p.ApplyBatch(ctx, projections.Tables{Users: row.UsersTable, Activities: row.ActivitiesTable}, envs); err != nil {
		return nil, err
	}
	for _, env := range envs[:nHistory] {
		fx, err := p.Effects(env)
		if err != nil {
			return nil, err
		}
		for _, a := range fx.Activities {
			feed = append(feed, item{"pk": a["pk"], "sk": a["sk"]})
		}
	}
	keyOf := func(it item) item { return item{"id": it["id"], "sk": it["sk"]} }
	own := map[string][]item{row.ActivitiesTable: feed}
	for _, it := range hist {
		own[row.CommandsTable] = append(own[row.CommandsTable], keyOf(it))
	}
	own[row.UsersTable] = []item{{"id": s(dynamo.UserID(username)), "sk": s(dynamo.SKConfig)}}
	return own, nil
}

// rawDeleteWorkers is how many batches the baseline has in flight at once: as many as
// the erasure's deletes (erasure.deleteWorkers).
const rawDeleteWorkers = 4

// rawDelete deletes the keys of every table with BatchWriteItem, 25 at a time,
// rawDeleteWorkers batches at once, retrying what is unprocessed.
func rawDelete(ctx context.Context, db *dynamodb.Client, keys map[string][]item) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(rawDeleteWorkers)
	for table, ks := range keys {
		for chunk := range slices.Chunk(ks, 25) {
			g.Go(func() error {
				reqs := make([]types.WriteRequest, 0, len(chunk))
				for _, k := range chunk {
					reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
				}
				pending := map[string][]types.WriteRequest{table: reqs}
				for len(pending[table]) > 0 {
					out, err := db.BatchWriteItem(gctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
					if err != nil {
						return err
					}
					pending = out.UnprocessedItems
				}
				return nil
			})
		}
	}
	return g.Wait()
}
