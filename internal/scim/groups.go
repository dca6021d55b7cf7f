package scim

import (
	"net/http"
	"slices"
	"strings"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

// Membership changes: one ChangeMembers command per request (per 1,000 members), one
// group version for all the members a PATCH, PUT or POST adds and removes (README.md,
// "SCIM").

// loadGroup is the live group with SCIM id id, read from the write model.
func (s *server) loadGroup(cl *call, id string) (commands.GroupAggregate, error) {
	key, ok, err := s.store.FindByID(cl.ctx, cl.tenant, events.KindGroup, id)
	if err != nil {
		return commands.GroupAggregate{}, err
	}
	if !ok {
		return commands.GroupAggregate{}, apperr.NotFound("group")
	}
	g, err := s.store.LoadGroup(cl.ctx, cl.tenant, key)
	if err != nil {
		return g, err
	}
	if !g.Live() || g.State.ID != id {
		return g, apperr.NotFound("group")
	}
	return g, nil
}

// members are a group's members, by username.
func (s *server) members(cl *call, key string) ([]member, error) {
	ms, err := s.store.GroupMembers(cl.ctx, cl.tenant, key)
	if err != nil {
		return nil, err
	}
	return membersOf(ms), nil
}

func membersOf(ms []commands.Membership) []member {
	out := make([]member, 0, len(ms))
	for _, m := range ms {
		out = append(out, member{id: m.UserID, username: m.Username})
	}
	slices.SortFunc(out, func(a, b member) int { return strings.Compare(a.username, b.username) })
	return out
}

// inlineMembers are the members a group is answered with, read only while they fit what
// is left of the answer's budget: a group too large for it costs the budget's reads (and
// one), not its size, and is answered without members (inline false).
func (s *server) inlineMembers(cl *call, key string, b *memberBudget) (ms []member, inline bool, err error) {
	got, more, err := s.store.GroupMembersUpTo(cl.ctx, cl.tenant, key, b.left)
	if err != nil || more {
		return nil, false, err
	}
	b.left -= len(got)
	return membersOf(got), true, nil
}

// renderLoaded renders a group, with its members when the projection wants them.
func (s *server) renderLoaded(cl *call, g events.Group, proj projection) (map[string]any, error) {
	var ms []member
	with := proj.wants("members")
	if with {
		var err error
		if ms, with, err = s.inlineMembers(cl, g.Key, s.newMemberBudget()); err != nil {
			return nil, err
		}
	}
	return renderGroup(g, ms, with, cl.base), nil
}

// usernames resolves members' SCIM ids to usernames; an id that is no live user is an
// invalid value, reported before anything is written.
func (s *server) usernames(cl *call, ids []string) ([]string, error) {
	found, err := s.store.FindByIDs(cl.ctx, cl.tenant, events.KindUser, ids)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ids))
	var unknown []string
	for _, id := range ids {
		username, ok := found[id]
		if !ok {
			unknown = append(unknown, id)
			continue
		}
		out = append(out, username)
	}
	if len(unknown) > 0 {
		return nil, badRequest(typeInvalidValue, "members: no user has the id "+strings.Join(unknown, ", ")+
			" (groups can hold only users of this tenant)")
	}
	return out, nil
}

func (s *server) postGroup(cl *call) error {
	proj, err := projectionOf(cl)
	if err != nil {
		return err
	}
	d, _, err := cl.readDoc()
	if err != nil {
		return err
	}
	f, err := groupFromDoc(d)
	if err != nil {
		return err
	}
	adds, err := s.usernames(cl, f.members)
	if err != nil {
		return err
	}
	cmd := commands.CreateGroup{Name: f.displayName}
	if len(f.attrs) > 0 {
		cmd.Attributes = f.attrs
	}
	if err := s.gate.Ready(cl.ctx, cl.tenant); err != nil {
		return err
	}
	g, err := s.createGroup.Handle(cl.ctx, cl.tenant, cmd, cl.meta(nil))
	if err != nil {
		return err
	}
	if len(adds) > 0 {
		if g, err = s.changeMembers(cl, g, adds, nil, &g.Version); err != nil {
			return err
		}
	}
	res, err := s.renderLoaded(cl, g, proj)
	if err != nil {
		return err
	}
	return cl.writeResource(http.StatusCreated, res, g.Version, proj)
}

func (s *server) getGroup(cl *call) error {
	proj, err := projectionOf(cl)
	if err != nil {
		return err
	}
	g, err := s.loadGroup(cl, cl.c.Param("id"))
	if err != nil {
		return err
	}
	res, err := s.renderLoaded(cl, g.State, proj)
	if err != nil {
		return err
	}
	return cl.writeResource(http.StatusOK, res, g.State.Version, proj)
}

// groupChange is what a PUT or PATCH asks of a group: its fields, and the members to add
// and to remove (usernames).
type groupChange struct {
	fields         groupFields
	adds, removals []string
}

func (s *server) putGroup(cl *call) error {
	proj, err := projectionOf(cl)
	if err != nil {
		return err
	}
	d, _, err := cl.readDoc()
	if err != nil {
		return err
	}
	f, err := groupFromDoc(d)
	if err != nil {
		return err
	}
	// A PUT without members replaces them with none (RFC 7644 3.5.1).
	want, err := s.usernames(cl, f.members)
	if err != nil {
		return err
	}
	g, err := s.modifyGroup(cl, func(cur commands.GroupAggregate) (groupChange, error) {
		ch := groupChange{fields: f}
		have, err := s.members(cl, cur.State.Key)
		if err != nil {
			return ch, err
		}
		ch.adds, ch.removals = diffMembers(have, want)
		return ch, nil
	})
	if err != nil {
		return err
	}
	res, err := s.renderLoaded(cl, g, proj)
	if err != nil {
		return err
	}
	return cl.writeResource(http.StatusOK, res, g.Version, proj)
}

func diffMembers(cur []member, want []string) (adds, removals []string) {
	have := map[string]bool{}
	for _, m := range cur {
		have[m.username] = true
	}
	for _, u := range want {
		if !have[u] {
			adds = append(adds, u)
		}
	}
	for _, m := range cur {
		if !slices.Contains(want, m.username) {
			removals = append(removals, m.username)
		}
	}
	return adds, removals
}

// patchGroup applies a PatchOp to a group. Membership operations that name their members
// (add members, remove members[value eq "…"], Entra's remove of listed members) become
// member commands without reading the group's members; a replace or a remove of all
// members reads them, to know what to remove. It answers 204 unless the client asks for
// the resource (attributes, excludedAttributes, or Prefer: return=representation).
func (s *server) patchGroup(cl *call) error {
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
	g, err := s.modifyGroup(cl, func(cur commands.GroupAggregate) (groupChange, error) {
		return s.planGroupPatch(cl, cur, ops)
	})
	if err != nil {
		return err
	}
	if wantsNoBody(cl, true) {
		return cl.noContent(g.Version)
	}
	res, err := s.renderLoaded(cl, g, proj)
	if err != nil {
		return err
	}
	return cl.writeResource(http.StatusOK, res, g.Version, proj)
}

// memberDelta is a membership operation as a change of named members, when it is one.
func memberDelta(op patchOp) (add bool, ids []string, ok bool) {
	p, err := parsePatchPath(op.path)
	if err != nil || p.attr != "members" || p.urn != "" || p.sub != "" {
		return false, nil, false
	}
	value := lowerKeys(op.value)
	switch {
	case p.filter == nil && op.op == "add":
		ids, ok = memberIDs(value)
		return true, ids, ok
	case p.filter == nil && op.op == "remove" && value != nil:
		ids, ok = memberIDs(value)
		return false, ids, ok
	case p.filter != nil && op.op == "remove":
		ids, ok = valueEquals(p.filter)
		return false, ids, ok
	}
	return false, nil, false
}

func memberIDs(v any) ([]string, bool) {
	es, err := entries("members", v)
	if err != nil {
		return nil, false
	}
	var ids []string
	for _, e := range es {
		id, ok := e["value"].(string)
		if !ok || id == "" {
			return nil, false
		}
		ids = append(ids, id)
	}
	return ids, true
}

// valueEquals are the values of a filter of `value eq "…"` comparisons joined by `or`.
func valueEquals(f filter) ([]string, bool) {
	switch x := f.(type) {
	case logical:
		if x.and {
			return nil, false
		}
		l, ok1 := valueEquals(x.l)
		r, ok2 := valueEquals(x.r)
		return append(l, r...), ok1 && ok2
	case compare:
		v, isStr := x.value.(string)
		if x.op != "eq" || x.path.attr != "value" || x.path.sub != "" || x.path.urn != "" || !isStr {
			return nil, false
		}
		return []string{v}, true
	}
	return nil, false
}

// splitMembers turns a pathless operation's "members" into an operation of its own, so
// that `{"op":"add","value":{"members":[…]}}` is handled like a path "members".
func splitMembers(ops []patchOp) []patchOp {
	var out []patchOp
	for _, op := range ops {
		obj, isObj := lowerKeys(op.value).(map[string]any)
		if op.path != "" || !isObj {
			out = append(out, op)
			continue
		}
		if ms, has := obj["members"]; has {
			rest := map[string]any{}
			for k, v := range obj {
				if k != "members" {
					rest[k] = v
				}
			}
			if len(rest) > 0 {
				out = append(out, patchOp{op: op.op, value: rest})
			}
			out = append(out, patchOp{op: op.op, path: "members", value: ms})
			continue
		}
		out = append(out, op)
	}
	return out
}

func (s *server) planGroupPatch(cl *call, cur commands.GroupAggregate, ops []patchOp) (groupChange, error) {
	ops = splitMembers(ops)
	var attrOps, memberOps []patchOp
	needMembers := false
	for _, op := range ops {
		p, err := parsePatchPath(op.path)
		if op.path != "" && err != nil {
			return groupChange{}, err
		}
		if op.path == "" || p.attr != "members" || p.urn != "" {
			attrOps = append(attrOps, op)
			continue
		}
		memberOps = append(memberOps, op)
		if _, _, ok := memberDelta(op); !ok {
			needMembers = true
		}
	}
	var ch groupChange
	if needMembers {
		// Apply every operation to the whole resource, members included, and diff.
		curMembers, err := s.members(cl, cur.State.Key)
		if err != nil {
			return ch, err
		}
		d := lowerKeys(renderGroup(cur.State, curMembers, true, cl.base)).(map[string]any)
		if err := applyPatch(d, ops, groupSchema); err != nil {
			return ch, err
		}
		if ch.fields, err = groupFromDoc(d); err != nil {
			return ch, err
		}
		want, err := s.usernames(cl, ch.fields.members)
		if err != nil {
			return ch, err
		}
		ch.adds, ch.removals = diffMembers(curMembers, want)
		return ch, nil
	}
	d := lowerKeys(renderGroup(cur.State, nil, false, cl.base)).(map[string]any)
	if err := applyPatch(d, attrOps, groupSchema); err != nil {
		return ch, err
	}
	var err error
	if ch.fields, err = groupFromDoc(d); err != nil {
		return ch, err
	}
	// The members named, in order: a later operation on a member undoes an earlier one.
	adds, removals := map[string]bool{}, map[string]bool{}
	var order []string
	for _, op := range memberOps {
		add, ids, _ := memberDelta(op)
		for _, id := range ids {
			if !adds[id] && !removals[id] {
				order = append(order, id)
			}
			adds[id], removals[id] = add, !add
		}
	}
	var addIDs, removeIDs []string
	for _, id := range order {
		if adds[id] {
			addIDs = append(addIDs, id)
		} else {
			removeIDs = append(removeIDs, id)
		}
	}
	if ch.adds, err = s.usernames(cl, addIDs); err != nil {
		return ch, err
	}
	// A member to remove that is no user (any more) is not a member either.
	found, err := s.store.FindByIDs(cl.ctx, cl.tenant, events.KindUser, removeIDs)
	if err != nil {
		return ch, err
	}
	for _, id := range removeIDs {
		if username, ok := found[id]; ok {
			ch.removals = append(ch.removals, username)
		}
	}
	return ch, nil
}

// usersGone reports whether a members change failed because users it named were deleted
// meanwhile (ChangeMembers' 404 naming them): the change is planned again without them.
func usersGone(err error) bool {
	e, ok := apperr.As(err)
	return ok && e.Kind == apperr.KindNotFound && len(e.Fields) > 0
}

// modifyGroup reads the group, asks plan what to change, and sends the commands:
// UpdateGroup for its external id, then ChangeMembers for the members added and removed. Like
// modifyUser, it starts again when another writer came between, unless the client sent
// If-Match.
func (s *server) modifyGroup(cl *call, plan func(commands.GroupAggregate) (groupChange, error)) (events.Group, error) {
	ifMatch, err := cl.ifMatch()
	if err != nil {
		return events.Group{}, err
	}
	id := cl.c.Param("id")
	for attempt := 0; ; attempt++ {
		cur, err := s.loadGroup(cl, id)
		if err != nil {
			return events.Group{}, err
		}
		ch, err := plan(cur)
		if err != nil {
			return events.Group{}, err
		}
		g, err := s.writeGroup(cl, cur, ch, ifMatch)
		if (apperr.KindOf(err) == apperr.KindPrecondition && ifMatch == nil || usersGone(err)) && attempt < maxAttempts {
			continue
		}
		return g, err
	}
}

func (s *server) writeGroup(cl *call, cur commands.GroupAggregate, ch groupChange, ifMatch *int64) (events.Group, error) {
	state := cur.State
	pin := ifMatch
	if pin == nil {
		v := state.Version
		pin = &v
	}
	if *pin != state.Version {
		return state, apperr.VersionMismatch(*pin, state.Version)
	}
	// A new displayName is a rename (Okta's Push Groups, Entra's replace displayName): the
	// same group, id and members under the new name, before the other changes.
	if ch.fields.displayName != state.Name {
		rename := commands.RenameGroup{Name: state.Key, NewName: ch.fields.displayName}
		if err := rename.Validate(); err != nil {
			return state, err
		}
		if err := s.gate.Ready(cl.ctx, cl.tenant); err != nil {
			return state, err
		}
		g, err := s.renameGroup.Handle(cl.ctx, cl.tenant, rename, cl.meta(pin))
		if err != nil {
			return state, err
		}
		state, pin = g, &g.Version
	}
	attrs := mergeAttrs(state.Attributes, ch.fields.attrs)
	changed := !sameAttrs(attrs, state.Attributes)
	if changed || len(ch.adds) > 0 || len(ch.removals) > 0 {
		if err := s.gate.Ready(cl.ctx, cl.tenant); err != nil {
			return state, err
		}
	}
	if changed {
		g, err := s.updateGroup.Handle(cl.ctx, cl.tenant, commands.UpdateGroup{Name: state.Key, Attributes: &attrs}, cl.meta(pin))
		if err != nil {
			return state, err
		}
		state, pin = g, &g.Version
	}
	return s.changeMembers(cl, state, ch.adds, ch.removals, pin)
}

// changeMembers adds and removes members with ChangeMembers: one command, one group
// version, for the whole change (in commands of at most commands.MaxMembersChange
// members, each pinned to the version the previous one left).
func (s *server) changeMembers(cl *call, g events.Group, adds, removals []string, pin *int64) (events.Group, error) {
	for len(adds)+len(removals) > 0 {
		cmd := commands.ChangeMembers{Group: g.Key}
		n := min(len(adds), commands.MaxMembersChange)
		cmd.Add, adds = adds[:n], adds[n:]
		n = min(len(removals), commands.MaxMembersChange-len(cmd.Add))
		cmd.Remove, removals = removals[:n], removals[n:]
		next, err := s.changeMembersH.Handle(cl.ctx, cl.tenant, cmd, cl.meta(pin))
		if err != nil {
			return g, err
		}
		g, pin = next, &next.Version
	}
	return g, nil
}

func (s *server) deleteGroupRoute(cl *call) error {
	ifMatch, err := cl.ifMatch()
	if err != nil {
		return err
	}
	g, err := s.loadGroup(cl, cl.c.Param("id"))
	if err != nil {
		return err
	}
	if err := s.gate.Ready(cl.ctx, cl.tenant); err != nil {
		return err
	}
	if _, err := s.deleteGroup.Handle(cl.ctx, cl.tenant, commands.DeleteGroup{Name: g.State.Key}, cl.meta(ifMatch)); err != nil {
		return err
	}
	return cl.noContent(0)
}

func (s *server) searchGroups(cl *call) error {
	if cl.c.Param("id") != ".search" {
		return methodNotAllowed(cl, "GET, PUT, PATCH, DELETE")
	}
	q, err := searchQuery(cl)
	if err != nil {
		return err
	}
	return s.listGroupsWith(cl, q)
}
