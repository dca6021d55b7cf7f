package erasure

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
)

func TestNamedInFindsThePersonInAnyItem(t *testing.T) {
	sv := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	subj := NewSubject("zed.q", "uid-zed")
	subj.AddUser(events.User{ID: "uid-zed", Username: "zed.q", Email: "Zed@Example.org"})
	hashed := NewSubject("zed.q")
	hashed.AddIDHashes(identity.ErasedIDHash("uid-zed"))
	for _, tc := range []struct {
		what string
		item map[string]types.AttributeValue
		want bool
	}{
		{"a group's membership item", map[string]types.AttributeValue{"id": sv("group#g"), "sk": sv("member#zed.q")}, true},
		{"a membership by id only", map[string]types.AttributeValue{"id": sv("group#g"), "sk": sv("member#x"), "user_id": sv("uid-zed")}, true},
		{"an email guard, in another case", map[string]types.AttributeValue{"id": sv("email#zed@example.org"), "sk": sv("config")}, true},
		{"a JSON document naming them", map[string]types.AttributeValue{"data": sv(`{"added":[{"username":"zed.q"}]}`)}, true},
		{"a nested map", map[string]types.AttributeValue{"m": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"u": sv("uid-zed")}}}, true},
		{"someone else", map[string]types.AttributeValue{"id": sv("group#g"), "sk": sv("member#zed.qq"), "data": sv(`{"username":"xzed.q"}`)}, false},
		{"an erased member", map[string]types.AttributeValue{"data": sv(`{"username":"","user_id":"","erased":true}`)}, false},
	} {
		if got := subj.NamedIn(tc.item); got != tc.want {
			t.Errorf("%s: NamedIn = %v, want %v", tc.what, got, tc.want)
		}
	}
	if !hashed.NamedIn(map[string]types.AttributeValue{"member_id": sv("uid-zed")}) {
		t.Error("an id known by its hash only is not found")
	}
}
