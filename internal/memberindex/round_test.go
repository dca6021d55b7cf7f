package memberindex_test

import (
	"context"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/memberindex"
)

// TestARoundBackfillsTheTenantsWithoutTheMarkAndLeavesALeasedOne: the projector's round
// works on the active tenants whose write table has no mark, to the end within its budget;
// the next round reads nothing of a table it found complete; a table whose lease another
// process holds is left to it; a tenant not active is not looked at.
func TestARoundBackfillsTheTenantsWithoutTheMarkAndLeavesALeasedOne(t *testing.T) {
	old, marked := newWorld(t, "old"), newWorld(t, "new")
	for _, u := range names("u", 0, 4) {
		old.user(u)
	}
	old.group("a")
	for _, u := range names("u", 0, 4) {
		old.add("a", u)
	}
	live, _, _ := old.index()
	old.strip()
	rows := []dynamo.Tenant{old.row, marked.row, {SystemID: "s", TenantID: "coming", Status: dynamo.TenantProvisioning, CommandsTable: "absent"}}
	db := newFaultDB(old)
	ix := memberindex.New(db, old.reg, memberindex.Options{SegmentItems: 3, PageSize: 2})
	ctx := context.Background()
	res, err := ix.Round(ctx, rows)
	if err != nil {
		t.Fatal(err)
	}
	if want := (memberindex.RoundResult{Tenants: 2, Complete: 2, Worked: 1}); res != want {
		t.Errorf("first round: %+v, want %+v", res, want)
	}
	if items, _, ok := old.index(); !ok || len(items) != len(live) {
		t.Errorf("after the round: mark %v, %d index items, want %d", ok, len(items), len(live))
	}
	scans := db.scans.Load()
	if res, err := ix.Round(ctx, rows); err != nil || res != (memberindex.RoundResult{Tenants: 2, Complete: 2}) || db.scans.Load() != scans {
		t.Errorf("second round: %+v, %v, %d Scans", res, err, db.scans.Load()-scans)
	}

	old.strip()
	old.setLease(time.Now().Add(time.Hour))
	other := memberindex.New(db, old.reg, memberindex.Options{SegmentItems: 3, PageSize: 2})
	if res, err := other.Round(ctx, rows); err != nil || res != (memberindex.RoundResult{Tenants: 2, Complete: 1}) || db.scans.Load() != scans {
		t.Errorf("a round while another process holds the lease: %+v, %v, %d Scans", res, err, db.scans.Load()-scans)
	}
	if _, _, ok := old.index(); ok {
		t.Error("the mark was written while another process held the lease")
	}
}
