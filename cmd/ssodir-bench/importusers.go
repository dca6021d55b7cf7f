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
		Notes: []string{"the import also reads the file, checks every line, reads the tenant and lists the tenant's users before it writes",
			"unkeyed_per_s shows what the Idempotency-Key, which makes the import resumable, costs the command API"},
	}
	for rep := range sc.Reps {
		file := filepath.Join(dir, fmt.Sprintf("users-%d.jsonl", rep))
		if err := writeImportFile(file, fmt.Sprintf("imp%d-", rep), n, now()); err != nil {
			return nil, err
		}
		var fig, base map[string]float64
		err := alternate(rep, func() error {
			before := e.cpu()
			f, err := e.runOnce(ctx, "ssodirctl", "import", "users", file, "--concurrency", fmt.Sprint(importConcurrency),
				"--command-url", api.url(), "--query-url", query.url(), "--token-file", tokenFile,
				"--system", benchSystem, "--tenant", benchTenant)
			if err != nil {
				return err
			}
			fig = map[string]float64{"per_s": float64(n) / f.took.Seconds(), "cpu_ms_per_op.ssodirctl": ms(f.cpu) / float64(n)}
			e.addCPU(fig, before, n)
			return nil
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
	return []*result{r}, nil
}

// writeImportFile writes n bench users as the JSON Lines import users reads.
func writeImportFile(path, prefix string, n int, at time.Time) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for i := range n {
		u := benchUser(prefix, i, at)
		if err := enc.Encode(map[string]any{"username": u.Username, "email": u.Email, "first_name": u.FirstName,
			"last_name": u.LastName, "attributes": u.Attributes}); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}
