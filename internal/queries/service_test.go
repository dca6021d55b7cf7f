package queries

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/attributevalue"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/projections"
	"github.com/ssodir/ssodir/internal/queries/querytest"
)

func TestMain(m *testing.M) {
	// The fuzz targets need no database; each fuzzing worker process runs TestMain, and a
	// JVM per worker would only slow fuzzing down.
	if slices.ContainsFunc(os.Args, func(a string) bool { return strings.HasPrefix(a, "-test.fuzzworker") }) {
		os.Exit(m.Run())
	}
	dynamotest.Main(m)
}

// fixture is a tenant in DynamoDB Local and a Service over it.
func fixture(t *testing.T, db DB, opts Options) (*Service, *querytest.Tenant) {
	t.Helper()
	local := dynamotest.Current(t).DynamoDB()
	names := dynamo.Names{Prefix: dynamotest.UniqueName("q")}
	f, err := querytest.Setup(t.Context(), local, names, "acme", "eu")
	if err != nil {
		t.Fatal(err)
	}
	if db == nil {
		db = local
	}
	svc, err := New(db, names, testKey, opts)
	if err != nil {
		t.Fatal(err)
	}
	return svc, f
}

func apply(t *testing.T, f *querytest.Tenant, es ...events.Envelope) {
	t.Helper()
	if err := f.Apply(t.Context(), es...); err != nil {
		t.Fatal(err)
	}
}

// clock is a settable time for the tenant cache.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestReadTablesFollowTheTenantRow(t *testing.T) {
	svc, f := fixture(t, nil, Options{TenantTTL: time.Hour})
	if svc.tenants.ttl != MaxTenantTTL {
		t.Fatalf("tenant cache time %v, want it capped at %v", svc.tenants.ttl, MaxTenantTTL)
	}
	c := &clock{now: time.Now()}
	svc.tenants.now = c.Now
	ctx := t.Context()
	apply(t, f, f.CreateUser(events.User{Username: "jdoe"}))
	if _, err := svc.User(ctx, "acme", "eu", "jdoe", 0); err != nil {
		t.Fatal(err)
	}

	t.Run("a switch is followed once the cached row expires", func(t *testing.T) {
		if _, err := f.Replay(ctx); err != nil {
			t.Fatal(err)
		}
		apply(t, f, f.CreateUser(events.User{Username: "after"}))
		if _, err := svc.User(ctx, "acme", "eu", "after", 0); apperr.KindOf(err) != apperr.KindNotFound {
			t.Fatalf("before expiry: %v, want the old tables (not found)", err)
		}
		c.Add(MaxTenantTTL)
		if _, err := svc.User(ctx, "acme", "eu", "after", 0); err != nil {
			t.Fatalf("after expiry: %v", err)
		}
	})
	t.Run("a dropped table is answered unavailable once and the next request reads the new row", func(t *testing.T) {
		old := f.Tables()
		if _, err := f.Replay(ctx); err != nil {
			t.Fatal(err)
		}
		if err := dynamo.DeleteTable(ctx, f.DB, old.Users); err != nil {
			t.Fatal(err)
		}
		_, err := svc.User(ctx, "acme", "eu", "jdoe", 0)
		if apperr.KindOf(err) != apperr.KindUnavailable {
			t.Fatalf("read from the dropped table: %v, want unavailable", err)
		}
		if _, err := svc.User(ctx, "acme", "eu", "jdoe", 0); err != nil {
			t.Fatalf("the next read: %v, want the new tables without waiting for expiry", err)
		}
	})
	t.Run("an unknown tenant is not found, remembered briefly, and found once created", func(t *testing.T) {
		if _, err := svc.Tenant(ctx, "acme", "later"); apperr.KindOf(err) != apperr.KindNotFound {
			t.Fatalf("%v, want not found", err)
		}
		if _, err := querytest.Setup(ctx, f.DB, f.Names, "acme", "later"); err != nil {
			t.Fatal(err)
		}
		c.Add(missTTL)
		if _, err := svc.Tenant(ctx, "acme", "later"); err != nil {
			t.Fatalf("a tenant created after a miss, once the miss expired: %v", err)
		}
	})
}

// put writes a read-table item as the projector would have, to build states the projector
// only passes through (a membership whose user was just deleted).
func put(t *testing.T, f *querytest.Tenant, v any) {
	t.Helper()
	item, err := attributevalue.MarshalMap(v)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.DB.PutItem(t.Context(), &dynamodb.PutItemInput{TableName: aws.String(f.Tables().Users), Item: item}); err != nil {
		t.Fatal(err)
	}
}

func TestJoinsFillPagesPastStaleMemberships(t *testing.T) {
	svc, f := fixture(t, nil, Options{})
	ctx := t.Context()
	var want []string
	for i := range 9 {
		apply(t, f, f.CreateUser(events.User{Username: fmt.Sprintf("u%d", i)}))
	}
	apply(t, f, f.CreateGroup("team", ""))
	for i := range 9 {
		apply(t, f, f.AddMember("team", fmt.Sprintf("u%d", i)))
	}
	// Users 1, 2, 4 and 5 are deleted without their memberships being cascaded yet; user 7
	// is deleted and created again, and its old membership is still live.
	for i := range 9 {
		u := fmt.Sprintf("u%d", i)
		switch i {
		case 1, 2, 4, 5:
			put(t, f, projections.UserView{ID: dynamo.UserID(u), SK: dynamo.SKConfig, Username: u, Version: 9, IsDeleted: true, DeletedMembershipRev: 1})
		case 7:
			put(t, f, projections.UserView{ID: dynamo.UserID(u), SK: dynamo.SKConfig, Kind: "user", Username: u, Version: 9,
				DeletedMembershipRev: 1, UpdatedSort: "x#" + u})
		default:
			want = append(want, u)
		}
	}
	for _, limit := range []int{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("members in pages of %d", limit), func(t *testing.T) {
			var got []string
			p := PageRequest{Limit: limit}
			for pages := 0; ; pages++ {
				page, err := svc.GroupMembers(ctx, "acme", "eu", "Team", p)
				if err != nil {
					t.Fatal(err)
				}
				if page.NextCursor != nil && len(page.Items) != limit {
					t.Errorf("page %d holds %d users, want a full page of %d before the end", pages, len(page.Items), limit)
				}
				for _, u := range page.Items {
					got = append(got, u.Username)
				}
				if page.NextCursor == nil {
					break
				}
				p.Cursor = *page.NextCursor
			}
			if !slices.Equal(got, want) {
				t.Errorf("members %v, want %v", got, want)
			}
		})
	}

	t.Run("a user's groups skip groups deleted before their memberships", func(t *testing.T) {
		apply(t, f, f.CreateGroup("a1", ""), f.CreateGroup("a2", ""), f.CreateGroup("a3", ""),
			f.AddMember("a1", "u0"), f.AddMember("a2", "u0"), f.AddMember("a3", "u0"))
		put(t, f, projections.GroupView{ID: dynamo.GroupID("a2"), SK: dynamo.SKConfig, Key: "a2", Name: "a2", Version: 9,
			LastDeletedVersion: 9, IsDeleted: true})
		page, err := svc.UserGroups(ctx, "acme", "eu", "u0", PageRequest{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range page.Items {
			got = append(got, g.Name)
		}
		if want := []string{"a1", "a3"}; !slices.Equal(got, want) {
			t.Errorf("groups %v, want %v", got, want)
		}
		if page.NextCursor == nil {
			t.Error("next_cursor is null, but team follows")
		}
	})
}

// throttled leaves half of every BatchGetItem's keys unprocessed, as DynamoDB does under
// throttling (DynamoDB Local never does); fail leaves all of them.
type throttled struct {
	*dynamodb.Client
	fail  bool
	calls int
	mu    sync.Mutex
}

func (d *throttled) BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	d.mu.Lock()
	d.calls++
	d.mu.Unlock()
	cut := &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{}}
	rest := map[string]types.KeysAndAttributes{}
	for table, ka := range in.RequestItems {
		n := (len(ka.Keys) + 1) / 2
		if d.fail {
			n = 0
		}
		cut.RequestItems[table] = types.KeysAndAttributes{Keys: ka.Keys[:n]}
		if n < len(ka.Keys) {
			rest[table] = types.KeysAndAttributes{Keys: ka.Keys[n:]}
		}
	}
	out := &dynamodb.BatchGetItemOutput{Responses: map[string][]map[string]types.AttributeValue{}}
	if d.fail {
		out.UnprocessedKeys = rest
		return out, nil
	}
	got, err := d.Client.BatchGetItem(ctx, cut, opts...)
	if err != nil {
		return nil, err
	}
	got.UnprocessedKeys = rest
	return got, nil
}

func TestBatchGetRetriesUnprocessedKeys(t *testing.T) {
	db := &throttled{Client: dynamotest.Current(t).DynamoDB()}
	svc, f := fixture(t, db, Options{})
	var want []string
	apply(t, f, f.CreateGroup("team", ""))
	for i := range 7 {
		u := fmt.Sprintf("u%d", i)
		want = append(want, u)
		apply(t, f, f.CreateUser(events.User{Username: u}), f.AddMember("team", u))
	}
	t.Run("keys left unprocessed are read again", func(t *testing.T) {
		page, err := svc.GroupMembers(t.Context(), "acme", "eu", "team", PageRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, u := range page.Items {
			got = append(got, u.Username)
		}
		if !slices.Equal(got, want) {
			t.Errorf("members %v, want %v", got, want)
		}
		if db.calls < 2 {
			t.Errorf("%d BatchGetItem calls, want retries", db.calls)
		}
	})
	t.Run("keys that stay unprocessed make the read unavailable", func(t *testing.T) {
		db.fail = true
		_, err := svc.GroupMembers(t.Context(), "acme", "eu", "team", PageRequest{})
		if e, ok := apperr.As(err); !ok || e.Kind != apperr.KindUnavailable || e.RetryAfter <= 0 {
			t.Errorf("err %v, want unavailable with a retry hint", err)
		}
	})
}

func TestUnreachableDynamoDBIsUnavailable(t *testing.T) {
	local := dynamotest.Current(t)
	cfg := local.AWSConfig()
	cfg.BaseEndpoint = aws.String("http://127.0.0.1:1")
	cfg.RetryMaxAttempts = 1
	svc, err := New(dynamodb.NewFromConfig(cfg), dynamo.Names{Prefix: "nowhere"}, testKey, Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = svc.Users(t.Context(), "acme", "eu", UsersQuery{})
	if e, ok := apperr.As(err); !ok || e.Kind != apperr.KindUnavailable {
		t.Errorf("err %v, want unavailable", err)
	}
}

func TestNewRefusesAShortCursorKey(t *testing.T) {
	if _, err := New(dynamotest.Current(t).DynamoDB(), dynamo.Names{Prefix: "x"}, make([]byte, 16), Options{}); err == nil {
		t.Error("a 16-byte cursor key was accepted")
	}
}

// Every users list item is the user a GET answers, every field of it (the lists and the GET
// decode the same items through different paths).
func TestUserListsMatchTheUserRead(t *testing.T) {
	svc, f := fixture(t, nil, Options{})
	ctx := t.Context()
	for i := range 4 {
		apply(t, f, f.CreateUser(events.User{Username: fmt.Sprintf("lu%d", i), Email: fmt.Sprintf("lu%d@example.com", i),
			FirstName: fmt.Sprintf("First%d", i), LastName: fmt.Sprintf("Last%d", i), IsActive: true,
			Attributes: map[string][]string{"dept": {"d" + fmt.Sprint(i)}, "phones": {"1", "2"}}}))
	}
	apply(t, f, f.UpdateUser("lu2", func(u *events.User) { u.IsActive = false; u.Attributes = nil }))
	queries := map[string]UsersQuery{
		"by update time": {Page: PageRequest{Limit: 2}},
		"by email":       {Email: "LU1@example.com"},
		"by last name":   {LastNamePrefix: "last"},
		"by first name":  {FirstNamePrefix: "first", Page: PageRequest{Limit: 3}},
	}
	for name, q := range queries {
		t.Run(name, func(t *testing.T) {
			seen := 0
			for {
				page, err := svc.Users(ctx, "acme", "eu", q)
				if err != nil {
					t.Fatal(err)
				}
				for _, got := range page.Items {
					want, err := svc.User(ctx, "acme", "eu", got.Username, 0)
					if err != nil {
						t.Fatal(err)
					}
					if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
						t.Errorf("list item %+v, GET %+v", got, want)
					}
					if got.Email == "" || got.FirstName == "" || got.ID == "" || got.CreatedAt == "" || got.UpdatedAt == "" {
						t.Errorf("list item %+v lacks a field", got)
					}
					seen++
				}
				if page.NextCursor == nil {
					break
				}
				q.Page.Cursor = *page.NextCursor
			}
			if want := map[bool]int{true: 1, false: 4}[q.Email != ""]; seen != want {
				t.Errorf("%d users listed, want %d", seen, want)
			}
		})
	}
}
