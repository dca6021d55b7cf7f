package objects

import "time"

// AccessRow is one membership interval of the access report (docs/history.md, "The access
// report"), as the query API answers it and the Go client reads it.
type AccessRow struct {
	// Group is the name the group held at the later of AddedAt and the report's from;
	// GroupID is the group's id (a group deleted and re-created is another id).
	Group   string `json:"group"`
	GroupID string `json:"group_id"`
	// Username is the name the user held at that same instant; UserID the user's id.
	// Both are empty, and Erased true, for a member erased since.
	Username string `json:"username"`
	UserID   string `json:"user_id"`
	Erased   bool   `json:"erased,omitempty"`
	// AddedAt / AddedBy: the change that began the interval, and its actor as recorded.
	AddedAt time.Time `json:"added_at"`
	AddedBy string    `json:"added_by"`
	// RemovedAt / RemovedBy: the change that ended it (a removal, the user's delete or the
	// group's delete); nil and "" while it lasts.
	RemovedAt *time.Time `json:"removed_at"`
	RemovedBy string     `json:"removed_by"`
	// ExpiresAt is the instant the membership was set to expire at, when the interval
	// records one (memberships that expire); nil otherwise.
	ExpiresAt *time.Time `json:"expires_at"`
	// UserPeriods are the user's periods (active, inactive, deleted) that overlap the
	// report's range, in order: whether the member could sign in meanwhile.
	UserPeriods []UserPeriod `json:"user_periods"`
}

// UserPeriod is one period of a user's life: [From, To), To nil while it lasts.
type UserPeriod struct {
	Status UserStatus `json:"status"`
	From   time.Time  `json:"from"`
	To     *time.Time `json:"to"`
}

// UserStatus names a period of a user's life in the access report.
type UserStatus string

// The statuses of a user's periods. Unknown: the user's life item was indexed before the
// index kept statuses (a replay rebuilds them).
const (
	UserActive   UserStatus = "active"
	UserInactive UserStatus = "inactive"
	UserDeleted  UserStatus = "deleted"
	UserUnknown  UserStatus = "unknown"
)
