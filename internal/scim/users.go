package scim

import (
	"net/http"
	"strings"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// maxAttempts bounds how often a read-modify-write (PUT, PATCH) is done again after
// another writer changed the resource between its read and its commands; a client that
// sent If-Match gets 412 instead.
const maxAttempts = 8

// loadUser is the live user with SCIM id id, read from the write model.
func (s *server) loadUser(cl *call, id string) (commands.UserAggregate, error) {
	username, ok, err := s.store.FindByID(cl.ctx, cl.tenant, events.KindUser, id)
	if err != nil {
		return commands.UserAggregate{}, err
	}
	if !ok {
		return commands.UserAggregate{}, apperr.NotFound("user")
	}
	u, err := s.store.LoadUser(cl.ctx, cl.tenant, username)
	if err != nil {
		return u, err
	}
	if !u.Live() || u.State.ID != id {
		return u, apperr.NotFound("user")
	}
	return u, nil
}

func (s *server) postUser(cl *call) error {
	proj, err := projectionOf(cl)
	if err != nil {
		return err
	}
	d, _, err := cl.readDoc()
	if err != nil {
		return err
	}
	f, err := userFromDoc(d)
	if err != nil {
		return err
	}
	cmd := commands.CreateUser{Username: f.username, Email: f.email, FirstName: f.firstName, LastName: f.lastName,
		IsActive: f.active, Password: f.password}
	if len(f.attrs) > 0 {
		cmd.Attributes = f.attrs
	}
	if err := s.gate.Ready(cl.ctx, cl.tenant); err != nil {
		return err
	}
	u, err := s.createUser.Handle(cl.ctx, cl.tenant, cmd, cl.meta(nil))
	if err != nil {
		return err
	}
	return cl.writeResource(http.StatusCreated, renderUser(u, cl.base), u.Version, proj)
}

func (s *server) getUser(cl *call) error {
	proj, err := projectionOf(cl)
	if err != nil {
		return err
	}
	u, err := s.loadUser(cl, cl.c.Param("id"))
	if err != nil {
		return err
	}
	return cl.writeResource(http.StatusOK, renderUser(u.State, cl.base), u.State.Version, proj)
}

// putUser replaces a user with the resource sent (RFC 7644 3.5.1), as Okta sends it: the
// whole resource, read, modified and written back. Attributes it leaves out are cleared,
// except active and password, which stay as they are.
func (s *server) putUser(cl *call) error {
	proj, err := projectionOf(cl)
	if err != nil {
		return err
	}
	d, _, err := cl.readDoc()
	if err != nil {
		return err
	}
	f, err := userFromDoc(d)
	if err != nil {
		return err
	}
	u, err := s.modifyUser(cl, func(commands.UserAggregate) (userFields, error) { return f, nil })
	if err != nil {
		return err
	}
	return cl.writeResource(http.StatusOK, renderUser(u, cl.base), u.Version, proj)
}

// patchUser applies a PatchOp to the user's resource, and writes the result as a PUT
// would. It answers 200 with the resource, or 204 when the client asks for no body
// (`Prefer: return=minimal`).
func (s *server) patchUser(cl *call) error {
	proj, err := projectionOf(cl)
	if err != nil {
		return err
	}
	_, body, err := cl.readDoc()
	if err != nil {
		return err
	}
	ops, err := parsePatch(body)
	if err != nil {
		return err
	}
	u, err := s.modifyUser(cl, func(cur commands.UserAggregate) (userFields, error) {
		d := lowerKeys(renderUser(cur.State, cl.base)).(map[string]any)
		if err := applyPatch(d, ops, userSchema); err != nil {
			return userFields{}, err
		}
		return userFromDoc(d)
	})
	if err != nil {
		return err
	}
	if wantsNoBody(cl, false) {
		return cl.noContent(u.Version)
	}
	return cl.writeResource(http.StatusOK, renderUser(u, cl.base), u.Version, proj)
}

// wantsNoBody reports whether a PATCH is answered 204: when the client prefers a minimal
// answer, or by default (def) unless it names attributes or prefers a representation.
func wantsNoBody(cl *call, def bool) bool {
	prefer := strings.ToLower(cl.c.Request().Header.Get("Prefer"))
	switch {
	case strings.Contains(prefer, "return=minimal"):
		return true
	case strings.Contains(prefer, "return=representation"):
		return false
	}
	q := cl.c.QueryParams()
	if q.Has("attributes") || q.Has("excludedAttributes") {
		return false
	}
	return def
}

// modifyUser reads the user, asks desired for what it should become, and sends the
// commands that take it there: UpdateUser for the profile, SetUserActive, and
// ChangePassword when a password is given. Each command is pinned to the version the
// previous one left (or the client's If-Match); when another writer comes between, the
// whole read-modify-write is done again on the new state, unless the client sent
// If-Match (then it gets 412).
func (s *server) modifyUser(cl *call, desired func(commands.UserAggregate) (userFields, error)) (events.User, error) {
	ifMatch, err := cl.ifMatch()
	if err != nil {
		return events.User{}, err
	}
	id := cl.c.Param("id")
	for attempt := 0; ; attempt++ {
		cur, err := s.loadUser(cl, id)
		if err != nil {
			return events.User{}, err
		}
		f, err := desired(cur)
		if err != nil {
			return events.User{}, err
		}
		u, err := s.writeUser(cl, cur, f, ifMatch)
		if apperr.KindOf(err) == apperr.KindPrecondition && ifMatch == nil && attempt < maxAttempts {
			continue
		}
		return u, err
	}
}

func (s *server) writeUser(cl *call, cur commands.UserAggregate, f userFields, ifMatch *int64) (events.User, error) {
	state := cur.State
	pin := ifMatch
	if pin == nil {
		v := state.Version
		pin = &v
	}
	if *pin != state.Version {
		return state, apperr.VersionMismatch(*pin, state.Version)
	}
	// A new userName is a rename (Entra changes a UPN, Okta pushes a new userName): the
	// same person, id and memberships under the new name, before the other changes.
	rename := commands.RenameUser{Username: state.Username, NewUsername: f.username}
	renaming := false
	if username, _ := identity.NormalizeUsername(f.username); username != state.Username {
		if err := rename.Validate(); err != nil {
			return state, err
		}
		renaming = true
	}
	if renaming {
		if err := s.gate.Ready(cl.ctx, cl.tenant); err != nil {
			return state, err
		}
		u, err := s.renameUser.Handle(cl.ctx, cl.tenant, rename, cl.meta(pin))
		if err != nil {
			return state, err
		}
		state, pin = u, &u.Version
	}
	upd := commands.UpdateUser{Username: state.Username}
	changed := false
	if email := identity.NormalizeEmail(f.email); email != state.Email {
		upd.Email, changed = &f.email, true
	}
	if f.firstName != state.FirstName {
		upd.FirstName, changed = &f.firstName, true
	}
	if f.lastName != state.LastName {
		upd.LastName, changed = &f.lastName, true
	}
	if attrs := mergeAttrs(state.Attributes, f.attrs); !sameAttrs(attrs, state.Attributes) {
		upd.Attributes, changed = &attrs, true
	}
	if err := upd.Validate(); err != nil {
		return state, err
	}
	if f.password != nil {
		if err := (&commands.CreateUser{Username: state.Username, Password: f.password}).Validate(); err != nil {
			return state, err
		}
	}
	if changed || f.active != nil && *f.active != state.IsActive || f.password != nil {
		if err := s.gate.Ready(cl.ctx, cl.tenant); err != nil {
			return state, err
		}
	}
	if changed {
		u, err := s.updateUser.Handle(cl.ctx, cl.tenant, upd, cl.meta(pin))
		if err != nil {
			return state, err
		}
		state, pin = u, &u.Version
	}
	if f.active != nil && *f.active != state.IsActive {
		u, err := s.setActive.Handle(cl.ctx, cl.tenant, commands.SetUserActive{Username: state.Username, Active: *f.active}, cl.meta(pin))
		if err != nil {
			return state, err
		}
		state, pin = u, &u.Version
	}
	if f.password != nil {
		u, err := s.changePassword.Handle(cl.ctx, cl.tenant, commands.ChangePassword{Username: state.Username, Password: *f.password}, cl.meta(pin))
		if err != nil {
			return state, err
		}
		state = u
	}
	return state, nil
}

func sameAttrs(a, b map[string][]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, va := range a {
		vb, ok := b[k]
		if !ok || len(va) != len(vb) {
			return false
		}
		for i := range va {
			if va[i] != vb[i] {
				return false
			}
		}
	}
	return true
}

func (s *server) deleteUserRoute(cl *call) error {
	ifMatch, err := cl.ifMatch()
	if err != nil {
		return err
	}
	u, err := s.loadUser(cl, cl.c.Param("id"))
	if err != nil {
		return err
	}
	if err := s.gate.Ready(cl.ctx, cl.tenant); err != nil {
		return err
	}
	if _, err := s.deleteUser.Handle(cl.ctx, cl.tenant, commands.DeleteUser{Username: u.State.Username}, cl.meta(ifMatch)); err != nil {
		return err
	}
	return cl.noContent(0)
}

// searchUsers is POST /Users/.search (RFC 7644 3.4.3); any other POST to a user is 405.
func (s *server) searchUsers(cl *call) error {
	if cl.c.Param("id") != ".search" {
		return methodNotAllowed(cl, "GET, PUT, PATCH, DELETE")
	}
	q, err := searchQuery(cl)
	if err != nil {
		return err
	}
	return s.listUsersWith(cl, q)
}

func methodNotAllowed(cl *call, allow string) error {
	cl.c.Response().Header().Set("Allow", allow)
	return &apperr.Error{Kind: apperr.KindMethodNotAllowed, Code: apperr.CodeMethodNotAllowed,
		Message: "this endpoint does not accept " + cl.c.Request().Method}
}
