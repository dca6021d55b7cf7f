package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/changefeed"
	"github.com/ssodir/ssodir/internal/webhooks"
)

// webhookRate is the load for the webhook latency: changes a second, started by a
// ticker (an open loop), whatever the answers' pace. The tiny scale (the smoke test, on a
// loaded CI machine) runs a fifth of it.
var webhookRate = map[string]float64{"full": 100, "small": 100, "tiny": 20}

// rateOf is the webhook latency's rate at sc: -webhook-rate, else the scale's.
func rateOf(sc scale) float64 {
	if sc.WebhookRate > 0 {
		return sc.WebhookRate
	}
	return webhookRate[sc.Name]
}

// webhookWindow is one measuring window of the webhook latency at each scale.
var webhookWindow = map[string]time.Duration{"full": 30 * time.Second, "small": 10 * time.Second, "tiny": 2 * time.Second}

// webhookWarmup is how long the warm-up runs at the rate at least, and webhookWarmupMax at
// most. A fresh DynamoDB Local starts as a cold JVM: until its compiler has caught up, a
// write costs it two to three times the CPU it does later (measured with the same writes
// repeated), and at 100 changes/s on two cores that alone builds a backlog. After the
// least, the warm-up goes on in slices of webhookWarmupSlice while the JVM's compiler
// threads used more than jitSettled of a core in the last one (on this machine they were
// still at 2 ms of CPU per change after 20 s at 100 changes/s, 0.4 after 60 s, under 0.1
// after 100 s). It ends only when every change it made has arrived, so the first window
// inherits no backlog.
var (
	webhookWarmup    = map[string]time.Duration{"full": 30 * time.Second, "small": 20 * time.Second, "tiny": time.Second}
	webhookWarmupMax = map[string]time.Duration{"full": 3 * time.Minute, "small": 2 * time.Minute, "tiny": time.Second}
)

const (
	webhookWarmupSlice = 5 * time.Second
	// jitSettled is the share of a core under which the JIT counts as caught up.
	jitSettled = 0.02
)

// webhookDeliveryWait is how long after a window every change it made may take to arrive:
// past it, a change not delivered fails the run.
const webhookDeliveryWait = time.Minute

// benchWebhookLatency measures the end-to-end latency of a webhook: the command API and the
// projector run as processes with their defaults (polling, SSO_STREAM_POLL, the deliverer's
// loop), one endpoint is registered to a receiver in the bench, and users are created at
// webhookRate a second; for each change, the time from the command's 201 to the arrival of
// its signed POST. The baseline is the same changes' time from the 201 to their append to
// the feed (the feed item's fed_at_ms, written by the projector: what GET /events could
// answer at the earliest); the ratio is then the cost of delivery on top of projection.
func benchWebhookLatency(ctx context.Context, b *bench, sc scale) (*result, error) {
	e, err := b.newEnv(ctx, sc.FreshDB)
	if err != nil {
		return nil, err
	}
	defer e.close()
	// With -count-requests each service reaches DynamoDB Local through a tally of its own.
	var tallies []*tally
	via := func(label string) ([]string, error) {
		if !sc.CountRequests {
			return nil, nil
		}
		t, err := newTally(label, e.local.Endpoint, e.prefix)
		if err != nil {
			return nil, err
		}
		tallies = append(tallies, t)
		return []string{"AWS_ENDPOINT_URL_DYNAMODB=" + t.url, "AWS_ENDPOINT_URL_DYNAMODB_STREAMS=" + t.url}, nil
	}
	defer func() {
		for _, t := range tallies {
			t.close()
		}
	}()
	apiVia, err := via("command-api")
	if err != nil {
		return nil, err
	}
	api, err := e.start(ctx, "command-api", append(apiVia, "SSO_PROVISION_WAIT=1m", "SSO_WEBHOOKS_ALLOW_PRIVATE=true")...)
	if err != nil {
		return nil, err
	}
	if err := e.provision(ctx, api); err != nil {
		return nil, err
	}
	projVia, err := via("projector")
	if err != nil {
		return nil, err
	}
	proj, err := e.start(ctx, "projector", append(projVia, "SSO_WEBHOOKS_ALLOW_PRIVATE=true")...)
	if err != nil {
		return nil, err
	}
	rx, err := newReceiver()
	if err != nil {
		return nil, err
	}
	defer rx.close()
	body, _ := json.Marshal(map[string]any{"url": rx.url, "description": "ssodir-bench receiver"})
	_, data, err := b.expect(ctx, http.StatusCreated, "POST", api.url()+tenantPath()+"/webhooks", body)
	if err != nil {
		return nil, err
	}
	var hook struct {
		Secret string `json:"secret"`
	}
	if err := json.Unmarshal(data, &hook); err != nil || !strings.HasPrefix(hook.Secret, webhooks.SecretPrefix) {
		return nil, fmt.Errorf("POST /webhooks answered no secret: %s", data)
	}
	rx.secret.Store(&hook.Secret)

	var seq atomic.Int64
	create := func(ctx context.Context) (string, time.Time, error) {
		t0 := time.Now()
		u := benchUser("hook", int(seq.Add(1)), t0.UTC())
		_, data, err := b.expect(ctx, http.StatusCreated, "POST", api.url()+tenantPath()+"/users", createBody(u))
		acked := time.Now()
		if err != nil {
			// A create that takes longer than the listener's 30 s WriteTimeout ends in EOF: the
			// command API fell that far behind the rate (on a loaded machine).
			return "", acked, fmt.Errorf("%w (after %s; load average %.1f)", err, acked.Sub(t0).Round(time.Millisecond), loadAvg())
		}
		var out struct {
			ID      string `json:"id"`
			Version int64  `json:"version"`
		}
		if err := json.Unmarshal(data, &out); err != nil || out.ID == "" {
			return "", acked, fmt.Errorf("POST /users answered no id: %s", data)
		}
		return changeKey(out.ID, out.Version), acked, nil
	}
	// The projector follows its shard only after its first lease tick, and the deliverer
	// finds a new endpoint at its next round: one change must arrive before anything is
	// measured; then creates at the rate for the warm-up.
	key, _, err := create(ctx)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, webhookDeliveryWait, 10*time.Millisecond, "the first webhook", func() (bool, error) {
		return rx.has(key), rx.err()
	}); err != nil {
		return nil, err
	}
	var warmMu sync.Mutex
	warm := map[string]time.Time{}
	warmUp := func(d time.Duration) error {
		_, err := open(ctx, rateOf(sc), d, func(ctx context.Context, _ int) error {
			key, at, err := create(ctx)
			warmMu.Lock()
			warm[key] = at
			warmMu.Unlock()
			return err
		})
		return err
	}
	warmedFor := webhookWarmup[sc.Name]
	if err := warmUp(warmedFor); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	jvm := e.jvmPID()
	for warmedFor < webhookWarmupMax[sc.Name] {
		before := jitTime(jvm)
		if err := warmUp(webhookWarmupSlice); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		warmedFor += webhookWarmupSlice
		if jitTime(jvm).since(before) < time.Duration(jitSettled*float64(webhookWarmupSlice)) {
			break
		}
	}
	if err := waitFor(ctx, 3*webhookDeliveryWait, 10*time.Millisecond, "the warm-up's webhooks", func() (bool, error) {
		return rx.hasAll(warm), rx.err()
	}); err != nil {
		return nil, fmt.Errorf("warm-up: %d of %d changes delivered: %w", rx.count(warm), len(warm), err)
	}

	window, rate := webhookWindow[sc.Name], rateOf(sc)
	r := &result{
		Name: fmt.Sprintf("events webhook latency, %.0f changes/s", rate), Unit: "ms", BaselineUnit: "ms",
		What: fmt.Sprintf("command API 201 → the change's signed POST received by a local endpoint (projector and deliverer with their defaults), user creates at %.0f/s for %s (open loop)",
			rate, window),
		BaselineWhat: "the same changes' 201 → their append to the change feed (fed_at_ms of the feed item, the projector's clock)",
		Target:       atMost("p99_ms", 1000),
		Notes: []string{"every change sent must arrive (sent = received, each with a valid Standard Webhooks signature) or the run fails",
			"load_1m is the machine's load average at the end of the window",
			"deliver_p50_ms / _p99_ms / _max_ms: the same changes' append to the feed → arrival (the deliverer's share)",
			fmt.Sprintf("measured after a warm-up of %s at the same rate (at least %s, then until DynamoDB Local's JIT compiler used under %.0f%% of a core for %s, at most %s) whose changes had all arrived: a cold DynamoDB Local JVM costs 2-3x the CPU per write",
				warmedFor, webhookWarmup[sc.Name], jitSettled*100, webhookWarmupSlice, webhookWarmupMax[sc.Name]),
			"jit_ms_per_op: CPU per change of DynamoDB Local's JIT compiler threads in the window (part of cpu_ms_per_op.dynamodb-local)",
			"sqlite_thread_ms_per_op: CPU per change of DynamoDB Local's one SQLite thread, which does the storage work of every table operation in turn (part of cpu_ms_per_op.dynamodb-local; per change at the rate, the share of that thread kept busy)",
			"cpu_ms_per_op.<process>: CPU per change from the window's start until its last change arrived",
			"throughput_per_s: the window's changes over the time from its start until the last arrived: what the pipeline sustained (below the rate, the changes queue up and the latency grows through the window)",
			"projector_in_flight, projector_apply_ms: the stream records the projector's handlers held at once on average over that time, and how long one took (every record of the commands table, a create's history record and its four state items: Little's law on ssodir_stream_apply_seconds)"},
	}
	for range sc.Reps {
		var mu sync.Mutex
		acked := map[string]time.Time{}
		before, jitBefore, sqliteBefore := e.cpu(), jitTime(jvm), sqliteTime(jvm)
		counted := make([]tallySnapshot, len(tallies))
		for i, t := range tallies {
			counted[i] = t.snapshot()
		}
		applyBefore, err := projectorApply(ctx, b, proj)
		if err != nil {
			return nil, err
		}
		start := time.Now()
		n, err := open(ctx, rate, window, func(ctx context.Context, _ int) error {
			key, at, err := create(ctx)
			if err != nil {
				return err
			}
			mu.Lock()
			acked[key] = at
			mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, err
		}
		load := loadAvg()
		if err := waitFor(ctx, webhookDeliveryWait, 10*time.Millisecond, "every change's webhook", func() (bool, error) {
			return rx.hasAll(acked), rx.err()
		}); err != nil {
			return nil, fmt.Errorf("%d of %d changes delivered: %w", rx.count(acked), len(acked), err)
		}
		applyAfter, err := projectorApply(ctx, b, proj)
		if err != nil {
			return nil, err
		}
		fed, err := fedAt(ctx, e.db, changefeed.TableName(e.names))
		if err != nil {
			return nil, err
		}
		var lats, feedLats, deliverLats []time.Duration
		var last time.Time
		for k, at := range acked {
			arrived := rx.arrival(k)
			if arrived.After(last) {
				last = arrived
			}
			lats = append(lats, max(0, arrived.Sub(at)))
			f, ok := fed[k]
			if !ok {
				return nil, fmt.Errorf("change %s arrived but is not in the feed", k)
			}
			feedLats = append(feedLats, max(0, f.Sub(at)))
			deliverLats = append(deliverLats, max(0, arrived.Sub(f)))
		}
		fig := latencyFigures("", lats)
		maps.Copy(fig, latencyFigures("deliver_", deliverLats))
		fig["sent"], fig["received"], fig["started"] = float64(len(acked)), float64(rx.count(acked)), float64(n)
		fig["load_1m"] = load
		maps.Copy(fig, pipelineFigures(len(acked), last.Sub(start), applyBefore, applyAfter))
		e.addCPU(fig, before, len(acked))
		fig["jit_ms_per_op"] = ms(jitTime(jvm).since(jitBefore)) / float64(len(acked))
		fig["sqlite_thread_ms_per_op"] = ms(sqliteTime(jvm).since(sqliteBefore)) / float64(len(acked))
		for i, t := range tallies {
			t.report(b, fig, counted[i], len(acked))
		}
		r.add(fig, latencyFigures("", feedLats))
	}
	r.Notes = append(r.Notes, fmt.Sprintf("redeliveries seen: %d (at least once: a duplicate is allowed, the first arrival counts)", rx.duplicates.Load()))
	return r, nil
}

// applyMeter is the projector's ssodir_stream_apply_seconds at an instant: the seconds its
// handlers spent on stream records, and how many.
type applyMeter struct{ seconds, records float64 }

func projectorApply(ctx context.Context, b *bench, proj *service) (applyMeter, error) {
	const seconds, records = "ssodir_stream_apply_seconds_sum", "ssodir_stream_apply_seconds_count"
	sums, err := metricSums(ctx, b, proj, seconds, records)
	return applyMeter{seconds: sums[seconds], records: sums[records]}, err
}

// pipelineFigures are a window's throughput_per_s (sent changes over d, from its start to
// its last arrival) and the projector's in-flight records and apply time over d, from
// its apply meter before and after.
func pipelineFigures(sent int, d time.Duration, before, after applyMeter) map[string]float64 {
	fig := map[string]float64{}
	if d <= 0 {
		return fig
	}
	busy := after.seconds - before.seconds
	fig["throughput_per_s"] = float64(sent) / d.Seconds()
	fig["projector_in_flight"] = busy / d.Seconds()
	if n := after.records - before.records; n > 0 {
		fig["projector_apply_ms"] = 1000 * busy / n
	}
	return fig
}

// changeKey names a change by its aggregate (immutable id) and version.
func changeKey(id string, version int64) string { return id + "/" + strconv.FormatInt(version, 10) }

// fedAt is when each change of the bench tenant went into the feed, by changeKey.
func fedAt(ctx context.Context, db *dynamodb.Client, table string) (map[string]time.Time, error) {
	out := map[string]time.Time{}
	in := &dynamodb.QueryInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression: aws.String("pk = :pk AND begins_with(sk, :p)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": &types.AttributeValueMemberS{Value: "feed#" + benchSystem + "/" + benchTenant},
			":p":  &types.AttributeValueMemberS{Value: "p#"},
		},
	}
	for {
		page, err := db.Query(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, it := range page.Items {
			agg, _ := it["aggregate"].(*types.AttributeValueMemberS)
			v, _ := it["version"].(*types.AttributeValueMemberN)
			at, _ := it["fed_at_ms"].(*types.AttributeValueMemberN)
			if agg == nil || v == nil || at == nil {
				return nil, fmt.Errorf("a feed item without aggregate, version or fed_at_ms: %v", it)
			}
			version, _ := strconv.ParseInt(v.Value, 10, 64)
			ms, _ := strconv.ParseInt(at.Value, 10, 64)
			out[changeKey(agg.Value, version)] = time.UnixMilli(ms)
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// receiver is a webhook endpoint in the bench: it notes when each change first arrives and
// checks its Standard Webhooks signature with the endpoint's secret.
type receiver struct {
	url    string
	srv    *http.Server
	secret atomic.Pointer[string]

	mu         sync.Mutex
	arrived    map[string]time.Time
	bad        error
	duplicates atomic.Int64
}

func newReceiver() (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	rx := &receiver{url: "http://" + ln.Addr().String() + "/hook", arrived: map[string]time.Time{}}
	rx.srv = &http.Server{Handler: http.HandlerFunc(rx.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = rx.srv.Serve(ln) }()
	return rx, nil
}

func (rx *receiver) close() { _ = rx.srv.Close() }

func (rx *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	now := time.Now()
	if err != nil {
		http.Error(w, "unreadable body", http.StatusBadRequest)
		return
	}
	if err := rx.verify(req.Header, body); err != nil {
		rx.fail(err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var ev struct {
		Data struct {
			ID      string `json:"id"`
			Version int64  `json:"version"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ev); err != nil || ev.Data.ID == "" {
		rx.fail(fmt.Errorf("a webhook body is not a change's CloudEvent: %.200s", body))
		http.Error(w, "not a CloudEvent", http.StatusBadRequest)
		return
	}
	key := changeKey(ev.Data.ID, ev.Data.Version)
	rx.mu.Lock()
	if _, ok := rx.arrived[key]; ok {
		rx.duplicates.Add(1)
	} else {
		rx.arrived[key] = now
	}
	rx.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// verify checks the Standard Webhooks headers: one of the signatures is the secret's.
func (rx *receiver) verify(h http.Header, body []byte) error {
	secret := rx.secret.Load()
	id, ts, sigs := h.Get(webhooks.HeaderID), h.Get(webhooks.HeaderTimestamp), h.Get(webhooks.HeaderSignature)
	if secret == nil || id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("a webhook without its id, timestamp or signature (id %q, timestamp %q, signature %q)", id, ts, sigs)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q", ts)
	}
	want, err := webhooks.Sign(*secret, id, time.Unix(sec, 0), body)
	if err != nil {
		return err
	}
	for _, s := range strings.Fields(sigs) {
		if s == want {
			return nil
		}
	}
	return fmt.Errorf("webhook %s: no signature verifies with the endpoint's secret", id)
}

func (rx *receiver) fail(err error) {
	rx.mu.Lock()
	if rx.bad == nil {
		rx.bad = err
	}
	rx.mu.Unlock()
}

// err is the first delivery the receiver refused.
func (rx *receiver) err() error {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return rx.bad
}

func (rx *receiver) has(key string) bool {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	_, ok := rx.arrived[key]
	return ok
}

func (rx *receiver) arrival(key string) time.Time {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	return rx.arrived[key]
}

// count is how many of the changes of acked arrived.
func (rx *receiver) count(acked map[string]time.Time) int {
	rx.mu.Lock()
	defer rx.mu.Unlock()
	n := 0
	for k := range acked {
		if _, ok := rx.arrived[k]; ok {
			n++
		}
	}
	return n
}

func (rx *receiver) hasAll(acked map[string]time.Time) bool { return rx.count(acked) == len(acked) }
