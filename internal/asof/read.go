package asof

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Errors of a read; the query API turns them into problems.
var (
	// ErrNotKept: the instant is before what the index covers.
	ErrNotKept = errors.New("history not kept")
	// ErrNotFound: nothing held the name at the instant.
	ErrNotFound = errors.New("not found at that instant")
	// ErrBadCursor: the cursor was not made for this list.
	ErrBadCursor = errors.New("cursor not made for this list")
)

// Member is a member of a group at an instant.
type Member struct {
	// UserID and Username (the name the user held at the instant) are empty for an erased
	// member.
	UserID   string `json:"user_id,omitempty"`
	Username string `json:"username,omitempty"`
	Erased   bool   `json:"erased,omitempty"`
	// AddedAt / AddedBy: the change that began the membership the instant is in.
	AddedAt time.Time `json:"added_at"`
	AddedBy string    `json:"added_by"`
}

// Group is a group a user belonged to at an instant.
type Group struct {
	GroupID string    `json:"group_id"`
	Name    string    `json:"name"`
	AddedAt time.Time `json:"added_at"`
	AddedBy string    `json:"added_by"`
}

// Page is one page of an answer; Next is "" at the end.
type Page[T any] struct {
	Items []T     `json:"items"`
	Next  *string `json:"next_cursor"`
}

// Coverage is the first instant (epoch ms) the index of table answers for; ok is false
// when the index has no coverage mark (it was not built from the tenant's beginning: a
// replay builds it).
func Coverage(ctx context.Context, db ReadDB, table string) (int64, bool, error) {
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(MetaID, CoverageSK)})
	if err != nil {
		return 0, false, err
	}
	v, ok := out.Item["since"].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false, nil
	}
	since, _ := strconv.ParseInt(v.Value, 10, 64)
	return since, true, nil
}

// ReadDB is the part of the DynamoDB client a Reader uses.
type ReadDB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Reader answers as-of reads from a read table.
type Reader struct {
	db   ReadDB
	sign signer
}

// NewReader reads through db. Its cursors are bound to the table and checksummed only;
// SignCursors signs them.
func NewReader(db ReadDB) *Reader { return &Reader{db: db} }

// SignCursors signs the reader's cursors with key and binds them to scope (the system and
// tenant): a cursor continues only the list, tenant, name and instant it was made for.
func (r *Reader) SignCursors(key []byte, scope string) *Reader {
	r.sign = signer{key: key, scope: scope}
	return r
}

// holder is who held name partition p at instant t: the latest holding that began at or
// before t, if it had not ended by t.
func (r *Reader) holder(ctx context.Context, table, p string, t int64) (string, error) {
	out, err := r.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(table), KeyConditionExpression: aws.String("id = :p AND sk <= :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s(p), ":t": s(ms13(t) + "#~")},
		ScanIndexForward:          aws.Bool(false), Limit: aws.Int32(1), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return "", err
	}
	if len(out.Items) == 0 {
		return "", ErrNotFound
	}
	it := out.Items[0]
	if u, ok := num(it, "until"); ok && u <= t {
		return "", ErrNotFound
	}
	w, _ := it["who"].(*types.AttributeValueMemberS)
	if w == nil {
		return "", ErrNotFound
	}
	return w.Value, nil
}

// Members is a page of the members of the group that held name key at instant t.
func (r *Reader) Members(ctx context.Context, table, groupKey string, t int64, limit int, after string) (Page[Member], error) {
	c, err := r.sign.decode(after, table, "members", groupKey, t)
	if err != nil {
		return Page[Member]{}, err
	}
	gid, used, err := r.first(ctx, table, c, groupName(groupKey), t, groupLife, groupRoot)
	if err != nil {
		return Page[Member]{}, err
	}
	var out []Member
	next, err := r.walk(ctx, list{table: table, kind: "members", name: groupKey, of: gid,
		nodeID:   func(l int, i int64) string { return groupNode(gid, l, i) },
		lifeAttr: "h", lifeID: userLife,
		keep: func(it, life map[string]types.AttributeValue) bool {
			m, ok := member(it, life, t)
			if ok {
				out = append(out, m)
			}
			return ok
		}}, t, limit, c, used)
	if err != nil {
		return Page[Member]{}, err
	}
	return Page[Member]{Items: nonNil(out), Next: next}, nil
}

// first is what a list's first page reads before its nodes: who held the name at t (the
// group's id or the user's hash), refused if deleted by t, and the levels its partition
// uses. A later page has them from its cursor.
func (r *Reader) first(ctx context.Context, table string, c *cursor, name string, t int64, lifeID, rootID func(string) string) (string, map[int]bool, error) {
	if c != nil {
		return c.Of, nil, nil
	}
	of, err := r.holder(ctx, table, name, t)
	if err != nil {
		return "", nil, err
	}
	life, used, err := r.lifeAndLevels(ctx, table, lifeID(of), rootID(of))
	if err != nil {
		return "", nil, err
	}
	if d, ok := num(life, "deleted"); ok && d <= t {
		return "", nil, ErrNotFound
	}
	return of, used, nil
}

// Groups is a page of the groups of the user who held username at instant t.
func (r *Reader) Groups(ctx context.Context, table, username string, t int64, limit int, after string) (Page[Group], error) {
	c, err := r.sign.decode(after, table, "groups", username, t)
	if err != nil {
		return Page[Group]{}, err
	}
	h, used, err := r.first(ctx, table, c, userName(username), t, userLife, userRoot)
	if err != nil {
		return Page[Group]{}, err
	}
	var out []Group
	next, err := r.walk(ctx, list{table: table, kind: "groups", name: username, of: h,
		nodeID:   func(l int, i int64) string { return userNode(h, l, i) },
		lifeAttr: "g", lifeID: groupLife,
		keep: func(it, gl map[string]types.AttributeValue) bool {
			if gl == nil {
				return false // not indexed yet: its creation is being projected
			}
			if d, ok := num(gl, "deleted"); ok && d <= t {
				return false
			}
			from, _ := num(it, "from")
			out = append(out, Group{GroupID: str(it, "g"), Name: heldName(gl, t), AddedAt: time.UnixMilli(from).UTC(), AddedBy: str(it, "added_by")})
			return true
		}}, t, limit, c, used)
	if err != nil {
		return Page[Group]{}, err
	}
	return Page[Group]{Items: nonNil(out), Next: next}, nil
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// member is the member an interval item names at t; false for a user deleted by t (the
// user's memberships went with it).
func member(it, life map[string]types.AttributeValue, t int64) (Member, bool) {
	from, _ := num(it, "from")
	m := Member{AddedAt: time.UnixMilli(from).UTC(), AddedBy: str(it, "added_by")}
	if d, ok := num(life, "deleted"); ok && d <= t {
		return Member{}, false
	}
	if life == nil || str(life, "uid") == "" {
		m.Erased = true
		return m, true
	}
	m.UserID, m.Username = str(life, "uid"), heldName(life, t)
	return m, true
}

// heldName is the name a life item says was held at t: the latest that began at or
// before t (or the first, for an instant before it).
func heldName(life map[string]types.AttributeValue, t int64) string {
	type held struct {
		from int64
		name string
	}
	var hs []held
	for a, v := range life {
		if !isNameAttr(a) {
			continue
		}
		from, err := strconv.ParseInt(a[1:], 10, 64)
		sv, ok := v.(*types.AttributeValueMemberS)
		if err == nil && ok {
			hs = append(hs, held{from, sv.Value})
		}
	}
	if len(hs) == 0 {
		return ""
	}
	sort.Slice(hs, func(i, j int) bool { return hs[i].from < hs[j].from })
	name := hs[0].name
	for _, h := range hs {
		if h.from <= t {
			name = h.name
		}
	}
	return name
}

// lifeAndLevels reads a life item and a partition's levels at once.
func (r *Reader) lifeAndLevels(ctx context.Context, table, lifeID, root string) (map[string]types.AttributeValue, map[int]bool, error) {
	var (
		life     map[string]types.AttributeValue
		used     map[int]bool
		lerr, ue error
		wg       sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		life, lerr = r.get(ctx, table, lifeID, lifeSK)
	}()
	used, ue = r.levels(ctx, table, root)
	wg.Wait()
	return life, used, errors.Join(lerr, ue)
}

// levels are the tree levels a partition uses: the root always, the others as noted.
func (r *Reader) levels(ctx context.Context, table, root string) (map[int]bool, error) {
	it, err := r.get(ctx, table, root, levelsSK)
	if err != nil {
		return nil, err
	}
	used := map[int]bool{Depth: true}
	if ns, ok := it["l"].(*types.AttributeValueMemberNS); ok {
		for _, v := range ns.Value {
			if l, err := strconv.Atoi(v); err == nil {
				used[l] = true
			}
		}
	}
	return used, nil
}

func (r *Reader) get(ctx context.Context, table, id, sk string) (map[string]types.AttributeValue, error) {
	out, err := r.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(id, sk)})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// lives reads the life items of ids (BatchGetItem, 100 at a time).
func (r *Reader) lives(ctx context.Context, table string, ids []string, lifeID func(string) string) (map[string]map[string]types.AttributeValue, error) {
	out := map[string]map[string]types.AttributeValue{}
	seen := map[string]bool{}
	var keys []map[string]types.AttributeValue
	for _, id := range ids {
		if id != "" && !seen[id] {
			seen[id] = true
			keys = append(keys, key(lifeID(id), lifeSK))
		}
	}
	for len(keys) > 0 {
		chunk := keys[:min(100, len(keys))]
		keys = keys[len(chunk):]
		req := map[string]types.KeysAndAttributes{table: {Keys: chunk}}
		for attempt := 0; len(req) > 0; attempt++ {
			if attempt > 20 {
				return nil, fmt.Errorf("as-of read: life items left unprocessed")
			}
			if attempt > 0 {
				select {
				case <-ctx.Done():
					return nil, ctx.Err()
				case <-time.After(time.Duration(attempt*20) * time.Millisecond):
				}
			}
			res, err := r.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
			if err != nil {
				return nil, err
			}
			for _, it := range res.Responses[table] {
				for _, a := range []string{"h", "g"} {
					if v := str(it, a); v != "" {
						out[v] = it
					}
				}
			}
			req = res.UnprocessedKeys
		}
	}
	return out, nil
}

func attrs(items []map[string]types.AttributeValue, a string) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, str(it, a))
	}
	return out
}

func str(it map[string]types.AttributeValue, a string) string {
	if v, ok := it[a].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

func num(it map[string]types.AttributeValue, a string) (int64, bool) {
	v, ok := it[a].(*types.AttributeValueMemberN)
	if !ok {
		return 0, false
	}
	x, err := strconv.ParseInt(v.Value, 10, 64)
	return x, err == nil
}

// ErrFuture: the instant has not happened yet.
var ErrFuture = errors.New("the instant is in the future")

// Check refuses an instant the index cannot answer exactly: one after now (ErrFuture);
// one before the oldest history kept (now − retention, when retention is set) or before
// the index's coverage mark, or any instant when the index has none (ErrNotKept).
func (r *Reader) Check(ctx context.Context, table string, t, now time.Time, retention time.Duration) error {
	if t.After(now) {
		return ErrFuture
	}
	if retention > 0 && t.Before(now.Add(-retention)) {
		return ErrNotKept
	}
	since, ok, err := Coverage(ctx, r.db, table)
	if err != nil {
		return err
	}
	if !ok || Millis(t) < since {
		return ErrNotKept
	}
	return nil
}

// Open lists the user hashes of the group's intervals that have not ended (the root's
// start-sorted items without an end), for checks and tests.
func (x *Index) Open(ctx context.Context, table, gid string) ([]string, error) {
	l, i := node(0, Open)
	var out []string
	var start map[string]types.AttributeValue
	for {
		res, err := x.db.Query(ctx, &dynamodb.QueryInput{
			TableName: aws.String(table), KeyConditionExpression: aws.String("id = :p AND begins_with(sk, :s)"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":p": s(groupNode(gid, l, i)), ":s": s("s#")},
			ExclusiveStartKey:         start,
		})
		if err != nil {
			return nil, err
		}
		for _, it := range res.Items {
			if _, ended := it["to"]; !ended {
				out = append(out, str(it, "h"))
			}
		}
		if start = res.LastEvaluatedKey; start == nil {
			sort.Strings(out)
			return out, nil
		}
	}
}
