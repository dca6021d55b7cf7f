package erasure

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/deadletters"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// readUserPartition reads the user's write-model partition: the ids, emails, values and
// external ids of the erased incarnations, and the groups of their pointers; sks are the
// sort keys of the items it read (the first pass deletes them at its end, in the same
// call, without reading the partition again). Without AllIncarnations (subj.IDOnly) the
// erased incarnation is the last one, from its user.created on (subj.From); the earlier
// ones stay as they are.
func (x *Eraser) readUserPartition(ctx context.Context, table string, subj *Subject, groups map[string]bool) (emails, exts map[string]bool, sks []string, err error) {
	emails, exts = map[string]bool{}, map[string]bool{}
	type rec struct {
		version int64
		at      time.Time
		payload events.Payload
	}
	var history []rec
	err = x.queryAttrs(ctx, table, "id", dynamo.UserID(subj.Username), partitionAttrs, func(it map[string]types.AttributeValue) error {
		sk := attrS(it, "sk")
		sks = append(sks, sk)
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
			history = append(history, rec{env.Version, env.OccurredAt, env.Payload})
		case strings.HasPrefix(sk, "group#"):
			groups[strings.TrimPrefix(sk, "group#")] = true
		}
		return nil
	})
	if err != nil {
		return nil, nil, nil, err
	}
	subj.From, subj.Since, subj.Former = 0, time.Time{}, nil
	if subj.IDOnly {
		for _, r := range history {
			switch r.payload.(type) {
			case *events.UserCreated, *events.UserRenamed:
				// The incarnation came to the name by its creation or a rename.
				subj.From, subj.Since = r.version, r.at
			}
		}
	}
	for _, r := range history {
		if r.version < subj.From {
			continue
		}
		if u, ok := events.UserState(r.payload); ok {
			subj.AddUser(u)
			subj.Former = mergeFormer(subj.Former, u.FormerNames)
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
	return emails, exts, sks, nil
}

// mergeFormer adds to former the names of names it does not hold yet. An incarnation's
// later states list its earlier states' former names again; with AllIncarnations an
// earlier incarnation may have come to the name by a rename too, and its former names are
// erased as well as the last one's.
func mergeFormer(former, names []events.FormerName) []events.FormerName {
	for _, f := range names {
		if !slices.ContainsFunc(former, func(g events.FormerName) bool {
			return g.Username == f.Username && g.From.Equal(f.From) && g.Until.Equal(f.Until)
		}) {
			former = append(former, f)
		}
	}
	return former
}

// partitionAttrs are the attributes readUserPartition reads of the user's items: the
// state's id and email, and what decodes a history record (not its change set, actor or
// correlation, which it does not need).
var partitionAttrs = []string{"sk", "user_id", "email", "event_type", "schema_version", "event_id", "kind", "key", "version", "occurred_at", "data"}

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

// letterTime is when a dead letter's record was written: its image's `occurred_at` (a
// history record's), else the stream's approximate time (rounded down, to the minute on
// DynamoDB Local: approx), else when it was parked.
func letterTime(dl *deadletters.Letter) (at time.Time, approx bool) {
	for _, img := range []map[string]types.AttributeValue{dl.Record.NewImage, dl.Record.OldImage} {
		if at, err := dynamo.ParseTime(attrS(img, "occurred_at")); err == nil {
			return at, false
		}
	}
	if !dl.Record.ApproximateCreationDateTime.IsZero() {
		return dl.Record.ApproximateCreationDateTime, true
	}
	return dl.At, false
}

// letterInTime reports whether a dead letter's record was written while the name was the
// subject's (Since, Until); a rounded time is taken as the latest it may stand for.
func (s *Subject) letterInTime(dl *deadletters.Letter) bool {
	at, approx := letterTime(dl)
	if at.IsZero() {
		return s.Until.IsZero() // unknown: the subject's unless a later user can exist
	}
	since := s.Since
	if approx {
		since = since.Add(-time.Minute)
	}
	return (s.Since.IsZero() || !at.Before(since)) && (s.Until.IsZero() || !at.After(s.Until))
}

// idsOnly is the subject matched by its ids alone (NamedIn finds no name or value).
func (s *Subject) idsOnly() *Subject {
	return &Subject{IDs: s.IDs, Values: map[string]bool{}, idHashes: s.idHashes}
}

// letterOfSubject reports whether a dead letter of the user's aggregate is the erased
// incarnations': by the user id its record holds (a history record's state), by its time
// when it holds none.
func (s *Subject) letterOfSubject(reg *events.Registry, dl *deadletters.Letter) bool {
	if !s.IDOnly && s.Until.IsZero() {
		return true // every incarnation under the name, and no one after it
	}
	if matched, hasID := s.letterID(reg, dl); hasID {
		return matched
	}
	return s.letterInTime(dl)
}

// letterID reports whether a dead letter's record holds a user id (a user history
// record's state), and whether it is an erased one.
func (s *Subject) letterID(reg *events.Registry, dl *deadletters.Letter) (matched, hasID bool) {
	for _, img := range []map[string]types.AttributeValue{dl.Record.NewImage, dl.Record.OldImage} {
		if img == nil || !dynamo.IsHistorySK(attrS(img, "sk")) {
			continue
		}
		env, err := dynamo.DecodeRecord(reg, img)
		if err != nil {
			continue
		}
		var ids []string
		if u, ok := events.UserState(env.Payload); ok {
			ids = append(ids, u.ID)
		}
		switch p := env.Payload.(type) {
		case *events.UserDeleted:
			ids = append(ids, p.PreviousID)
		case *events.UserErased:
			ids = append(ids, p.PreviousID)
		}
		for _, id := range ids {
			if id != "" {
				return s.isMember("", id), true
			}
		}
	}
	return false, false
}
