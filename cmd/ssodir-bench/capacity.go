package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
)

// capacityOps is how many operations of each kind the capacity scenario measures; the
// units per operation do not depend on the machine, so few suffice.
func capacityOps(sc scale) int {
	switch sc.Name {
	case "full":
		return 200
	case "small":
		return 60
	}
	return 12
}

// benchCapacity measures what each operation costs in DynamoDB capacity units, per service:
// every service talks to DynamoDB Local through its own meter (meter.go). The projector
// writes as it does on AWS (SSO_PROJECTOR_WRITES=puts); one more phase of creates measures
// its transactions of 25, DynamoDB Local's fast way, for comparison. docs/aws.md turns the
// figures into a monthly cost.
func benchCapacity(ctx context.Context, b *bench, sc scale) ([]*result, error) {
	n := capacityOps(sc)
	kc, stopKC, err := startDouble()
	if err != nil {
		return nil, err
	}
	defer stopKC()
	kc.AddRealm("capacity", "ssodir", "bench-secret")
	e, err := b.newEnv(ctx, sc.FreshDB)
	if err != nil {
		return nil, err
	}
	defer e.close()
	meters := map[string]*meter{}
	for _, name := range []string{"command-api", "query-api", "projector", "keycloak-sync"} {
		m, err := newMeter(e.local.Endpoint, e.db)
		if err != nil {
			return nil, err
		}
		defer m.close()
		meters[name] = m
	}
	via := func(name string) string { return "AWS_ENDPOINT_URL_DYNAMODB=" + meters[name].url }
	api, err := e.start(ctx, "command-api", "SSO_PROVISION_WAIT=1m", via("command-api"))
	if err != nil {
		return nil, err
	}
	settings, _ := json.Marshal(map[string]any{"tenant_id": benchTenant, "keycloak": map[string]string{
		"url": kc.URL(), "realm": "capacity", "client_id": "ssodir", "client_secret": "bench-secret"}})
	if _, _, err := b.expect(ctx, http.StatusCreated, "POST", api.url()+"/v1/systems/"+benchSystem+"/tenants", settings); err != nil {
		return nil, err
	}
	if err := prime(ctx, e.db, e.commandsTable()); err != nil {
		return nil, err
	}
	projector, err := e.start(ctx, "projector", "SSO_PROJECTOR_WRITES=puts", "SSO_STREAM_POLL=5ms", via("projector"))
	if err != nil {
		return nil, err
	}
	if _, err := e.start(ctx, "keycloak-sync", "SSO_RECONCILE_INTERVAL=1h", "SSO_STREAM_POLL=5ms", via("keycloak-sync")); err != nil {
		return nil, err
	}
	query, err := e.start(ctx, "query-api", via("query-api"))
	if err != nil {
		return nil, err
	}
	base := api.url() + tenantPath()
	if _, _, err := b.expect(ctx, http.StatusCreated, "POST", base+"/groups", []byte(`{"name":"staff"}`)); err != nil {
		return nil, err
	}

	snapshot := func() map[string]capacity {
		out := map[string]capacity{}
		for name, m := range meters {
			out[name] = m.counted()
		}
		return out
	}
	figures := map[string]float64{}
	// phase runs n operations, waits until the projector and keycloak-sync are done with
	// them, and notes each service's units per operation under name.
	phase := func(name string, op func(i int) error, projected func(i int) (bool, error), synced func() bool) error {
		before := snapshot()
		for i := range n {
			if err := op(i); err != nil {
				return fmt.Errorf("%s %d: %w", name, i, err)
			}
		}
		if err := waitFor(ctx, 2*time.Minute, 100*time.Millisecond, name, func() (bool, error) {
			for i := range n {
				if ok, err := projected(i); !ok || err != nil {
					return false, err
				}
			}
			return synced(), nil
		}); err != nil {
			return err
		}
		// What the consumers do just after (checkpoints, leases) belongs to the records too.
		time.Sleep(2 * time.Second)
		after := snapshot()
		for service, c := range after {
			d := c.minus(before[service])
			figures[name+"."+service+".wcu"] = d.write / float64(n)
			figures[name+"."+service+".rcu"] = d.read / float64(n)
		}
		return nil
	}
	user := func(i int, prefix string) string { return fmt.Sprintf("%s%04d", prefix, i) }
	viewAt := func(id string, version int64) (bool, error) {
		out, err := e.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.usersTable()), ConsistentRead: aws.Bool(true),
			Key: item{"id": s(id), "sk": s(dynamo.SKConfig)}})
		if err != nil {
			return false, err
		}
		v, _ := out.Item["version"].(*types.AttributeValueMemberN)
		if v == nil {
			return false, nil
		}
		got, _ := strconv.ParseInt(v.Value, 10, 64)
		return got >= version, nil
	}
	inRealm := func(prefix, version string) func() bool {
		return func() bool {
			seen := 0
			for _, u := range kc.Users("capacity") {
				if len(u.Username) > len(prefix) && u.Username[:len(prefix)] == prefix && len(u.Attributes["ssodir_version"]) > 0 && u.Attributes["ssodir_version"][0] == version {
					seen++
				}
			}
			return seen == n
		}
	}
	create := func(prefix string) func(i int) error {
		return func(i int) error {
			body, _ := json.Marshal(map[string]any{"username": user(i, prefix), "email": user(i, prefix) + "@example.com",
				"first_name": "Ann", "last_name": fmt.Sprint("Smith-", i), "attributes": map[string][]string{"dept": {"engineering"}, "site": {"hq"}}})
			_, _, err := b.expect(ctx, http.StatusCreated, "POST", base+"/users", body)
			return err
		}
	}
	if err := phase("create", create("u"), func(i int) (bool, error) { return viewAt(dynamo.UserID(user(i, "u")), 1) }, inRealm("u", "1")); err != nil {
		return nil, err
	}
	if err := phase("update", func(i int) error {
		_, _, err := b.expect(ctx, http.StatusOK, "PATCH", base+"/users/"+user(i, "u"), []byte(`{"first_name":"Anna"}`))
		return err
	}, func(i int) (bool, error) { return viewAt(dynamo.UserID(user(i, "u")), 2) }, inRealm("u", "2")); err != nil {
		return nil, err
	}
	if err := phase("membership", func(i int) error {
		_, _, err := b.expect(ctx, http.StatusNoContent, "PUT", base+"/groups/staff/members/"+user(i, "u"), nil)
		return err
	}, func(i int) (bool, error) { return viewAt(dynamo.GroupID("staff"), int64(2+i)) }, func() bool {
		g, ok := kc.GroupByName("capacity", "staff")
		return ok && len(g.Members) == n
	}); err != nil {
		return nil, err
	}

	// A full reconcile of the tenant (n users in one group), which keycloak-sync runs on a
	// schedule: units per user of the tenant.
	before := meters["keycloak-sync"].counted()
	cmd := e.command("keycloak-sync", []string{"reconcile", "--system", benchSystem, "--tenant", benchTenant}, via("keycloak-sync"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("reconcile: %w\n%s", err, out)
	}
	d := meters["keycloak-sync"].counted().minus(before)
	figures["reconcile_per_user.keycloak-sync.rcu"] = d.read / float64(n)
	figures["reconcile_per_user.keycloak-sync.wcu"] = d.write / float64(n)

	// Reads.
	reads := map[string]func(i int) error{
		"get": func(i int) error {
			_, _, err := b.expect(ctx, http.StatusOK, "GET", query.url()+tenantPath()+"/users/"+user(i, "u"), nil)
			return err
		},
		"list_page": func(i int) error {
			_, _, err := b.expect(ctx, http.StatusOK, "GET", query.url()+tenantPath()+"/users?limit=50&last_name_prefix="+url.QueryEscape("smith"), nil)
			return err
		},
	}
	for _, name := range []string{"get", "list_page"} {
		before := meters["query-api"].counted()
		for i := range n {
			if err := reads[name](i); err != nil {
				return nil, err
			}
		}
		d := meters["query-api"].counted().minus(before)
		figures[name+".query-api.rcu"] = d.read / float64(n)
	}
	// X-Min-Version: a read for the version a write just made, which waits for the view.
	var waitRCU float64
	for i := range n {
		h, _, err := b.expect(ctx, http.StatusOK, "PATCH", base+"/users/"+user(i, "u"), []byte(`{"last_name":"Jones"}`))
		if err != nil {
			return nil, err
		}
		before := meters["query-api"].counted()
		if _, _, err := b.expect(ctx, http.StatusOK, "GET", query.url()+tenantPath()+"/users/"+user(i, "u"), nil, "X-Min-Version", h.Get("ETag")[1:len(h.Get("ETag"))-1]); err != nil {
			return nil, err
		}
		waitRCU += meters["query-api"].counted().minus(before).read
	}
	figures["min_version_get.query-api.rcu"] = waitRCU / float64(n)

	// The projector's transactions of 25, for comparison.
	if err := projector.stop(); err != nil {
		return nil, err
	}
	if _, err := e.start(ctx, "projector", "SSO_PROJECTOR_WRITES=transactions", "SSO_STREAM_POLL=5ms", via("projector")); err != nil {
		return nil, err
	}
	if err := phase("create_tx", create("t"), func(i int) (bool, error) { return viewAt(dynamo.UserID(user(i, "t")), 1) }, inRealm("t", "1")); err != nil {
		return nil, err
	}

	baseline, err := rawCapacity(ctx, e, n)
	if err != nil {
		return nil, err
	}
	r := &result{Name: "capacity", What: "DynamoDB capacity units per operation, per service (<operation>.<service>.wcu|rcu)",
		Unit: "capacity units", BaselineWhat: "the user's item written with one PutItem into a table of the command table's spec; read with one GetItem; 50 of them read with one Query",
		BaselineUnit: "capacity units",
		Notes: []string{
			fmt.Sprintf("%d operations of each kind; reported by DynamoDB Local (ReturnConsumedCapacity), transactions and failed conditional writes counted by AWS's rules (cmd/ssodir-bench/meter.go)", n),
			"projector writes with SSO_PROJECTOR_WRITES=puts (AWS's default) except create_tx (transactions of 25)",
			"create, update and membership: per command; the projector's and keycloak-sync's figures are per record of that command",
		}}
	r.add(figures, baseline)
	return []*result{r}, nil
}

// rawCapacity is what DynamoDB Local reports for the bare operations under ssodir's:
// a user's item put into a table of the command table's spec, got, and 50 such items read
// with a Query on the read table's name index.
func rawCapacity(ctx context.Context, e *env, n int) (map[string]float64, error) {
	commands, users := e.prefix+"_raw_user_commands", e.prefix+"_raw_users"
	for _, spec := range []dynamo.TableSpec{dynamo.CommandsTable(commands), dynamo.UsersTable(users)} {
		if err := dynamo.EnsureTable(ctx, e.db, spec); err != nil {
			return nil, err
		}
	}
	userItem := func(i int) item {
		name := fmt.Sprintf("raw%04d", i)
		return item{"id": s(dynamo.UserID(name)), "sk": s(dynamo.SKConfig), "username": s(name), "email": s(name + "@example.com"),
			"first_name": s("Ann"), "last_name": s(fmt.Sprint("Smith-", i)), "is_active": &types.AttributeValueMemberBOOL{Value: true},
			"attributes": s(`{"dept":["engineering"],"site":["hq"]}`), "version": &types.AttributeValueMemberN{Value: "1"},
			"kind": s("user"), "last_name_sort": s(fmt.Sprint("smith-", i, "\x01", name))}
	}
	var put, get, query float64
	for i := range n {
		out, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(commands), Item: userItem(i), ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			return nil, err
		}
		put += aws.ToFloat64(out.ConsumedCapacity.CapacityUnits)
		if _, err := e.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(users), Item: userItem(i)}); err != nil {
			return nil, err
		}
	}
	for i := range n {
		out, err := e.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(users), Key: item{"id": s(dynamo.UserID(fmt.Sprintf("raw%04d", i))), "sk": s(dynamo.SKConfig)},
			ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			return nil, err
		}
		get += aws.ToFloat64(out.ConsumedCapacity.CapacityUnits)
		q, err := e.db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(users), IndexName: aws.String(dynamo.IndexUserLastName), Limit: aws.Int32(50),
			KeyConditionExpression:    aws.String("kind = :k AND begins_with(last_name_sort, :p)"),
			ExpressionAttributeValues: item{":k": s("user"), ":p": s("smith")}, ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
		if err != nil {
			return nil, err
		}
		query += aws.ToFloat64(q.ConsumedCapacity.CapacityUnits)
	}
	return map[string]float64{"create.command-api.wcu": put / float64(n), "get.query-api.rcu": get / float64(n),
		"list_page.query-api.rcu": query / float64(n)}, nil
}
