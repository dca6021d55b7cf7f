package dynamotest

import (
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// FindPlaintext looks for plaintext in every string of an item, at any depth (a check
// that a secret is never stored in clear); it answers the attribute path where it is.
func FindPlaintext(it map[string]types.AttributeValue, plaintext string) (string, bool) {
	var walk func(path string, v types.AttributeValue) (string, bool)
	walk = func(path string, v types.AttributeValue) (string, bool) {
		switch x := v.(type) {
		case *types.AttributeValueMemberS:
			return path, strings.Contains(x.Value, plaintext)
		case *types.AttributeValueMemberB:
			return path, strings.Contains(string(x.Value), plaintext)
		case *types.AttributeValueMemberSS:
			for _, s := range x.Value {
				if strings.Contains(s, plaintext) {
					return path, true
				}
			}
		case *types.AttributeValueMemberL:
			for i, e := range x.Value {
				if p, ok := walk(fmt.Sprintf("%s[%d]", path, i), e); ok {
					return p, true
				}
			}
		case *types.AttributeValueMemberM:
			for k, e := range x.Value {
				if p, ok := walk(path+"."+k, e); ok {
					return p, true
				}
			}
		}
		return "", false
	}
	for k, v := range it {
		if p, ok := walk(k, v); ok {
			return p, true
		}
	}
	return "", false
}
