package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/keycloak"
	"github.com/ssodir/ssodir/internal/keycloak/keycloaktest"
)

// keycloakWorkers is the Keycloak client's concurrency (its default), for the reconcile and
// the raw creates alike.
const keycloakWorkers = 4

func benchKeycloak(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	kc, stop, err := startDouble()
	if err != nil {
		return nil, err
	}
	defer stop()
	e, api, err := apiEnv(ctx, b, sc, false)
	if err != nil {
		return nil, err
	}
	defer e.close()
	realm := 0
	// newRealm makes an empty realm on the double and points the tenant's Keycloak
	// settings at it.
	newRealm := func(prefix string) (string, error) {
		realm++
		name := fmt.Sprintf("%s%d", prefix, realm)
		kc.AddRealm(name, "ssodir", "bench-secret")
		settings, _ := json.Marshal(map[string]string{"url": kc.URL(), "realm": name, "client_id": "ssodir", "client_secret": "bench-secret"})
		if realm == 1 {
			body, _ := json.Marshal(map[string]any{"tenant_id": benchTenant, "keycloak": json.RawMessage(settings)})
			_, _, err := b.expect(ctx, http.StatusCreated, "POST", api.url()+"/v1/systems/"+benchSystem+"/tenants", body)
			return name, err
		}
		_, _, err := b.expect(ctx, http.StatusOK, "PUT", api.url()+tenantPath()+"/keycloak", settings)
		return name, err
	}
	if _, err := newRealm("warm"); err != nil {
		return nil, err
	}
	users, err := seedReadModel(ctx, e, sc.KeycloakUsers, sc.KeycloakGroups)
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2 * keycloakWorkers
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	reconcile := func() (map[string]float64, error) {
		name, err := newRealm("sync")
		if err != nil {
			return nil, err
		}
		before := e.cpu()
		run, err := e.runOnce(ctx, "keycloak-sync", "reconcile", "--system", benchSystem, "--tenant", benchTenant)
		if err != nil {
			return nil, err
		}
		if got := len(kc.Users(name)); got != len(users) {
			return nil, fmt.Errorf("reconcile: %d users in the realm, want %d", got, len(users))
		}
		// The plan is printed once it is made, before it is applied.
		fig := map[string]float64{"per_s": float64(len(users)) / run.took.Seconds(), "wall_s": run.took.Seconds(),
			"plan_s": run.firstOutput.Seconds(), "cpu_ms_per_op.keycloak-sync": ms(run.cpu) / float64(len(users))}
		e.addCPU(fig, before, len(users))
		return fig, nil
	}
	direct := func() (map[string]float64, error) {
		realm++
		name := fmt.Sprintf("raw%d", realm)
		kc.AddRealm(name, "ssodir", "bench-secret")
		groupPaths := map[string]string{}
		for i := range sc.KeycloakGroups {
			g := groupName(i)
			if _, err := kc.CreateGroup(name, keycloaktest.Group{Name: g, Description: "bench group"}); err != nil {
				return nil, err
			}
			groupPaths[g] = "/" + g
		}
		token, err := fetchToken(ctx, hc, kc.URL(), name)
		if err != nil {
			return nil, err
		}
		before := e.cpu()
		s, err := count(ctx, keycloakWorkers, len(users), func(ctx context.Context, i int) error {
			u := users[i]
			return rawCreate(ctx, hc, kc.URL()+keycloaktest.AdminPath(name, "/users"), token, u,
				[]string{groupPaths[groupName(i%sc.KeycloakGroups)], groupPaths[groupName((i+1)%sc.KeycloakGroups)]})
		})
		if err != nil {
			return nil, err
		}
		base := map[string]float64{"per_s": s.rate(), "wall_s": s.elapsed.Seconds()}
		e.addCPU(base, before, len(users))
		return base, nil
	}
	if _, err := reconcile(); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if _, err := direct(); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	r := &result{
		Name: fmt.Sprintf("keycloak reconcile %s users", quantity(len(users))), Unit: "users/s", BaselineUnit: "users/s",
		What: fmt.Sprintf("keycloak-sync reconcile (the binary, start to exit) of a read model of %d users in %d groups (two each) into an empty realm of the in-process Keycloak double",
			len(users), sc.KeycloakGroups),
		BaselineWhat: fmt.Sprintf("the same user creates (same representation, groups included) POSTed through net/http to the double, %d workers (the client's default)", keycloakWorkers),
		Notes: []string{"the reconcile's wall time includes process start, reading the read model and both sides, and creating the groups",
			"plan_s: from start until the plan is printed (read and planned); the rest is Apply"},
	}
	for rep := range sc.Reps {
		var fig, base map[string]float64
		err := alternate(rep, func() (err error) {
			fig, err = reconcile()
			return err
		}, func() (err error) {
			base, err = direct()
			return err
		})
		if err != nil {
			return nil, err
		}
		r.add(fig, base)
	}
	return []*result{r}, nil
}

// doubleHost lets the bench start keycloaktest's double outside a test: its constructor
// takes a testing.TB and calls only Helper, Fatalf and Cleanup, which are implemented here
// (any other method would panic on the nil embedded interface).
type doubleHost struct {
	testing.TB
	cleanups []func()
}

func (h *doubleHost) Helper() {}

func (h *doubleHost) Fatalf(format string, args ...any) { panic(fmt.Errorf(format, args...)) }

func (h *doubleHost) Cleanup(f func()) { h.cleanups = append(h.cleanups, f) }

func startDouble() (srv *keycloaktest.Server, stop func(), err error) {
	h := &doubleHost{}
	stop = func() {
		for i := len(h.cleanups) - 1; i >= 0; i-- {
			h.cleanups[i]()
		}
	}
	defer func() {
		if p := recover(); p != nil {
			stop()
			err = fmt.Errorf("start the Keycloak double: %v", p)
		}
	}()
	return keycloaktest.NewServer(h, keycloaktest.Config{TokenLifetime: time.Hour}), stop, nil
}

func fetchToken(ctx context.Context, hc *http.Client, base, realm string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {"ssodir"}, "client_secret": {"bench-secret"}}
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/realms/"+realm+"/protocol/openid-connect/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil || tok.AccessToken == "" {
		return "", fmt.Errorf("token: status %d, %v", resp.StatusCode, err)
	}
	return tok.AccessToken, nil
}

// rawCreate POSTs the user representation the Keycloak client sends for a create.
func rawCreate(ctx context.Context, hc *http.Client, usersURL, token string, u events.User, groups []string) error {
	attrs := map[string][]string{keycloak.AttrSsodirID: {u.ID}}
	for k, v := range u.Attributes {
		attrs[k] = v
	}
	body, _ := json.Marshal(map[string]any{"username": u.Username, "email": u.Email, "firstName": u.FirstName, "lastName": u.LastName,
		"enabled": u.IsActive, "emailVerified": false, "attributes": attrs, "groups": groups})
	req, _ := http.NewRequestWithContext(ctx, "POST", usersURL, strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("raw create %s: %d", u.Username, resp.StatusCode)
	}
	return nil
}
