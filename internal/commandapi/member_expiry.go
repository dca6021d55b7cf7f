package commandapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/httpapi"
)

// putMemberBody is PUT /groups/{name}/members/{username}'s optional body: an expires_at
// sets the membership's expiry, null clears it, none leaves it (API.md).
type putMemberBody struct {
	ExpiresAt optional[string] `json:"expires_at"`
}

func (a *api) putMember(c echo.Context) error {
	r, err := a.begin(c, http.StatusNoContent)
	if err != nil {
		return err
	}
	cmd := commands.AddMember{Group: c.Param("name"), Username: c.Param("username")}
	if len(bytes.TrimSpace(r.raw)) > 0 {
		var b putMemberBody
		if err := httpapi.DecodeJSON(c, &b); err != nil {
			return err
		}
		if b.ExpiresAt.Set {
			cmd.Expiry = &commands.ExpiryChange{}
			if !b.ExpiresAt.Null {
				at, err := parseExpiry("expires_at", b.ExpiresAt.Value)
				if err != nil {
					return err
				}
				cmd.Expiry.At = &at
			}
		}
	}
	return a.run(r, func(ctx context.Context) (outcome, error) {
		v, err := a.addMember.Handle(ctx, r.tenant, cmd, r.meta)
		return outcome{kind: events.KindGroup, version: v}, err
	})
}

// parseExpiry reads an RFC 3339 instant.
func parseExpiry(field, s string) (time.Time, error) {
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, apperr.InvalidField(field, "must be an RFC 3339 instant, such as 2030-03-31T17:00:00Z")
	}
	return at, nil
}

type changeMembersBody struct {
	Add    []memberToAdd `json:"add"`
	Remove []string      `json:"remove"`
}

// memberToAdd is an element of a members change's add: a username, or
// {"username", "expires_at"}.
type memberToAdd struct {
	Username  string  `json:"username"`
	ExpiresAt *string `json:"expires_at"`
}

func (m *memberToAdd) UnmarshalJSON(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '"' {
		return json.Unmarshal(b, &m.Username)
	}
	type plain memberToAdd
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	var p plain
	if err := d.Decode(&p); err != nil {
		return err
	}
	*m = memberToAdd(p)
	return nil
}

// adds are the usernames to add and the expiries given for some of them (by the username
// as sent; ChangeMembers.Validate normalises both).
func (b changeMembersBody) adds() ([]string, map[string]time.Time, error) {
	names := make([]string, 0, len(b.Add))
	var expires map[string]time.Time
	for i, m := range b.Add {
		names = append(names, m.Username)
		if m.ExpiresAt == nil {
			continue
		}
		at, err := parseExpiry(fmt.Sprintf("add[%d].expires_at", i), *m.ExpiresAt)
		if err != nil {
			return nil, nil, err
		}
		if expires == nil {
			expires = map[string]time.Time{}
		}
		expires[m.Username] = at
	}
	return names, expires, nil
}
