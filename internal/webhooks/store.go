package webhooks

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/changefeed"
)

// Items in the shared feed table (docs/webhooks.md):
//
//	pk "hooks"                                  sk "<system>/<tenant>#<id>"   an endpoint and its delivery state
//	pk "hookdel#<system>/<tenant>#<id>"         sk "<at ms>#<position>#<attempt>"   one delivery attempt (TTL)
//
// Every endpoint of the stage shares one partition, so a deliverer finds them all with one
// Query (they are few: a handful per tenant).
const (
	endpointsPK    = "hooks"
	deliveryPrefix = "hookdel#"

	// DeliveryRetention is how long a delivery attempt is listed.
	DeliveryRetention = 7 * 24 * time.Hour
	// RotationOverlap is how long the secret a rotation replaced still signs.
	RotationOverlap = 24 * time.Hour

	StateActive   = "active"
	StateDisabled = "disabled"
)

// DB is the part of DynamoDB webhooks use.
type DB interface {
	changefeed.ReadDB
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	BatchGetItem(ctx context.Context, in *dynamodb.BatchGetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

var _ DB = (*dynamodb.Client)(nil)

// Box encrypts the secrets at rest (internal/secrets).
type Box interface {
	Encrypt(ctx context.Context, plaintext []byte, aad string) (string, error)
	Decrypt(ctx context.Context, ciphertext string, aad string) ([]byte, error)
}

// ErrNotFound is an endpoint that is not there.
var ErrNotFound = errors.New("webhooks: no such endpoint")

// Endpoint is a registered endpoint with its delivery state.
type Endpoint struct {
	System, Tenant, ID string
	URL                string
	// Types are the event names delivered (user.created …); empty: all.
	Types       []string
	Description string
	CreatedAt   time.Time
	CreatedBy   string
	// State is StateActive or StateDisabled.
	State string
	// Position is the feed position delivered up to: every change at or before it was
	// delivered (or was not of Types).
	Position changefeed.Position
	// Gen grows with every replay: a deliverer that read an older one stops.
	Gen int64
	// Attempt counts the failed attempts at the change after Position; FailingSince is when
	// the first of them failed, NextAttempt when the next is due.
	Attempt      int
	FailingSince time.Time
	NextAttempt  time.Time
	LastError    string
	LastStatus   int
	DisabledAt   time.Time
	DeliveredAt  time.Time
	// PreviousUntil is when the secret a rotation replaced stops signing (zero: none).
	PreviousUntil time.Time

	LeaseOwner string
	LeaseUntil time.Time

	secret, previous string // ciphertexts
	// ahead are positions after Position already delivered (a page whose deliveries ran
	// side by side stopped at a failure or a shutdown): the next holder passes over them.
	ahead []int64
}

// Delivery is one attempt to deliver one change.
type Delivery struct {
	EventID  string
	Type     string
	Subject  string // from the feed when listed; empty once the change expired or was erased
	Position int64
	Attempt  int
	// Status is "delivered" or "failed".
	Status         string
	ResponseStatus int
	Error          string
	At             time.Time
	NextAttempt    time.Time
}

// Store keeps endpoints and delivery attempts in the feed table.
type Store struct {
	db    DB
	table string
	box   Box
	feed  *changefeed.Reader
	now   func() time.Time
}

// NewStore keeps webhooks in the feed table named table (changefeed.TableName);
// retention is SSO_EVENTS_RETENTION. now is the clock (nil: time.Now).
func NewStore(db DB, table string, box Box, retention time.Duration, now func() time.Time) *Store {
	if now == nil {
		now = time.Now
	}
	return &Store{db: db, table: table, box: box, feed: changefeed.NewReader(db, table, retention, now), now: now}
}

// Feed is the reader of the store's feed table.
func (s *Store) Feed() *changefeed.Reader { return s.feed }

func endpointSK(system, tenant, id string) string { return system + "/" + tenant + "#" + id }

func deliveriesPK(system, tenant, id string) string {
	return deliveryPrefix + system + "/" + tenant + "#" + id
}

func secretAAD(system, tenant, id string) string {
	return "webhook_secret:" + system + "/" + tenant + "/" + id
}

func (s *Store) key(system, tenant, id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"pk": str(endpointsPK), "sk": str(endpointSK(system, tenant, id))}
}

// Create registers an endpoint; it starts after the changes already in the feed. It
// answers the endpoint and its secret, which is kept only encrypted.
func (s *Store) Create(ctx context.Context, e Endpoint) (Endpoint, string, error) {
	secret, err := NewSecret()
	if err != nil {
		return Endpoint{}, "", err
	}
	head, err := s.feed.Head(ctx, e.System, e.Tenant)
	if err != nil {
		return Endpoint{}, "", err
	}
	now := s.now().UTC().Truncate(time.Millisecond)
	e.CreatedAt, e.State, e.Position = now, StateActive, changefeed.Position{After: head - 1, Seen: now}
	if e.secret, err = s.box.Encrypt(ctx, []byte(secret), secretAAD(e.System, e.Tenant, e.ID)); err != nil {
		return Endpoint{}, "", err
	}
	item := s.key(e.System, e.Tenant, e.ID)
	for k, v := range map[string]types.AttributeValue{
		"system": str(e.System), "tenant": str(e.Tenant), "id": str(e.ID), "url": str(e.URL),
		"types": str(strings.Join(e.Types, ",")), "description": str(e.Description),
		"created_at_ms": ms(e.CreatedAt), "created_by": str(e.CreatedBy), "state": str(e.State),
		"after": num(e.Position.After), "seen_ms": ms(e.Position.Seen), "gen": num(0), "secret": str(e.secret),
	} {
		item[k] = v
	}
	_, err = s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(pk)")})
	if err != nil {
		return Endpoint{}, "", fmt.Errorf("register the webhook: %w", err)
	}
	return e, secret, nil
}

// Get reads one endpoint (strongly consistent).
func (s *Store) Get(ctx context.Context, system, tenant, id string) (Endpoint, error) {
	out, err := s.db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: s.key(system, tenant, id),
		ConsistentRead: aws.Bool(true)})
	if err != nil {
		return Endpoint{}, fmt.Errorf("read the webhook: %w", err)
	}
	if out.Item == nil {
		return Endpoint{}, ErrNotFound
	}
	return fromItem(out.Item), nil
}

// List is a tenant's endpoints, oldest id first.
func (s *Store) List(ctx context.Context, system, tenant string) ([]Endpoint, error) {
	return s.query(ctx, system+"/"+tenant+"#")
}

// All is every endpoint of the stage.
func (s *Store) All(ctx context.Context) ([]Endpoint, error) { return s.query(ctx, "") }

func (s *Store) query(ctx context.Context, prefix string) ([]Endpoint, error) {
	in := &dynamodb.QueryInput{TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(endpointsPK)}}
	if prefix != "" {
		in.KeyConditionExpression = aws.String("pk = :pk AND begins_with(sk, :p)")
		in.ExpressionAttributeValues[":p"] = str(prefix)
	}
	out := []Endpoint{}
	for {
		page, err := s.db.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("list webhooks: %w", err)
		}
		for _, item := range page.Items {
			out = append(out, fromItem(item))
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

// Delete removes an endpoint; its delivery attempts expire.
func (s *Store) Delete(ctx context.Context, system, tenant, id string) error {
	_, err := s.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(s.table), Key: s.key(system, tenant, id),
		ConditionExpression: aws.String("attribute_exists(pk)")})
	if conditionFailed(err) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete the webhook: %w", err)
	}
	return nil
}

// Replay re-enables an endpoint and has it deliver again from a position (nil: from where
// it stands). A deliverer holding the endpoint stops at its next write (the gen moved).
func (s *Store) Replay(ctx context.Context, system, tenant, id string, from *changefeed.Position) (Endpoint, error) {
	set := "SET #state = :active, attempt = :zero, gen = gen + :one"
	vals := map[string]types.AttributeValue{":active": str(StateActive), ":zero": num(0), ":one": num(1)}
	names := map[string]string{"#state": "state"}
	if from != nil {
		set += ", #after = :after, seen_ms = :seen"
		vals[":after"], vals[":seen"], names["#after"] = num(from.After), ms(from.Seen), "after"
	}
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(system, tenant, id),
		UpdateExpression:          aws.String(set + " REMOVE failing_since_ms, next_attempt_ms, disabled_at_ms, last_error, last_status, ahead"),
		ConditionExpression:       aws.String("attribute_exists(pk)"),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals, ReturnValues: types.ReturnValueAllNew})
	if conditionFailed(err) {
		return Endpoint{}, ErrNotFound
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("replay the webhook: %w", err)
	}
	return fromItem(out.Attributes), nil
}

// RotateSecret gives an endpoint a new secret, answered this once; the one it replaces
// signs too for RotationOverlap (one that an earlier rotation replaced stops).
func (s *Store) RotateSecret(ctx context.Context, system, tenant, id string) (Endpoint, string, error) {
	e, err := s.Get(ctx, system, tenant, id)
	if err != nil {
		return Endpoint{}, "", err
	}
	secret, err := NewSecret()
	if err != nil {
		return Endpoint{}, "", err
	}
	ct, err := s.box.Encrypt(ctx, []byte(secret), secretAAD(system, tenant, id))
	if err != nil {
		return Endpoint{}, "", err
	}
	until := s.now().Add(RotationOverlap)
	out, err := s.db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: s.key(system, tenant, id),
		UpdateExpression:          aws.String("SET secret = :new, previous_secret = :old, previous_until_ms = :until"),
		ConditionExpression:       aws.String("secret = :old"), // a concurrent rotation: one wins
		ExpressionAttributeValues: map[string]types.AttributeValue{":new": str(ct), ":old": str(e.secret), ":until": ms(until)},
		ReturnValues:              types.ReturnValueAllNew})
	if conditionFailed(err) {
		return Endpoint{}, "", errConcurrent
	}
	if err != nil {
		return Endpoint{}, "", fmt.Errorf("rotate the webhook's secret: %w", err)
	}
	return fromItem(out.Attributes), secret, nil
}

// errConcurrent is a rotation that lost to another at the same moment.
var errConcurrent = errors.New("webhooks: the endpoint changed meanwhile; try again")

// ErrConcurrent reports a rotation that lost to a concurrent one.
func ErrConcurrent(err error) bool { return errors.Is(err, errConcurrent) }

// Secrets are the endpoint's secrets that sign now, in clear: the current one and, within
// RotationOverlap of a rotation, the one it replaced.
func (s *Store) Secrets(ctx context.Context, e Endpoint) ([]string, error) {
	aad := secretAAD(e.System, e.Tenant, e.ID)
	cur, err := s.box.Decrypt(ctx, e.secret, aad)
	if err != nil {
		return nil, fmt.Errorf("decrypt the webhook's secret: %w", err)
	}
	out := []string{string(cur)}
	if e.previous != "" && s.now().Before(e.PreviousUntil) {
		prev, err := s.box.Decrypt(ctx, e.previous, aad)
		if err != nil {
			return nil, fmt.Errorf("decrypt the webhook's previous secret: %w", err)
		}
		out = append(out, string(prev))
	}
	return out, nil
}

// Deliveries lists an endpoint's delivery attempts, newest first, limit at a time; page is
// the answer's next page token ("": the first page). The subject of each comes from the
// feed (none once the change has expired or was erased).
func (s *Store) Deliveries(ctx context.Context, system, tenant, id, page string, limit int) ([]Delivery, string, error) {
	in := &dynamodb.QueryInput{TableName: aws.String(s.table), ScanIndexForward: aws.Bool(false), Limit: aws.Int32(int32(limit)),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(deliveriesPK(system, tenant, id))}}
	if page != "" {
		sk, err := base64.RawURLEncoding.DecodeString(page)
		if err != nil || !validDeliverySK(string(sk)) {
			return nil, "", ErrBadPage
		}
		in.ExclusiveStartKey = map[string]types.AttributeValue{"pk": str(deliveriesPK(system, tenant, id)), "sk": str(string(sk))}
	}
	out, err := s.db.Query(ctx, in)
	if err != nil {
		return nil, "", fmt.Errorf("list deliveries: %w", err)
	}
	ds := make([]Delivery, 0, len(out.Items))
	for _, item := range out.Items {
		ds = append(ds, deliveryFromItem(item))
	}
	if err := s.subjects(ctx, system, tenant, ds); err != nil {
		return nil, "", err
	}
	next := ""
	if out.LastEvaluatedKey != nil && len(out.Items) > 0 {
		next = base64.RawURLEncoding.EncodeToString([]byte(strAttr(out.Items[len(out.Items)-1], "sk")))
	}
	return ds, next, nil
}

// ErrBadPage is a deliveries page token that is not one.
var ErrBadPage = errors.New("webhooks: malformed page token")

func validDeliverySK(sk string) bool {
	parts := strings.Split(sk, "#")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if _, err := strconv.ParseUint(p, 10, 64); err != nil {
			return false
		}
	}
	return true
}

func deliverySK(at time.Time, position int64, attempt int) string {
	return fmt.Sprintf("%013d#%020d#%06d", at.UnixMilli(), position, attempt)
}

// record writes one delivery attempt.
func (s *Store) record(ctx context.Context, e Endpoint, d Delivery) error {
	_, err := s.db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: deliveryItem(e, d)})
	return err
}

// recordAll lists the attempts of ds, 25 to a BatchWriteItem.
func (s *Store) recordAll(ctx context.Context, e Endpoint, ds []Delivery) error {
	for len(ds) > 0 {
		n := min(len(ds), 25)
		reqs := make([]types.WriteRequest, n)
		for i, d := range ds[:n] {
			reqs[i] = types.WriteRequest{PutRequest: &types.PutRequest{Item: deliveryItem(e, d)}}
		}
		ds = ds[n:]
		for try := 0; len(reqs) > 0; try++ {
			if try == 5 {
				return fmt.Errorf("%d delivery records left unprocessed", len(reqs))
			}
			if try > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Duration(try) * 50 * time.Millisecond):
				}
			}
			out, err := s.db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{s.table: reqs}})
			if err != nil {
				return err
			}
			reqs = out.UnprocessedItems[s.table]
		}
	}
	return nil
}

func deliveryItem(e Endpoint, d Delivery) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		"pk": str(deliveriesPK(e.System, e.Tenant, e.ID)), "sk": str(deliverySK(d.At, d.Position, d.Attempt)),
		"event_id": str(d.EventID), "type": str(d.Type), "position": num(d.Position), "attempt": num(int64(d.Attempt)),
		"status": str(d.Status), "at_ms": ms(d.At), "expires_at": num(d.At.Add(DeliveryRetention).Unix()),
	}
	if d.ResponseStatus != 0 {
		item["response_status"] = num(int64(d.ResponseStatus))
	}
	if d.Error != "" {
		item["error"] = str(d.Error)
	}
	if !d.NextAttempt.IsZero() {
		item["next_attempt_ms"] = ms(d.NextAttempt)
	}
	return item
}

// subjects fills in the subjects of deliveries from their changes in the feed.
func (s *Store) subjects(ctx context.Context, system, tenant string, ds []Delivery) error {
	want := map[int64]bool{}
	var keys []map[string]types.AttributeValue
	for _, d := range ds {
		if !want[d.Position] {
			want[d.Position] = true
			keys = append(keys, map[string]types.AttributeValue{"pk": str("feed#" + system + "/" + tenant),
				"sk": str(fmt.Sprintf("p#%020d", d.Position))})
		}
	}
	subjects := map[int64]string{}
	for len(keys) > 0 {
		n := min(len(keys), 100)
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: map[string]types.KeysAndAttributes{
			s.table: {Keys: keys[:n], ProjectionExpression: aws.String("sk, #e"), ExpressionAttributeNames: map[string]string{"#e": "event"}}}})
		if err != nil {
			return fmt.Errorf("read the deliveries' changes: %w", err)
		}
		keys = keys[n:]
		if left, ok := out.UnprocessedKeys[s.table]; ok {
			keys = append(keys, left.Keys...)
		}
		for _, item := range out.Responses[s.table] {
			var p int64
			if _, err := fmt.Sscanf(strAttr(item, "sk"), "p#%d", &p); err == nil {
				subjects[p] = headerOf([]byte(strAttr(item, "event"))).Subject
			}
		}
	}
	for i := range ds {
		ds[i].Subject = subjects[ds[i].Position]
	}
	return nil
}

func fromItem(item map[string]types.AttributeValue) Endpoint {
	e := Endpoint{
		System: strAttr(item, "system"), Tenant: strAttr(item, "tenant"), ID: strAttr(item, "id"), URL: strAttr(item, "url"),
		Description: strAttr(item, "description"), CreatedAt: msAttr(item, "created_at_ms"), CreatedBy: strAttr(item, "created_by"),
		State:    strAttr(item, "state"),
		Position: changefeed.Position{After: numAttr(item, "after"), Seen: msAttr(item, "seen_ms")},
		Gen:      numAttr(item, "gen"), Attempt: int(numAttr(item, "attempt")),
		FailingSince: msAttr(item, "failing_since_ms"), NextAttempt: msAttr(item, "next_attempt_ms"),
		LastError: strAttr(item, "last_error"), LastStatus: int(numAttr(item, "last_status")),
		DisabledAt: msAttr(item, "disabled_at_ms"), DeliveredAt: msAttr(item, "delivered_at_ms"),
		PreviousUntil: msAttr(item, "previous_until_ms"),
		LeaseOwner:    strAttr(item, "lease_owner"), LeaseUntil: msAttr(item, "lease_until_ms"),
		secret: strAttr(item, "secret"), previous: strAttr(item, "previous_secret"),
	}
	if t := strAttr(item, "types"); t != "" {
		e.Types = strings.Split(t, ",")
	}
	if ns, ok := item["ahead"].(*types.AttributeValueMemberNS); ok {
		for _, n := range ns.Value {
			if v, err := strconv.ParseInt(n, 10, 64); err == nil {
				e.ahead = append(e.ahead, v)
			}
		}
	}
	return e
}

func deliveryFromItem(item map[string]types.AttributeValue) Delivery {
	return Delivery{EventID: strAttr(item, "event_id"), Type: strAttr(item, "type"), Position: numAttr(item, "position"),
		Attempt: int(numAttr(item, "attempt")), Status: strAttr(item, "status"), ResponseStatus: int(numAttr(item, "response_status")),
		Error: strAttr(item, "error"), At: msAttr(item, "at_ms"), NextAttempt: msAttr(item, "next_attempt_ms")}
}

func conditionFailed(err error) bool {
	var ccf *types.ConditionalCheckFailedException
	return errors.As(err, &ccf)
}

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func num(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func ms(t time.Time) types.AttributeValue { return num(t.UnixMilli()) }

func numAttr(item map[string]types.AttributeValue, name string) int64 {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0
	}
	n, _ := strconv.ParseInt(v.Value, 10, 64)
	return n
}

func msAttr(item map[string]types.AttributeValue, name string) time.Time {
	n := numAttr(item, name)
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

func strAttr(item map[string]types.AttributeValue, name string) string {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return ""
	}
	return v.Value
}
