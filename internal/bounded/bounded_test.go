package bounded

import (
	"context"
	"testing"
	"time"
)

// TestTheEarliestDeadlineBounds: the budget, the margin before the context's deadline and
// an outer call's soft deadline each bound a call; a lifted one never passes.
func TestTheEarliestDeadlineBounds(t *testing.T) {
	l := Limits{Budget: time.Hour, Margin: time.Minute}
	if got := time.Until(Deadline(l.Context(context.Background()))); got < 59*time.Minute || got > time.Hour {
		t.Errorf("the budget alone: %v from now, want about an hour", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if got := time.Until(Deadline(l.Context(ctx))); got < 8*time.Minute || got > 9*time.Minute {
		t.Errorf("under a 10-minute deadline: %v from now, want the margin before it (9 min)", got)
	}
	outer := WithDeadline(context.Background(), time.Now().Add(-time.Second))
	if !Passed(l.Context(outer)) {
		t.Error("an outer call's passed soft deadline does not bound the inner call")
	}
	if Passed(WithDeadline(outer, time.Time{})) {
		t.Error("a lifted soft deadline passed")
	}
	if Passed(context.Background()) {
		t.Error("a context without a soft deadline passed")
	}
}
