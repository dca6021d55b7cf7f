package events

import "time"

// Wire names of the user aggregate's events.
const (
	UserCreatedType         Type = "user.created"
	UserUpdatedType         Type = "user.updated"
	UserPasswordChangedType Type = "user.password_changed"
	UserDeactivatedType     Type = "user.deactivated"
	UserActivatedType       Type = "user.activated"
	UserDeletedType         Type = "user.deleted"
	// UserErasedType: the person was erased (GDPR art. 17, docs/erasure.md). Its record
	// lives only until the erasure removes the user's whole partition.
	UserErasedType Type = "user.erased"
	// UserRenamedType: the person took a new username; same id, next version. Its record
	// lives under the new username; the old one is free (docs/storage.md, "Renames").
	UserRenamedType Type = "user.renamed"
)

// User is the state of a user aggregate after an event. It never holds a password.
type User struct {
	// ID is the immutable ssodir id of this incarnation of the user (a new one after a
	// delete and re-create); Keycloak sync matches on it.
	ID         string              `json:"id"`
	Username   string              `json:"username"`
	Email      string              `json:"email,omitempty"`
	FirstName  string              `json:"first_name,omitempty"`
	LastName   string              `json:"last_name,omitempty"`
	IsActive   bool                `json:"is_active"`
	Attributes map[string][]string `json:"attributes,omitempty"`
	Version    int64               `json:"version"`
	CreatedAt  time.Time           `json:"created_at"`
	UpdatedAt  time.Time           `json:"updated_at"`
	Deleted    bool                `json:"deleted,omitempty"`
	// DeletedMembershipRev is the user's membership revision at its last deletion: a
	// membership recorded with a revision at or below it belongs to a deleted incarnation.
	DeletedMembershipRev int64 `json:"deleted_membership_rev,omitempty"`
	// NamedAt is when the person took Username by a rename; zero: at CreatedAt.
	NamedAt time.Time `json:"named_at,omitzero"`
	// FormerNames are the usernames the person held before, oldest first: the activity
	// feed and an erasure of the person reach what happened under them.
	FormerNames []FormerName `json:"former_names,omitempty"`
}

// FormerName is a username a person held from From until Until (a rename).
type FormerName struct {
	Username string    `json:"username"`
	From     time.Time `json:"from"`
	Until    time.Time `json:"until"`
}

// Named is when the person took its current username.
func (u User) Named() time.Time {
	if u.NamedAt.IsZero() {
		return u.CreatedAt
	}
	return u.NamedAt
}

// UserCreated: a user was created (or created again after a delete).
type UserCreated struct {
	User User `json:"user"`
	// PasswordCiphertext is the initial password, encrypted; empty when none was given.
	PasswordCiphertext string `json:"password_ciphertext,omitempty"`
}

// UserUpdated: profile fields (email, names, attributes) changed.
type UserUpdated struct {
	User User `json:"user"`
}

// UserPasswordChanged: a new password was set. The ciphertext lets the Keycloak sync send
// it once; it is never shown anywhere.
type UserPasswordChanged struct {
	User               User   `json:"user"`
	PasswordCiphertext string `json:"password_ciphertext"`
}

// UserDeactivated: the user may no longer sign in.
type UserDeactivated struct {
	User User `json:"user"`
}

// UserActivated: the user may sign in again.
type UserActivated struct {
	User User `json:"user"`
}

// UserDeleted: the user is gone, with all its memberships; its username and email are free.
type UserDeleted struct {
	// User is the tombstone: username, version, timestamps, Deleted and
	// DeletedMembershipRev.
	User User `json:"user"`
	// PreviousID is the ssodir id of the incarnation that was deleted.
	PreviousID string `json:"previous_id"`
	// Groups are the keys of the groups the user was removed from.
	Groups []string `json:"groups,omitempty"`
}

// UserErased: the user is deleted as by UserDeleted, and every trace of the person is
// to be erased (docs/erasure.md). The record holding it is itself erased with the user's
// partition, so it is read only from the stream, by the projector (which carries the
// erasure out) and the Keycloak sync (which deletes the Keycloak user).
type UserErased struct {
	// User is the tombstone, as in UserDeleted.
	User User `json:"user"`
	// PreviousID is the ssodir id of the live (or last) incarnation.
	PreviousID string `json:"previous_id"`
	// Groups are the keys of the groups the user was removed from.
	Groups []string `json:"groups,omitempty"`
	// ErasureID names the erasure in the ledger (GET /erasures/{id}).
	ErasureID string `json:"erasure_id"`
	// AllIncarnations: the earlier incarnations under the name are erased too; without
	// it only the last one (the live user, or the latest deleted), from its user.created.
	AllIncarnations bool `json:"all_incarnations,omitempty"`
}

func (UserErased) EventType() Type { return UserErasedType }

// UserRenamed: the person's username changed from PreviousUsername to User.Username. The
// old name's aggregate becomes a tombstone at PreviousVersion+1 (freeing the name, as a
// delete does) and the person's memberships move to the new name.
type UserRenamed struct {
	// User is the person under the new name (same id).
	User User `json:"user"`
	// PreviousUsername and PreviousVersion are the name and version before the rename;
	// PreviousDeletedMembershipRev is the old name's tombstone's membership revision.
	PreviousUsername             string `json:"previous_username"`
	PreviousVersion              int64  `json:"previous_version"`
	PreviousDeletedMembershipRev int64  `json:"previous_deleted_membership_rev"`
	// Memberships are the person's memberships, moved to the new name.
	Memberships []RenamedMembership `json:"memberships,omitempty"`
}

// RenamedMembership is one membership a rename moved. GroupVersion is the group's version
// when the rename was decided (it orders the moved membership against every earlier
// membership event of the new name in that group); AddedVersion and AddedAt are those of
// the addition; MembershipRev is the membership revision it has under the new name.
type RenamedMembership struct {
	GroupKey      string    `json:"group_key"`
	GroupName     string    `json:"group_name"`
	GroupVersion  int64     `json:"group_version"`
	AddedVersion  int64     `json:"added_version"`
	AddedAt       time.Time `json:"added_at"`
	MembershipRev int64     `json:"membership_rev"`
	// ExpiresAt is the membership's expiry, which moves with it (nil: none).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

func (UserRenamed) EventType() Type { return UserRenamedType }

func (UserCreated) EventType() Type         { return UserCreatedType }
func (UserUpdated) EventType() Type         { return UserUpdatedType }
func (UserPasswordChanged) EventType() Type { return UserPasswordChangedType }
func (UserDeactivated) EventType() Type     { return UserDeactivatedType }
func (UserActivated) EventType() Type       { return UserActivatedType }
func (UserDeleted) EventType() Type         { return UserDeletedType }

// UserState is the state after any user event.
func UserState(p Payload) (User, bool) {
	switch e := p.(type) {
	case *UserCreated:
		return e.User, true
	case *UserUpdated:
		return e.User, true
	case *UserPasswordChanged:
		return e.User, true
	case *UserDeactivated:
		return e.User, true
	case *UserActivated:
		return e.User, true
	case *UserDeleted:
		return e.User, true
	case *UserErased:
		return e.User, true
	case *UserRenamed:
		return e.User, true
	}
	return User{}, false
}
