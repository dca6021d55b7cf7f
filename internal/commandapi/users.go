package commandapi

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/httpapi"
	"github.com/ssodir/ssodir/internal/objects"
)

type createUserBody struct {
	Username   string              `json:"username"`
	Email      string              `json:"email"`
	FirstName  string              `json:"first_name"`
	LastName   string              `json:"last_name"`
	IsActive   *bool               `json:"is_active"`
	Attributes map[string][]string `json:"attributes"`
	Password   *string             `json:"password"`
}

func (a *api) postUser(c echo.Context) error {
	r, b, err := beginWith[createUserBody](a, c, http.StatusCreated)
	if err != nil {
		return err
	}
	cmd := commands.CreateUser{Username: b.Username, Email: b.Email, FirstName: b.FirstName, LastName: b.LastName,
		IsActive: b.IsActive, Attributes: b.Attributes, Password: b.Password}
	if err := cmd.Validate(); err != nil {
		return err
	}
	r.location = userLocation(r.tenant, cmd.Username)
	return a.run(r, func(ctx context.Context) (outcome, error) {
		u, err := a.createUser.Handle(ctx, r.tenant, cmd, r.meta)
		return userOutcome(u), err
	})
}

type patchUserBody struct {
	Email      optional[string]              `json:"email"`
	FirstName  optional[string]              `json:"first_name"`
	LastName   optional[string]              `json:"last_name"`
	Attributes optional[map[string][]string] `json:"attributes"`
}

func (a *api) patchUser(c echo.Context) error {
	r, b, err := beginWith[patchUserBody](a, c, http.StatusOK)
	if err != nil {
		return err
	}
	cmd := commands.UpdateUser{Username: c.Param("username"), Email: b.Email.ptr(), FirstName: b.FirstName.ptr(),
		LastName: b.LastName.ptr(), Attributes: attributesPatch(b.Attributes)}
	return a.run(r, func(ctx context.Context) (outcome, error) {
		u, err := a.updateUser.Handle(ctx, r.tenant, cmd, r.meta)
		return userOutcome(u), err
	})
}

func (a *api) deactivate(c echo.Context) error { return a.setUserActive(c, false) }
func (a *api) activate(c echo.Context) error   { return a.setUserActive(c, true) }

func (a *api) setUserActive(c echo.Context, active bool) error {
	return a.runWithoutBody(c, http.StatusOK, func(ctx context.Context, r *request) (outcome, error) {
		u, err := a.setActive.Handle(ctx, r.tenant, commands.SetUserActive{Username: c.Param("username"), Active: active}, r.meta)
		return userOutcome(u), err
	})
}

type passwordBody struct {
	Password string `json:"password"`
}

func (a *api) putPassword(c echo.Context) error {
	r, b, err := beginWith[passwordBody](a, c, http.StatusNoContent)
	if err != nil {
		return err
	}
	return a.run(r, func(ctx context.Context) (outcome, error) {
		u, err := a.changePassword.Handle(ctx, r.tenant, commands.ChangePassword{Username: c.Param("username"), Password: b.Password}, r.meta)
		return outcome{kind: events.KindUser, key: u.Username, version: u.Version}, err
	})
}

func (a *api) deleteUserRoute(c echo.Context) error {
	return a.runWithoutBody(c, http.StatusNoContent, func(ctx context.Context, r *request) (outcome, error) {
		v, err := a.deleteUser.Handle(ctx, r.tenant, commands.DeleteUser{Username: c.Param("username")}, r.meta)
		return outcome{kind: events.KindUser, version: v}, err
	})
}

func userOutcome(u events.User) outcome {
	return outcome{kind: events.KindUser, key: u.Username, version: u.Version, body: objects.FromUser(u)}
}

// beginWith is begin for a route whose body is a B.
func beginWith[B any](a *api, c echo.Context, status int) (*request, B, error) {
	var b B
	r, err := a.begin(c, status)
	if err != nil {
		return nil, b, err
	}
	if err := httpapi.DecodeJSON(c, &b); err != nil {
		return nil, b, err
	}
	return r, b, nil
}

// runWithoutBody runs a command on a route that takes no body: a body is refused rather
// than ignored silently (an empty JSON object passes, anything else is refused as
// DecodeJSON refuses it).
func (a *api) runWithoutBody(c echo.Context, status int, exec func(ctx context.Context, r *request) (outcome, error)) error {
	r, err := a.begin(c, status)
	if err != nil {
		return err
	}
	if len(r.raw) > 0 {
		if err := httpapi.DecodeJSON(r.c, &struct{}{}); err != nil {
			return err
		}
	}
	return a.run(r, func(ctx context.Context) (outcome, error) { return exec(ctx, r) })
}
