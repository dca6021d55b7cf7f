package erasure

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// Subject is whom an erasure erases: the username and every id of the user's
// incarnations, and, to scrub free text (error messages kept with dead letters and sync
// statuses), every value the person's records held.
type Subject struct {
	Username string
	// IDs are the user ids of every incarnation found.
	IDs map[string]bool
	// Values are the emails, names and attribute values found in the person's records.
	Values map[string]bool
	// IDOnly: the subject is one incarnation of the name (the erasure did not ask for all
	// of them), so a group's record names them only by their id, never by the name
	// alone, which an earlier incarnation (maybe someone else) shared.
	IDOnly bool
	// From is the version the erased incarnations start at in the user's partition (0:
	// every version); the history before it is an earlier incarnation's, and kept.
	From int64
	// Since and Until bound, when set, the time the erased incarnations held the name:
	// Since is the erased incarnation's creation (without AllIncarnations), Until the
	// erasure's completion (re-applied to restored tables, where a later user of the name
	// may have written since). Records that hold no user id (Idempotency-Key records, a
	// dead letter's keys) are matched by their time within them.
	Since, Until time.Time
	// Former are the usernames the erased person held before a rename (formernames.go).
	Former []events.FormerName
	// idHashes are erased ids known only by their hashes (the ledger's, when a pass runs
	// without the user's partition at hand).
	idHashes map[string]bool
}

// AddIDHashes adds ids known by their hashes (identity.ErasedIDHash).
func (s *Subject) AddIDHashes(hashes ...string) {
	if s.idHashes == nil {
		s.idHashes = map[string]bool{}
	}
	for _, h := range hashes {
		s.idHashes[h] = true
	}
}

// NewSubject is the subject of username with the ids given.
func NewSubject(username string, ids ...string) *Subject {
	s := &Subject{Username: username, IDs: map[string]bool{}, Values: map[string]bool{}}
	for _, id := range ids {
		s.AddID(id)
	}
	return s
}

// AddID adds an incarnation's id.
func (s *Subject) AddID(id string) {
	if id != "" {
		s.IDs[id] = true
	}
}

// AddUser adds what a state of the user holds.
func (s *Subject) AddUser(u events.User) {
	s.AddID(u.ID)
	for _, v := range []string{u.Email, u.FirstName, u.LastName} {
		s.addValue(v)
	}
	for _, vs := range u.Attributes {
		for _, v := range vs {
			s.addValue(v)
		}
	}
}

func (s *Subject) addValue(v string) {
	if strings.TrimSpace(v) != "" {
		s.Values[v] = true
	}
}

// IDHashes are the ledger's form of the ids (identity.ErasedIDHash).
func (s *Subject) IDHashes() []string {
	out := make([]string, 0, len(s.IDs))
	for id := range s.IDs {
		out = append(out, identity.ErasedIDHash(id))
	}
	return out
}

// isMember reports whether a member named in a group record is the subject.
func (s *Subject) isMember(username, userID string) bool {
	if userID != "" && (s.IDs[userID] || (len(s.idHashes) > 0 && s.idHashes[identity.ErasedIDHash(userID)])) {
		return true
	}
	return !s.IDOnly && username != "" && username == s.Username
}

// ScrubText replaces the subject's username, ids and values in free text (an error
// message) with "[erased]", in any case.
func (s *Subject) ScrubText(text string) string {
	needles := []string{s.Username}
	for _, f := range s.Former {
		needles = append(needles, f.Username)
	}
	for id := range s.IDs {
		needles = append(needles, id)
	}
	for v := range s.Values {
		needles = append(needles, v)
	}
	out := text
	for _, n := range needles {
		if len(n) < 3 {
			continue // one or two characters would erase half of every message
		}
		out = replaceFold(out, n, "[erased]")
	}
	return out
}

func replaceFold(s, old, new string) string {
	lo, lold := strings.ToLower(s), strings.ToLower(old)
	if len(lo) != len(s) || !strings.Contains(lo, lold) {
		if strings.Contains(s, old) {
			return strings.ReplaceAll(s, old, new)
		}
		return s
	}
	var b strings.Builder
	for {
		i := strings.Index(lo, lold)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(new)
		s, lo = s[i+len(old):], lo[i+len(old):]
	}
}

// RewriteEnvelope makes a group event name the subject as an erased member: no username,
// no id; the event keeps its type and version, so the group's history still counts up
// (docs/erasure.md). A membership change keeps the ledger's hash of the member's id
// (ErasedIDHash, PII-free), by which a replay's as-of index pairs the erased member's
// changes as the live index did. changed is false when the event does not name the
// subject.
func RewriteEnvelope(e *events.Envelope, s *Subject) (changed bool) {
	switch p := e.Payload.(type) {
	case *events.GroupMemberAdded:
		if s.isMember(p.Username, p.UserID) {
			p.ErasedIDHash = erasedIDHash(p.UserID)
			p.Username, p.UserID, p.MembershipRev, p.Erased = "", "", 0, true
			changed = true
		}
	case *events.GroupMemberRemoved:
		if s.isMember(p.Username, p.UserID) {
			p.ErasedIDHash = erasedIDHash(p.UserID)
			p.Username, p.UserID, p.Erased = "", "", true
			changed = true
		}
	case *events.GroupMemberExpirySet:
		if s.isMember(p.Username, p.UserID) {
			p.ErasedIDHash = erasedIDHash(p.UserID)
			p.Username, p.UserID, p.MembershipRev, p.Erased = "", "", 0, true
			changed = true
		}
	case *events.GroupRenamed:
		for i, m := range p.Members {
			if s.isMember(m.Username, m.UserID) {
				p.Members[i], changed = events.RenamedMember{Erased: true}, true
			}
		}
	case *events.GroupDeleted:
		for i, m := range p.Members {
			if s.isMember(m.Username, m.UserID) {
				p.Members[i], changed = events.ErasedMember(), true
			}
		}
	case *events.GroupMembersChanged:
		for i, m := range p.Added {
			if s.isMember(m.Username, m.UserID) {
				p.Added[i], changed = events.ErasedMember(), true
				p.Added[i].ErasedIDHash = erasedIDHash(m.UserID)
			}
		}
		for i, m := range p.Removed {
			if s.isMember(m.Username, m.UserID) {
				p.Removed[i], changed = events.ErasedMember(), true
				p.Removed[i].ErasedIDHash = erasedIDHash(m.UserID)
			}
		}
	}
	byID := changed
	if c, ok := e.Changes["member"]; ok && (!s.IDOnly || changed) {
		if name, _ := c.Old.(string); name != "" && (name == s.Username || (byID && s.isFormer(name))) {
			c.Old, changed = events.ErasedValue(), true
		}
		if name, _ := c.New.(string); name != "" && (name == s.Username || (byID && s.isFormer(name))) {
			c.New, changed = events.ErasedValue(), true
		}
		e.Changes["member"] = c
	}
	return changed
}

// erasedIDHash is the ledger's hash of an erased member's id; "" when the record named
// them by username only.
func erasedIDHash(userID string) string {
	if userID == "" {
		return ""
	}
	return identity.ErasedIDHash(userID)
}

// rewriteChangesJSON rewrites an activity item's or history record's `changes` string.
func rewriteChangesJSON(raw string, s *Subject) (string, bool, error) {
	if raw == "" || !strings.Contains(raw, s.Username) {
		return raw, false, nil
	}
	var ch map[string]events.Change
	if err := json.Unmarshal([]byte(raw), &ch); err != nil {
		return "", false, fmt.Errorf("decode changes: %w", err)
	}
	e := events.Envelope{Changes: ch}
	// An activity item holds the change only: the caller chose it (by the name, or by
	// the event ids of the records rewritten), so the name decides here.
	byName := *s
	byName.IDOnly = false
	if !RewriteEnvelope(&e, &byName) {
		return raw, false, nil
	}
	b, err := json.Marshal(e.Changes)
	if err != nil {
		return "", false, fmt.Errorf("encode changes: %w", err)
	}
	return string(b), true, nil
}

// RewriteHistoryItem rewrites a group's `config#<version>` item, or a part of one
// (dynamo.PartSK: its `data` lists members as the record's does), of the write table or
// an image of one in a stream record, so that it names the subject only as an erased
// member; the item is returned unchanged, with changed false, when it does not name them.
func RewriteHistoryItem(reg *events.Registry, item map[string]types.AttributeValue, s *Subject) (map[string]types.AttributeValue, bool, error) {
	data := attrS(item, "data")
	if !strings.Contains(data, s.Username) && !containsAny(data, s.IDs) {
		return item, false, nil
	}
	t := events.Type(attrS(item, "event_type"))
	p, err := reg.Decode(t, events.SchemaVersion, []byte(data))
	if err != nil {
		return nil, false, err
	}
	e := events.Envelope{Payload: p}
	if ch := attrS(item, "changes"); ch != "" {
		if err := json.Unmarshal([]byte(ch), &e.Changes); err != nil {
			return nil, false, fmt.Errorf("decode changes: %w", err)
		}
	}
	if !RewriteEnvelope(&e, s) {
		return item, false, nil
	}
	out := make(map[string]types.AttributeValue, len(item))
	for k, v := range item {
		out[k] = v
	}
	b, err := events.Encode(e.Payload)
	if err != nil {
		return nil, false, err
	}
	out["data"] = &types.AttributeValueMemberS{Value: string(b)}
	if len(e.Changes) > 0 {
		ch, err := json.Marshal(e.Changes)
		if err != nil {
			return nil, false, err
		}
		out["changes"] = &types.AttributeValueMemberS{Value: string(ch)}
	}
	out["erased_members"] = &types.AttributeValueMemberBOOL{Value: true}
	return out, true, nil
}

func containsAny(s string, set map[string]bool) bool {
	for v := range set {
		if strings.Contains(s, v) {
			return true
		}
	}
	return false
}

func attrS(item map[string]types.AttributeValue, name string) string {
	if v, ok := item[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
