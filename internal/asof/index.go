package asof

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/events"
)

// DB is the part of the DynamoDB client the index uses.
type DB interface {
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var _ DB = (*dynamodb.Client)(nil)

// Updater is what MarkCoverage needs.
type Updater interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
}

// Eraser is what Erase needs.
type Eraser interface {
	Updater
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
}

// Index keeps the interval index of a tenant's read table. Every write is idempotent and
// order-proof: the membership changes of a (group, user) pair are kept as edges on one
// item (`asof#g#<group id>` / `m#<user hash>`), and the pair's tree items are recomputed
// from all its edges and written in one transaction conditioned on the edges read, so a
// record applied twice, late, or concurrently with another gives the same items.
type Index struct {
	db DB
	// Concurrency bounds the parallel pairs of one members change; 0 means 8.
	Concurrency int
	// noted remembers the levels this process has added to a `levels` item
	// ("<table>/<id>/<level>"), which only ever grows: they need no write again.
	noted sync.Map
}

// New is an Index over db.
func New(db DB) *Index { return &Index{db: db} }

// Apply indexes one event into the read table. Events that change no membership, name or
// lifetime are ignored.
func (x *Index) Apply(ctx context.Context, table string, e events.Envelope) error {
	at := Millis(e.OccurredAt)
	switch p := e.Payload.(type) {
	case *events.GroupCreated:
		return x.groupLife(ctx, table, p.Group.ID, p.Group, 0, "")
	case *events.GroupDeleted:
		return x.groupLife(ctx, table, p.PreviousID, p.Group, at, e.Actor)
	case *events.GroupMemberAdded:
		h := memberHash(p.UserID, p.Erased, p.ErasedIDHash)
		if h == "" {
			return nil
		}
		if err := x.edge(ctx, table, p.Group.ID, h, edgeAttr(e.Version), '+', at, e.Actor); err != nil {
			return err
		}
		if p.ExpiresAt == nil {
			return nil
		}
		return x.expiry(ctx, table, p.Group.ID, h, e.Version, at, p.ExpiresAt)
	case *events.GroupMemberExpirySet:
		h := memberHash(p.UserID, p.Erased, p.ErasedIDHash)
		if h == "" {
			return nil
		}
		return x.expiry(ctx, table, p.Group.ID, h, e.Version, at, p.ExpiresAt)
	case *events.GroupMemberRemoved:
		h := memberHash(p.UserID, p.Erased, p.ErasedIDHash)
		if h == "" {
			return nil
		}
		return x.edge(ctx, table, p.Group.ID, h, edgeAttr(e.Version), '-', at, e.Actor)
	case *events.GroupMembersChanged:
		type change struct {
			h       string
			op      byte
			expires *time.Time
		}
		var cs []change
		for _, m := range p.Added {
			if h := memberHash(m.UserID, m.Erased, m.ErasedIDHash); h != "" {
				cs = append(cs, change{h, '+', m.ExpiresAt})
			}
		}
		for _, m := range p.Removed {
			if h := memberHash(m.UserID, m.Erased, m.ErasedIDHash); h != "" {
				cs = append(cs, change{h, '-', nil})
			}
		}
		return x.each(ctx, len(cs), func(ctx context.Context, i int) error {
			if err := x.edge(ctx, table, p.Group.ID, cs[i].h, edgeAttr(e.Version), cs[i].op, at, e.Actor); err != nil {
				return err
			}
			if cs[i].expires == nil {
				return nil
			}
			return x.expiry(ctx, table, p.Group.ID, cs[i].h, e.Version, at, cs[i].expires)
		})
	case *events.GroupRenamed:
		// Every name the group held, each over its whole holding, from the state's former
		// names: the same items whatever order the records come in (a replay's page
		// applies them side by side), where ending "the latest holding" would miss a
		// holding not indexed yet.
		for _, f := range p.Group.FormerNames {
			if err := x.held(ctx, table, groupName(f.Key), Millis(f.From), p.Group.ID, Millis(f.Until)); err != nil {
				return err
			}
		}
		return x.GroupRenamed(ctx, table, p.Group.ID, p.PreviousKey, p.Group.Key, p.Group.Name, at)
	case *events.UserCreated:
		// The creation's status goes into the life item with its names: one write.
		attr, val := statusOf(p.User, e)
		return x.life(ctx, table, p.User.ID, p.User, 0, "", false, attr, val)
	case *events.UserActivated:
		return x.userStatus(ctx, table, p.User, e)
	case *events.UserDeactivated:
		return x.userStatus(ctx, table, p.User, e)
	case *events.UserUpdated:
		if statusKept(e) {
			return nil
		}
		return x.userStatus(ctx, table, p.User, e)
	case *events.UserRenamed:
		return x.userLife(ctx, table, p.User.ID, p.User, 0, "", false)
	case *events.UserDeleted:
		if err := x.userLife(ctx, table, p.PreviousID, p.User, at, e.Actor, false); err != nil {
			return err
		}
		return x.userGone(ctx, table, p.PreviousID, p.Groups, e)
	case *events.UserErased:
		if err := x.userLife(ctx, table, p.PreviousID, p.User, at, e.Actor, true); err != nil {
			return err
		}
		return x.userGone(ctx, table, p.PreviousID, p.Groups, e)
	}
	return nil
}

// ApplyBatch is Apply of each event, a few at a time (a replay's page).
func (x *Index) ApplyBatch(ctx context.Context, table string, es []events.Envelope) error {
	return x.each(ctx, len(es), func(ctx context.Context, i int) error { return x.Apply(ctx, table, es[i]) })
}

func (x *Index) each(ctx context.Context, n int, f func(context.Context, int) error) error {
	c := x.Concurrency
	if c <= 0 {
		c = 8
	}
	sem := make(chan struct{}, c)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for i := 0; i < n; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer func() { <-sem; wg.Done() }()
			if err := f(ctx, i); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	return first
}

// memberHash is the hash a membership record names its member by: of the user's id, or,
// for a member erased since, the hash the rewritten record kept (events'
// ErasedIDHash: the same one, so a replay pairs the changes as the live index did); ""
// when the record names no one the index can pair (an erased record from before the
// hash was kept).
func memberHash(userID string, erased bool, erasedHash string) string {
	switch {
	case erased:
		return erasedHash
	case userID != "":
		return Hash(userID)
	}
	return ""
}

func key(id, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": s(id), "sk": s(sk)}
}
func s(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
func n(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// userGone ends the intervals of a deleted user in the groups the delete removed them
// from, with an edge of the user's delete (`x<user version>`), so that reads of later
// instants need not pass over them. A group the index cannot name yet (its creation not
// projected) keeps the open interval, which reads drop by the user's life item anyway.
func (x *Index) userGone(ctx context.Context, table, uid string, groups []string, e events.Envelope) error {
	if uid == "" {
		return nil
	}
	at, h := Millis(e.OccurredAt), Hash(uid)
	r := &Reader{db: x.db}
	return x.each(ctx, len(groups), func(ctx context.Context, i int) error {
		gid, err := r.holder(ctx, table, groupName(groups[i]), at)
		if errors.Is(err, ErrNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("as-of index: group of a deleted user: %w", err)
		}
		return x.edge(ctx, table, gid, h, fmt.Sprintf("x%012d", e.Version), '-', at, e.Actor)
	})
}

func nameAttr(from int64) string         { return "n" + ms13(from) }
func isNameAttr(a string) bool           { return len(a) == 14 && a[0] == 'n' }
func edgeAttr(version int64) string      { return fmt.Sprintf("e%012d", version) }
func isEdgeAttr(a string) bool           { return len(a) == 13 && (a[0] == 'e' || a[0] == 'x') }
func itemRef(id, sk string) string       { return id + "\x00" + sk }
func splitRef(r string) (string, string) { id, sk, _ := strings.Cut(r, "\x00"); return id, sk }

// groupLife records a group's name and creation, or (deleted > 0) its deletion and who
// deleted it (the access report ends the group's intervals there).
func (x *Index) groupLife(ctx context.Context, table, gid string, g events.Group, deleted int64, by string) error {
	if gid == "" {
		return nil
	}
	created := Millis(g.CreatedAt)
	// A creation names the group from its creation on; a deletion (whose state carries
	// the name it held last, maybe a later one) only ends it.
	set := "SET g = :g, created = :c, #n = :name"
	vals := map[string]types.AttributeValue{":g": s(gid), ":c": n(created), ":name": s(g.Name)}
	names := map[string]string{"#n": nameAttr(created)}
	if deleted > 0 {
		set = "SET g = :g, deleted = :d, deleted_by = :by"
		vals = map[string]types.AttributeValue{":g": s(gid), ":d": n(deleted), ":by": s(by)}
		names = nil
	}
	if _, err := x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key(groupLife(gid), lifeSK), UpdateExpression: aws.String(set),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals,
	}); err != nil {
		return fmt.Errorf("as-of index: group %s: %w", gid, err)
	}
	if deleted > 0 {
		// The name the group held last (since its creation or its last rename) ends.
		return x.endHolding(ctx, table, groupName(g.Key), gid, deleted)
	}
	return x.held(ctx, table, groupName(g.Key), created, gid, 0)
}

// endHolding ends, at instant at, the latest holding of the name partition by id that
// began before at. A holding not indexed yet (records applied out of order) is left: the
// life item's deletion or rename decides the reads then.
func (x *Index) endHolding(ctx context.Context, table, partition, id string, at int64) error {
	out, err := x.db.Query(ctx, &dynamodb.QueryInput{
		TableName: aws.String(table), KeyConditionExpression: aws.String("id = :p AND sk <= :t"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":p": s(partition), ":t": s(ms13(at) + "#~")},
		ScanIndexForward:          aws.Bool(false), ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("as-of index: end a name holding: %w", err)
	}
	for _, it := range out.Items {
		if str(it, "who") != id {
			continue
		}
		if from, ok := num(it, "from"); ok && from < at {
			return x.held(ctx, table, partition, from, id, at)
		}
		return nil
	}
	return nil
}

// held records that id held a name from `from` on (until `until`, when not 0).
func (x *Index) held(ctx context.Context, table, partition string, from int64, id string, until int64) error {
	set := "SET who = :w, #f = :f"
	vals := map[string]types.AttributeValue{":w": s(id), ":f": n(from)}
	names := map[string]string{"#f": "from"}
	if until > 0 {
		set += ", #u = :u"
		vals[":u"] = n(until)
		names["#u"] = "until"
	}
	_, err := x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key(partition, ms13(from)+"#"+id), UpdateExpression: aws.String(set),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
	})
	if err != nil {
		return fmt.Errorf("as-of index: name holder: %w", err)
	}
	return nil
}

// userLife records a user's names (every name it held, from the state's former names) and
// creation, or (deleted > 0) its deletion and who deleted it; erased marks an erasure,
// whose sweep (Erase) then removes the names.
func (x *Index) userLife(ctx context.Context, table, uid string, u events.User, deleted int64, by string, erased bool) error {
	return x.life(ctx, table, uid, u, deleted, by, erased, "", "")
}

// life is userLife, with a status record (userStatus's attribute and value) written in
// the same update when statusAttr is not empty. The life item and the names' holder items
// are written side by side: each write is a SET of its own attributes, idempotent and
// order-proof.
func (x *Index) life(ctx context.Context, table, uid string, u events.User, deleted int64, by string, erased bool, statusAttr, statusVal string) error {
	if uid == "" {
		return nil
	}
	h := Hash(uid)
	names := map[string]types.AttributeValue{}
	attrNames := map[string]string{}
	vals := map[string]types.AttributeValue{":h": s(h)}
	set := []string{"h = :h"}
	if deleted > 0 {
		set = append(set, "deleted = :d", "deleted_by = :by")
		vals[":d"], vals[":by"] = n(deleted), s(by)
		if erased {
			set = append(set, "erased = :t")
			vals[":t"] = &types.AttributeValueMemberBOOL{Value: true}
		}
	} else {
		set = append(set, "uid = :uid", "created = :c")
		vals[":uid"] = s(uid)
		vals[":c"] = n(Millis(u.CreatedAt))
		holdings := map[int64]string{Millis(u.Named()): u.Username}
		for _, f := range u.FormerNames {
			holdings[Millis(f.From)] = f.Username
		}
		i := 0
		for from, name := range holdings {
			p, v := fmt.Sprintf("#n%d", i), fmt.Sprintf(":n%d", i)
			attrNames[p] = nameAttr(from)
			vals[v] = s(name)
			names[name] = nil
			set = append(set, p+" = "+v)
			i++
		}
	}
	if statusAttr != "" {
		set = append(set, "#s = :sv")
		attrNames["#s"], vals[":sv"] = statusAttr, s(statusVal)
	}
	in := &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key(userLife(h), lifeSK),
		UpdateExpression: aws.String("SET " + strings.Join(set, ", ")), ExpressionAttributeValues: vals,
	}
	if len(attrNames) > 0 {
		in.ExpressionAttributeNames = attrNames
	}
	type holding struct {
		name        string
		from, until int64
	}
	var holdings []holding
	if deleted == 0 { // a deletion: the name's holder item ends where the life item says (read side)
		holdings = append(holdings, holding{u.Username, Millis(u.Named()), 0})
		for _, f := range u.FormerNames {
			holdings = append(holdings, holding{f.Username, Millis(f.From), Millis(f.Until)})
		}
	}
	return x.each(ctx, 1+len(holdings), func(ctx context.Context, i int) error {
		if i == 0 {
			if _, err := x.db.UpdateItem(ctx, in); err != nil {
				return fmt.Errorf("as-of index: user life: %w", err)
			}
			return nil
		}
		hd := holdings[i-1]
		return x.held(ctx, table, userName(hd.name), hd.from, h, hd.until)
	})
}

// edge is one membership change of a pair: recorded on the pair's item, then the pair's
// tree items are made to match all its edges.
func (x *Index) edge(ctx context.Context, table, gid, h, attr string, op byte, at int64, actor string) error {
	if gid == "" {
		return nil
	}
	pk, sk := groupRoot(gid), pairPfx+h
	out, err := x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key(pk, sk),
		UpdateExpression:          aws.String("SET #e = :e, g = :g, h = :h ADD n :one"),
		ConditionExpression:       aws.String("attribute_not_exists(#e)"),
		ExpressionAttributeNames:  map[string]string{"#e": attr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":e": s(fmt.Sprintf("%c|%d|%s", op, at, actor)), ":g": s(gid), ":h": s(h), ":one": n(1)},
		ReturnValues:              types.ReturnValueAllNew,
	})
	var item map[string]types.AttributeValue
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		// already recorded: make sure its tree items were written too
	case err != nil:
		return fmt.Errorf("as-of index: edge of group %s: %w", gid, err)
	default:
		item = out.Attributes
	}
	for attempt := 0; attempt < 50; attempt++ {
		if item == nil {
			got, err := x.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(pk, sk), ConsistentRead: aws.Bool(true)})
			if err != nil {
				return fmt.Errorf("as-of index: read pair of group %s: %w", gid, err)
			}
			item = got.Item
		}
		err := x.reconcile(ctx, table, gid, h, item)
		if !errors.Is(err, errRace) {
			return err
		}
		item = nil
	}
	return fmt.Errorf("as-of index: pair of group %s kept changing", gid)
}

var errRace = errors.New("the pair changed meanwhile")
