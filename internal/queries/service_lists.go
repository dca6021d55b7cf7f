package queries

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/ssodir/ssodir/internal/apperr"
	"github.com/ssodir/ssodir/internal/dynamo"
	"github.com/ssodir/ssodir/internal/erasure"
	"github.com/ssodir/ssodir/internal/events"
	"github.com/ssodir/ssodir/internal/identity"
	"github.com/ssodir/ssodir/internal/objects"
	"github.com/ssodir/ssodir/internal/projections"
)

// Users is a page of the users list q selects.
func (s *Service) Users(ctx context.Context, system, tenant string, q UsersQuery) (Page[objects.User], error) {
	q, err := q.normalize()
	if err != nil {
		return Page[objects.User]{}, err
	}
	t, err := s.tables(ctx, system, tenant)
	if err != nil {
		return Page[objects.User]{}, err
	}
	var spec listSpec
	switch {
	case q.Email != "":
		spec.id = listID{List: "users.email", Params: []string{q.Email}}
		spec.table, spec.ascending = t.users, true
		spec.index = dynamo.IndexUserEmail
		spec.keyCond = "#h = :h AND #r = :r"
		spec.names = map[string]string{"#h": "email", "#r": "sk"}
		spec.values = map[string]types.AttributeValue{":h": str(projections.EmailKey(q.Email)), ":r": str(dynamo.SKConfig)}
		spec.keyAttrs = indexKey("email", "sk")
	case q.UsernamePrefix != "":
		// Users carry name_sort = username, so GroupNameGSI's `user` partition lists
		// them by username: no index of its own, and tables made before need none.
		spec = namePrefixSpec(t, "users.username_prefix", dynamo.IndexGroupName, "name_sort", q.UsernamePrefix)
	case q.LastNamePrefix != "":
		spec = namePrefixSpec(t, "users.last_name_prefix", dynamo.IndexUserLastName, "last_name_sort", q.LastNamePrefix)
	case q.FirstNamePrefix != "":
		spec = namePrefixSpec(t, "users.first_name_prefix", dynamo.IndexUserFirstName, "first_name_sort", q.FirstNamePrefix)
	default:
		spec.id = listID{List: "users.updated", Params: []string{string(q.Order)}}
		spec.table = t.users
		spec.index = dynamo.IndexUserUpdatedAt
		spec.keyCond = "#h = :h"
		spec.names = map[string]string{"#h": "kind"}
		spec.values = map[string]types.AttributeValue{":h": str(kindUser)}
		spec.ascending = q.Order == OrderUpdatedAsc
		spec.keyAttrs = indexKey("kind", "updated_sort")
	}
	spec.id.System, spec.id.Tenant = system, tenant
	page, err := runList(ctx, s.db, s.cursors, spec, q.Page, acceptUsers)
	return page, s.fail(t, err)
}

// Values of the `kind` attribute, the partition key of the by-name and by-time indexes.
const (
	kindUser  = string(events.KindUser)
	kindGroup = string(events.KindGroup)
)

func namePrefixSpec(t tables, list, index, sortAttr, prefix string) listSpec {
	return listSpec{
		id:        listID{List: list, Params: []string{prefix}},
		table:     t.users,
		index:     index,
		keyCond:   "#h = :h AND begins_with(#r, :r)",
		names:     map[string]string{"#h": "kind", "#r": sortAttr},
		values:    map[string]types.AttributeValue{":h": str(kindUser), ":r": str(projections.NamePrefix(prefix))},
		ascending: true,
		keyAttrs:  indexKey("kind", sortAttr),
	}
}

func acceptUsers(_ context.Context, raw []map[string]types.AttributeValue) ([]*objects.User, error) {
	out := make([]*objects.User, len(raw))
	for i, item := range raw {
		u, err := projections.DecodeUser(item)
		if err != nil {
			return nil, err
		}
		// The indexes are sparse and tombstones carry no index keys; this only guards
		// against a view written otherwise.
		if u.IsDeleted || u.Username == "" {
			continue
		}
		v := userJSON(u)
		out[i] = &v
	}
	return out, nil
}

// Groups is a page of all groups, by name case-insensitively.
func (s *Service) Groups(ctx context.Context, system, tenant string, p PageRequest) (Page[objects.Group], error) {
	if err := p.check(); err != nil {
		return Page[objects.Group]{}, err
	}
	t, err := s.tables(ctx, system, tenant)
	if err != nil {
		return Page[objects.Group]{}, err
	}
	spec := listSpec{
		id:        listID{System: system, Tenant: tenant, List: "groups"},
		table:     t.users,
		index:     dynamo.IndexGroupName,
		keyCond:   "#h = :h",
		names:     map[string]string{"#h": "kind"},
		values:    map[string]types.AttributeValue{":h": str(kindGroup)},
		ascending: true,
		keyAttrs:  indexKey("kind", "name_sort"),
	}
	page, err := runList(ctx, s.db, s.cursors, spec, p, func(_ context.Context, raw []map[string]types.AttributeValue) ([]*objects.Group, error) {
		out := make([]*objects.Group, len(raw))
		for i, item := range raw {
			g, err := projections.DecodeGroup(item)
			if err != nil {
				return nil, err
			}
			if g.IsDeleted || g.Name == "" {
				continue
			}
			v := groupJSON(g)
			out[i] = &v
		}
		return out, nil
	})
	return page, s.fail(t, err)
}

// UserGroups is a page of the groups a user belongs to, by name case-insensitively.
func (s *Service) UserGroups(ctx context.Context, system, tenant, username string, p PageRequest) (Page[objects.Group], error) {
	if err := p.check(); err != nil {
		return Page[objects.Group]{}, err
	}
	name, ok := identity.NormalizeUsername(username)
	if !ok {
		return Page[objects.Group]{}, apperr.NotFound("user")
	}
	t, err := s.tables(ctx, system, tenant)
	if err != nil {
		return Page[objects.Group]{}, err
	}
	user, found, err := s.getUser(ctx, t, name, false)
	if err != nil {
		return Page[objects.Group]{}, s.fail(t, err)
	}
	if !found || user.IsDeleted {
		return Page[objects.Group]{}, apperr.NotFound("user")
	}
	spec := listSpec{
		id:        listID{System: system, Tenant: tenant, List: "users.groups", Params: []string{name}},
		table:     t.users,
		index:     dynamo.IndexUserGroup,
		keyCond:   "#h = :h",
		names:     map[string]string{"#h": "member_id"},
		values:    map[string]types.AttributeValue{":h": str(name)},
		ascending: true,
		keyAttrs:  indexKey("member_id", "id"),
	}
	page, err := runList(ctx, s.db, s.cursors, spec, p, func(ctx context.Context, raw []map[string]types.AttributeValue) ([]*objects.Group, error) {
		members, err := decodeMembers(raw)
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(members))
		for i, m := range members {
			ids[i] = dynamo.GroupID(m.GroupKey)
		}
		views, err := s.batchGet(ctx, t.users, ids)
		if err != nil {
			return nil, err
		}
		out := make([]*objects.Group, len(members))
		for i, m := range members {
			item, ok := views[ids[i]]
			if !ok {
				continue
			}
			g, err := projections.DecodeGroup(item)
			if err != nil {
				return nil, err
			}
			if currentMembership(m, user, g) {
				v := groupJSON(g)
				v.ExpiresAt = m.ExpiresAt
				out[i] = &v
			}
		}
		return out, nil
	})
	return page, s.fail(t, err)
}

// GroupMembers is a page of a group's members, as users, by username.
func (s *Service) GroupMembers(ctx context.Context, system, tenant, name string, p PageRequest) (Page[objects.User], error) {
	if err := p.check(); err != nil {
		return Page[objects.User]{}, err
	}
	if !identity.ValidGroupName(name) {
		return Page[objects.User]{}, apperr.NotFound("group")
	}
	key := identity.GroupKey(name)
	t, err := s.tables(ctx, system, tenant)
	if err != nil {
		return Page[objects.User]{}, err
	}
	group, found, err := s.getGroup(ctx, t, key, false)
	if err != nil {
		return Page[objects.User]{}, s.fail(t, err)
	}
	if !found || group.IsDeleted {
		return Page[objects.User]{}, apperr.NotFound("group")
	}
	spec := listSpec{
		id:        listID{System: system, Tenant: tenant, List: "groups.members", Params: []string{key}},
		table:     t.users,
		index:     dynamo.IndexGroupMember,
		keyCond:   "#h = :h",
		names:     map[string]string{"#h": "member_of"},
		values:    map[string]types.AttributeValue{":h": str(key)},
		ascending: true,
		keyAttrs:  indexKey("member_of", "member_id"),
	}
	page, err := runList(ctx, s.db, s.cursors, spec, p, func(ctx context.Context, raw []map[string]types.AttributeValue) ([]*objects.User, error) {
		members, err := decodeMembers(raw)
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(members))
		for i, m := range members {
			ids[i] = dynamo.UserID(m.MemberID)
		}
		views, err := s.batchGet(ctx, t.users, ids)
		if err != nil {
			return nil, err
		}
		out := make([]*objects.User, len(members))
		for i, m := range members {
			item, ok := views[ids[i]]
			if !ok {
				continue
			}
			u, err := projections.DecodeUser(item)
			if err != nil {
				return nil, err
			}
			if currentMembership(m, u, group) {
				v := userJSON(u)
				v.ExpiresAt = m.ExpiresAt
				out[i] = &v
			}
		}
		return out, nil
	})
	return page, s.fail(t, err)
}

func decodeMembers(raw []map[string]types.AttributeValue) ([]projections.MembershipView, error) {
	members := make([]projections.MembershipView, len(raw))
	for i, item := range raw {
		m, err := projections.DecodeMembership(item)
		if err != nil {
			return nil, err
		}
		members[i] = m
	}
	return members, nil
}

// Activity is a page of the activity feed of one entity, actor or UTC day, newest first.
func (s *Service) Activity(ctx context.Context, system, tenant string, q ActivityQuery) (Page[Activity], error) {
	q, err := q.normalize()
	if err != nil {
		return Page[Activity]{}, err
	}
	t, err := s.tables(ctx, system, tenant)
	if err != nil {
		return Page[Activity]{}, err
	}
	spec := listSpec{table: t.activities, keyCond: "#h = :h"}
	switch {
	case q.Entity != "":
		spec.id = listID{List: "activity.entity", Params: []string{q.Entity}}
		spec.names = map[string]string{"#h": "pk"}
		spec.values = map[string]types.AttributeValue{":h": str(projections.EntityPK(q.Entity))}
		spec.keyAttrs = activitiesTableKey
	case q.Actor != "":
		spec.id = listID{List: "activity.actor", Params: []string{q.Actor}}
		spec.index = dynamo.IndexActor
		spec.names = map[string]string{"#h": "actor_pk"}
		spec.values = map[string]types.AttributeValue{":h": str(projections.ActorPK(q.Actor))}
		spec.keyAttrs = []string{"pk", "sk", "actor_pk"}
	default:
		spec.id = listID{List: "activity.day", Params: []string{q.Day}}
		spec.index = dynamo.IndexDay
		spec.names = map[string]string{"#h": "day_pk"}
		day, _ := time.Parse(dayLayout, q.Day) // normalize checked it
		spec.values = map[string]types.AttributeValue{":h": str(projections.DayPK(day))}
		spec.keyAttrs = []string{"pk", "sk", "day_pk"}
	}
	spec.id.System, spec.id.Tenant = system, tenant
	if name, ok := strings.CutPrefix(q.Entity, "user:"); ok {
		// A person renamed before has a history under former names too.
		u, found, err := s.getUser(ctx, t, name, false)
		if err != nil {
			return Page[Activity]{}, s.fail(t, err)
		}
		if found && !u.IsDeleted && len(u.FormerNames) > 0 {
			page, err := s.personActivity(ctx, spec, u, q.Page)
			return page, s.fail(t, err)
		}
	}
	if key, ok := strings.CutPrefix(q.Entity, "group:"); ok {
		// A group renamed before has a history under former names too.
		g, found, err := s.getGroup(ctx, t, key, false)
		if err != nil {
			return Page[Activity]{}, s.fail(t, err)
		}
		if found && !g.IsDeleted && len(g.FormerNames) > 0 {
			page, err := s.groupActivity(ctx, spec, g, q.Page)
			return page, s.fail(t, err)
		}
	}
	page, err := runList(ctx, s.db, s.cursors, spec, q.Page, func(_ context.Context, raw []map[string]types.AttributeValue) ([]*Activity, error) {
		out := make([]*Activity, len(raw))
		for i, item := range raw {
			a, err := projections.DecodeActivity(item)
			if err != nil {
				return nil, err
			}
			v, err := activityJSON(a)
			if err != nil {
				return nil, err
			}
			out[i] = &v
		}
		return out, nil
	})
	return page, s.fail(t, err)
}

// Erasure is one erasure of the tenant as the ledger shows it (API.md: never the erased
// identifiers): unknown tenant or erasure, 404.
func (s *Service) Erasure(ctx context.Context, system, tenant, id string) (erasure.Entry, error) {
	if _, err := s.tables(ctx, system, tenant); err != nil {
		return erasure.Entry{}, err
	}
	if _, err := uuid.Parse(id); err != nil {
		return erasure.Entry{}, apperr.NotFound("erasure")
	}
	e, err := erasure.ReadEntry(ctx, s.db, s.erasures, system, tenant, id)
	if err != nil {
		err = storageError(err)
		if errors.Is(err, dynamo.ErrTableMissing) {
			// No ledger yet (no command API has run): no erasure either.
			return erasure.Entry{}, apperr.NotFound("erasure")
		}
		return erasure.Entry{}, err
	}
	return e, nil
}
