package asof

import (
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// list is what a walk needs of one as-of list: its partition's nodes, and how an item's
// life is found and judged.
type list struct {
	table, kind, name string
	// of is the group's id (the user's hash) the partition is named by.
	of     string
	nodeID func(level int, index int64) string
	// lifeAttr names an item's life (its lifeID); keep decides the item with it.
	lifeAttr string
	lifeID   func(string) string
	keep     func(it, life map[string]types.AttributeValue) bool
}

// nodeRead is a node of t's path as a walk reads it.
type nodeRead struct {
	st    step
	start map[string]types.AttributeValue // where the next Query goes on (nil: the beginning)
	known bool                            // a read found items here
	done  bool                            // read to its end
	ahead *dynamodb.QueryOutput           // a probe's answer not consumed yet
}

// pending is an item read and not yet judged, and the node it came from.
type pending struct {
	it   map[string]types.AttributeValue
	node int
}

// walk reads a page of the answers at t: the items of the used nodes of t's path, root
// first, from the cursor on. Every node is read with the page's remaining count as its
// Limit (plus one, to see its end), so a page reads about a page of items; its life items
// are read in one BatchGetItem. The first read of a page goes alone (a group's current
// members are all at the root, which then fills the page); when the page goes on into
// nodes no read has found items at yet, those are read together, once (most are empty at
// most instants), and the cursor keeps which held items: later pages read only those,
// one after the other, as the page needs them. A cursor carries the partition and its
// levels, so a later page reads neither the name's holder nor the `levels` item.
func (r *Reader) walk(ctx context.Context, l list, t int64, limit int, c *cursor, used map[int]bool) (*string, error) {
	byLevel := map[int]step{}
	var nodes []*nodeRead
	for _, st := range path(t) {
		byLevel[st.level] = st
		if c == nil && used[st.level] {
			nodes = append(nodes, &nodeRead{st: st})
		}
	}
	if c != nil {
		st := byLevel[c.Level]
		nodes = append(nodes, &nodeRead{st: st, start: key(l.nodeID(st.level, st.index), c.SK), known: true})
		for _, lv := range levelsOf(c.Rest) {
			nodes = append(nodes, &nodeRead{st: byLevel[lv], known: c.Known&(1<<lv) != 0})
		}
	}
	var queue []pending
	next, reads := 0, 0
	take := func(i int, out *dynamodb.QueryOutput) {
		nd := nodes[i]
		if len(out.Items) > 0 {
			nd.known = true
		}
		for _, it := range out.Items {
			queue = append(queue, pending{it: it, node: i})
		}
		if out.LastEvaluatedKey == nil {
			nd.done = true
		} else {
			nd.start = out.LastEvaluatedKey
		}
	}
	// fill reads until need items wait or the path is read to its end.
	fill := func(need int) error {
		for len(queue) < need && next < len(nodes) {
			nd := nodes[next]
			switch {
			case nd.done:
				next++
			case nd.ahead != nil:
				out := nd.ahead
				nd.ahead = nil
				take(next, out)
			case !nd.known && reads > 0:
				if err := r.probe(ctx, l, nodes[next:], t, need-len(queue)); err != nil {
					return err
				}
				reads++
			default:
				out, err := r.db.Query(ctx, nodeQuery(l, nd, t, need-len(queue)))
				if err != nil {
					return err
				}
				reads++
				take(next, out)
			}
		}
		return nil
	}
	lives := map[string]map[string]types.AttributeValue{}
	fetched := map[string]bool{}
	got := 0
	for {
		need := limit - got
		if err := fill(need); err != nil {
			return nil, err
		}
		if len(queue) == 0 {
			return nil, nil
		}
		chunk := queue[:min(need, len(queue))]
		var ids []string
		for _, p := range chunk {
			if id := str(p.it, l.lifeAttr); !fetched[id] {
				fetched[id] = true
				ids = append(ids, id)
			}
		}
		more, err := r.lives(ctx, l.table, ids, l.lifeID)
		if err != nil {
			return nil, err
		}
		for id, life := range more {
			lives[id] = life
		}
		for i, p := range chunk {
			if !l.keep(p.it, lives[str(p.it, l.lifeAttr)]) {
				continue
			}
			if got++; got < limit {
				continue
			}
			if i == len(queue)-1 && atEnd(nodes[next:]) {
				return nil, nil // nothing follows: no page to continue into
			}
			last := cursor{Kind: l.kind, Of: l.of, At: t, Level: nodes[p.node].st.level, SK: str(p.it, "sk")}
			for _, nd := range nodes[p.node+1:] {
				if nd.done && !nd.known {
					continue // proved empty
				}
				last.Rest |= 1 << nd.st.level
				if nd.known {
					last.Known |= 1 << nd.st.level
				}
			}
			return r.sign.encode(last, l.table, l.name), nil
		}
		queue = queue[len(chunk):]
	}
}

// atEnd: every node of nodes has been read to its end, and nothing read waits.
func atEnd(nodes []*nodeRead) bool {
	for _, nd := range nodes {
		if !nd.done || nd.ahead != nil {
			return false
		}
	}
	return true
}

// probe reads together the nodes no read has found items at yet, each up to need items;
// the answers wait in the nodes (ahead) until the walk reaches them.
func (r *Reader) probe(ctx context.Context, l list, nodes []*nodeRead, t int64, need int) error {
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for i, nd := range nodes {
		if nd.known || nd.done || nd.ahead != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			nd.ahead, errs[i] = r.db.Query(ctx, nodeQuery(l, nd, t, need))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// What the probe found counts for the cursor before the walk reaches the node.
	for _, nd := range nodes {
		switch {
		case nd.ahead == nil:
		case len(nd.ahead.Items) > 0:
			nd.known = true
		case nd.ahead.LastEvaluatedKey == nil:
			nd.done, nd.ahead = true, nil // empty
		}
	}
	return nil
}

// nodeQuery reads up to need answers at t from a node (one more, to see its end), only
// the attributes an answer uses.
func nodeQuery(l list, nd *nodeRead, t int64, need int) *dynamodb.QueryInput {
	st := nd.st
	q := &dynamodb.QueryInput{TableName: aws.String(l.table), KeyConditionExpression: aws.String("id = :p AND sk BETWEEN :lo AND :hi"),
		Limit: aws.Int32(int32(need + 1)), ExclusiveStartKey: nd.start,
		ProjectionExpression:     aws.String("#k, #o, #f, #a"),
		ExpressionAttributeNames: map[string]string{"#k": "sk", "#o": l.lifeAttr, "#f": "from", "#a": "added_by"},
	}
	if st.byStart {
		q.ExpressionAttributeValues = map[string]types.AttributeValue{":p": s(l.nodeID(st.level, st.index)), ":lo": s("s#"), ":hi": s("s#" + ms13(t) + "#~")}
	} else {
		q.ExpressionAttributeValues = map[string]types.AttributeValue{":p": s(l.nodeID(st.level, st.index)), ":lo": s("e#" + ms13(t+1)), ":hi": s("e#~")}
	}
	return q
}
