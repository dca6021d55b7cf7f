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
	r, err := a.begin(c, http.StatusCreated)
	if err != nil {
		return err
	}
	var b createUserBody
	if err := httpapi.DecodeJSON(c, &b); err != nil {
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
	r, err := a.begin(c, http.StatusOK)
	if err != nil {
		return err
	}
	var b patchUserBody
	if err := httpapi.DecodeJSON(c, &b); err != nil {
		return err
	}
	cmd := commands.UpdateUser{Username: c.Param("username"), Email: b.Email.ptr(), FirstName: b.FirstName.ptr(),
		LastName: b.LastName.ptr(), Attributes: b.Attributes.ptr()}
	if b.Attributes.Null {
		empty := map[string][]string{}
		cmd.Attributes = &empty
	}
	return a.run(r, func(ctx context.Context) (outcome, error) {
		u, err := a.updateUser.Handle(ctx, r.tenant, cmd, r.meta)
		return userOutcome(u), err
	})
}

func (a *api) deactivate(c echo.Context) error { return a.setUserActive(c, false) }
func (a *api) activate(c echo.Context) error   { return a.setUserActive(c, true) }

func (a *api) setUserActive(c echo.Context, active bool) error {
	r, err := a.begin(c, http.StatusOK)
	if err != nil {
		return err
	}
	if err := noBody(r); err != nil {
		return err
	}
	return a.run(r, func(ctx context.Context) (outcome, error) {
		u, err := a.setActive.Handle(ctx, r.tenant, commands.SetUserActive{Username: c.Param("username"), Active: active}, r.meta)
		return userOutcome(u), err
	})
}

type passwordBody struct {
	Password string `json:"password"`
}

func (a *api) putPassword(c echo.Context) error {
	r, err := a.begin(c, http.StatusNoContent)
	if err != nil {
		return err
	}
	var b passwordBody
	if err := httpapi.DecodeJSON(c, &b); err != nil {
		return err
	}
	return a.run(r, func(ctx context.Context) (outcome, error) {
		u, err := a.changePassword.Handle(ctx, r.tenant, commands.ChangePassword{Username: c.Param("username"), Password: b.Password}, r.meta)
		return outcome{kind: events.KindUser, key: u.Username, version: u.Version}, err
	})
}

func (a *api) deleteUserRoute(c echo.Context) error {
	r, err := a.begin(c, http.StatusNoContent)
	if err != nil {
		return err
	}
	if err := noBody(r); err != nil {
		return err
	}
	return a.run(r, func(ctx context.Context) (outcome, error) {
		v, err := a.deleteUser.Handle(ctx, r.tenant, commands.DeleteUser{Username: c.Param("username")}, r.meta)
		return outcome{kind: events.KindUser, version: v}, err
	})
}

func userOutcome(u events.User) outcome {
	return outcome{kind: events.KindUser, key: u.Username, version: u.Version, body: objects.FromUser(u)}
}

// noBody refuses a body on routes that take none, rather than ignore it silently.
func noBody(r *request) error {
	if len(r.raw) > 0 {
		return httpapi.DecodeJSON(r.c, &struct{}{})
	}
	return nil
}
