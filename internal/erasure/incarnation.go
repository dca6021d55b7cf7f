package erasure

import (
	"context"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// readUserPartition reads the user's write-model partition: the ids, emails, values and
// external ids of the erased incarnations, and the groups of their pointers. Without
// AllIncarnations (subj.IDOnly) the erased incarnation is the last one, from its
// user.created on (subj.From); the earlier ones stay as they are.
func (x *Eraser) readUserPartition(ctx context.Context, table string, subj *Subject, groups map[string]bool) (emails, exts map[string]bool, err error) {
	emails, exts = map[string]bool{}, map[string]bool{}
	type rec struct {
		version int64
		payload events.Payload
	}
	var history []rec
	err = x.query(ctx, table, "id", dynamo.UserID(subj.Username), func(it map[string]types.AttributeValue) error {
		sk := attrS(it, "sk")
		switch {
		case sk == dynamo.SKConfig:
			// The state: the last incarnation's, which is always erased.
			subj.AddID(attrS(it, "user_id"))
			if e := attrS(it, "email"); e != "" {
				emails[e] = true
			}
		case dynamo.IsHistorySK(sk):
			env, err := dynamo.DecodeRecord(x.reg, it)
			if err != nil {
				return err
			}
			history = append(history, rec{env.Version, env.Payload})
		case strings.HasPrefix(sk, "group#"):
			groups[strings.TrimPrefix(sk, "group#")] = true
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	subj.From = 0
	if subj.IDOnly {
		for _, r := range history {
			if _, ok := r.payload.(*events.UserCreated); ok {
				subj.From = r.version
			}
		}
	}
	for _, r := range history {
		if r.version < subj.From {
			continue
		}
		if u, ok := events.UserState(r.payload); ok {
			subj.AddUser(u)
			if u.Email != "" {
				emails[u.Email] = true
			}
			if ext := identity.ExternalID(u.Attributes); ext != "" {
				exts[ext] = true
			}
		}
		switch p := r.payload.(type) {
		case *events.UserDeleted:
			subj.AddID(p.PreviousID)
			addAll(groups, p.Groups)
		case *events.UserErased:
			subj.AddID(p.PreviousID)
			addAll(groups, p.Groups)
		}
	}
	return emails, exts, nil
}

// erasedWriteItem says which items of the user's write-model partition an erasure deletes
// before its tombstone: everything but the `config` tombstone and the history of earlier
// incarnations it keeps (sort keys `config#<version>` below From).
func (s *Subject) erasedWriteItem(sk string) bool {
	if sk == dynamo.SKConfig {
		return false
	}
	if s.From > 0 && dynamo.IsHistorySK(sk) {
		v, _ := strconv.ParseInt(strings.TrimLeft(strings.TrimPrefix(sk, dynamo.SKConfig+"#"), "0"), 10, 64)
		return v >= s.From
	}
	return true
}
