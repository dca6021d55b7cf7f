package erasure_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/erasure/erasuretest"
	"github.com/ssodir/ssodir/internal/events"
)

// gatedDB holds the first GetItem of its erasure's call (after the call took its lease)
// until released.
type gatedDB struct {
	erasure.DB
	once              sync.Once
	entered, released chan struct{}
}

func (g *gatedDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	g.once.Do(func() { close(g.entered); <-g.released })
	return g.DB.GetItem(ctx, in, o...)
}

// TestTwoRunnersNeverWorkOneErasureAtOnce: while one call of Step (a stream delivery)
// works on an erasure, another (the resume task) does nothing and answers when to come
// again; a lease left by a runner that died blocks others until it runs out, and no
// longer; the holder gives its lease back when its call ends.
func TestTwoRunnersNeverWorkOneErasureAtOnce(t *testing.T) {
	st := newStage(t)
	ctx := context.Background()
	row := st.tenant(t, "s", "l")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ev := st.erasee(t, row, erasuretest.Spec{Username: "leased", History: 20, Groups: 2, Others: 50, At: at}, "00000000-0000-0000-0000-0000000000b1")
	reg := events.NewRegistry()
	opts := erasure.Options{Settle: time.Hour}
	untouched := func(when string) {
		t.Helper()
		e, err := erasure.NewLedger(st.db, st.names).Get(ctx, row.SystemID, row.TenantID, ev.ErasureID)
		if err != nil {
			t.Fatal(err)
		}
		if e.Progress.Phase != "" || e.SweptAt != "" {
			t.Errorf("%s: the erasure moved on (phase %q, swept %q) while another runner held it", when, e.Progress.Phase, e.SweptAt)
		}
	}

	// A runner that died holding the lease: nobody works on the erasure until it runs out.
	ledger := erasure.NewLedger(st.db, st.names)
	until := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	if ok, _, err := ledger.TakeLease(ctx, row.SystemID, row.TenantID, ev.ErasureID, "dead", until); err != nil || !ok {
		t.Fatalf("take the lease: %v %v", ok, err)
	}
	again, err := erasure.NewEraser(st.db, st.names, st.tenants, reg, opts).Step(ctx, row.SystemID, row.TenantID, ev)
	if err != nil || !again.Equal(until) {
		t.Errorf("a call beside a held lease: again %v, err %v; want again at the lease's end %v", again, err, until)
	}
	untouched("beside a dead runner's lease")
	if ok, _, err := ledger.TakeLease(ctx, row.SystemID, row.TenantID, ev.ErasureID, "dead", time.Now().Add(-time.Second)); err != nil || !ok {
		t.Fatalf("shorten the lease: %v %v", ok, err)
	}

	// A call at work (held at its first read, after its lease) and a second call meanwhile.
	gated := &gatedDB{DB: st.db, entered: make(chan struct{}), released: make(chan struct{})}
	first := erasure.NewEraser(gated, st.names, st.tenants, reg, opts)
	done := make(chan error, 1)
	go func() {
		_, err := first.Step(ctx, row.SystemID, row.TenantID, ev)
		done <- err
	}()
	select {
	case <-gated.entered:
	case err := <-done:
		t.Fatalf("the first call ended before its first read: %v (the run-out lease was not taken over)", err)
	}
	again, err = erasure.NewEraser(st.db, st.names, st.tenants, reg, opts).Step(ctx, row.SystemID, row.TenantID, ev)
	if err != nil || !again.After(time.Now()) {
		t.Errorf("a second call beside a working one: again %v, err %v; want again later", again, err)
	}
	untouched("beside a working call")
	close(gated.released)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	e, err := ledger.Get(ctx, row.SystemID, row.TenantID, ev.ErasureID)
	if err != nil || e.SweptAt == "" {
		t.Fatalf("the first call did not do the first pass: %+v, %v", e, err)
	}
	out, err := st.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(ledger.Table()), ConsistentRead: aws.Bool(true),
		Key: erasure.EntryKey(row.SystemID, row.TenantID, ev.ErasureID)})
	if err != nil {
		t.Fatal(err)
	}
	if _, held := out.Item["lease_owner"]; held {
		t.Error("the call kept its lease after it ended")
	}
}
