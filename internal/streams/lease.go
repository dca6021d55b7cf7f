package streams

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// shardEnd is the checkpoint of a shard read to its end; its children may start.
const shardEnd = "SHARD_END"

const (
	shardKeyPrefix = "shard#"
	ownerKeyPrefix = "owner#"
)

// leaseRow is one shard's row: lineage, labels, lease and checkpoint.
type leaseRow struct {
	StreamARN  string
	ShardID    string
	Parent     string
	System     string
	Tenant     string
	Table      string
	Owner      string
	Token      string
	HandoverTo string
	// Checkpoint is "" (nothing applied), a sequence number, or shardEnd.
	Checkpoint string
}

func (r leaseRow) key() string          { return shardKey(r.StreamARN, r.ShardID) }
func (r leaseRow) finished() bool       { return r.Checkpoint == shardEnd }
func shardKey(arn, shard string) string { return shardKeyPrefix + arn + "#" + shard }

// ownerRow is a process's heartbeat: a counter it bumps every lease tick. Liveness is
// judged by whether the counter moves, measured on the observer's own clock, so clock
// skew between machines cannot make a live process look dead.
type ownerRow struct {
	ID        string
	Heartbeat int64
	// Asks counts the handovers peers asked of this owner: a change makes it read the
	// whole partition at once instead of at its next periodic read.
	Asks int64
	// Releases counts the shards this owner released or finished: a change makes its
	// peers read the partition, as there may be a shard to take.
	Releases int64
}

// leaseStore reads and writes the lease table for one consumer. Every write that acts on
// behalf of a lease is conditional on the row still naming this owner and lease token, so
// a process that was paused and lost its lease can never move a checkpoint back.
type leaseStore struct {
	db       DynamoDB
	table    string
	consumer string
	address  func() string // published in the heartbeat row; nil: nothing
}

func (s *leaseStore) key(k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		attrConsumer: &types.AttributeValueMemberS{Value: s.consumer},
		attrLeaseKey: &types.AttributeValueMemberS{Value: k},
	}
}

// load reads the consumer's whole partition with a consistent read.
func (s *leaseStore) load(ctx context.Context) ([]leaseRow, []ownerRow, error) {
	var leases []leaseRow
	var owners []ownerRow
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#c = :c"),
		ExpressionAttributeNames:  map[string]string{"#c": attrConsumer},
		ExpressionAttributeValues: map[string]types.AttributeValue{":c": str(s.consumer)},
		ConsistentRead:            aws.Bool(true),
	}
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("query leases of %s: %w", s.consumer, err)
		}
		for _, item := range page.Items {
			k := getS(item, attrLeaseKey)
			switch {
			case strings.HasPrefix(k, shardKeyPrefix):
				leases = append(leases, leaseRow{
					StreamARN: getS(item, attrStreamARN), ShardID: getS(item, attrShardID),
					Parent: getS(item, attrParent), System: getS(item, attrSystem),
					Tenant: getS(item, attrTenant), Table: getS(item, attrTable),
					Owner: getS(item, attrOwner), Token: getS(item, attrToken),
					HandoverTo: getS(item, attrHandover), Checkpoint: getS(item, attrCheckpoint),
				})
			case strings.HasPrefix(k, ownerKeyPrefix):
				owners = append(owners, decodeOwner(item))
			}
		}
	}
	return leases, owners, nil
}

func decodeOwner(item map[string]types.AttributeValue) ownerRow {
	hb, _ := strconv.ParseInt(getN(item, attrHeartbeat), 10, 64)
	asks, _ := strconv.ParseInt(getN(item, attrAsks), 10, 64)
	rel, _ := strconv.ParseInt(getN(item, attrReleases), 10, 64)
	return ownerRow{ID: getS(item, attrOwnerID), Heartbeat: hb, Asks: asks, Releases: rel}
}

// loadOwners reads only the heartbeat rows: a key-range Query whose cost grows with the
// number of processes, not with the number of shards.
func (s *leaseStore) loadOwners(ctx context.Context) ([]ownerRow, error) {
	var owners []ownerRow
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#c = :c AND begins_with(#k, :p)"),
		ExpressionAttributeNames: map[string]string{"#c": attrConsumer, "#k": attrLeaseKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":c": str(s.consumer), ":p": str(ownerKeyPrefix),
		},
		ConsistentRead: aws.Bool(true),
	}
	p := dynamodb.NewQueryPaginator(s.db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query owners of %s: %w", s.consumer, err)
		}
		for _, item := range page.Items {
			owners = append(owners, decodeOwner(item))
		}
	}
	return owners, nil
}

// OwnerAddresses lists the addresses the live processes of a consumer publish in their
// heartbeat rows (Config.Address), in no particular order. A process deletes its row when
// it stops and its peers delete the row of one that died; a row whose last heartbeat is
// older than staleAfter (by its own clock's time stamp) is left out too, for a process
// that died with no peer to clean up after it.
func OwnerAddresses(ctx context.Context, db DynamoDB, table, consumer string, staleAfter time.Duration) ([]string, error) {
	in := &dynamodb.QueryInput{
		TableName:                aws.String(table),
		KeyConditionExpression:   aws.String("#c = :c AND begins_with(#k, :p)"),
		ExpressionAttributeNames: map[string]string{"#c": attrConsumer, "#k": attrLeaseKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":c": str(consumer), ":p": str(ownerKeyPrefix),
		},
	}
	var out []string
	p := dynamodb.NewQueryPaginator(db, in)
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("query owners of %s: %w", consumer, err)
		}
		for _, item := range page.Items {
			addr := getS(item, attrAddress)
			at, err := time.Parse(time.RFC3339Nano, getS(item, attrBeatAt))
			if addr == "" || err != nil || time.Since(at) > staleAfter {
				continue
			}
			out = append(out, addr)
		}
	}
	return out, nil
}

// askOwner tells a holder that a handover was asked of it (see ownerRow.Asks).
func (s *leaseStore) askOwner(ctx context.Context, owner string) error {
	if err := s.bumpOwner(ctx, owner, attrAsks); err != nil {
		return fmt.Errorf("tell %s of a handover: %w", owner, err)
	}
	return nil
}

// noteRelease tells peers that owner released or finished a shard (ownerRow.Releases).
func (s *leaseStore) noteRelease(ctx context.Context, owner string) error {
	if err := s.bumpOwner(ctx, owner, attrReleases); err != nil {
		return fmt.Errorf("note a release of %s: %w", owner, err)
	}
	return nil
}

// bumpOwner adds one to a counter of an owner's heartbeat row, if the row exists.
func (s *leaseStore) bumpOwner(ctx context.Context, owner, attr string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(ownerKeyPrefix + owner),
		UpdateExpression:          aws.String("ADD #a :one"),
		ConditionExpression:       aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames:  map[string]string{"#a": attr, "#k": attrLeaseKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}},
	})
	if err != nil && !isConditionFailed(err) {
		return err
	}
	return nil
}

// createShard adds the row of a newly listed shard; a row that exists is left alone.
func (s *leaseStore) createShard(ctx context.Context, st Stream, shardID, parent string) error {
	item := s.key(shardKey(st.StreamARN, shardID))
	item[attrStreamARN] = str(st.StreamARN)
	item[attrShardID] = str(shardID)
	item[attrSystem] = str(st.System)
	item[attrTenant] = str(st.Tenant)
	item[attrTable] = str(st.Table)
	item[attrUpdatedAt] = str(nowString())
	if parent != "" {
		item[attrParent] = str(parent)
	}
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                aws.String(s.table),
		Item:                     item,
		ConditionExpression:      aws.String("attribute_not_exists(#k)"),
		ExpressionAttributeNames: map[string]string{"#k": attrLeaseKey},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("create lease row %s/%s: %w", st.StreamARN, shardID, err)
	}
	return nil
}

// deleteFinished removes the row of a finished shard that the stream no longer lists.
func (s *leaseStore) deleteFinished(ctx context.Context, arn, shardID string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(shardKey(arn, shardID)),
		ConditionExpression:       aws.String("#cp = :end"),
		ExpressionAttributeNames:  map[string]string{"#cp": attrCheckpoint},
		ExpressionAttributeValues: map[string]types.AttributeValue{":end": str(shardEnd)},
	})
	if err != nil && !isConditionFailed(err) {
		return fmt.Errorf("delete finished lease row %s/%s: %w", arn, shardID, err)
	}
	return nil
}

// acquire takes the lease of row for owner with a new token. The condition is what the
// row looked like when the decision was made: free, or held by a (dead) owner with a
// given token. It returns the row as written, errLeaseLost if someone else was quicker.
func (s *leaseStore) acquire(ctx context.Context, seen leaseRow, owner, token string) (leaseRow, error) {
	names := map[string]string{"#o": attrOwner, "#t": attrToken, "#h": attrHandover, "#u": attrUpdatedAt, "#cp": attrCheckpoint, "#k": attrLeaseKey}
	values := map[string]types.AttributeValue{":me": str(owner), ":tok": str(token), ":now": str(nowString()), ":end": str(shardEnd)}
	cond := "attribute_not_exists(#o)"
	if seen.Owner != "" {
		cond = "#o = :prev AND #t = :prevtok"
		values[":prev"] = str(seen.Owner)
		values[":prevtok"] = str(seen.Token)
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(s.table),
		Key:              s.key(seen.key()),
		UpdateExpression: aws.String("SET #o = :me, #t = :tok, #u = :now REMOVE #h"),
		// The row must exist: an update would otherwise create a row without lineage.
		ConditionExpression:       aws.String("attribute_exists(#k) AND (attribute_not_exists(#cp) OR #cp <> :end) AND (" + cond + ")"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
		ReturnValues:              types.ReturnValueAllNew,
	})
	if err != nil {
		if isConditionFailed(err) {
			return leaseRow{}, errLeaseLost
		}
		return leaseRow{}, fmt.Errorf("acquire lease %s/%s: %w", seen.StreamARN, seen.ShardID, err)
	}
	r := seen
	r.Owner, r.Token, r.HandoverTo = owner, token, ""
	r.Checkpoint = getS(out.Attributes, attrCheckpoint)
	return r, nil
}

// requestHandover asks the holder of row to let it go at its next lease tick, after
// finishing its in-flight records and checkpointing, so balancing never redelivers.
func (s *leaseStore) requestHandover(ctx context.Context, row leaseRow, to string) error {
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(s.table),
		Key:                      s.key(row.key()),
		UpdateExpression:         aws.String("SET #h = :to"),
		ConditionExpression:      aws.String("#o = :o AND #t = :t AND attribute_not_exists(#h)"),
		ExpressionAttributeNames: map[string]string{"#o": attrOwner, "#t": attrToken, "#h": attrHandover},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":to": str(to), ":o": str(row.Owner), ":t": str(row.Token),
		},
	})
	if err != nil {
		if isConditionFailed(err) {
			return errLeaseLost
		}
		return fmt.Errorf("request handover of %s/%s: %w", row.StreamARN, row.ShardID, err)
	}
	return nil
}

// leaseUpdate runs an update conditional on holding the lease.
func (s *leaseStore) leaseUpdate(ctx context.Context, arn, shardID, owner, token, update string,
	names map[string]string, values map[string]types.AttributeValue) error {
	names["#o"], names["#t"] = attrOwner, attrToken
	values[":me"], values[":tok"] = str(owner), str(token)
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(shardKey(arn, shardID)),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String("#o = :me AND #t = :tok"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		if isConditionFailed(err) {
			return errLeaseLost
		}
		return err
	}
	return nil
}

// checkpoint records that every record of the shard up to seq has been applied.
func (s *leaseStore) checkpoint(ctx context.Context, arn, shardID, owner, token, seq string) error {
	err := s.leaseUpdate(ctx, arn, shardID, owner, token, "SET #cp = :cp, #u = :now",
		map[string]string{"#cp": attrCheckpoint, "#u": attrUpdatedAt},
		map[string]types.AttributeValue{":cp": str(seq), ":now": str(nowString())})
	if err != nil && err != errLeaseLost {
		return fmt.Errorf("checkpoint %s/%s at %s: %w", arn, shardID, seq, err)
	}
	return err
}

// release writes the final checkpoint (if any) and gives the lease up, so another process
// can take the shard at once instead of waiting for the lease to run out.
func (s *leaseStore) release(ctx context.Context, arn, shardID, owner, token, seq string) error {
	names := map[string]string{"#h": attrHandover, "#u": attrUpdatedAt}
	values := map[string]types.AttributeValue{":now": str(nowString())}
	update := "SET #u = :now REMOVE #o, #t, #h"
	if seq != "" {
		names["#cp"] = attrCheckpoint
		values[":cp"] = str(seq)
		update = "SET #cp = :cp, #u = :now REMOVE #o, #t, #h"
	}
	err := s.leaseUpdate(ctx, arn, shardID, owner, token, update, names, values)
	if err != nil && err != errLeaseLost {
		return fmt.Errorf("release %s/%s: %w", arn, shardID, err)
	}
	return err
}

// markGap notes a gap on the row for operators, next to the checkpoint it happened after.
func (s *leaseStore) markGap(ctx context.Context, arn, shardID, owner, token, after string) error {
	if after == "" {
		after = "-"
	}
	err := s.leaseUpdate(ctx, arn, shardID, owner, token, "SET #g = :g, #ga = :now, #u = :now",
		map[string]string{"#g": attrGapAfter, "#ga": attrGapAt, "#u": attrUpdatedAt},
		map[string]types.AttributeValue{":g": str(after), ":now": str(nowString())})
	if err != nil && err != errLeaseLost {
		return fmt.Errorf("mark gap on %s/%s: %w", arn, shardID, err)
	}
	return err
}

// heartbeat bumps the owner's counter, creating its row on the first beat.
func (s *leaseStore) heartbeat(ctx context.Context, owner string) error {
	set := "SET #id = :id, #at = :now"
	names := map[string]string{"#id": attrOwnerID, "#at": attrBeatAt, "#hb": attrHeartbeat}
	values := map[string]types.AttributeValue{
		":id": str(owner), ":now": str(nowString()), ":one": &types.AttributeValueMemberN{Value: "1"},
	}
	if s.address != nil {
		if addr := s.address(); addr != "" {
			set += ", #addr = :addr"
			names["#addr"], values[":addr"] = attrAddress, str(addr)
		}
	}
	_, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       s.key(ownerKeyPrefix + owner),
		UpdateExpression:          aws.String(set + " ADD #hb :one"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		return fmt.Errorf("heartbeat of %s: %w", owner, err)
	}
	return nil
}

// deleteOwner removes an owner's heartbeat row: our own at shutdown (heartbeat < 0, no
// condition), or a dead owner's that still shows the heartbeat we saw standing still.
func (s *leaseStore) deleteOwner(ctx context.Context, owner string, heartbeat int64) error {
	in := &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: s.key(ownerKeyPrefix + owner)}
	if heartbeat >= 0 {
		in.ConditionExpression = aws.String("#hb = :hb")
		in.ExpressionAttributeNames = map[string]string{"#hb": attrHeartbeat}
		in.ExpressionAttributeValues = map[string]types.AttributeValue{
			":hb": &types.AttributeValueMemberN{Value: strconv.FormatInt(heartbeat, 10)},
		}
	}
	if _, err := s.db.DeleteItem(ctx, in); err != nil && !isConditionFailed(err) {
		return fmt.Errorf("delete owner row %s: %w", owner, err)
	}
	return nil
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func getS(item map[string]types.AttributeValue, k string) string {
	if v, ok := item[k].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func getN(item map[string]types.AttributeValue, k string) string {
	if v, ok := item[k].(*types.AttributeValueMemberN); ok {
		return v.Value
	}
	return ""
}

func nowString() string { return time.Now().UTC().Format(time.RFC3339Nano) }
