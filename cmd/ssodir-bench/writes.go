package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
)

// updateConcurrency is the update scenario's concurrency: where DynamoDB Local's writes
// saturate (DYNAMODB-LOCAL.md).
const updateConcurrency = 8

// prime writes a first item into every stream table of a scenario, so that no table's
// first stream record follows many records of another (DYNAMODB-LOCAL.md, trap 1). The
// projector and a replay ignore it: it is neither a history record nor a state item.
func prime(ctx context.Context, db *dynamodb.Client, tables ...string) error {
	for _, t := range tables {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(t),
			Item: item{"id": s("bench#prime"), "sk": s("prime")}}); err != nil {
			return fmt.Errorf("prime %s: %w", t, err)
		}
	}
	return nil
}

// writeEnv starts the command API with the bench tenant and a raw command table of the same
// spec beside it, both primed.
func writeEnv(ctx context.Context, b *bench, sc scale) (*env, *service, string, error) {
	e, api, err := apiEnv(ctx, b, sc, true)
	if err != nil {
		return nil, nil, "", err
	}
	raw := e.prefix + "_raw_user_commands"
	err = dynamo.EnsureTable(ctx, e.db, dynamo.CommandsTable(raw))
	if err == nil {
		err = prime(ctx, e.db, e.commandsTable(), raw)
	}
	if err != nil {
		e.close()
		return nil, nil, "", err
	}
	return e, api, raw, nil
}

// apiEnv is a scenario's environment with the command API running and, with provision,
// the bench tenant provisioned through it. On error it closes the environment itself.
func apiEnv(ctx context.Context, b *bench, sc scale, provision bool) (*env, *service, error) {
	e, err := b.newEnv(ctx, sc.FreshDB)
	if err != nil {
		return nil, nil, err
	}
	// The scenarios provision through it and want 201: DynamoDB Local makes tables at
	// once, but a loaded machine may take longer than the default 5 s wait.
	api, err := e.start(ctx, "command-api", "SSO_PROVISION_WAIT=1m")
	if err == nil && provision {
		err = e.provision(ctx, api)
	}
	if err != nil {
		e.close()
		return nil, nil, err
	}
	return e, api, nil
}

// alternate runs a and b, in turns starting with a on even repetitions, so that drift in
// DynamoDB Local (its tables grow) does not favour either side.
func alternate(rep int, a, b func() error) error {
	if rep%2 == 1 {
		a, b = b, a
	}
	if err := a(); err != nil {
		return err
	}
	return b()
}

// pair measures the service and its baseline once each, in turns (see alternate).
func (e *env) pair(ctx context.Context, rep, conc int, d time.Duration, service, direct op) (fig, base map[string]float64, err error) {
	err = alternate(rep, func() (err error) {
		fig, err = e.window(ctx, conc, d, service)
		return err
	}, func() (err error) {
		base, err = e.window(ctx, conc, d, direct)
		return err
	})
	return fig, base, err
}

func benchCreate(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	e, api, raw, err := writeEnv(ctx, b, sc)
	if err != nil {
		return nil, err
	}
	defer e.close()
	url := api.url() + tenantPath() + "/users"
	var svcSeq, rawSeq atomic.Int64
	now := func() time.Time { return time.Now().UTC().Truncate(time.Millisecond) }
	service := func(ctx context.Context, _ int) error {
		u := benchUser("svc", int(svcSeq.Add(1)), now())
		_, _, err := b.expect(ctx, http.StatusCreated, "POST", url, createBody(u))
		return err
	}
	direct := func(ctx context.Context, _ int) error {
		_, err := e.db.TransactWriteItems(ctx, createTransaction(raw, benchUser("raw", int(rawSeq.Add(1)), now())))
		return err
	}
	for _, f := range []op{service, direct} {
		if _, err := closed(ctx, 8, sc.Warmup, f); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	var results []*result
	for _, c := range sc.CreateConcurrency {
		r := &result{
			Name: fmt.Sprintf("create users c=%d", c), Unit: "commands/s", BaselineUnit: "transactions/s",
			What:         fmt.Sprintf("POST /users through the command API, %d clients in a closed loop", c),
			BaselineWhat: "TransactWriteItems of the same 5 items (config, history record, email guard, id lookup, count of live users), same conditions, same concurrency",
			Target:       atLeast("per_s", 0.92),
			Notes:        []string{"a create is the same single transaction as the baseline's: the command API reads the user's config only when the transaction's condition says the name was used before"},
		}
		for rep := range sc.Reps {
			fig, base, err := e.pair(ctx, rep, c, sc.Window, service, direct)
			if err != nil {
				return nil, err
			}
			r.add(fig, base)
		}
		results = append(results, r)
	}
	return results, nil
}

func benchUpdate(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	e, api, raw, err := writeEnv(ctx, b, sc)
	if err != nil {
		return nil, err
	}
	defer e.close()
	at := time.Now().UTC().Truncate(time.Millisecond)
	// Each worker owns the users i ≡ w (mod concurrency), so no two updates race.
	var svcUsers, rawUsers []events.User
	for i := range max(updateConcurrency, sc.UpdateUsers/updateConcurrency*updateConcurrency) {
		svcUsers = append(svcUsers, benchUser("svc", i, at))
		rawUsers = append(rawUsers, benchUser("raw", i, at))
	}
	if err := seedUsers(ctx, e.db, e.commandsTable(), svcUsers); err != nil {
		return nil, err
	}
	if err := seedUsers(ctx, e.db, raw, rawUsers); err != nil {
		return nil, err
	}
	var svcTurn, rawTurn [updateConcurrency]int
	next := func(users []events.User, turns *[updateConcurrency]int, w int) *events.User {
		i := w + updateConcurrency*(turns[w]%(len(users)/updateConcurrency))
		turns[w]++
		return &users[i]
	}
	base := api.url() + tenantPath() + "/users/"
	service := func(ctx context.Context, w int) error {
		u := next(svcUsers, &svcTurn, w)
		nu, _ := renamed(*u, time.Now())
		body, _ := json.Marshal(map[string]string{"first_name": nu.FirstName})
		h, _, err := b.expect(ctx, http.StatusOK, "PATCH", base+u.Username, body, "If-Match", strconv.Quote(fmt.Sprint(u.Version)))
		if err != nil {
			return err
		}
		if nu.Version, err = strconv.ParseInt(trimQuotes(h.Get("ETag")), 10, 64); err != nil {
			return fmt.Errorf("ETag %q: %w", h.Get("ETag"), err)
		}
		*u = nu
		return nil
	}
	direct := func(ctx context.Context, w int) error {
		u := next(rawUsers, &rawTurn, w)
		out, err := e.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(raw), ConsistentRead: aws.Bool(true),
			Key: item{"id": s(dynamo.UserID(u.Username)), "sk": s(dynamo.SKConfig)}})
		if err != nil {
			return err
		}
		if v := out.Item["version"]; v == nil {
			return fmt.Errorf("raw user %s has no config", u.Username)
		}
		nu, ev := renamed(*u, time.Now().UTC().Truncate(time.Millisecond))
		if _, err := e.db.TransactWriteItems(ctx, updateTransaction(raw, nu, ev)); err != nil {
			return err
		}
		*u = nu
		return nil
	}
	for _, f := range []op{service, direct} {
		if _, err := closed(ctx, updateConcurrency, sc.Warmup, f); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	r := &result{
		Name: fmt.Sprintf("update users c=%d", updateConcurrency), Unit: "commands/s", BaselineUnit: "GetItem+transaction/s",
		What:         fmt.Sprintf("PATCH /users/{u} with If-Match through the command API, %d clients", updateConcurrency),
		BaselineWhat: "consistent GetItem of the config, then TransactWriteItems of config (version-conditioned) and history record",
		Target:       atLeast("per_s", 0.92),
	}
	for rep := range sc.Reps {
		fig, bl, err := e.pair(ctx, rep, updateConcurrency, sc.Window, service, direct)
		if err != nil {
			return nil, err
		}
		r.add(fig, bl)
	}
	return []*result{r}, nil
}

func trimQuotes(v string) string {
	if u, err := strconv.Unquote(v); err == nil {
		return u
	}
	return v
}
