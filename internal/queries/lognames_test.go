package queries

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo/dynamotest"
)

// failingViews is DynamoDB Local whose reads of users' view items fail.
type failingViews struct{ *dynamodb.Client }

func (d failingViews) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if id, ok := in.Key["id"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(id.Value, "user#") {
		return nil, errors.New("injected: the read failed")
	}
	return d.Client.GetItem(ctx, in, opts...)
}

// TestAFailedReadNamesNoUser: an error of a read reaches the query API's log (a 5xx is
// logged), which names users by id only (STYLE.md): the username is not in it.
func TestAFailedReadNamesNoUser(t *testing.T) {
	const canary = "zcanary7q"
	svc, _ := fixture(t, failingViews{dynamotest.Current(t).DynamoDB()}, Options{})
	_, err := svc.User(t.Context(), "acme", "eu", canary, 0)
	if err == nil {
		t.Fatal("no error: the test proves nothing")
	}
	if strings.Contains(err.Error(), canary) {
		t.Errorf("the error names the user: %v", err)
	}
}
