package keycloaktest

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/google/uuid"
)

// User is a snapshot of a user in the double, for assertions and for changes made behind
// the client's back.
type User struct {
	ID              string
	Username        string
	Email           string
	FirstName       string
	LastName        string
	Enabled         bool
	EmailVerified   bool
	Attributes      map[string][]string
	RequiredActions []string
	// Groups holds the ids of the user's groups, ordered by group name.
	Groups []string
}

// Group is a snapshot of a (top-level) group in the double.
type Group struct {
	ID          string
	Name        string
	Description string
	Attributes  map[string][]string
	// Members holds the ids of the group's members, ordered by username.
	Members []string
}

type user struct {
	id, username, email, firstName, lastName string
	enabled, emailVerified                   bool
	attrs                                    map[string][]string
	requiredActions                          []string
	created                                  int64
	groups                                   map[string]bool
	password                                 string
	passwordTemporary                        bool
	passwordSets                             int
	// previous are the passwords before the current one, newest last (for passwordHistory).
	previous []string
}

type group struct {
	id, name, description string
	attrs                 map[string][]string
	members               map[string]bool
	// parent is the id of a subgroup's parent ("" for a top-level group), path its
	// Keycloak path; subgroups counts a group's direct subgroups.
	parent, path string
	subgroups    int
}

// realm holds one realm's objects with the indexes Keycloak's database would have, so that
// the double stays fast with tens of thousands of users: maps for lookups, and the users
// sorted by username for paging (Keycloak orders user lists by username). The sorted slice
// is rebuilt lazily, on the first list after a change, so that a bulk of creates costs no
// re-sorting and the pages of a listing cost none either.
type realm struct {
	name, clientID, clientSecret string
	dropUnmanaged                bool
	// duplicateEmails is the realm setting duplicateEmailsAllowed: several users may then
	// share an email, and byEmail only indexes the first of them.
	duplicateEmails bool
	// passwordHistory is the realm's passwordHistory(N) policy, 0 when it has none.
	passwordHistory int
	// editUsername is the realm setting editUsernameAllowed (off by default, as in
	// Keycloak): without it a PUT that changes a username is refused.
	editUsername bool
	// noViewRealm: the realm's service account lacks view-realm, so GET /admin/realms/{realm}
	// answers only the realm's name, as Keycloak's RealmAdminResource.getRealm does.
	noViewRealm bool
	// usernameMinLength is the minimum of the user profile's length validator on username
	// (Keycloak's default 3); 0: not checked.
	usernameMinLength int

	users       map[string]*user
	byUsername  map[string]*user
	byEmail     map[string]*user
	sorted      []*user
	sortedValid bool
	groups      map[string]*group
	groupByName map[string]*group
}

func newRealm(name, clientID, secret string) *realm {
	return &realm{
		name: name, clientID: clientID, clientSecret: secret,
		users:       map[string]*user{},
		byUsername:  map[string]*user{},
		byEmail:     map[string]*user{},
		groups:      map[string]*group{},
		groupByName: map[string]*group{},
	}
}

// apiError is an answer other than success, shaped as Keycloak shapes its error bodies.
type apiError struct {
	status int
	body   map[string]any
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %v", e.status, e.body) }

func errorMessage(status int, msg string) *apiError {
	return &apiError{status: status, body: map[string]any{"errorMessage": msg}}
}

func notFound(msg string) *apiError {
	return &apiError{http.StatusNotFound, map[string]any{"error": msg}}
}

// userFields is a user's writable state; nil pointers mean "not given".
type userFields struct {
	username, email, firstName, lastName *string
	enabled, emailVerified               *bool
	attrs                                map[string][]string
	requiredActions                      []string
}

// usersSorted is every user, ordered by username.
func (r *realm) usersSorted() []*user {
	if !r.sortedValid {
		r.sorted = r.sorted[:0]
		for _, u := range r.users {
			r.sorted = append(r.sorted, u)
		}
		sort.Slice(r.sorted, func(i, j int) bool { return r.sorted[i].username < r.sorted[j].username })
		r.sortedValid = true
	}
	return r.sorted
}

func lower(s *string) string {
	if s == nil {
		return ""
	}
	return strings.ToLower(strings.TrimSpace(*s))
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func (r *realm) checkUnique(u *user, username, email string) *apiError {
	if other, ok := r.byUsername[username]; ok && other != u {
		return errorMessage(http.StatusConflict, "User exists with same username")
	}
	if email != "" && !r.duplicateEmails {
		if other, ok := r.byEmail[email]; ok && other != u {
			return errorMessage(http.StatusConflict, "User exists with same email")
		}
	}
	return nil
}

func validEmail(email string) bool {
	at := strings.LastIndexByte(email, '@')
	return at > 0 && at < len(email)-1 && !strings.ContainsAny(email, " \t\n")
}

func (r *realm) createUser(f userFields, created int64) (*user, *apiError) {
	username := lower(f.username)
	if username == "" {
		return nil, &apiError{http.StatusBadRequest, map[string]any{
			"field": "username", "errorMessage": "error-user-attribute-required", "params": []string{"username"}}}
	}
	if err := usernameProblem(username, r.usernameMinLength); err != nil {
		return nil, err
	}
	email := lower(f.email)
	if email != "" && !validEmail(email) {
		return nil, &apiError{http.StatusBadRequest, map[string]any{
			"field": "email", "errorMessage": "error-invalid-email", "params": []string{"email", email}}}
	}
	if err := r.checkUnique(nil, username, email); err != nil {
		return nil, err
	}
	u := &user{
		id: uuid.NewString(), username: username, email: email,
		firstName: str(f.firstName), lastName: str(f.lastName),
		enabled: f.enabled != nil && *f.enabled, emailVerified: f.emailVerified != nil && *f.emailVerified,
		attrs: r.keptAttributes(f.attrs), requiredActions: slices.Clone(f.requiredActions),
		created: created, groups: map[string]bool{},
	}
	r.users[u.id] = u
	r.byUsername[username] = u
	r.indexEmail(u)
	r.sortedValid = false
	return u, nil
}

// keptAttributes is what a write stores of the attributes it was given. With the realm's
// unmanaged-attribute policy off (Keycloak 24+'s default), attributes the user profile does
// not declare are silently dropped; ssodir_id is such an attribute.
func (r *realm) keptAttributes(in map[string][]string) map[string][]string {
	out := map[string][]string{}
	if r.dropUnmanaged {
		return out
	}
	for k, v := range in {
		if len(v) > 0 {
			out[k] = slices.Clone(v)
		}
	}
	return out
}

// replaceUser applies a full-replace PUT: profile fields the body omits are cleared, as
// Keycloak 24+ does; enabled, emailVerified, requiredActions and username are kept when
// omitted, as they are not profile attributes (username cannot be cleared).
func (r *realm) replaceUser(u *user, f userFields) *apiError {
	username := u.username
	if f.username != nil {
		username = lower(f.username)
		if username == "" {
			return &apiError{http.StatusBadRequest, map[string]any{
				"field": "username", "errorMessage": "error-user-attribute-required", "params": []string{"username"}}}
		}
	}
	if username != u.username && !r.editUsername {
		// Keycloak's UsernameMutationValidator: 400, the user unchanged.
		return &apiError{http.StatusBadRequest, map[string]any{
			"field": "username", "errorMessage": "error-user-attribute-read-only", "params": []string{"username"}}}
	}
	if username != u.username {
		if err := usernameProblem(username, r.usernameMinLength); err != nil {
			return err
		}
	}
	email := lower(f.email)
	if email != "" && !validEmail(email) {
		return &apiError{http.StatusBadRequest, map[string]any{
			"field": "email", "errorMessage": "error-invalid-email", "params": []string{"email", email}}}
	}
	if err := r.checkUnique(u, username, email); err != nil {
		return err
	}
	if username != u.username {
		delete(r.byUsername, u.username)
		u.username = username
		r.byUsername[username] = u
		r.sortedValid = false
	}
	r.unindexEmail(u)
	u.email = email
	r.indexEmail(u)
	u.firstName = str(f.firstName)
	u.lastName = str(f.lastName)
	u.attrs = r.keptAttributes(f.attrs)
	if f.enabled != nil {
		u.enabled = *f.enabled
	}
	if f.emailVerified != nil {
		u.emailVerified = *f.emailVerified
	}
	if f.requiredActions != nil {
		u.requiredActions = slices.Clone(f.requiredActions)
	}
	return nil
}

func (r *realm) deleteUser(u *user) {
	for gid := range u.groups {
		if g, ok := r.groups[gid]; ok {
			delete(g.members, u.id)
		}
	}
	r.sortedValid = false
	delete(r.users, u.id)
	delete(r.byUsername, u.username)
	r.unindexEmail(u)
}

func (r *realm) indexEmail(u *user) {
	if _, taken := r.byEmail[u.email]; u.email != "" && !taken {
		r.byEmail[u.email] = u
	}
}

func (r *realm) unindexEmail(u *user) {
	if r.byEmail[u.email] == u {
		delete(r.byEmail, u.email)
	}
}

func (r *realm) findGroupByName(name string) *group { return r.groupByName[name] }

// groupFields is a group's writable state; nil pointers mean "not given".
type groupFields struct {
	name, description *string
	attrs             map[string][]string
}

func (r *realm) createGroup(f groupFields) (*group, *apiError) {
	name := strings.TrimSpace(str(f.name))
	if name == "" {
		return nil, errorMessage(http.StatusBadRequest, "Group name is missing")
	}
	if r.findGroupByName(name) != nil {
		return nil, errorMessage(http.StatusConflict, fmt.Sprintf("Top level group named '%s' already exists.", name))
	}
	g := &group{id: uuid.NewString(), name: name, description: str(f.description),
		attrs: cloneAttrs(f.attrs), members: map[string]bool{}, path: "/" + name}
	r.groups[g.id] = g
	r.groupByName[name] = g
	return g, nil
}

// createSubGroup adds a subgroup to parent (POST /groups/{id}/children in Keycloak).
// Subgroups are held for what a client of the top-level listing sees of them, its
// subGroupCount; they are not listed, searched nor renamed.
func (r *realm) createSubGroup(parent *group, name string) (*group, *apiError) {
	for _, g := range r.groups {
		if g.parent == parent.id && g.name == name {
			return nil, errorMessage(http.StatusConflict, fmt.Sprintf("Sibling group named '%s' already exists.", name))
		}
	}
	g := &group{id: uuid.NewString(), name: name, attrs: map[string][]string{}, members: map[string]bool{},
		parent: parent.id, path: parent.path + "/" + name}
	r.groups[g.id] = g
	parent.subgroups++
	return g, nil
}

// replaceGroup applies a full-replace PUT: description and attributes omitted from the
// body are cleared. A new name must be free among the top-level groups, compared as
// Keycloak does (exactly: a change of case is no clash), else 409.
func (r *realm) replaceGroup(g *group, f groupFields) *apiError {
	if f.name != nil {
		name := strings.TrimSpace(*f.name)
		if name == "" {
			return errorMessage(http.StatusBadRequest, "Group name is missing")
		}
		if other := r.findGroupByName(name); other != nil && other != g {
			return errorMessage(http.StatusConflict, fmt.Sprintf("Sibling group named '%s' already exists.", name))
		}
		delete(r.groupByName, g.name)
		g.name = name
		r.groupByName[name] = g
	}
	g.description = str(f.description)
	g.attrs = cloneAttrs(f.attrs)
	return nil
}

func (r *realm) deleteGroup(g *group) {
	// As in Keycloak, a group's subgroups go with it.
	for _, sub := range r.groups {
		if sub.parent == g.id {
			r.deleteGroup(sub)
		}
	}
	if p, ok := r.groups[g.parent]; ok {
		p.subgroups--
	}
	for uid := range g.members {
		if u, ok := r.users[uid]; ok {
			delete(u.groups, g.id)
		}
	}
	delete(r.groups, g.id)
	if r.groupByName[g.name] == g {
		delete(r.groupByName, g.name)
	}
}

func cloneAttrs(in map[string][]string) map[string][]string {
	out := make(map[string][]string, len(in))
	for k, v := range in {
		if len(v) > 0 {
			out[k] = slices.Clone(v)
		}
	}
	return out
}

func (r *realm) snapshotUser(u *user) User {
	groups := make([]*group, 0, len(u.groups))
	for gid := range u.groups {
		groups = append(groups, r.groups[gid])
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].name < groups[j].name })
	ids := make([]string, len(groups))
	for i, g := range groups {
		ids[i] = g.id
	}
	return User{
		ID: u.id, Username: u.username, Email: u.email, FirstName: u.firstName, LastName: u.lastName,
		Enabled: u.enabled, EmailVerified: u.emailVerified, Attributes: cloneAttrs(u.attrs),
		RequiredActions: slices.Clone(u.requiredActions), Groups: ids,
	}
}

func (r *realm) membersSorted(g *group) []*user {
	out := make([]*user, 0, len(g.members))
	for uid := range g.members {
		out = append(out, r.users[uid])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].username < out[j].username })
	return out
}

func (r *realm) snapshotGroup(g *group) Group {
	members := r.membersSorted(g)
	ids := make([]string, len(members))
	for i, u := range members {
		ids[i] = u.id
	}
	return Group{ID: g.id, Name: g.name, Description: g.description, Attributes: cloneAttrs(g.attrs), Members: ids}
}
