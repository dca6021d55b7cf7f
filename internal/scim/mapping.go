package scim

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/objects"
)

// How SCIM's User and Group attributes map to ssodir's fields (README.md, "SCIM"):
// userName, name.givenName, name.familyName, the user's email (the primary entry of
// emails, else the work one, else the first), active and password are fields of the user;
// displayName and members are the group's name and memberships; every other attribute
// this port knows is kept in `attributes` under a `scim.` key. Attributes under other
// keys belong to other clients: SCIM neither shows nor changes them.
const attrPrefix = "scim."

// userSimple are singular string attributes of the core User schema kept as attributes:
// lower-cased name → SCIM name (which is also the attribute key after "scim.").
var userSimple = names("displayName", "nickName", "profileUrl", "title", "userType", "preferredLanguage", "locale", "timezone")

// nameExtra are the sub-attributes of name besides given and family name.
var nameExtra = names("formatted", "middleName", "honorificPrefix", "honorificSuffix")

// typedMulti are multi-valued attributes kept by type: `scim.<attr>.<type>` holds the
// values of that type. emails holds the entries other than the user's email.
var typedMulti = names("emails", "phoneNumbers", "ims", "photos")

// addressSubs are the sub-attributes of an address kept: `scim.addresses.<type>.<sub>`.
var addressSubs = names("formatted", "streetAddress", "locality", "region", "postalCode", "country")

// valueMulti are multi-valued attributes kept as their values: `scim.<attr>`.
var valueMulti = names("entitlements", "roles", "x509Certificates")

// enterpriseSimple are the enterprise extension's string attributes:
// `scim.enterprise.<attr>`; its manager's id is `scim.enterprise.manager`.
var enterpriseSimple = names("employeeNumber", "costCenter", "organization", "division", "department")

const (
	keyExternalID = identity.ExternalIDAttribute
	keyManager    = attrPrefix + "enterprise.manager"
)

// names maps lower-cased names to themselves as SCIM spells them.
func names(ns ...string) map[string]string {
	out := make(map[string]string, len(ns))
	for _, n := range ns {
		out[strings.ToLower(n)] = n
	}
	return out
}

var typeRE = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// entryType is the type of a multi-valued entry as a key part: lower-cased, "other" when
// absent or unusable as a key.
func entryType(m map[string]any) string {
	t, _ := m["type"].(string)
	t = strings.ToLower(strings.TrimSpace(t))
	if !typeRE.MatchString(t) {
		return "other"
	}
	return t
}

// userFields are what a User document sets of a user.
type userFields struct {
	username            string
	email               string
	firstName, lastName string
	// active and password are nil when the document does not set them.
	active   *bool
	password *string
	// attrs are the `scim.` attributes (and only those).
	attrs map[string][]string
}

// invalidValue is a 400 invalidValue naming the attribute at fault.
func invalidValue(attr, msg string) error {
	return badRequest(typeInvalidValue, attr+": "+msg)
}

// str reads a string attribute; numbers and booleans are taken as their text (a provider
// may send an employee number as a number).
func str(attr string, v any) (string, error) {
	switch x := v.(type) {
	case nil:
		return "", nil
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), nil
	}
	return "", invalidValue(attr, "must be a string")
}

// boolean reads a boolean, also from the strings "True" and "False" in any case, which
// Microsoft Entra sends.
func boolean(attr string, v any) (*bool, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case bool:
		return &x, nil
	case string:
		if b, err := strconv.ParseBool(strings.ToLower(strings.TrimSpace(x))); err == nil {
			return &b, nil
		}
	}
	return nil, invalidValue(attr, "must be true or false")
}

func object(attr string, v any) (map[string]any, error) {
	switch x := v.(type) {
	case nil:
		return nil, nil
	case map[string]any:
		return x, nil
	}
	return nil, invalidValue(attr, "must be an object")
}

func entries(attr string, v any) ([]map[string]any, error) {
	var out []map[string]any
	for _, el := range elements(v) {
		switch x := el.(type) {
		case map[string]any:
			out = append(out, x)
		case string:
			// A bare value, as some clients send for roles or members.
			out = append(out, map[string]any{"value": x})
		case nil:
		default:
			return nil, invalidValue(attr, "must be an array of objects")
		}
	}
	return out, nil
}

func setAttr(attrs map[string][]string, key, v string) {
	if v = strings.TrimSpace(v); v != "" {
		attrs[key] = append(attrs[key], v)
	}
}

// userFromDoc reads a (lower-cased) User document, as POST and PUT send it and as a PATCH
// leaves it. Read-only attributes (id, meta, groups) and unknown ones are ignored.
func userFromDoc(d map[string]any) (userFields, error) {
	f := userFields{attrs: map[string][]string{}}
	var err error
	if f.username, err = str("userName", d["username"]); err != nil {
		return f, err
	}
	if f.username == "" {
		return f, invalidValue("userName", "is required")
	}
	ext, err := str("externalId", d["externalid"])
	if err != nil {
		return f, err
	}
	if ext != "" {
		f.attrs[keyExternalID] = []string{ext}
	}
	if f.active, err = boolean("active", d["active"]); err != nil {
		return f, err
	}
	if v, ok := d["password"]; ok && v != nil {
		p, err := str("password", v)
		if err != nil {
			return f, err
		}
		f.password = &p
	}
	for lower, name := range userSimple {
		v, err := str(name, d[lower])
		if err != nil {
			return f, err
		}
		setAttr(f.attrs, attrPrefix+name, v)
	}
	name, err := object("name", d["name"])
	if err != nil {
		return f, err
	}
	if f.firstName, err = str("name.givenName", name["givenname"]); err != nil {
		return f, err
	}
	if f.lastName, err = str("name.familyName", name["familyname"]); err != nil {
		return f, err
	}
	for lower, sub := range nameExtra {
		v, err := str("name."+sub, name[lower])
		if err != nil {
			return f, err
		}
		setAttr(f.attrs, attrPrefix+"name."+sub, v)
	}
	if err := readEmails(&f, d["emails"]); err != nil {
		return f, err
	}
	for lower, attr := range typedMulti {
		if lower == "emails" {
			continue
		}
		es, err := entries(attr, d[lower])
		if err != nil {
			return f, err
		}
		for _, e := range es {
			v, err := str(attr+".value", e["value"])
			if err != nil {
				return f, err
			}
			setAttr(f.attrs, attrPrefix+attr+"."+entryType(e), v)
		}
	}
	addrs, err := entries("addresses", d["addresses"])
	if err != nil {
		return f, err
	}
	for _, a := range addrs {
		t := entryType(a)
		for lower, sub := range addressSubs {
			v, err := str("addresses."+sub, a[lower])
			if err != nil {
				return f, err
			}
			if v = strings.TrimSpace(v); v != "" {
				// One address per type: a second of the same type replaces the first.
				f.attrs[attrPrefix+"addresses."+t+"."+sub] = []string{v}
			}
		}
	}
	for lower, attr := range valueMulti {
		es, err := entries(attr, d[lower])
		if err != nil {
			return f, err
		}
		for _, e := range es {
			v, err := str(attr+".value", e["value"])
			if err != nil {
				return f, err
			}
			setAttr(f.attrs, attrPrefix+attr, v)
		}
	}
	ent, err := object(URNEnterpriseUser, d[enterpriseKey])
	if err != nil {
		return f, err
	}
	for lower, attr := range enterpriseSimple {
		v, err := str(attr, ent[lower])
		if err != nil {
			return f, err
		}
		setAttr(f.attrs, attrPrefix+"enterprise."+attr, v)
	}
	// The manager as an object, as a plain id (Entra's newer PATCH), or as a list of one
	// object (Entra's older PATCH: `[{"$ref":null,"value":"…"}]`).
	manager := ent["manager"]
	if list, ok := manager.([]any); ok && len(list) > 0 {
		manager = list[0]
	}
	switch m := manager.(type) {
	case map[string]any:
		v, err := str("manager.value", m["value"])
		if err != nil {
			return f, err
		}
		setAttr(f.attrs, keyManager, v)
	case string:
		setAttr(f.attrs, keyManager, m)
	}
	return f, nil
}

// readEmails takes the user's email from the primary entry, else the work one, else the
// first; the others are kept by type.
func readEmails(f *userFields, v any) error {
	es, err := entries("emails", v)
	if err != nil {
		return err
	}
	main := -1
	for i, e := range es {
		p, err := boolean("emails.primary", e["primary"])
		if err != nil {
			return err
		}
		if p != nil && *p {
			main = i
			break
		}
	}
	if main < 0 {
		main = slices.IndexFunc(es, func(e map[string]any) bool { return entryType(e) == "work" })
	}
	if main < 0 && len(es) > 0 {
		main = 0
	}
	for i, e := range es {
		v, err := str("emails.value", e["value"])
		if err != nil {
			return err
		}
		if i == main {
			f.email = strings.TrimSpace(v)
			continue
		}
		setAttr(f.attrs, attrPrefix+"emails."+entryType(e), v)
	}
	return nil
}

// ownAttrs are the attributes of a user or group this port owns.
func ownAttrs(attrs map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range attrs {
		if strings.HasPrefix(k, attrPrefix) {
			out[k] = v
		}
	}
	return out
}

// mergeAttrs are the attributes of a user or group with its `scim.` ones replaced by own.
func mergeAttrs(current, own map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range current {
		if !strings.HasPrefix(k, attrPrefix) {
			out[k] = v
		}
	}
	maps.Copy(out, own)
	return out
}

// location is the URL of a resource: base (`https://host/scim/v2/sys/ten`), its
// endpoint and id.
func location(base, endpoint, id string) string { return base + "/" + endpoint + "/" + id }

// etag is a resource's entity tag: its version, weak because the SCIM representation is
// one of several of the same version.
func etag(version int64) string { return `W/"` + strconv.FormatInt(version, 10) + `"` }

// renderUser is a user as a SCIM User resource.
func renderUser(u events.User, base string) map[string]any {
	attrs := u.Attributes
	out := map[string]any{"schemas": []any{URNUser}, "id": u.ID, "userName": u.Username, "active": u.IsActive}
	if ext := identity.ExternalID(attrs); ext != "" {
		out["externalId"] = ext
	}
	name := map[string]any{}
	if u.FirstName != "" {
		name["givenName"] = u.FirstName
	}
	if u.LastName != "" {
		name["familyName"] = u.LastName
	}
	for _, sub := range nameExtra {
		if v := first(attrs, attrPrefix+"name."+sub); v != "" {
			name[sub] = v
		}
	}
	if len(name) > 0 {
		out["name"] = name
	}
	for _, attr := range userSimple {
		if v := first(attrs, attrPrefix+attr); v != "" {
			out[attr] = v
		}
	}
	var emails []any
	if u.Email != "" {
		emails = append(emails, map[string]any{"value": u.Email, "type": "work", "primary": true})
	}
	emails = append(emails, typedEntries(attrs, "emails")...)
	if len(emails) > 0 {
		out["emails"] = emails
	}
	for _, attr := range typedMulti {
		if attr == "emails" {
			continue
		}
		if es := typedEntries(attrs, attr); len(es) > 0 {
			out[attr] = es
		}
	}
	if as := addresses(attrs); len(as) > 0 {
		out["addresses"] = as
	}
	for _, attr := range valueMulti {
		var es []any
		for _, v := range attrs[attrPrefix+attr] {
			es = append(es, map[string]any{"value": v})
		}
		if len(es) > 0 {
			out[attr] = es
		}
	}
	ent := map[string]any{}
	for _, attr := range enterpriseSimple {
		if v := first(attrs, attrPrefix+"enterprise."+attr); v != "" {
			ent[attr] = v
		}
	}
	if m := first(attrs, keyManager); m != "" {
		ent["manager"] = map[string]any{"value": m, "$ref": location(base, "Users", m)}
	}
	if len(ent) > 0 {
		out[URNEnterpriseUser] = ent
		out["schemas"] = []any{URNUser, URNEnterpriseUser}
	}
	out["meta"] = meta("User", base, "Users", u.ID, u.Version, u.CreatedAt, u.UpdatedAt)
	return out
}

func meta(resourceType, base, endpoint, id string, version int64, created, modified time.Time) map[string]any {
	return map[string]any{"resourceType": resourceType, "created": objects.Timestamp(created), "lastModified": objects.Timestamp(modified),
		"version": etag(version), "location": location(base, endpoint, id)}
}

func first(attrs map[string][]string, key string) string {
	if vs := attrs[key]; len(vs) > 0 {
		return vs[0]
	}
	return ""
}

// typedEntries are the entries `scim.<attr>.<type>` holds, by type.
func typedEntries(attrs map[string][]string, attr string) []any {
	prefix := attrPrefix + attr + "."
	var out []any
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		t, ok := strings.CutPrefix(k, prefix)
		if !ok || strings.Contains(t, ".") {
			continue
		}
		for _, v := range attrs[k] {
			out = append(out, map[string]any{"value": v, "type": t})
		}
	}
	return out
}

func addresses(attrs map[string][]string) []any {
	prefix := attrPrefix + "addresses."
	byType := map[string]map[string]any{}
	for k, vs := range attrs {
		rest, ok := strings.CutPrefix(k, prefix)
		t, sub, ok2 := strings.Cut(rest, ".")
		if !ok || !ok2 || len(vs) == 0 {
			continue
		}
		name, known := addressSubs[strings.ToLower(sub)]
		if !known {
			continue
		}
		if byType[t] == nil {
			byType[t] = map[string]any{"type": t}
		}
		byType[t][name] = vs[0]
	}
	var out []any
	for _, t := range slices.Sorted(maps.Keys(byType)) {
		out = append(out, byType[t])
	}
	return out
}

// groupFields are what a Group document sets of a group.
type groupFields struct {
	displayName string
	attrs       map[string][]string
	// members are the ids of the members, when the document names them.
	members    []string
	hasMembers bool
}

func groupFromDoc(d map[string]any) (groupFields, error) {
	f := groupFields{attrs: map[string][]string{}}
	var err error
	if f.displayName, err = str("displayName", d["displayname"]); err != nil {
		return f, err
	}
	if f.displayName == "" {
		return f, invalidValue("displayName", "is required")
	}
	ext, err := str("externalId", d["externalid"])
	if err != nil {
		return f, err
	}
	if ext != "" {
		f.attrs[keyExternalID] = []string{ext}
	}
	if v, ok := d["members"]; ok {
		f.hasMembers = true
		es, err := entries("members", v)
		if err != nil {
			return f, err
		}
		for _, e := range es {
			id, err := str("members.value", e["value"])
			if err != nil {
				return f, err
			}
			if id == "" {
				return f, invalidValue("members.value", "is required")
			}
			if !slices.Contains(f.members, id) {
				f.members = append(f.members, id)
			}
		}
	}
	return f, nil
}

// member is a group's member as a Group resource lists it.
type member struct{ id, username string }

func renderGroup(g events.Group, members []member, withMembers bool, base string) map[string]any {
	out := map[string]any{"schemas": []any{URNGroup}, "id": g.ID, "displayName": g.Name}
	if ext := identity.ExternalID(g.Attributes); ext != "" {
		out["externalId"] = ext
	}
	if withMembers {
		ms := make([]any, 0, len(members))
		for _, m := range members {
			ms = append(ms, map[string]any{"value": m.id, "display": m.username, "type": "User", "$ref": location(base, "Users", m.id)})
		}
		out["members"] = ms
	}
	out["meta"] = meta("Group", base, "Groups", g.ID, g.Version, g.CreatedAt, g.UpdatedAt)
	return out
}
