package erasure

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/bounded"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/sdkerr"
	"github.com/ssodir/ssodir/internal/events"
)

// DefaultSettle is how long after its first pass an erasure sweeps the read side again:
// longer than the filter's TTL (DefaultFilterTTL) plus the time a record takes from its
// filter check to its write, so that a record of the erased user read before the erasure
// and applied after the first pass is swept by the second (docs/erasure.md).
const DefaultSettle = 30 * time.Second

// Consumers are the stream consumers whose dead letters an erasure visits.
var Consumers = []string{"projector", "keycloak-sync"}

// TenantRows reads tenant rows.
type TenantRows interface {
	Get(ctx context.Context, system, tenant string) (dynamo.Tenant, error)
}

// Options configure an Eraser.
type Options struct {
	// Settle is the wait between the two passes (0: DefaultSettle).
	Settle time.Duration
	// Filter, when set, forgets a tenant's cached ids as soon as an erasure adds some.
	Filter *Filter
	// Budget bounds the work of one call of Step (0: DefaultBudget); Margin is the time a
	// call keeps before its context's deadline (0: DefaultMargin). See progress.go.
	Budget, Margin time.Duration
	Log            *zap.Logger
	Now            func() time.Time
}

// Eraser carries erasures out: the projector runs it on each user.erased record, and the
// re-application of the ledger to restored tables runs its passes at once.
type Eraser struct {
	db      DB
	names   dynamo.Names
	tenants TenantRows
	ledger  *Ledger
	reg     *events.Registry
	opts    Options
	// shared names restored copies of the stage's shared tables to sweep instead of the
	// stage's own (Reapply); empty: the stage's.
	shared SharedTables
	// feedByIDs: the change feed is swept by the erased ids alone, before the passes
	// (Reapply: a later user may hold the name, and their changes name it too).
	feedByIDs bool
}

// NewEraser is an Eraser over the tables named by names.
func NewEraser(db DB, names dynamo.Names, tenants TenantRows, reg *events.Registry, opts Options) *Eraser {
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	if opts.Log == nil {
		opts.Log = zap.NewNop()
	}
	if opts.Budget <= 0 {
		opts.Budget = DefaultBudget
	}
	if opts.Margin <= 0 {
		opts.Margin = DefaultMargin
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := NewLedger(db, names)
	l.now = opts.Now
	return &Eraser{db: db, names: names, tenants: tenants, ledger: l, reg: reg, opts: opts}
}

// Ledger is the eraser's ledger.
func (x *Eraser) Ledger() *Ledger { return x.ledger }

// Step does what is due of the erasure a user.erased record asks for: the first pass
// (everything), or, once Settle has passed since it, the second (the read side again,
// then the write model's tombstone). again is when to call it again (zero: nothing left
// for this process; the Keycloak sync completes its own place). A call does bounded work
// (progress.go): one that stops at its soft deadline keeps its position and answers
// again = now.
// Two calls never work on one erasure at once: each first takes the erasure's lease
// (lease.go); one that does not get it answers again = when the holder's runs out.
func (x *Eraser) Step(ctx context.Context, system, tenant string, e *events.UserErased) (again time.Time, err error) {
	bctx := x.bounded(ctx)
	until := bounded.Deadline(bctx).Add(leaseSlack)
	owner := leaseOwner()
	held, holder, err := x.ledger.takeLease(ctx, system, tenant, e.ErasureID, owner, time.Now(), until)
	if err != nil {
		return time.Time{}, err
	}
	if !held {
		x.opts.Log.Info("erasure: another call holds its lease", zap.String("tenant", system+"/"+tenant), zap.String("erasure_id", e.ErasureID))
		return holder, nil
	}
	defer func() {
		if gerr := x.ledger.giveBackLease(context.WithoutCancel(ctx), system, tenant, e.ErasureID, owner); gerr != nil && err == nil {
			err = gerr
		}
	}()
	// Nothing of this call goes out after its lease has run out.
	lctx, cancel := context.WithDeadline(bctx, until)
	defer cancel()
	again, err = x.step(lctx, system, tenant, e)
	if errors.Is(err, errOutOfTime) {
		return x.opts.Now(), nil
	}
	return again, err
}

func (x *Eraser) step(ctx context.Context, system, tenant string, e *events.UserErased) (again time.Time, err error) {
	entry, err := x.ledger.Get(ctx, system, tenant, e.ErasureID)
	if err != nil {
		return time.Time{}, err
	}
	if entry.Places[commands.PlaceWriteModel] == dynamo.ErasureStatusDone {
		return time.Time{}, nil
	}
	row, err := x.tenants.Get(ctx, system, tenant)
	if err != nil {
		return time.Time{}, err
	}
	username := e.User.Username
	// The ledger says which incarnations the request asked for: a call resumed without the
	// record (resume.go) has only the pointer's content, which does not.
	all := e.AllIncarnations || entry.AllIncarnations
	if entry.SweptAt == "" {
		if entry.Progress.Phase == phaseStart {
			// Where the resume task finds the erasure (resume.go), before any work.
			if err := x.remember(ctx, row, e); err != nil {
				return time.Time{}, err
			}
		}
		subj := NewSubject(username, e.PreviousID)
		subj.IDOnly = !all
		p := &pass{prog: entry.Progress, save: func(ctx context.Context, p Progress) error {
			return x.ledger.SaveProgress(ctx, system, tenant, e.ErasureID, p)
		}}
		groups, err := x.firstPassFrom(ctx, row, subj, e.ErasureID, append(slices.Clone(e.Groups), entry.PendingGroups...), true, p)
		if err != nil {
			return time.Time{}, err
		}
		now := x.opts.Now()
		if err := x.ledger.Swept(ctx, system, tenant, e.ErasureID, now, groups); err != nil {
			return time.Time{}, err
		}
		x.opts.Log.Info("erasure: first pass done", zap.String("tenant", system+"/"+tenant), zap.String("erasure_id", e.ErasureID))
		return now.Add(x.opts.Settle), nil
	}
	swept, err := dynamo.ParseTime(entry.SweptAt)
	if err != nil {
		return time.Time{}, fmt.Errorf("erasure %s: swept_at: %w", e.ErasureID, err)
	}
	if due := swept.Add(x.opts.Settle); x.opts.Now().Before(due) {
		return due, nil
	}
	subj := NewSubject(username, e.PreviousID)
	subj.IDOnly = !all
	subj.AddIDHashes(entry.IDHashes...)
	if subj.Former, err = x.keptFormer(ctx, row, e.ErasureID); err != nil {
		return time.Time{}, err
	}
	if err := x.SecondPass(ctx, row, subj, e.ErasureID, entry.PendingGroups); err != nil {
		return time.Time{}, err
	}
	if err := x.forgetPointer(ctx, row, e.ErasureID); err != nil {
		return time.Time{}, err
	}
	x.opts.Log.Info("erasure: second pass done", zap.String("tenant", system+"/"+tenant), zap.String("erasure_id", e.ErasureID))
	return time.Time{}, nil
}

// FirstPass erases the subject from every table but the write model's `config`
// tombstone, which holds the name until the second pass: it returns the keys of the
// groups it found the person in. It adds the ids it finds to the ledger.
func (x *Eraser) FirstPass(ctx context.Context, row dynamo.Tenant, subj *Subject, erasureID string, groups []string) ([]string, error) {
	return x.firstPass(ctx, row, subj, erasureID, groups, true)
}

// firstPass is FirstPass; shared says whether the tables every tenant shares
// (Idempotency-Key records, dead letters, sync status) are swept too. It runs every phase
// at once.
func (x *Eraser) firstPass(ctx context.Context, row dynamo.Tenant, subj *Subject, erasureID string, groups []string, shared bool) ([]string, error) {
	return x.firstPassFrom(ctx, row, subj, erasureID, groups, shared, &pass{})
}

// firstPassFrom is the first pass from p's position, phase by phase (progress.go); each
// call reads the user's partition again (its history is the subject's ids and values),
// which goes last: the items that read found, without reading them again.
func (x *Eraser) firstPassFrom(ctx context.Context, row dynamo.Tenant, subj *Subject, erasureID string, groups []string, shared bool, p *pass) ([]string, error) {
	found := map[string]bool{}
	for _, g := range groups {
		found[g] = true
	}
	emails, exts, sks, err := x.readUserPartition(ctx, row.CommandsTable, subj, found)
	if err != nil {
		return nil, err
	}
	if p.save != nil && len(subj.Former) > 0 && !p.at(phasePartition) {
		// For the second pass, which no longer has the partition (formerpass.go).
		if err := x.keepFormer(ctx, row, erasureID, subj.Former); err != nil {
			return nil, err
		}
	}
	if p.at(phaseStart) {
		if err := x.ledger.AddIDHashes(ctx, row.SystemID, row.TenantID, erasureID, subj.IDHashes()); err != nil {
			return nil, err
		}
		if err := x.ledger.IndexIDHashes(ctx, row.SystemID, row.TenantID, erasureID, subj.IDHashes()); err != nil {
			return nil, err
		}
		if x.opts.Filter != nil {
			x.opts.Filter.Forget(row.SystemID, row.TenantID)
		}
		if err := p.next(ctx, phaseGroups); err != nil {
			return nil, err
		}
	}
	if p.at(phaseGroups) {
		if err := x.rewriteGroups(ctx, row, erasureID, subj, found, p); err != nil {
			return nil, err
		}
		if err := x.deleteGuardsAndLookups(ctx, row.CommandsTable, subj, emails, exts); err != nil {
			return nil, err
		}
		if err := x.markDone(ctx, row, erasureID); err != nil {
			return nil, err
		}
		if err := x.nextPhase(ctx, p, phaseReadSide); err != nil {
			return nil, err
		}
	}
	if p.at(phaseReadSide) {
		if err := x.sweepReadSide(ctx, row, subj, found); err != nil {
			return nil, err
		}
		if err := x.keepAsOfLives(ctx, row, subj, erasureID); err != nil {
			return nil, err
		}
		if err := x.eraseFormerNames(ctx, row, subj, found); err != nil {
			return nil, err
		}
		if err := x.eraseChangeFeed(ctx, row, subj); err != nil {
			return nil, err
		}
		next := phaseIdempotency
		if !shared {
			next = phasePartition
		}
		if err := x.nextPhase(ctx, p, next); err != nil {
			return nil, err
		}
	}
	if p.at(phaseIdempotency) {
		if err := x.sweepIdempotency(ctx, row, subj, p); err != nil {
			return nil, err
		}
		if err := x.ledger.MarkDone(ctx, row.SystemID, row.TenantID, erasureID, commands.PlaceIdempotency); err != nil {
			return nil, err
		}
		if err := x.nextPhase(ctx, p, phaseShared); err != nil {
			return nil, err
		}
	}
	if p.at(phaseShared) {
		if err := x.sweepDeadLetters(ctx, row, subj); err != nil {
			return nil, err
		}
		if err := x.scrubSyncStatus(ctx, row, subj); err != nil {
			return nil, err
		}
		if err := x.ledger.MarkDone(ctx, row.SystemID, row.TenantID, erasureID, commands.PlaceSyncStatus); err != nil {
			return nil, err
		}
		if err := x.nextPhase(ctx, p, phasePartition); err != nil {
			return nil, err
		}
	}
	if p.at(phasePartition) {
		if err := x.deleteMemberIndex(ctx, row.CommandsTable, subj); err != nil {
			return nil, err
		}
		// The items this call read at its start: the name is refused meanwhile, so
		// nothing of anyone else is written there; what the person's own late writers
		// put there since (a group pointer) goes with the second pass's release of the
		// name, which reads the partition again.
		id := s(dynamo.UserID(subj.Username))
		var keys []map[string]types.AttributeValue
		for _, sk := range sks {
			if subj.erasedWriteItem(sk) {
				keys = append(keys, map[string]types.AttributeValue{"id": id, "sk": s(sk)})
			}
		}
		if err := x.batchDelete(ctx, row.CommandsTable, keys); err != nil {
			return nil, err
		}
	}
	return sortedKeys(found), nil
}

// nextPhase keeps the pass at phase; a call past its soft deadline stops there.
func (x *Eraser) nextPhase(ctx context.Context, p *pass, phase string) error {
	if err := p.next(ctx, phase); err != nil {
		return err
	}
	if bounded.Passed(ctx) {
		return errOutOfTime
	}
	return nil
}

// markDone is a hook for places done mid-pass (none yet: each is marked when its last
// sweep is).
func (x *Eraser) markDone(context.Context, dynamo.Tenant, string) error { return nil }

func addAll(set map[string]bool, keys []string) {
	for _, k := range keys {
		set[k] = true
	}
}

// rewriteGroups finds the group history records that name the person (rewritten: an
// erased member) and the memberships of the person (deleted): by the member index
// (memberindex.go) when the tenant's write table is marked as indexed, else by a Scan of
// the tenant's write table (a tenant from before the index), segment by segment
// (progress.go): the costs docs/erasure.md states. The groups each segment finds are
// kept in the ledger for the calls after it.
func (x *Eraser) rewriteGroups(ctx context.Context, row dynamo.Tenant, erasureID string, subj *Subject, groups map[string]bool, p *pass) error {
	table := row.CommandsTable
	if indexed, err := x.memberIndexed(ctx, table); err != nil {
		return err
	} else if indexed {
		return x.rewriteIndexedGroups(ctx, row, erasureID, subj, groups, p)
	}
	named := "contains(#d, :q)"
	vals := map[string]types.AttributeValue{
		":g": s("group#"), ":h": s("config#"), ":q": s(`"` + subj.Username + `"`), ":m": s(dynamo.MemberSK(subj.Username)),
	}
	for i, f := range subj.Former {
		// Records from before a rename name the old username (with the same id).
		n := fmt.Sprintf(":q%d", i)
		named += " OR contains(#d, " + n + ")"
		vals[n] = s(`"` + f.Username + `"`)
	}
	in := &dynamodb.ScanInput{
		TableName:                 aws.String(table),
		FilterExpression:          aws.String("(begins_with(id, :g) AND begins_with(sk, :h) AND (" + named + ")) OR sk = :m"),
		ExpressionAttributeNames:  map[string]string{"#d": "data"},
		ExpressionAttributeValues: vals,
		ConsistentRead:            aws.Bool(true),
	}
	var memberships []map[string]types.AttributeValue
	seen := map[string]bool{}
	page := func(items []map[string]types.AttributeValue) error {
		for _, it := range items {
			id, sk := attrS(it, "id"), attrS(it, "sk")
			g := strings.TrimPrefix(id, "group#")
			groups[g], seen[g] = true, true
			if sk == dynamo.MemberSK(subj.Username) {
				memberships = append(memberships, map[string]types.AttributeValue{"id": s(id), "sk": s(sk)})
				continue
			}
			if _, err := x.rewriteRecord(ctx, table, it, subj); err != nil {
				return err
			}
		}
		return nil
	}
	done := func() error {
		if err := x.batchDelete(bounded.WithDeadline(ctx, time.Time{}), table, memberships); err != nil {
			return err
		}
		memberships = memberships[:0]
		if p.save != nil && len(seen) > 0 {
			if err := x.ledger.AddGroups(ctx, row.SystemID, row.TenantID, erasureID, sortedKeys(seen)); err != nil {
				return err
			}
		}
		clear(seen)
		return nil
	}
	return x.scanSegments(ctx, p, in, page, done)
}

// deleteGuardsAndLookups removes the email guards still held by the username, and the
// lookup items of every incarnation.
func (x *Eraser) deleteGuardsAndLookups(ctx context.Context, table string, subj *Subject, emails, exts map[string]bool) error {
	for e := range emails {
		_, err := x.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(table), Key: dynamo.EmailGuardKey(e),
			ConditionExpression:       aws.String("username = :u"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":u": s(subj.Username)},
		})
		if err != nil && !sdkerr.ConditionFailed(err) {
			return fmt.Errorf("delete an email guard: %w", dynamo.Translate(err))
		}
	}
	var keys []map[string]types.AttributeValue
	for id := range subj.IDs {
		keys = append(keys, dynamo.LookupKey(events.KindUser, commands.LookupByID, id, id))
		for ext := range exts {
			keys = append(keys, dynamo.LookupKey(events.KindUser, commands.LookupByExternalID, ext, id))
		}
	}
	return x.batchDelete(ctx, table, keys)
}

// query pages through one partition, consistently.
func (x *Eraser) query(ctx context.Context, table, pkName, pk string, fn func(map[string]types.AttributeValue) error) error {
	return x.queryAttrs(ctx, table, pkName, pk, nil, fn)
}

// queryKeys pages through one partition's keys (pkName and `sk`) only, consistently.
func (x *Eraser) queryKeys(ctx context.Context, table, pkName, pk string, fn func(map[string]types.AttributeValue) error) error {
	return x.queryAttrs(ctx, table, pkName, pk, []string{"sk"}, fn)
}

// queryAttrs pages through one partition, consistently; attrs, when given, are the
// attributes read besides the partition key (a projection: less to read and decode).
func (x *Eraser) queryAttrs(ctx context.Context, table, pkName, pk string, attrs []string, fn func(map[string]types.AttributeValue) error) error {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(table),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": pkName},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": s(pk)},
		ConsistentRead:            aws.Bool(true),
	}
	if len(attrs) > 0 {
		proj := []string{"#pk"}
		for i, a := range attrs {
			n := fmt.Sprintf("#a%d", i)
			in.ExpressionAttributeNames[n] = a
			proj = append(proj, n)
		}
		in.ProjectionExpression = aws.String(strings.Join(proj, ", "))
	}
	for {
		page, err := x.db.Query(ctx, in)
		if err != nil {
			return fmt.Errorf("read %s: %w", table, errors.Join(dynamo.Translate(err), missingErr(err)))
		}
		for _, it := range page.Items {
			if err := fn(it); err != nil {
				return err
			}
		}
		if len(page.LastEvaluatedKey) == 0 {
			return nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// deletePartition deletes the items of one partition whose sort key keep says.
func (x *Eraser) deletePartition(ctx context.Context, table, pkName, pk string, del func(sk string) bool) error {
	skName := "sk"
	var keys []map[string]types.AttributeValue
	err := x.queryKeys(ctx, table, pkName, pk, func(it map[string]types.AttributeValue) error {
		if del(attrS(it, skName)) {
			keys = append(keys, map[string]types.AttributeValue{pkName: it[pkName], skName: it[skName]})
		}
		return nil
	})
	if err != nil {
		return err
	}
	return x.batchDelete(ctx, table, keys)
}

// deleteWorkers is how many batches of deletes an erasure has in flight at once.
const deleteWorkers = 4

// batchDelete deletes keys in batches of 25, a few at once, until none is left
// unprocessed; past the call's soft deadline it starts no more batches after the first
// (errOutOfTime: the next call finds the rest).
func (x *Eraser) batchDelete(ctx context.Context, table string, keys []map[string]types.AttributeValue) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(deleteWorkers)
	first, stopped := true, false
	for chunk := range slices.Chunk(keys, 25) {
		if !first && bounded.Passed(ctx) {
			stopped = true
			break
		}
		first = false
		g.Go(func() error { return x.deleteBatch(gctx, table, chunk) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if stopped {
		return errOutOfTime
	}
	return nil
}

// deleteBatch deletes one batch of keys, retrying what is unprocessed.
func (x *Eraser) deleteBatch(ctx context.Context, table string, chunk []map[string]types.AttributeValue) error {
	reqs := make([]types.WriteRequest, 0, len(chunk))
	for _, k := range chunk {
		reqs = append(reqs, types.WriteRequest{DeleteRequest: &types.DeleteRequest{Key: k}})
	}
	pending := map[string][]types.WriteRequest{table: reqs}
	for attempt := 0; len(pending[table]) > 0; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(min(attempt, 10)) * 50 * time.Millisecond):
			}
		}
		out, err := x.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
		if err != nil {
			return fmt.Errorf("delete from %s: %w", table, errors.Join(dynamo.Translate(err), missingErr(err)))
		}
		pending = out.UnprocessedItems
	}
	return nil
}

// errMissing marks an error of a table that is not there (a generation a replay dropped).
var errMissing = errors.New("table missing")

func missingErr(err error) error {
	if sdkerr.ResourceNotFound(err) {
		return errMissing
	}
	return nil
}

func missing(err error) bool {
	return err != nil && (errors.Is(err, errMissing) || sdkerr.ResourceNotFound(err))
}
