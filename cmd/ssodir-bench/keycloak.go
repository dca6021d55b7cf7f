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
	users, es, err := seedDirectory(ctx, e, sc.KeycloakUsers, sc.KeycloakGroups)
	if err != nil {
		return nil, err
	}
	// A reconcile re-checks each action against the write model before it applies it.
	if err := seedWriteModel(ctx, e.db, e.commandsTable(), es); err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2 * keycloakWorkers
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	var filled string // the realm the last reconcile filled, which the tenant points at
	reconcile := func() (map[string]float64, error) {
		name, err := newRealm("sync")
		if err != nil {
			return nil, err
		}
		filled = name
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
	steady, err := benchSteadyReconciles(ctx, e, kc, hc, sc, users, func() string { return filled })
	if err != nil {
		return nil, err
	}
	return append([]*result{r}, steady...), nil
}

// benchSteadyReconciles measures what a reconcile costs once a realm is in step: one of an
// unchanged realm (GETs only, page by page), and one after 1 % of its users drifted
// (exactly one write per change). The baseline is the same pages read straight through
// net/http, the least any reconcile must read.
func benchSteadyReconciles(ctx context.Context, e *env, kc *keycloaktest.Server, hc *http.Client, sc scale,
	users []events.User, realm func() string) ([]*result, error) {
	drifted := max(1, len(users)/100)
	run := func(changes int) (map[string]float64, error) {
		name := realm()
		for i := range changes {
			u, ok := kc.UserByUsername(name, users[(i*len(users))/changes].Username)
			if !ok {
				return nil, fmt.Errorf("drift: %s is not in realm %s", users[i].Username, name)
			}
			if err := kc.UpdateUser(name, u.ID, func(u *keycloaktest.User) { u.FirstName += " (edited in Keycloak)" }); err != nil {
				return nil, err
			}
		}
		kc.ResetRequests()
		before := e.cpu()
		r, err := e.runOnce(ctx, "keycloak-sync", "reconcile", "--system", benchSystem, "--tenant", benchTenant)
		if err != nil {
			return nil, err
		}
		gets := kc.CountRequests(http.MethodGet, keycloaktest.AdminPath(name, ""))
		writes := len(kc.AdminRequests()) - gets
		if writes != changes {
			return nil, fmt.Errorf("reconcile of %d changes made %d writes", changes, writes)
		}
		fig := map[string]float64{"per_s": float64(len(users)) / r.took.Seconds(), "wall_s": r.took.Seconds(),
			"gets": float64(gets), "writes": float64(writes), "changes": float64(changes)}
		e.addCPU(fig, before, len(users))
		return fig, nil
	}
	raw := func() (map[string]float64, error) {
		start := time.Now()
		gets, err := rawReadRealm(ctx, hc, kc.URL(), realm())
		if err != nil {
			return nil, err
		}
		took := time.Since(start)
		return map[string]float64{"per_s": float64(len(users)) / took.Seconds(), "wall_s": took.Seconds(), "gets": float64(gets)}, nil
	}
	var out []*result
	for _, changes := range []int{0, drifted} {
		r := &result{Unit: "users/s", BaselineUnit: "users/s",
			BaselineWhat: "the same pages (users, groups, members of each group; 500 a page) read straight through net/http, one after another",
			Notes: []string{"gets and writes are the Admin API requests the reconcile made; a run whose writes differ from its changes fails the bench",
				"the reconcile's wall time includes process start and reading the read model"}}
		if changes == 0 {
			r.Name = fmt.Sprintf("keycloak reconcile of an unchanged %s-user realm", quantity(len(users)))
			r.What = "keycloak-sync reconcile (the binary, start to exit) of a realm already in step: GETs only, page by page"
		} else {
			r.Name = fmt.Sprintf("keycloak reconcile of a %s-user realm with 1%% drift", quantity(len(users)))
			r.What = fmt.Sprintf("keycloak-sync reconcile after %d users' first names were edited in Keycloak: one PUT per change, nothing more", changes)
		}
		for rep := range sc.Reps {
			var fig, base map[string]float64
			err := alternate(rep, func() (err error) {
				fig, err = run(changes)
				return err
			}, func() (err error) {
				base, err = raw()
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("%s: %w", r.Name, err)
			}
			r.add(fig, base)
		}
		out = append(out, r)
	}
	return out, nil
}

// rawReadRealm reads every page a reconcile reads, and returns how many requests it made.
func rawReadRealm(ctx context.Context, hc *http.Client, base, realm string) (int, error) {
	token, err := fetchToken(ctx, hc, base, realm)
	if err != nil {
		return 0, err
	}
	gets := 0
	page := func(path string, out any) (int, error) {
		gets++
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+keycloaktest.AdminPath(realm, path), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var items []json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&items); err != nil {
			return 0, fmt.Errorf("GET %s: %d: %w", path, resp.StatusCode, err)
		}
		if out != nil {
			for _, it := range items {
				var g struct{ ID string }
				if err := json.Unmarshal(it, &g); err != nil {
					return 0, err
				}
				*out.(*[]string) = append(*out.(*[]string), g.ID)
			}
		}
		return len(items), nil
	}
	const size = 500
	var groups []string
	for first := 0; ; first += size {
		n, err := page(fmt.Sprintf("/groups?briefRepresentation=false&first=%d&max=%d", first, size), &groups)
		if err != nil || n < size {
			if err != nil {
				return 0, err
			}
			break
		}
	}
	for first := 0; ; first += size {
		n, err := page(fmt.Sprintf("/users?briefRepresentation=false&first=%d&max=%d", first, size), nil)
		if err != nil {
			return 0, err
		}
		if n < size {
			break
		}
	}
	for _, g := range groups {
		for first := 0; ; first += size {
			n, err := page(fmt.Sprintf("/groups/%s/members?first=%d&max=%d", g, first, size), nil)
			if err != nil {
				return 0, err
			}
			if n < size {
				break
			}
		}
	}
	return gets, nil
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
