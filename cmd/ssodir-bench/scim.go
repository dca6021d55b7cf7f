package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/ssodir/ssodir/internal/events"
)

// scimUsers and scimGroups are the directory an identity provider syncs, by scale: the
// issue's 10,000 users and 100 groups at full scale; every user is in one group.
var (
	scimUsers  = map[string]int{"full": 10000, "small": 1000, "tiny": 40}
	scimGroups = map[string]int{"full": 100, "small": 10, "tiny": 4}
)

// scimBatch is how many members one membership request adds (a SCIM PATCH, a REST
// POST /groups/{name}/members): one members change each.
const scimBatch = 50

// benchSCIM measures an identity provider's full sync through SCIM against the same sync
// through the REST API, then what a full GET /Users walk costs (benchSCIMWalk). The sync: for every user a lookup by userName (the provider's match) and a
// create; for every group a lookup by name, a create, and its members. Both run with the
// same concurrency, on one tenant, in turns.
func benchSCIM(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	out, err := benchSCIMSync(ctx, b, sc)
	if err != nil {
		return nil, err
	}
	walk, err := benchSCIMWalk(ctx, b, sc)
	if err != nil {
		return nil, err
	}
	return append(out, walk), nil
}

// benchSCIMSync is the full sync of benchSCIM.
func benchSCIMSync(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	n, g := scimUsers[sc.Name], scimGroups[sc.Name]
	e, api, err := apiEnv(ctx, b, sc, true)
	if err != nil {
		return nil, err
	}
	defer e.close()
	query, err := e.start(ctx, "query-api")
	if err != nil {
		return nil, err
	}
	if err := prime(ctx, e.db, e.commandsTable()); err != nil {
		return nil, err
	}
	_, body, err := b.expect(ctx, http.StatusCreated, "POST", api.url()+tenantPath()+"/scim-tokens", []byte(`{"name":"bench"}`))
	if err != nil {
		return nil, err
	}
	var tok struct{ Token string }
	if err := json.Unmarshal(body, &tok); err != nil {
		return nil, err
	}
	s := &scimSync{b: b, scim: api.url() + "/scim/v2/" + benchSystem + "/" + benchTenant, token: tok.Token,
		command: api.url() + tenantPath(), query: query.url() + tenantPath(), conc: updateConcurrency}
	now := time.Now().UTC().Truncate(time.Millisecond)
	for i := range 3 {
		if err := s.viaSCIM(ctx, fmt.Sprintf("warms%d-", i), 2*updateConcurrency, 2, now); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
		if err := s.viaREST(ctx, fmt.Sprintf("warmr%d-", i), 2*updateConcurrency, 2, now); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	r := &result{
		Name: fmt.Sprintf("scim sync users=%d groups=%d c=%d", n, g, s.conc), Unit: "users/s", BaselineUnit: "users/s",
		What: fmt.Sprintf("a provider's full sync through SCIM with a SCIM token: per user GET /Users?filter=userName eq then POST /Users; "+
			"per group GET /Groups?filter=displayName eq, POST /Groups, PATCH add members (%d a request); %d clients", scimBatch, s.conc),
		BaselineWhat: fmt.Sprintf("the same sync through the REST API with the bootstrap token, storing the same fields and attributes: "+
			"per user GET /users/{username} (query API) then POST /users; per group GET /groups/{name}, POST /groups, "+
			"POST /groups/{name}/members (%d a request); %d clients", scimBatch, s.conc),
		Target: atLeast("per_s", 0.8),
		Notes: []string{"per_s is the users synced per second over the whole sync (users, then groups with their members)",
			"SCIM adds per request the SCIM token's check (a consistent GetItem) and, per membership PATCH, the lookup of the members' ids (one BatchGetItem)"},
	}
	for rep := range sc.Reps {
		var fig, base map[string]float64
		err := alternate(rep, func() error {
			before := e.cpu()
			start := time.Now()
			if err := s.viaSCIM(ctx, fmt.Sprintf("s%d-", rep), n, g, now); err != nil {
				return err
			}
			fig = map[string]float64{"per_s": float64(n) / time.Since(start).Seconds(), "users_s": s.usersTook.Seconds(), "groups_s": s.groupsTook.Seconds()}
			e.addCPU(fig, before, n)
			return nil
		}, func() error {
			before := e.cpu()
			start := time.Now()
			if err := s.viaREST(ctx, fmt.Sprintf("r%d-", rep), n, g, now); err != nil {
				return err
			}
			base = map[string]float64{"per_s": float64(n) / time.Since(start).Seconds(), "users_s": s.usersTook.Seconds(), "groups_s": s.groupsTook.Seconds()}
			e.addCPU(base, before, n)
			return nil
		})
		if err != nil {
			return nil, err
		}
		r.add(fig, base)
	}
	return []*result{r}, nil
}

type scimSync struct {
	b                     *bench
	scim, token           string
	command, query        string
	conc                  int
	usersTook, groupsTook time.Duration
}

func (s *scimSync) scimCall(ctx context.Context, want int, method, path string, body any) ([]byte, error) {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	_, out, err := s.b.expect(ctx, want, method, s.scim+path, raw, "Authorization", "Bearer "+s.token, "Content-Type", "application/scim+json")
	return out, err
}

func syncGroupName(prefix string, j int) string { return fmt.Sprintf("%sgroup-%03d", prefix, j) }

// viaSCIM syncs n users and g groups through SCIM, as Okta and Entra do.
func (s *scimSync) viaSCIM(ctx context.Context, prefix string, n, g int, at time.Time) error {
	ids := make([]string, n)
	start := time.Now()
	_, err := count(ctx, s.conc, n, func(ctx context.Context, i int) error {
		u := benchUser(prefix, i, at)
		filter := url.QueryEscape(`userName eq "` + u.Username + `"`)
		if _, err := s.scimCall(ctx, http.StatusOK, "GET", "/Users?filter="+filter+"&startIndex=1&count=100", nil); err != nil {
			return err
		}
		out, err := s.scimCall(ctx, http.StatusCreated, "POST", "/Users", scimUser(u))
		if err != nil {
			return err
		}
		var created struct{ ID string }
		if err := json.Unmarshal(out, &created); err != nil {
			return err
		}
		ids[i] = created.ID
		return nil
	})
	if err != nil {
		return err
	}
	s.usersTook = time.Since(start)
	start = time.Now()
	_, err = count(ctx, s.conc, g, func(ctx context.Context, j int) error {
		name := syncGroupName(prefix, j)
		if _, err := s.scimCall(ctx, http.StatusOK, "GET", "/Groups?filter="+url.QueryEscape(`displayName eq "`+name+`"`)+"&excludedAttributes=members", nil); err != nil {
			return err
		}
		out, err := s.scimCall(ctx, http.StatusCreated, "POST", "/Groups", map[string]any{
			"schemas": []string{"urn:ietf:params:scim:schemas:core:2.0:Group"}, "displayName": name, "externalId": "ext-" + name, "members": []any{}})
		if err != nil {
			return err
		}
		var created struct{ ID string }
		if err := json.Unmarshal(out, &created); err != nil {
			return err
		}
		var batch []any
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			_, err := s.scimCall(ctx, http.StatusNoContent, "PATCH", "/Groups/"+created.ID, map[string]any{
				"schemas":    []string{"urn:ietf:params:scim:api:messages:2.0:PatchOp"},
				"Operations": []any{map[string]any{"op": "add", "path": "members", "value": batch}}})
			batch = nil
			return err
		}
		for i := j; i < n; i += g {
			batch = append(batch, map[string]any{"value": ids[i]})
			if len(batch) == scimBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return flush()
	})
	s.groupsTook = time.Since(start)
	return err
}

// viaREST syncs the same through the REST API.
func (s *scimSync) viaREST(ctx context.Context, prefix string, n, g int, at time.Time) error {
	start := time.Now()
	_, err := count(ctx, s.conc, n, func(ctx context.Context, i int) error {
		u := benchUser(prefix, i, at)
		if _, _, err := s.b.expect(ctx, http.StatusNotFound, "GET", s.query+"/users/"+url.PathEscape(u.Username), nil); err != nil {
			return err
		}
		_, _, err := s.b.expect(ctx, http.StatusCreated, "POST", s.command+"/users", restUser(u))
		return err
	})
	if err != nil {
		return err
	}
	s.usersTook = time.Since(start)
	start = time.Now()
	_, err = count(ctx, s.conc, g, func(ctx context.Context, j int) error {
		name := syncGroupName(prefix, j)
		if _, _, err := s.b.expect(ctx, http.StatusNotFound, "GET", s.query+"/groups/"+url.PathEscape(name), nil); err != nil {
			return err
		}
		body, _ := json.Marshal(map[string]any{"name": name, "attributes": map[string][]string{"scim.externalId": {"ext-" + name}}})
		if _, _, err := s.b.expect(ctx, http.StatusCreated, "POST", s.command+"/groups", body); err != nil {
			return err
		}
		var batch []string
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			body, _ := json.Marshal(map[string]any{"add": batch})
			_, _, err := s.b.expect(ctx, http.StatusOK, "POST", s.command+"/groups/"+url.PathEscape(name)+"/members", body)
			batch = nil
			return err
		}
		for i := j; i < n; i += g {
			batch = append(batch, benchUser(prefix, i, at).Username)
			if len(batch) == scimBatch {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		return flush()
	})
	s.groupsTook = time.Since(start)
	return err
}

// restUser is the body of POST /users that creates what scimUser creates: the same fields
// and the attributes SCIM's mapping keeps (README.md, "SCIM"), the external id among them.
func restUser(u events.User) []byte {
	b, _ := json.Marshal(map[string]any{"username": u.Username, "email": u.Email, "first_name": u.FirstName,
		"last_name": u.LastName, "attributes": map[string][]string{"scim.externalId": {"ext-" + u.Username},
			"scim.enterprise.department": u.Attributes["dept"], "scim.enterprise.costCenter": u.Attributes["cost_center"]}})
	return b
}

// scimUser is a bench user as a provider creates it.
func scimUser(u events.User) map[string]any {
	return map[string]any{
		"schemas": []string{"urn:ietf:params:scim:schemas:core:2.0:User"}, "userName": u.Username, "externalId": "ext-" + u.Username,
		"name":   map[string]any{"givenName": u.FirstName, "familyName": u.LastName},
		"emails": []any{map[string]any{"value": u.Email, "type": "work", "primary": true}}, "active": true,
		"urn:ietf:params:scim:schemas:extension:enterprise:2.0:User": map[string]any{"department": u.Attributes["dept"][0],
			"costCenter": u.Attributes["cost_center"][0]},
	}
}
