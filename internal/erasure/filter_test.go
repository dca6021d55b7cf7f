package erasure_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

func userRecord(username string) *events.Envelope {
	u := events.User{ID: "id-" + username, Username: username, Version: 2}
	return &events.Envelope{Type: events.UserUpdatedType, Kind: events.KindUser, Key: username, Version: 2, Payload: &events.UserUpdated{User: u}}
}

// TestTheFilterReadsWhatARecordNamesNotTheLedger: deciding a record reads the ledger's
// item of each id it names, as many with 2,000 erasures in the tenant as with 1; an id
// read within the TTL is not read again; erased ids are found, others are not.
func TestTheFilterReadsWhatARecordNamesNotTheLedger(t *testing.T) {
	st := newStage(t)
	ctx := context.Background()
	ledger := erasure.NewLedger(st.db, st.names)
	index := func(tenant string, n int) {
		t.Helper()
		var hashes []string
		for i := range n {
			hashes = append(hashes, identity.ErasedIDHash(fmt.Sprintf("id-gone-%d", i)))
		}
		if err := ledger.IndexIDHashes(ctx, "s", tenant, "00000000-0000-0000-0000-00000000000"+fmt.Sprint(len(tenant)), hashes); err != nil {
			t.Fatal(err)
		}
	}
	index("few", 1)
	index("many", 2000)
	reads := map[string]int64{}
	for _, tenant := range []string{"few", "many"} {
		f := erasure.NewFilter(ledger, time.Hour)
		for _, u := range []string{"gone-0", "alive-1", "alive-2", "gone-0", "alive-1"} {
			skip, err := f.Apply(ctx, "s", tenant, userRecord(u))
			if err != nil {
				t.Fatal(err)
			}
			if want := u == "gone-0"; skip != want {
				t.Errorf("%s: a record of %s skipped: %v, want %v", tenant, u, skip, want)
			}
		}
		reads[tenant] = f.ItemsRead()
	}
	if reads["few"] != 3 || reads["many"] != 3 {
		t.Errorf("items read for 5 records naming 3 ids: %v, want 3 in each tenant", reads)
	}
	// Another tenant's erasure is not this one's.
	f := erasure.NewFilter(ledger, time.Hour)
	if skip, err := f.Apply(ctx, "s", "other", userRecord("gone-0")); err != nil || skip {
		t.Errorf("a record of another tenant's erased id: skip %v, err %v", skip, err)
	}
	// A negative answer lasts the TTL: an erasure after it is seen once the TTL passed.
	g := erasure.NewFilter(ledger, time.Millisecond)
	if skip, _ := g.Apply(ctx, "s", "few", userRecord("late")); skip {
		t.Fatal("skipped before the erasure")
	}
	if err := ledger.IndexIDHashes(ctx, "s", "few", "00000000-0000-0000-0000-000000000009", []string{identity.ErasedIDHash("id-late")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if skip, err := g.Apply(ctx, "s", "few", userRecord("late")); err != nil || !skip {
		t.Errorf("a record of an id erased after a negative answer, past the TTL: skip %v, err %v", skip, err)
	}
}
