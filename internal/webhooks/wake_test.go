package webhooks_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/webhooks"
)

// TestAnAppendWakesTheDeliverer: with a poll of an hour, changes still go out, one after
// another, because the appender of the same process wakes the deliverer
// (changefeed.Options.OnAppend → Deliverer.Notify), also a change appended while the
// endpoint's previous delivery is finishing.
func TestAnAppendWakesTheDeliverer(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	rc := newReceiver(t, nil)
	register(t, f, rc.srv.URL+"/hook")
	o := fastOptions(nil)
	o.Poll = time.Hour
	d, err := webhooks.NewDeliverer(f.store, o)
	if err != nil {
		t.Fatal(err)
	}
	feed := changefeed.NewAppender(dynamotest.Current(t).DynamoDB(), f.table, changefeed.Options{OnAppend: d.Notify})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	for v := int64(1); v <= 5; v++ {
		ev := fmt.Appendf(nil, `{"specversion":"1.0","id":"woken-v%d","type":"io.ssodir.user.updated","data":{"id":"woken","version":%d}}`, v, v)
		if err := feed.Append(ctx, changefeed.Change{System: system, Tenant: tenant, Aggregate: "woken", Version: v, Event: ev}); err != nil {
			t.Fatal(err)
		}
		eventually(t, fmt.Sprintf("change %d delivered without a poll", v), func() bool { return rc.distinct() == int(v) })
	}
}
