package keycloak

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Directory is the ssodir side of a full reconcile: every live (not deleted) user and group
// of one tenant. Implementations page through their store and yield as they go; an error
// ends the reconcile before anything is planned. Both sequences must be complete: a user
// missing from Users is planned for deletion (bounded by the safety valve).
type Directory interface {
	Users(ctx context.Context) iter.Seq2[DirectoryUser, error]
	Groups(ctx context.Context) iter.Seq2[DirectoryGroup, error]
}

// DirectoryUser is a user as the directory holds it.
type DirectoryUser struct {
	// ID is ssodir's immutable id for the user; it becomes the ssodir_id attribute. It must
	// not contain whitespace or double quotes (it is searched for with q=ssodir_id:<id>).
	ID        string
	Username  string
	Email     string
	FirstName string
	LastName  string
	// Active false disables the user in Keycloak.
	Active     bool
	Attributes map[string][]string
	// Version is the directory version this state is; it becomes the ssodir_version
	// attribute, and nothing older than what Keycloak holds is ever written over it.
	Version int64
	// Groups holds the directory ids of the user's groups. Reconcile uses it; the
	// event-driven Syncer.UpsertUser ignores it (memberships arrive as their own events).
	Groups []string
}

// DirectoryGroup is a group as the directory holds it.
type DirectoryGroup struct {
	// ID is ssodir's immutable id for the group, as for DirectoryUser.ID.
	ID          string
	Name        string
	Description string
	Attributes  map[string][]string
	// Version is the directory version, as for DirectoryUser.Version.
	Version int64
}

// OnDelete is a tenant's on_delete setting: what becomes of a Keycloak user whose
// directory user was deleted.
type OnDelete string

const (
	// OnDeleteDelete deletes the Keycloak user (the default).
	OnDeleteDelete OnDelete = "delete"
	// OnDeleteDisable disables it and keeps it, with its username and email.
	OnDeleteDisable OnDelete = "disable"
)

// ParseOnDelete reads an on_delete setting; empty means the default, delete.
func ParseOnDelete(s string) (OnDelete, error) {
	switch OnDelete(s) {
	case "", OnDeleteDelete:
		return OnDeleteDelete, nil
	case OnDeleteDisable:
		return OnDeleteDisable, nil
	}
	return "", fmt.Errorf("keycloak: on_delete %q: want %q or %q", s, OnDeleteDelete, OnDeleteDisable)
}

// DefaultPreservedAttributes are user attributes that live in Keycloak rather than in the
// directory and that a reconcile therefore keeps: the language a user picked on the login
// page or in the account console.
var DefaultPreservedAttributes = []string{"locale"}

func checkID(kind, id string) error {
	if id == "" || strings.ContainsAny(id, " \t\r\n\"") {
		return fmt.Errorf("keycloak: %s id %q: must be non-empty, without whitespace or quotes", kind, id)
	}
	return nil
}

// desiredUser is the Keycloak user ssodir wants for du. It starts from current (nil when
// creating), so that what ssodir does not own — required actions, email verification,
// preserved attributes — survives Keycloak's full-replace PUT.
func desiredUser(du DirectoryUser, current *User, preserve []string) User {
	var u User
	var currentAttrs map[string][]string
	if current != nil {
		u = *current
		u.RequiredActions = slices.Clone(current.RequiredActions)
		currentAttrs = current.Attributes
	}
	u.Username = strings.ToLower(du.Username)
	u.Email = strings.ToLower(du.Email)
	u.FirstName = du.FirstName
	u.LastName = du.LastName
	u.Enabled = du.Active
	u.Attributes = map[string][]string{}
	for _, k := range preserve {
		if v := currentAttrs[k]; len(v) > 0 {
			u.Attributes[k] = slices.Clone(v)
		}
	}
	// What Keycloak holds of the user's password is not the directory's state: the marks
	// of it (Syncer.UpsertUserPassword) stay as they are.
	for _, k := range passwordAttributes {
		if v := currentAttrs[k]; len(v) > 0 {
			u.Attributes[k] = slices.Clone(v)
		}
	}
	// ssodir owns every other attribute of its users: one removed in the directory is
	// removed in Keycloak.
	for k, v := range du.Attributes {
		if len(v) > 0 && !reservedAttribute(k) {
			u.Attributes[k] = slices.Clone(v)
		}
	}
	u.Attributes[AttrSsodirID] = []string{du.ID}
	u.Attributes[AttrSsodirVersion] = []string{strconv.FormatInt(du.Version, 10)}
	return u
}

// desiredGroup is the Keycloak group ssodir wants for dg; ssodir owns all of a managed
// group's attributes.
func desiredGroup(dg DirectoryGroup, current *Group) Group {
	g := Group{Name: dg.Name, Description: dg.Description, Attributes: map[string][]string{}}
	if current != nil {
		g.ID = current.ID
	}
	for k, v := range dg.Attributes {
		if len(v) > 0 && !reservedAttribute(k) {
			g.Attributes[k] = slices.Clone(v)
		}
	}
	g.Attributes[AttrSsodirID] = []string{dg.ID}
	g.Attributes[AttrSsodirVersion] = []string{strconv.FormatInt(dg.Version, 10)}
	return g
}

// reservedAttribute reports the attributes ssodir writes itself: a directory attribute of
// the same name is not copied over them.
func reservedAttribute(k string) bool {
	return k == AttrSsodirID || k == AttrSsodirVersion || slices.Contains(passwordAttributes, k)
}

// versionOf reads an object's ssodir_version; 0 when it has none (an object created
// before versions were written, or not managed), which any directory version is newer than.
func versionOf(attrs map[string][]string) int64 {
	n, err := strconv.ParseInt(firstValue(attrs, AttrSsodirVersion), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Change is one field that differs, as a reconcile plan shows it.
type Change struct {
	Field string
	Old   string
	New   string
}

func diffUser(cur, want User) []Change {
	var ch []Change
	if !strings.EqualFold(cur.Username, want.Username) {
		ch = append(ch, Change{"username", cur.Username, want.Username})
	}
	if !strings.EqualFold(cur.Email, want.Email) {
		ch = append(ch, Change{"email", cur.Email, want.Email})
	}
	if cur.FirstName != want.FirstName {
		ch = append(ch, Change{"firstName", cur.FirstName, want.FirstName})
	}
	if cur.LastName != want.LastName {
		ch = append(ch, Change{"lastName", cur.LastName, want.LastName})
	}
	if cur.Enabled != want.Enabled {
		ch = append(ch, Change{"enabled", fmt.Sprint(cur.Enabled), fmt.Sprint(want.Enabled)})
	}
	return append(ch, diffAttributes(cur.Attributes, want.Attributes)...)
}

func diffGroup(cur, want Group) []Change {
	var ch []Change
	if cur.Name != want.Name {
		ch = append(ch, Change{"name", cur.Name, want.Name})
	}
	if cur.Description != want.Description {
		ch = append(ch, Change{"description", cur.Description, want.Description})
	}
	return append(ch, diffAttributes(cur.Attributes, want.Attributes)...)
}

// diffAttributes compares attribute values as sets: Keycloak does not promise to return
// the values of an attribute in the order they were written.
func diffAttributes(cur, want map[string][]string) []Change {
	keys := map[string]bool{}
	for k := range cur {
		keys[k] = true
	}
	for k := range want {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	var ch []Change
	for _, k := range sorted {
		a, b := sortedCopy(cur[k]), sortedCopy(want[k])
		if !slices.Equal(a, b) {
			ch = append(ch, Change{"attributes." + k, formatValues(cur[k]), formatValues(want[k])})
		}
	}
	return ch
}

func sortedCopy(v []string) []string {
	out := slices.Clone(v)
	sort.Strings(out)
	return out
}

func formatValues(v []string) string {
	if len(v) == 0 {
		return "(none)"
	}
	return "[" + strings.Join(v, ", ") + "]"
}
