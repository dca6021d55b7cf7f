package keycloak

import (
	"context"
	"net/http"
	"time"
)

// UsernameChanges is whether a realm lets ssodir rename its users in place.
type UsernameChanges string

const (
	// UsernameChangesAllowed: the realm's "Edit username" (editUsernameAllowed) is on.
	UsernameChangesAllowed UsernameChanges = "allowed"
	// UsernameChangesRefused: it is off (Keycloak's default), so Keycloak refuses a
	// username change (400 error-user-attribute-read-only) and a rename waits as a dead
	// letter until an administrator turns it on.
	UsernameChangesRefused UsernameChanges = "refused"
	// UsernameChangesUnknown: the realm could not be asked, or would not say (a service
	// account without view-realm gets only the realm's name).
	UsernameChangesUnknown UsernameChanges = "unknown"
)

// realmRepresentation is the part of GET /admin/realms/{realm} ssodir reads.
type realmRepresentation struct {
	Realm string `json:"realm"`
	// EditUsernameAllowed is absent from the short representation Keycloak gives a
	// caller without view-realm (RealmAdminResource.getRealm).
	EditUsernameAllowed *bool `json:"editUsernameAllowed"`
}

// UsernameChanges reads the realm representation (GET /admin/realms/{realm}) and says
// whether the realm lets usernames change. An error leaves it unknown.
func (c *Client) UsernameChanges(ctx context.Context) (UsernameChanges, error) {
	var rep realmRepresentation
	if err := c.do(ctx, http.MethodGet, "", nil, nil, &rep); err != nil {
		return UsernameChangesUnknown, err
	}
	switch {
	case rep.EditUsernameAllowed == nil:
		return UsernameChangesUnknown, nil
	case *rep.EditUsernameAllowed:
		return UsernameChangesAllowed, nil
	}
	return UsernameChangesRefused, nil
}

// CheckUsernameChanges asks a realm, with the given settings, whether it lets usernames
// change: one attempt of each request, bounded by ctx (PUT /keycloak asks this way).
func CheckUsernameChanges(ctx context.Context, baseURL, realm, clientID, clientSecret string) (UsernameChanges, error) {
	c := New(ClientConfig{BaseURL: baseURL, Realm: realm, ClientID: clientID, ClientSecret: clientSecret,
		MaxAttempts: 1, RequestTimeout: 5 * time.Second, Concurrency: 1}, nil)
	return c.UsernameChanges(ctx)
}
