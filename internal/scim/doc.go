// Package scim is ssodir's SCIM 2.0 port (RFC 7643, RFC 7644, RFC 9865): identity
// providers such as Okta and Microsoft Entra ID provision a tenant's users and groups at
// /scim/v2/{system}/{tenant}. It translates SCIM requests into the ordinary commands of
// internal/commands and their results back into SCIM resources, and decides nothing
// itself: every change is a command (logged, projected and synced to Keycloak like any
// other), every read is a strongly consistent read of the write model (so a provider
// reads its own writes at once).
//
// Resources are handled as documents: JSON objects whose attribute names are lower-cased
// (SCIM's attribute names are case-insensitive), with extension attributes under their
// schema's lower-cased URN. A PATCH applies its operations to the document of the current
// state, and the result is mapped back like the body of a PUT; filters are evaluated on
// documents too. README.md's "SCIM" section documents the mapping to ssodir's fields.
package scim

import (
	"strings"
)

// Schema and message URNs (RFC 7643 section 8.7, RFC 7644 section 3.1).
const (
	URNUser           = "urn:ietf:params:scim:schemas:core:2.0:User"
	URNGroup          = "urn:ietf:params:scim:schemas:core:2.0:Group"
	URNEnterpriseUser = "urn:ietf:params:scim:schemas:extension:enterprise:2.0:User"
	URNListResponse   = "urn:ietf:params:scim:api:messages:2.0:ListResponse"
	URNPatchOp        = "urn:ietf:params:scim:api:messages:2.0:PatchOp"
	URNError          = "urn:ietf:params:scim:api:messages:2.0:Error"
	URNSearchRequest  = "urn:ietf:params:scim:api:messages:2.0:SearchRequest"
	URNSPConfig       = "urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig"
	URNResourceType   = "urn:ietf:params:scim:schemas:core:2.0:ResourceType"
	URNSchema         = "urn:ietf:params:scim:schemas:core:2.0:Schema"
)

// enterpriseKey is the enterprise extension's key in a (lower-cased) document.
var enterpriseKey = strings.ToLower(URNEnterpriseUser)

// MediaType is SCIM's media type; application/json is accepted too.
const MediaType = "application/scim+json"

// isCoreURN reports whether a lower-cased URN names a core schema (whose attributes sit
// at the top of a document).
func isCoreURN(urn string) bool {
	return urn == strings.ToLower(URNUser) || urn == strings.ToLower(URNGroup)
}

// lowerKeys copies a decoded JSON value with every object key lower-cased. When two keys
// differ only in case, the later one in map order wins; a client that sends both is
// ambiguous either way.
func lowerKeys(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[strings.ToLower(k)] = lowerKeys(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = lowerKeys(e)
		}
		return out
	}
	return v
}
