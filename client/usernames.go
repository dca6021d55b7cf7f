package client

import "github.com/ssodir/ssodir/internal/identity"

// NormalizeUsername is a username as the directory keeps it (lower-cased, as Keycloak
// does) and whether it is one by API.md's rule (Keycloak's: 1–255 characters, none of them
// whitespace, a control character or one of < > & " ' $ % ! # ? § , ; : * ~ / \ | ^ = [ ] {
// } ( ) and the backtick). It is the directory's own rule, so that a tool can check its
// input before it sends it; the APIs decide by the same function.
func NormalizeUsername(s string) (string, bool) { return identity.NormalizeUsername(s) }
