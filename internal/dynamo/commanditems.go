package dynamo

import (
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// The command table's state items (docs/storage.md), written by the CommandStore, by the
// bench's raw baseline and seeding, and read back by a replay: one codec for all of them.

type userItem struct {
	ID                   string              `dynamodbav:"id"`
	SK                   string              `dynamodbav:"sk"`
	Type                 string              `dynamodbav:"type"`
	UserID               string              `dynamodbav:"user_id,omitempty"`
	Username             string              `dynamodbav:"username"`
	Email                string              `dynamodbav:"email,omitempty"`
	FirstName            string              `dynamodbav:"first_name,omitempty"`
	LastName             string              `dynamodbav:"last_name,omitempty"`
	IsActive             bool                `dynamodbav:"is_active"`
	Attributes           map[string][]string `dynamodbav:"attributes,omitempty"`
	Password             string              `dynamodbav:"password,omitempty"`
	Version              int64               `dynamodbav:"version"`
	CreatedAt            string              `dynamodbav:"created_at"`
	UpdatedAt            string              `dynamodbav:"updated_at"`
	Deleted              bool                `dynamodbav:"deleted"`
	DeletedMembershipRev int64               `dynamodbav:"deleted_membership_rev"`
	CleanupPending       bool                `dynamodbav:"cleanup_pending,omitempty"`
	SSOType              string              `dynamodbav:"sso_type"`
	// ErasureID marks the tombstone of a user being erased (commands.UserAggregate).
	ErasureID string `dynamodbav:"erasure_id,omitempty"`
	// NamedAt and FormerNames are events.User's: when a rename gave the person this
	// username, and the names it held before.
	NamedAt     string       `dynamodbav:"named_at,omitempty"`
	FormerNames []FormerName `dynamodbav:"former_names,omitempty"`
	// RenamingOwner holds a rename being decided until RenamingUntil (epoch ms);
	// MembersPending (with its owner and lease) marks the person whose rename's
	// memberships are still moving to this name; MovedTo and MovedVersion the old name's
	// tombstone meanwhile (commands.UserAggregate). Written by the rename's own requests.
	RenamingOwner     string `dynamodbav:"renaming_owner,omitempty"`
	RenamingUntil     int64  `dynamodbav:"renaming_until,omitempty"`
	MembersPending    int64  `dynamodbav:"members_pending,omitempty"`
	MembersOwner      string `dynamodbav:"members_owner,omitempty"`
	MembersLeaseUntil int64  `dynamodbav:"members_lease_until,omitempty"`
	MovedTo           string `dynamodbav:"moved_to,omitempty"`
	MovedVersion      int64  `dynamodbav:"moved_version,omitempty"`
}

// FormerName is a username a person held before a rename, as the command and read tables
// keep it (events.FormerName).
type FormerName struct {
	Username string `dynamodbav:"username,omitempty"`
	// Name and Key are a group's former name and key (events.FormerGroupName); a
	// person's former name has Username instead.
	Name  string `dynamodbav:"name,omitempty"`
	Key   string `dynamodbav:"key,omitempty"`
	From  string `dynamodbav:"from"`
	Until string `dynamodbav:"until"`
}

// EncodeFormerGroupNames is the stored form of a group's former names.
func EncodeFormerGroupNames(fs []events.FormerGroupName) []FormerName {
	if len(fs) == 0 {
		return nil
	}
	out := make([]FormerName, len(fs))
	for i, f := range fs {
		out[i] = FormerName{Name: f.Name, Key: f.Key, From: FormatTime(f.From), Until: FormatTime(f.Until)}
	}
	return out
}

// DecodeFormerGroupNames reads what EncodeFormerGroupNames stored.
func DecodeFormerGroupNames(fs []FormerName) []events.FormerGroupName {
	if len(fs) == 0 {
		return nil
	}
	out := make([]events.FormerGroupName, len(fs))
	for i, f := range fs {
		from, _ := ParseTime(f.From)
		until, _ := ParseTime(f.Until)
		out[i] = events.FormerGroupName{Name: f.Name, Key: f.Key, From: from, Until: until}
	}
	return out
}

// EncodeFormerNames is the stored form of a person's former names.
func EncodeFormerNames(fs []events.FormerName) []FormerName {
	if len(fs) == 0 {
		return nil
	}
	out := make([]FormerName, len(fs))
	for i, f := range fs {
		out[i] = FormerName{Username: f.Username, From: FormatTime(f.From), Until: FormatTime(f.Until)}
	}
	return out
}

// DecodeFormerNames reads what EncodeFormerNames stored.
func DecodeFormerNames(fs []FormerName) []events.FormerName {
	if len(fs) == 0 {
		return nil
	}
	out := make([]events.FormerName, len(fs))
	for i, f := range fs {
		from, _ := ParseTime(f.From)
		until, _ := ParseTime(f.Until)
		out[i] = events.FormerName{Username: f.Username, From: from, Until: until}
	}
	return out
}

func formatOptionalTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return FormatTime(t)
}

type groupItem struct {
	ID                 string              `dynamodbav:"id"`
	SK                 string              `dynamodbav:"sk"`
	Type               string              `dynamodbav:"type"`
	GroupID            string              `dynamodbav:"group_id,omitempty"`
	Key                string              `dynamodbav:"key"`
	Name               string              `dynamodbav:"name"`
	Description        string              `dynamodbav:"description,omitempty"`
	Attributes         map[string][]string `dynamodbav:"attributes,omitempty"`
	Version            int64               `dynamodbav:"version"`
	CreatedAt          string              `dynamodbav:"created_at"`
	UpdatedAt          string              `dynamodbav:"updated_at"`
	Deleted            bool                `dynamodbav:"deleted"`
	LastDeletedVersion int64               `dynamodbav:"last_deleted_version"`
	CleanupPending     bool                `dynamodbav:"cleanup_pending,omitempty"`
	// MembersPending is the version of a members change whose membership items may not
	// all be written yet, MembersOwner the writer holding its lease until
	// MembersLeaseUntil (epoch ms); see commands.MembersLease.
	MembersPending    int64  `dynamodbav:"members_pending,omitempty"`
	MembersOwner      string `dynamodbav:"members_owner,omitempty"`
	MembersLeaseUntil int64  `dynamodbav:"members_lease_until,omitempty"`
	SSOType           string `dynamodbav:"sso_type"`
	// MemberMoves counts the user renames that moved a membership of this group since its
	// config was last put (a group rename conditions on it); MovedTo and MovedVersion mark
	// the tombstone a group rename left while its memberships move to MovedTo
	// (commands.GroupAggregate).
	MemberMoves  int64  `dynamodbav:"member_moves,omitempty"`
	MovedTo      string `dynamodbav:"moved_to,omitempty"`
	MovedVersion int64  `dynamodbav:"moved_version,omitempty"`
	// NamedAt and FormerNames are events.Group's: when a rename gave the group this name,
	// and the names it held before.
	NamedAt     string       `dynamodbav:"named_at,omitempty"`
	FormerNames []FormerName `dynamodbav:"former_names,omitempty"`
}

// UserConfigItem is a user's `config` item: its state, the ciphertext of a password in
// flight to Keycloak ("" for none), and whether a delete's clean-up is pending.
func UserConfigItem(u events.User, passwordCiphertext string, cleanupPending bool) (map[string]types.AttributeValue, error) {
	it := userItem{
		ID: UserID(u.Username), SK: SKConfig, Type: "user", UserID: u.ID, Username: u.Username,
		Email: u.Email, FirstName: u.FirstName, LastName: u.LastName, IsActive: u.IsActive && !u.Deleted,
		Attributes: u.Attributes, Password: passwordCiphertext, Version: u.Version,
		CreatedAt: FormatTime(u.CreatedAt), UpdatedAt: FormatTime(u.UpdatedAt), Deleted: u.Deleted,
		DeletedMembershipRev: u.DeletedMembershipRev, CleanupPending: cleanupPending, SSOType: "keycloak",
		NamedAt: formatOptionalTime(u.NamedAt), FormerNames: EncodeFormerNames(u.FormerNames),
	}
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("encode config of user %s: %w", logUser(u.Username), err)
	}
	return item, nil
}

// GroupConfigItem is a group's `config` item: its state, whether a delete's clean-up is
// pending, and the lease of a members change whose items are still being written (nil:
// none).
func GroupConfigItem(g events.Group, cleanupPending bool, pending *commands.MembersLease) (map[string]types.AttributeValue, error) {
	it := groupItem{
		ID: GroupID(g.Key), SK: SKConfig, Type: "group", GroupID: g.ID, Key: g.Key, Name: g.Name,
		Description: g.Description, Attributes: g.Attributes, Version: g.Version,
		CreatedAt: FormatTime(g.CreatedAt), UpdatedAt: FormatTime(g.UpdatedAt), Deleted: g.Deleted,
		LastDeletedVersion: g.LastDeletedVersion, CleanupPending: cleanupPending, SSOType: "keycloak",
		NamedAt: formatOptionalTime(g.NamedAt), FormerNames: EncodeFormerGroupNames(g.FormerNames),
	}
	if pending != nil {
		it.MembersPending, it.MembersOwner, it.MembersLeaseUntil = pending.Version, pending.Owner, pending.Until.UnixMilli()
	}
	item, err := attributevalue.MarshalMap(it)
	if err != nil {
		return nil, fmt.Errorf("encode config of group %s: %w", g.Key, err)
	}
	return item, nil
}

// EmailGuardKey is the key of the item that claims an email address for one user.
func EmailGuardKey(email string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"id": str("email#" + email), "sk": str("guard")}
}

// EmailGuardItem claims email for username.
func EmailGuardItem(email, username string) map[string]types.AttributeValue {
	it := EmailGuardKey(email)
	it["username"] = str(username)
	return it
}

// MemberItem is a membership in its group's partition: membershipRev is the group's
// membership revision after the addition, groupVersion the group version of the addition
// (which lets a replay find its history record).
func MemberItem(groupKey, username, userID string, membershipRev, groupVersion int64, addedAt string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		"id": str(GroupID(groupKey)), "sk": str(MemberSK(username)), "member_id": str(username),
		"user_id": str(userID), "added_at": str(addedAt), "membership_rev": num(membershipRev),
		"group_version": num(groupVersion),
	}
}

// StateItem is a `config` or `member#` item of the command table as a replay reads it.
type StateItem struct {
	ID            string              `dynamodbav:"id"`
	SK            string              `dynamodbav:"sk"`
	Type          string              `dynamodbav:"type"`
	UserID        string              `dynamodbav:"user_id"`
	GroupID       string              `dynamodbav:"group_id"`
	Username      string              `dynamodbav:"username"`
	Key           string              `dynamodbav:"key"`
	Name          string              `dynamodbav:"name"`
	Email         string              `dynamodbav:"email"`
	FirstName     string              `dynamodbav:"first_name"`
	LastName      string              `dynamodbav:"last_name"`
	Description   string              `dynamodbav:"description"`
	IsActive      bool                `dynamodbav:"is_active"`
	Attributes    map[string][]string `dynamodbav:"attributes"`
	Version       int64               `dynamodbav:"version"`
	CreatedAt     string              `dynamodbav:"created_at"`
	UpdatedAt     string              `dynamodbav:"updated_at"`
	Deleted       bool                `dynamodbav:"deleted"`
	DeletedRev    int64               `dynamodbav:"deleted_membership_rev"`
	LastDeleted   int64               `dynamodbav:"last_deleted_version"`
	MemberID      string              `dynamodbav:"member_id"`
	MembershipRev int64               `dynamodbav:"membership_rev"`
	GroupVersion  int64               `dynamodbav:"group_version"`
	AddedAt       string              `dynamodbav:"added_at"`
	ExpiresAt     string              `dynamodbav:"expires_at"`
	NamedAt       string              `dynamodbav:"named_at"`
	FormerNames   []FormerName        `dynamodbav:"former_names"`
}

// DecodeStateItem reads a `config` or `member#` item.
func DecodeStateItem(item map[string]types.AttributeValue) (StateItem, error) {
	var s StateItem
	err := attributevalue.UnmarshalMap(item, &s)
	return s, err
}

// Expiry is a membership item's expires_at (nil: none).
func (s StateItem) Expiry() *time.Time {
	if s.ExpiresAt == "" {
		return nil
	}
	t, err := ParseTime(s.ExpiresAt)
	if err != nil {
		return nil
	}
	return &t
}

// HistoryVersion is the version whose history record carries this state item.
func (s StateItem) HistoryVersion() int64 {
	if IsMemberSK(s.SK) {
		return s.GroupVersion
	}
	return s.Version
}
