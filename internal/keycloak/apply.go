package keycloak

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"
)

// ApplyResult counts what Apply did.
type ApplyResult struct {
	// Applied actions succeeded (or found their work already done).
	Applied int
	// Failed actions returned an error; the errors are joined in Apply's error.
	Failed int
	// Skipped actions could not run because an action they depend on failed (a join of
	// a user whose create failed), or because the realm was found to drop ssodir_id.
	Skipped int
	// Stale actions were dropped because the write model had moved on since the plan was
	// read (the user was created, deleted or changed meanwhile): the event path, or the
	// next reconcile, brings that change.
	Stale int
}

// WriteModel is the directory as it is now: strongly consistent reads of the command log's
// latest states. Apply, and the event-driven sync, consult it right before each write, so
// that nothing is created, deleted, disabled or overwritten on the strength of a read that
// has since gone stale.
type WriteModel interface {
	// User is the live user with that username (in any case); ok is false when there is
	// none (never created, or deleted). Groups is left empty.
	User(ctx context.Context, username string) (u DirectoryUser, ok bool, err error)
	// Group is the live group with that name (in any case).
	Group(ctx context.Context, name string) (g DirectoryGroup, ok bool, err error)
	// Member reports whether the user is a member of the group now, with the directory
	// ids of the incarnations of both that the membership joins.
	Member(ctx context.Context, groupName, username string) (groupID, userID string, ok bool, err error)
}

// ApplyOptions shape Apply.
type ApplyOptions struct {
	// Check is the write model every action is re-checked against right before it is
	// applied; required.
	Check WriteModel
	// Progress, when not nil, is called after every action with the number done and the
	// total, never concurrently.
	Progress func(done, total int)
}

// maxReportedErrors bounds the errors Apply joins into its error; a realm-wide problem
// would otherwise produce one line per user.
const maxReportedErrors = 20

// errStale marks an action that the write model no longer supports.
var errStale = errors.New("stale")

// Apply carries out a plan against the realm it was made for, phase by phase — group
// deletes, updates, creates; user deletes, disables, updates, creates; leaves; joins —
// each phase on ClientConfig.Concurrency workers. It goes on past failed actions, so that
// one bad user does not hold up the rest, and returns their errors joined; running NewPlan
// and Apply again retries what failed.
//
// The plan may be minutes old by the time an action runs, so each action is decided again
// against the write model as it is then (opts.Check): a delete or disable only if the
// object is still gone from the directory, a leave only if the membership is still gone, a
// create or join only if it still exists, and creates and updates write the write model's
// current state, never the plan's. Updates also re-read the Keycloak object and write
// nothing when its ssodir_version is newer. Every write is idempotent or checked: deletes
// treat "already gone" as done, creates adopt an object that already carries the same
// ssodir_id.
func Apply(ctx context.Context, plan *Plan, c *Client, opts ApplyOptions) (ApplyResult, error) {
	if plan.Refused != nil {
		return ApplyResult{}, fmt.Errorf("keycloak: refusing to apply the plan: %w", plan.Refused)
	}
	if plan.Realm != c.Realm() {
		return ApplyResult{}, fmt.Errorf("keycloak: plan is for realm %q, client for %q", plan.Realm, c.Realm())
	}
	if opts.Check == nil {
		return ApplyResult{}, errors.New("keycloak: apply: no write model to re-check the plan against")
	}
	a := &applier{
		c: c, plan: plan, check: opts.Check, progress: opts.Progress, total: len(plan.Actions),
		userIDs: map[string]string{}, groupIDs: map[string]string{},
		groupNames: map[string]string{}, failedGroups: map[string]bool{},
	}
	for start := 0; start < len(plan.Actions); {
		end := start
		for end < len(plan.Actions) && plan.Actions[end].Kind == plan.Actions[start].Kind {
			end++
		}
		phase := plan.Actions[start:end]
		if phase[0].Kind == ActionCreateUser && !c.attrsKept.Load() {
			// The first create checks that the realm keeps ssodir_id; it runs alone, so
			// that if the realm does not, the others are skipped rather than each
			// creating and removing a user.
			a.run(ctx, &phase[0])
			phase = phase[1:]
		}
		var g errgroup.Group
		g.SetLimit(c.cfg.Concurrency)
		for i := range phase {
			if ctx.Err() != nil {
				break
			}
			g.Go(func() error {
				a.run(ctx, &phase[i])
				return nil
			})
		}
		_ = g.Wait()
		if ctx.Err() != nil {
			break
		}
		start = end
	}
	errs := a.errs
	if extra := a.res.Failed - len(a.errs); extra > 0 {
		errs = append(errs, fmt.Errorf("and %d more failed actions", extra))
	}
	if err := ctx.Err(); err != nil {
		errs = append(errs, fmt.Errorf("stopped with %d of %d actions done: %w", a.res.Applied+a.res.Failed+a.res.Skipped+a.res.Stale, a.total, err))
	}
	return a.res, errors.Join(errs...)
}

type applier struct {
	c        *Client
	plan     *Plan
	check    WriteModel
	progress func(done, total int)
	total    int

	mu           sync.Mutex
	res          ApplyResult
	errs         []error
	userIDs      map[string]string // directory id → Keycloak id of users created in this run
	groupIDs     map[string]string // the same for groups
	groupNames   map[string]string // directory id → name of groups created or renamed in this run
	failedGroups map[string]bool   // directory ids of groups whose create or update failed
	attrsDropped bool
}

func (a *applier) run(ctx context.Context, act *Action) {
	skipped, err := a.exec(ctx, act)
	stale := errors.Is(err, errStale)
	if !skipped && !stale {
		a.c.metrics.operation(string(act.Kind), err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case skipped:
		a.res.Skipped++
	case stale:
		a.res.Stale++
	case err != nil:
		a.res.Failed++
		if len(a.errs) < maxReportedErrors {
			a.errs = append(a.errs, fmt.Errorf("%s: %w", act.logLine(), err))
		} else {
			// Only counted in the returned error, so logged here lest it be lost.
			a.c.log.Warn("keycloak action failed", zap.String("action", act.logLine()), zap.Error(err))
		}
	default:
		a.res.Applied++
	}
	if (err != nil || skipped) && (act.Kind == ActionCreateGroup || act.Kind == ActionUpdateGroup) {
		a.failedGroups[act.GroupID] = true
	}
	if a.progress != nil {
		a.progress(a.res.Applied+a.res.Failed+a.res.Skipped+a.res.Stale, a.total)
	}
}

func (a *applier) groupCreated(dirID, kcID, name string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.groupIDs[dirID] = kcID
	a.groupNames[dirID] = name
}

// group is where a directory group is in Keycloak by now: its id and name, or ok false
// when it is not there (its create failed, or its rename, so its name is uncertain).
func (a *applier) group(dirID string) (kcID, name string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.failedGroups[dirID] {
		return "", "", false
	}
	kcID, name = a.groupIDs[dirID], a.groupNames[dirID]
	if g := a.plan.managed[dirID]; g != nil {
		kcID = g.ID
		if name == "" {
			name = g.Name
		}
	}
	return kcID, name, kcID != ""
}

func (a *applier) resolve(act *Action) (userID, groupID string) {
	userID, groupID = act.KeycloakUserID, act.KeycloakGroupID
	if groupID == "" {
		groupID, _, _ = a.group(act.GroupID)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if userID == "" {
		userID = a.userIDs[act.UserID]
	}
	return userID, groupID
}

// groupPath is a group's path as Keycloak spells it; since Keycloak 23 a "/" in a name is
// escaped as "~/".
func groupPath(name string) string { return "/" + strings.ReplaceAll(name, "/", "~/") }

func ignoreNotFound(err error) error {
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	return err
}

// liveUser is the write model's user for an action, or errStale when the directory no
// longer holds that incarnation.
func (a *applier) liveUser(ctx context.Context, act *Action) (DirectoryUser, error) {
	u, ok, err := a.check.User(ctx, act.Username)
	switch {
	case err != nil:
		return u, fmt.Errorf("re-check user %s: %w", act.UserID, err)
	case !ok || u.ID != act.UserID:
		return u, errStale
	}
	return u, nil
}

func (a *applier) liveGroup(ctx context.Context, act *Action) (DirectoryGroup, error) {
	g, ok, err := a.check.Group(ctx, act.GroupName)
	switch {
	case err != nil:
		return g, fmt.Errorf("re-check group %s: %w", act.GroupName, err)
	case !ok || g.ID != act.GroupID:
		return g, errStale
	}
	return g, nil
}

// isMember reports whether the write model has the membership of the action's
// incarnations of user and group now.
func (a *applier) isMember(ctx context.Context, groupName, username, groupID, userID string) (bool, error) {
	gid, uid, ok, err := a.check.Member(ctx, groupName, username)
	if err != nil {
		return false, fmt.Errorf("re-check membership of user %s in %s: %w", userID, groupName, err)
	}
	return ok && gid == groupID && uid == userID, nil
}

// maxRewrites bounds how often an update is written again because the directory moved on
// while it was being written.
const maxRewrites = 3

// updateUser brings the Keycloak user to the write model's current state. Keycloak has no
// conditional write, and a writer in another process (the event path, after a lease
// moved) may write a newer state between this one's read and write; so after writing,
// the write model is read again, and if it has moved past what was written, the newer
// state is written too: whatever the interleaving, the last write is never the older.
func (a *applier) updateUser(ctx context.Context, act *Action) error {
	for range maxRewrites {
		du, err := a.liveUser(ctx, act)
		if err != nil {
			return err
		}
		// Re-read: a full-replace PUT built from a stale copy would undo changes made
		// since to what ssodir does not own, and the event path may have written a newer
		// state meanwhile.
		cur, err := a.c.GetUser(ctx, act.KeycloakUserID)
		if err != nil {
			return err
		}
		if cur.SsodirID() != act.UserID || cur.SsodirVersion() > du.Version {
			return errStale
		}
		want := desiredUser(du, cur, a.plan.preserve)
		if len(diffUser(*cur, want)) == 0 {
			return nil
		}
		if err := a.c.UpdateUser(ctx, want); err != nil {
			return err
		}
		now, ok, err := a.check.User(ctx, act.Username)
		if err != nil || !ok || now.ID != act.UserID || now.Version <= du.Version {
			return nil // written; a delete since is the event path's or the next reconcile's
		}
	}
	return nil
}

// gone returns errStale when the write model still holds what a removal would remove.
func (a *applier) goneUser(ctx context.Context, act *Action) error {
	u, ok, err := a.check.User(ctx, act.Username)
	switch {
	case err != nil:
		return fmt.Errorf("re-check user %s: %w", act.UserID, err)
	case ok && u.ID == act.UserID:
		return errStale
	}
	return nil
}

// exec performs one action; skipped reports that it could not be attempted. The action's
// object is locked (Locks) from its re-check to its write.
func (a *applier) exec(ctx context.Context, act *Action) (skipped bool, err error) {
	c := a.c
	switch act.Kind {
	case ActionDeleteGroup, ActionUpdateGroup, ActionCreateGroup:
		defer c.cfg.Locks.lock(groupLock(act.GroupID))()
	case ActionDeleteUser, ActionDisableUser, ActionUpdateUser, ActionCreateUser:
		defer c.cfg.Locks.lock(userLock(act.UserID))()
	}
	switch act.Kind {
	case ActionDeleteGroup:
		if g, ok, err := a.check.Group(ctx, act.GroupName); err != nil {
			return false, fmt.Errorf("re-check group %s: %w", act.GroupName, err)
		} else if ok && g.ID == act.GroupID {
			return false, errStale
		}
		return false, ignoreNotFound(c.DeleteGroup(ctx, act.KeycloakGroupID))

	case ActionUpdateGroup:
		dg, err := a.liveGroup(ctx, act)
		if err != nil {
			return false, err
		}
		cur, err := c.GetGroup(ctx, act.KeycloakGroupID)
		if err != nil {
			return false, err
		}
		if cur.SsodirID() != act.GroupID || cur.SsodirVersion() > dg.Version {
			return false, errStale
		}
		want := desiredGroup(dg, cur)
		if len(diffGroup(*cur, want)) == 0 {
			return false, nil
		}
		if err := c.UpdateGroup(ctx, want); err != nil {
			return false, err
		}
		a.groupCreated(act.GroupID, cur.ID, want.Name)
		return false, nil

	case ActionCreateGroup:
		dg, err := a.liveGroup(ctx, act)
		if err != nil {
			return false, err
		}
		want := desiredGroup(dg, nil)
		id, err := c.createManagedGroup(ctx, want)
		if err != nil {
			return false, err
		}
		a.groupCreated(act.GroupID, id, want.Name)
		return false, nil

	case ActionDeleteUser:
		if err := a.goneUser(ctx, act); err != nil {
			return false, err
		}
		return false, ignoreNotFound(c.DeleteUser(ctx, act.KeycloakUserID))

	case ActionDisableUser:
		if err := a.goneUser(ctx, act); err != nil {
			return false, err
		}
		cur, err := c.GetUser(ctx, act.KeycloakUserID)
		if err != nil || !cur.Enabled {
			return false, ignoreNotFound(err)
		}
		cur.Enabled = false
		return false, c.UpdateUser(ctx, *cur)

	case ActionUpdateUser:
		return false, a.updateUser(ctx, act)

	case ActionCreateUser:
		a.mu.Lock()
		dropped := a.attrsDropped
		a.mu.Unlock()
		if dropped {
			// Reported once, by the create that found out.
			return true, nil
		}
		du, err := a.liveUser(ctx, act)
		if err != nil {
			return false, err
		}
		u := desiredUser(du, nil, a.plan.preserve)
		var groupIDs []string
		for _, gid := range act.groupIDs {
			// A group that is not there would fail the whole create; the next reconcile
			// adds the membership once the group exists.
			kcID, name, ok := a.group(gid)
			if !ok {
				continue
			}
			member, err := a.isMember(ctx, name, du.Username, gid, du.ID)
			if err != nil {
				return false, err
			}
			if member {
				u.Groups = append(u.Groups, groupPath(name))
				groupIDs = append(groupIDs, kcID)
			}
		}
		id, adopted, err := c.createManagedUser(ctx, u)
		if err != nil {
			if errors.Is(err, ErrAttributesDropped) {
				a.mu.Lock()
				a.attrsDropped = true
				a.mu.Unlock()
			}
			return false, err
		}
		a.mu.Lock()
		a.userIDs[act.UserID] = id
		a.mu.Unlock()
		if adopted {
			// An existing user was taken over: it did not get the create's groups.
			for _, gid := range groupIDs {
				if err := c.AddUserToGroup(ctx, id, gid); err != nil {
					return false, err
				}
			}
		}
		return false, nil

	case ActionLeave:
		member, err := a.isMember(ctx, act.GroupName, act.Username, act.GroupID, act.UserID)
		if err != nil {
			return false, err
		}
		if member {
			return false, errStale
		}
		return false, ignoreNotFound(c.RemoveUserFromGroup(ctx, act.KeycloakUserID, act.KeycloakGroupID))

	case ActionJoin:
		uid, gid := a.resolve(act)
		if uid == "" || gid == "" {
			return true, nil
		}
		member, err := a.isMember(ctx, act.GroupName, act.Username, act.GroupID, act.UserID)
		if err != nil {
			return false, err
		}
		if !member {
			return false, errStale
		}
		return false, c.AddUserToGroup(ctx, uid, gid)
	}
	return false, fmt.Errorf("unknown action kind %q", act.Kind)
}

// createManagedUser creates a user that carries ssodir_id. If the username is taken by a
// user with the same ssodir_id — created by the event-driven sync meanwhile, or by an
// earlier attempt whose answer was lost — that user is adopted (adopted is true) instead.
//
// Until the client has seen the realm keep the attribute, creates run one at a time and
// each is checked (see ErrAttributesDropped); if the realm dropped it, the user just
// created is deleted again, since without its mark ssodir could never recognise it and it
// would hold the username for ever.
func (c *Client) createManagedUser(ctx context.Context, u User) (id string, adopted bool, err error) {
	if !c.attrsKept.Load() {
		c.verifyMu.Lock()
		defer c.verifyMu.Unlock()
	}
	id, err = c.CreateUser(ctx, u)
	if errors.Is(err, ErrConflict) {
		if found, ferr := c.FindUserByUsername(ctx, u.Username); ferr == nil && found.SsodirID() == u.SsodirID() {
			id, adopted, err = found.ID, true, nil
		}
	}
	if err != nil || c.attrsKept.Load() {
		return id, adopted, err
	}
	got, err := c.GetUser(ctx, id)
	if err != nil {
		return "", false, fmt.Errorf("keycloak: check new user %s: %w", id, err)
	}
	if got.SsodirID() != u.SsodirID() {
		if derr := c.DeleteUser(ctx, id); derr != nil {
			return "", false, errors.Join(ErrAttributesDropped, fmt.Errorf("remove the unmarked user %s: %w", id, derr))
		}
		return "", false, ErrAttributesDropped
	}
	c.attrsKept.Store(true)
	return id, adopted, nil
}

// createManagedGroup creates a group that carries ssodir_id, adopting a group of the same
// name that carries the same ssodir_id.
func (c *Client) createManagedGroup(ctx context.Context, g Group) (string, error) {
	id, err := c.CreateGroup(ctx, g)
	if errors.Is(err, ErrConflict) {
		if found, ferr := c.FindGroupByName(ctx, g.Name); ferr == nil && found.SsodirID() == g.SsodirID() {
			return found.ID, nil
		}
	}
	return id, err
}
