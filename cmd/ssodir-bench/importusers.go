package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// importUsers is how many users the import scenario brings in per repetition, by scale:
// the 10,000 at full scale.
var importUsers = map[string]int{"full": 10000, "small": 1000, "tiny": 40}

// importConcurrency is the import's --concurrency and its baseline's: where DynamoDB
// Local's writes saturate, as for the update scenario.
const importConcurrency = updateConcurrency

// benchImport measures `ssodirctl import users` end to end (the built binary: reading and
// checking the file, the tenant check, the listing of the users already there, one POST
// per user with its Idempotency-Key) against the command API's own create rate for the
// same number of users at the same concurrency.
func benchImport(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	n := importUsers[sc.Name]
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
	dir, err := os.MkdirTemp("", "ssodir-bench-import")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(benchToken), 0o600); err != nil {
		return nil, err
	}
	url := api.url() + tenantPath() + "/users"
	now := func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }
	// post creates user i; keyed, it sends an Idempotency-Key as the import does for every
	// line (the like-for-like baseline: that key costs the command API a consistent read and
	// one more conditional item in the create's transaction).
	post := func(prefix string, keyed bool) func(ctx context.Context, i int) error {
		return func(ctx context.Context, i int) error {
			var header []string
			if keyed {
				header = []string{"Idempotency-Key", fmt.Sprintf("ssodir-bench-import-%s%07d", prefix, i)}
			}
			_, _, err := b.expect(ctx, http.StatusCreated, "POST", url, createBody(benchUser(prefix, i, now())), header...)
			return err
		}
	}
	// The import reads the tenant and lists its users on the query API first: warm that
	// path too, as it is on a running installation.
	for range 5 {
		for _, p := range []string{"", "/users?limit=500"} {
			if _, _, err := b.expect(ctx, http.StatusOK, "GET", query.url()+tenantPath()+p, nil); err != nil {
				return nil, fmt.Errorf("warm-up: %w", err)
			}
		}
	}
	if _, err := closed(ctx, importConcurrency, sc.Warmup, func(ctx context.Context, w int) error {
		return post(fmt.Sprintf("warm%d-", w), w%2 == 0)(ctx, int(time.Now().UnixNano()%1e7))
	}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}

	r := &result{
		Name: fmt.Sprintf("import users n=%d c=%d", n, importConcurrency), Unit: "users/s", BaselineUnit: "commands/s",
		What: fmt.Sprintf("ssodirctl import users of a JSON Lines file of %d users, --concurrency %d, from start to exit", n, importConcurrency),
		BaselineWhat: fmt.Sprintf("POST /users of %d users of the same shape, each with its Idempotency-Key as the import sends them, "+
			"through the command API, %d clients in a closed loop (unkeyed_per_s: the same without the key)", n, importConcurrency),
		Target: atLeast("per_s", 0.8),
		Notes: []string{"the import also reads the file, checks every line, reads the tenant and lists the tenant's users before it writes; " +
			"no projector runs here, so it runs with --wait=false (it ends when its writes are accepted)",
			"unkeyed_per_s shows what the Idempotency-Key, which makes the import resumable, costs the command API"},
	}
	imp := func(file string) (map[string]float64, error) {
		before := e.cpu()
		f, err := e.runOnce(ctx, "ssodirctl", "import", "users", file, "--concurrency", fmt.Sprint(importConcurrency),
			"--command-url", api.url(), "--query-url", query.url(), "--token-file", tokenFile,
			"--system", benchSystem, "--tenant", benchTenant, "--wait=false")
		if err != nil {
			return nil, err
		}
		fig := map[string]float64{"per_s": float64(n) / f.took.Seconds(), "cpu_ms_per_op.ssodirctl": ms(f.cpu) / float64(n)}
		e.addCPU(fig, before, n)
		return fig, nil
	}
	for rep := range sc.Reps {
		file := filepath.Join(dir, fmt.Sprintf("users-%d.jsonl", rep))
		if err := writeImportFile(file, fmt.Sprintf("imp%d-", rep), n, now(), nil); err != nil {
			return nil, err
		}
		var fig, base map[string]float64
		err := alternate(rep, func() (err error) {
			fig, err = imp(file)
			return err
		}, func() error {
			before := e.cpu()
			s, err := count(ctx, importConcurrency, n, post(fmt.Sprintf("base%d-", rep), true))
			if err != nil {
				return err
			}
			base = rateFigures("per_s", s)
			e.addCPU(base, before, n)
			u, err := count(ctx, importConcurrency, n, post(fmt.Sprintf("unkeyed%d-", rep), false))
			if err != nil {
				return err
			}
			base["unkeyed_per_s"] = u.rate()
			return nil
		})
		if err != nil {
			return nil, err
		}
		r.add(fig, base)
	}
	results := []*result{r}
	// The same import with a groups column: each user in one of three groups (a
	// department, say), and each user in all three, against the import without it.
	for _, spread := range []struct {
		name   string
		groups func(i int) []string
		target *target
	}{
		{"one of 3 groups each", func(i int) []string { return []string{fmt.Sprint("Bench Group ", i%3)} }, atLeast("per_s", 0.8)},
		{"all 3 groups each", func(int) []string { return []string{"Bench Group 0", "Bench Group 1", "Bench Group 2"} }, nil},
	} {
		g := &result{
			Name: fmt.Sprintf("import users n=%d c=%d, %s", n, importConcurrency, spread.name), Unit: "users/s", BaselineUnit: "users/s",
			What: fmt.Sprintf("ssodirctl import users of %d users with a groups column (%s), --concurrency %d, from start to exit",
				n, spread.name, importConcurrency),
			BaselineWhat: "the same import of the same number of users without the groups column",
			Target:       spread.target,
			Notes: []string{"the memberships go as POST /groups/{name}/members of up to 1,000 users, one in flight per group, " +
				"while the users are created; no projector runs here, so both imports run with --wait=false and end when their writes are accepted"},
		}
		for rep := range sc.Reps {
			with := filepath.Join(dir, fmt.Sprintf("grouped-%d-%d.jsonl", len(results), rep))
			without := filepath.Join(dir, fmt.Sprintf("ungrouped-%d-%d.jsonl", len(results), rep))
			if err := writeImportFile(with, fmt.Sprintf("grp%d-%d-", len(results), rep), n, now(), spread.groups); err != nil {
				return nil, err
			}
			if err := writeImportFile(without, fmt.Sprintf("ngr%d-%d-", len(results), rep), n, now(), nil); err != nil {
				return nil, err
			}
			var fig, base map[string]float64
			err := alternate(rep, func() (err error) {
				fig, err = imp(with)
				return err
			}, func() (err error) {
				base, err = imp(without)
				return err
			})
			if err != nil {
				return nil, err
			}
			g.add(fig, base)
		}
		results = append(results, g)
	}
	return results, nil
}

// writeImportFile writes n bench users as the JSON Lines import users reads; groups, if
// not nil, names user i's groups.
func writeImportFile(path, prefix string, n int, at time.Time, groups func(i int) []string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for i := range n {
		u := benchUser(prefix, i, at)
		line := map[string]any{"username": u.Username, "email": u.Email, "first_name": u.FirstName,
			"last_name": u.LastName, "attributes": u.Attributes}
		if groups != nil {
			line["groups"] = groups(i)
		}
		if err := enc.Encode(line); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
