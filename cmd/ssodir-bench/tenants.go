package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// idlePollMax is the projector's default SSO_STREAM_IDLE_POLL_MAX: an idle stream is read
// once per idlePollMax per consumer.
const idlePollMax = time.Second

// pickupBound is the bound on a new tenant's first command being projected.
const pickupBound = 10 * time.Second

// benchTenants measures what tenants cost the projector: for each count of the scale, the
// DynamoDB and Streams calls per idle tenant, the pick-up of a new tenant, the lag of one
// active tenant among the idle ones, and the projector's memory and goroutines.
func benchTenants(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	var out []*result
	for _, n := range sc.Tenants {
		r, err := benchTenantsAt(ctx, b, sc, n)
		if err != nil {
			return nil, fmt.Errorf("%d tenants: %w", n, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// callCounter is a reverse proxy in front of DynamoDB Local that counts the calls going
// through it by operation (X-Amz-Target: DynamoDB_20120810.GetItem,
// DynamoDBStreams_20120810.GetRecords, ...).
type callCounter struct {
	srv *httptest.Server
	mu  sync.Mutex
	n   map[string]int
}

func newCallCounter(endpoint string) (*callCounter, error) {
	target, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	c := &callCounter{n: map[string]int{}}
	rp := httputil.NewSingleHostReverseProxy(target)
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.n[r.Header.Get("X-Amz-Target")]++
		c.mu.Unlock()
		rp.ServeHTTP(w, r)
	}))
	return c, nil
}

func (c *callCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.n))
	for k, v := range c.n {
		out[k] = v
	}
	return out
}

func benchTenantsAt(ctx context.Context, b *bench, sc scale, n int) (*result, error) {
	e, api, err := apiEnv(ctx, b, sc, true)
	if err != nil {
		return nil, err
	}
	defer e.close()
	provisioned := time.Now()
	if err := provisionTenants(ctx, b, api, "i", n-1); err != nil {
		return nil, err
	}
	b.logf("   %d tenants provisioned in %.0fs", n, time.Since(provisioned).Seconds())
	counter, err := newCallCounter(e.local.Endpoint)
	if err != nil {
		return nil, err
	}
	defer counter.srv.Close()
	started := time.Now()
	proj, err := e.start(ctx, "projector", "AWS_ENDPOINT_URL_DYNAMODB="+counter.srv.URL, "AWS_ENDPOINT_URL_DYNAMODB_STREAMS="+counter.srv.URL)
	if err != nil {
		return nil, err
	}
	if err := waitFor(ctx, 10*time.Minute, 200*time.Millisecond, fmt.Sprintf("the projector follows %d streams", n), func() (bool, error) {
		held, err := metricSum(ctx, b, proj, "ssodir_stream_leases_held")
		return held >= float64(n), err
	}); err != nil {
		return nil, err
	}
	followAll := time.Since(started)

	r := &result{
		Name: fmt.Sprintf("tenants, %d idle", n), Unit: "calls per idle tenant per second", BaselineUnit: "the issue's bounds",
		What: fmt.Sprintf("one projector (SSO_STREAM_CONSUMERS=2: half of every Streams budget) following %d idle tenants: DynamoDB and Streams calls "+
			"counted by a proxy over an idle window; pick-up of a new tenant; lag of one active tenant; RSS and goroutines", n),
		BaselineWhat: fmt.Sprintf("per_s and get_records_per_tenant_s: GetRecords per idle tenant and consumer at SSO_STREAM_IDLE_POLL_MAX (%s); a new tenant's first command projected within %s",
			idlePollMax, pickupBound),
		Notes: []string{
			"per_s: every call of the projector (Streams and DynamoDB: leases, checkpoints, tenant list) per tenant per second while all are idle",
			"pickup_ms: from the 201 of a new tenant's provisioning to its first user's records applied; p50_ms, max_ms: lag, from a create's 201 to its records applied, one tenant written to, the others idle",
			"goroutines and rss_mib: the projector process after the idle window",
		},
	}
	window := sc.Window * 10
	for rep := range sc.Reps {
		fig := map[string]float64{"follow_all_s": followAll.Seconds()}
		time.Sleep(2 * time.Second) // let the first reads back off
		before := counter.snapshot()
		t := time.Now()
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(window):
		}
		secs := time.Since(t).Seconds()
		after := counter.snapshot()
		var all, streams, getRecords, describe int
		for op, v := range after {
			d := v - before[op]
			all += d
			if strings.HasPrefix(op, "DynamoDBStreams_") {
				streams += d
			}
			switch op {
			case "DynamoDBStreams_20120810.GetRecords":
				getRecords += d
			case "DynamoDBStreams_20120810.DescribeStream":
				describe += d
			}
		}
		per := func(calls int) float64 { return float64(calls) / secs / float64(n) }
		fig["per_s"] = per(all)
		fig["get_records_per_tenant_s"] = per(getRecords)
		fig["dynamodb_calls_per_tenant_s"] = per(all - streams)
		fig["describe_stream_per_s"] = float64(describe) / secs
		if g, err := metricSum(ctx, b, proj, "go_goroutines"); err == nil {
			fig["goroutines"] = g
			fig["goroutines_per_tenant"] = g / float64(n)
		}
		fig["rss_mib"] = float64(vmRSS(proj.cmd.Process.Pid)) / (1 << 20)

		// One tenant written to while the others stay idle.
		var lags []float64
		for i := range 10 {
			applied, err := appliedRecords(ctx, b, proj)
			if err != nil {
				return nil, err
			}
			u := benchUser(fmt.Sprintf("tn%d-%d", rep, i), i, time.Now().UTC())
			if _, _, err := b.expect(ctx, http.StatusCreated, "POST", api.url()+tenantPath()+"/users", createBody(u)); err != nil {
				return nil, err
			}
			t := time.Now()
			if err := waitApplied(ctx, b, proj, int(applied)+recordsPerCreate, time.Minute); err != nil {
				return nil, err
			}
			lags = append(lags, ms(time.Since(t)))
			time.Sleep(100 * time.Millisecond)
		}
		slices.Sort(lags)
		fig["p50_ms"], fig["max_ms"] = lags[len(lags)/2], lags[len(lags)-1]

		// A new tenant among the idle ones.
		applied, err := appliedRecords(ctx, b, proj)
		if err != nil {
			return nil, err
		}
		id := fmt.Sprintf("new%d", rep)
		body, _ := json.Marshal(map[string]string{"tenant_id": id})
		if _, _, err := b.expect(ctx, http.StatusCreated, "POST", api.url()+"/v1/systems/"+benchSystem+"/tenants", body); err != nil {
			return nil, err
		}
		t = time.Now()
		u := benchUser("first", 0, time.Now().UTC())
		if _, _, err := b.expect(ctx, http.StatusCreated, "POST", api.url()+"/v1/systems/"+benchSystem+"/tenants/"+id+"/users", createBody(u)); err != nil {
			return nil, err
		}
		if err := waitApplied(ctx, b, proj, int(applied)+recordsPerCreate, 2*time.Minute); err != nil {
			return nil, err
		}
		fig["pickup_ms"] = ms(time.Since(t))
		n++ // the new tenant is one more idle tenant in the next repetition
		r.add(fig, map[string]float64{"per_s": 1 / idlePollMax.Seconds(), "get_records_per_tenant_s": 1 / idlePollMax.Seconds(), "pickup_ms": ms(pickupBound)})
	}
	return r, nil
}

// provisionTenants provisions count tenants prefix0000... through the command API, four at
// a time, and waits until each is active (a repeated provisioning answers 200 once it is).
func provisionTenants(ctx context.Context, b *bench, api *service, prefix string, count int) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i := range count {
		g.Go(func() error {
			body, _ := json.Marshal(map[string]string{"tenant_id": fmt.Sprintf("%s%04d", prefix, i)})
			return waitFor(ctx, 5*time.Minute, 200*time.Millisecond, "tenant "+string(body)+" is active", func() (bool, error) {
				status, _, _, err := b.call(ctx, "POST", api.url()+"/v1/systems/"+benchSystem+"/tenants", body)
				if err != nil {
					return false, err
				}
				switch status {
				case http.StatusOK, http.StatusCreated:
					return true, nil
				case http.StatusAccepted:
					return false, nil
				}
				return false, fmt.Errorf("provision %s: status %d", body, status)
			})
		})
	}
	return g.Wait()
}

// metricSum is the sum of every series of a metric a service exports.
func metricSum(ctx context.Context, b *bench, s *service, name string) (float64, error) {
	sums, err := metricSums(ctx, b, s, name)
	return sums[name], err
}

// metricSums is metricSum of each of names, from one scrape.
func metricSums(ctx context.Context, b *bench, s *service, names ...string) (map[string]float64, error) {
	sums := map[string]float64{}
	err := scrape(ctx, b, s, func(line string) error {
		name := line[:max(0, strings.IndexAny(line, "{ "))]
		if !slices.Contains(names, name) {
			return nil
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return fmt.Errorf("metric line %q: %w", line, err)
		}
		sums[name] += v
		return nil
	})
	return sums, err
}

// vmRSS is a process's resident set size in bytes now (0 if it cannot be read).
func vmRSS(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
