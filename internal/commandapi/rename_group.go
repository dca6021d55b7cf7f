package commandapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/commands"
)

type renameGroupBody struct {
	Name string `json:"name"`
}

// postRenameGroup is POST /groups/{name}/rename: 200 with the group under its new name.
func (a *api) postRenameGroup(c echo.Context) error {
	r, b, err := beginWith[renameGroupBody](a, c, http.StatusOK)
	if err != nil {
		return err
	}
	cmd := commands.RenameGroup{Name: c.Param("name"), NewName: b.Name}
	if err := cmd.Validate(); err != nil {
		return err
	}
	return a.run(r, func(ctx context.Context) (outcome, error) {
		g, err := a.renameGroup.Handle(ctx, r.tenant, cmd, r.meta)
		return groupOutcome(g), err
	})
}
