// ssodir console: activity timelines: an entity's and the tenant's (app.js routes here).
import { ApiError } from './api.js';
import { field, h, time } from './dom.js';
import { listView } from './ui.js';
import { actorName, actorOf, actorTyped, fieldLabel, membershipChange, value } from './words.js';
import { PAGE, enc, go, itemOf, page, showErrors, tenantHash, until } from './app.js';

// ---------------------------------------------------------------- activity

const typeLabels = {
  'user.created': 'Created', 'user.updated': 'Updated', 'user.password_changed': 'Password changed',
  'user.deactivated': 'Deactivated', 'user.activated': 'Activated', 'user.deleted': 'Deleted', 'user.renamed': 'Renamed',
  'group.created': 'Created', 'group.updated': 'Updated', 'group.deleted': 'Deleted', 'group.renamed': 'Renamed',
  'group.member_added': 'Member added', 'group.member_removed': 'Member removed',
};

function entityLink(t, entity) {
  const i = entity.indexOf(':');
  const kind = entity.slice(0, i);
  const name = entity.slice(i + 1);
  if (kind !== 'user' && kind !== 'group') return entity;
  return h('a', { href: tenantHash(t, `${kind}s`, name) }, `${kind} ${name}`);
}

// activityItem is one item of a feed; feed is the entity whose timeline it is in, if one.
function activityItem(t, a, withEntity, feed) {
  const changes = Object.entries(a.changes || {});
  const by = h('div', { class: 'meta' }, 'by ', actorName(t, a.actor, h('a', { class: 'actor', href: `${tenantHash(t, 'activity')}?actor=${enc(a.actor)}` })), ' at ', time(a.occurred_at));
  // In a user's own timeline, a group's membership change of theirs, in words.
  const m = !withEntity && feed && feed.startsWith('user:') && membershipChange(a);
  if (m) {
    const group = m.deleted ? m.name : h('a', { href: tenantHash(t, 'groups', m.key) }, m.name);
    return h('li', { class: 'membership' }, h('div', { class: 'what' }, `${m.words} `, group, m.after), by);
  }
  return h('li', {},
    h('div', { class: 'what' }, typeLabels[a.type] || a.type, withEntity ? [' · ', entityLink(t, a.entity)] : null, h('span', { class: 'muted' }, ` · v${a.version}`)),
    by,
    changes.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'changes' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Field'), h('th', { scope: 'col' }, 'Old'), h('th', { scope: 'col' }, 'New'))),
      h('tbody', {}, changes.map(([f, c]) => h('tr', {}, h('td', { title: f }, fieldLabel(f)),
        h('td', {}, value(c && c.old, 'old')), h('td', {}, '→ ', value(c && c.new, 'new'))))))) : null);
}

// activitySection shows an entity's activity, newest first, waiting for the item of the
// version the page shows (the feed is written after the view). A user's feed also holds
// their group membership changes, at the groups' versions: the wait looks at the user's
// own newest item.
export function activitySection(t, entity, version, sec, signal) {
  const ol = h('ol', { class: 'timeline', id: 'activity' });
  const kind = `${entity.slice(0, entity.indexOf(':'))}:`;
  const shown = (r) => {
    const own = r.data.items.find((x) => x.entity.startsWith(kind));
    return !version || (own ? own.version >= version : !!r.data.next_cursor);
  };
  const list = listView({
    id: 'activity', body: ol, signal, more: true, moreId: 'older', empty: 'No activity recorded.', emptyRow: itemOf,
    fetch: async (cursor, sig) => {
      const read = () => t.activity({ entity, limit: PAGE, cursor }, { signal: sig });
      const { data } = cursor ? await read() : await until(read, shown, sig);
      return { items: data.items, next: data.next_cursor };
    },
    render: (items) => items.map((x) => activityItem(t, x, false, entity)),
  });
  sec.append(ol, list.el);
  list.load('');
}

// tenantActivityPage answers "who changed what, and when": everything one actor did, or
// everything on one UTC day, newest first.
export async function tenantActivityPage(t, params, signal) {
  const actor = params.get('actor') || '';
  const day = params.get('day') || (actor ? '' : new Date().toISOString().slice(0, 10));
  const actorIn = h('input', { name: 'actor', id: 'activity-actor', autocomplete: 'off' });
  actorTyped(t, actor, actorIn);
  const dayIn = h('input', { name: 'day', id: 'activity-day', type: 'date', value: day });
  const form = h('form', { class: 'toolbar', id: 'activity-filter', onsubmit: async (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    if (actorIn.value.trim()) q.set('actor', await actorOf(t, actorIn.value.trim()));
    else if (dayIn.value) q.set('day', dayIn.value);
    go(`${tenantHash(t, 'activity')}?${q}`);
  } },
  h('div', { class: 'grow' }, field('Done by', actorIn, 'Who made the changes: a person’s sign-in name, a SCIM token’s name (such as okta-prod), or bootstrap for the development token.')),
  h('div', {}, field('or day (UTC)', dayIn)),
  h('button', { type: 'submit' }, 'Show'));
  const ol = h('ol', { class: 'timeline', id: 'tenant-activity' });
  const q = actor ? { actor } : { day };
  const list = listView({
    id: 'tenant-activity', body: ol, signal, more: true, moreId: 'older', empty: 'Nothing recorded.', emptyRow: itemOf,
    fetch: async (cursor, sig) => { const { data } = await t.activity({ ...q, limit: PAGE, cursor }, { signal: sig }); return { items: data.items, next: data.next_cursor }; },
    render: (items) => items.map((x) => activityItem(t, x, true)),
    onError: (e) => {
      if (!(e instanceof ApiError) || e.status !== 400) return false;
      showErrors(form, e);
      return true;
    },
  });
  page('Activity', h('h1', {}, 'Activity'),
    h('p', { class: 'muted', id: 'activity-scope' }, actor ? ['Everything ', actorName(t, actor, h('span', {})), ' did, newest first.'] : `Everything on ${day} (UTC), newest first.`),
    form, h('section', { class: 'card', 'aria-labelledby': 'activity-scope' }, ol, list.el));
  list.load('');
}
