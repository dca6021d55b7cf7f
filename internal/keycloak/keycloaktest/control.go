package keycloaktest

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
)

// realmFor returns the named realm; the caller holds s.mu.
func (s *Server) realmFor(name string) (*realm, error) {
	r, ok := s.realms[name]
	if !ok {
		return nil, fmt.Errorf("keycloaktest: no realm %q", name)
	}
	return r, nil
}

// SetUnmanagedAttributes switches the realm's unmanaged-attribute policy. It is on by
// default in the double; off, as in a fresh Keycloak 24+ realm, attributes such as
// ssodir_id are silently dropped on every write.
func (s *Server) SetUnmanagedAttributes(realmName string, enabled bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return err
	}
	r.dropUnmanaged = !enabled
	return nil
}

// AllowEditUsername switches the realm setting editUsernameAllowed ("Edit username" in
// the admin console). It is off by default, as in Keycloak: a PUT that changes a user's
// username is then refused with 400 error-user-attribute-read-only.
func (s *Server) AllowEditUsername(realmName string, allowed bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return err
	}
	r.editUsername = allowed
	return nil
}

// SetViewRealm gives the realm's service account view-realm (the default) or takes it
// away: without it the realm representation holds only the realm's name.
func (s *Server) SetViewRealm(realmName string, allowed bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return err
	}
	r.noViewRealm = !allowed
	return nil
}

// SetUsernameMinLength sets the minimum of the realm's username length validator, as an
// administrator edits it in Realm settings > User profile (Keycloak's default is 3): a
// shorter username is then refused with 400 error-invalid-length. 0 checks no minimum.
func (s *Server) SetUsernameMinLength(realmName string, n int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return err
	}
	r.usernameMinLength = n
	return nil
}

// AllowDuplicateEmails turns on the realm setting duplicateEmailsAllowed: from then on
// several users may share an email (a realm cannot go back while they do).
func (s *Server) AllowDuplicateEmails(realmName string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return err
	}
	r.duplicateEmails = true
	return nil
}

// Users is every user of the realm, ordered by username.
func (s *Server) Users(realmName string) []User {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return nil
	}
	sorted := r.usersSorted()
	out := make([]User, len(sorted))
	for i, u := range sorted {
		out[i] = r.snapshotUser(u)
	}
	return out
}

// User is the user with the Keycloak id.
func (s *Server) User(realmName, id string) (User, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return User{}, false
	}
	u, ok := r.users[id]
	if !ok {
		return User{}, false
	}
	return r.snapshotUser(u), true
}

// UserByUsername is the user with the username, in any case.
func (s *Server) UserByUsername(realmName, username string) (User, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return User{}, false
	}
	u, ok := r.byUsername[strings.ToLower(username)]
	if !ok {
		return User{}, false
	}
	return r.snapshotUser(u), true
}

// CreateUser adds a user behind the client's back (u.ID and u.Groups are ignored) and
// returns its id. The same uniqueness rules apply as through the API.
func (s *Server) CreateUser(realmName string, u User) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return "", err
	}
	nu, aerr := r.createUser(u.fields(), s.now().UnixMilli())
	if aerr != nil {
		return "", aerr
	}
	return nu.id, nil
}

func (u User) fields() userFields {
	return userFields{
		username: &u.Username, email: &u.Email, firstName: &u.FirstName, lastName: &u.LastName,
		enabled: &u.Enabled, emailVerified: &u.EmailVerified, attrs: u.Attributes,
		requiredActions: u.RequiredActions,
	}
}

// UpdateUser changes a user behind the client's back: change receives a snapshot and its
// result (except ID and Groups) replaces the user.
func (s *Server) UpdateUser(realmName, id string, change func(*User)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return err
	}
	u, ok := r.users[id]
	if !ok {
		return fmt.Errorf("keycloaktest: no user %s", id)
	}
	snap := r.snapshotUser(u)
	change(&snap)
	if aerr := r.replaceUser(u, snap.fields()); aerr != nil {
		return aerr
	}
	return nil
}

// DeleteUser removes a user behind the client's back.
func (s *Server) DeleteUser(realmName, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return err
	}
	u, ok := r.users[id]
	if !ok {
		return fmt.Errorf("keycloaktest: no user %s", id)
	}
	r.deleteUser(u)
	return nil
}

// Groups is every group of the realm, ordered by name.
func (s *Server) Groups(realmName string) []Group {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return nil
	}
	gs := slices.Collect(maps.Values(r.groups))
	sort.Slice(gs, func(i, j int) bool { return gs[i].name < gs[j].name })
	out := make([]Group, len(gs))
	for i, g := range gs {
		out[i] = r.snapshotGroup(g)
	}
	return out
}

// GroupByName is the group with exactly that name.
func (s *Server) GroupByName(realmName, name string) (Group, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return Group{}, false
	}
	g := r.findGroupByName(name)
	if g == nil {
		return Group{}, false
	}
	return r.snapshotGroup(g), true
}

// CreateGroup adds a group behind the client's back and returns its id.
func (s *Server) CreateGroup(realmName string, g Group) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return "", err
	}
	ng, aerr := r.createGroup(groupFields{name: &g.Name, description: &g.Description, attrs: g.Attributes})
	if aerr != nil {
		return "", aerr
	}
	return ng.id, nil
}

// CreateSubGroup adds a subgroup named name to the group parentID and returns its id.
// The top-level listing shows it only as its parent's subGroupCount; members are added to
// it with AddMember.
func (s *Server) CreateSubGroup(realmName, parentID, name string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return "", err
	}
	parent, ok := r.groups[parentID]
	if !ok {
		return "", fmt.Errorf("keycloaktest: no group %s", parentID)
	}
	g, aerr := r.createSubGroup(parent, name)
	if aerr != nil {
		return "", aerr
	}
	return g.id, nil
}

// UpdateGroup changes a group behind the client's back (ID and Members are ignored).
func (s *Server) UpdateGroup(realmName, id string, change func(*Group)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return err
	}
	g, ok := r.groups[id]
	if !ok {
		return fmt.Errorf("keycloaktest: no group %s", id)
	}
	snap := r.snapshotGroup(g)
	change(&snap)
	if aerr := r.replaceGroup(g, groupFields{name: &snap.Name, description: &snap.Description, attrs: snap.Attributes}); aerr != nil {
		return aerr
	}
	return nil
}

// DeleteGroup removes a group and its memberships behind the client's back.
func (s *Server) DeleteGroup(realmName, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return err
	}
	g, ok := r.groups[id]
	if !ok {
		return fmt.Errorf("keycloaktest: no group %s", id)
	}
	r.deleteGroup(g)
	return nil
}

// AddMember puts a user in a group behind the client's back.
func (s *Server) AddMember(realmName, userID, groupID string) error {
	return s.membership(realmName, userID, groupID, true)
}

// RemoveMember takes a user out of a group behind the client's back.
func (s *Server) RemoveMember(realmName, userID, groupID string) error {
	return s.membership(realmName, userID, groupID, false)
}

func (s *Server) membership(realmName, userID, groupID string, join bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return err
	}
	u, ok := r.users[userID]
	if !ok {
		return fmt.Errorf("keycloaktest: no user %s", userID)
	}
	g, ok := r.groups[groupID]
	if !ok {
		return fmt.Errorf("keycloaktest: no group %s", groupID)
	}
	if join {
		u.groups[g.id] = true
		g.members[u.id] = true
	} else {
		delete(u.groups, g.id)
		delete(g.members, u.id)
	}
	return nil
}

// Password is what the double keeps of a user's password, for assertions only: Keycloak
// keeps a salted hash, and no API of the double ever returns this.
type Password struct {
	Value     string
	Temporary bool
	// Sets counts how often a password was set for the user.
	Sets int
}

// LastPassword is the password last set for the user through reset-password.
func (s *Server) LastPassword(realmName, userID string) (Password, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, err := s.realmFor(realmName)
	if err != nil {
		return Password{}, false
	}
	u, ok := r.users[userID]
	if !ok || u.passwordSets == 0 {
		return Password{}, false
	}
	return Password{Value: u.password, Temporary: u.passwordTemporary, Sets: u.passwordSets}, true
}
