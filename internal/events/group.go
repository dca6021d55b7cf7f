package events

import "time"

// Wire names of the group aggregate's events.
const (
	GroupCreatedType       Type = "group.created"
	GroupUpdatedType       Type = "group.updated"
	GroupDeletedType       Type = "group.deleted"
	GroupMemberAddedType   Type = "group.member_added"
	GroupMemberRemovedType Type = "group.member_removed"
	// GroupMembersChangedType is one command that added and removed many members at once
	// (API.md: POST /groups/{name}/members): one group version for the whole change.
	GroupMembersChangedType Type = "group.members_changed"
	// GroupRenamedType: the group took a new name; same id, next version. Its record lives
	// under the new name's key; the old one is free (docs/storage.md, "Group renames").
	GroupRenamedType Type = "group.renamed"
	// GroupMemberExpirySetType: a member's expires_at was set, moved or cleared (API.md,
	// "Memberships that expire"); the membership itself goes on.
	GroupMemberExpirySetType Type = "group.member_expiry_set"
)

// Group is the state of a group aggregate after an event.
type Group struct {
	// ID is the immutable ssodir id of this incarnation of the group.
	ID string `json:"id"`
	// Key is the lower-cased name: the group's identity and uniqueness key.
	Key         string              `json:"key"`
	Name        string              `json:"name"`
	Description string              `json:"description,omitempty"`
	Attributes  map[string][]string `json:"attributes,omitempty"`
	Version     int64               `json:"version"`
	CreatedAt   time.Time           `json:"created_at"`
	UpdatedAt   time.Time           `json:"updated_at"`
	Deleted     bool                `json:"deleted,omitempty"`
	// LastDeletedVersion is the version of the group's last deletion: a membership recorded
	// at a lower version belongs to a deleted incarnation.
	LastDeletedVersion int64 `json:"last_deleted_version,omitempty"`
	// NamedAt is when the group took Name by a rename; zero: at CreatedAt.
	NamedAt time.Time `json:"named_at,omitzero"`
	// FormerNames are the names the group held before, oldest first: its activity feed
	// reaches what happened under them.
	FormerNames []FormerGroupName `json:"former_names,omitempty"`
}

// FormerGroupName is a name a group held from From until Until (a rename); Key is its
// lower-cased form, the key the group had then.
type FormerGroupName struct {
	Name  string    `json:"name"`
	Key   string    `json:"key"`
	From  time.Time `json:"from"`
	Until time.Time `json:"until"`
}

// Named is when the group took its current name.
func (g Group) Named() time.Time {
	if g.NamedAt.IsZero() {
		return g.CreatedAt
	}
	return g.NamedAt
}

// GroupCreated: a group was created (or created again after a delete).
type GroupCreated struct {
	Group Group `json:"group"`
}

// GroupUpdated: description or attributes changed.
type GroupUpdated struct {
	Group Group `json:"group"`
}

// GroupDeleted: the group is gone with all its memberships; its name is free.
type GroupDeleted struct {
	Group      Group  `json:"group"`
	PreviousID string `json:"previous_id"`
	// Members are the memberships the delete ended, of users live as the same person
	// when it was decided (each with its membership revision), sorted by username: each
	// member's own feed shows the delete. A record lists them over parts when they do not
	// fit in one item (parts.go); MoreMembers says that it lists only the first members,
	// those that fit in MemberListBytes. Records from before the list name no members.
	Members     []Member `json:"members,omitempty"`
	MoreMembers bool     `json:"more_members,omitempty"`
}

// GroupMemberAdded: a user joined the group.
type GroupMemberAdded struct {
	Group    Group  `json:"group"`
	Username string `json:"username"`
	UserID   string `json:"user_id"`
	// Erased marks a member who was erased since (docs/erasure.md): the record was
	// rewritten without the username and id, and projects no membership.
	Erased bool `json:"erased,omitempty"`
	// ErasedIDHash is, on a rewritten record, the erasure ledger's hash of the erased
	// member's id (identity.ErasedIDHash): PII-free, and what the as-of index names the
	// member by, so that a replay pairs the member's changes as the live index did.
	ErasedIDHash string `json:"erased_id_hash,omitempty"`
	// MembershipRev is the user's membership revision this addition took; see
	// User.DeletedMembershipRev.
	MembershipRev int64 `json:"membership_rev"`
	// ExpiresAt is when the membership ends by itself (nil: it does not).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// GroupMemberExpirySet: the expiry of a member's membership was set, moved or cleared;
// the membership itself goes on (its revision and start stay).
type GroupMemberExpirySet struct {
	Group    Group  `json:"group"`
	Username string `json:"username"`
	UserID   string `json:"user_id"`
	// MembershipRev and AddedAt are the membership's, as it was added.
	MembershipRev int64     `json:"membership_rev"`
	AddedAt       time.Time `json:"added_at"`
	// ExpiresAt is the new expiry (nil: cleared), Previous the one before.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Previous  *time.Time `json:"previous_expires_at,omitempty"`
	// Erased, ErasedIDHash: as GroupMemberAdded's.
	Erased       bool   `json:"erased,omitempty"`
	ErasedIDHash string `json:"erased_id_hash,omitempty"`
}

// GroupMemberRemoved: a user left the group.
type GroupMemberRemoved struct {
	Group    Group  `json:"group"`
	Username string `json:"username"`
	UserID   string `json:"user_id"`
	// Erased, ErasedIDHash: as GroupMemberAdded's.
	Erased       bool   `json:"erased,omitempty"`
	ErasedIDHash string `json:"erased_id_hash,omitempty"`
}

// Member is one user a GroupMembersChanged added or removed. The username and the user's
// id are both kept, so that whatever must later find or rewrite the membership (the
// projector, the Keycloak sync, an erasure) finds each without another read.
type Member struct {
	Username string `json:"username"`
	UserID   string `json:"user_id"`
	// MembershipRev orders an addition against deletes of the user (see
	// GroupMemberAdded.MembershipRev): one above the DeletedMembershipRev of the live user
	// it was decided on, so that this incarnation's deletes cover it and earlier ones do
	// not. Zero for a removal.
	MembershipRev int64 `json:"membership_rev,omitempty"`
	// Erased, ErasedIDHash: as GroupMemberAdded's.
	Erased       bool   `json:"erased,omitempty"`
	ErasedIDHash string `json:"erased_id_hash,omitempty"`
	// ExpiresAt is when an added membership ends by itself (nil: it does not).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// ErasedMember is what an erased member becomes in a rewritten record: no name, no id.
func ErasedMember() Member { return Member{Erased: true} }

// ErasedValue stands in for an erased member's username in a change set: an erased
// member shows without a name.
func ErasedValue() map[string]bool { return map[string]bool{"erased": true} }

// GroupMembersChanged: many users joined and left the group in one command. Added and
// Removed are disjoint, each sorted by username, and hold only real changes (a user
// already in the group is not in Added). The activity feed shows one item per member, as
// for GroupMemberAdded and GroupMemberRemoved.
type GroupMembersChanged struct {
	Group   Group    `json:"group"`
	Added   []Member `json:"added,omitempty"`
	Removed []Member `json:"removed,omitempty"`
}

// GroupRenamed: the group's name changed from PreviousName to Group.Name. The old key's
// aggregate becomes a tombstone at PreviousVersion+1 (freeing the name, as a delete does)
// and every membership moves to the new key, at the rename's version.
type GroupRenamed struct {
	// Group is the group under its new name (same id).
	Group Group `json:"group"`
	// PreviousName, PreviousKey and PreviousVersion are the name, key and version before.
	PreviousName    string `json:"previous_name"`
	PreviousKey     string `json:"previous_key"`
	PreviousVersion int64  `json:"previous_version"`
	// Members are the memberships moved, each with the membership revision it had (and
	// keeps) and when it began.
	Members []RenamedMember `json:"members,omitempty"`
}

// RenamedMember is one membership a group rename moved.
type RenamedMember struct {
	Username      string    `json:"username"`
	UserID        string    `json:"user_id"`
	MembershipRev int64     `json:"membership_rev"`
	AddedAt       time.Time `json:"added_at"`
	// ExpiresAt is the membership's expiry, which moves with it (nil: none).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// Erased: as GroupMemberAdded.Erased (no username, no id; no membership projected).
	Erased bool `json:"erased,omitempty"`
}

func (GroupRenamed) EventType() Type { return GroupRenamedType }

func (GroupCreated) EventType() Type       { return GroupCreatedType }
func (GroupUpdated) EventType() Type       { return GroupUpdatedType }
func (GroupDeleted) EventType() Type       { return GroupDeletedType }
func (GroupMemberAdded) EventType() Type   { return GroupMemberAddedType }
func (GroupMemberRemoved) EventType() Type { return GroupMemberRemovedType }

func (GroupMembersChanged) EventType() Type { return GroupMembersChangedType }

func (GroupMemberExpirySet) EventType() Type { return GroupMemberExpirySetType }

// GroupState is the state after any group event.
func GroupState(p Payload) (Group, bool) {
	switch e := p.(type) {
	case *GroupCreated:
		return e.Group, true
	case *GroupUpdated:
		return e.Group, true
	case *GroupDeleted:
		return e.Group, true
	case *GroupMemberAdded:
		return e.Group, true
	case *GroupMemberRemoved:
		return e.Group, true
	case *GroupMembersChanged:
		return e.Group, true
	case *GroupMemberExpirySet:
		return e.Group, true
	case *GroupRenamed:
		return e.Group, true
	}
	return Group{}, false
}
