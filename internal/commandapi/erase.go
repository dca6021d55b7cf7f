package commandapi

import (
	"context"
	"net/http"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
)

type eraseBody struct {
	Reason          string `json:"reason"`
	AllIncarnations bool   `json:"all_incarnations"`
}

// erasureAnswer is the 202 body of POST /users/{username}/erase.
type erasureAnswer struct {
	ErasureID string `json:"erasure_id"`
	Status    string `json:"status"`
}

func erasureAccepted(id string) erasureAnswer { return erasureAnswer{ErasureID: id, Status: "pending"} }

// erasureLocation is the erasure's path on the query API.
func erasureLocation(t commands.Tenant, id string) string {
	return "/v1/systems/" + t.System + "/tenants/" + t.ID + "/erasures/" + id
}

// postErase is POST /users/{username}/erase (scope directory:erase): 202 with the
// erasure's Location; the erasure goes on in the projector and the Keycloak sync.
func (a *api) postErase(c echo.Context) error {
	r, b, err := beginWith[eraseBody](a, c, http.StatusAccepted)
	if err != nil {
		return err
	}
	cmd := commands.EraseUser{Username: c.Param("username"), Reason: b.Reason, ErasureID: uuid.NewString(), AllIncarnations: b.AllIncarnations}
	if err := cmd.Validate(); err != nil {
		return err
	}
	r.location = erasureLocation(r.tenant, cmd.ErasureID)
	return a.run(r, func(ctx context.Context) (outcome, error) {
		v, err := a.eraseUser.Handle(ctx, r.tenant, cmd, r.meta)
		return outcome{kind: events.KindErasure, key: cmd.ErasureID, version: v, body: erasureAccepted(cmd.ErasureID)}, err
	})
}
