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
}

// GroupMemberAdded: a user joined the group.
type GroupMemberAdded struct {
	Group    Group  `json:"group"`
	Username string `json:"username"`
	UserID   string `json:"user_id"`
	// Erased marks a member who was erased since (docs/erasure.md): the record was
	// rewritten without the username and id, and projects no membership.
	Erased bool `json:"erased,omitempty"`
	// MembershipRev is the user's membership revision this addition took; see
	// User.DeletedMembershipRev.
	MembershipRev int64 `json:"membership_rev"`
}

// GroupMemberRemoved: a user left the group.
type GroupMemberRemoved struct {
	Group    Group  `json:"group"`
	Username string `json:"username"`
	UserID   string `json:"user_id"`
	// Erased: as GroupMemberAdded.Erased.
	Erased bool `json:"erased,omitempty"`
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
	// Erased: as GroupMemberAdded.Erased.
	Erased bool `json:"erased,omitempty"`
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

func (GroupCreated) EventType() Type       { return GroupCreatedType }
func (GroupUpdated) EventType() Type       { return GroupUpdatedType }
func (GroupDeleted) EventType() Type       { return GroupDeletedType }
func (GroupMemberAdded) EventType() Type   { return GroupMemberAddedType }
func (GroupMemberRemoved) EventType() Type { return GroupMemberRemovedType }

func (GroupMembersChanged) EventType() Type { return GroupMembersChangedType }

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
	}
	return Group{}, false
}
