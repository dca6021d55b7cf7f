package queries

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/projections"
)

// nameSpan is one activity partition of a person and the times it covers: a former name
// for the time the person held it, the current name whole (as for anyone).
type nameSpan struct {
	pk     string
	lo, hi string // bounds of the sort key, inclusive
}

// spanEnd sorts after every sort key of its instant (`<time>#<event id>`).
const spanEnd = "#\uffff"

// personActivity serves entity=user:<username> for a user renamed before: the activity of
// its current name and of each former name for the time the person held it, merged
// newest first (docs/storage.md, "Renames"). Its cursor has the shape of the plain
// entity list's (pk and sk of the last item), so a walk may cross between the two.
func (s *Service) personActivity(ctx context.Context, spec listSpec, u projections.UserView, p PageRequest) (Page[Activity], error) {
	spans := []nameSpan{{pk: projections.EntityPK("user:" + u.Username), lo: "0", hi: "9"}}
	for _, f := range u.FormerNames {
		spans = append(spans, nameSpan{pk: projections.EntityPK("user:" + f.Username), lo: f.From, hi: f.Until + spanEnd})
	}
	return s.spansActivity(ctx, spec, spans, p)
}

// groupActivity serves entity=group:<name> for a group renamed before, as personActivity
// does for a person: the current key's activity and each former key's for the time the
// group held it (docs/storage.md, "Group renames").
func (s *Service) groupActivity(ctx context.Context, spec listSpec, g projections.GroupView, p PageRequest) (Page[Activity], error) {
	spans := []nameSpan{{pk: projections.EntityPK("group:" + g.Key), lo: "0", hi: "9"}}
	for _, f := range g.FormerNames {
		spans = append(spans, nameSpan{pk: projections.EntityPK("group:" + f.Key), lo: f.From, hi: f.Until + spanEnd})
	}
	return s.spansActivity(ctx, spec, spans, p)
}

// spansActivity merges the activity of spans, newest first.
func (s *Service) spansActivity(ctx context.Context, spec listSpec, spans []nameSpan, p PageRequest) (Page[Activity], error) {
	limit := p.size()
	after := ""
	if p.Cursor != "" {
		k, err := s.cursors.decode(p.Cursor, spec.id, spec.keyAttrs)
		if err != nil {
			return Page[Activity]{}, err
		}
		after = dynamo.StringAttr(k, "sk")
	}
	var raw []map[string]types.AttributeValue
	for _, sp := range spans {
		hi := sp.hi
		if after != "" && after < hi {
			hi = after
		}
		if hi < sp.lo {
			continue
		}
		out, err := s.db.Query(ctx, &dynamodb.QueryInput{
			TableName:                aws.String(spec.table),
			KeyConditionExpression:   aws.String("#h = :h AND #s BETWEEN :lo AND :hi"),
			ExpressionAttributeNames: map[string]string{"#h": "pk", "#s": "sk"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":h": str(sp.pk), ":lo": str(sp.lo), ":hi": str(hi),
			},
			ScanIndexForward: aws.Bool(false),
			// One more than a page, and one for an item at the cursor itself: then a span
			// that has more always fills more than a page.
			Limit: aws.Int32(int32(limit + 2)),
		})
		if err != nil {
			return Page[Activity]{}, fmt.Errorf("query %s %s: %w", spec.table, spec.id.List, storageError(err))
		}
		for _, it := range out.Items {
			if sk := dynamo.StringAttr(it, "sk"); after == "" || sk < after {
				raw = append(raw, it)
			}
		}
	}
	slices.SortFunc(raw, func(a, b map[string]types.AttributeValue) int {
		return strings.Compare(dynamo.StringAttr(b, "sk"), dynamo.StringAttr(a, "sk"))
	})
	raw = slices.CompactFunc(raw, func(a, b map[string]types.AttributeValue) bool {
		return dynamo.StringAttr(a, "pk") == dynamo.StringAttr(b, "pk") && dynamo.StringAttr(a, "sk") == dynamo.StringAttr(b, "sk")
	})
	page := Page[Activity]{Items: make([]Activity, 0, min(limit, len(raw)))}
	for _, it := range raw[:min(limit, len(raw))] {
		a, err := projections.DecodeActivity(it)
		if err != nil {
			return Page[Activity]{}, err
		}
		v, err := activityJSON(a)
		if err != nil {
			return Page[Activity]{}, err
		}
		page.Items = append(page.Items, v)
	}
	if len(raw) > limit {
		last := raw[limit-1]
		cur, err := s.cursors.encode(spec.id, map[string]types.AttributeValue{"pk": last["pk"], "sk": last["sk"]})
		if err != nil {
			return Page[Activity]{}, fmt.Errorf("cursor of %s: %w", spec.id.List, err)
		}
		page.NextCursor = &cur
	}
	return page, nil
}
