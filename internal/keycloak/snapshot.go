package keycloak

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"golang.org/x/sync/errgroup"
)

// RealmSnapshot is a realm as one reconcile read it: every user, every top-level group, and
// the members of the groups that carry ssodir_id. Reading it takes GET requests only, a
// page at a time (no request per user).
type RealmSnapshot struct {
	Realm  string
	Users  []User
	Groups []Group
	// Members maps the Keycloak id of each group that carries ssodir_id to the Keycloak
	// ids of its members.
	Members map[string][]string
}

// DirectorySnapshot is a tenant's directory as one reconcile read it.
type DirectorySnapshot struct {
	Users  []DirectoryUser
	Groups []DirectoryGroup
}

// ReadRealm pages through the realm, pageSize objects a request (500 when 0). Offset
// paging over a realm that changes meanwhile can repeat an object: repeats are dropped.
func ReadRealm(ctx context.Context, c *Client, pageSize int) (*RealmSnapshot, error) {
	if pageSize <= 0 {
		pageSize = 500
	}
	s := &RealmSnapshot{Realm: c.Realm(), Members: map[string][]string{}}
	seen := map[string]bool{}
	for g, err := range c.AllGroups(ctx, pageSize) {
		if err != nil {
			return nil, fmt.Errorf("keycloak reconcile: read groups: %w", err)
		}
		if !seen[g.ID] {
			seen[g.ID] = true
			s.Groups = append(s.Groups, g)
		}
	}
	clear(seen)
	for u, err := range c.AllUsers(ctx, UserQuery{}, pageSize) {
		if err != nil {
			return nil, fmt.Errorf("keycloak reconcile: read users: %w", err)
		}
		if !seen[u.ID] {
			seen[u.ID] = true
			s.Users = append(s.Users, u)
		}
	}
	// Memberships are read per managed group (one paged list each) rather than per user:
	// a realm has far fewer groups than users.
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(c.cfg.Concurrency)
	for _, grp := range s.Groups {
		if grp.SsodirID() == "" {
			continue
		}
		g.Go(func() error {
			var ids []string
			for m, err := range c.AllGroupMembers(gctx, grp.ID, pageSize) {
				if err != nil {
					return fmt.Errorf("keycloak reconcile: read members of group %s: %w", grp.Name, err)
				}
				ids = append(ids, m.ID)
			}
			mu.Lock()
			defer mu.Unlock()
			s.Members[grp.ID] = ids
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return s, nil
}

// ReadDirectory reads the whole directory and checks that ids, usernames, emails and group
// names are unique and present: a directory read that breaks them is not planned against.
func ReadDirectory(ctx context.Context, dir Directory) (*DirectorySnapshot, error) {
	s := &DirectorySnapshot{}
	ids, names := map[string]bool{}, map[string]bool{}
	for g, err := range dir.Groups(ctx) {
		if err != nil {
			return nil, fmt.Errorf("keycloak reconcile: read directory groups: %w", err)
		}
		if err := checkID("group", g.ID); err != nil {
			return nil, err
		}
		key := strings.ToLower(g.Name)
		if g.Name == "" || ids[g.ID] || names[key] {
			return nil, fmt.Errorf("keycloak reconcile: directory group %s (%q) is empty, or its id or name is repeated", g.ID, g.Name)
		}
		ids[g.ID], names[key] = true, true
		s.Groups = append(s.Groups, g)
	}
	clear(ids)
	usernames, emails := map[string]bool{}, map[string]bool{}
	for u, err := range dir.Users(ctx) {
		if err != nil {
			return nil, fmt.Errorf("keycloak reconcile: read directory users: %w", err)
		}
		if err := checkID("user", u.ID); err != nil {
			return nil, err
		}
		un, em := strings.ToLower(u.Username), strings.ToLower(u.Email)
		if un == "" || ids[u.ID] || usernames[un] || (em != "" && emails[em]) {
			return nil, fmt.Errorf("keycloak reconcile: directory user %s has no username, or its id, username or email is repeated", u.ID)
		}
		ids[u.ID], usernames[un] = true, true
		if em != "" {
			emails[em] = true
		}
		s.Users = append(s.Users, u)
	}
	sort.Slice(s.Groups, func(i, j int) bool { return s.Groups[i].Name < s.Groups[j].Name })
	sort.Slice(s.Users, func(i, j int) bool {
		return strings.ToLower(s.Users[i].Username) < strings.ToLower(s.Users[j].Username)
	})
	return s, nil
}
