package asof

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/objects"
)

// ScanDB is what the access report reads with: a Reader's calls and Scan.
type ScanDB interface {
	ReadDB
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

var _ ScanDB = (*dynamodb.Client)(nil)

// Row is one membership interval of the access report: the query API's and the Go
// client's shape (internal/objects), so they cannot drift apart.
type Row = objects.AccessRow

// Period is one period of a user's life: [From, To), To nil while it lasts.
type Period = objects.UserPeriod

// Report reads the access report of table: every membership interval that overlaps
// [from, to) (epoch ms), handed to emit a scan page at a time, so that the answer never
// holds more than a page. It reads the index's pair items (one per group and user, with
// every change of that membership) with one Scan of the read table, pageSize items a
// page (0: DynamoDB's 1 MB pages), and the life items of each page's groups and users in
// one BatchGetItem. The order is the table's, not by name. Check the range first (Check).
func Report(ctx context.Context, db ScanDB, table string, from, to int64, pageSize int32, emit func([]Row) error) error {
	in := &dynamodb.ScanInput{
		TableName:        aws.String(table),
		FilterExpression: aws.String("begins_with(id, :g) AND begins_with(sk, :m)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":g": s("asof#g#"), ":m": s(pairPfx),
		},
		ConsistentRead: aws.Bool(true),
	}
	r := NewReader(db)
	if pageSize > 0 {
		in.Limit = aws.Int32(pageSize)
	}
	for {
		out, err := db.Scan(ctx, in)
		if err != nil {
			return fmt.Errorf("access report: %w", err)
		}
		rows, err := r.reportRows(ctx, table, out.Items, from, to)
		if err != nil {
			return err
		}
		if err := emit(rows); err != nil {
			return err
		}
		if out.LastEvaluatedKey == nil {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// reportRows are the rows of a page of pair items.
func (r *Reader) reportRows(ctx context.Context, table string, pairs []map[string]types.AttributeValue, from, to int64) ([]Row, error) {
	type hit struct {
		gid, h string
		iv     Interval
	}
	var hits []hit
	for _, p := range pairs {
		gid, h := str(p, "g"), str(p, "h")
		for _, iv := range intervals(p) {
			if iv.From < to && iv.To > from {
				hits = append(hits, hit{gid, h, iv})
			}
		}
	}
	if len(hits) == 0 {
		return nil, nil
	}
	var gids, hs []string
	for _, x := range hits {
		gids, hs = append(gids, x.gid), append(hs, x.h)
	}
	glives, err := r.lives(ctx, table, gids, groupLife)
	if err != nil {
		return nil, fmt.Errorf("access report: %w", err)
	}
	ulives, err := r.lives(ctx, table, hs, userLife)
	if err != nil {
		return nil, fmt.Errorf("access report: %w", err)
	}
	rows := make([]Row, 0, len(hits))
	for _, x := range hits {
		gl, ul := glives[x.gid], ulives[x.h]
		iv := x.iv
		// A group's delete, and a user's delete the index could not tie to the group,
		// leave the interval open in the index: the report ends it there.
		for _, life := range []map[string]types.AttributeValue{gl, ul} {
			if d, ok := num(life, "deleted"); ok && d < iv.To {
				if d <= iv.From {
					iv.To = iv.From // not a member for any instant
				} else {
					iv.To, iv.RemovedBy = d, str(life, "deleted_by")
				}
			}
		}
		if iv.To <= iv.From || iv.To <= from {
			continue
		}
		named := max(iv.From, from)
		row := Row{
			Group: heldName(gl, named), GroupID: x.gid,
			AddedAt: time.UnixMilli(iv.From).UTC(), AddedBy: iv.AddedBy,
			UserPeriods: []Period{},
		}
		if iv.To != Open {
			t := time.UnixMilli(iv.To).UTC()
			row.RemovedAt, row.RemovedBy = &t, iv.RemovedBy
		}
		if iv.ExpiresAt > 0 {
			t := time.UnixMilli(iv.ExpiresAt).UTC()
			row.ExpiresAt = &t
		}
		if ul == nil || str(ul, "uid") == "" {
			row.Erased = true
		} else {
			row.UserID, row.Username = str(ul, "uid"), heldName(ul, named)
		}
		if ul != nil {
			for _, p := range periods(ul) {
				if p.from < to && p.to > from {
					pp := Period{Status: p.status, From: time.UnixMilli(p.from).UTC()}
					if p.to != Open {
						t := time.UnixMilli(p.to).UTC()
						pp.To = &t
					}
					row.UserPeriods = append(row.UserPeriods, pp)
				}
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}
