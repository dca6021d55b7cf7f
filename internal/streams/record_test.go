package streams_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	dtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/streams"
)

func TestRecordSurvivesTheMessageRoundTripWithEveryAttributeType(t *testing.T) {
	image := map[string]dtypes.AttributeValue{
		"s":     &dtypes.AttributeValueMemberS{Value: "ünïcode \"quoted\""},
		"n":     &dtypes.AttributeValueMemberN{Value: "12345678901234567890.000000000000000001"},
		"b":     &dtypes.AttributeValueMemberB{Value: []byte{0, 1, 2, 255}},
		"bool":  &dtypes.AttributeValueMemberBOOL{Value: true},
		"null":  &dtypes.AttributeValueMemberNULL{Value: true},
		"ss":    &dtypes.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":    &dtypes.AttributeValueMemberNS{Value: []string{"1", "-2.5e10"}},
		"bs":    &dtypes.AttributeValueMemberBS{Value: [][]byte{{1}, {2, 3}}},
		"empty": &dtypes.AttributeValueMemberM{Value: map[string]dtypes.AttributeValue{}},
		"m": &dtypes.AttributeValueMemberM{Value: map[string]dtypes.AttributeValue{
			"l": &dtypes.AttributeValueMemberL{Value: []dtypes.AttributeValue{
				&dtypes.AttributeValueMemberS{Value: "x"},
				&dtypes.AttributeValueMemberN{Value: "0"},
				&dtypes.AttributeValueMemberL{Value: []dtypes.AttributeValue{}},
			}},
		}},
	}
	in := streams.Record{
		System: "sys", Tenant: "acme", Table: "p_sys_acme_user_commands",
		StreamARN: "arn:aws:dynamodb:eu-west-1:1:table/t/stream/2024", ShardID: "shardId-1",
		EventID: "e1", EventName: streams.EventModify, SequenceNumber: "000000000000000000042",
		ApproximateCreationDateTime: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC),
		Keys:                        map[string]dtypes.AttributeValue{"id": &dtypes.AttributeValueMemberS{Value: "user#alice"}},
		NewImage:                    image, OldImage: map[string]dtypes.AttributeValue{"s": &dtypes.AttributeValueMemberS{Value: ""}},
		Aggregate: "user#alice",
	}
	msg, err := streams.NewRecordMessage(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := streams.DecodeRecord(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, out) {
		t.Errorf("round trip changed the record:\n in: %#v\nout: %#v", in, out)
	}
	if msg.UUID != streams.MessageUUID(in.StreamARN, in.SequenceNumber) {
		t.Errorf("UUID %s is not derived from stream and sequence number", msg.UUID)
	}
	if msg.UUID == streams.MessageUUID(in.StreamARN, "000000000000000000043") {
		t.Error("two sequence numbers share a UUID")
	}
	if got := msg.Metadata.Get(streams.MetaAggregate); got != "user#alice" {
		t.Errorf("aggregate metadata = %q", got)
	}
}

func TestDecodeRecordRejectsAMalformedAttributeValue(t *testing.T) {
	for name, payload := range map[string]string{
		"two type tags":   `{"keys":{"id":{"S":"a","N":"1"}}}`,
		"unknown tag":     `{"keys":{"id":{"X":"a"}}}`,
		"number as float": `{"new_image":{"n":{"N":1}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := streams.DecodeRecord(message.NewMessage("u", []byte(payload))); err == nil {
				t.Errorf("decoded %s without an error", payload)
			}
		})
	}
}

func TestFailureReasonMiddlewareRecordsTheErrorAndPanics(t *testing.T) {
	msg := message.NewMessage("u", nil)
	h := streams.FailureReason(func(*message.Message) ([]*message.Message, error) {
		return nil, errors.New("projection failed: version conflict")
	})
	if _, err := h(msg); err == nil {
		t.Fatal("the middleware swallowed the error")
	}
	if got := msg.Metadata.Get(streams.MetaFailureReason); got != "projection failed: version conflict" {
		t.Errorf("reason = %q", got)
	}

	msg = message.NewMessage("u", nil)
	h = streams.FailureReason(func(*message.Message) ([]*message.Message, error) { panic("nil map") })
	if _, err := h(msg); err == nil || !strings.Contains(msg.Metadata.Get(streams.MetaFailureReason), "nil map") {
		t.Errorf("panic not turned into a reason: err %v, reason %q", err, msg.Metadata.Get(streams.MetaFailureReason))
	}
}

func TestConfigValidationReportsEveryProblem(t *testing.T) {
	_, err := streams.NewSubscriber(streams.Config{LeaseDuration: 100 * time.Millisecond, MaxAttempts: -1})
	if err == nil {
		t.Fatal("an empty config was accepted")
	}
	for _, want := range []string{"Consumer", "LeaseTable", "DeadLetters", "Source", "Streams", "DB", "OnGap", "LeaseDuration", "MaxAttempts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("validation error does not mention %s: %v", want, err)
		}
	}
}
