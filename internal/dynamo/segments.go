package dynamo

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

// A resumable Scan (an erasure's first pass, the member index's backfill) is cut into
// segments of about segmentBytes each, or of a number of items its caller chooses, from
// the table's size as DescribeTable last reported it: a bounded call stops between
// segments, and its position is a segment number, never a key (a Scan's last key could
// name someone).
const (
	segmentBytes = 256 << 10
	maxSegments  = 100000
)

// TableDescriber is the part of the DynamoDB client ScanSegments uses.
type TableDescriber interface {
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// ScanSegments is the number of segments a resumable Scan of table is cut into, with
// about perSegment items each at most. The error is DescribeTable's, untranslated.
func ScanSegments(ctx context.Context, db TableDescriber, table string, perSegment int) (int, error) {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return 0, err
	}
	n := 1
	if out.Table != nil {
		n = max(n, int(aws.ToInt64(out.Table.TableSizeBytes)/segmentBytes)+1, int(aws.ToInt64(out.Table.ItemCount)/int64(perSegment))+1)
	}
	return min(n, maxSegments), nil
}
