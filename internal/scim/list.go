package scim

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

// Lists (RFC 7644 3.4.2) are served from the write model, strongly consistently: a filter
// on id, userName, externalId, an email or displayName (alone, or in an `and`, or every
// side of an `or`) is answered through lookups; any other filter walks the tenant's
// users or groups and evaluates the filter on each. Results are ordered by id, which
// never changes, so paging is stable: by startIndex and count, or by cursor (RFC 9865).
const (
	defaultPageSize = 100
	maxPageSize     = 500
	loadChunk       = 100
)

type listQuery struct {
	filter     filter
	filterText string
	startIndex int
	count      int
	// cursor is nil for index paging; "" asks for the first page by cursor.
	cursor *string
	proj   projection
	// scope is the tenant the list is of: a cursor is good only for its own tenant.
	scope string
}

func projectionOf(cl *call) (projection, error) {
	q := cl.c.QueryParams()
	return parseProjection(q.Get("attributes"), q.Get("excludedAttributes"))
}

// listQueryOf reads a list's query parameters.
func listQueryOf(cl *call) (listQuery, error) {
	q := cl.c.QueryParams()
	var cursor *string
	if q.Has("cursor") {
		c := q.Get("cursor")
		cursor = &c
	}
	return buildQuery(q.Get("filter"), q.Get("startIndex"), q.Get("count"), cursor, q.Get("attributes"), q.Get("excludedAttributes"))
}

// searchQuery reads the body of POST …/.search (a SearchRequest).
func searchQuery(cl *call) (listQuery, error) {
	d, _, err := cl.readDoc()
	if err != nil {
		return listQuery{}, err
	}
	text := func(name string) (string, error) {
		switch v := d[strings.ToLower(name)].(type) {
		case nil:
			return "", nil
		case string:
			return v, nil
		case float64:
			return strconv.FormatFloat(v, 'f', -1, 64), nil
		case []any:
			var parts []string
			for _, e := range v {
				s, ok := e.(string)
				if !ok {
					return "", badRequest(typeInvalidValue, name+" must be a list of attribute names")
				}
				parts = append(parts, s)
			}
			return strings.Join(parts, ","), nil
		}
		return "", badRequest(typeInvalidValue, name+" has the wrong type")
	}
	var fields [6]string
	for i, name := range []string{"filter", "startIndex", "count", "cursor", "attributes", "excludedAttributes"} {
		if fields[i], err = text(name); err != nil {
			return listQuery{}, err
		}
	}
	var cursor *string
	if _, ok := d["cursor"]; ok {
		cursor = &fields[3]
	}
	return buildQuery(fields[0], fields[1], fields[2], cursor, fields[4], fields[5])
}

func buildQuery(filterText, startIndex, count string, cursor *string, attributes, excluded string) (listQuery, error) {
	q := listQuery{filterText: strings.TrimSpace(filterText), startIndex: 1, count: defaultPageSize, cursor: cursor}
	if q.filterText != "" {
		f, err := parseFilter(q.filterText)
		if err != nil {
			return q, badRequest(typeInvalidFilter, "filter: "+err.Error())
		}
		q.filter = f
	}
	if startIndex != "" {
		n, err := strconv.Atoi(strings.TrimSpace(startIndex))
		if err != nil {
			return q, badRequest(typeInvalidValue, "startIndex must be an integer")
		}
		q.startIndex = max(n, 1)
	}
	if count != "" {
		n, err := strconv.Atoi(strings.TrimSpace(count))
		if err != nil {
			return q, badRequest(typeInvalidValue, "count must be an integer")
		}
		q.count = min(max(n, 0), maxPageSize)
	}
	var err error
	q.proj, err = parseProjection(attributes, excluded)
	return q, err
}

// cursorState is what a cursor holds: the id the next page starts after, and which list
// it belongs to.
type cursorState struct {
	After string `json:"a"`
	List  string `json:"l"`
}

func listFingerprint(kind events.AggregateKind, q listQuery) string {
	h := sha256.Sum256([]byte(q.scope + "\n" + string(kind) + "\n" + q.filterText))
	return hex.EncodeToString(h[:6])
}

func encodeCursor(kind events.AggregateKind, q listQuery, after string) string {
	b, _ := json.Marshal(cursorState{After: after, List: listFingerprint(kind, q)})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(kind events.AggregateKind, q listQuery, s string) (string, error) {
	if s == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var c cursorState
	if err != nil || json.Unmarshal(b, &c) != nil || c.List != listFingerprint(kind, q) || c.After == "" {
		return "", badRequest(typeInvalidCursor, "the cursor is not one this list gave (send the same filter, and an empty cursor for the first page)")
	}
	return c.After, nil
}

// page picks the page a query asks for out of the matches (ordered by id), and the cursor
// of the next page ("" when it is the last).
func page[T any](kind events.AggregateKind, q listQuery, all []T, id func(T) string) ([]T, string, error) {
	from := q.startIndex - 1
	if q.cursor != nil {
		after, err := decodeCursor(kind, q, *q.cursor)
		if err != nil {
			return nil, "", err
		}
		from = 0
		if after != "" {
			from, _ = slices.BinarySearchFunc(all, after, func(x T, a string) int {
				if id(x) <= a {
					return -1
				}
				return 1
			})
		}
	}
	if from >= len(all) {
		return nil, "", nil
	}
	to := min(from+q.count, len(all))
	out := all[from:to]
	next := ""
	if q.cursor != nil && to < len(all) && len(out) > 0 {
		next = encodeCursor(kind, q, id(out[len(out)-1]))
	}
	return out, next, nil
}

// writeList answers a list; a total below 0 is not known (a cursor page of an unfiltered
// list, which reads only its page) and is left out.
func (cl *call) writeList(q listQuery, total int, resources []any, next string) error {
	body := map[string]any{"schemas": []string{URNListResponse},
		"itemsPerPage": len(resources), "Resources": resources}
	if total >= 0 {
		body["totalResults"] = total
	}
	if q.cursor == nil {
		body["startIndex"] = q.startIndex
	} else if next != "" {
		body["nextCursor"] = next
	}
	return cl.write(http.StatusOK, body)
}

func (s *server) listUsers(cl *call) error {
	q, err := listQueryOf(cl)
	if err != nil {
		return err
	}
	return s.listUsersWith(cl, q)
}

func (s *server) listUsersWith(cl *call, q listQuery) error {
	q.scope = cl.tenant.System + "/" + cl.tenant.ID
	if q.filter == nil && q.cursor != nil {
		return s.usersByCursor(cl, q)
	}
	if q.filter == nil {
		return s.usersByIndex(cl, q)
	}
	keys, indexed, err := s.userCandidates(cl, q.filter)
	if err != nil {
		return err
	}
	if !indexed {
		return s.scanUsers(cl, q)
	}
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	var found []events.User
	for chunk := range slices.Chunk(keys, loadChunk) {
		users, err := s.loadUsers(cl, chunk)
		if err != nil {
			return err
		}
		for _, k := range chunk {
			u, ok := users[k]
			if ok && u.Live() && u.State.ID != "" && matches(q.filter, lowerKeys(renderUser(u.State, cl.base)).(map[string]any)) {
				found = append(found, u.State)
			}
		}
	}
	slices.SortFunc(found, func(a, b events.User) int { return strings.Compare(a.ID, b.ID) })
	found = slices.CompactFunc(found, func(a, b events.User) bool { return a.ID == b.ID })
	pg, next, err := page(events.KindUser, q, found, func(u events.User) string { return u.ID })
	if err != nil {
		return err
	}
	out := make([]any, 0, len(pg))
	for _, u := range pg {
		out = append(out, q.proj.apply(renderUser(u, cl.base)))
	}
	return cl.writeList(q, len(found), out, next)
}

// loadUsers reads users by username: one GetItem for one (a provider's match by userName,
// the common case), a batch read for more.
func (s *server) loadUsers(cl *call, usernames []string) (map[string]commands.UserAggregate, error) {
	if len(usernames) != 1 {
		return s.store.LoadUsers(cl.ctx, cl.tenant, usernames)
	}
	u, err := s.store.LoadUser(cl.ctx, cl.tenant, usernames[0])
	if err != nil || !u.Exists {
		return nil, err
	}
	return map[string]commands.UserAggregate{u.State.Username: u}, nil
}

func keysOf(ls []commands.Lookup) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Key
	}
	return out
}

// userCandidates are the usernames a filter can match, when lookups can tell (indexed);
// the filter is still evaluated on each.
func (s *server) userCandidates(cl *call, f filter) (keys []string, indexed bool, err error) {
	switch x := f.(type) {
	case logical:
		l, lok, err := s.userCandidates(cl, x.l)
		if err != nil || (x.and && lok) {
			return l, lok, err
		}
		r, rok, err := s.userCandidates(cl, x.r)
		if err != nil || x.and {
			return r, rok, err
		}
		return append(l, r...), lok && rok, nil
	case compare:
		v, isStr := x.value.(string)
		if x.op != "eq" || !isStr || (x.path.urn != "" && !isCoreURN(x.path.urn)) {
			return nil, false, nil
		}
		switch {
		case x.path.attr == "username" && x.path.sub == "":
			u, ok := identity.NormalizeUsername(v)
			if !ok {
				return nil, true, nil
			}
			return []string{u}, true, nil
		case x.path.attr == "id" && x.path.sub == "":
			return s.byID(cl, events.KindUser, v)
		case x.path.attr == "externalid" && x.path.sub == "":
			return s.byExternalID(cl, events.KindUser, v)
		case x.path.attr == "emails" && (x.path.sub == "" || x.path.sub == "value"):
			return s.byEmail(cl, v)
		}
	case valuePath:
		if x.path.attr != "emails" || (x.path.urn != "" && !isCoreURN(x.path.urn)) {
			return nil, false, nil
		}
		if v, isStr := x.value.(string); isStr && x.sub == "value" && x.op == "eq" {
			return s.byEmail(cl, v)
		}
		return s.userCandidates(cl, relabel(x.filter, "emails"))
	}
	return nil, false, nil
}

// relabel turns the comparisons of a value filter on attr into comparisons of attr's
// sub-attributes (`emails[value eq "x"]` → `emails.value eq "x"`), for finding candidates.
func relabel(f filter, attr string) filter {
	switch x := f.(type) {
	case logical:
		return logical{and: x.and, l: relabel(x.l, attr), r: relabel(x.r, attr)}
	case compare:
		if x.path.urn == "" && x.path.sub == "" {
			return compare{path: attrPath{attr: attr, sub: x.path.attr}, op: x.op, value: x.value}
		}
	}
	return not{x: f}
}

func (s *server) byID(cl *call, kind events.AggregateKind, id string) ([]string, bool, error) {
	key, ok, err := s.store.FindByID(cl.ctx, cl.tenant, kind, id)
	if err != nil || !ok {
		return nil, true, err
	}
	return []string{key}, true, nil
}

func (s *server) byExternalID(cl *call, kind events.AggregateKind, ext string) ([]string, bool, error) {
	ls, err := s.store.FindByExternalID(cl.ctx, cl.tenant, kind, ext)
	return keysOf(ls), true, err
}

func (s *server) byEmail(cl *call, email string) ([]string, bool, error) {
	email = identity.NormalizeEmail(email)
	if email == "" {
		return nil, true, nil
	}
	u, ok, err := s.store.UserByEmail(cl.ctx, cl.tenant, email)
	if err != nil || !ok {
		return nil, true, err
	}
	return []string{u}, true, nil
}

func (s *server) listGroups(cl *call) error {
	q, err := listQueryOf(cl)
	if err != nil {
		return err
	}
	return s.listGroupsWith(cl, q)
}

// groupHit is a group a list returns, with its members when they were read.
type groupHit struct {
	g       events.Group
	members []member
}

func (s *server) listGroupsWith(cl *call, q listQuery) error {
	q.scope = cl.tenant.System + "/" + cl.tenant.ID
	if q.filter == nil && q.cursor != nil {
		return s.groupsByCursor(cl, q)
	}
	if q.filter == nil {
		return s.groupsByIndex(cl, q)
	}
	keys, indexed, err := s.groupCandidates(cl, q.filter)
	if err != nil {
		return err
	}
	if !indexed {
		return s.scanGroups(cl, q)
	}
	withMembers := q.proj.wants("members")
	filterMembers := mentions(q.filter, "members")
	var found []groupHit
	for chunk := range slices.Chunk(keys, loadChunk) {
		groups, err := s.store.LoadGroups(cl.ctx, cl.tenant, chunk)
		if err != nil {
			return err
		}
		for _, k := range chunk {
			g, ok := groups[k]
			if !ok || !g.Live() || g.State.ID == "" {
				continue
			}
			h := groupHit{g: g.State}
			if filterMembers {
				if h.members, err = s.members(cl, g.State.Key); err != nil {
					return err
				}
			}
			if matches(q.filter, lowerKeys(renderGroup(g.State, h.members, filterMembers, cl.base)).(map[string]any)) {
				found = append(found, h)
			}
		}
	}
	slices.SortFunc(found, func(a, b groupHit) int { return strings.Compare(a.g.ID, b.g.ID) })
	found = slices.CompactFunc(found, func(a, b groupHit) bool { return a.g.ID == b.g.ID })
	pg, next, err := page(events.KindGroup, q, found, func(h groupHit) string { return h.g.ID })
	if err != nil {
		return err
	}
	out := make([]any, 0, len(pg))
	budget := s.newMemberBudget()
	for _, h := range pg {
		ms, with := h.members, withMembers
		if withMembers && !filterMembers {
			if ms, with, err = s.inlineMembers(cl, h.g.Key, budget); err != nil {
				return err
			}
		} else {
			with = with && budget.take(len(ms))
		}
		out = append(out, q.proj.apply(renderGroup(h.g, ms, with, cl.base)))
	}
	return cl.writeList(q, len(found), out, next)
}

// renderGroups renders the groups with these keys, in this order.
func (s *server) renderGroups(cl *call, keys []string, withMembers bool, proj projection) ([]any, error) {
	groups, err := s.store.LoadGroups(cl.ctx, cl.tenant, keys)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(keys))
	budget := s.newMemberBudget()
	for _, k := range keys {
		g, ok := groups[k]
		if !ok || !g.Live() {
			continue
		}
		var ms []member
		with := withMembers
		if with {
			if ms, with, err = s.inlineMembers(cl, k, budget); err != nil {
				return nil, err
			}
		}
		out = append(out, proj.apply(renderGroup(g.State, ms, with, cl.base)))
	}
	return out, nil
}

// mentions reports whether a filter names a top-level attribute.
func mentions(f filter, attr string) bool {
	switch x := f.(type) {
	case logical:
		return mentions(x.l, attr) || mentions(x.r, attr)
	case not:
		return mentions(x.x, attr)
	case compare:
		return x.path.attr == attr
	case valuePath:
		return x.path.attr == attr
	}
	return false
}

func (s *server) groupCandidates(cl *call, f filter) (keys []string, indexed bool, err error) {
	switch x := f.(type) {
	case logical:
		l, lok, err := s.groupCandidates(cl, x.l)
		if err != nil || (x.and && lok) {
			return l, lok, err
		}
		r, rok, err := s.groupCandidates(cl, x.r)
		if err != nil || x.and {
			return r, rok, err
		}
		return append(l, r...), lok && rok, nil
	case compare:
		v, isStr := x.value.(string)
		if x.op != "eq" || !isStr || (x.path.urn != "" && !isCoreURN(x.path.urn)) {
			return nil, false, nil
		}
		switch {
		case x.path.attr == "displayname" && x.path.sub == "":
			return []string{identity.GroupKey(v)}, true, nil
		case x.path.attr == "id" && x.path.sub == "":
			return s.byID(cl, events.KindGroup, v)
		case x.path.attr == "externalid" && x.path.sub == "":
			return s.byExternalID(cl, events.KindGroup, v)
		case x.path.attr == "members" && (x.path.sub == "" || x.path.sub == "value"):
			return s.groupsOfMember(cl, v)
		}
	case valuePath:
		if x.path.attr != "members" {
			return nil, false, nil
		}
		if ids, ok := valueEquals(x.filter); ok && len(ids) == 1 && x.op == "" {
			return s.groupsOfMember(cl, ids[0])
		}
	}
	return nil, false, nil
}

// groupsOfMember are the keys of the groups the user with SCIM id id belongs to.
func (s *server) groupsOfMember(cl *call, id string) ([]string, bool, error) {
	username, ok, err := s.store.FindByID(cl.ctx, cl.tenant, events.KindUser, id)
	if err != nil || !ok {
		return nil, true, err
	}
	_, groups, err := s.store.UserMemberships(cl.ctx, cl.tenant, username)
	return groups, true, err
}
