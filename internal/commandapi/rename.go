package commandapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/commands"
)

type renameUserBody struct {
	Username string `json:"username"`
}

// postRenameUser is POST /users/{username}/rename: 200 with the user under its new name.
func (a *api) postRenameUser(c echo.Context) error {
	r, b, err := beginWith[renameUserBody](a, c, http.StatusOK)
	if err != nil {
		return err
	}
	cmd := commands.RenameUser{Username: c.Param("username"), NewUsername: b.Username}
	if err := cmd.Validate(); err != nil {
		return err
	}
	return a.run(r, func(ctx context.Context) (outcome, error) {
		u, err := a.renameUser.Handle(ctx, r.tenant, cmd, r.meta)
		return userOutcome(u), err
	})
}
