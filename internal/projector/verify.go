package projector

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/projections"
)

// verifyRounds and verifyPause bound how long a difference may last: commands keep
// arriving during a replay, and the live projector needs a moment to bring the new tables
// up to a state item read a moment ago (on a busy machine, with idle shards read once a
// second, more than ten seconds).
const (
	verifyRounds = 30
	verifyPause  = time.Second
)

// readState is what the new read table holds for one key.
type readState struct {
	Version   int64  `dynamodbav:"version"`
	IsDeleted bool   `dynamodbav:"is_deleted"`
	MemberID  string `dynamodbav:"member_id"`
}

// check is one comparison between the command log and the new tables: forward, that a
// state item of the log (an aggregate's `config` or a live `member#`) is in the new
// read table at its version or a newer one; reverse, that a live membership of the new
// read table is in the log (or no longer live).
type check struct {
	id, sk  string
	version int64
	deleted bool
	reverse bool
}

func (c check) key() map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: c.id}, "sk": &types.AttributeValueMemberS{Value: c.sk}}
}

func (c check) String() string {
	switch {
	case c.reverse:
		return "live membership " + c.id + " " + c.sk + " of the new table"
	case dynamo.IsMemberSK(c.sk):
		return "membership " + c.id + " " + c.sk
	}
	return c.id
}

// holds is a forward check's verdict on what the new read table has.
func (c check) holds(found bool, rs readState) bool {
	if !found {
		return false
	}
	if dynamo.IsMemberSK(c.sk) {
		return rs.Version > c.version || (rs.Version == c.version && !rs.IsDeleted)
	}
	return rs.Version > c.version || (rs.Version == c.version && rs.IsDeleted == c.deleted)
}

// checklist gathers checks from concurrent scans, with the log's counts.
type checklist struct {
	mu                     sync.Mutex
	checks                 []check
	users, groups, members int64
}

func (l *checklist) addStates(states []stateItem) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range states {
		switch {
		case dynamo.IsMemberSK(s.SK):
			l.members++
			l.checks = append(l.checks, check{id: s.ID, sk: s.SK, version: s.GroupVersion})
			continue
		case s.Deleted:
		case s.Type == "user":
			l.users++
		default:
			l.groups++
		}
		l.checks = append(l.checks, check{id: s.ID, sk: s.SK, version: s.Version, deleted: s.Deleted})
	}
}

func (l *checklist) addLive(items []map[string]types.AttributeValue) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, it := range items {
		l.checks = append(l.checks, check{id: dynamo.StringAttr(it, "id"), sk: dynamo.StringAttr(it, "sk"), reverse: true})
	}
}

// verify compares every aggregate and live membership of the command log with the new
// read table, and every live membership of the read table with the log. The log's side
// is what the rebuild read (list), plus a scan of the segments an interrupted run had
// read before (rescan); the checks run workers at a time.
func (r *Replayer) verify(ctx context.Context, row dynamo.Tenant, next projections.Tables, rep *ReplayReport, opts ReplayOptions,
	list *checklist, segments int, rescan map[int]bool) error {
	if len(rescan) > 0 {
		skip := map[int]bool{}
		for seg := range segments {
			skip[seg] = !rescan[seg]
		}
		in := stateFilter
		in.TableName, in.ConsistentRead = aws.String(row.CommandsTable), aws.Bool(true)
		err := r.scan(ctx, in, segments, opts.Workers, skip, nil, func(_ context.Context, items []map[string]types.AttributeValue) error {
			var states []stateItem
			if err := attributevalue.UnmarshalListOfMaps(items, &states); err != nil {
				return fmt.Errorf("decode state items: %w", err)
			}
			list.addStates(states)
			return nil
		}, nil)
		if err != nil {
			return err
		}
	}
	live := dynamodb.ScanInput{FilterExpression: aws.String("attribute_exists(member_id)"), ProjectionExpression: aws.String("id, sk")}
	err := r.scanAll(ctx, next.Users, live, opts, func(_ context.Context, items []map[string]types.AttributeValue) error {
		list.addLive(items)
		return nil
	})
	if err != nil {
		return err
	}
	checks := list.checks
	rep.Users, rep.Groups, rep.Memberships, rep.Checked = list.users, list.groups, list.members, int64(len(checks))
	if opts.Progress != nil {
		opts.Progress.Start("verify", int64(len(checks)))
		defer opts.Progress.Finish()
	}
	pending := checks
	for round := 0; round < verifyRounds && len(pending) > 0; round++ {
		if round > 0 {
			if err := sleep(ctx, opts.verifyPause); err != nil {
				return err
			}
		}
		var (
			mu     sync.Mutex
			failed []check
		)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(opts.Workers)
		for chunk := range slices.Chunk(pending, 100) {
			g.Go(func() error {
				bad, err := r.runChecks(gctx, row, next.Users, chunk)
				if err != nil {
					return err
				}
				mu.Lock()
				failed = append(failed, bad...)
				mu.Unlock()
				if opts.Progress != nil && round == 0 {
					opts.Progress.Add(len(chunk))
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return err
		}
		pending = failed
		if len(pending) > 0 && round+1 < verifyRounds {
			if pending, err = r.refresh(ctx, row.CommandsTable, pending); err != nil {
				return err
			}
		}
	}
	for _, c := range pending {
		rep.Mismatches = append(rep.Mismatches, c.String())
	}
	if len(pending) > 0 {
		return fmt.Errorf("verification failed: %d of %d checks differ (first: %s); the tenant was not switched", len(pending), len(checks), pending[0])
	}
	return nil
}

// refresh brings failed forward checks up to the log as it is now: a state item read
// during the rebuild may have gone since (a membership removed by a later delete of its
// user, say, whose tombstone keeps the membership's version). A check whose item is gone
// from the log becomes a reverse check: the new table must not have it live. A check whose
// item is still there keeps its version: versions only grow, so the new table reaches it,
// whereas raising it to the log's newest version would chase an aggregate that changes
// faster than the live projector's lag and never converge while commands arrive.
func (r *Replayer) refresh(ctx context.Context, logTable string, failed []check) ([]check, error) {
	out := make([]check, 0, len(failed))
	var forward []check
	for _, c := range failed {
		if c.reverse {
			out = append(out, c)
		} else {
			forward = append(forward, c)
		}
	}
	for chunk := range slices.Chunk(forward, 100) {
		now, err := r.batchGet(ctx, logTable, chunk)
		if err != nil {
			return nil, err
		}
		for i, c := range chunk {
			if now[i] == nil {
				c = check{id: c.id, sk: c.sk, reverse: true}
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// runChecks evaluates checks; reverse checks ask the log whether the membership is there.
func (r *Replayer) runChecks(ctx context.Context, row dynamo.Tenant, readTable string, checks []check) ([]check, error) {
	var forward, reverse []check
	for _, c := range checks {
		if c.reverse {
			reverse = append(reverse, c)
		} else {
			forward = append(forward, c)
		}
	}
	var failed []check
	found, err := r.batchGet(ctx, readTable, forward)
	if err != nil {
		return nil, err
	}
	for i, c := range forward {
		it := found[i]
		var rs readState
		if it != nil {
			if err := attributevalue.UnmarshalMap(it, &rs); err != nil {
				return nil, err
			}
		}
		if !c.holds(it != nil, rs) {
			failed = append(failed, c)
		}
	}
	stillLive, err := r.batchGet(ctx, readTable, reverse)
	if err != nil {
		return nil, err
	}
	var live []check
	for i, c := range reverse {
		if stillLive[i] != nil && dynamo.StringAttr(stillLive[i], "member_id") != "" {
			live = append(live, c)
		}
	}
	inLog, err := r.logMembers(ctx, row, live)
	if err != nil {
		return nil, err
	}
	for _, c := range live {
		if !inLog[c.id+"\x00"+c.sk] {
			failed = append(failed, c)
		}
	}
	return failed, nil
}

// logMembers are those of the memberships checks name that the write model holds now, as
// the Keycloak sync reads it: a membership item of the group's current incarnation, or
// one a pending members change of the group decided (its writer has not written its
// items yet; the next command on the group does).
func (r *Replayer) logMembers(ctx context.Context, row dynamo.Tenant, checks []check) (map[string]bool, error) {
	out := map[string]bool{}
	byGroup := map[string][]string{}
	for _, c := range checks {
		byGroup[c.id] = append(byGroup[c.id], c.sk[len(dynamo.MemberSK("")):])
	}
	store := dynamo.NewCommandStore(r.db, r.names, r.registry, 0)
	t := commands.Tenant{System: row.SystemID, ID: row.TenantID}
	for id, users := range byGroup {
		ms, err := store.CurrentMemberships(ctx, t, id[len(dynamo.GroupID("")):], users)
		if err != nil {
			return nil, fmt.Errorf("verify: memberships of %s: %w", id, err)
		}
		for u := range ms {
			out[id+"\x00"+dynamo.MemberSK(u)] = true
		}
	}
	return out, nil
}

// batchGet reads the checks' keys (consistently), in order; nil where absent.
func (r *Replayer) batchGet(ctx context.Context, table string, checks []check) ([]map[string]types.AttributeValue, error) {
	out := make([]map[string]types.AttributeValue, len(checks))
	if len(checks) == 0 {
		return out, nil
	}
	idx := map[string][]int{}
	keys := make([]map[string]types.AttributeValue, 0, len(checks))
	for i, c := range checks {
		k := c.id + "\x00" + c.sk
		if _, dup := idx[k]; !dup {
			keys = append(keys, c.key())
		}
		idx[k] = append(idx[k], i)
	}
	items, err := r.batchGetKeys(ctx, table, keys, "")
	if err != nil {
		return nil, fmt.Errorf("verify: %w", err)
	}
	for _, it := range items {
		for _, i := range idx[keyOf(it)] {
			out[i] = it
		}
	}
	return out, nil
}

// switchTo points the tenant's readers at the new tables and ends the replay. It clears
// the tenant's replay_needed mark only when the mark is the one in row, the tenant as
// this run found it before its scan: a gap found while the scan ran may have lost records
// the scan had already passed, so its mark stays and asks for another replay. A resumed
// run cannot tell when a mark was recorded relative to the first run's scan, so it keeps
// any mark.
func (r *Replayer) switchTo(ctx context.Context, row dynamo.Tenant, next projections.Tables, gen int, resumed bool) error {
	if err := r.tenants.SwitchTables(ctx, row.SystemID, row.TenantID, next.Users, next.Activities, gen); err != nil {
		return err
	}
	if !row.ReplayNeeded || resumed || row.ReplayReason == "" {
		return nil
	}
	cleared, err := r.tenants.ClearReplayNeeded(ctx, row.SystemID, row.TenantID, next.Users, row.ReplayReason)
	if err != nil {
		return err
	}
	if !cleared {
		r.log.Warn("the tenant was marked for replay again while this replay ran: the mark stays, run another replay",
			zap.String("tenant", row.SystemID+"/"+row.TenantID))
	}
	return nil
}

// dryRun counts what a replay would read and build, writing nothing.
func (r *Replayer) dryRun(ctx context.Context, row dynamo.Tenant, next projections.Tables, rep *ReplayReport, opts ReplayOptions) error {
	var history, users, groups, members int64
	var mu sync.Mutex
	err := r.scanAll(ctx, row.CommandsTable, dynamodb.ScanInput{ProjectionExpression: aws.String("id, sk, #t, deleted"),
		ExpressionAttributeNames: map[string]string{"#t": "type"}}, opts, func(_ context.Context, items []map[string]types.AttributeValue) error {
		mu.Lock()
		defer mu.Unlock()
		for _, it := range items {
			sk := dynamo.StringAttr(it, "sk")
			switch {
			case dynamo.IsHistorySK(sk):
				history++
			case dynamo.IsMemberSK(sk):
				members++
			case sk == dynamo.SKConfig:
				if v, ok := it["deleted"].(*types.AttributeValueMemberBOOL); ok && v.Value {
					continue
				}
				if dynamo.StringAttr(it, "type") == "user" {
					users++
				} else {
					groups++
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	rep.HistoryRecords, rep.Users, rep.Groups, rep.Memberships = history, users, groups, members
	verb := "would create"
	if rep.Resumed {
		verb = "would resume"
	}
	fmt.Fprintf(opts.Out, "dry run: %s %s and %s for %s/%s\n", verb, next.Users, next.Activities, row.SystemID, row.TenantID)
	fmt.Fprintf(opts.Out, "  from %s: %d history records; %d live users, %d live groups, %d memberships\n",
		row.CommandsTable, history, users, groups, members)
	fmt.Fprintf(opts.Out, "  then verify them, switch readers from %s and %s", row.UsersTable, row.ActivitiesTable)
	if opts.DropOld {
		fmt.Fprintf(opts.Out, " and drop the old tables")
	}
	fmt.Fprintln(opts.Out)
	return nil
}

func keyOf(item map[string]types.AttributeValue) string {
	return dynamo.StringAttr(item, "id") + "\x00" + dynamo.StringAttr(item, "sk")
}
