package e2e

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/erasure/erasuretest"
	"github.com/ssodir/ssodir/internal/esm/esmtest"
)

// seededMark is the attribute of the items the test writes straight into the write
// table: their stream records are not delivered (an erasure's bound is not about
// projecting a seed).
const seededMark = "e2e_seeded"

// unseeded is fn's stream invoke without the records of seeded items (their new or old
// image carries the mark); a batch left empty is not delivered. count counts the
// invocations made.
func unseeded(fn func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error), count *atomic.Int64) esmtest.Invoke {
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		var keep []events.DynamoDBEventRecord
		for _, r := range ev.Records {
			_, n := r.Change.NewImage[seededMark]
			_, o := r.Change.OldImage[seededMark]
			if !n && !o {
				keep = append(keep, r)
			}
		}
		if len(keep) == 0 {
			return events.DynamoDBEventResponse{}, nil
		}
		if count != nil {
			count.Add(1)
		}
		return fn(ctx, events.DynamoDBEvent{Records: keep})
	}
}

// TestAnErasureOfALongHistoryFinishesInLambdaMode: in Lambda mode, with the projector's
// function timeout at 10 seconds, a user with 3,000 history records in a tenant of 20,000
// other items is erased — the user.erased record gets one bounded call and is
// acknowledged, the scheduled resume-erasures task carries the erasure on from the
// position kept in the ledger — within 20 invocations of the projector's function, and
// the name is free afterwards.
func TestAnErasureOfALongHistoryFinishesInLambdaMode(t *testing.T) {
	s := newLambdaStage(t)
	e := s.e
	proj := e.startFunction("projector", "AWS_LAMBDA_FUNCTION_TIMEOUT=10", "SSO_ERASURE_SETTLE=10s")
	sync := e.startFunction("keycloak-sync", "SSO_SECRET_KEY="+e.key)
	path := provision(t, s.command, "lam", "big")
	base := "http://" + s.command.addr + path

	ctx := context.Background()
	table := dynamo.Names{Prefix: e.prefix}.Commands("lam", "big")
	if _, err := erasuretest.Seed(ctx, e.db, table, erasuretest.Spec{Username: "erasee", History: 3000, Groups: 20, Others: 20000, Mark: seededMark}); err != nil {
		t.Fatal(err)
	}
	var invocations atomic.Int64
	pp := streamPlayer(t, e, "lam", "big", proj)
	pp.Invoke = unseeded(proj.stream, &invocations)
	playUntilCleanup(t, pp, "projector")
	sp := streamPlayer(t, e, "lam", "big", sync)
	sp.Invoke = unseeded(sync.stream, nil)
	playUntilCleanup(t, sp, "keycloak-sync")

	r := call(t, "POST", base+"/users/erasee/erase", map[string]any{"reason": "GDPR art. 17 request, ticket 5120"})
	mustStatus(t, r, 202)
	loc := r.header.Get("Location")
	if !strings.Contains(loc, "/erasures/") {
		t.Fatalf("Location %q", loc)
	}
	// The record's delivery first, then the schedule's runs (the test plays the schedule
	// as often as it likes; Lambda's runs it every minute).
	eventually(t, 2*time.Minute, "the user.erased record delivered", func() (bool, string) {
		return invocations.Load() > 0, "no invocation yet"
	})
	var status erasure.Entry
	for {
		q := call(t, "GET", "http://"+s.query.addr+loc, nil)
		mustStatus(t, q, 200)
		q.json(t, &status)
		if status.Status == "done" {
			break
		}
		if n := invocations.Load(); n >= 20 {
			t.Fatalf("after %d invocations of the projector the erasure is %s", n, q.body)
		}
		// Lambda's schedule comes every minute, far apart from any lease a run holds (at
		// most its function's timeout and a slack): the test plays it more often, so it
		// waits first until no run holds the erasure's lease, as a minute apart would.
		waitForNoLease(t, e, "lam", "big", status.ErasureID)
		invocations.Add(1)
		proj.task(t, "resume-erasures")
		// The second pass waits SSO_ERASURE_SETTLE after the first: a run in that wait
		// has nothing to do, so the schedule is played every few seconds only.
		time.Sleep(3 * time.Second)
	}
	t.Logf("done after %d invocations of the projector", invocations.Load())
	for p, st := range status.Places {
		if st != "done" {
			t.Errorf("place %s is %s", p, st)
		}
	}
	if f := pp.Failures(); len(f) > 0 {
		t.Errorf("records reached the failure destination: %+v", f)
	}
	// The name is free.
	mustStatus(t, call(t, "POST", base+"/users", map[string]any{"username": "erasee", "email": "new-erasee@example.org"}), 201)
}

// waitForNoLease waits until no call holds the erasure's lease (internal/erasure,
// lease.go: lease_until on its ledger entry, removed when given back).
func waitForNoLease(t *testing.T, e *env, system, tenant, id string) {
	t.Helper()
	table := dynamo.Names{Prefix: e.prefix}.Erasures()
	eventually(t, time.Minute, "the erasure's lease free", func() (bool, string) {
		out, err := e.db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{
				"tenant": &types.AttributeValueMemberS{Value: system + "/" + tenant}, "erasure_id": &types.AttributeValueMemberS{Value: id}}})
		if err != nil {
			return false, err.Error()
		}
		n, ok := out.Item["lease_until"].(*types.AttributeValueMemberN)
		if !ok {
			return true, ""
		}
		ms, _ := strconv.ParseInt(n.Value, 10, 64)
		return time.Now().After(time.UnixMilli(ms)), "held until " + time.UnixMilli(ms).UTC().Format(time.RFC3339)
	})
}
