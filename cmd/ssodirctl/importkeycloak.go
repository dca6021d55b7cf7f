package main

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"

	"github.com/ssodir/ssodir/client"
	"github.com/ssodir/ssodir/internal/commands"
	"github.com/ssodir/ssodir/internal/keycloak"
)

// attrSsodirVersion is the directory version a Keycloak object reflects (API.md, "Keycloak
// sync"): keycloak-sync never writes a state older than it.
const attrSsodirVersion = "ssodir_version"

// kcPlan is what an import of a realm will do.
type kcPlan struct {
	groups    []*kcGroup
	users     []*kcUser
	members   []kcMember
	managed   int // objects that already carry ssodir_id and match the directory
	conflicts []conflictOut
}

type kcGroup struct {
	kc     keycloak.Group
	exists bool
	dir    *client.Group // set once created (or found from this import's earlier run)
	// version is the group's directory version after the import's memberships.
	version int64
}

type kcUser struct {
	kc  keycloak.User
	dir *client.User
	// exists: the directory holds the username already (see planKeycloak).
	exists bool
}

type kcMember struct {
	user  *kcUser
	group string // directory group name
	gref  *kcGroup
}

func importKeycloak(s *settings) *cobra.Command {
	var url, realm, clientID string
	var dryRun bool
	var concurrency int
	var rb readBack
	cmd := &cobra.Command{
		Use:   "keycloak --url URL --realm REALM --client-id ID",
		Short: "Adopt an existing Keycloak realm: copy its users, groups and memberships into the tenant",
		Long: `Read an existing realm's users, groups and memberships through the Keycloak Admin API
(client credentials; the client secret comes from SSODIR_KEYCLOAK_CLIENT_SECRET), create
them in the tenant, then give each Keycloak object the attributes ssodir_id (the
directory's id for it) and ssodir_version, so that keycloak-sync adopts it instead of
creating a duplicate. Passwords stay in Keycloak: they are never read nor written.

Conflicts are reported and left alone, never guessed: two realm users with one email, a
username, email or group name the directory already holds for another object, a name
ssodir does not accept, an object that carries an ssodir_id this tenant does not hold.
Subgroups are not imported (ssodir's groups are flat): a group that has some is
imported, and its subgroups are reported as a conflict. Objects that already carry their
ssodir_id are left as they are, so a second run changes nothing; a run that stopped
midway is resumed by running it again (each write has an Idempotency-Key).

The realm's unmanaged-attribute policy must keep attributes such as ssodir_id (Realm
settings, General, Unmanaged attributes: Enabled), as keycloak-sync needs too.`,
		Example: `  export SSODIR_KEYCLOAK_CLIENT_SECRET=...
  ssodirctl import keycloak --url https://sso.example.com --realm eu --client-id ssodir --dry-run
  ssodirctl import keycloak --url https://sso.example.com --realm eu --client-id ssodir`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			secret := s.env.Value("SSODIR_KEYCLOAK_CLIENT_SECRET")
			kcfg := keycloak.ClientConfig{BaseURL: url, Realm: realm, ClientID: clientID, ClientSecret: secret, Concurrency: concurrency}
			if err := kcfg.Validate(); err != nil {
				return usagef("%v (the secret comes from SSODIR_KEYCLOAK_CLIENT_SECRET)", err)
			}
			if concurrency < 1 || concurrency > 64 {
				return usagef("--concurrency %d: want 1 to 64", concurrency)
			}
			t, p, err := s.tenantPrinter(cmd.Context())
			if err != nil {
				return err
			}
			if tn, err := t.Get(cmd.Context()); err != nil {
				return err
			} else if tn.Status != client.TenantActive {
				return fmt.Errorf("tenant %s/%s is %s; import once it is active", s.system, s.tenant, tn.Status)
			}
			kc := keycloak.New(kcfg, nil)
			plan, err := planKeycloak(cmd.Context(), kc, t)
			if err != nil {
				return err
			}
			if dryRun {
				return printPlan(p, plan)
			}
			sum, err := applyKeycloak(cmd.Context(), s, kc, t, plan, concurrency)
			if err != nil {
				return fmt.Errorf("import stopped (run it again to resume; nothing is written twice): %w", err)
			}
			users := map[string]int64{}
			for _, ku := range plan.users {
				if ku.dir != nil {
					users[ku.dir.Username] = ku.dir.Version
				}
			}
			rb.users(cmd.Context(), s, t, users, concurrency)
			for _, kg := range plan.groups {
				if kg.dir != nil {
					rb.group(cmd.Context(), s, t, kg.dir.Name, max(kg.version, kg.dir.Version))
				}
			}
			if err := sum.print(p, "keycloak users and groups"); err != nil {
				return err
			}
			return sum.result()
		},
	}
	f := cmd.Flags()
	f.StringVar(&url, "url", "", "Keycloak base URL (without /auth unless the server uses it)")
	f.StringVar(&realm, "realm", "", "the realm to import")
	f.StringVar(&clientID, "client-id", "", "client with the client credentials grant and the realm-management roles view-users and manage-users")
	f.BoolVar(&dryRun, "dry-run", false, "show what would be created and the conflicts; write nothing")
	f.IntVar(&concurrency, "concurrency", 4, "requests in flight at once, to each side")
	rb.add(cmd)
	return cmd
}

// planKeycloak reads both sides and decides, object by object.
func planKeycloak(ctx context.Context, kc *keycloak.Client, t *client.TenantClient) (*kcPlan, error) {
	plan := &kcPlan{}
	conflict := func(name, why string) { plan.conflicts = append(plan.conflicts, conflictOut{Name: name, Reason: why}) }

	dirUsers, dirEmails := map[string]client.User{}, map[string]string{}
	for u, err := range t.Users(ctx, client.UserFilter{Limit: 500}) {
		if err != nil {
			return nil, err
		}
		dirUsers[u.Username] = u
		if u.Email != "" {
			dirEmails[u.Email] = u.Username
		}
	}
	dirGroups := map[string]client.Group{}
	for g, err := range t.Groups(ctx, 500) {
		if err != nil {
			return nil, err
		}
		dirGroups[strings.ToLower(g.Name)] = g
	}

	var kcUsers []keycloak.User
	for u, err := range kc.AllUsers(ctx, keycloak.UserQuery{}, 100) {
		if err != nil {
			return nil, fmt.Errorf("read the realm's users: %w", err)
		}
		kcUsers = append(kcUsers, u)
	}
	emailOwners := sharedEmails(kcUsers)
	byKCID := map[string]*kcUser{}
	for _, u := range kcUsers {
		name := "user " + u.Username
		if id := u.SsodirID(); id != "" {
			if d, ok := dirUsers[strings.ToLower(u.Username)]; ok && d.ID == id {
				plan.managed++
			} else {
				conflict(name, "carries ssodir_id "+id+", which is not this tenant's user "+u.Username+"; left to keycloak-sync")
			}
			continue
		}
		if owners := emailOwners[strings.ToLower(u.Email)]; len(owners) > 1 {
			conflict(name, "the realm's users "+strings.Join(owners, ", ")+" share the email "+strings.ToLower(u.Email))
			continue
		}
		nu := newUserOf(u)
		c := commands.CreateUser{Username: nu.Username, Email: nu.Email, FirstName: nu.FirstName, LastName: nu.LastName, Attributes: nu.Attributes}
		if err := c.Validate(); err != nil {
			conflict(name, "ssodir does not accept it: "+strings.Join(fieldProblems(err), "; "))
			continue
		}
		// A username the directory holds may be this import's own, from a run that stopped
		// before marking it: the create's Idempotency-Key tells (the API answers it
		// again); if not, the API answers 409 and it is a conflict.
		_, exists := dirUsers[c.Username]
		if owner, ok := dirEmails[c.Email]; ok && c.Email != "" && owner != c.Username {
			conflict(name, "the directory already holds the email "+c.Email+" for user "+owner)
			continue
		}
		ku := &kcUser{kc: u, exists: exists}
		plan.users = append(plan.users, ku)
		byKCID[u.ID] = ku
	}

	for g, err := range kc.AllGroups(ctx, 100) {
		if err != nil {
			return nil, fmt.Errorf("read the realm's groups: %w", err)
		}
		name := "group " + g.Name
		if n := max(g.SubGroupCount, len(g.SubGroups)); n > 0 {
			// ssodir's groups are flat, and a flattened name (Staff/Backend) is not one it
			// accepts nor one keycloak-sync would find again: say so rather than guess.
			conflict("subgroups of "+name, fmt.Sprintf("%d subgroups not imported: ssodir's groups are flat, and a subgroup's members "+
				"do not become members of %s; move them to top-level groups in Keycloak, or create them in ssodir", n, g.Name))
		}
		var target *kcGroup
		dirName := g.Name
		if id := g.SsodirID(); id != "" {
			if d, ok := dirGroups[strings.ToLower(g.Name)]; ok && d.ID == id {
				plan.managed++
				target = &kcGroup{kc: g, dir: &d}
			} else {
				conflict(name, "carries ssodir_id "+id+", which is not this tenant's group "+g.Name+"; left to keycloak-sync")
				continue
			}
		} else {
			c := commands.CreateGroup{Name: g.Name, Description: g.Description, Attributes: dirAttributes(g.Attributes)}
			if err := c.Validate(); err != nil {
				conflict(name, "ssodir does not accept it: "+strings.Join(fieldProblems(err), "; "))
				continue
			}
			_, exists := dirGroups[strings.ToLower(g.Name)]
			target = &kcGroup{kc: g, exists: exists}
			plan.groups = append(plan.groups, target)
		}
		// Memberships of users this import creates; those of adopted users are
		// keycloak-sync's already.
		for m, err := range kc.AllGroupMembers(ctx, g.ID, 100) {
			if err != nil {
				return nil, fmt.Errorf("read the members of group %s: %w", g.Name, err)
			}
			if ku, ok := byKCID[m.ID]; ok {
				plan.members = append(plan.members, kcMember{user: ku, group: dirName, gref: target})
			}
		}
	}
	return plan, nil
}

// sharedEmails are the emails (lower-cased) that more than one realm user has, with
// their usernames: the directory holds an email once, and which user should keep it is
// not for the import to guess.
func sharedEmails(users []keycloak.User) map[string][]string {
	owners := map[string][]string{}
	for _, u := range users {
		if e := strings.ToLower(u.Email); e != "" {
			owners[e] = append(owners[e], u.Username)
		}
	}
	for e, names := range owners {
		if len(names) < 2 {
			delete(owners, e)
		}
	}
	return owners
}

// newUserOf is the directory user for a Keycloak user: its attributes without ssodir's own.
func newUserOf(u keycloak.User) client.NewUser {
	active := u.Enabled
	return client.NewUser{Username: strings.ToLower(u.Username), Email: strings.ToLower(u.Email), FirstName: u.FirstName,
		LastName: u.LastName, IsActive: &active, Attributes: dirAttributes(u.Attributes)}
}

func dirAttributes(in map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, v := range in {
		if k != keycloak.AttrSsodirID && k != attrSsodirVersion && len(v) > 0 {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func printPlan(p *printer, plan *kcPlan) error {
	type planOut struct {
		Groups      []string      `json:"groups"`
		Users       []string      `json:"users"`
		Memberships []string      `json:"memberships"`
		Managed     int           `json:"already_managed"`
		Conflicts   []conflictOut `json:"conflicts"`
	}
	out := planOut{Groups: []string{}, Users: []string{}, Memberships: []string{}, Managed: plan.managed, Conflicts: plan.conflicts}
	const held = " (the directory holds this name: adopted if an earlier run of this import created it, else a conflict)"
	for _, g := range plan.groups {
		out.Groups = append(out.Groups, g.kc.Name+map[bool]string{true: held}[g.exists])
	}
	for _, u := range plan.users {
		out.Users = append(out.Users, strings.ToLower(u.kc.Username)+map[bool]string{true: held}[u.exists])
	}
	for _, m := range plan.members {
		out.Memberships = append(out.Memberships, m.group+"/"+strings.ToLower(m.user.kc.Username))
	}
	sort.Slice(out.Conflicts, func(i, j int) bool { return out.Conflicts[i].Name < out.Conflicts[j].Name })
	if out.Conflicts == nil {
		out.Conflicts = []conflictOut{}
	}
	if p.format != "table" {
		if err := p.one(out, nil, nil); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(p.w, "dry run: would create %d groups, %d users, %d memberships; %d objects already managed; %d conflicts\n",
			len(out.Groups), len(out.Users), len(out.Memberships), out.Managed, len(out.Conflicts))
		for _, g := range out.Groups {
			fmt.Fprintf(p.w, "create group %s\n", g)
		}
		for _, u := range out.Users {
			fmt.Fprintf(p.w, "create user %s\n", u)
		}
		for _, m := range out.Memberships {
			fmt.Fprintf(p.w, "add member %s\n", m)
		}
		for _, c := range out.Conflicts {
			fmt.Fprintf(p.w, "conflict: %s: %s\n", c.Name, c.Reason)
		}
	}
	if len(out.Conflicts) > 0 {
		return &exitError{code: exitIncomplete, msg: fmt.Sprintf("%d conflicts would be left out", len(out.Conflicts))}
	}
	return nil
}

// applyKeycloak creates the planned groups, users and memberships in the directory, then
// marks each Keycloak object with its ssodir_id and ssodir_version. Marking comes last, so
// that an object is never marked for a directory state that is not there yet.
func applyKeycloak(ctx context.Context, s *settings, kc *keycloak.Client, t *client.TenantClient, plan *kcPlan, concurrency int) (*summary, error) {
	sum := &summary{Unchanged: plan.managed, Conflicts: plan.conflicts}
	realmKey := func(kind, id string) client.Option {
		return client.IdempotencyKey(importKey("keycloak-"+kind, 0, []string{kc.Realm(), id}))
	}
	var mu sync.Mutex
	parallel := func(n int, f func(gctx context.Context, i int) error) error {
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(concurrency)
		for i := range n {
			g.Go(func() error { return f(gctx, i) })
		}
		return g.Wait()
	}
	bar := newProgress(s.io.err, isTerminal(s.io.err), len(plan.groups)+len(plan.users), "created")
	err := parallel(len(plan.groups), func(ctx context.Context, i int) error {
		defer bar.Add(1)
		kg := plan.groups[i]
		g, err := t.CreateGroup(ctx, client.NewGroup{Name: kg.kc.Name, Description: kg.kc.Description, Attributes: dirAttributes(kg.kc.Attributes)}, realmKey("group", kg.kc.ID))
		if e, perLine := lineError(err); perLine {
			why := reason(e)
			if e.Code == client.CodeGroupExists {
				why = "the directory already holds this group name"
			}
			sum.add(outcome{name: "group " + kg.kc.Name, status: "conflict", reason: why})
			return nil
		} else if err != nil {
			return fmt.Errorf("group %s: %w", kg.kc.Name, err)
		}
		mu.Lock()
		kg.dir, kg.version = g, g.Version
		mu.Unlock()
		sum.add(outcome{status: "created"})
		return nil
	})
	if err == nil {
		err = parallel(len(plan.users), func(ctx context.Context, i int) error {
			defer bar.Add(1)
			ku := plan.users[i]
			u, err := t.CreateUser(ctx, newUserOf(ku.kc), realmKey("user", ku.kc.ID))
			if e, perLine := lineError(err); perLine {
				why := reason(e)
				if e.Code == client.CodeUsernameTaken {
					why = "the directory already holds the username for another user"
				}
				sum.add(outcome{name: "user " + ku.kc.Username, status: "conflict", reason: why})
				return nil
			} else if err != nil {
				return fmt.Errorf("user %s: %w", ku.kc.Username, err)
			}
			ku.dir = u
			sum.add(outcome{status: "created"})
			return nil
		})
	}
	bar.Finish()
	if err != nil {
		return nil, err
	}
	// Memberships as members changes of up to 1,000 users, one group's after the other, so
	// that the group's last version is known.
	byGroup := map[*kcGroup][]kcMember{}
	var order []*kcGroup
	for _, m := range plan.members {
		if m.user.dir == nil || (m.gref.dir == nil) {
			continue // a conflict, reported already
		}
		if _, ok := byGroup[m.gref]; !ok {
			order = append(order, m.gref)
		}
		byGroup[m.gref] = append(byGroup[m.gref], m)
	}
	err = parallel(len(order), func(ctx context.Context, i int) error {
		kg := order[i]
		names := make([]string, 0, len(byGroup[kg]))
		for _, m := range byGroup[kg] {
			names = append(names, m.user.dir.Username)
		}
		for _, ch := range client.MembersChunks(names, nil) {
			g, err := t.ChangeMembers(ctx, kg.dir.Name, ch, realmKey("members", kg.kc.ID+"/"+strings.Join(ch.Add, ",")))
			if err != nil {
				return fmt.Errorf("members of %s: %w", kg.dir.Name, err)
			}
			mu.Lock()
			kg.version = max(kg.version, g.Version)
			sum.Memberships += len(ch.Add)
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// Mark the Keycloak objects: full-replace PUTs of what was read, with ssodir's two
	// attributes added.
	err = parallel(len(plan.users), func(ctx context.Context, i int) error {
		ku := plan.users[i]
		if ku.dir == nil {
			return nil
		}
		u := ku.kc
		u.Attributes = withMarks(u.Attributes, ku.dir.ID, ku.dir.Version)
		u.Groups = nil
		if err := kc.UpdateUser(ctx, u); err != nil {
			return fmt.Errorf("mark Keycloak user %s: %w", u.Username, err)
		}
		return nil
	})
	if err == nil {
		err = parallel(len(plan.groups), func(ctx context.Context, i int) error {
			kg := plan.groups[i]
			if kg.dir == nil {
				return nil
			}
			g := kg.kc
			g.Attributes = withMarks(g.Attributes, kg.dir.ID, kg.version)
			if err := kc.UpdateGroup(ctx, g); err != nil {
				return fmt.Errorf("mark Keycloak group %s: %w", g.Name, err)
			}
			return nil
		})
	}
	if err != nil {
		return nil, err
	}
	// A realm that drops unmanaged attributes accepts the PUT and keeps nothing; say so
	// rather than leave keycloak-sync to create duplicates.
	for _, ku := range plan.users {
		if ku.dir == nil {
			continue
		}
		got, err := kc.GetUser(ctx, ku.kc.ID)
		if err != nil {
			return nil, fmt.Errorf("check the mark of Keycloak user %s: %w", ku.kc.Username, err)
		}
		if got.SsodirID() != ku.dir.ID {
			return nil, fmt.Errorf("the realm dropped the ssodir_id attribute of user %s: enable unmanaged attributes (Realm settings, General, Unmanaged attributes) and run the import again", ku.kc.Username)
		}
		break
	}
	return sum, nil
}

func withMarks(attrs map[string][]string, id string, version int64) map[string][]string {
	out := make(map[string][]string, len(attrs)+2)
	for k, v := range attrs {
		out[k] = v
	}
	out[keycloak.AttrSsodirID] = []string{id}
	out[attrSsodirVersion] = []string{strconv.FormatInt(version, 10)}
	return out
}
