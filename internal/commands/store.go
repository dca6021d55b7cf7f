// Package commands holds ssodir's write-side rules: one file per command, each with its own
// handler that loads the aggregate, checks the invariants, and hands the resulting event and
// state to the Store, which appends them atomically with the expected version.
package commands

import (
	"context"
	"errors"
	"time"

	"github.com/ssodir/ssodir/internal/events"
)

// Tenant names the tenant a command is for.
type Tenant struct {
	System string
	ID     string
}

// Idempotency is a client's Idempotency-Key for one request, already scoped to the tenant
// and the caller, with what the response to a first execution is.
type Idempotency struct {
	Key string
	// Request is the request's fingerprint (see Fingerprinter).
	Request  RequestFingerprint
	Status   int
	Location string
}

// Meta is who sent a command, and how.
type Meta struct {
	Actor         string
	CommandID     string
	CorrelationID string
	// IfMatch is the version the client insists on; nil when it sent none.
	IfMatch     *int64
	Idempotency *Idempotency
}

// UserAggregate is a user as the write side knows it.
type UserAggregate struct {
	// Exists is false when the username was never used.
	Exists             bool
	State              events.User
	PasswordCiphertext string
	CleanupPending     bool
	// ErasureID is set on the tombstone of a user whose erasure is under way: the name
	// is neither usable nor erasable again until the erasure is done (docs/erasure.md).
	ErasureID string
	// Renaming marks a live user whose rename is being decided (RenameUserHandler): the
	// renamer holds it until Renaming.Until, and every command on the name waits for it
	// (settleUser). nil when there is none.
	Renaming *MembersLease
	// Pending marks a person whose rename's memberships may not all have moved to this
	// name yet (the rename's version, its mover's lease); MovedTo and MovedVersion mark the
	// tombstone a rename left under the old name while they move (docs/storage.md,
	// "Renames"). A move is over once MovedTo is no longer pending at MovedVersion.
	Pending      *MembersLease
	MovedTo      string
	MovedVersion int64
}

// Live reports whether the user exists and is not deleted.
func (a UserAggregate) Live() bool { return a.Exists && !a.State.Deleted }

// GroupAggregate is a group as the write side knows it.
type GroupAggregate struct {
	Exists         bool
	State          events.Group
	CleanupPending bool
	// Pending marks a members change whose membership items may not all be written yet
	// (ChangeMembersHandler); nil when there is none.
	Pending *MembersLease
	// MemberMoves counts the user renames that moved a membership of the group since its
	// config was last written: a group rename conditions on it, so that a member renamed
	// after the rename read the members makes it decide again.
	MemberMoves int64
	// MovedTo and MovedVersion mark the tombstone a group rename left under the old key
	// while its memberships move to the key MovedTo (the rename's pending change at
	// MovedVersion there; RenameGroupHandler). Kept after the move; a move is over once
	// MovedTo's group is no longer pending at MovedVersion.
	MovedTo      string
	MovedVersion int64
}

// Live reports whether the group exists and is not deleted.
func (a GroupAggregate) Live() bool { return a.Exists && !a.State.Deleted }

// Membership is one user in one group.
type Membership struct {
	GroupKey string
	Username string
	UserID   string
	// ExpiresAt, on an added membership, is when it ends by itself (nil: never).
	ExpiresAt *time.Time
}

// ExpiryDue is the due-index entry of an expiring membership (internal/expiry): the
// scheduler finds it by its instant and removes the member then, if the membership's
// expiry is still At. It names ids only (no username: nothing an erasure must find).
type ExpiryDue struct {
	GroupID, UserID string
	At              time.Time
}

// MemberExpiry is a change of an existing membership's expiry: the item must still be
// UserID's, and its expiry becomes ExpiresAt (nil: none).
type MemberExpiry struct {
	GroupKey  string
	Username  string
	UserID    string
	ExpiresAt *time.Time
}

// MembersWrite is what a recorded members change writes: its group, version and time,
// and its members.
type MembersWrite struct {
	GroupKey string
	// GroupID names the group in the expiry due index, for the added members that expire.
	GroupID        string
	Version        int64
	At             time.Time
	Added, Removed []events.Member
}

// Cleanup is what a delete leaves for RemoveMembersAfter: the memberships beyond its
// transaction. It may run long after the delete (a re-create finishes it), even beside a
// new incarnation's own joins, so it removes only memberships from before the delete: of
// a deleted group, those added at a lower group version; of a deleted user, those at or
// below the membership revision the delete was decided on.
type Cleanup struct {
	Kind events.AggregateKind
	Key  string
	// Version is the delete's (the tombstone's) version.
	Version int64
	// MembershipRev is a deleted user's membership revision at the delete.
	MembershipRev int64
	Members       []Membership
}

// Change is everything one accepted command writes, in one transaction.
type Change struct {
	Event events.Envelope
	// ExpectedVersion is the aggregate's version the change was decided on (0: absent).
	ExpectedVersion int64
	// User or Group is the new config state; exactly one is set.
	User  *UserAggregate
	Group *GroupAggregate
	// ClaimEmail takes an email's uniqueness guard; ReleaseEmail gives one back.
	ClaimEmail   string
	ReleaseEmail string
	// AddMember writes a membership; the user must be live and its membership revision
	// still ExpectedMembershipRev (the new revision is ExpectedMembershipRev+1).
	AddMember *Membership
	// RemoveMembers deletes memberships (with their pointers) within the transaction;
	// with RequireMembers each must still exist, else the change conflicts.
	RemoveMembers  []Membership
	RequireMembers bool
	// ExpectedMemberMoves, when set, is the group's count of member moves (GroupAggregate.
	// MemberMoves) the change was decided on, beside ExpectedVersion: a group delete that
	// read the members before a user rename moved one decides again (move_user.go).
	ExpectedMemberMoves *int64
	// RequireExpiresAt, with RequireMembers, is the expiry each removed membership must
	// still have (an expiry's removal: a renewal or a removal in between wins).
	RequireExpiresAt *time.Time
	// SetExpiry changes an existing membership's expiry.
	SetExpiry *MemberExpiry
	// Due is written to the expiry due index in the same transaction (nil: none).
	Due *ExpiryDue
	// ExpectedMembershipRev guards AddMember and user deletes against concurrent joins.
	ExpectedMembershipRev *int64
	// PutLookups and DeleteLookups write and remove the pointers that find the aggregate
	// by its immutable id and by its external id, with the state they point to.
	PutLookups, DeleteLookups []Lookup
	// Idempotency is recorded with the change, so a retried request finds it.
	Idempotency *Idempotency
	Actor       string
	// DeleteCounts, when set, are counts of user deletes the change was decided on: the
	// transaction commits only while each is still the same (a members change: no user it
	// names can be deleted or erased between its decision and its commit).
	DeleteCounts DeleteCounts
	// Erasure, on a user.erased change, is the erasure's ledger entry, written in the
	// same transaction; the idempotency record then names the erasure, not the user.
	Erasure *Erasure
}

// DeleteCounts are counts of user deletes (Store.UserDeleteCounts): the key of each count
// item read, and its value.
type DeleteCounts map[string]int64

// Moved reports whether a count of later differs from c's (or c has none of it).
func (c DeleteCounts) Moved(later DeleteCounts) bool {
	for k, n := range later {
		if was, ok := c[k]; !ok || was != n {
			return true
		}
	}
	return false
}

// Erasure is the PII-free ledger entry of one erasure (docs/erasure.md).
type Erasure struct {
	ID          string
	RequestedAt time.Time
	Actor       string
	Reason      string
	// UserIDHashes are erasure.HashID of the ids of the user's incarnations known when
	// the erasure is requested; the erasure adds those it finds in the history.
	UserIDHashes []string
	// Places are the places the erasure must clean, each "pending" at first.
	Places []string
	// AllIncarnations: earlier incarnations under the name are erased too (the
	// re-application to restored tables reads it).
	AllIncarnations bool
}

// LookupBy is what a lookup pointer finds an aggregate by.
type LookupBy string

const (
	// LookupByID finds a user or group by its immutable id (events.User.ID, events.Group.ID).
	LookupByID LookupBy = "id"
	// LookupByExternalID finds the users or groups a provisioning client gave an external
	// id (identity.ExternalIDAttribute); several may share one.
	LookupByExternalID LookupBy = "external_id"
)

// Lookup is a pointer from an id or external id to the aggregate of one incarnation.
type Lookup struct {
	Kind events.AggregateKind
	By   LookupBy
	// Value is the id or the external id.
	Value string
	// ID is the aggregate's immutable id; Key its username or group key.
	ID, Key string
}

// Store is the write model the handlers need.
type Store interface {
	LoadUser(ctx context.Context, t Tenant, username string) (UserAggregate, error)
	LoadGroup(ctx context.Context, t Tenant, key string) (GroupAggregate, error)
	// UserMemberships is the user's membership revision and group keys.
	UserMemberships(ctx context.Context, t Tenant, username string) (rev int64, groups []string, err error)
	// GroupMembers are the usernames of a group's members.
	GroupMembers(ctx context.Context, t Tenant, key string) ([]Membership, error)
	// Memberships are the user ids of the membership items in the group of those of the
	// usernames that have one (an item left by a deleted incarnation has its id).
	Memberships(ctx context.Context, t Tenant, groupKey string, usernames []string) (map[string]string, error)
	// LoadUsers reads the config items of the usernames; a username never used is absent.
	LoadUsers(ctx context.Context, t Tenant, usernames []string) (map[string]UserAggregate, error)
	// UserDeleteCounts are the counts, read strongly consistently, that cover the
	// usernames: every change writing a user tombstone (a delete, an erasure, a rename)
	// raises the count of its username in its own transaction, so while they stay the
	// same, none of the usernames was deleted.
	UserDeleteCounts(ctx context.Context, t Tenant, usernames []string) (DeleteCounts, error)
	// MaxMembersPerChange is how many memberships one Change can remove.
	MaxMembersPerChange() int
	Append(ctx context.Context, t Tenant, c Change) error
	// RemoveMembersAfter deletes memberships left over by a delete, outside its
	// transaction, then clears the aggregate's cleanup mark at the delete's version.
	RemoveMembersAfter(ctx context.Context, t Tenant, c Cleanup) error
	// WriteMembers writes the membership items a recorded members change added (group
	// pointers first, then memberships) and deletes those it removed, outside any
	// transaction; before runs before each request, and its error stops the writes.
	WriteMembers(ctx context.Context, t Tenant, w MembersWrite, before func(context.Context) error) error
	// MoveMembers moves the memberships of a recorded group rename from the old key to the
	// new one, outside any transaction: the users' pointers to the new key first, then the
	// memberships there, then the old memberships and pointers deleted; before runs before
	// each request, and its error stops the writes. Every write can be repeated.
	MoveMembers(ctx context.Context, t Tenant, m MembersMove, before func(context.Context) error) error
	// UndoMembers removes memberships that WriteMembers wrote for users deleted meanwhile:
	// each only while it is still the one of that change (user id and group version).
	UndoMembers(ctx context.Context, t Tenant, groupKey string, version int64, members []events.Member) error
	// LeaseMembers gives l to l.Owner if the group's pending change is still l.Version and
	// its lease is l.Owner's or ran out before now; ok is false otherwise.
	LeaseMembers(ctx context.Context, t Tenant, groupKey string, l MembersLease, now time.Time) (ok bool, err error)
	// FinishMembers clears the pending mark of l's change if l.Owner still holds it.
	FinishMembers(ctx context.Context, t Tenant, groupKey string, l MembersLease) error
	// UserHistory reads every history record of a user's partition (every incarnation
	// kept under the name), oldest first: an erasure checks its reason against them.
	UserHistory(ctx context.Context, t Tenant, username string) ([]events.Envelope, error)
	// LoadRecord reads the immutable record of one version of an aggregate.
	LoadRecord(ctx context.Context, t Tenant, kind events.AggregateKind, key string, version int64) (events.Envelope, error)
	// MemberStates reads the membership items of username in the groups, strongly
	// consistently: the groups it has one in.
	MemberStates(ctx context.Context, t Tenant, username string, groupKeys []string) (map[string]MemberState, error)
	// AppendRename writes a user rename in one transaction (docs/storage.md, "Renames").
	AppendRename(ctx context.Context, t Tenant, r UserRename) error
	// MarkRename marks the live user username at version as being renamed by l.Owner
	// until l.Until, if no other renamer holds a mark that runs after now, and raises the
	// count of user deletes that covers the name; ok is false when the user moved on or
	// another renamer holds it.
	MarkRename(ctx context.Context, t Tenant, username string, version int64, l MembersLease, now time.Time) (ok bool, err error)
	// ClearRenameMark removes the rename mark of owner from username's config, if it is
	// still there.
	ClearRenameMark(ctx context.Context, t Tenant, username, owner string) error
	// LeaseUserMove gives l to l.Owner if username's rename is still pending at l.Version
	// and its lease is l.Owner's or ran out before now; ok is false otherwise.
	LeaseUserMove(ctx context.Context, t Tenant, username string, l MembersLease, now time.Time) (ok bool, err error)
	// FinishUserMove clears the pending mark of l's rename if l.Owner still holds it.
	FinishUserMove(ctx context.Context, t Tenant, username string, l MembersLease) error
	// MoveUserMemberships moves a recorded user rename's memberships from the old name to
	// the new, a few in each transaction: a membership whose group was deleted since, or
	// that was already moved, is left. before runs before each request; its error stops
	// the moves. Every move can be repeated.
	MoveUserMemberships(ctx context.Context, t Tenant, m UserMove, before func(context.Context) error) error
	// GroupMemberStates reads the membership items of a group, strongly consistently,
	// ordered by username: at most limit of them.
	GroupMemberStates(ctx context.Context, t Tenant, key string, limit int) ([]GroupMember, error)
	// AppendGroupRename writes a group rename in one transaction (docs/storage.md,
	// "Group renames").
	AppendGroupRename(ctx context.Context, t Tenant, r GroupRename) error
	// RecordNoop records an idempotent request that changed nothing.
	RecordNoop(ctx context.Context, t Tenant, idem Idempotency, commandID string, kind events.AggregateKind, key string, version int64) error
}

// MembersMove is what a recorded group rename moves: its members, from the key From to
// the key To, where they take the rename's Version.
type MembersMove struct {
	From, To string
	Version  int64
	Members  []events.RenamedMember
}

// MemberState is a membership item of the write model.
type MemberState struct {
	UserID        string
	GroupVersion  int64
	MembershipRev int64
	AddedAt       time.Time
	// ExpiresAt is when the membership ends by itself (nil: never).
	ExpiresAt *time.Time
}

// UserRename is everything a rename writes, in one transaction: Change holds the person
// under the new name (Event, User, ExpectedVersion: the new name's aggregate version, 0
// when the name was never used; PutLookups; Idempotency), with the rename pending
// (User.Pending) when memberships move; the old name's config becomes Tombstone
// (conditioned on FromVersion and on the renamer's mark Mark), marked with the new name
// while they move, and takes the next membership revision (from FromMembershipRev), as a
// delete does; the new name takes its next membership revision (from ToMembershipRev),
// which the moved memberships carry; the email's guard passes to the new name. The
// memberships move after it (MoveUserMemberships).
type UserRename struct {
	Change            Change
	From              string
	FromVersion       int64
	Mark              string
	Tombstone         events.User
	FromMembershipRev int64
	ToMembershipRev   int64
	Email             string
	Memberships       []events.RenamedMembership
	// UserID is the person's id, which every moved membership item must carry.
	UserID string
}

// UserMove is what a recorded user rename moves: the memberships of the person UserID
// from the name From to the name To.
type UserMove struct {
	From, To    string
	UserID      string
	Memberships []events.RenamedMembership
}

// Conflicts an Append can report; the handlers turn them into client errors or retries.
var (
	// ErrVersionConflict: the aggregate's version is no longer the expected one.
	ErrVersionConflict = errors.New("aggregate changed concurrently")
	// ErrEmailTaken: the email guard belongs to another user.
	ErrEmailTaken = errors.New("email taken")
	// ErrUserGone: a membership's user is not live any more.
	ErrUserGone = errors.New("user deleted concurrently")
	// ErrRecordGone: a history record was removed by SSO_HISTORY_RETENTION.
	ErrRecordGone = errors.New("history record gone (history retention)")
	// ErrMembershipConflict: the user's membership revision moved.
	ErrMembershipConflict = errors.New("memberships changed concurrently")
)

// ReplayError reports that an Idempotency-Key was already used for this very request: the
// caller answers with the recorded response instead.
type ReplayError struct{ Record IdempotencyRecord }

func (e *ReplayError) Error() string { return "idempotent replay" }

// IdempotencyRecord is what a first execution recorded under a key.
type IdempotencyRecord struct {
	// RequestHash is the fingerprint the first request recorded; compare it with
	// RequestFingerprint.Matches.
	RequestHash string
	Status      int
	Location    string
	Kind        events.AggregateKind
	Key         string
	Version     int64
	CommandID   string
	CreatedAt   time.Time
	// Body is the answer's body (JSON), kept when history records expire
	// (SSO_HISTORY_RETENTION), so that a replay can still answer it after its record is
	// gone; nil otherwise (the record rebuilds it).
	Body []byte
}

// Encrypter encrypts secrets bound to a context string.
type Encrypter interface {
	Encrypt(ctx context.Context, plaintext []byte, aad string) (string, error)
}

// Clock tells the time; tests fix it.
type Clock func() time.Time

// IDs makes new unique ids (event ids, aggregate ids).
type IDs func() string
