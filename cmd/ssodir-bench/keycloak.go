package main

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

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
	dir := newMemDirectory(sc)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 2 * keycloakWorkers
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	realm := 0
	reconcile := func(d *memDirectory) (map[string]float64, error) {
		realm++
		name := fmt.Sprintf("sync%d", realm)
		kc.AddRealm(name, "ssodir", "bench-secret")
		c := keycloak.New(keycloak.ClientConfig{BaseURL: kc.URL(), Realm: name, ClientID: "ssodir", ClientSecret: "bench-secret",
			Concurrency: keycloakWorkers}, hc)
		t := time.Now()
		plan, err := keycloak.NewPlan(ctx, d, c, keycloak.PlanOptions{})
		if err != nil {
			return nil, err
		}
		planned := time.Since(t)
		res, err := keycloak.Apply(ctx, plan, c, nil)
		if err != nil {
			return nil, err
		}
		wall := time.Since(t)
		if got := len(kc.Users(name)); res.Failed > 0 || got != len(d.users) {
			return nil, fmt.Errorf("reconcile: %d users in the realm, want %d (%d actions failed)", got, len(d.users), res.Failed)
		}
		return map[string]float64{"per_s": float64(len(d.users)) / wall.Seconds(), "wall_s": wall.Seconds(), "plan_s": planned.Seconds()}, nil
	}
	direct := func(d *memDirectory) (map[string]float64, error) {
		realm++
		name := fmt.Sprintf("raw%d", realm)
		kc.AddRealm(name, "ssodir", "bench-secret")
		for _, g := range d.groups {
			if _, err := kc.CreateGroup(name, keycloaktest.Group{Name: g.Name, Description: g.Description}); err != nil {
				return nil, err
			}
		}
		token, err := fetchToken(ctx, hc, kc.URL(), name)
		if err != nil {
			return nil, err
		}
		s, err := count(ctx, keycloakWorkers, len(d.users), func(ctx context.Context, i int) error {
			return rawCreate(ctx, hc, kc.URL()+keycloaktest.AdminPath(name, "/users"), token, d.users[i], d.groupNames)
		})
		if err != nil {
			return nil, err
		}
		return map[string]float64{"per_s": s.rate(), "wall_s": s.elapsed.Seconds()}, nil
	}
	warm := dir.first(max(len(dir.users)/10, 10))
	if _, err := reconcile(warm); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if _, err := direct(warm); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	r := &result{
		Name: fmt.Sprintf("keycloak reconcile %d users", len(dir.users)), Unit: "users/s", BaselineUnit: "users/s",
		What: fmt.Sprintf("keycloak.NewPlan + Apply of a directory of %d users in %d groups into an empty realm of the in-process double, %d workers",
			len(dir.users), len(dir.groups), keycloakWorkers),
		BaselineWhat: fmt.Sprintf("the same user creates (same bodies, groups included) POSTed through net/http to the double, %d workers", keycloakWorkers),
		Notes:        []string{"the directory is generated in memory (no read-model Directory exists yet); wall time includes reading both sides"},
	}
	for rep := range sc.Reps {
		var fig, base map[string]float64
		err := alternate(rep, func() (err error) {
			fig, err = reconcile(dir)
			return err
		}, func() (err error) {
			base, err = direct(dir)
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
func rawCreate(ctx context.Context, hc *http.Client, usersURL, token string, u keycloak.DirectoryUser, groupNames map[string]string) error {
	attrs := map[string][]string{keycloak.AttrSsodirID: {u.ID}}
	for k, v := range u.Attributes {
		attrs[k] = v
	}
	var groups []string
	for _, g := range u.Groups {
		groups = append(groups, "/"+groupNames[g])
	}
	body, _ := json.Marshal(map[string]any{"username": u.Username, "email": u.Email, "firstName": u.FirstName, "lastName": u.LastName,
		"enabled": u.Active, "emailVerified": false, "attributes": attrs, "groups": groups})
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

// memDirectory is a keycloak.Directory of generated users and groups.
type memDirectory struct {
	users      []keycloak.DirectoryUser
	groups     []keycloak.DirectoryGroup
	groupNames map[string]string
}

func newMemDirectory(sc scale) *memDirectory {
	d := &memDirectory{groupNames: map[string]string{}}
	for i := range sc.KeycloakGroups {
		g := keycloak.DirectoryGroup{ID: uuid.NewString(), Name: fmt.Sprintf("group-%03d", i), Description: "bench group"}
		d.groups = append(d.groups, g)
		d.groupNames[g.ID] = g.Name
	}
	for i := range sc.KeycloakUsers {
		u := benchUser("kc", i, time.Now())
		d.users = append(d.users, keycloak.DirectoryUser{ID: u.ID, Username: u.Username, Email: u.Email, FirstName: u.FirstName,
			LastName: u.LastName, Active: true, Attributes: u.Attributes, Groups: []string{d.groups[i%len(d.groups)].ID}})
	}
	return d
}

// first is a directory of the first n users (with every group).
func (d *memDirectory) first(n int) *memDirectory {
	return &memDirectory{users: d.users[:min(n, len(d.users))], groups: d.groups, groupNames: d.groupNames}
}

func (d *memDirectory) Users(context.Context) iter.Seq2[keycloak.DirectoryUser, error] {
	return func(yield func(keycloak.DirectoryUser, error) bool) {
		for _, u := range d.users {
			if !yield(u, nil) {
				return
			}
		}
	}
}

func (d *memDirectory) Groups(context.Context) iter.Seq2[keycloak.DirectoryGroup, error] {
	return func(yield func(keycloak.DirectoryGroup, error) bool) {
		for _, g := range d.groups {
			if !yield(g, nil) {
				return
			}
		}
	}
}
