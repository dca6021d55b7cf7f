package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// meter is a proxy between one service and DynamoDB Local that counts the capacity units
// the service's requests consume. It asks DynamoDB for them (ReturnConsumedCapacity
// INDEXES) and adds up what it answers — except where DynamoDB Local's answer does not
// follow AWS's published rules, where the meter counts by those rules from the items'
// sizes (measured: DynamoDB Local reports 4 units per table for any TransactWriteItems, of
// one item or of twenty-five):
//   - a transactional write costs 2 write units per KB of each item it writes or checks,
//     in the table and, for a write, in each index the item is in (for an update, of the
//     larger of the item before and after, read with consistent GetItems that the meter
//     does not count);
//   - a conditional write that fails costs 1 write unit per KB of the item it would have
//     written (AWS charges it; DynamoDB Local answers the error without a figure).
type meter struct {
	target string
	db     *dynamodb.Client
	srv    *http.Server
	url    string
	client *http.Client

	mu          sync.Mutex
	read, write float64
	// items counts the items the service's reads returned.
	items int
	gsis  map[string][][]string
}

// capacity is what a meter counted.
type capacity struct{ read, write float64 }

func (c capacity) minus(d capacity) capacity { return capacity{c.read - d.read, c.write - d.write} }

func newMeter(target string, db *dynamodb.Client) (*meter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	m := &meter{target: strings.TrimRight(target, "/"), db: db, url: "http://" + ln.Addr().String(),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}, gsis: map[string][][]string{}}
	m.srv = &http.Server{Handler: m}
	go func() { _ = m.srv.Serve(ln) }()
	return m, nil
}

func (m *meter) close() { _ = m.srv.Close() }

func (m *meter) counted() capacity {
	m.mu.Lock()
	defer m.mu.Unlock()
	return capacity{m.read, m.write}
}

// itemsRead is how many items the service's reads returned so far.
func (m *meter) itemsRead() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.items
}

// countItems adds the items a read's answer holds.
func (m *meter) countItems(op string, answer []byte) {
	var a struct {
		Item         map[string]any
		Items        []any
		Responses    json.RawMessage
		ScannedCount int
	}
	if json.Unmarshal(answer, &a) != nil {
		return
	}
	n := len(a.Items)
	if a.Item != nil {
		n++
	}
	if op == "Query" && a.Items == nil {
		// A COUNT Query reads the items it counts without returning them.
		n += a.ScannedCount
	}
	switch op {
	case "BatchGetItem":
		var byTable map[string][]any
		_ = json.Unmarshal(a.Responses, &byTable)
		for _, items := range byTable {
			n += len(items)
		}
	case "TransactGetItems":
		var list []struct{ Item map[string]any }
		_ = json.Unmarshal(a.Responses, &list)
		for _, it := range list {
			if it.Item != nil {
				n++
			}
		}
	}
	m.mu.Lock()
	m.items += n
	m.mu.Unlock()
}

func (m *meter) add(read, write float64) {
	m.mu.Lock()
	m.read += read
	m.write += write
	m.mu.Unlock()
}

var metered = map[string]bool{"GetItem": true, "PutItem": true, "UpdateItem": true, "DeleteItem": true, "Query": true, "Scan": true,
	"BatchGetItem": true, "BatchWriteItem": true, "TransactWriteItems": true, "TransactGetItems": true}

func (m *meter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	var req map[string]any
	if metered[op] && json.Unmarshal(body, &req) == nil {
		req["ReturnConsumedCapacity"] = "INDEXES"
		body, _ = json.Marshal(req)
	} else {
		req = nil
	}
	var before []map[string]any
	if op == "TransactWriteItems" && req != nil {
		before = m.transactionItems(r.Context(), req)
	}
	out, _ := http.NewRequestWithContext(r.Context(), r.Method, m.target+r.URL.RequestURI(), bytes.NewReader(body))
	for k, v := range r.Header {
		if k != "Content-Length" && k != "Accept-Encoding" {
			out.Header[k] = v
		}
	}
	resp, err := m.client.Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
	if req != nil {
		m.account(r.Context(), op, req, before, resp.StatusCode, answer)
	}
}

func (m *meter) account(ctx context.Context, op string, req map[string]any, before []map[string]any, status int, answer []byte) {
	if op == "TransactWriteItems" {
		if status == http.StatusOK || strings.Contains(string(answer), "TransactionCanceled") {
			m.add(0, m.transactionUnits(ctx, req, before))
		}
		return
	}
	if status == http.StatusOK {
		switch op {
		case "GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems":
			m.countItems(op, answer)
		}
	}
	if status != http.StatusOK {
		if strings.Contains(string(answer), "ConditionalCheckFailed") {
			units := 1.0
			if it, ok := req["Item"].(map[string]any); ok {
				units = kb(itemSize(it), 1024)
			}
			m.add(0, units)
		}
		return
	}
	var resp struct {
		ConsumedCapacity json.RawMessage
	}
	if json.Unmarshal(answer, &resp) != nil || len(resp.ConsumedCapacity) == 0 {
		return
	}
	var list []consumed
	if resp.ConsumedCapacity[0] == '[' {
		_ = json.Unmarshal(resp.ConsumedCapacity, &list)
	} else {
		var one consumed
		_ = json.Unmarshal(resp.ConsumedCapacity, &one)
		list = []consumed{one}
	}
	for _, c := range list {
		switch op {
		case "GetItem", "Query", "Scan", "BatchGetItem", "TransactGetItems":
			m.add(c.CapacityUnits, 0)
		default:
			m.add(0, c.CapacityUnits)
		}
	}
}

type consumed struct {
	CapacityUnits float64
}

// kb is units of size bytes in blocks of block bytes (at least one).
func kb(size, block int) float64 { return math.Max(1, math.Ceil(float64(size)/float64(block))) }

// transactionItems reads (consistently, uncounted) the items a transaction updates,
// deletes or checks, before it runs.
func (m *meter) transactionItems(ctx context.Context, req map[string]any) []map[string]any {
	items, _ := req["TransactItems"].([]any)
	out := make([]map[string]any, len(items))
	for i, raw := range items {
		for kind, v := range raw.(map[string]any) {
			if kind == "Put" {
				continue
			}
			a := v.(map[string]any)
			out[i] = m.getItem(ctx, a["TableName"].(string), a["Key"])
		}
	}
	return out
}

func (m *meter) getItem(ctx context.Context, table string, key any) map[string]any {
	raw, _ := json.Marshal(map[string]any{"TableName": table, "Key": key, "ConsistentRead": true})
	req, _ := http.NewRequestWithContext(ctx, "POST", m.target+"/", bytes.NewReader(raw))
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.GetItem")
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=dummy/20260101/us-east-1/dynamodb/aws4_request, SignedHeaders=host, Signature=0")
	resp, err := m.client.Do(req)
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var out struct{ Item map[string]any }
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out.Item
}

// transactionUnits counts a transaction by AWS's rules: 2 units per KB of each item, in
// its table and each index it is in.
func (m *meter) transactionUnits(ctx context.Context, req map[string]any, before []map[string]any) float64 {
	items, _ := req["TransactItems"].([]any)
	total := 0.0
	for i, raw := range items {
		for kind, v := range raw.(map[string]any) {
			a := v.(map[string]any)
			table := a["TableName"].(string)
			var sizes []map[string]any
			switch kind {
			case "Put":
				sizes = []map[string]any{a["Item"].(map[string]any)}
			case "Update":
				sizes = []map[string]any{before[i], m.getItem(ctx, table, a["Key"])}
			default:
				sizes = []map[string]any{before[i]}
			}
			size, in := 0, 0
			for _, it := range sizes {
				if it == nil {
					continue
				}
				size = max(size, itemSize(it))
				if kind != "ConditionCheck" {
					// A check writes nothing, so no index either.
					in = max(in, m.indexesHolding(ctx, table, it))
				}
			}
			total += 2 * kb(size, 1024) * float64(1+in)
		}
	}
	return total
}

// indexesHolding is how many of the table's GSIs an item is in (it has their keys).
func (m *meter) indexesHolding(ctx context.Context, table string, it map[string]any) int {
	m.mu.Lock()
	keys, ok := m.gsis[table]
	m.mu.Unlock()
	if !ok {
		d, err := m.db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return 0
		}
		for _, g := range d.Table.GlobalSecondaryIndexes {
			var k []string
			for _, e := range g.KeySchema {
				k = append(k, aws.ToString(e.AttributeName))
			}
			keys = append(keys, k)
		}
		m.mu.Lock()
		m.gsis[table] = keys
		m.mu.Unlock()
	}
	n := 0
	for _, k := range keys {
		all := true
		for _, a := range k {
			if _, ok := it[a]; !ok {
				all = false
			}
		}
		if all {
			n++
		}
	}
	return n
}

// itemSize is an item's size by DynamoDB's rules (attribute names plus values; numbers
// about one byte per two digits plus one), from its wire JSON.
func itemSize(it map[string]any) int {
	n := 0
	for name, v := range it {
		n += len(name) + valueSize(v)
	}
	return n
}

func valueSize(v any) int {
	av, ok := v.(map[string]any)
	if !ok {
		return 0
	}
	for t, x := range av {
		switch t {
		case "S", "B":
			s, _ := x.(string)
			if t == "B" {
				return len(s) * 3 / 4
			}
			return len(s)
		case "N":
			s, _ := x.(string)
			return (len(strings.TrimLeft(s, "-0"))+1)/2 + 1
		case "BOOL", "NULL":
			return 1
		case "SS", "NS", "BS":
			n := 0
			for _, e := range x.([]any) {
				n += len(e.(string))
			}
			return n
		case "L":
			n := 3
			for _, e := range x.([]any) {
				n += 1 + valueSize(e)
			}
			return n
		case "M":
			n := 3
			for k, e := range x.(map[string]any) {
				n += 1 + len(k) + valueSize(e)
			}
			return n
		}
	}
	return 0
}
