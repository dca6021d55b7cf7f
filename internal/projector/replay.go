package projector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
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
}

// NewReplayer is a replayer over the same projector the live process uses.
func NewReplayer(db *dynamodb.Client, names dynamo.Names, tenants *dynamo.Tenants, p *projections.Projector, reg *events.Registry, log *zap.Logger) *Replayer {
	return &Replayer{db: db, names: names, tenants: tenants, projector: p, registry: reg, log: log}
}

// ReplayOptions tune a replay.
type ReplayOptions struct {
	DryRun  bool
	DropOld bool
	// Segments is the parallel scan's segment count (default 4).
	Segments int
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
	if o.Segments <= 0 {
		o.Segments = 4
	}
	if o.SwitchWait == 0 {
		o.SwitchWait = 3 * time.Second
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

// Run replays one tenant.
func (r *Replayer) Run(ctx context.Context, system, tenant string, opts ReplayOptions) (ReplayReport, error) {
	opts.defaults()
	var rep ReplayReport
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
			if err := dynamo.EnsureTable(ctx, r.db, spec); err != nil {
				return rep, err
			}
		}
		if err := r.setNext(ctx, row, next); err != nil {
			return rep, err
		}
		fmt.Fprintf(opts.Out, "live projectors now also write into the new tables; waiting %s for them to notice\n", opts.SwitchWait)
		if err := sleep(ctx, opts.SwitchWait); err != nil {
			return rep, err
		}
	} else {
		fmt.Fprintf(opts.Out, "resuming the replay into %s and %s\n", next.Users, next.Activities)
	}

	if err := r.replayHistory(ctx, row, next, &rep, opts); err != nil {
		return rep, err
	}
	if err := r.rebuildState(ctx, row, next, &rep, opts); err != nil {
		return rep, err
	}
	fmt.Fprintf(opts.Out, "applied %d history records, rebuilt %d items from state\n", rep.HistoryRecords, rep.StateRebuilt)

	if err := r.verify(ctx, row, next, &rep, opts); err != nil {
		return rep, err
	}
	fmt.Fprintf(opts.Out, "verified %d users, %d groups, %d memberships against the command log: all match\n",
		rep.Users, rep.Groups, rep.Memberships)

	old := projections.Tables{Users: row.UsersTable, Activities: row.ActivitiesTable}
	if err := r.switchTo(ctx, system, tenant, next, gen); err != nil {
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
			if err := dynamo.DeleteTable(ctx, r.db, t); err != nil {
				return rep, err
			}
			rep.Dropped = append(rep.Dropped, t)
			fmt.Fprintf(opts.Out, "dropped %s\n", t)
		}
	} else {
		fmt.Fprintf(opts.Out, "kept the old tables %s and %s (--drop-old deletes them)\n", old.Users, old.Activities)
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

func (r *Replayer) configKey(system, tenant string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"system_id": &types.AttributeValueMemberS{Value: system},
		"tenant_id": &types.AttributeValueMemberS{Value: tenant},
	}
}

// setNext names the tables under construction in the tenant row; from then on the live
// projector writes into them too.
func (r *Replayer) setNext(ctx context.Context, row dynamo.Tenant, next projections.Tables) error {
	_, err := r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(r.names.Config()),
		Key:                 r.configKey(row.SystemID, row.TenantID),
		UpdateExpression:    aws.String("SET next_users_table = :u, next_activities_table = :a, replay_cursors = :c, updated_at = :now ADD row_version :one"),
		ConditionExpression: aws.String("attribute_not_exists(next_users_table)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":u": &types.AttributeValueMemberS{Value: next.Users}, ":a": &types.AttributeValueMemberS{Value: next.Activities},
			":c":   &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
			":now": &types.AttributeValueMemberS{Value: dynamo.FormatTime(time.Now())}, ":one": &types.AttributeValueMemberN{Value: "1"},
		},
	})
	if err != nil {
		return fmt.Errorf("start replay of %s/%s: %w", row.SystemID, row.TenantID, err)
	}
	return nil
}

// segment cursors are saved in the tenant row as JSON of the scan's last key; "done"
// marks a finished segment.
const cursorDone = "done"

func (r *Replayer) loadCursors(ctx context.Context, system, tenant string) (map[string]string, error) {
	out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(r.names.Config()), Key: r.configKey(system, tenant), ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("replay_cursors"),
	})
	if err != nil {
		return nil, fmt.Errorf("read replay position: %w", err)
	}
	cursors := map[string]string{}
	if v, ok := out.Item["replay_cursors"]; ok {
		if err := attributevalue.Unmarshal(v, &cursors); err != nil {
			return nil, fmt.Errorf("decode replay position: %w", err)
		}
	}
	return cursors, nil
}

func (r *Replayer) saveCursor(ctx context.Context, system, tenant, phase string, segment int, cursor string) error {
	_, err := r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(r.names.Config()),
		Key:                       r.configKey(system, tenant),
		UpdateExpression:          aws.String("SET replay_cursors.#s = :c"),
		ConditionExpression:       aws.String("attribute_exists(next_users_table)"),
		ExpressionAttributeNames:  map[string]string{"#s": phase + "-" + strconv.Itoa(segment)},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": &types.AttributeValueMemberS{Value: cursor}},
	})
	if err != nil {
		return fmt.Errorf("save replay position: %w", err)
	}
	return nil
}

func encodeKey(k map[string]types.AttributeValue) string {
	if k == nil {
		return cursorDone
	}
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

// scanPhase scans the command table in parallel segments, resuming each from its saved
// cursor, and hands every page's items to apply before saving the page's end.
func (r *Replayer) scanPhase(ctx context.Context, row dynamo.Tenant, phase string, in dynamodb.ScanInput, opts ReplayOptions,
	apply func(ctx context.Context, items []map[string]types.AttributeValue) error) error {
	cursors, err := r.loadCursors(ctx, row.SystemID, row.TenantID)
	if err != nil {
		return err
	}
	var pages atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for seg := 0; seg < opts.Segments; seg++ {
		cursor := cursors[phase+"-"+strconv.Itoa(seg)]
		if cursor == cursorDone {
			continue
		}
		start, err := decodeKey(cursor)
		if err != nil {
			return err
		}
		g.Go(func() error {
			input := in
			input.TableName = aws.String(row.CommandsTable)
			input.Segment, input.TotalSegments = aws.Int32(int32(seg)), aws.Int32(int32(opts.Segments))
			input.ExclusiveStartKey = start
			if opts.PageSize > 0 {
				input.Limit = aws.Int32(opts.PageSize)
			}
			for {
				out, err := r.db.Scan(gctx, &input)
				if err != nil {
					return fmt.Errorf("scan %s: %w", row.CommandsTable, err)
				}
				if err := apply(gctx, out.Items); err != nil {
					return err
				}
				if err := r.saveCursor(gctx, row.SystemID, row.TenantID, phase, seg, encodeKey(out.LastEvaluatedKey)); err != nil {
					return err
				}
				if out.LastEvaluatedKey == nil {
					return nil
				}
				if n := pages.Add(1); opts.StopAfterPages > 0 && n >= int64(opts.StopAfterPages) {
					return ErrInterrupted
				}
				input.ExclusiveStartKey = out.LastEvaluatedKey
			}
		})
	}
	return g.Wait()
}

func (r *Replayer) replayHistory(ctx context.Context, row dynamo.Tenant, next projections.Tables, rep *ReplayReport, opts ReplayOptions) error {
	if opts.Progress != nil {
		opts.Progress.Start("history", r.itemCount(ctx, row.CommandsTable))
		defer opts.Progress.Finish()
	}
	var applied atomic.Int64
	err := r.scanPhase(ctx, row, "history", dynamodb.ScanInput{}, opts, func(ctx context.Context, items []map[string]types.AttributeValue) error {
		es := make([]events.Envelope, 0, len(items))
		for _, it := range items {
			if !dynamo.IsHistorySK(dynamo.StringAttr(it, "sk")) {
				continue
			}
			e, err := dynamo.DecodeRecord(r.registry, it)
			if err != nil {
				return fmt.Errorf("replay: %w", err)
			}
			es = append(es, e)
		}
		if err := r.projector.ApplyBatch(ctx, next, es); err != nil {
			return err
		}
		applied.Add(int64(len(es)))
		if opts.Progress != nil {
			opts.Progress.Add(len(items))
		}
		return nil
	})
	rep.HistoryRecords = applied.Load()
	return err
}

// stateItem is a `config` or `member#` item of the command table, as far as a replay needs.
type stateItem struct {
	ID            string              `dynamodbav:"id"`
	SK            string              `dynamodbav:"sk"`
	Type          string              `dynamodbav:"type"`
	UserID        string              `dynamodbav:"user_id"`
	GroupID       string              `dynamodbav:"group_id"`
	Username      string              `dynamodbav:"username"`
	Key           string              `dynamodbav:"key"`
	Name          string              `dynamodbav:"name"`
	Email         string              `dynamodbav:"email"`
	FirstName     string              `dynamodbav:"first_name"`
	LastName      string              `dynamodbav:"last_name"`
	Description   string              `dynamodbav:"description"`
	IsActive      bool                `dynamodbav:"is_active"`
	Attributes    map[string][]string `dynamodbav:"attributes"`
	Version       int64               `dynamodbav:"version"`
	CreatedAt     string              `dynamodbav:"created_at"`
	UpdatedAt     string              `dynamodbav:"updated_at"`
	Deleted       bool                `dynamodbav:"deleted"`
	DeletedRev    int64               `dynamodbav:"deleted_membership_rev"`
	LastDeleted   int64               `dynamodbav:"last_deleted_version"`
	MemberID      string              `dynamodbav:"member_id"`
	MembershipRev int64               `dynamodbav:"membership_rev"`
	GroupVersion  int64               `dynamodbav:"group_version"`
	AddedAt       string              `dynamodbav:"added_at"`
}

// historyVersion is the version whose history record carries this state item.
func (s stateItem) historyVersion() int64 {
	if dynamo.IsMemberSK(s.SK) {
		return s.GroupVersion
	}
	return s.Version
}

var stateFilter = dynamodb.ScanInput{
	FilterExpression:          aws.String("sk = :config OR begins_with(sk, :member)"),
	ExpressionAttributeValues: map[string]types.AttributeValue{":config": &types.AttributeValueMemberS{Value: dynamo.SKConfig}, ":member": &types.AttributeValueMemberS{Value: "member#"}},
}

// rebuildState applies, for every state item whose history record has expired, an event
// synthesised from the state (without an activity item: its activity has expired too).
func (r *Replayer) rebuildState(ctx context.Context, row dynamo.Tenant, next projections.Tables, rep *ReplayReport, opts ReplayOptions) error {
	var (
		rebuilt atomic.Int64
		groups  sync.Map // group key → events.Group, for memberships
	)
	err := r.scanPhase(ctx, row, "state", stateFilter, opts, func(ctx context.Context, items []map[string]types.AttributeValue) error {
		var states []stateItem
		if err := attributevalue.UnmarshalListOfMaps(items, &states); err != nil {
			return fmt.Errorf("decode state items: %w", err)
		}
		missing, err := r.missingHistory(ctx, row.CommandsTable, states)
		if err != nil {
			return err
		}
		es := make([]events.Envelope, 0, len(missing))
		for _, s := range missing {
			e, err := r.synthesize(ctx, row, s, &groups)
			if err != nil {
				return err
			}
			es = append(es, e)
		}
		if err := r.projector.ApplyStates(ctx, next, es); err != nil {
			return err
		}
		rebuilt.Add(int64(len(es)))
		return nil
	})
	rep.StateRebuilt = rebuilt.Load()
	return err
}

// missingHistory are the state items whose history record is gone.
func (r *Replayer) missingHistory(ctx context.Context, table string, states []stateItem) ([]stateItem, error) {
	var missing []stateItem
	for start := 0; start < len(states); start += 100 {
		chunk := states[start:min(start+100, len(states))]
		keys := make([]map[string]types.AttributeValue, 0, len(chunk))
		seen := map[string]bool{}
		for _, s := range chunk {
			k := s.ID + "\x00" + dynamo.HistorySK(s.historyVersion())
			if seen[k] || s.historyVersion() < 1 {
				continue
			}
			seen[k] = true
			keys = append(keys, map[string]types.AttributeValue{
				"id": &types.AttributeValueMemberS{Value: s.ID}, "sk": &types.AttributeValueMemberS{Value: dynamo.HistorySK(s.historyVersion())},
			})
		}
		found := map[string]bool{}
		req := map[string]types.KeysAndAttributes{table: {Keys: keys, ProjectionExpression: aws.String("id, sk"), ConsistentRead: aws.Bool(true)}}
		for attempt := 0; len(req) > 0 && len(keys) > 0; attempt++ {
			out, err := r.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, fmt.Errorf("look up history records: %w", err)
			}
			for _, it := range out.Responses[table] {
				found[dynamo.StringAttr(it, "id")+"\x00"+dynamo.StringAttr(it, "sk")] = true
			}
			req = out.UnprocessedKeys
			if len(req) > 0 {
				if err := sleep(ctx, time.Duration(20<<min(attempt, 5))*time.Millisecond); err != nil {
					return nil, err
				}
			}
		}
		for _, s := range chunk {
			if s.historyVersion() >= 1 && !found[s.ID+"\x00"+dynamo.HistorySK(s.historyVersion())] {
				missing = append(missing, s)
			}
		}
	}
	return missing, nil
}

func parse(s string) time.Time {
	t, _ := dynamo.ParseTime(s)
	return t
}

// synthesize is the event whose full state is the state item's.
func (r *Replayer) synthesize(ctx context.Context, row dynamo.Tenant, s stateItem, groups *sync.Map) (events.Envelope, error) {
	env := events.Envelope{
		EventID: "state:" + s.ID + ":" + s.SK, SchemaVersion: events.SchemaVersion, Actor: "replay",
		Version: s.historyVersion(), OccurredAt: parse(s.UpdatedAt),
	}
	switch {
	case dynamo.IsMemberSK(s.SK):
		g, err := r.groupState(ctx, row, s.ID, groups)
		if err != nil {
			return env, err
		}
		g.Version = s.GroupVersion
		env.Kind, env.Key, env.OccurredAt = events.KindGroup, g.Key, parse(s.AddedAt)
		env.Payload = &events.GroupMemberAdded{Group: g, Username: s.MemberID, UserID: s.UserID, MembershipRev: s.MembershipRev}
	case s.Type == "user":
		u := events.User{ID: s.UserID, Username: s.Username, Email: s.Email, FirstName: s.FirstName, LastName: s.LastName,
			IsActive: s.IsActive, Attributes: s.Attributes, Version: s.Version, CreatedAt: parse(s.CreatedAt),
			UpdatedAt: parse(s.UpdatedAt), Deleted: s.Deleted, DeletedMembershipRev: s.DeletedRev}
		env.Kind, env.Key = events.KindUser, s.Username
		env.Payload = &events.UserUpdated{User: u}
		if s.Deleted {
			env.Payload = &events.UserDeleted{User: u}
		}
	case s.Type == "group":
		g := groupOf(s)
		env.Kind, env.Key = events.KindGroup, s.Key
		env.Payload = &events.GroupUpdated{Group: g}
		if s.Deleted {
			env.Payload = &events.GroupDeleted{Group: g}
		}
	default:
		return env, fmt.Errorf("state item %s/%s has unknown type %q", s.ID, s.SK, s.Type)
	}
	env.Type = env.Payload.EventType()
	return env, nil
}

func groupOf(s stateItem) events.Group {
	return events.Group{ID: s.GroupID, Key: s.Key, Name: s.Name, Description: s.Description, Attributes: s.Attributes,
		Version: s.Version, CreatedAt: parse(s.CreatedAt), UpdatedAt: parse(s.UpdatedAt), Deleted: s.Deleted,
		LastDeletedVersion: s.LastDeleted}
}

func (r *Replayer) groupState(ctx context.Context, row dynamo.Tenant, id string, cache *sync.Map) (events.Group, error) {
	if g, ok := cache.Load(id); ok {
		return g.(events.Group), nil
	}
	out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(row.CommandsTable), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: dynamo.SKConfig}}})
	if err != nil {
		return events.Group{}, fmt.Errorf("read group %s: %w", id, err)
	}
	var s stateItem
	if err := attributevalue.UnmarshalMap(out.Item, &s); err != nil {
		return events.Group{}, fmt.Errorf("decode group %s: %w", id, err)
	}
	g := groupOf(s)
	cache.Store(id, g)
	return g, nil
}

func (r *Replayer) itemCount(ctx context.Context, table string) int64 {
	out, err := r.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil || out.Table == nil || out.Table.ItemCount == nil {
		return -1
	}
	return *out.Table.ItemCount
}
