package projections

import "github.com/ssodir/ssodir/internal/events"

// reduceMemberExpirySet projects a change of a member's expiry: the membership is written
// again at the change's version, with the same revision and start and the new expiry.
func reduceMemberExpirySet(e events.Envelope) (Effects, error) {
	p, ok := e.Payload.(*events.GroupMemberExpirySet)
	if !ok {
		return Effects{}, payloadMismatch(e)
	}
	g, err := groupState(e)
	if err != nil {
		return Effects{}, err
	}
	fx, err := upsert(liveGroup(g), g.Version)
	if err != nil {
		return Effects{}, err
	}
	if p.Erased {
		return fx, nil // an erased member's membership is gone with the member
	}
	add, err := memberAdd(e, g, events.Member{Username: p.Username, UserID: p.UserID, MembershipRev: p.MembershipRev, ExpiresAt: p.ExpiresAt})
	if err != nil {
		return Effects{}, err
	}
	if add, err = withAddedAt(add, events.RenamedMembership{AddedAt: p.AddedAt}); err != nil {
		return Effects{}, err
	}
	fx.MemberAdds = []MemberAdd{add}
	return fx, nil
}
