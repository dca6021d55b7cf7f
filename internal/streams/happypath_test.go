package streams_test

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"

	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
	"github.com/ssodir/ssodir/internal/streams"
	"github.com/ssodir/ssodir/internal/streams/streamstest"
)

// backend is where the happy-path suite's tables and streams live: the fake or DynamoDB
// Local. The suite is the same for both.
type backend interface {
	api() streams.StreamsAPI
	// newTable creates a table with a stream; the Stream names it by table only, so the
	// Subscriber finds the stream with ListStreams.
	newTable(t *testing.T, base string) streams.Stream
	put(t *testing.T, st streams.Stream, id string, v int)
}

type fakeBackend struct{ f *streamstest.Fake }

func (b fakeBackend) api() streams.StreamsAPI { return b.f }

func (b fakeBackend) newTable(_ *testing.T, base string) streams.Stream {
	table := dynamotest.UniqueName(base)
	arn := b.f.AddStream(table)
	b.f.AddShard(arn, "shardId-0001", "")
	b.f.StaleEmptyIterators(arn, "shardId-0001")
	return streams.Stream{System: "sys", Tenant: base, Table: table}
}

func (b fakeBackend) put(t *testing.T, st streams.Stream, id string, v int) {
	out, err := b.f.ListStreams(context.Background(), &dynamodbstreams.ListStreamsInput{TableName: aws.String(st.Table)})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range out.Streams {
		if *s.TableName == st.Table {
			b.f.Put(*s.StreamArn, "shardId-0001", item(id, v))
			return
		}
	}
	t.Fatalf("no stream for %s", st.Table)
}

type localBackend struct {
	db      *dynamodb.Client
	streams streams.StreamsAPI
}

func (b localBackend) api() streams.StreamsAPI { return b.streams }

func (b localBackend) newTable(t *testing.T, base string) streams.Stream {
	t.Helper()
	table := dynamotest.UniqueName(base)
	_, err := b.db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
		TableName:   aws.String(table),
		BillingMode: dtypes.BillingModePayPerRequest,
		AttributeDefinitions: []dtypes.AttributeDefinition{
			{AttributeName: aws.String("id"), AttributeType: dtypes.ScalarAttributeTypeS},
		},
		KeySchema: []dtypes.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: dtypes.KeyTypeHash}},
		StreamSpecification: &dtypes.StreamSpecification{
			StreamEnabled: aws.Bool(true), StreamViewType: dtypes.StreamViewTypeNewAndOldImages,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = b.db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	return streams.Stream{System: "sys", Tenant: base, Table: table}
}

func (b localBackend) put(t *testing.T, st streams.Stream, id string, v int) {
	t.Helper()
	_, err := b.db.PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(st.Table),
		Item: map[string]dtypes.AttributeValue{
			"id":      &dtypes.AttributeValueMemberS{Value: id},
			"v":       &dtypes.AttributeValueMemberN{Value: strconv.Itoa(v)},
			stampAttr: &dtypes.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixMilli(), 10)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestHappyPathWithFake(t *testing.T) {
	t.Parallel()
	happyPath(t, fakeBackend{streamstest.New()})
}

func TestHappyPathWithDynamoDBLocal(t *testing.T) {
	t.Parallel()
	local := dynamotest.Current(t)
	happyPath(t, localBackend{local.DynamoDB(), local.Streams()})
}

func happyPath(t *testing.T, b backend) {
	h := newHarness(t)
	keys := []string{"user#alice", "user#bob", "group#admins"}
	tableA := b.newTable(t, "tenant-a")
	for v := 1; v <= 10; v++ {
		for _, k := range keys {
			b.put(t, tableA, k, v)
		}
	}
	src := streams.NewStaticSource(tableA)
	apply := func(rec *recorder, owner string) message.NoPublishHandlerFunc {
		return func(msg *message.Message) error {
			r, err := streams.DecodeRecord(msg)
			if err != nil {
				return err
			}
			rec.add(delivery{owner: owner, rec: r, msg: msg})
			return nil
		}
	}

	t.Run("a router's handler gets every record once, in order per key", func(t *testing.T) {
		first := &recorder{}
		s := h.newSubscriber(src, b.api(), nil)
		stop := runRouter(t, s, apply(first, s.owner))
		got := first.waitFor(t, 30, 20*time.Second)
		stop()
		if len(first.all()) != 30 {
			t.Errorf("applied %d records, want 30", len(first.all()))
		}
		assertOnce(t, got)
		assertOrderPerAggregate(t, got)
		for _, d := range got {
			if d.rec.System != "sys" || d.rec.Tenant != "tenant-a" || d.rec.Table != tableA.Table {
				t.Fatalf("record labels = %s/%s/%s, want sys/tenant-a/%s", d.rec.System, d.rec.Tenant, d.rec.Table, tableA.Table)
			}
			if d.msg.UUID != streams.MessageUUID(d.rec.StreamARN, d.rec.SequenceNumber) {
				t.Fatalf("message UUID %s is not derived from stream and sequence number", d.msg.UUID)
			}
			// The record travels in the message's context; nothing is encoded unless asked.
			if len(d.msg.Payload) != 0 {
				t.Fatalf("payload of %d bytes without Config.Payloads", len(d.msg.Payload))
			}
			if d.msg.Metadata.Get(streams.MetaAggregate) != d.rec.Aggregate || d.msg.Metadata.Get(streams.MetaTenant) != "tenant-a" {
				t.Fatalf("metadata %v does not match the record", d.msg.Metadata)
			}
		}
		if n := s.metric(t, "ssodir_stream_records_total", nil); n != 30 {
			t.Errorf("ssodir_stream_records_total = %v, want 30", n)
		}
		if n := s.metric(t, "ssodir_stream_lag_seconds", map[string]string{"tenant": "tenant-a"}); n <= 0 {
			t.Errorf("ssodir_stream_lag_seconds = %v, want > 0", n)
		}
	})

	t.Run("a restart resumes from the checkpoint without applying anything twice", func(t *testing.T) {
		for _, k := range keys {
			b.put(t, tableA, k, 11)
		}
		second := &recorder{}
		s := h.newSubscriber(src, b.api(), nil, func(c *streams.Config) { c.Payloads = true })
		stop := runRouter(t, s, apply(second, s.owner))
		second.waitFor(t, 3, 20*time.Second)
		// Anything applied again would arrive right behind the new records.
		time.Sleep(500 * time.Millisecond)
		stop()
		got := second.all()
		if len(got) != 3 {
			t.Fatalf("applied %d records after the restart, want the 3 new ones", len(got))
		}
		for _, d := range got {
			if version(d.rec) != 11 {
				t.Errorf("re-applied %s v%d", d.rec.Aggregate, version(d.rec))
			}
			// With Config.Payloads the payload carries the record handed over in the
			// message's context, for a message that leaves the process.
			fromPayload, err := streams.DecodeRecord(message.NewMessage(d.msg.UUID, d.msg.Payload))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(fromPayload, d.rec) {
				t.Fatalf("delivered record %+v, payload %+v", d.rec, fromPayload)
			}
		}
	})

	t.Run("a table added to the source while running is picked up", func(t *testing.T) {
		third := &recorder{}
		s := h.newSubscriber(src, b.api(), nil)
		stop := runRouter(t, s, apply(third, s.owner))
		defer stop()
		tableB := b.newTable(t, "tenant-b")
		src.Add(tableB)
		// Let the new, empty stream be read before its first write, so that an iterator
		// taken on an empty shard is in play (DynamoDB Local's trap 2).
		time.Sleep(time.Second)
		for v := 1; v <= 3; v++ {
			b.put(t, tableB, "user#carol", v)
		}
		got := third.waitFor(t, 3, 20*time.Second)
		for _, d := range got {
			if d.rec.Tenant != "tenant-b" {
				t.Errorf("applied a record of %s, want only tenant-b's", d.rec.Tenant)
			}
		}
		// The first table's shard was idle at its checkpoint all along.
		for _, k := range keys {
			b.put(t, tableA, k, 12)
		}
		third.waitFor(t, 6, 20*time.Second)
		time.Sleep(300 * time.Millisecond)
		got = third.all()
		if len(got) != 6 {
			t.Errorf("applied %d records, want 3 of tenant-b and 3 new of tenant-a", len(got))
		}
		assertOnce(t, got)
		assertOrderPerAggregate(t, got)
	})

	if gaps := h.recordedGaps(); len(gaps) != 0 {
		t.Errorf("gaps reported on a healthy stream: %+v", gaps)
	}
}
