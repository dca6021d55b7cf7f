package asof

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Erase removes what names the users of hashes (identity.ErasedIDHash of their ids) from
// the index of table: each one's name holdings, and the id and names on its life item,
// which keeps only the hash, its deletion instant and `erased`. The intervals stay: they
// hold the hash alone, and read as an erased member. Safe to run again; a table without
// the items (or without the table: ErrTableMissing is the caller's) is left as it is.
func Erase(ctx context.Context, db Eraser, table string, hashes []string) error {
	for _, h := range hashes {
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key(userLife(h), lifeSK), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return fmt.Errorf("as-of erase: %w", err)
		}
		if out.Item == nil {
			continue
		}
		var remove []string
		names := map[string]string{}
		i := 0
		for a, v := range out.Item {
			if !isNameAttr(a) && a != "uid" {
				continue
			}
			p := fmt.Sprintf("#r%d", i)
			i++
			names[p] = a
			remove = append(remove, p)
			if sv, ok := v.(*types.AttributeValueMemberS); ok && isNameAttr(a) {
				if _, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key(userName(sv.Value), a[1:]+"#"+h)}); err != nil {
					return fmt.Errorf("as-of erase: %w", err)
				}
			}
		}
		expr := "SET erased = :t"
		if len(remove) > 0 {
			expr += " REMOVE " + strings.Join(remove, ", ")
		}
		in := &dynamodb.UpdateItemInput{
			TableName: aws.String(table), Key: key(userLife(h), lifeSK), UpdateExpression: aws.String(expr),
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberBOOL{Value: true}},
			ConditionExpression:       aws.String("attribute_exists(id)"),
		}
		if len(names) > 0 {
			in.ExpressionAttributeNames = names
		}
		_, err = db.UpdateItem(ctx, in)
		var ccf *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &ccf) {
			return fmt.Errorf("as-of erase: %w", err)
		}
	}
	return nil
}
