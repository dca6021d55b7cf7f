// ssodir console: the users list with search and bulk actions, a user's page and its forms (app.js routes here).
import { ApiError } from './api.js';
import { clear, field, h, time } from './dom.js';
import { listView, setParams } from './ui.js';
import { PAGE, attrError, clearErrors, enc, flash, go, itemOf, page, parseAttributes, perform, render, rowOf, setPendingFlash, setReadAfter, showErrors, takeReadAfter, tenantHash, until } from './app.js';
import { activitySection } from './activity.js';

// ---------------------------------------------------------------- users

export function userName(u) { return [u.first_name, u.last_name].filter(Boolean).join(' ') || u.username; }
function status(active) { return h('span', { class: `badge ${active ? 'ok' : 'off'}` }, active ? 'Active' : 'Inactive'); }

// API.md's (Keycloak's) username rule; the server also bounds its UTF-8 length.
const USERNAME = /^[^\s\p{Cc}<>&"'$%!#?§,;:*~\/\\|^=[\]{}()`]{1,255}$/u;
const startsWith = (v, p) => (v || '').toLowerCase().startsWith(p);

// userSources are the lists one search reads, in the order they are shown. The default,
// "username, name or email", decides by what is typed, each time: with an @, the user with
// that email, then usernames that start with it (usernames may hold an @); otherwise
// usernames, then last names, then first names that start with it. A user matched by an
// earlier list is skipped by the later ones. A chosen match reads one list.
function userSources(q, by, order) {
  if (!q) return [{ params: { order } }];
  if (by === 'username') return [{ params: { username_prefix: q } }];
  if (by === 'last_name') return [{ params: { last_name_prefix: q } }];
  if (by === 'first_name') return [{ params: { first_name_prefix: q } }];
  if (by === 'email') return [{ params: { email: q } }];
  const p = q.toLowerCase();
  const byUsername = USERNAME.test(p);
  if (q.includes('@')) {
    const out = q.length <= 254 ? [{ params: { email: q } }] : [];
    if (byUsername) out.push({ params: { username_prefix: q }, skip: (u) => u.email === p });
    return out;
  }
  const out = byUsername ? [{ params: { username_prefix: q } }] : [];
  if (q.length <= 255) {
    out.push({ params: { last_name_prefix: q }, skip: (u) => byUsername && u.username.startsWith(p) });
    out.push({ params: { first_name_prefix: q }, skip: (u) => (byUsername && u.username.startsWith(p)) || startsWith(u.last_name, p) });
  }
  return out;
}

// fetchUsers reads one page across the sources. Its cursor is "<source>.<that list's
// cursor>", so a page may end one list and begin the next.
async function fetchUsers(t, sources, cursor, signal) {
  const dot = cursor.indexOf('.');
  let si = dot < 0 ? 0 : Number(cursor.slice(0, dot)) || 0;
  let c = dot < 0 ? '' : cursor.slice(dot + 1);
  const items = [];
  for (let reads = 0; si < sources.length && items.length < PAGE && reads < 8; reads++) {
    const src = sources[si];
    const { data } = await t.users({ ...src.params, limit: PAGE - items.length, cursor: c }, { signal });
    items.push(...data.items.filter((u) => !src.skip || !src.skip(u)));
    if (data.next_cursor) c = data.next_cursor;
    else { si++; c = ''; }
  }
  return { items, next: si < sources.length ? `${si}.${c}` : null };
}

const matchLabels = {
  auto: 'Username, name or email', username: 'Username starts with', last_name: 'Last name starts with',
  first_name: 'First name starts with', email: 'Email is',
};

function searchSummary(q, by, order) {
  if (!q) return `All users, sorted by last update, ${order === 'updated_asc' ? 'oldest' : 'newest'} first.`;
  if (by === 'email') return 'Match by email.';
  if (by !== 'auto') return `Sorted by ${by.replace('_', ' ')}.`;
  return q.includes('@') ? `The user with the email ${q}, then usernames starting with “${q}”.`
    : `Usernames starting with “${q}”, then last names, then first names.`;
}

export async function usersPage(t, params, signal) {
  const by = Object.hasOwn(matchLabels, params.get('by')) ? params.get('by') : 'auto';
  const order = params.get('order') === 'updated_asc' ? 'updated_asc' : 'updated_desc';
  const search = h('input', { type: 'search', id: 'search', name: 'q', value: params.get('q') || '', autocomplete: 'off', placeholder: 'Username, name or email' });
  const bySel = h('select', { id: 'search-by', name: 'by' }, Object.entries(matchLabels).map(([v, label]) => h('option', { value: v }, label)));
  bySel.value = by;
  const orderSel = h('select', { id: 'order', name: 'order' },
    h('option', { value: 'updated_desc' }, 'Last update, newest first'), h('option', { value: 'updated_asc' }, 'Last update, oldest first'));
  orderSel.value = order;
  const tbody = h('tbody', {});
  const summary = h('p', { class: 'muted', id: 'user-count', 'aria-live': 'polite' });
  const form = h('form', { role: 'search', class: 'toolbar', onsubmit: (ev) => ev.preventDefault() },
    h('div', { class: 'grow' }, field('Search users', search)),
    h('div', {}, field('Match', bySel)),
    h('div', {}, field('Order', orderSel)));
  const bulk = bulkActions(t, () => list, signal);
  const selectAll = h('input', { type: 'checkbox', id: 'select-all' });
  selectAll.addEventListener('change', () => bulk.selectAll(selectAll.checked));

  const current = () => ({ q: search.value.trim(), by: bySel.value, order: orderSel.value });
  let list;
  const makeList = () => {
    const { q, by: b, order: o } = current();
    const sources = userSources(q, b, o);
    orderSel.disabled = !!q;
    return listView({
      id: 'users', body: tbody, signal, param: 'cursor', trailKey: `${t.id} users ${b} ${o} ${q}`,
      empty: 'No users match.', emptyRow: rowOf(6),
      fetch: (cursor, sig) => { clearErrors(form); return fetchUsers(t, sources, cursor, sig); },
      render: (items) => items.map((u) => h('tr', {},
        h('td', { class: 'select' }, bulk.checkbox(u)),
        h('td', {}, h('a', { href: tenantHash(t, 'users', u.username) }, u.username),
          u.is_active ? null : h('span', { class: 'narrow-only' }, ' ', status(false))),
        h('td', {}, `${u.last_name || ''}${u.last_name && u.first_name ? ', ' : ''}${u.first_name || ''}`),
        h('td', {}, u.email),
        h('td', { class: 'wide-only' }, status(u.is_active)),
        h('td', { class: 'wide-only' }, time(u.updated_at)))),
      onLoading: () => { bulk.loaded([]); selectAll.checked = false; selectAll.disabled = true; },
      onLoaded: (items) => {
        bulk.loaded(items);
        selectAll.checked = false;
        selectAll.disabled = !items.length;
        summary.textContent = items.length ? searchSummary(q, b, o) : '';
      },
      onError: (e) => {
        if (!(e instanceof ApiError) || e.status !== 400 || !e.fields.length) return false;
        showErrors(form, e, { email: 'q', username_prefix: 'q', last_name_prefix: 'q', first_name_prefix: 'q', order: 'order' });
        return true;
      },
    });
  };
  list = makeList();
  const foot = h('div', {}, list.el);

  // A search is one history entry however many keys it takes: its first change pushes an
  // entry (Back returns to the list before it), later ones replace it.
  let pushed = false;
  let timer = null;
  const changed = () => {
    const { q, by: b, order: o } = current();
    setParams({ q, by: b === 'auto' ? null : b, order: o === 'updated_desc' ? null : o, cursor: null }, !pushed);
    pushed = true;
    clearTimeout(timer);
    timer = setTimeout(() => {
      list.stop();
      list = makeList();
      foot.replaceChildren(list.el);
      list.load('');
    }, 200);
  };
  search.addEventListener('input', changed);
  bySel.addEventListener('change', changed);
  orderSel.addEventListener('change', changed);
  signal.addEventListener('abort', () => clearTimeout(timer));
  page('Users', h('h1', {}, 'Users', h('a', { class: 'button primary', href: tenantHash(t, 'users', '+new'), id: 'new-user' }, 'New user')),
    form, summary, bulk.el,
    h('div', { class: 'table-wrap' }, h('table', { id: 'users' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col', class: 'select' }, h('label', {}, selectAll, h('span', { class: 'sr-only' }, 'Select every user on this page'))), h('th', { scope: 'col' }, 'Username'), h('th', { scope: 'col' }, 'Name'),
        h('th', { scope: 'col' }, 'Email'), h('th', { scope: 'col', class: 'wide-only' }, 'Status'), h('th', { scope: 'col', class: 'wide-only' }, 'Updated'))),
      tbody)),
    foot);
  list.load(params.get('cursor') || '');
}

// bulkActions deactivates, activates or adds to a group the users selected on the page:
// one command per user, each with If-Match (the user's version as listed; the group's
// version as it goes), and a summary of what was done and what failed, and why.
function bulkActions(t, getList, signal) {
  const selected = new Map();
  const boxes = new Map();
  const count = h('span', { id: 'bulk-count', 'aria-live': 'polite' }, 'None selected');
  const deactivate = h('button', { type: 'button', id: 'bulk-deactivate', disabled: true }, 'Deactivate');
  const activate = h('button', { type: 'button', id: 'bulk-activate', disabled: true }, 'Activate');
  const groupIn = h('input', { name: 'group', id: 'bulk-group', autocomplete: 'off', list: 'bulk-group-names' });
  const names = h('datalist', { id: 'bulk-group-names' });
  const add = h('button', { type: 'button', id: 'bulk-add', disabled: true }, 'Add to group');
  const result = h('div', { id: 'bulk-result', 'aria-live': 'polite' });
  const form = h('div', { class: 'card bulk idle', id: 'bulk', role: 'group', 'aria-label': 'With the selected users' },
    h('div', { class: 'toolbar' }, h('div', { class: 'bulk-count' }, count), deactivate, activate,
      h('div', { class: 'grow' }, field('Group', groupIn)), names, add), result);
  let running = false;

  const refresh = () => {
    count.textContent = selected.size ? `${selected.size} selected` : 'None selected';
    for (const b of [deactivate, activate, add]) b.disabled = running || !selected.size;
    for (const box of boxes.values()) box.disabled = running;
    // At phone width the actions take room only once there is something to act on.
    form.classList.toggle('idle', !selected.size && !running && !result.hasChildNodes());
  };

  async function run(label, each) {
    clearErrors(form);
    const users = [...selected.values()];
    running = true;
    refresh();
    const done = [];
    const unchanged = [];
    const failed = [];
    const waits = [];
    try {
      for (const [i, u] of users.entries()) {
        clear(result).append(h('p', { class: 'muted', role: 'status' }, `${label} ${i + 1} of ${users.length}…`));
        try {
          const outcome = await each(u);
          (outcome.changed ? done : unchanged).push(u.username);
          if (outcome.wait) waits.push(outcome.wait);
        } catch (e) {
          if (e.name === 'AbortError') return;
          failed.push([u.username, e instanceof ApiError && e.status === 412
            ? 'changed by someone else since the list was read; reload and try again' : (e.message || String(e))]);
        }
      }
      // The list shows the views: wait (a little) until they show what was done.
      await Promise.allSettled(waits.map((w) => w()));
    } finally {
      running = false;
      refresh();
    }
    if (signal.aborted) return;
    summarize(label, done, unchanged, failed);
    getList().reload();
  }

  function summarize(label, done, unchanged, failed) {
    const what = { Deactivating: ['deactivated', 'already inactive'], Activating: ['activated', 'already active'] }[label]
      || [`added to ${groupIn.value.trim()}`, 'already members'];
    const lines = [`${done.length} ${what[0]}`];
    if (unchanged.length) lines.push(`${unchanged.length} ${what[1]}`);
    if (failed.length) lines.push(`${failed.length} failed`);
    clear(result).append(h('div', { class: failed.length ? 'alert' : 'alert ok', role: failed.length ? 'alert' : 'status', id: 'bulk-summary' },
      h('strong', {}, `${lines.join(', ')}.`),
      failed.length ? h('ul', { id: 'bulk-failures' }, failed.map(([n, why]) => h('li', {}, h('strong', {}, n), `: ${why}`))) : null));
  }

  deactivate.addEventListener('click', () => run('Deactivating', async (u) => setActive(u, false)));
  activate.addEventListener('click', () => run('Activating', async (u) => setActive(u, true)));
  async function setActive(u, active) {
    const res = await t.setActive(u.username, u.version, active);
    const changed = res.version !== u.version;
    return { changed, wait: changed ? () => t.user(u.username, { minVersion: res.version, signal }) : null };
  }

  add.addEventListener('click', async () => {
    const name = groupIn.value.trim();
    let group;
    try {
      ({ data: group } = await t.group(name, { signal }));
    } catch (e) {
      if (e.name === 'AbortError') return;
      clearErrors(form);
      showErrors(form, e.status === 404 ? new ApiError(404, { title: 'Not found', errors: [{ field: 'group', message: `no group named ${name}` }] }) : e);
      return;
    }
    await addAll(group);
  });

  // addAll adds the selected users to group in one members change (POST
  // /groups/{name}/members: one group version), with the group's version as If-Match (read
  // again if another writer changed the group meanwhile). Users deleted since the list was
  // read refuse the whole change, each named: they are reported, and the others sent again.
  // Which users the change added is read from the group's activity of the new version.
  async function addAll(group) {
    clearErrors(form);
    const users = [...selected.values()].map((u) => u.username);
    running = true;
    refresh();
    const failed = [];
    let added = [];
    let already = [];
    try {
      clear(result).append(h('p', { class: 'muted', role: 'status' }, `Adding ${users.length} to ${group.name}…`));
      let send = users;
      let res = null;
      for (let tries = 0; send.length && tries < 5; tries++) {
        try {
          res = await t.changeMembers(group.name, group.version, { add: send });
          break;
        } catch (e) {
          if (e.name === 'AbortError') return;
          if (e instanceof ApiError && e.status === 412) {
            ({ data: group } = await t.group(group.name, { signal }));
            continue;
          }
          const unknown = e instanceof ApiError && e.status === 404
            ? e.fields.map((f) => /^no user (.+)$/.exec(f.message || '')).filter(Boolean).map((m) => m[1]) : [];
          if (!unknown.length) {
            for (const u of send) failed.push([u, e.message || String(e)]);
            send = [];
            break;
          }
          for (const u of unknown) failed.push([u, 'no longer exists (deleted since the list was read)']);
          send = send.filter((u) => !unknown.includes(u));
        }
      }
      const v = res ? res.version || (res.data && res.data.version) : null;
      if (v && v !== group.version) {
        await t.group(group.name, { minVersion: v, signal }).catch(() => {});
        const entity = `group:${group.name.toLowerCase()}`;
        const { data } = await until(() => t.activity({ entity, limit: 100 }, { signal }),
          (r) => r.data.items.some((x) => x.version === v), signal);
        added = data.items.filter((x) => x.version === v && x.type === 'group.member_added')
          .map((x) => x.changes && x.changes.member && x.changes.member.new).filter((n) => send.includes(n));
        if (!added.length) added = send; // the activity did not come in time: the change did
      }
      already = send.filter((u) => !added.includes(u));
    } catch (e) {
      if (e.name === 'AbortError') return;
      showErrors(form, e);
      return;
    } finally {
      running = false;
      refresh();
    }
    if (signal.aborted) return;
    summarize('Adding', added, already, failed);
    getList().reload();
  }

  t.groups({ limit: 100 }, { signal }).then(({ data }) => names.append(...data.items.map((g) => h('option', { value: g.name })))).catch(() => {});
  return {
    el: form,
    checkbox(u) {
      const box = h('input', { type: 'checkbox', class: 'select-user', 'data-username': u.username, disabled: running });
      box.addEventListener('change', () => { if (box.checked) selected.set(u.username, u); else selected.delete(u.username); refresh(); });
      boxes.set(u.username, box);
      return h('label', {}, box, h('span', { class: 'sr-only' }, `Select ${u.username}`));
    },
    loaded() {
      selected.clear();
      for (const [n, b] of [...boxes]) { b.checked = false; if (!b.isConnected) boxes.delete(n); }
      refresh();
    },
    selectAll(on) {
      for (const box of boxes.values()) {
        box.checked = on;
        box.dispatchEvent(new Event('change'));
      }
    },
  };
}

function userFields(u = {}, creating = false) {
  return [
    creating ? field('Username', h('input', { name: 'username', required: true, autocomplete: 'off', maxlength: 255 }), 'Up to 255 characters, e.g. an email address; no spaces or < > & " \' $ % ! # ? § , ; : * ~ / \\ | ^ = [ ] { } ( ) `; stored lower-cased.') : null,
    field('Email', h('input', { name: 'email', type: 'email', value: u.email || '', required: true, autocomplete: 'off' })),
    field('First name', h('input', { name: 'first_name', value: u.first_name || '', autocomplete: 'off' })),
    field('Last name', h('input', { name: 'last_name', value: u.last_name || '', autocomplete: 'off' })),
    creating ? field('Password (optional)', h('input', { name: 'password', type: 'password', autocomplete: 'new-password' }), '8 to 128 characters.') : null,
    field('Attributes (JSON)', h('textarea', { name: 'attributes', spellcheck: 'false' }, u.attributes && Object.keys(u.attributes).length ? JSON.stringify(u.attributes, null, 2) : ''), 'An object of string arrays, e.g. {"dept": ["eng"]}. Saving replaces all attributes.'),
  ];
}

export function newUserPage(t) {
  const form = h('form', { class: 'card', id: 'user-form', novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const f = form.elements;
    const attributes = parseAttributes(f.attributes.value);
    if (!attributes) { attrError(form); return; }
    const body = { username: f.username.value.trim(), email: f.email.value.trim(), first_name: f.first_name.value.trim(), last_name: f.last_name.value.trim(), attributes };
    if (f.password.value) body.password = f.password.value;
    await perform(form, 'The user', async () => {
      const res = await t.createUser(body);
      setReadAfter(`user:${res.data.username}`, res.version);
      setPendingFlash(`User ${res.data.username} created.`);
      go(tenantHash(t, 'users', res.data.username));
    });
  } }, userFields({}, true), h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create user'), h('a', { href: tenantHash(t, 'users') }, 'Cancel')));
  page('New user', h('p', { class: 'crumbs' }, h('a', { href: tenantHash(t, 'users') }, 'Users'), ' / new'), h('h1', {}, 'New user'), form);
}

export async function userPage(t, username, params, signal) {
  const min = takeReadAfter(`user:${username}`);
  let u;
  try {
    ({ data: u } = await t.user(username, { minVersion: min, signal }));
  } catch (e) {
    if (e.status === 404) { gonePage(t, 'user', username); return; }
    throw e;
  }
  const what = `User ${u.username}`;
  const facts = h('dl', { class: 'facts', id: 'user-facts' },
    h('dt', {}, 'Username'), h('dd', {}, u.username),
    h('dt', {}, 'Email'), h('dd', { id: 'user-email' }, u.email),
    h('dt', {}, 'First name'), h('dd', { id: 'user-first-name' }, u.first_name || '—'),
    h('dt', {}, 'Last name'), h('dd', { id: 'user-last-name' }, u.last_name || '—'),
    h('dt', {}, 'Status'), h('dd', {}, status(u.is_active)),
    h('dt', {}, 'Attributes'), h('dd', {}, attrs(u.attributes)),
    h('dt', {}, 'Version'), h('dd', { id: 'user-version' }, String(u.version)),
    h('dt', {}, 'Created'), h('dd', {}, time(u.created_at)),
    h('dt', {}, 'Updated'), h('dd', {}, time(u.updated_at)));
  const details = h('section', { class: 'card', 'aria-labelledby': 'details-h' }, h('h2', { id: 'details-h' }, 'Details'), facts);
  const reloadWith = (version, message) => { setReadAfter(`user:${u.username}`, version); setPendingFlash(message); render(); };

  const editForm = h('form', { id: 'user-form', hidden: true, novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const f = editForm.elements;
    const attributes = parseAttributes(f.attributes.value);
    if (!attributes) { attrError(editForm); return; }
    await perform(editForm, what, async () => {
      const res = await t.updateUser(u.username, u.version, { email: f.email.value.trim(), first_name: f.first_name.value.trim(), last_name: f.last_name.value.trim(), attributes });
      reloadWith(res.version, 'Changes saved.');
    });
  } }, h('h2', {}, 'Edit'), userFields(u), h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary', id: 'save-user' }, 'Save'),
    h('button', { type: 'button', onclick: () => { editForm.hidden = true; actions.hidden = false; } }, 'Cancel')));
  const pwForm = h('form', { id: 'password-form', hidden: true, novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    await perform(pwForm, what, async () => {
      const res = await t.setPassword(u.username, u.version, pwForm.elements.password.value);
      reloadWith(res.version, 'Password set.');
    });
  } }, h('h2', {}, 'Set password'), field('New password', h('input', { name: 'password', type: 'password', autocomplete: 'new-password' }), '8 to 128 characters.'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Set password'),
    h('button', { type: 'button', onclick: () => { pwForm.hidden = true; actions.hidden = false; } }, 'Cancel')));
  const renameForm = h('form', { id: 'rename-form', hidden: true, novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const username = renameForm.elements.username.value.trim().toLowerCase();
    await perform(renameForm, what, async () => {
      const res = await t.renameUser(u.username, u.version, username);
      // The person now lives under the new name: show that page, read at the new version.
      setReadAfter(`user:${username}`, res.version);
      setPendingFlash(`Renamed from ${u.username}.`);
      go(tenantHash(t, 'users', username));
    });
  } }, h('h2', {}, 'Rename'), field('New username', h('input', { name: 'username', autocomplete: 'off', value: u.username }),
    'The same person: memberships, history and the Keycloak user follow; the old name becomes free.'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'save-rename' }, 'Rename'),
    h('button', { type: 'button', onclick: () => { renameForm.hidden = true; actions.hidden = false; } }, 'Cancel')));
  const delBox = h('div', { hidden: true, id: 'delete-confirm', role: 'group', 'aria-label': 'Confirm delete' },
    h('p', {}, h('strong', {}, `Delete ${u.username}?`), ' The user leaves every group; the username and email become free.'),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'danger', id: 'confirm-delete', onclick: () => perform(delBox, what, async () => {
        const res = await t.deleteUser(u.username, u.version);
        // Read our own delete: the view answers 404 once it has the deletion.
        if (res.version) await t.user(u.username, { minVersion: res.version }).catch((e) => { if (e.status !== 404) throw e; });
        setPendingFlash(`User ${u.username} deleted.`);
        go(tenantHash(t, 'users'));
      }) }, 'Delete user'),
      h('button', { type: 'button', onclick: () => { delBox.hidden = true; actions.hidden = false; } }, 'Cancel')));
  delBox.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') { delBox.hidden = true; actions.hidden = false; } });
  const show = (el, focus) => { actions.hidden = true; el.hidden = false; (el.querySelector(focus) || el).focus(); };
  const actions = h('div', { class: 'actions', id: 'user-actions' },
    h('button', { type: 'button', id: 'edit-user', onclick: () => show(editForm, 'input') }, 'Edit'),
    h('button', { type: 'button', id: 'toggle-active', onclick: (ev) => perform(ev.target.parentElement, what, async () => {
      const res = await t.setActive(u.username, u.version, !u.is_active);
      reloadWith(res.version, u.is_active ? 'User deactivated.' : 'User activated.');
    }) }, u.is_active ? 'Deactivate' : 'Activate'),
    h('button', { type: 'button', id: 'set-password', onclick: () => show(pwForm, 'input') }, 'Set password'),
    h('button', { type: 'button', id: 'rename-user', onclick: () => show(renameForm, 'input') }, 'Rename'),
    h('button', { type: 'button', id: 'delete-user', class: 'danger', onclick: () => show(delBox, '#confirm-delete') }, 'Delete'));
  details.append(actions, editForm, pwForm, renameForm, delBox);

  const groupsSec = h('section', { class: 'card', 'aria-labelledby': 'groups-h' }, h('h2', { id: 'groups-h' }, 'Groups'));
  const activitySec = h('section', { class: 'card', 'aria-labelledby': 'activity-h' }, h('h2', { id: 'activity-h' }, 'Activity'));
  page(what, h('p', { class: 'crumbs' }, h('a', { href: tenantHash(t, 'users') }, 'Users'), ` / ${u.username}`),
    h('h1', {}, userName(u), status(u.is_active)),
    h('div', { class: 'grid' }, details, h('div', { class: 'stack' }, groupsSec, activitySec)));
  userGroupsSection(t, u, groupsSec, params, signal);
  activitySection(t, `user:${u.username}`, u.version, activitySec, signal);
}

// gonePage is the page of a user or group the tenant does not have (any more): in plain
// words, with where to look instead. The directory cannot tell an erased user from one
// that never was: an erasure keeps no name (docs/erasure.md).
export function gonePage(t, kind, name) {
  const list = kind === 'user' ? 'users' : 'groups';
  const why = kind === 'user'
    ? `It was deleted or erased, or never existed here. An erased person leaves no name behind, so the directory cannot tell which; their group memberships show as “an erased person”.`
    : 'It was deleted or renamed, or never existed here.';
  page(`No ${kind} ${name}`, h('p', { class: 'crumbs' }, h('a', { href: tenantHash(t, list) }, kind === 'user' ? 'Users' : 'Groups'), ` / ${name}`),
    h('h1', {}, `No ${kind} “${name}” in ${t.id}`),
    h('div', { class: 'card', id: 'gone' }, h('p', {}, why),
      h('p', {}, h('a', { href: kind === 'user' ? `${tenantHash(t, 'users')}?q=${enc(name)}` : tenantHash(t, 'groups') }, kind === 'user' ? `Search the users for “${name}”` : 'All groups'),
        ' · ', h('a', { href: tenantHash(t, 'activity') }, 'Today’s activity'))));
}

export function attrs(a) {
  const keys = Object.keys(a || {});
  if (!keys.length) return '—';
  return h('ul', { class: 'plain' }, keys.sort().map((k) => h('li', {}, h('code', {}, k), (a[k] || []).join(', '))));
}

// userGroupsSection lists the user's groups (paged) and adds or removes memberships, each
// on the group with the group's current version.
function userGroupsSection(t, u, sec, params, signal) {
  const ul = h('ul', { class: 'plain', id: 'user-groups' });
  const list = listView({
    id: 'user-groups', body: ul, signal, param: 'cursor', trailKey: `${t.id} user-groups ${u.username}`,
    empty: 'Not in any group.', emptyRow: itemOf,
    fetch: async (cursor, sig) => { const { data } = await t.userGroups(u.username, { limit: PAGE, cursor }, { signal: sig }); return { items: data.items, next: data.next_cursor }; },
    render: (items) => items.map((g) => h('li', {},
      h('span', {}, h('a', { href: tenantHash(t, 'groups', g.name) }, g.name),
        g.expires_at ? h('span', { class: 'muted expires' }, ` · until ${g.expires_at}`) : ''),
      g.expires_at ? h('button', { type: 'button', class: 'link clear-expiry', 'aria-label': `Remove the expiry in ${g.name}`, onclick: (ev) => perform(ev.target.closest('li'), `Group ${g.name}`, async () => {
        const { data: cur } = await t.group(g.name);
        await t.clearExpiry(g.name, cur.version, u.username);
        await until(() => t.userGroups(u.username, { limit: PAGE }), (r) => r.data.items.some((x) => x.name === g.name && !x.expires_at), signal);
        flash(`Membership of ${g.name} no longer expires.`);
        setParams({ cursor: null }, false);
        list.load('');
      }) }, 'Remove expiry') : '',
      h('button', { type: 'button', class: 'link', 'aria-label': `Remove from ${g.name}`, onclick: (ev) => perform(ev.target.closest('li'), `Group ${g.name}`, async () => {
        const { data: cur } = await t.group(g.name);
        await t.removeMember(g.name, cur.version, u.username);
        await until(() => t.userGroups(u.username, { limit: PAGE }), (r) => !r.data.items.some((x) => x.name === g.name), signal);
        flash(`Removed from ${g.name}.`);
        setParams({ cursor: null }, false);
        list.load('');
      }) }, 'Remove'))),
  });
  const input = h('input', { name: 'group', id: 'add-group-name', autocomplete: 'off', list: 'group-names' });
  const names = h('datalist', { id: 'group-names' });
  const form = h('form', { class: 'toolbar', id: 'add-group', onsubmit: async (ev) => {
    ev.preventDefault();
    const name = input.value.trim();
    await perform(form, `Group ${name}`, async () => {
      let cur;
      try { ({ data: cur } = await t.group(name)); } catch (e) {
        if (e.status === 404) throw new ApiError(404, { title: 'Not found', errors: [{ field: 'group', message: `no group named ${name}` }] });
        throw e;
      }
      await t.addMember(cur.name, cur.version, u.username);
      input.value = '';
      flash(`Added to ${cur.name}.`);
      await until(() => t.userGroups(u.username, { limit: PAGE }), (r) => r.data.items.some((g) => g.name.toLowerCase() === cur.name.toLowerCase()), signal);
      setParams({ cursor: null }, false);
      list.load('');
    });
  } }, h('div', { class: 'grow' }, field('Add to group', input)), names, h('button', { type: 'submit' }, 'Add'));
  sec.append(ul, list.el, form);
  t.groups({ limit: 100 }, { signal }).then(({ data }) => names.append(...data.items.map((g) => h('option', { value: g.name })))).catch(() => {});
  list.load(params.get('cursor') || '');
}
