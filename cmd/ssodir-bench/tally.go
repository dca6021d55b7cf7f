package main

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// tally is a proxy between one service and DynamoDB Local (and its streams) that counts
// the service's requests and the items they write, by operation and table
// (-count-requests): what a change costs DynamoDB, in the units that cost DynamoDB Local
// its CPU. Unlike meter it changes no request, but it parses every one, which costs the
// bench process CPU: the latency figures of a run with it are not comparable.
type tally struct {
	label string
	// prefix is taken off table names ("<prefix>_", then "<system>_<tenant>_").
	prefix string
	url    string
	srv    *http.Server

	mu     sync.Mutex
	counts map[string]tallyCount
}

// tallyCount is what was counted of one operation on one table.
type tallyCount struct{ requests, written int }

// tallySnapshot is the counts at an instant, by "<operation> <table>".
type tallySnapshot map[string]tallyCount

func newTally(label, target, prefix string) (*tally, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.Transport = &http.Transport{MaxIdleConnsPerHost: 256}
	t := &tally{label: label, prefix: prefix + "_", url: "http://" + ln.Addr().String(), counts: map[string]tallyCount{}}
	t.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		t.count(r.Header.Get("X-Amz-Target"), body)
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = t.srv.Serve(ln) }()
	return t, nil
}

func (t *tally) close() { _ = t.srv.Close() }

// count adds one request: its operation (the part of X-Amz-Target after the dot) on each
// table it names, with the items it writes there.
func (t *tally) count(target string, body []byte) {
	op := target[strings.IndexByte(target, '.')+1:]
	var in struct {
		TableName     string
		TransactItems []map[string]struct{ TableName string }
		RequestItems  map[string][]json.RawMessage
	}
	_ = json.Unmarshal(body, &in)
	written := map[string]int{}
	switch {
	case len(in.TransactItems) > 0:
		for _, it := range in.TransactItems {
			for kind, x := range it {
				n := 1
				if kind == "ConditionCheck" {
					n = 0 // the table is named, nothing written
				}
				written[t.table(x.TableName)] += n
			}
		}
	case len(in.RequestItems) > 0:
		for table, reqs := range in.RequestItems {
			n := 0
			if op == "BatchWriteItem" {
				n = len(reqs)
			}
			written[t.table(table)] += n
		}
	case op == "PutItem" || op == "UpdateItem" || op == "DeleteItem":
		written[t.table(in.TableName)] = 1
	default:
		written[t.table(in.TableName)] = 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for table, n := range written {
		k := strings.TrimSpace(op + " " + table)
		c := t.counts[k]
		c.requests++
		c.written += n
		t.counts[k] = c
	}
}

// table is a table's name without the run's prefix and the bench tenant.
func (t *tally) table(name string) string {
	name = strings.TrimPrefix(name, t.prefix)
	return strings.TrimPrefix(name, benchSystem+"_"+benchTenant+"_")
}

func (t *tally) snapshot() tallySnapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.counts)
}

// report logs what was counted since before, per change, and adds the totals to figures
// (requests_per_op.<label>, items_written_per_op.<label>). A request is counted on each
// table it names, so a transaction across two tables counts twice in requests_per_op: it
// is DynamoDB Local's work by table (each table named costs it a schema read), not the
// number of HTTP requests.
func (t *tally) report(b *bench, figures map[string]float64, before tallySnapshot, changes int) {
	if changes == 0 {
		return
	}
	now := t.snapshot()
	per := func(n int) float64 { return float64(n) / float64(changes) }
	var requests, written int
	for _, k := range slices.Sorted(maps.Keys(now)) {
		d := tallyCount{now[k].requests - before[k].requests, now[k].written - before[k].written}
		if d.requests == 0 {
			continue
		}
		requests += d.requests
		written += d.written
		b.logf("   %-12s %7.3f requests %7.3f items written a change  %s", t.label, per(d.requests), per(d.written), k)
	}
	figures["requests_per_op."+t.label] = per(requests)
	figures["items_written_per_op."+t.label] = per(written)
	b.logf("   %-12s %7.3f requests %7.3f items written a change  (all)", t.label, per(requests), per(written))
}
