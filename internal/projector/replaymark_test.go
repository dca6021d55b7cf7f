package projector_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.uber.org/zap"

	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
	"github.com/ssodir/ssodir/internal/projector"
)

// onPhase runs do when the replay starts phase.
type onPhase struct {
	phase string
	do    func()
}

func (p onPhase) Start(phase string, _ int64) {
	if phase == p.phase && p.do != nil {
		p.do()
	}
}
func (onPhase) Add(int) {}
func (onPhase) Finish() {}

func TestReplaySwitchKeepsAMarkRecordedDuringItsScan(t *testing.T) {
	setup := func(t *testing.T) (*fixture, *projector.Replayer) {
		f := newFixture(t)
		db := dynamotest.Current(t).DynamoDB()
		for _, u := range []string{"ann", "bob", "cid"} {
			if _, err := db.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(f.row.CommandsTable), Item: userCreated(t, u)}); err != nil {
				t.Fatal(err)
			}
		}
		r := projector.NewReplayer(db, f.names, f.tenants, projections.New(db, projections.Options{}), events.NewRegistry(), zap.NewNop())
		return f, r
	}
	mark := func(t *testing.T, f *fixture, reason string) {
		if err := f.tenants.MarkReplayNeeded(context.Background(), "s", "t", reason); err != nil {
			t.Error(err)
		}
	}
	marked := func(t *testing.T, f *fixture) (bool, string) {
		t.Helper()
		row, err := f.tenants.Get(t.Context(), "s", "t")
		if err != nil {
			t.Fatal(err)
		}
		if row.Generation == 0 {
			t.Fatal("the replay did not switch")
		}
		return row.ReplayNeeded, row.ReplayReason
	}
	opts := func(p projector.Progress) projector.ReplayOptions {
		return projector.ReplayOptions{SwitchWait: 50 * time.Millisecond, Progress: p}
	}

	t.Run("the mark the replay was started for is cleared by its switch", func(t *testing.T) {
		f, r := setup(t)
		mark(t, f, "gap before the replay")
		if _, err := r.Run(t.Context(), "s", "t", opts(nil)); err != nil {
			t.Fatal(err)
		}
		if needed, reason := marked(t, f); needed {
			t.Errorf("still marked (%q) after the replay it asked for", reason)
		}
	})
	t.Run("a mark recorded while the scan runs stays", func(t *testing.T) {
		f, r := setup(t)
		if _, err := r.Run(t.Context(), "s", "t", opts(onPhase{"rebuild", func() { mark(t, f, "gap during the scan") }})); err != nil {
			t.Fatal(err)
		}
		if needed, reason := marked(t, f); !needed || reason != "gap during the scan" {
			t.Errorf("marked %v (%q), want the mark recorded during the scan kept", needed, reason)
		}
	})
	t.Run("a new mark during the scan of a replay started for an older one stays", func(t *testing.T) {
		f, r := setup(t)
		mark(t, f, "gap before the replay")
		if _, err := r.Run(t.Context(), "s", "t", opts(onPhase{"rebuild", func() { mark(t, f, "another gap during the scan") }})); err != nil {
			t.Fatal(err)
		}
		if needed, reason := marked(t, f); !needed || reason != "another gap during the scan" {
			t.Errorf("marked %v (%q), want the newer mark kept", needed, reason)
		}
	})
	t.Run("a mark recorded between an interrupted scan and its resumption stays", func(t *testing.T) {
		f, r := setup(t)
		o := opts(nil)
		o.PageSize, o.StopAfterPages, o.Segments = 1, 1, 1
		if _, err := r.Run(t.Context(), "s", "t", o); !errors.Is(err, projector.ErrInterrupted) {
			t.Fatalf("first run: %v, want it interrupted", err)
		}
		mark(t, f, "gap while the replay was interrupted")
		o.StopAfterPages = 0
		if _, err := r.Run(t.Context(), "s", "t", o); err != nil {
			t.Fatal(err)
		}
		if needed, _ := marked(t, f); !needed {
			t.Error("the resumed replay cleared a mark recorded after its scan began")
		}
	})
}
