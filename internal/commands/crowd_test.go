package commands_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/commands"
)

// loadCountingStore is the real store, counting the group loads: one per attempt of a
// member command.
type loadCountingStore struct {
	commands.Store
	loads atomic.Int64
}

func (s *loadCountingStore) LoadGroup(ctx context.Context, t commands.Tenant, key string) (commands.GroupAggregate, error) {
	s.loads.Add(1)
	return s.Store.LoadGroup(ctx, t, key)
}

// TestACrowdOfJoinsLandsInTurns: 32 joins of one group at once all land, one version each,
// and the losers of the first race wait for their turn instead of racing every write that
// beat them: at most about two attempts a join, where racing alone costs about n²/2.
func TestACrowdOfJoinsLandsInTurns(t *testing.T) {
	t.Parallel()
	const crowd = 32
	w := newWorld(t)
	members := names("c", crowd)
	w.given(append(usersBatch(members), createGroup("Everyone"))...)
	store := &loadCountingStore{Store: w.real}
	d := commands.Deps{Store: store, Now: time.Now, NewID: uuid.NewString}
	var wg sync.WaitGroup
	errs := make([]error, crowd)
	for i, u := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = commands.NewAddMemberHandler(d).Handle(t.Context(), w.tenant, addMember("everyone", u),
				commands.Meta{Actor: actor, CommandID: uuid.NewString(), CorrelationID: "c"})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("join of %s: %v", members[i], err)
		}
	}
	g, err := w.real.LoadGroup(t.Context(), w.tenant, "everyone")
	if err != nil || g.State.Version != 1+crowd {
		t.Fatalf("everyone at v%d (%v), want v%d", g.State.Version, err, 1+crowd)
	}
	if got := membersOf(t, w, "everyone"); len(got) != crowd {
		t.Errorf("%d members, want %d", len(got), crowd)
	}
	// One attempt each, and a second for each loser of the first race, with slack for a
	// first attempt that starts late and beats a waiter.
	if loads := store.loads.Load(); loads > 3*crowd {
		t.Errorf("%d attempts for %d joins, want at most %d", loads, crowd, 3*crowd)
	} else {
		t.Logf("%d attempts for %d joins", loads, crowd)
	}
}
