package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// SetMemberExpiry puts a user in a group (also fine when already a member) with the
// membership ending by itself at expiresAt (in the future), or, with nil, clears the
// expiry of a membership (API.md, "Memberships that expire"). The Result's version is the
// group's, as is IfMatch's.
func (t *TenantClient) SetMemberExpiry(ctx context.Context, group, username string, expiresAt *time.Time, opts ...Option) (Result, error) {
	body := map[string]any{"expires_at": nil}
	if expiresAt != nil {
		body["expires_at"] = expiresAt.UTC().Format(time.RFC3339Nano)
	}
	resp, err := t.c.call(ctx, t.c.command, http.MethodPut, t.path("/groups/"+seg(group)+"/members/"+seg(username)), body, nil, opts)
	if err != nil {
		return Result{}, err
	}
	return result(resp), nil
}

// MarshalJSON sends the additions with an expiry (Expires) as {"username","expires_at"}.
func (m MembersChange) MarshalJSON() ([]byte, error) {
	type plain struct {
		Add    []any    `json:"add,omitempty"`
		Remove []string `json:"remove,omitempty"`
	}
	p := plain{Remove: m.Remove}
	for _, u := range m.Add {
		if at, ok := m.Expires[u]; ok {
			p.Add = append(p.Add, map[string]string{"username": u, "expires_at": at.UTC().Format(time.RFC3339Nano)})
		} else {
			p.Add = append(p.Add, u)
		}
	}
	return json.Marshal(p)
}

// MembersChunksUntil is MembersChunks of additions that all end at expiresAt.
func MembersChunksUntil(add []string, expiresAt time.Time) []MembersChange {
	extra := len(`{"username":,"expires_at":""}`) + len(expiresAt.UTC().Format(time.RFC3339Nano))
	chunks := membersChunks(add, nil, extra)
	for i := range chunks {
		chunks[i].Expires = make(map[string]time.Time, len(chunks[i].Add))
		for _, u := range chunks[i].Add {
			chunks[i].Expires[u] = expiresAt
		}
	}
	return chunks
}
