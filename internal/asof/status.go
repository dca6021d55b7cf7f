package asof

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/objects"
)

// A user's life item keeps whether the user was active after each of its versions that
// carry the status (creation, activation, deactivation, update): attribute
// `s<version>` = `1|<instant>` (active) or `0|<instant>`. Versions order them, so records
// applied late or twice leave the same item. The access report reads the user's active
// and inactive periods from them.

func statusAttr(version int64) string { return fmt.Sprintf("s%012d", version) }
func isStatusAttr(a string) bool      { return len(a) == 13 && a[0] == 's' }

// userStatus records the user's status after e.
func (x *Index) userStatus(ctx context.Context, table string, u events.User, e events.Envelope) error {
	if u.ID == "" {
		return nil
	}
	attr, v := statusOf(u, e)
	_, err := x.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(table), Key: key(userLife(Hash(u.ID)), lifeSK),
		UpdateExpression:          aws.String("SET h = :h, #s = :v"),
		ExpressionAttributeNames:  map[string]string{"#s": attr},
		ExpressionAttributeValues: map[string]types.AttributeValue{":h": s(Hash(u.ID)), ":v": s(v)},
	})
	if err != nil {
		return fmt.Errorf("as-of index: user status: %w", err)
	}
	return nil
}

// statusKept says that an update left the user's status as it was: its changes are known
// and do not name is_active. Its status entry would only repeat the one before it (periods
// of one status side by side are one period), so it is not written: most updates change a
// profile, and each entry is a write into the read table. An update without changes (one
// a replay makes from the write model's state, its history expired) is written.
func statusKept(e events.Envelope) bool {
	_, changed := e.Changes["is_active"]
	return len(e.Changes) > 0 && !changed
}

// statusOf is the life item's attribute and value recording u's status after e.
func statusOf(u events.User, e events.Envelope) (attr, value string) {
	v := "0"
	if u.IsActive {
		v = "1"
	}
	return statusAttr(e.Version), v + "|" + strconv.FormatInt(Millis(e.OccurredAt), 10)
}

// Status names a period of a user's life in the access report (objects.UserStatus).
type Status = objects.UserStatus

// The statuses of a user's periods. Unknown: the user's life item was indexed before the
// index kept statuses (a replay rebuilds them).
const (
	StatusActive   = objects.UserActive
	StatusInactive = objects.UserInactive
	StatusDeleted  = objects.UserDeleted
	StatusUnknown  = objects.UserUnknown
)

// period is [from, to) in epoch ms (to Open while it lasts).
type period struct {
	status   Status
	from, to int64
}

// periods are a user's life as consecutive periods: from its creation, active or inactive
// as its status records say (merged where the status did not change), then deleted from
// its deletion on.
func periods(life map[string]types.AttributeValue) []period {
	created, _ := num(life, "created")
	deleted, isDeleted := num(life, "deleted")
	end := Open
	if isDeleted {
		end = deleted
	}
	type rec struct {
		version, at int64
		active      bool
	}
	var rs []rec
	for a, v := range life {
		sv, ok := v.(*types.AttributeValueMemberS)
		if !isStatusAttr(a) || !ok {
			continue
		}
		flag, at, ok := strings.Cut(sv.Value, "|")
		ver, err1 := strconv.ParseInt(a[1:], 10, 64)
		ms, err2 := strconv.ParseInt(at, 10, 64)
		if ok && err1 == nil && err2 == nil {
			rs = append(rs, rec{ver, ms, flag == "1"})
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i].version < rs[j].version })
	var out []period
	add := func(st Status, from, to int64) {
		if to <= from {
			return
		}
		if k := len(out) - 1; k >= 0 && out[k].status == st && out[k].to == from {
			out[k].to = to
			return
		}
		out = append(out, period{st, from, to})
	}
	if len(rs) == 0 {
		add(StatusUnknown, created, end)
	}
	for i, r := range rs {
		from := max(r.at, created)
		if i == 0 {
			from = created
		}
		to := end
		if i+1 < len(rs) {
			to = min(rs[i+1].at, end)
		}
		st := StatusInactive
		if r.active {
			st = StatusActive
		}
		add(st, from, to)
	}
	if isDeleted {
		add(StatusDeleted, deleted, Open)
	}
	return out
}
