package projector

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/projections"
)

// verifyRounds and verifyPause bound how long a difference may last: commands keep
// arriving during a replay, and the live projector needs a moment to bring the new tables
// up to a state item read a moment ago.
const (
	verifyRounds = 10
	verifyPause  = time.Second
)

// readState is what the new read table holds for one key.
type readState struct {
	Version   int64  `dynamodbav:"version"`
	IsDeleted bool   `dynamodbav:"is_deleted"`
	MemberID  string `dynamodbav:"member_id"`
}

// check is one comparison between the command log and the new tables.
type check struct {
	key  map[string]types.AttributeValue
	want func(found bool, r readState) bool
	desc string
}

// verify compares every aggregate and live membership of the command log with the new
// read table, and every live membership of the read table with the log.
func (r *Replayer) verify(ctx context.Context, row dynamo.Tenant, next projections.Tables, rep *ReplayReport, opts ReplayOptions) error {
	var users, groups, members atomic.Int64
	var checks []check
	err := r.scanAll(ctx, row.CommandsTable, stateFilter, func(items []map[string]types.AttributeValue) error {
		var states []stateItem
		if err := attributevalue.UnmarshalListOfMaps(items, &states); err != nil {
			return fmt.Errorf("decode state items: %w", err)
		}
		for _, s := range states {
			key := map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: s.ID}, "sk": &types.AttributeValueMemberS{Value: s.SK}}
			switch {
			case dynamo.IsMemberSK(s.SK):
				members.Add(1)
				v := s.GroupVersion
				checks = append(checks, check{key: key, desc: "membership " + s.ID + " " + s.SK,
					want: func(found bool, rs readState) bool {
						return found && (rs.Version > v || (rs.Version == v && !rs.IsDeleted))
					}})
			default:
				if !s.Deleted {
					if s.Type == "user" {
						users.Add(1)
					} else {
						groups.Add(1)
					}
				}
				v, deleted := s.Version, s.Deleted
				checks = append(checks, check{key: key, desc: s.ID,
					want: func(found bool, rs readState) bool {
						return found && (rs.Version > v || (rs.Version == v && rs.IsDeleted == deleted))
					}})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	rep.Users, rep.Groups, rep.Memberships = users.Load(), groups.Load(), members.Load()
	// The reverse direction: a live membership in the new table must be in the log.
	err = r.scanAll(ctx, next.Users, dynamodb.ScanInput{FilterExpression: aws.String("attribute_exists(member_id)")}, func(items []map[string]types.AttributeValue) error {
		for _, it := range items {
			id, sk := dynamo.StringAttr(it, "id"), dynamo.StringAttr(it, "sk")
			checks = append(checks, check{key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: id}, "sk": &types.AttributeValueMemberS{Value: sk}},
				desc: "live membership " + id + " " + sk + " of the new table", want: nil})
		}
		return nil
	})
	if err != nil {
		return err
	}
	rep.Checked = int64(len(checks))
	if opts.Progress != nil {
		opts.Progress.Start("verify", int64(len(checks)))
		defer opts.Progress.Finish()
	}
	pending := checks
	for round := 0; round < verifyRounds && len(pending) > 0; round++ {
		if round > 0 {
			if err := sleep(ctx, verifyPause); err != nil {
				return err
			}
		}
		var failed []check
		for start := 0; start < len(pending); start += 100 {
			chunk := pending[start:min(start+100, len(pending))]
			bad, err := r.runChecks(ctx, row.CommandsTable, next.Users, chunk)
			if err != nil {
				return err
			}
			failed = append(failed, bad...)
			if opts.Progress != nil && round == 0 {
				opts.Progress.Add(len(chunk))
			}
		}
		pending = failed
	}
	for _, c := range pending {
		rep.Mismatches = append(rep.Mismatches, c.desc)
	}
	if len(pending) > 0 {
		return fmt.Errorf("verification failed: %d of %d checks differ (first: %s); the tenant was not switched", len(pending), len(checks), pending[0].desc)
	}
	return nil
}

// runChecks evaluates checks; reverse checks (want nil) look the key up in the log.
func (r *Replayer) runChecks(ctx context.Context, logTable, readTable string, checks []check) ([]check, error) {
	var forward, reverse []check
	for _, c := range checks {
		if c.want == nil {
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
		if !c.want(it != nil, rs) {
			failed = append(failed, c)
		}
	}
	inLog, err := r.batchGet(ctx, logTable, reverse)
	if err != nil {
		return nil, err
	}
	stillLive, err := r.batchGet(ctx, readTable, reverse)
	if err != nil {
		return nil, err
	}
	for i, c := range reverse {
		if inLog[i] == nil && stillLive[i] != nil && dynamo.StringAttr(stillLive[i], "member_id") != "" {
			failed = append(failed, c)
		}
	}
	return failed, nil
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
		k := keyOf(c.key)
		if _, dup := idx[k]; !dup {
			keys = append(keys, c.key)
		}
		idx[k] = append(idx[k], i)
	}
	req := map[string]types.KeysAndAttributes{table: {Keys: keys, ConsistentRead: aws.Bool(true)}}
	for attempt := 0; len(req) > 0; attempt++ {
		res, err := r.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
		if err != nil {
			return nil, fmt.Errorf("verify against %s: %w", table, err)
		}
		for _, it := range res.Responses[table] {
			for _, i := range idx[keyOf(it)] {
				out[i] = it
			}
		}
		req = res.UnprocessedKeys
		if len(req) > 0 {
			if err := sleep(ctx, time.Duration(20<<min(attempt, 5))*time.Millisecond); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// scanAll pages through a table (replay tooling, not a list endpoint).
func (r *Replayer) scanAll(ctx context.Context, table string, in dynamodb.ScanInput, fn func([]map[string]types.AttributeValue) error) error {
	in.TableName = aws.String(table)
	in.ConsistentRead = aws.Bool(true)
	p := dynamodb.NewScanPaginator(r.db, &in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("scan %s: %w", table, err)
		}
		if err := fn(page.Items); err != nil {
			return err
		}
	}
	return nil
}

// switchTo points the tenant's readers at the new tables and ends the replay.
func (r *Replayer) switchTo(ctx context.Context, system, tenant string, next projections.Tables, gen int) error {
	_, err := r.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(r.names.Config()),
		Key:       r.configKey(system, tenant),
		UpdateExpression: aws.String("SET users_table = :u, activities_table = :a, generation = :g, updated_at = :now " +
			"REMOVE next_users_table, next_activities_table, replay_cursors, replay_needed, replay_reason ADD row_version :one"),
		ConditionExpression: aws.String("next_users_table = :u"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":u": &types.AttributeValueMemberS{Value: next.Users}, ":a": &types.AttributeValueMemberS{Value: next.Activities},
			":g": &types.AttributeValueMemberN{Value: fmt.Sprint(gen)}, ":now": &types.AttributeValueMemberS{Value: dynamo.FormatTime(time.Now())},
			":one": &types.AttributeValueMemberN{Value: "1"},
		},
	})
	if err != nil {
		return fmt.Errorf("switch %s/%s to the new tables: %w", system, tenant, err)
	}
	return nil
}

// dryRun counts what a replay would read and build, writing nothing.
func (r *Replayer) dryRun(ctx context.Context, row dynamo.Tenant, next projections.Tables, rep *ReplayReport, opts ReplayOptions) error {
	var history, users, groups, members int64
	err := r.scanAll(ctx, row.CommandsTable, dynamodb.ScanInput{ProjectionExpression: aws.String("id, sk, #t, deleted"),
		ExpressionAttributeNames: map[string]string{"#t": "type"}}, func(items []map[string]types.AttributeValue) error {
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
