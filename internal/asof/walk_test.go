package asof_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/asof"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
)

// longHistory is a group with changes of users at gaps from a second to a day, so that
// the intervals at an instant sit on many levels of the tree; truth reads the log.
func longHistory(users, changes int) (*history, func(at int64) []string, []time.Time) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	h := &history{t0: t0}
	g := events.Group{ID: "g-long", Key: "audited", Name: "audited", CreatedAt: t0}
	h.add(0, events.KindGroup, "audited", "admin", &events.GroupCreated{Group: g})
	for u := range users {
		h.add(0, events.KindUser, fmt.Sprintf("m%02d", u), "admin", &events.UserCreated{User: user(fmt.Sprintf("id%02d", u), fmt.Sprintf("m%02d", u), t0)})
	}
	type change struct {
		at  int64
		u   int
		add bool
	}
	var log []change
	in := map[int]bool{}
	rng := rand.New(rand.NewPCG(38, 1))
	sec := 0.0
	var times []time.Time
	for range changes {
		sec += []float64{1, 60, 3600, 86400}[rng.IntN(4)]
		u := rng.IntN(users)
		name, id := fmt.Sprintf("m%02d", u), fmt.Sprintf("id%02d", u)
		var p events.Payload = &events.GroupMemberAdded{Group: g, Username: name, UserID: id}
		if in[u] {
			p = &events.GroupMemberRemoved{Group: g, Username: name, UserID: id}
		}
		in[u] = !in[u]
		h.add(sec, events.KindGroup, "audited", "admin", p)
		times = append(times, h.at(sec))
		log = append(log, change{at: asof.Millis(h.at(sec)), u: u, add: in[u]})
	}
	truth := func(at int64) []string {
		now := map[int]bool{}
		for _, c := range log {
			if c.at <= at {
				now[c.u] = c.add
			}
		}
		out := []string{}
		for u, ok := range now {
			if ok {
				out = append(out, fmt.Sprintf("m%02d/id%02d", u, u))
			}
		}
		slices.Sort(out)
		return out
	}
	return h, truth, times
}

// TestEveryPageSizeGivesTheAnswer reads a long history at instants whose members sit on
// many nodes with every page size up to the answer's: pages that end inside a node, on
// a node's last item (the next page goes on at the next node) and across nodes the first
// page proved empty all give the log's answer, each member once.
func TestEveryPageSizeGivesTheAnswer(t *testing.T) {
	ctx := context.Background()
	x, r, table := newTable(t)
	h, truth, times := longHistory(24, 160)
	if err := x.ApplyBatch(ctx, table, h.es); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{times[len(times)/2], times[len(times)/3].Add(time.Millisecond), times[len(times)-1]} {
		want := truth(asof.Millis(at))
		if len(want) < 4 {
			t.Fatalf("at %s: %d members, too few to page", at, len(want))
		}
		for limit := 1; limit <= len(want)+1; limit++ {
			got, err := members(t, r, table, "audited", at, limit)
			if err != nil || !slices.Equal(got, want) {
				t.Fatalf("at %s, pages of %d: %v, %v; the log says %v", at, limit, got, err, want)
			}
		}
	}
}

// recorder counts what a reader asks of DynamoDB, page by page.
type recorder struct {
	asof.ReadDB
	mu    sync.Mutex
	page  int
	calls []call
}

type call struct {
	page      int
	op, id    string
	continued bool // the Query went on from a key
	items     int
	more      bool
}

func (c *recorder) note(k call) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k.page = c.page
	c.calls = append(c.calls, k)
}

func (c *recorder) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.note(call{op: "get", id: keyID(in.Key)})
	return c.ReadDB.GetItem(ctx, in, o...)
}

func (c *recorder) Query(ctx context.Context, in *dynamodb.QueryInput, o ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := c.ReadDB.Query(ctx, in, o...)
	if err == nil {
		c.note(call{op: "query", id: keyID(in.ExpressionAttributeValues), continued: in.ExclusiveStartKey != nil, items: len(out.Items), more: out.LastEvaluatedKey != nil})
	}
	return out, err
}

// keyID is the partition a key or a Query's values name.
func keyID(m map[string]types.AttributeValue) string {
	for _, k := range []string{"id", ":p"} {
		if v, ok := m[k].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
	}
	return ""
}

func dbOf(t *testing.T) *dynamodb.Client { return dynamotest.Current(t).DynamoDB() }

// TestLaterPagesReadOnlyWhatIsLeft: the first page reads the name's holder and the
// group's levels; later pages read neither (the cursor carries them), never read again a
// node an earlier page found empty, and ask no node for more than the page still needs.
func TestLaterPagesReadOnlyWhatIsLeft(t *testing.T) {
	ctx := context.Background()
	x, _, table := newTable(t)
	h, truth, times := longHistory(24, 160)
	if err := x.ApplyBatch(ctx, table, h.es); err != nil {
		t.Fatal(err)
	}
	at := times[len(times)/2]
	want := truth(asof.Millis(at))
	const limit = 3
	rec := &recorder{ReadDB: dbOf(t)}
	r := asof.NewReader(rec)
	var got []string
	cursor := ""
	for rec.page = 0; ; rec.page++ {
		p, err := r.Members(ctx, table, "audited", asof.Millis(at), limit, cursor)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range p.Items {
			got = append(got, m.Username+"/"+m.UserID)
		}
		if p.Next == nil {
			break
		}
		cursor = *p.Next
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, the log says %v", got, want)
	}
	if rec.page < 3 {
		t.Fatalf("%d pages: the history does not exercise paging", rec.page+1)
	}
	empty := map[string]bool{}
	nodes := map[string]bool{}
	for _, c := range rec.calls {
		node := strings.HasPrefix(c.id, "asof#g#g-long#")
		if node {
			nodes[c.id] = true
		}
		switch {
		case c.page > 0 && (c.op == "get" || !node):
			t.Errorf("page %d read %s %s: a later page reads only nodes", c.page, c.op, c.id)
		case node && empty[c.id]:
			t.Errorf("page %d read node %s again, found empty before", c.page, c.id)
		case node && c.items > limit+1:
			t.Errorf("page %d read %d items of node %s for a page of %d", c.page, c.items, c.id, limit)
		}
		if node && !c.continued && c.items == 0 && !c.more {
			empty[c.id] = true
		}
	}
	if len(nodes) < 4 || len(empty) == 0 {
		t.Fatalf("the instant's path has %d used nodes, %d of them empty: the history does not exercise the walk", len(nodes), len(empty))
	}
}

// TestACursorContinuesOnlyItsGroupAndTenant: a cursor is refused on another group at the
// same instant, by a reader of another tenant or key, and once edited.
func TestACursorContinuesOnlyItsGroupAndTenant(t *testing.T) {
	ctx := context.Background()
	x, _, table := newTable(t)
	h := story()
	for _, e := range h.es {
		if err := x.Apply(ctx, table, e); err != nil {
			t.Fatal(err)
		}
	}
	ops := events.Group{ID: "g-ops", Key: "ops", Name: "Ops", CreatedAt: h.at(1)}
	h.add(1, events.KindGroup, "ops", "admin", &events.GroupCreated{Group: ops})
	h.add(2, events.KindGroup, "ops", "admin", &events.GroupMembersChanged{Group: ops,
		Added: []events.Member{{Username: "alice", UserID: "u-alice"}, {Username: "bob", UserID: "u-bob"}}})
	for _, e := range h.es[len(h.es)-2:] {
		if err := x.Apply(ctx, table, e); err != nil {
			t.Fatal(err)
		}
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	reader := func(k []byte, scope string) *asof.Reader { return asof.NewReader(dbOf(t)).SignCursors(k, scope) }
	at := asof.Millis(h.at(3.5))
	p, err := reader(key, "acme/eu").Members(ctx, table, "eng", at, 1, "")
	if err != nil || p.Next == nil {
		t.Fatalf("first page %+v, %v", p, err)
	}
	if q, err := reader(key, "acme/eu").Members(ctx, table, "eng", at, 1, *p.Next); err != nil || len(q.Items) != 1 {
		t.Fatalf("second page %+v, %v", q, err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(*p.Next)
	raw[len(raw)-2] ^= 1 // inside the body, after the signature
	edited := base64.RawURLEncoding.EncodeToString(raw)
	for name, c := range map[string]struct {
		r      *asof.Reader
		group  string
		cursor string
	}{
		"another group":  {reader(key, "acme/eu"), "ops", *p.Next},
		"another tenant": {reader(key, "acme/us"), "eng", *p.Next},
		"another key":    {reader([]byte("another key"), "acme/eu"), "eng", *p.Next},
		"edited":         {reader(key, "acme/eu"), "eng", edited},
	} {
		if q, err := c.r.Members(ctx, table, c.group, at, 1, c.cursor); !errors.Is(err, asof.ErrBadCursor) {
			t.Errorf("%s: %+v, %v; want a bad cursor", name, q, err)
		}
	}
}
