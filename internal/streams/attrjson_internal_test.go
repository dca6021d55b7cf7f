package streams

import (
	"reflect"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	stypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

func TestFromStreamAttrMapConvertsEveryKindAndKeepsAnAbsentImageAbsent(t *testing.T) {
	got, err := fromStreamAttrMap(nil)
	if err != nil || got != nil {
		t.Fatalf("an absent image: got %v, %v; want nil", got, err)
	}
	in := map[string]stypes.AttributeValue{
		"s":     &stypes.AttributeValueMemberS{Value: "x"},
		"n":     &stypes.AttributeValueMemberN{Value: "12345678901234567890.5"},
		"b":     &stypes.AttributeValueMemberB{Value: []byte{0, 1}},
		"bool":  &stypes.AttributeValueMemberBOOL{Value: true},
		"null":  &stypes.AttributeValueMemberNULL{Value: true},
		"ss":    &stypes.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":    &stypes.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs":    &stypes.AttributeValueMemberBS{Value: [][]byte{{1}, {2}}},
		"l":     &stypes.AttributeValueMemberL{Value: []stypes.AttributeValue{&stypes.AttributeValueMemberS{Value: "y"}}},
		"m":     &stypes.AttributeValueMemberM{Value: map[string]stypes.AttributeValue{"k": &stypes.AttributeValueMemberN{Value: "1"}}},
		"empty": &stypes.AttributeValueMemberM{},
	}
	want := map[string]types.AttributeValue{
		"s":     &types.AttributeValueMemberS{Value: "x"},
		"n":     &types.AttributeValueMemberN{Value: "12345678901234567890.5"},
		"b":     &types.AttributeValueMemberB{Value: []byte{0, 1}},
		"bool":  &types.AttributeValueMemberBOOL{Value: true},
		"null":  &types.AttributeValueMemberNULL{Value: true},
		"ss":    &types.AttributeValueMemberSS{Value: []string{"a", "b"}},
		"ns":    &types.AttributeValueMemberNS{Value: []string{"1", "2"}},
		"bs":    &types.AttributeValueMemberBS{Value: [][]byte{{1}, {2}}},
		"l":     &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: "y"}}},
		"m":     &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberN{Value: "1"}}},
		"empty": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}},
	}
	got, err = fromStreamAttrMap(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %#v\nwant %#v", got, want)
	}
}
