package commandapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/objects"
)

type createGroupBody struct {
	Name        string              `json:"name"`
	Description string              `json:"description"`
	Attributes  map[string][]string `json:"attributes"`
}

func (a *api) postGroup(c echo.Context) error {
	r, b, err := beginWith[createGroupBody](a, c, http.StatusCreated)
	if err != nil {
		return err
	}
	cmd := commands.CreateGroup{Name: b.Name, Description: b.Description, Attributes: b.Attributes}
	if err := cmd.Validate(); err != nil {
		return err
	}
	r.location = groupLocation(r.tenant, cmd.Name)
	return a.run(r, func(ctx context.Context) (outcome, error) {
		g, err := a.createGroup.Handle(ctx, r.tenant, cmd, r.meta)
		return groupOutcome(g), err
	})
}

type patchGroupBody struct {
	Description optional[string]              `json:"description"`
	Attributes  optional[map[string][]string] `json:"attributes"`
}

func (a *api) patchGroup(c echo.Context) error {
	r, b, err := beginWith[patchGroupBody](a, c, http.StatusOK)
	if err != nil {
		return err
	}
	cmd := commands.UpdateGroup{Name: c.Param("name"), Description: b.Description.ptr(), Attributes: attributesPatch(b.Attributes)}
	return a.run(r, func(ctx context.Context) (outcome, error) {
		g, err := a.updateGroup.Handle(ctx, r.tenant, cmd, r.meta)
		return groupOutcome(g), err
	})
}

func (a *api) deleteGroupRoute(c echo.Context) error {
	return a.runWithoutBody(c, http.StatusNoContent, func(ctx context.Context, r *request) (outcome, error) {
		v, err := a.deleteGroup.Handle(ctx, r.tenant, commands.DeleteGroup{Name: c.Param("name")}, r.meta)
		return outcome{kind: events.KindGroup, version: v}, err
	})
}

func (a *api) deleteMember(c echo.Context) error {
	return a.runWithoutBody(c, http.StatusNoContent, func(ctx context.Context, r *request) (outcome, error) {
		v, err := a.removeMember.Handle(ctx, r.tenant, commands.RemoveMember{Group: c.Param("name"), Username: c.Param("username")}, r.meta)
		return outcome{kind: events.KindGroup, version: v}, err
	})
}

func (a *api) postMembers(c echo.Context) error {
	r, b, err := beginWith[changeMembersBody](a, c, http.StatusOK)
	if err != nil {
		return err
	}
	cmd := commands.ChangeMembers{Group: c.Param("name"), Remove: b.Remove}
	if cmd.Add, cmd.Expires, err = b.adds(); err != nil {
		return err
	}
	if err := cmd.Validate(); err != nil {
		return err
	}
	return a.run(r, func(ctx context.Context) (outcome, error) {
		g, err := a.changeMembers.Handle(ctx, r.tenant, cmd, r.meta)
		return groupOutcome(g), err
	})
}

func groupOutcome(g events.Group) outcome {
	return outcome{kind: events.KindGroup, key: g.Key, version: g.Version, body: objects.FromGroup(g)}
}
