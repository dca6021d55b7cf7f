package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/eventbridge/eventbridgetest"
)

// Changes out in Lambda mode (API.md "Changes out", docs/webhooks.md, docs/events.md): the
// projector function delivers the webhooks with its scheduled task deliver-webhooks and
// sends the change feed to SSO_EVENTBRIDGE_BUS with publish-events. The test plays both
// schedules, with the constant input deploy/'s rules send, in an execution environment of
// the function's own (Lambda runs a scheduled invocation in any free one), more often than
// the stage's every minute.

// e2eBus is the bus the stage names (SSO_EVENTBRIDGE_BUS); deploy/'s bus test names the same.
const e2eBus = "directory-changes"

// changesOut plays the projector's delivery tasks over a Lambda stage.
type changesOut struct {
	bus   *eventbridgetest.Server
	hook  *hookEndpoint
	tasks *function
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
}

// halt stops playing the schedules and waits for the run under way.
func (o *changesOut) halt() {
	o.once.Do(func() { close(o.stop) })
	<-o.done
}

// newChangesOutBus is the EventBridge double (PutEvents' limits enforced) and the stage's
// settings that send every change to it and let webhooks reach the test's endpoint.
func newChangesOutBus(t *testing.T) (*eventbridgetest.Server, []string) {
	bus := eventbridgetest.New(eventbridgetest.Options{})
	t.Cleanup(bus.Close)
	return bus, []string{allowPrivate, "SSO_EVENTBRIDGE_BUS=" + e2eBus, "AWS_ENDPOINT_URL_EVENTBRIDGE=" + bus.URL}
}

// startChangesOut registers a webhook endpoint (one that fails its first request) for
// every change of the tenant through the command API function, and plays the projector's
// deliver-webhooks and publish-events schedules until finish.
func startChangesOut(t *testing.T, s *lambdaStage, path string, bus *eventbridgetest.Server, vars []string) *changesOut {
	t.Helper()
	o := &changesOut{bus: bus, stop: make(chan struct{}), done: make(chan struct{}),
		hook: newHookEndpoint(t, "the Lambda-mode endpoint", func(n int64, w http.ResponseWriter, _ *http.Request) bool {
			if n == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return true
			}
			return false
		}),
		tasks: s.e.startFunction("projector", vars...)}
	registerHook(t, s.command, path, o.hook)
	t.Cleanup(o.halt)
	go func() {
		defer close(o.done)
		for {
			select {
			case <-o.stop:
				return
			case <-time.After(2 * time.Second):
			}
			for _, task := range []string{"deliver-webhooks", "publish-events"} {
				if _, err := o.tasks.invoke(context.Background(), map[string]string{"ssodir_task": task}); err != nil {
					t.Errorf("task %s: %v", task, err)
				}
			}
		}
	}()
	return o
}

// finish plays the schedules until the endpoint and the bus have every change of the
// tenant's command log, then checks them: the endpoint got each change at least once,
// each aggregate's in version order, signed as Standard Webhooks says; the bus got each
// exactly once, each aggregate's in version order, within PutEvents' limits.
func (o *changesOut) finish(t *testing.T, s *lambdaStage, system, tenant, path string) {
	t.Helper()
	o.halt()
	start := time.Now()
	want := historyOf(t, s.e, system, tenant)
	deadline := time.Now().Add(5 * time.Minute)
	for o.hook.delivered() < len(want) || len(o.bus.Accepted()) < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("after 5 minutes of scheduled tasks the endpoint has %d and the bus %d of %d changes", o.hook.delivered(), len(o.bus.Accepted()), len(want))
		}
		o.tasks.task(t, "deliver-webhooks")
		o.tasks.task(t, "publish-events")
		time.Sleep(time.Second) // a failed attempt waits 5 s for its retry
	}
	t.Logf("the endpoint and the bus had every change %s after the run", time.Since(start).Round(time.Second))
	checkHooks(t, s.command, path, want, o.hook)
	if o.hook.requests.Load() <= int64(len(want)) {
		t.Errorf("the endpoint's failed request was not retried: %d requests for %d changes", o.hook.requests.Load(), len(want))
	}

	if v := o.bus.Violations(); len(v) > 0 {
		t.Errorf("calls that break PutEvents' rules: %v", v)
	}
	calls, throttled, _ := o.bus.Counts()
	t.Logf("the bus: %d entries in %d calls, %d throttled", len(o.bus.Accepted()), calls, throttled)
	seen, last := map[string]bool{}, map[string]int64{}
	for _, en := range o.bus.Accepted() {
		var ev feedEvent
		if err := json.Unmarshal([]byte(en.Detail), &ev); err != nil {
			t.Errorf("a bus entry's detail is no CloudEvent: %.300s", en.Detail)
			continue
		}
		c, ok := want[ev.ID]
		switch {
		case en.Bus != e2eBus || en.Source != fmt.Sprintf("ssodir.%s.%s", system, tenant) || en.DetailType != ev.Type:
			t.Errorf("change %s went to bus %q as source %q, detail-type %q (its type %s)", ev.ID, en.Bus, en.Source, en.DetailType, ev.Type)
		case seen[ev.ID]:
			t.Errorf("change %s reached the bus twice", ev.ID)
		case !ok:
			t.Errorf("change %s on the bus is in no history record", ev.ID)
		case ev.Data.ID != c.Aggregate || ev.Data.Version != c.Version || ev.Source != path:
			t.Errorf("change %s reached the bus as %s v%d from %s, the log says %s v%d", ev.ID, ev.Data.ID, ev.Data.Version, ev.Source, c.Aggregate, c.Version)
		case ev.Data.Version <= last[ev.Data.ID]:
			t.Errorf("%s v%d reached the bus after v%d", ev.Data.ID, ev.Data.Version, last[ev.Data.ID])
		}
		seen[ev.ID] = true
		last[ev.Data.ID] = max(last[ev.Data.ID], ev.Data.Version)
	}
	if len(seen) != len(want) {
		t.Errorf("the bus got %d changes, the command log holds %d", len(seen), len(want))
	}
}
