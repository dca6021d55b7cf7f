// ssodir console: the groups list, a group's page and its forms (app.js routes here).
import { field, h, time } from './dom.js';
import { listView } from './ui.js';
import { PAGE, attrError, go, itemOf, page, parseAttributes, perform, render, rowOf, setPendingFlash, setReadAfter, takeReadAfter, tenantHash, until } from './app.js';
import { attrs, gonePage, userName } from './users.js';
import { activitySection } from './activity.js';

// ---------------------------------------------------------------- groups

export function groupsPage(t, params, signal) {
  const tbody = h('tbody', {});
  const list = listView({
    id: 'groups', body: tbody, signal, param: 'cursor', trailKey: `${t.id} groups`, empty: 'No groups yet.', emptyRow: rowOf(3),
    fetch: async (cursor, sig) => { const { data } = await t.groups({ limit: PAGE, cursor }, { signal: sig }); return { items: data.items, next: data.next_cursor }; },
    render: (items) => items.map((g) => h('tr', {},
      h('td', {}, h('a', { href: tenantHash(t, 'groups', g.name) }, g.name)),
      h('td', {}, g.description || ''),
      h('td', { class: 'wide-only' }, time(g.updated_at)))),
  });
  page('Groups', h('h1', {}, 'Groups', h('a', { class: 'button primary', href: tenantHash(t, 'groups', '+new'), id: 'new-group' }, 'New group')),
    h('div', { class: 'table-wrap' }, h('table', { id: 'groups' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Description'), h('th', { scope: 'col', class: 'wide-only' }, 'Updated'))),
      tbody)), list.el);
  list.load(params.get('cursor') || '');
}

function groupFields(g = {}, creating = false) {
  return [
    creating ? field('Name', h('input', { name: 'name', required: true, autocomplete: 'off', maxlength: 128 }), 'Letters, digits, space, . _ -; unique in any case.') : null,
    field('Description', h('textarea', { name: 'description' }, g.description || '')),
    field('Attributes (JSON)', h('textarea', { name: 'attributes', spellcheck: 'false' }, g.attributes && Object.keys(g.attributes).length ? JSON.stringify(g.attributes, null, 2) : ''), 'An object of string arrays. Saving replaces all attributes.'),
  ];
}

export function newGroupPage(t) {
  const form = h('form', { class: 'card', id: 'group-form', novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const f = form.elements;
    const attributes = parseAttributes(f.attributes.value);
    if (!attributes) { attrError(form); return; }
    await perform(form, 'The group', async () => {
      const res = await t.createGroup({ name: f.name.value.trim(), description: f.description.value.trim(), attributes });
      setReadAfter(`group:${res.data.name.toLowerCase()}`, res.version);
      setPendingFlash(`Group ${res.data.name} created.`);
      go(tenantHash(t, 'groups', res.data.name));
    });
  } }, groupFields({}, true), h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create group'), h('a', { href: tenantHash(t, 'groups') }, 'Cancel')));
  page('New group', h('p', { class: 'crumbs' }, h('a', { href: tenantHash(t, 'groups') }, 'Groups'), ' / new'), h('h1', {}, 'New group'), form);
}

export async function groupPage(t, name, params, signal) {
  const key = `group:${name.toLowerCase()}`;
  const min = takeReadAfter(key);
  let g;
  try {
    ({ data: g } = await t.group(name, { minVersion: min, signal }));
  } catch (e) {
    if (e.status === 404) { gonePage(t, 'group', name); return; }
    throw e;
  }
  const what = `Group ${g.name}`;
  const reloadWith = (version, message) => { setReadAfter(key, version); setPendingFlash(message); render(); };
  const details = h('section', { class: 'card', 'aria-labelledby': 'details-h' }, h('h2', { id: 'details-h' }, 'Details'),
    h('dl', { class: 'facts', id: 'group-facts' },
      h('dt', {}, 'Name'), h('dd', {}, g.name),
      h('dt', {}, 'Description'), h('dd', { id: 'group-description' }, g.description || '—'),
      h('dt', {}, 'Attributes'), h('dd', {}, attrs(g.attributes)),
      h('dt', {}, 'Version'), h('dd', { id: 'group-version' }, String(g.version)),
      h('dt', {}, 'Created'), h('dd', {}, time(g.created_at)),
      h('dt', {}, 'Updated'), h('dd', {}, time(g.updated_at))));
  const editForm = h('form', { id: 'group-form', hidden: true, novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const f = editForm.elements;
    const attributes = parseAttributes(f.attributes.value);
    if (!attributes) { attrError(editForm); return; }
    await perform(editForm, what, async () => {
      const res = await t.updateGroup(g.name, g.version, { description: f.description.value.trim(), attributes });
      reloadWith(res.version, 'Changes saved.');
    });
  } }, h('h2', {}, 'Edit'), groupFields(g), h('div', { class: 'actions' },
    h('button', { type: 'submit', class: 'primary' }, 'Save'),
    h('button', { type: 'button', onclick: () => { editForm.hidden = true; actions.hidden = false; } }, 'Cancel')));
  const renameForm = h('form', { id: 'rename-form', hidden: true, novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const newName = renameForm.elements.name.value.trim();
    await perform(renameForm, what, async () => {
      const res = await t.renameGroup(g.name, g.version, newName);
      // The group now lives under the new name: show that page, read at the new version.
      setReadAfter(`group:${newName.toLowerCase()}`, res.version);
      setPendingFlash(`Renamed from ${g.name}.`);
      go(tenantHash(t, 'groups', newName));
    });
  } }, h('h2', {}, 'Rename'), field('New name', h('input', { name: 'name', autocomplete: 'off', value: g.name }),
    'The same group: members, history and the Keycloak group follow; the old name becomes free.'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'save-rename' }, 'Rename'),
    h('button', { type: 'button', onclick: () => { renameForm.hidden = true; actions.hidden = false; } }, 'Cancel')));
  const delBox = h('div', { hidden: true, id: 'delete-confirm', role: 'group', 'aria-label': 'Confirm delete' },
    h('p', {}, h('strong', {}, `Delete ${g.name}?`), ' Its memberships go with it.'),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'danger', id: 'confirm-delete', onclick: () => perform(delBox, what, async () => {
        const res = await t.deleteGroup(g.name, g.version);
        if (res.version) await t.group(g.name, { minVersion: res.version }).catch((e) => { if (e.status !== 404) throw e; });
        setPendingFlash(`Group ${g.name} deleted.`);
        go(tenantHash(t, 'groups'));
      }) }, 'Delete group'),
      h('button', { type: 'button', onclick: () => { delBox.hidden = true; actions.hidden = false; } }, 'Cancel')));
  delBox.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') { delBox.hidden = true; actions.hidden = false; } });
  const showBox = (el, focus) => { actions.hidden = true; el.hidden = false; (el.querySelector(focus) || el).focus(); };
  const actions = h('div', { class: 'actions' },
    h('button', { type: 'button', id: 'edit-group', onclick: () => showBox(editForm, 'textarea') }, 'Edit'),
    h('button', { type: 'button', id: 'rename-group', onclick: () => showBox(renameForm, 'input') }, 'Rename'),
    h('button', { type: 'button', id: 'delete-group', class: 'danger', onclick: () => showBox(delBox, '#confirm-delete') }, 'Delete'));
  details.append(actions, editForm, renameForm, delBox);

  const membersSec = h('section', { class: 'card', 'aria-labelledby': 'members-h' }, h('h2', { id: 'members-h' }, 'Members'));
  const activitySec = h('section', { class: 'card', 'aria-labelledby': 'activity-h' }, h('h2', { id: 'activity-h' }, 'Activity'));
  page(what, h('p', { class: 'crumbs' }, h('a', { href: tenantHash(t, 'groups') }, 'Groups'), ` / ${g.name}`), h('h1', {}, g.name),
    h('div', { class: 'grid' }, h('div', { class: 'stack' }, details, membersSec), activitySec));

  const ul = h('ul', { class: 'plain', id: 'members' });
  const list = listView({
    id: 'members', body: ul, signal, param: 'cursor', trailKey: `${t.id} members ${g.name.toLowerCase()}`, empty: 'No members.', emptyRow: itemOf,
    fetch: async (cursor, sig) => { const { data } = await t.members(g.name, { limit: PAGE, cursor }, { signal: sig }); return { items: data.items, next: data.next_cursor }; },
    render: (items) => items.map((u) => h('li', {},
      h('span', {}, h('a', { href: tenantHash(t, 'users', u.username) }, u.username), h('span', { class: 'muted' }, ` ${userName(u)}`),
        u.expires_at ? h('span', { class: 'muted expires' }, ` · until ${u.expires_at}`) : ''),
      u.expires_at ? h('button', { type: 'button', class: 'link clear-expiry', 'aria-label': `Remove the expiry of ${u.username}`, onclick: (ev) => perform(ev.target.closest('li'), what, async () => {
        const res = await t.clearExpiry(g.name, g.version, u.username);
        // The group's version is in the view before its membership items: wait for both.
        await until(() => t.userGroups(u.username, { limit: 500 }), (r) => r.data.items.some((x) => x.name.toLowerCase() === g.name.toLowerCase() && !x.expires_at), signal);
        reloadWith(res.version, `${u.username}'s membership no longer expires.`);
      }) }, 'Remove expiry') : '',
      h('button', { type: 'button', class: 'link', 'aria-label': `Remove ${u.username}`, onclick: (ev) => perform(ev.target.closest('li'), what, async () => {
        const res = await t.removeMember(g.name, g.version, u.username);
        await until(() => t.userGroups(u.username, { limit: 500 }), (r) => !r.data.items.some((x) => x.name.toLowerCase() === g.name.toLowerCase()), signal);
        reloadWith(res.version, `${u.username} removed.`);
      }) }, 'Remove'))),
  });
  const input = h('input', { name: 'username', id: 'add-member-name', autocomplete: 'off' });
  // Optional: the membership ends by itself then (local time in the picker, sent as UTC).
  const expiresIn = h('input', { name: 'expires_at', id: 'add-member-expires', type: 'datetime-local' });
  const form = h('form', { class: 'toolbar', id: 'add-member', onsubmit: async (ev) => {
    ev.preventDefault();
    const username = input.value.trim().toLowerCase();
    await perform(form, what, async () => {
      const res = await t.addMember(g.name, g.version, username, expiresIn.value ? new Date(expiresIn.value).toISOString() : undefined);
      // The group's version is in the view before its membership items: wait for both.
      await until(() => t.userGroups(username, { limit: 500 }), (r) => r.data.items.some((x) => x.name.toLowerCase() === g.name.toLowerCase()), signal);
      reloadWith(res.version, `${username} added.`);
    });
  } }, h('div', { class: 'grow' }, field('Add member (username)', input)), field('Expires (optional)', expiresIn), h('button', { type: 'submit' }, 'Add member'));
  membersSec.append(ul, list.el, form);
  list.load(params.get('cursor') || '');
  activitySection(t, `group:${g.name.toLowerCase()}`, g.version, activitySec, signal);
}
