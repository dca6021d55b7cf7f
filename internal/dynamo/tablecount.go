package dynamo

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// CountTables counts the tables whose names start with prefix+"_" (a stage's tables).
// ListTables answers in name order, so it starts at the prefix and stops past it: a
// stage's count costs a page per 100 of its tables, not a listing of the account.
func CountTables(ctx context.Context, db *dynamodb.Client, prefix string) (int, error) {
	p := prefix + "_"
	// Start just before the stage's names: prefix+"Z" sorts before prefix+"_" ("Z" is the
	// highest byte a table name may have below "_"); the few names between are skipped.
	in := &dynamodb.ListTablesInput{}
	if len(prefix) >= 2 {
		in.ExclusiveStartTableName = aws.String(prefix + "Z")
	}
	n := 0
	for {
		out, err := db.ListTables(ctx, in)
		if err != nil {
			return 0, fmt.Errorf("list tables: %w", translate(err))
		}
		for _, name := range out.TableNames {
			if !strings.HasPrefix(name, p) {
				if name > p {
					return n, nil
				}
				continue
			}
			n++
		}
		if out.LastEvaluatedTableName == nil {
			return n, nil
		}
		in.ExclusiveStartTableName = out.LastEvaluatedTableName
	}
}

// CountTables counts the stage's tables (those under the store's prefix).
func (s *TenantStore) CountTables(ctx context.Context) (int, error) {
	return CountTables(ctx, s.db, s.names.Prefix)
}
