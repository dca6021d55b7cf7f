package queries

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/ssodir/ssodir/internal/apperr"
)

const (
	// batchGetMax is DynamoDB's limit of keys per BatchGetItem.
	batchGetMax = 100
	// unprocessedAttempts bounds the retries of keys DynamoDB left unprocessed (it does so
	// under throttling); after them the request is answered unavailable.
	unprocessedAttempts  = 6
	firstUnprocessedWait = 25 * time.Millisecond
)

// batchGet reads the `config` items of the partitions ids from table; the result maps an id
// to its item and lacks the ids that have none.
func (s *Service) batchGet(ctx context.Context, table string, ids []string) (map[string]map[string]types.AttributeValue, error) {
	found := make(map[string]map[string]types.AttributeValue, len(ids))
	seen := make(map[string]bool, len(ids))
	keys := make([]map[string]types.AttributeValue, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			keys = append(keys, viewKey(id))
		}
	}
	for len(keys) > 0 {
		n := min(len(keys), batchGetMax)
		if err := s.batchGetChunk(ctx, table, keys[:n], found); err != nil {
			return nil, err
		}
		keys = keys[n:]
	}
	return found, nil
}

func (s *Service) batchGetChunk(ctx context.Context, table string, keys []map[string]types.AttributeValue, found map[string]map[string]types.AttributeValue) error {
	wait := firstUnprocessedWait
	for attempt := 0; ; attempt++ {
		out, err := s.db.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{
			RequestItems: map[string]types.KeysAndAttributes{table: {Keys: keys}},
		})
		if err != nil {
			return fmt.Errorf("batch get from %s: %w", table, storageError(err))
		}
		for _, item := range out.Responses[table] {
			if id, ok := item["id"].(*types.AttributeValueMemberS); ok {
				found[id.Value] = item
			}
		}
		rest, ok := out.UnprocessedKeys[table]
		if !ok || len(rest.Keys) == 0 {
			return nil
		}
		if attempt+1 == unprocessedAttempts {
			return apperr.Unavailable(fmt.Errorf("batch get from %s: %d keys left unprocessed", table, len(rest.Keys)), storageRetryAfter)
		}
		keys = rest.Keys
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return apperr.Unavailable(errors.Join(errors.New("batch get interrupted"), ctx.Err()), storageRetryAfter)
		case <-timer.C:
		}
		wait = min(2*wait, 500*time.Millisecond)
	}
}
