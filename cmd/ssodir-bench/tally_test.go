package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestTallyCountsRequestsAndWrittenItemsByTable: a tally passes every request on
// unchanged and counts it once on each table it names, with the items it writes there (a
// transaction's condition checks write nothing, a batch get writes nothing, a stream read
// names no table), and reports them per change.
func TestTallyCountsRequestsAndWrittenItemsByTable(t *testing.T) {
	var seen []string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		seen = append(seen, r.Header.Get("X-Amz-Target")+" "+string(body))
		_, _ = w.Write([]byte("{}"))
	}))
	defer target.Close()
	tl, err := newTally("projector", target.URL, "p1")
	if err != nil {
		t.Fatal(err)
	}
	defer tl.close()
	cmds, users := "p1_"+benchSystem+"_"+benchTenant+"_user_commands", "p1_"+benchSystem+"_"+benchTenant+"_users"
	requests := []struct{ target, body string }{
		{"DynamoDB_20120810.TransactWriteItems", `{"TransactItems":[{"Put":{"TableName":"` + cmds + `"}},{"Update":{"TableName":"` + cmds + `"}},{"ConditionCheck":{"TableName":"` + users + `"}}]}`},
		{"DynamoDB_20120810.BatchWriteItem", `{"RequestItems":{"p1_events":[{},{},{}]}}`},
		{"DynamoDB_20120810.BatchGetItem", `{"RequestItems":{"p1_erasures":{"Keys":[{}]}}}`},
		{"DynamoDB_20120810.UpdateItem", `{"TableName":"` + users + `"}`},
		{"DynamoDB_20120810.UpdateItem", `{"TableName":"` + users + `"}`},
		{"DynamoDBStreams_20120810.GetRecords", `{"ShardIterator":"x"}`},
	}
	before := tl.snapshot()
	for _, r := range requests {
		req, _ := http.NewRequest("POST", tl.url, strings.NewReader(r.body))
		req.Header.Set("X-Amz-Target", r.target)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	if len(seen) != len(requests) || !strings.HasSuffix(seen[1], requests[1].body) {
		t.Errorf("the target saw %q", seen)
	}
	want := tallySnapshot{
		"TransactWriteItems user_commands": {1, 2}, "TransactWriteItems users": {1, 0},
		"BatchWriteItem events": {1, 3}, "BatchGetItem erasures": {1, 0}, "UpdateItem users": {2, 2}, "GetRecords": {1, 0},
	}
	got := tl.snapshot()
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %+v, want %+v", k, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("counted %v, want %v", got, want)
	}
	var log bytes.Buffer
	figures := map[string]float64{}
	tl.report(&bench{log: &log}, figures, before, 2)
	if figures["requests_per_op.projector"] != 3.5 || figures["items_written_per_op.projector"] != 3.5 {
		t.Errorf("figures %v, want 3.5 requests and 3.5 items a change (7 counted of each over 2 changes)", figures)
	}
	if !strings.Contains(log.String(), "UpdateItem users") {
		t.Errorf("the log names no operation and table:\n%s", log.String())
	}
}
