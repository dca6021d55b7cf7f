package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
)

// readConcurrency is the read scenarios' concurrency (reads scale further than writes on
// DynamoDB Local, but client, service and JVM share the machine's cores).
const readConcurrency = 8

// Page sizes of the list reads: a prefix search page, and the pages of a walk.
const (
	prefixLimit = 10
	walkLimit   = 20
)

// readOp is one read through the query API and the same DynamoDB calls made directly.
type readOp struct {
	name, unit, what, baseline string
	service, direct            op
}

func benchReads(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	e, api, err := apiEnv(ctx, b, sc, true)
	if err != nil {
		return nil, err
	}
	defer e.close()
	if err := api.stop(); err != nil {
		return nil, err
	}
	users, err := seedReadModel(ctx, e, sc.ReadUsers, sc.ReadGroups)
	if err != nil {
		return nil, err
	}
	query, err := e.start(ctx, "query-api")
	if err != nil {
		return nil, err
	}
	ops := readOps(b, e, query.url()+tenantPath(), users)
	for _, o := range ops {
		for _, f := range []op{o.service, o.direct} {
			if _, err := closed(ctx, readConcurrency, max(sc.Warmup/5, 100*time.Millisecond), f); err != nil {
				return nil, fmt.Errorf("warm-up of %s: %w", o.name, err)
			}
		}
	}
	var results []*result
	for _, o := range ops {
		r := &result{Name: fmt.Sprintf("%s c=%d", o.name, readConcurrency), Unit: o.unit, BaselineUnit: o.unit,
			What: o.what, BaselineWhat: o.baseline, Target: atLeast("per_s", 0.90)}
		for rep := range sc.Reps {
			fig, base, err := e.pair(ctx, rep, readConcurrency, sc.Window, o.service, o.direct)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", o.name, err)
			}
			r.add(fig, base)
		}
		results = append(results, r)
	}
	return results, nil
}

// seedReadModel writes the read model of n users in g groups (two each) with the
// projector's own code (projections.ApplyBatch), as the projector would have written it
// from the command log.
func seedReadModel(ctx context.Context, e *env, n, g int) ([]events.User, error) {
	users, _, err := seedDirectory(ctx, e, n, g)
	return users, err
}

// seedDirectory is seedReadModel that also returns the events it projected.
func seedDirectory(ctx context.Context, e *env, n, g int) ([]events.User, []events.Envelope, error) {
	p := projections.New(e.db, projections.Options{})
	tables := projections.Tables{Users: e.usersTable(), Activities: e.activitiesTable()}
	at := time.Now().UTC().Truncate(time.Millisecond)
	groups := make([]events.Group, g)
	var es []events.Envelope
	for i := range groups {
		name := groupName(i)
		groups[i] = events.Group{ID: uuid.NewString(), Key: name, Name: name, Description: "bench group", Version: 1, CreatedAt: at, UpdatedAt: at}
		es = append(es, groupEnvelope(groups[i], &events.GroupCreated{Group: groups[i]}))
	}
	users := make([]events.User, n)
	for i := range users {
		users[i] = benchUser("read", i, at.Add(time.Duration(i)*time.Millisecond))
		es = append(es, userCreated(users[i]))
		for rev, g := range []int{i % len(groups), (i + 1) % len(groups)} {
			groups[g].Version++
			es = append(es, groupEnvelope(groups[g], &events.GroupMemberAdded{Group: groups[g], Username: users[i].Username,
				UserID: users[i].ID, MembershipRev: int64(rev + 1)}))
		}
	}
	for chunk := range slices.Chunk(es, 500) {
		if err := p.ApplyBatch(ctx, tables, chunk); err != nil {
			return nil, nil, fmt.Errorf("seed the read model: %w", err)
		}
	}
	return users, es, nil
}

func groupName(i int) string { return fmt.Sprintf("group-%03d", i) }

func groupEnvelope(g events.Group, p events.Payload) events.Envelope {
	return events.Envelope{EventID: uuid.NewString(), Type: p.EventType(), SchemaVersion: events.SchemaVersion, Kind: events.KindGroup,
		Key: g.Key, Version: g.Version, Actor: "bootstrap", CommandID: uuid.NewString(), CorrelationID: uuid.NewString(),
		OccurredAt: g.UpdatedAt, Payload: p}
}

func readOps(b *bench, e *env, base string, users []events.User) []readOp {
	table := e.usersTable()
	pick := func() events.User { return users[rand.IntN(len(users))] }
	prefix := func() string { return strings.ToLower(lastNames[rand.IntN(len(lastNames))][:3]) }
	get := func(ctx context.Context, path string) ([]byte, error) {
		_, body, err := b.expect(ctx, http.StatusOK, "GET", base+path, nil)
		return body, err
	}
	query := func(ctx context.Context, in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
		in.TableName = aws.String(table)
		return e.db.Query(ctx, in)
	}
	getUser := func(ctx context.Context, username string) error {
		_, err := e.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: item{"id": s(dynamo.UserID(username)), "sk": s(dynamo.SKConfig)}})
		return err
	}
	return []readOp{
		{
			name: "GET one user", unit: "requests/s", what: "GET /users/{u}", baseline: "GetItem of the user view",
			service: func(ctx context.Context, _ int) error { _, err := get(ctx, "/users/"+pick().Username); return err },
			direct:  func(ctx context.Context, _ int) error { return getUser(ctx, pick().Username) },
		},
		{
			name: "list by email", unit: "requests/s", what: "GET /users?email=", baseline: "Query on UserEmailGSI (email, sk = config)",
			service: func(ctx context.Context, _ int) error {
				_, err := get(ctx, "/users?email="+url.QueryEscape(pick().Email))
				return err
			},
			direct: func(ctx context.Context, _ int) error {
				_, err := query(ctx, &dynamodb.QueryInput{IndexName: aws.String(dynamo.IndexUserEmail), Limit: aws.Int32(51),
					KeyConditionExpression:    aws.String("email = :e AND sk = :c"),
					ExpressionAttributeValues: item{":e": s(pick().Email), ":c": s(dynamo.SKConfig)}})
				return err
			},
		},
		{
			name: "name prefix", unit: "requests/s", what: fmt.Sprintf("GET /users?last_name_prefix=<3 letters>&limit=%d", prefixLimit),
			baseline: "Query on UserLastNameGSI with begins_with, same page size",
			service: func(ctx context.Context, _ int) error {
				_, err := get(ctx, fmt.Sprintf("/users?last_name_prefix=%s&limit=%d", prefix(), prefixLimit))
				return err
			},
			direct: func(ctx context.Context, _ int) error {
				_, err := query(ctx, &dynamodb.QueryInput{IndexName: aws.String(dynamo.IndexUserLastName), Limit: aws.Int32(prefixLimit + 1),
					KeyConditionExpression:    aws.String("kind = :k AND begins_with(last_name_sort, :p)"),
					ExpressionAttributeValues: item{":k": s("user"), ":p": s(prefix())}})
				return err
			},
		},
		{
			name: "user's groups", unit: "requests/s", what: "GET /users/{u}/groups",
			baseline: "GetItem of the user, Query on UserGroupGSI, BatchGetItem of the groups",
			service: func(ctx context.Context, _ int) error {
				_, err := get(ctx, "/users/"+pick().Username+"/groups")
				return err
			},
			direct: func(ctx context.Context, _ int) error {
				u := pick()
				if err := getUser(ctx, u.Username); err != nil {
					return err
				}
				out, err := query(ctx, &dynamodb.QueryInput{IndexName: aws.String(dynamo.IndexUserGroup), Limit: aws.Int32(51),
					KeyConditionExpression: aws.String("member_id = :u"), ExpressionAttributeValues: item{":u": s(u.Username)}})
				if err != nil || len(out.Items) == 0 {
					return err
				}
				keys := make([]item, len(out.Items))
				for i, it := range out.Items {
					keys[i] = item{"id": it["id"], "sk": s(dynamo.SKConfig)}
				}
				_, err = e.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{table: {Keys: keys}}})
				return err
			},
		},
		{
			name: "3-page walk", unit: "walks/s", what: fmt.Sprintf("GET /users?limit=%d and two next_cursor pages", walkLimit),
			baseline: "3 Queries on UserUpdatedAtGSI, newest first, each from the last item of the one before",
			service: func(ctx context.Context, _ int) error {
				path := fmt.Sprintf("/users?limit=%d", walkLimit)
				for range 3 {
					body, err := get(ctx, path)
					if err != nil {
						return err
					}
					var page struct {
						NextCursor *string `json:"next_cursor"`
					}
					if err := json.Unmarshal(body, &page); err != nil || page.NextCursor == nil {
						return fmt.Errorf("walk: no next page after %s (%v)", path, err)
					}
					path = fmt.Sprintf("/users?limit=%d&cursor=%s", walkLimit, url.QueryEscape(*page.NextCursor))
				}
				return nil
			},
			direct: func(ctx context.Context, _ int) error {
				var start item
				for range 3 {
					out, err := query(ctx, &dynamodb.QueryInput{IndexName: aws.String(dynamo.IndexUserUpdatedAt), Limit: aws.Int32(walkLimit + 1),
						KeyConditionExpression: aws.String("kind = :k"), ExpressionAttributeValues: item{":k": s("user")},
						ScanIndexForward: aws.Bool(false), ExclusiveStartKey: start})
					if err != nil {
						return err
					}
					if len(out.Items) <= walkLimit {
						return fmt.Errorf("walk: short page (%d items)", len(out.Items))
					}
					last := out.Items[walkLimit-1]
					start = item{"id": last["id"], "sk": last["sk"], "kind": last["kind"], "updated_sort": last["updated_sort"]}
				}
				return nil
			},
		},
	}
}
