package dynamo

import (
	"context"
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/internal/commands"
)

// MoveMembers moves a recorded group rename's memberships (docs/storage.md, "Group
// renames") with BatchWriteItem, 25 a request, up to membersWriteConcurrency requests at
// a time, in four phases, each ended before the next starts: the users' pointers to the
// new key, the memberships under the new key (at the rename's version), the memberships
// under the old key deleted, then the pointers to the old key. A membership is so never
// without its pointer, and a user delete that read the user's pointers at any point finds
// every membership it must remove (or the mover's check that the users still live does).
// Erased members are skipped: their erasure removed the membership. before is called
// before every request, each retry included.
func (s *CommandStore) MoveMembers(ctx context.Context, t commands.Tenant, m commands.MembersMove, before func(context.Context) error) error {
	var pointers, members, removals, unpointed []types.WriteRequest
	for _, mm := range m.Members {
		if mm.Erased {
			continue
		}
		at := str(FormatTime(mm.AddedAt))
		pointers = append(pointers, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			"id": str(UserID(mm.Username)), "sk": str(GroupPointerSK(m.To)), "group_key": str(m.To), "added_at": at,
		}}})
		members = append(members, types.WriteRequest{PutRequest: &types.PutRequest{
			Item: withExpiry(MemberItem(m.To, mm.Username, mm.UserID, mm.MembershipRev, m.Version, FormatTime(mm.AddedAt)), mm.ExpiresAt),
		}})
		removals = append(removals, types.WriteRequest{DeleteRequest: &types.DeleteRequest{
			Key: map[string]types.AttributeValue{"id": str(GroupID(m.From)), "sk": str(MemberSK(mm.Username))},
		}})
		unpointed = append(unpointed, types.WriteRequest{DeleteRequest: &types.DeleteRequest{
			Key: map[string]types.AttributeValue{"id": str(UserID(mm.Username)), "sk": str(GroupPointerSK(m.From))},
		}})
	}
	table := s.table(t)
	for _, phase := range [][]types.WriteRequest{pointers, members, removals, unpointed} {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(membersWriteConcurrency)
		for batch := range slices.Chunk(phase, 25) {
			g.Go(func() error { return batchWriteGuarded(gctx, s.db, table, batch, before) })
		}
		if err := g.Wait(); err != nil {
			return fmt.Errorf("move members of %s to %s v%d: %w", m.From, m.To, m.Version, err)
		}
	}
	return nil
}
