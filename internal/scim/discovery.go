package scim

import (
	"net/http"
	"strings"

	"github.com/ssodir/ssodir/internal/apperr"
)

// The discovery endpoints (RFC 7644 section 4): what this service provider supports,
// and the schemas of the attributes it keeps.

func (s *server) serviceProviderConfig(cl *call) error {
	return cl.write(http.StatusOK, map[string]any{
		"schemas":          []string{URNSPConfig},
		"documentationUri": "https://github.com/ssodir/ssodir#scim",
		"patch":            map[string]any{"supported": true},
		"bulk":             map[string]any{"supported": false, "maxOperations": 0, "maxPayloadSize": 0},
		"filter":           map[string]any{"supported": true, "maxResults": maxPageSize},
		"changePassword":   map[string]any{"supported": true},
		"sort":             map[string]any{"supported": false},
		"etag":             map[string]any{"supported": true},
		"pagination": map[string]any{"cursor": true, "index": true, "defaultPaginationMethod": "index",
			"defaultPageSize": defaultPageSize, "maxPageSize": maxPageSize},
		"authenticationSchemes": []any{map[string]any{
			"type": "oauthbearertoken", "name": "OAuth Bearer Token", "primary": true,
			"description": "A SCIM token of the tenant (POST /v1/systems/{system}/tenants/{tenant}/scim-tokens), " +
				"or an OIDC access token with the scopes directory:write and directory:read for the tenant.",
		}},
		"meta": map[string]any{"resourceType": "ServiceProviderConfig", "location": cl.base + "/ServiceProviderConfig"},
	})
}

func resourceTypes(base string) []any {
	return []any{
		map[string]any{"schemas": []string{URNResourceType}, "id": "User", "name": "User", "endpoint": "/Users",
			"description": "A user of the tenant", "schema": URNUser,
			"schemaExtensions": []any{map[string]any{"schema": URNEnterpriseUser, "required": false}},
			"meta":             map[string]any{"resourceType": "ResourceType", "location": base + "/ResourceTypes/User"}},
		map[string]any{"schemas": []string{URNResourceType}, "id": "Group", "name": "Group", "endpoint": "/Groups",
			"description": "A group of the tenant's users", "schema": URNGroup,
			"meta": map[string]any{"resourceType": "ResourceType", "location": base + "/ResourceTypes/Group"}},
	}
}

func (s *server) resourceTypes(cl *call) error {
	rts := resourceTypes(cl.base)
	return cl.write(http.StatusOK, map[string]any{"schemas": []string{URNListResponse}, "totalResults": len(rts),
		"startIndex": 1, "itemsPerPage": len(rts), "Resources": rts})
}

func (s *server) resourceType(cl *call) error {
	for _, rt := range resourceTypes(cl.base) {
		if strings.EqualFold(rt.(map[string]any)["id"].(string), cl.c.Param("id")) {
			return cl.write(http.StatusOK, rt)
		}
	}
	return apperr.NotFound("resource type")
}

// attr describes an attribute of a schema (RFC 7643 section 7).
type attr struct {
	name, typ, mutability, returned, uniqueness string
	multi, required, caseExact                  bool
	sub                                         []attr
}

func str0(name string) attr { return attr{name: name, typ: "string"} }

func (a attr) json() map[string]any {
	out := map[string]any{"name": a.name, "type": a.typ, "multiValued": a.multi, "required": a.required,
		"caseExact": a.caseExact, "mutability": or(a.mutability, "readWrite"), "returned": or(a.returned, "default"),
		"uniqueness": or(a.uniqueness, "none"), "description": ""}
	if len(a.sub) > 0 {
		subs := make([]any, 0, len(a.sub))
		for _, s := range a.sub {
			subs = append(subs, s.json())
		}
		out["subAttributes"] = subs
	}
	return out
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func typed(name string, subs ...attr) attr {
	return attr{name: name, typ: "complex", multi: true, sub: append([]attr{str0("value"), str0("type"), {name: "primary", typ: "boolean"}}, subs...)}
}

func schemaDefs() []map[string]any {
	user := []attr{
		{name: "userName", typ: "string", required: true, uniqueness: "server"}, // a change renames the user
		{name: "name", typ: "complex", sub: []attr{str0("formatted"), str0("familyName"), str0("givenName"), str0("middleName"),
			str0("honorificPrefix"), str0("honorificSuffix")}},
		str0("displayName"), str0("nickName"), {name: "profileUrl", typ: "reference"}, str0("title"), str0("userType"),
		str0("preferredLanguage"), str0("locale"), str0("timezone"),
		{name: "active", typ: "boolean"},
		{name: "password", typ: "string", mutability: "writeOnly", returned: "never"},
		typed("emails"), typed("phoneNumbers"), typed("ims"), typed("photos"),
		{name: "addresses", typ: "complex", multi: true, sub: []attr{str0("formatted"), str0("streetAddress"), str0("locality"),
			str0("region"), str0("postalCode"), str0("country"), str0("type")}},
		typed("entitlements"), typed("roles"), typed("x509Certificates"),
	}
	enterprise := []attr{str0("employeeNumber"), str0("costCenter"), str0("organization"), str0("division"), str0("department"),
		{name: "manager", typ: "complex", sub: []attr{str0("value"), {name: "$ref", typ: "reference"}, {name: "displayName", typ: "string", mutability: "readOnly"}}}}
	group := []attr{
		{name: "displayName", typ: "string", required: true, uniqueness: "server"}, // a change renames the group
		{name: "members", typ: "complex", multi: true, sub: []attr{{name: "value", typ: "string", mutability: "immutable"},
			{name: "display", typ: "string", mutability: "readOnly"}, {name: "$ref", typ: "reference", mutability: "immutable"},
			{name: "type", typ: "string", mutability: "immutable"}}},
	}
	def := func(id, name, desc string, attrs []attr) map[string]any {
		as := make([]any, 0, len(attrs))
		for _, a := range attrs {
			as = append(as, a.json())
		}
		return map[string]any{"schemas": []string{URNSchema}, "id": id, "name": name, "description": desc, "attributes": as}
	}
	return []map[string]any{
		def(URNUser, "User", "User Account", user),
		def(URNEnterpriseUser, "EnterpriseUser", "Enterprise User", enterprise),
		def(URNGroup, "Group", "Group", group),
	}
}

func withSchemaMeta(d map[string]any, base string) map[string]any {
	d["meta"] = map[string]any{"resourceType": "Schema", "location": base + "/Schemas/" + d["id"].(string)}
	return d
}

func (s *server) schemas(cl *call) error {
	defs := schemaDefs()
	out := make([]any, 0, len(defs))
	for _, d := range defs {
		out = append(out, withSchemaMeta(d, cl.base))
	}
	return cl.write(http.StatusOK, map[string]any{"schemas": []string{URNListResponse}, "totalResults": len(out),
		"startIndex": 1, "itemsPerPage": len(out), "Resources": out})
}

func (s *server) schema(cl *call) error {
	for _, d := range schemaDefs() {
		if strings.EqualFold(d["id"].(string), cl.c.Param("id")) {
			return cl.write(http.StatusOK, withSchemaMeta(d, cl.base))
		}
	}
	return apperr.NotFound("schema")
}
