package projector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/projections"
)

// Replay rebuilds a tenant's read model and activity feed from its command log into a new
// generation of tables, verifies them, and switches the tenant's readers over:
//
//  1. The new tables are created and named in the tenant row (next_users_table …). From
//     then on the live projector writes every record into them as well, so a command
//     accepted during the rebuild is never missing after the switch.
//  2. After the projectors have seen the row (SwitchWait), the command log is scanned in
//     parallel segments and its history records applied with the live projector's own
//     reducers (projections.ApplyBatch). Each segment's position is saved in the tenant
//     row, so an interrupted replay resumes where it stopped.
//  3. Items whose history has expired (SSO_HISTORY_RETENTION) are rebuilt from the state
//     items (`config`, `member#…`).
//  4. Every aggregate and membership of the log is checked against the new tables.
//  5. The row is switched to the new tables; old ones are deleted only with DropOld.
type Replayer struct {
	db        *dynamodb.Client
	names     dynamo.Names
	tenants   *dynamo.Tenants
	projector *projections.Projector
	registry  *events.Registry
	log       *zap.Logger
	// index rebuilds the memberships-at-an-instant index (internal/asof) with the views;
	// expired counts the aggregates whose history had expired, which the index then
	// knows only from their state (see markCoverage).
	index   *asof.Index
	expired atomic.Int64
}

// NewReplayer is a replayer over the same projector the live process uses.
func NewReplayer(db *dynamodb.Client, names dynamo.Names, tenants *dynamo.Tenants, p *projections.Projector, reg *events.Registry, log *zap.Logger) *Replayer {
	return &Replayer{db: db, names: names, tenants: tenants, projector: p, registry: reg, log: log, index: asof.New(db)}
}

// ReplayOptions tune a replay.
type ReplayOptions struct {
	DryRun  bool
	DropOld bool
	// Segments is the parallel scan's segment count; 0 sizes it to the table (segmentsFor).
	// A resumed replay keeps the count it started with.
	Segments int
	// Workers is how many segments are read and applied at a time (default 8).
	Workers int
	// SwitchWait is how long to wait for every projector to see the new tables before the
	// scan starts, and readers to leave the old tables before they are dropped. Default 3s
	// (the projector and query API re-read tenant rows every second or two).
	SwitchWait time.Duration
	// Progress receives progress; nil for none.
	Progress Progress
	// Out receives the report lines.
	Out io.Writer
	// PageSize limits the items of one scan page (0: DynamoDB's 1 MB pages).
	PageSize int32
	// StopAfterPages interrupts the scan after this many pages (tests of resumption).
	StopAfterPages int
	// Tables are the settings the new tables get (the stage's: docs/aws.md).
	Tables dynamo.TableSettings
	// verifyPause is the pause between verification rounds (verifyPause; tests shorten it).
	verifyPause time.Duration
}

// Progress is told how far a replay is.
type Progress interface {
	Start(phase string, total int64)
	Add(n int)
	Finish()
}

// ReplayReport says what a replay did.
type ReplayReport struct {
	UsersTable, ActivitiesTable string
	Resumed                     bool
	Segments                    int
	HistoryRecords              int64
	StateRebuilt                int64
	Users, Groups, Memberships  int64
	Checked                     int64
	Mismatches                  []string
	Switched                    bool
	Dropped                     []string
}

// ErrInterrupted reports a replay stopped on purpose (StopAfterPages) before finishing.
var ErrInterrupted = errors.New("replay interrupted; run it again to resume")

func (o *ReplayOptions) defaults() {
	if o.Workers <= 0 {
		o.Workers = 8
	}
	if o.SwitchWait == 0 {
		o.SwitchWait = 3 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.verifyPause == 0 {
		o.verifyPause = verifyPause
	}
}

// Run replays one tenant.
func (r *Replayer) Run(ctx context.Context, system, tenant string, opts ReplayOptions) (ReplayReport, error) {
	opts.defaults()
	var rep ReplayReport
	started := time.Now()
	r.expired.Store(0)
	row, err := r.tenants.Get(ctx, system, tenant)
	if err != nil {
		return rep, err
	}
	if row.CommandsTable == "" {
		return rep, fmt.Errorf("tenant %s/%s has no command table yet", system, tenant)
	}
	gen := row.Generation + 1
	next := projections.Tables{Users: r.names.Users(system, tenant, gen), Activities: r.names.Activities(system, tenant, gen)}
	if row.NextUsersTable != "" {
		next = projections.Tables{Users: row.NextUsersTable, Activities: row.NextActivitiesTable}
		rep.Resumed = true
	}
	rep.UsersTable, rep.ActivitiesTable = next.Users, next.Activities

	if opts.DryRun {
		return rep, r.dryRun(ctx, row, next, &rep, opts)
	}
	if !rep.Resumed {
		fmt.Fprintf(opts.Out, "creating %s and %s\n", next.Users, next.Activities)
		for _, spec := range []dynamo.TableSpec{dynamo.UsersTable(next.Users), dynamo.ActivitiesTable(next.Activities)} {
			if err := dynamo.EnsureTable(ctx, r.db, spec.With(opts.Tables, system, tenant)); err != nil {
				return rep, err
			}
		}
		segments := opts.Segments
		if segments <= 0 {
			segments = segmentsFor(r.itemCount(ctx, row.CommandsTable))
		}
		if err := r.tenants.StartReplay(ctx, system, tenant, next.Users, next.Activities, segments); err != nil {
			return rep, err
		}
		fmt.Fprintf(opts.Out, "live projectors now also write into the new tables; waiting %s for them to notice\n", opts.SwitchWait)
		if err := sleep(ctx, opts.SwitchWait); err != nil {
			return rep, err
		}
	} else {
		fmt.Fprintf(opts.Out, "resuming the replay into %s and %s\n", next.Users, next.Activities)
	}

	list, rescan, err := r.rebuild(ctx, row, next, &rep, opts)
	if err != nil {
		return rep, err
	}
	fmt.Fprintf(opts.Out, "applied %d history records, rebuilt %d items from state\n", rep.HistoryRecords, rep.StateRebuilt)

	if err := r.verify(ctx, row, next, &rep, opts, list, rep.Segments, rescan); err != nil {
		return rep, err
	}
	if err := r.erasedLives(ctx, row, next.Users); err != nil {
		return rep, err
	}
	if err := r.markCoverage(ctx, row, next.Users, started); err != nil {
		return rep, err
	}
	fmt.Fprintf(opts.Out, "verified %d users, %d groups, %d memberships against the command log: all match\n",
		rep.Users, rep.Groups, rep.Memberships)

	old := projections.Tables{Users: row.UsersTable, Activities: row.ActivitiesTable}
	if err := r.switchTo(ctx, row, next, gen, rep.Resumed); err != nil {
		return rep, err
	}
	rep.Switched = true
	fmt.Fprintf(opts.Out, "switched %s/%s to %s and %s\n", system, tenant, next.Users, next.Activities)
	if opts.DropOld {
		if err := sleep(ctx, opts.SwitchWait); err != nil {
			return rep, err
		}
		for _, t := range []string{old.Users, old.Activities} {
			if t == next.Users || t == next.Activities {
				continue
			}
			// On purpose: DeleteTable turns the old table's deletion protection off first.
			if err := dynamo.DeleteTable(ctx, r.db, t); err != nil {
				return rep, err
			}
			rep.Dropped = append(rep.Dropped, t)
			fmt.Fprintf(opts.Out, "dropped %s\n", t)
		}
	} else {
		fmt.Fprintf(opts.Out, "kept the old tables %s and %s (--keep-old); delete them when no longer needed\n", old.Users, old.Activities)
	}
	return rep, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// saveCursor records a segment's progress in the tenant row: its last key, or, at its
// end, the segment among the finished ones.
func (r *Replayer) saveCursor(ctx context.Context, system, tenant string, segment int, last map[string]types.AttributeValue) error {
	if last == nil {
		return r.tenants.FinishReplaySegment(ctx, system, tenant, segment)
	}
	return r.tenants.SaveReplayCursor(ctx, system, tenant, segment, encodeKey(last))
}

func encodeKey(k map[string]types.AttributeValue) string {
	m := map[string]string{}
	for name, v := range k {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			m[name] = s.Value
		}
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func decodeKey(s string) (map[string]types.AttributeValue, error) {
	if s == "" {
		return nil, nil
	}
	m := map[string]string{}
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return nil, fmt.Errorf("decode replay cursor: %w", err)
	}
	k := map[string]types.AttributeValue{}
	for name, v := range m {
		k[name] = &types.AttributeValueMemberS{Value: v}
	}
	return k, nil
}

// segmentsFor is the scan's segment count for a table of n items. DynamoDB Local spends
// time in proportion to the segment's size on every page of a Scan, so with few segments
// a scan grows with the square of the table (measured here: 200,000 items take 53 s in
// one segment and 1.9 s in 64; 1,200,000 take 14 s in 256 and 9 s in 1,024). About half a
// page of the command table per segment keeps it linear; DynamoDB itself spreads segments
// over partitions, where many small segments cost nothing.
func segmentsFor(n int64) int {
	return int(min(max(n/segmentItems, minSegments), maxSegments))
}

const (
	segmentItems = 1500
	minSegments  = 4
	maxSegments  = 1024
)

// pageFunc handles one page of a segment.
type pageFunc func(ctx context.Context, items []map[string]types.AttributeValue) error

// scan reads a table in segments, workers of them at a time, starting each segment after
// from (if given) and calling page, then saved (if given), for each page.
func (r *Replayer) scan(ctx context.Context, in dynamodb.ScanInput, segments, workers int, skip map[int]bool,
	from func(seg int) (map[string]types.AttributeValue, error), page pageFunc,
	saved func(ctx context.Context, seg int, last map[string]types.AttributeValue) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for seg := 0; seg < segments; seg++ {
		if skip[seg] {
			continue
		}
		g.Go(func() error {
			input := in
			input.Segment, input.TotalSegments = aws.Int32(int32(seg)), aws.Int32(int32(segments))
			if from != nil {
				start, err := from(seg)
				if err != nil {
					return err
				}
				input.ExclusiveStartKey = start
			}
			for {
				out, err := r.db.Scan(gctx, &input)
				if err != nil {
					return fmt.Errorf("scan %s: %w", aws.ToString(in.TableName), err)
				}
				if err := page(gctx, out.Items); err != nil {
					return err
				}
				if saved != nil {
					if err := saved(gctx, seg, out.LastEvaluatedKey); err != nil {
						return err
					}
				}
				if out.LastEvaluatedKey == nil {
					return nil
				}
				input.ExclusiveStartKey = out.LastEvaluatedKey
			}
		})
	}
	return g.Wait()
}

// scanAll pages through a whole table in parallel segments (replay tooling, not a list
// endpoint), with strongly consistent reads.
func (r *Replayer) scanAll(ctx context.Context, table string, in dynamodb.ScanInput, opts ReplayOptions, page pageFunc) error {
	in.TableName = aws.String(table)
	in.ConsistentRead = aws.Bool(true)
	segments := opts.Segments
	if segments <= 0 {
		segments = segmentsFor(r.itemCount(ctx, table))
	}
	return r.scan(ctx, in, segments, opts.Workers, nil, nil, page, nil)
}

// rebuild scans the command log once, resuming each segment from its saved position, and
// applies every page (applyPage). It returns the checks of every state item it read, and
// the segments an earlier, interrupted run had read some or all of, whose state items
// the verification has to read again.
func (r *Replayer) rebuild(ctx context.Context, row dynamo.Tenant, next projections.Tables, rep *ReplayReport, opts ReplayOptions) (*checklist, map[int]bool, error) {
	pos, err := r.tenants.ReplayPosition(ctx, row.SystemID, row.TenantID)
	if err != nil {
		return nil, nil, err
	}
	if pos.Segments == 0 {
		return nil, nil, fmt.Errorf("tenant %s/%s has no replay in progress", row.SystemID, row.TenantID)
	}
	rep.Segments = pos.Segments
	fmt.Fprintf(opts.Out, "rebuilding from %s in %d segments, %d at a time (%d already done)\n",
		row.CommandsTable, pos.Segments, opts.Workers, len(pos.Done))
	list := &checklist{}
	rescan := maps.Clone(pos.Done)
	for seg := range pos.Cursors {
		n, err := strconv.Atoi(seg)
		if err != nil {
			return nil, nil, fmt.Errorf("replay position: segment %q", seg)
		}
		rescan[n] = true
	}
	if opts.Progress != nil {
		opts.Progress.Start("rebuild", r.itemCount(ctx, row.CommandsTable))
		defer opts.Progress.Finish()
	}
	var (
		applied, rebuilt atomic.Int64
		pages            atomic.Int64
		groups           sync.Map // group id → events.Group, for synthesised memberships
	)
	in := dynamodb.ScanInput{TableName: aws.String(row.CommandsTable)}
	if opts.PageSize > 0 {
		in.Limit = aws.Int32(opts.PageSize)
	}
	from := func(seg int) (map[string]types.AttributeValue, error) {
		return decodeKey(pos.Cursors[strconv.Itoa(seg)])
	}
	page := func(ctx context.Context, items []map[string]types.AttributeValue) error {
		history, synthesized, err := r.applyPage(ctx, row, next, items, list, &groups)
		if err != nil {
			return err
		}
		applied.Add(int64(history))
		rebuilt.Add(int64(synthesized))
		if opts.Progress != nil {
			opts.Progress.Add(len(items))
		}
		return nil
	}
	saved := func(ctx context.Context, seg int, last map[string]types.AttributeValue) error {
		if err := r.saveCursor(ctx, row.SystemID, row.TenantID, seg, last); err != nil {
			return err
		}
		if n := pages.Add(1); opts.StopAfterPages > 0 && n >= int64(opts.StopAfterPages) && last != nil {
			return ErrInterrupted
		}
		return nil
	}
	err = r.scan(ctx, in, pos.Segments, opts.Workers, pos.Done, from, page, saved)
	rep.HistoryRecords, rep.StateRebuilt = applied.Load(), rebuilt.Load()
	return list, rescan, err
}

// applyPage applies one page of the command log to the new tables: its history records
// with projections.Rebuild, then, with projections.ApplyStates, the state of every state
// item of the page whose history record has expired and of every aggregate whose log has
// moved past what Rebuild wrote. It returns how many of each it applied, and adds the
// page's state items to the checks.
func (r *Replayer) applyPage(ctx context.Context, row dynamo.Tenant, next projections.Tables, items []map[string]types.AttributeValue,
	list *checklist, groups *sync.Map) (int, int, error) {
	history, keys, states, err := r.split(ctx, row.CommandsTable, items)
	if err != nil {
		return 0, 0, err
	}
	list.addStates(states)
	missing, err := r.missingHistory(ctx, row.CommandsTable, states, keys)
	if err != nil {
		return 0, 0, err
	}
	written, err := r.projector.Rebuild(ctx, next, history)
	if err != nil {
		return 0, 0, err
	}
	if err := r.index.ApplyBatch(ctx, next.Users, history); err != nil {
		return 0, 0, err
	}
	r.expired.Add(int64(len(missing)))
	newer, err := r.newerThan(ctx, row.CommandsTable, written)
	if err != nil {
		return 0, 0, err
	}
	synthesized := make([]events.Envelope, 0, len(missing)+len(newer))
	for _, s := range append(missing, newer...) {
		e, err := r.synthesize(ctx, row, s, groups)
		if err != nil {
			return 0, 0, err
		}
		synthesized = append(synthesized, e)
	}
	for _, s := range newer {
		if e, ok := lastDelete(s); ok {
			synthesized = append(synthesized, e)
		}
	}
	if err := r.projector.ApplyStates(ctx, next, synthesized); err != nil {
		return 0, 0, err
	}
	if err := r.index.ApplyBatch(ctx, next.Users, synthesized); err != nil {
		return 0, 0, err
	}
	return len(history), len(synthesized), nil
}

// newerThan reads the `config` items of the aggregates Rebuild wrote, strongly
// consistently, and returns those whose version is past the one written: a command
// accepted since the scan, which a live projector may already have written into the new
// tables before Rebuild's unconditional write replaced it. Their state is applied again.
func (r *Replayer) newerThan(ctx context.Context, table string, written map[string]int64) ([]stateItem, error) {
	configKey := func(id string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: dynamo.SKConfig}}
	}
	var newer []map[string]types.AttributeValue
	for chunk := range slices.Chunk(slices.Sorted(maps.Keys(written)), 100) {
		keys := make([]map[string]types.AttributeValue, len(chunk))
		for i, id := range chunk {
			keys[i] = configKey(id)
		}
		versions, err := r.batchGetKeys(ctx, table, keys, "id, version")
		if err != nil {
			return nil, err
		}
		for _, it := range versions {
			var v struct {
				ID      string `dynamodbav:"id"`
				Version int64  `dynamodbav:"version"`
			}
			if err := attributevalue.UnmarshalMap(it, &v); err != nil {
				return nil, fmt.Errorf("decode the version of %s: %w", identity.LogKey(dynamo.StringAttr(it, "id")), err)
			}
			if v.Version > written[v.ID] {
				newer = append(newer, configKey(v.ID))
			}
		}
	}
	var states []stateItem
	for chunk := range slices.Chunk(newer, 100) {
		items, err := r.batchGetKeys(ctx, table, chunk, "")
		if err != nil {
			return nil, err
		}
		var page []stateItem
		if err := attributevalue.UnmarshalListOfMaps(items, &page); err != nil {
			return nil, fmt.Errorf("decode state items: %w", err)
		}
		states = append(states, page...)
	}
	return states, nil
}

// batchGetKeys reads up to 100 keys of table strongly consistently (with projection, if
// given), retrying what DynamoDB leaves unprocessed; absent items are not returned.
func (r *Replayer) batchGetKeys(ctx context.Context, table string, keys []map[string]types.AttributeValue, projection string) ([]map[string]types.AttributeValue, error) {
	var out []map[string]types.AttributeValue
	if len(keys) == 0 {
		return out, nil
	}
	ka := types.KeysAndAttributes{Keys: keys, ConsistentRead: aws.Bool(true)}
	if projection != "" {
		ka.ProjectionExpression = aws.String(projection)
	}
	req := map[string]types.KeysAndAttributes{table: ka}
	for attempt := 0; len(req) > 0; attempt++ {
		res, err := r.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", table, err)
		}
		out = append(out, res.Responses[table]...)
		req = res.UnprocessedKeys
		if len(req) > 0 {
			if err := sleep(ctx, time.Duration(20<<min(attempt, 5))*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// markCoverage notes from when the rebuilt as-of index answers (docs/history.md): from
// the tenant's creation when every aggregate's history was there to replay, else only
// from the replay's start (an aggregate known from its state alone has lost the changes
// before it, so an earlier instant could be answered wrong).
func (r *Replayer) markCoverage(ctx context.Context, row dynamo.Tenant, users string, started time.Time) error {
	since := started
	if created, err := dynamo.ParseTime(row.CreatedAt); err == nil && r.expired.Load() == 0 {
		since = created
	}
	return asof.MarkCoverage(ctx, r.db, users, asof.Millis(since))
}
