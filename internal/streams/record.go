package streams

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
	"github.com/google/uuid"
)

// Event names of stream records.
const (
	EventInsert = "INSERT"
	EventModify = "MODIFY"
	EventRemove = "REMOVE"
)

// Metadata keys set on every delivered message, so that routing and logging need not
// decode the payload.
const (
	MetaSystem         = "system"
	MetaTenant         = "tenant"
	MetaTable          = "table"
	MetaStream         = "stream"
	MetaShard          = "shard"
	MetaSequenceNumber = "sequence_number"
	MetaAggregate      = "aggregate"
	MetaEventName      = "event_name"
	MetaTTLDeletion    = "ttl_deletion"
	// MetaAttempt is the delivery attempt of this record, from 1.
	MetaAttempt = "attempt"
	// MetaFailureReason is set by a handler (SetFailureReason, or the FailureReason
	// middleware) before it nacks; it becomes the dead letter's reason.
	MetaFailureReason = "failure_reason"
)

// Record is one stream record with the labels of the stream it came from.
type Record struct {
	System string
	Tenant string
	Table  string

	StreamARN string
	ShardID   string
	EventID   string
	// EventName is EventInsert, EventModify or EventRemove.
	EventName      string
	SequenceNumber string
	// ApproximateCreationDateTime is rounded by the service (to the second on AWS, to the
	// minute on DynamoDB Local); use a time stamped in the item for anything precise.
	ApproximateCreationDateTime time.Time

	Keys     map[string]types.AttributeValue
	NewImage map[string]types.AttributeValue
	OldImage map[string]types.AttributeValue

	// TTLDeletion is true for a REMOVE made by the DynamoDB service because the item's
	// TTL expired: housekeeping, not a business delete.
	TTLDeletion bool
	// Aggregate is the value of the aggregate key attribute (Config.AggregateAttribute)
	// of Keys; records of one aggregate are delivered in order.
	Aggregate string
}

type recordJSON struct {
	System                      string         `json:"system"`
	Tenant                      string         `json:"tenant"`
	Table                       string         `json:"table"`
	StreamARN                   string         `json:"stream_arn"`
	ShardID                     string         `json:"shard_id"`
	EventID                     string         `json:"event_id,omitempty"`
	EventName                   string         `json:"event_name"`
	SequenceNumber              string         `json:"sequence_number"`
	ApproximateCreationDateTime time.Time      `json:"approximate_creation_date_time"`
	Keys                        map[string]any `json:"keys,omitempty"`
	NewImage                    map[string]any `json:"new_image,omitempty"`
	OldImage                    map[string]any `json:"old_image,omitempty"`
	TTLDeletion                 bool           `json:"ttl_deletion,omitempty"`
	Aggregate                   string         `json:"aggregate"`
}

// recordWireIn mirrors recordJSON for decoding, with images kept raw for the codec.
type recordWireIn struct {
	System                      string                     `json:"system"`
	Tenant                      string                     `json:"tenant"`
	Table                       string                     `json:"table"`
	StreamARN                   string                     `json:"stream_arn"`
	ShardID                     string                     `json:"shard_id"`
	EventID                     string                     `json:"event_id"`
	EventName                   string                     `json:"event_name"`
	SequenceNumber              string                     `json:"sequence_number"`
	ApproximateCreationDateTime time.Time                  `json:"approximate_creation_date_time"`
	Keys                        map[string]json.RawMessage `json:"keys"`
	NewImage                    map[string]json.RawMessage `json:"new_image"`
	OldImage                    map[string]json.RawMessage `json:"old_image"`
	TTLDeletion                 bool                       `json:"ttl_deletion"`
	Aggregate                   string                     `json:"aggregate"`
}

// MarshalJSON writes the record with its attribute values in DynamoDB's JSON shape
// ({"S":"x"}, {"N":"1"}, ...), which keeps numbers, binaries and sets exactly.
func (r Record) MarshalJSON() ([]byte, error) {
	keys, err := encodeAttrMap(r.Keys)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	newImage, err := encodeAttrMap(r.NewImage)
	if err != nil {
		return nil, fmt.Errorf("new image: %w", err)
	}
	oldImage, err := encodeAttrMap(r.OldImage)
	if err != nil {
		return nil, fmt.Errorf("old image: %w", err)
	}
	return json.Marshal(recordJSON{
		System: r.System, Tenant: r.Tenant, Table: r.Table,
		StreamARN: r.StreamARN, ShardID: r.ShardID, EventID: r.EventID,
		EventName: r.EventName, SequenceNumber: r.SequenceNumber,
		ApproximateCreationDateTime: r.ApproximateCreationDateTime.UTC(),
		Keys:                        keys, NewImage: newImage, OldImage: oldImage,
		TTLDeletion: r.TTLDeletion, Aggregate: r.Aggregate,
	})
}

// UnmarshalJSON reads what MarshalJSON wrote.
func (r *Record) UnmarshalJSON(b []byte) error {
	var w recordWireIn
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	keys, err := decodeAttrMap(w.Keys)
	if err != nil {
		return fmt.Errorf("keys: %w", err)
	}
	newImage, err := decodeAttrMap(w.NewImage)
	if err != nil {
		return fmt.Errorf("new image: %w", err)
	}
	oldImage, err := decodeAttrMap(w.OldImage)
	if err != nil {
		return fmt.Errorf("old image: %w", err)
	}
	*r = Record{
		System: w.System, Tenant: w.Tenant, Table: w.Table,
		StreamARN: w.StreamARN, ShardID: w.ShardID, EventID: w.EventID,
		EventName: w.EventName, SequenceNumber: w.SequenceNumber,
		ApproximateCreationDateTime: w.ApproximateCreationDateTime,
		Keys:                        keys, NewImage: newImage, OldImage: oldImage,
		TTLDeletion: w.TTLDeletion, Aggregate: w.Aggregate,
	}
	return nil
}

// recordKey is the context key under which the Subscriber hands its messages' records to
// handlers in the same process: decoding the JSON payload again was a sixth of the
// projector's CPU in make bench's catch-up.
type recordKey struct{}

// withRecord is ctx carrying r for DecodeRecord.
func withRecord(ctx context.Context, r Record) context.Context {
	return context.WithValue(ctx, recordKey{}, r)
}

// DecodeRecord gives back the record a message delivered by the Subscriber carries: the
// decoded record the Subscriber attached to the message's context, or else the payload's
// (a message built by NewRecordMessage, or one that crossed a process). Handlers share
// the record's maps with the Subscriber's later deliveries: read them, never change them.
func DecodeRecord(msg *message.Message) (Record, error) {
	if r, ok := msg.Context().Value(recordKey{}).(Record); ok {
		return r, nil
	}
	var r Record
	if err := json.Unmarshal(msg.Payload, &r); err != nil {
		return Record{}, fmt.Errorf("decode stream record of message %s: %w", msg.UUID, err)
	}
	return r, nil
}

// NewRecordMessage builds the message the Subscriber would deliver for r, so a dead letter
// can be re-driven through the same watermill handler that consumes the stream.
func NewRecordMessage(r Record) (*message.Message, error) {
	payload, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode stream record %s: %w", r.SequenceNumber, err)
	}
	msg := message.NewMessage(MessageUUID(r.StreamARN, r.SequenceNumber), payload)
	for k, v := range recordMetadata(r) {
		msg.Metadata.Set(k, v)
	}
	return msg, nil
}

// messageNamespace makes message UUIDs a pure function of stream and sequence number, so a
// record redelivered after a crash or a lease takeover has the same UUID (usable as an
// idempotency key).
var messageNamespace = uuid.MustParse("6f1c2a7e-3b0d-4b8e-9d51-2f7a0c6e8b94")

// MessageUUID is the UUID of the message for the record with this sequence number in this
// stream.
func MessageUUID(streamARN, sequenceNumber string) string {
	return uuid.NewSHA1(messageNamespace, []byte(streamARN+"\x00"+sequenceNumber)).String()
}

func recordMetadata(r Record) message.Metadata {
	md := message.Metadata{
		MetaSystem:         r.System,
		MetaTenant:         r.Tenant,
		MetaTable:          r.Table,
		MetaStream:         r.StreamARN,
		MetaShard:          r.ShardID,
		MetaSequenceNumber: r.SequenceNumber,
		MetaAggregate:      r.Aggregate,
		MetaEventName:      r.EventName,
	}
	if r.TTLDeletion {
		md[MetaTTLDeletion] = "true"
	}
	return md
}

// fromStreamRecord converts a record read from a shard of stream st. On an error the
// record is returned as far as it could be converted (labels, keys, aggregate), so that
// it can still be dead-lettered in its aggregate's order.
func fromStreamRecord(st Stream, shardID string, rec stypes.Record, aggregateAttr string) (Record, error) {
	r := Record{
		System: st.System, Tenant: st.Tenant, Table: st.Table,
		StreamARN: st.StreamARN, ShardID: shardID,
		EventID:   aws.ToString(rec.EventID),
		EventName: string(rec.EventName),
	}
	if rec.Dynamodb == nil || rec.Dynamodb.SequenceNumber == nil {
		return r, fmt.Errorf("stream record %s has no sequence number", r.EventID)
	}
	r.SequenceNumber = aws.ToString(rec.Dynamodb.SequenceNumber)
	if t := rec.Dynamodb.ApproximateCreationDateTime; t != nil {
		r.ApproximateCreationDateTime = t.UTC()
	}
	// DynamoDB marks deletions made by its TTL process with this identity; a user's
	// DeleteItem has no UserIdentity at all.
	if id := rec.UserIdentity; id != nil && r.EventName == EventRemove &&
		aws.ToString(id.Type) == "Service" && aws.ToString(id.PrincipalId) == "dynamodb.amazonaws.com" {
		r.TTLDeletion = true
	}
	keys, err := fromStreamAttrMap(rec.Dynamodb.Keys)
	if err != nil {
		return r, fmt.Errorf("record %s keys: %w", r.SequenceNumber, err)
	}
	r.Keys = keys
	r.Aggregate = attrString(keys[aggregateAttr])
	if r.NewImage, err = fromStreamAttrMap(rec.Dynamodb.NewImage); err != nil {
		r.NewImage = nil
		return r, fmt.Errorf("record %s new image: %w", r.SequenceNumber, err)
	}
	if r.OldImage, err = fromStreamAttrMap(rec.Dynamodb.OldImage); err != nil {
		r.OldImage = nil
		return r, fmt.Errorf("record %s old image: %w", r.SequenceNumber, err)
	}
	return r, nil
}

// attrString renders a key attribute as a string: keys are S, N or B.
func attrString(av types.AttributeValue) string {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberB:
		return base64.StdEncoding.EncodeToString(v.Value)
	default:
		return ""
	}
}

// stampMillis reads the writer's time stamp (epoch milliseconds) from an image.
func stampMillis(image map[string]types.AttributeValue, attr string) (time.Time, bool) {
	if attr == "" {
		return time.Time{}, false
	}
	n, ok := image[attr].(*types.AttributeValueMemberN)
	if !ok {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(n.Value, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.UnixMilli(ms), true
}
