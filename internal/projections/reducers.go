package projections

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// Reducer turns one event into the writes it needs. It is pure: no I/O and no clock, so the
// same event always gives the same Effects.
type Reducer func(e events.Envelope) (Effects, error)

// Effects are the writes one event needs; the Projector executes them.
type Effects struct {
	// Activities are the event's activity items: one, or one per member of a
	// group.members_changed, and for a membership change a copy in each member's own feed
	// (none from the state-only reducers of ApplyStates). Their keys
	// are derived from the event, so they are written unconditionally and may go into a
	// BatchWriteItem.
	Activities []Item
	// Upserts are read-table items written only if their version is newer than the stored
	// one: a conditional PutItem each, never batchable.
	Upserts []Upsert
	// MemberAdds are memberships each written live only if no delete of its group or user
	// has overtaken it; none unless the event adds members.
	MemberAdds []MemberAdd
	// UserCascade tombstones the memberships of a deleted user; nil unless the event
	// deletes a user.
	UserCascade *UserCascade
	// GroupCascade tombstones the memberships of a deleted group; nil unless the event
	// deletes a group.
	GroupCascade *GroupCascade
}

// Upsert is a read-table item written only if Version is newer than the stored version.
type Upsert struct {
	Item    Item
	Version int64
}

// MemberAdd writes Live if it is newer than the stored membership and neither the group
// config's last_deleted_version has reached Version nor the user config's
// deleted_membership_rev has reached MembershipRev; if one of them has, the add belongs to
// a deleted incarnation and Obsolete — the tombstone a later delete would have made of
// Live — is upserted instead. Either way the user's partition first gets a pointer to the
// group (`user#<username>` / `group#<key>`), which a user delete's cascade reads strongly
// consistently: a members change may add a user whose delete is decided before the
// change's items are written, so the delete's own list of groups may lack this one.
type MemberAdd struct {
	GroupKey      string
	Username      string
	Version       int64
	MembershipRev int64
	Live          Item
	Obsolete      Item
	// Moved marks a membership a rename moved to the new name: at an equal version it
	// also replaces a tombstone of a lower membership revision (reduceUserRenamed).
	Moved bool
}

// UserCascade tombstones every live membership of Username whose membership_rev is at
// most DeletedRev. Groups (from the event) and the group pointers in the user's partition
// are looked up directly, because UserGroupGSI is eventually consistent and may not show
// a membership projected a moment ago.
type UserCascade struct {
	Username   string
	DeletedRev int64
	Groups     []string
}

// GroupCascade tombstones every live membership of GroupKey older than Version.
type GroupCascade struct {
	GroupKey string
	Version  int64
}

// NewReducers is the projection of every event type: the read-table writes of
// stateReducers plus the event's activity item. retention is the activity items' TTL
// (0: keep forever).
func NewReducers(retention time.Duration) map[events.Type]Reducer {
	a := activity{retention: retention}
	out := map[events.Type]Reducer{}
	for t, r := range stateReducers() {
		if t == events.UserErasedType {
			out[t] = r // an erasure leaves no activity item naming the person
			continue
		}
		out[t] = a.with(r)
	}
	return out
}

// stateReducers declare what each event does to the read table.
func stateReducers() map[events.Type]Reducer {
	return map[events.Type]Reducer{
		events.UserCreatedType:          reduceUser,
		events.UserUpdatedType:          reduceUser,
		events.UserPasswordChangedType:  reduceUser,
		events.UserDeactivatedType:      reduceUser,
		events.UserActivatedType:        reduceUser,
		events.UserDeletedType:          reduceUserDeleted,
		events.UserErasedType:           reduceUserDeleted,
		events.UserRenamedType:          reduceUserRenamed,
		events.GroupCreatedType:         reduceGroup,
		events.GroupUpdatedType:         reduceGroup,
		events.GroupDeletedType:         reduceGroupDeleted,
		events.GroupRenamedType:         reduceGroupRenamed,
		events.GroupMemberAddedType:     reduceMemberAdded,
		events.GroupMemberRemovedType:   reduceMemberRemoved,
		events.GroupMembersChangedType:  reduceMembersChanged,
		events.GroupMemberExpirySetType: reduceMemberExpirySet,
	}
}

// reduceUser projects any event that leaves the user alive: its payload holds the full
// state, so every one of them is the same upsert.
func reduceUser(e events.Envelope) (Effects, error) {
	u, err := userState(e)
	if err != nil {
		return Effects{}, err
	}
	cfgUpdated := formatTime(u.UpdatedAt)
	v := UserView{
		ID:                   dynamo.UserID(u.Username),
		SK:                   dynamo.SKConfig,
		Kind:                 string(events.KindUser),
		UserID:               u.ID,
		Username:             u.Username,
		Email:                EmailKey(u.Email),
		FirstName:            u.FirstName,
		LastName:             u.LastName,
		IsActive:             u.IsActive,
		Attributes:           attributes(u.Attributes),
		Version:              u.Version,
		CreatedAt:            formatTime(u.CreatedAt),
		ConfigUpdatedAt:      cfgUpdated,
		DeletedMembershipRev: u.DeletedMembershipRev,
		UpdatedSort:          UpdatedSort(cfgUpdated, u.Username),
		NameSort:             u.Username,
		FormerNames:          dynamo.EncodeFormerNames(u.FormerNames),
	}
	if u.FirstName != "" {
		v.FirstNameSort = NameSort(u.FirstName, u.Username)
	}
	if u.LastName != "" {
		v.LastNameSort = NameSort(u.LastName, u.Username)
	}
	return upsert(v, u.Version)
}

func reduceUserDeleted(e events.Envelope) (Effects, error) {
	var groups []string
	switch p := e.Payload.(type) {
	case *events.UserDeleted:
		groups = p.Groups
	case *events.UserErased:
		// The erasure itself (internal/erasure) removes every item of the user; a replay
		// that meets the record before that projects it as the delete it also is.
		groups = p.Groups
	default:
		return Effects{}, payloadMismatch(e)
	}
	u, err := userState(e)
	if err != nil {
		return Effects{}, err
	}
	fx, err := upsert(UserView{
		ID:                   dynamo.UserID(u.Username),
		SK:                   dynamo.SKConfig,
		Username:             u.Username,
		Version:              u.Version,
		ConfigUpdatedAt:      formatTime(u.UpdatedAt),
		DeletedMembershipRev: u.DeletedMembershipRev,
		IsDeleted:            true,
	}, u.Version)
	if err != nil {
		return Effects{}, err
	}
	// Every membership add takes a revision of at least 1, so with 0 there is nothing to
	// cascade over.
	if u.DeletedMembershipRev > 0 {
		fx.UserCascade = &UserCascade{Username: u.Username, DeletedRev: u.DeletedMembershipRev, Groups: groups}
	}
	return fx, nil
}

func reduceGroup(e events.Envelope) (Effects, error) {
	g, err := groupState(e)
	if err != nil {
		return Effects{}, err
	}
	return upsert(liveGroup(g), g.Version)
}

func reduceGroupDeleted(e events.Envelope) (Effects, error) {
	g, err := groupState(e)
	if err != nil {
		return Effects{}, err
	}
	fx, err := upsert(GroupView{
		ID:              dynamo.GroupID(g.Key),
		SK:              dynamo.SKConfig,
		Key:             g.Key,
		Name:            g.Name,
		Version:         g.Version,
		ConfigUpdatedAt: formatTime(g.UpdatedAt),
		// The member_added guard compares against this: it must cover this very delete even
		// if the payload did not say so.
		LastDeletedVersion: max(g.LastDeletedVersion, g.Version),
		IsDeleted:          true,
	}, g.Version)
	if err != nil {
		return Effects{}, err
	}
	fx.GroupCascade = &GroupCascade{GroupKey: g.Key, Version: g.Version}
	return fx, nil
}

func reduceMemberAdded(e events.Envelope) (Effects, error) {
	p, ok := e.Payload.(*events.GroupMemberAdded)
	if !ok {
		return Effects{}, payloadMismatch(e)
	}
	g, err := groupState(e)
	if err != nil {
		return Effects{}, err
	}
	fx, err := upsert(liveGroup(g), g.Version)
	if err != nil {
		return Effects{}, err
	}
	if p.Erased {
		return fx, nil // an erased member's membership is gone with the member
	}
	m, err := memberAdd(e, g, events.Member{Username: p.Username, UserID: p.UserID, MembershipRev: p.MembershipRev, ExpiresAt: p.ExpiresAt})
	if err != nil {
		return Effects{}, err
	}
	fx.MemberAdds = []MemberAdd{m}
	return fx, nil
}

// memberAdd is the live and obsolete forms of m's membership of g as of e.
func memberAdd(e events.Envelope, g events.Group, m events.Member) (MemberAdd, error) {
	if m.Username == "" || m.MembershipRev < 1 {
		return MemberAdd{}, fmt.Errorf("%s %s v%d: missing username or membership revision", e.Type, identity.LogKey(e.Entity()), e.Version)
	}
	v := MembershipView{
		ID:            dynamo.GroupID(g.Key),
		SK:            dynamo.MemberSK(m.Username),
		MemberID:      m.Username,
		MemberOf:      g.Key,
		Username:      m.Username,
		GroupKey:      g.Key,
		GroupName:     g.Name,
		Version:       g.Version,
		MembershipRev: m.MembershipRev,
		AddedAt:       formatTime(e.OccurredAt),
	}
	if m.ExpiresAt != nil {
		v.ExpiresAt = formatTime(*m.ExpiresAt)
	}
	live, err := marshal(v)
	if err != nil {
		return MemberAdd{}, err
	}
	v.MemberID, v.MemberOf, v.IsDeleted = "", "", true
	obsolete, err := marshal(v)
	if err != nil {
		return MemberAdd{}, err
	}
	return MemberAdd{
		GroupKey: g.Key, Username: m.Username, Version: g.Version, MembershipRev: m.MembershipRev,
		Live: live, Obsolete: obsolete,
	}, nil
}

func reduceMemberRemoved(e events.Envelope) (Effects, error) {
	p, ok := e.Payload.(*events.GroupMemberRemoved)
	if !ok {
		return Effects{}, payloadMismatch(e)
	}
	g, err := groupState(e)
	if err != nil {
		return Effects{}, err
	}
	fx, err := upsert(liveGroup(g), g.Version)
	if err != nil {
		return Effects{}, err
	}
	if p.Erased {
		return fx, nil
	}
	tomb, err := memberRemoved(e, g, p.Username)
	if err != nil {
		return Effects{}, err
	}
	fx.Upserts = append(fx.Upserts, tomb)
	return fx, nil
}

// memberRemoved is the tombstone of username's membership of g as of e. A removal needs
// no guard: a tombstone is right whatever was deleted meanwhile.
func memberRemoved(e events.Envelope, g events.Group, username string) (Upsert, error) {
	if username == "" {
		return Upsert{}, fmt.Errorf("%s %s v%d: missing username", e.Type, identity.LogKey(e.Entity()), e.Version)
	}
	tomb, err := marshal(MembershipView{
		ID:        dynamo.GroupID(g.Key),
		SK:        dynamo.MemberSK(username),
		Username:  username,
		GroupKey:  g.Key,
		GroupName: g.Name,
		Version:   g.Version,
		IsDeleted: true,
	})
	if err != nil {
		return Upsert{}, err
	}
	return Upsert{Item: tomb, Version: g.Version}, nil
}

// reduceMembersChanged is reduceMemberAdded and reduceMemberRemoved for each member, at
// the one version of the change.
func reduceMembersChanged(e events.Envelope) (Effects, error) {
	p, ok := e.Payload.(*events.GroupMembersChanged)
	if !ok {
		return Effects{}, payloadMismatch(e)
	}
	g, err := groupState(e)
	if err != nil {
		return Effects{}, err
	}
	fx, err := upsert(liveGroup(g), g.Version)
	if err != nil {
		return Effects{}, err
	}
	for _, m := range p.Added {
		if m.Erased {
			continue
		}
		add, err := memberAdd(e, g, m)
		if err != nil {
			return Effects{}, err
		}
		fx.MemberAdds = append(fx.MemberAdds, add)
	}
	for _, m := range p.Removed {
		if m.Erased {
			continue
		}
		tomb, err := memberRemoved(e, g, m.Username)
		if err != nil {
			return Effects{}, err
		}
		fx.Upserts = append(fx.Upserts, tomb)
	}
	return fx, nil
}

func liveGroup(g events.Group) GroupView {
	cfgUpdated := formatTime(g.UpdatedAt)
	return GroupView{
		ID:                 dynamo.GroupID(g.Key),
		SK:                 dynamo.SKConfig,
		Kind:               string(events.KindGroup),
		GroupID:            g.ID,
		Key:                g.Key,
		Name:               g.Name,
		Description:        g.Description,
		Attributes:         attributes(g.Attributes),
		Version:            g.Version,
		CreatedAt:          formatTime(g.CreatedAt),
		ConfigUpdatedAt:    cfgUpdated,
		LastDeletedVersion: g.LastDeletedVersion,
		UpdatedSort:        UpdatedSort(cfgUpdated, g.Key),
		NameSort:           g.Key,
		FormerNames:        dynamo.EncodeFormerGroupNames(g.FormerNames),
	}
}

func upsert(view any, version int64) (Effects, error) {
	item, err := marshal(view)
	if err != nil {
		return Effects{}, err
	}
	return Effects{Upserts: []Upsert{{Item: item, Version: version}}}, nil
}

// userState is the user state an event carries, checked against the envelope: a record
// whose payload disagrees with its own metadata is corrupt and must not be projected.
func userState(e events.Envelope) (events.User, error) {
	u, ok := events.UserState(e.Payload)
	if !ok || e.Kind != events.KindUser || e.Payload.EventType() != e.Type {
		return events.User{}, payloadMismatch(e)
	}
	if u.Username != e.Key || u.Version != e.Version {
		return events.User{}, fmt.Errorf("%s %s v%d: payload is user %s v%d", e.Type, identity.LogKey(e.Entity()), e.Version, identity.LogKey("user:"+u.Username), u.Version)
	}
	return u, nil
}

func groupState(e events.Envelope) (events.Group, error) {
	g, ok := events.GroupState(e.Payload)
	if !ok || e.Kind != events.KindGroup || e.Payload.EventType() != e.Type {
		return events.Group{}, payloadMismatch(e)
	}
	if g.Key != e.Key || g.Version != e.Version {
		return events.Group{}, fmt.Errorf("%s %s v%d: payload is group %q v%d", e.Type, identity.LogKey(e.Entity()), e.Version, g.Key, g.Version)
	}
	return g, nil
}

func payloadMismatch(e events.Envelope) error {
	if e.Payload == nil {
		return fmt.Errorf("%s %s v%d: no payload", e.Type, identity.LogKey(e.Entity()), e.Version)
	}
	return fmt.Errorf("%s %s v%d: payload %T does not match", e.Type, identity.LogKey(e.Entity()), e.Version, e.Payload)
}

// attributes normalises an attribute map so that equal states give identical items: an
// empty map is absent and a nil value list is an empty list (not NULL).
func attributes(in map[string][]string) map[string][]string {
	if len(in) == 0 {
		return nil
	}
	out := maps.Clone(in)
	for k, v := range out {
		if v == nil {
			out[k] = []string{}
		}
	}
	return out
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return dynamo.FormatTime(t)
}

// activity builds the activity item every reducer adds.
type activity struct{ retention time.Duration }

func (a activity) with(r Reducer) Reducer {
	return func(e events.Envelope) (Effects, error) {
		fx, err := r(e)
		if err != nil {
			return Effects{}, err
		}
		if fx.Activities, err = a.items(e); err != nil {
			return Effects{}, err
		}
		return fx, nil
	}
}

// items are the activity items of e: one, or for a group.members_changed one per member,
// as group.member_added and group.member_removed would have made them, told apart by the
// member's place in the event (`<event id>.<n>`).
// The member's own feed gets a copy of each (memberFeedItems).
func (a activity) items(e events.Envelope) ([]Item, error) {
	out, err := a.groupItems(e)
	if err != nil {
		return nil, err
	}
	mine, err := a.memberFeedItems(e)
	return append(out, mine...), err
}

func (a activity) groupItems(e events.Envelope) ([]Item, error) {
	p, ok := e.Payload.(*events.GroupMembersChanged)
	if !ok {
		it, err := a.item(e)
		return []Item{it}, err
	}
	out := make([]Item, 0, len(p.Added)+len(p.Removed))
	each := func(t events.Type, m events.Member, change events.Change) error {
		one := e
		one.Type = t
		one.EventID = memberEventID(e.EventID, len(out))
		one.Changes = map[string]events.Change{"member": change}
		it, err := a.item(one)
		out = append(out, it)
		return err
	}
	for _, m := range p.Added {
		if err := each(events.GroupMemberAddedType, m, events.Change{New: memberName(m)}); err != nil {
			return nil, err
		}
	}
	for _, m := range p.Removed {
		if err := each(events.GroupMemberRemovedType, m, events.Change{Old: memberName(m)}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (a activity) item(e events.Envelope) (Item, error) {
	if e.EventID == "" || e.OccurredAt.IsZero() {
		return nil, fmt.Errorf("%s %s v%d: missing event id or time", e.Type, identity.LogKey(e.Entity()), e.Version)
	}
	changes, err := changeSet(e.Changes)
	if err != nil {
		return nil, fmt.Errorf("%s %s v%d: %w", e.Type, identity.LogKey(e.Entity()), e.Version, err)
	}
	v := ActivityView{
		PK:         EntityPK(e.Entity()),
		SK:         ActivitySK(e.OccurredAt, e.EventID),
		EventID:    e.EventID,
		Type:       string(e.Type),
		Entity:     e.Entity(),
		Actor:      e.Actor,
		OccurredAt: dynamo.FormatTime(e.OccurredAt),
		Version:    e.Version,
		Changes:    changes,
		ActorPK:    ActorPK(e.Actor),
		DayPK:      DayPK(e.OccurredAt),
	}
	if a.retention > 0 {
		v.ExpiresAt = e.OccurredAt.Add(a.retention).Unix()
	}
	return marshal(v)
}

// changeSet is the JSON of a change set without any secret field. The write side never
// records one, but the activity feed is shown to every reader of the tenant, so a
// password that slipped into a change set must stop here. encoding/json sorts map keys,
// so the same change set always gives the same string.
func changeSet(ch map[string]events.Change) (string, error) {
	clean := make(map[string]events.Change, len(ch))
	for k, v := range ch {
		if !isSecretField(k) {
			clean[k] = v
		}
	}
	b, err := json.Marshal(clean)
	if err != nil {
		return "", fmt.Errorf("encode changes: %w", err)
	}
	return string(b), nil
}

func isSecretField(name string) bool {
	n := strings.ToLower(name)
	return strings.Contains(n, "password") || strings.Contains(n, "secret")
}

// memberName is what an activity item shows for a member: the username, or for an erased
// member the erased mark (no name).
func memberName(m events.Member) any {
	if m.Erased {
		return events.ErasedValue()
	}
	return m.Username
}
