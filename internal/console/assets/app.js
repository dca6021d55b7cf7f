// ssodir console: a hash-routed single-page application over the query and command APIs.
import {
  ApiError, Tenant, clearSession, commandBase, metrics, ready, saveSettings, session, settings,
} from './api.js';
import { devSignIn, oidcFinish, oidcStart, serverConfig } from './auth.js';
import { clear, field, h, time } from './dom.js';

const main = document.getElementById('main');
const PAGE = 25;
let serverCfg = {};
let pageAbort = null;
// readAfter is the version the last write produced; the next page showing that entity
// reads with X-Min-Version so it never shows the state from before the write.
let readAfter = null;
let pendingFlash = '';

// ---------------------------------------------------------------- routing and frame

function parseRoute() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const i = raw.indexOf('?');
  const path = i < 0 ? raw : raw.slice(0, i);
  const params = new URLSearchParams(i < 0 ? '' : raw.slice(i + 1));
  const parts = path.split('/').filter(Boolean).map((p) => { try { return decodeURIComponent(p); } catch { return p; } });
  return { parts, params };
}

const enc = encodeURIComponent;
const tenantHash = (t, ...rest) => `#/t/${enc(t.system)}/${enc(t.tenant)}${rest.map((r) => `/${enc(r)}`).join('')}`;

function go(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

function flash(text) {
  const el = document.getElementById('flash');
  clear(el);
  if (text) el.append(h('p', {}, text));
}

function setReadAfter(key, version) {
  readAfter = version ? { key, version } : null;
}

function takeReadAfter(key) {
  if (!readAfter || readAfter.key !== key) return 0;
  const v = readAfter.version;
  readAfter = null;
  return v;
}

function header(t, section) {
  const nav = clear(document.getElementById('nav'));
  const who = clear(document.getElementById('who'));
  const s = session();
  if (!s) return;
  if (t) {
    for (const [key, label] of [['users', 'Users'], ['groups', 'Groups'], ['activity', 'Activity'], ['ops', 'Operations']]) {
      nav.append(h('a', { href: tenantHash(t, key), 'aria-current': section === key ? 'page' : null }, label));
    }
    who.append(h('span', { class: 'tenant', title: 'Tenant' }, t.id), h('a', { href: '#/tenants' }, 'Change tenant'));
  }
  who.append(h('span', { class: 'wide-only' }, s.subject),
    h('button', { type: 'button', id: 'signout', onclick: () => { clearSession(); go('#/signin'); } }, 'Sign out'));
}

function page(title, ...children) {
  clear(main);
  document.title = `${title} · ssodir`;
  main.append(h('div', { id: 'conflict' }), ...children);
}

function focusHeading() {
  const h1 = main.querySelector('h1');
  if (h1) { h1.tabIndex = -1; h1.focus({ preventScroll: true }); }
}

async function render() {
  if (pageAbort) pageAbort.abort();
  pageAbort = new AbortController();
  const { signal } = pageAbort;
  const { parts, params } = parseRoute();
  flash(pendingFlash);
  pendingFlash = '';
  try {
    if (parts[0] === 'signin') { header(null); signinPage(params); return; }
    const s = session();
    if (!s) { header(null); signinPage(new URLSearchParams()); return; }
    if (parts[0] !== 't' || parts.length < 3) { header(null); tenantsPage(); return; }
    const t = new Tenant(parts[1], parts[2]);
    if (s.tenants && !s.tenants.includes(t.id)) {
      header(null);
      page('Not allowed', h('h1', {}, 'Not allowed'), h('p', {}, `Your sign-in does not cover tenant ${t.id}. `, h('a', { href: '#/tenants' }, 'Pick another tenant')));
      return;
    }
    rememberTenant(t.id);
    const [section = 'users', name, sub] = parts.slice(3);
    header(t, section);
    if (section === 'users' && !name) await usersPage(t, params, signal);
    else if (section === 'users' && name === '+new') newUserPage(t);
    else if (section === 'users') await userPage(t, name, signal);
    else if (section === 'groups' && !name) await groupsPage(t, signal);
    else if (section === 'groups' && name === '+new') newGroupPage(t);
    else if (section === 'groups') await groupPage(t, name, signal);
    else if (section === 'activity') await tenantActivityPage(t, params, signal);
    else if (section === 'ops') await opsPage(t, signal);
    else page('Not found', h('h1', {}, 'Not found'), h('p', {}, h('a', { href: tenantHash(t, 'users') }, 'Users')));
    if (!sub) focusHeading();
  } catch (e) {
    if (e.name === 'AbortError') return;
    const heading = { 403: 'Not allowed', 404: 'Not found', 503: 'Service unavailable' }[e.status] || 'Something went wrong';
    page(heading, h('h1', {}, heading), problemBox(e),
      h('p', {}, h('button', { type: 'button', onclick: () => render() }, 'Try again')));
  }
}

function problemBox(e) {
  const p = e instanceof ApiError ? e.problem : { title: 'Error', detail: String(e && e.message) };
  return h('div', { class: 'form-error', role: 'alert' }, h('strong', {}, p.title || 'Error'), p.detail ? ` ${p.detail}` : '');
}

function rememberTenant(id) {
  const s = settings();
  const recent = [id, ...(s.recent_tenants || []).filter((x) => x !== id)].slice(0, 8);
  if ((s.recent_tenants || [])[0] !== id) saveSettings({ ...s, recent_tenants: recent });
}

// ---------------------------------------------------------------- errors next to fields

// Problem fields that are query parameters or codes map to the form control that sent them.
const codeField = { username_taken: 'username', email_taken: 'email', group_exists: 'name' };

function clearErrors(form) {
  for (const el of form.querySelectorAll('.field-error, .form-error')) el.remove();
  for (const el of form.querySelectorAll('[aria-invalid]')) {
    el.removeAttribute('aria-invalid');
    const ids = (el.getAttribute('aria-describedby') || '').split(' ').filter((x) => x && !x.endsWith('-error'));
    if (ids.length) el.setAttribute('aria-describedby', ids.join(' ')); else el.removeAttribute('aria-describedby');
  }
}

function showErrors(form, e, aliases = {}) {
  const fields = e instanceof ApiError ? [...e.fields] : [];
  if (e instanceof ApiError && codeField[e.code] && !fields.length) fields.push({ field: codeField[e.code], message: e.problem.detail || e.problem.title });
  const unplaced = [];
  let first = null;
  for (const f of fields) {
    const name = aliases[f.field] || f.field;
    const input = form.querySelector(`[name="${CSS.escape(name)}"]`);
    if (!input) { unplaced.push(f); continue; }
    const id = `${input.id}-error`;
    input.setAttribute('aria-invalid', 'true');
    input.setAttribute('aria-describedby', [input.getAttribute('aria-describedby'), id].filter(Boolean).join(' '));
    input.closest('.field, .grow, div').append(h('p', { class: 'field-error', id }, f.message));
    first = first || input;
  }
  if (!fields.length || unplaced.length) {
    const box = problemBox(e);
    for (const f of unplaced) box.append(h('div', {}, `${f.field}: ${f.message}`));
    form.prepend(box);
  }
  if (first) first.focus();
}

// perform runs a write from a form or a button: busy while it runs; a 412 shows the
// "changed by someone else" banner, other problems show next to their fields.
async function perform(form, what, fn) {
  clearErrors(form);
  flash('');
  const buttons = [...form.querySelectorAll('button')];
  for (const b of buttons) b.disabled = true;
  try {
    await fn();
  } catch (e) {
    if (e.name === 'AbortError') return;
    if (e instanceof ApiError && e.status === 412) { conflict(what); return; }
    showErrors(form, e);
  } finally {
    for (const b of buttons) b.disabled = false;
  }
}

function conflict(what) {
  const box = clear(document.getElementById('conflict'));
  box.append(h('div', { class: 'alert warn', role: 'alert', id: 'conflict-message' },
    h('strong', {}, `${what} was changed by someone else since you opened it.`),
    ' Your change was not saved. Reload to see the current version, then make your change again.',
    h('div', { class: 'actions' }, h('button', { type: 'button', class: 'primary', id: 'conflict-reload', onclick: () => render() }, 'Reload'))));
  box.querySelector('button').focus();
}

// until polls read until done(result) holds (a projection catching up with a write the
// page already knows about), for at most about 10 s; it answers the last result.
async function until(read, done, signal) {
  let last;
  for (let i = 0; i < 100; i++) {
    last = await read();
    if (done(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
    if (signal && signal.aborted) throw new DOMException('aborted', 'AbortError');
  }
  return last;
}

function parseAttributes(text) {
  const t = text.trim();
  if (!t) return {};
  let v;
  try { v = JSON.parse(t); } catch { return null; }
  if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
  return v;
}

function attrError(form) {
  showErrors(form, new ApiError(400, { title: 'Validation failed', errors: [{ field: 'attributes', message: 'must be a JSON object of string arrays, e.g. {"dept": ["eng"]}' }] }));
}

// ---------------------------------------------------------------- sign-in and tenants

function signinPage(params) {
  const s = settings();
  // make run prints a URL carrying the addresses, a tenant and the dev token in its hash.
  if (params.has('command_api') || params.has('token')) {
    const next = { ...s };
    for (const k of ['command_api', 'projector', 'keycloak_sync']) if (params.has(k)) next[k] = params.get(k);
    if (params.has('tenant')) next.recent_tenants = [params.get('tenant'), ...(s.recent_tenants || []).filter((x) => x !== params.get('tenant'))];
    saveSettings(next);
    const token = params.get('token');
    history.replaceState(null, '', `${location.pathname}#/signin`);
    if (token) {
      devSignIn(token);
      const tenant = params.get('tenant');
      const [sys, ten] = (tenant || '').split('/');
      go(sys && ten ? `#/t/${enc(sys)}/${enc(ten)}/users` : '#/tenants');
      return;
    }
    render();
    return;
  }
  const conn = h('form', { class: 'card', id: 'connection', onsubmit: (ev) => {
    ev.preventDefault();
    const f = ev.target.elements;
    saveSettings({ ...settings(), command_api: f.command_api.value.trim(), projector: f.projector.value.trim(), keycloak_sync: f.keycloak_sync.value.trim() });
    flash('Connection saved.');
  } },
  h('h2', {}, 'Connection'),
  field('Command API', h('input', { name: 'command_api', type: 'url', value: s.command_api || '', placeholder: 'https://directory.example.com:8080', required: true }), 'Where writes go; the query API is this page’s own server.'),
  field('Projector (operations)', h('input', { name: 'projector', type: 'url', value: s.projector || '' })),
  field('Keycloak sync (operations)', h('input', { name: 'keycloak_sync', type: 'url', value: s.keycloak_sync || '' })),
  h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Save connection')));

  const sso = serverCfg.oidc_issuer && serverCfg.client_id
    ? h('div', { class: 'card' }, h('h2', {}, 'Single sign-on'),
      h('p', { class: 'muted' }, `Signs in at ${serverCfg.oidc_issuer}.`),
      h('button', { type: 'button', class: 'primary', id: 'sso', onclick: async (ev) => {
        const card = ev.target.closest('.card');
        await perform(card, 'Sign-in', () => oidcStart(serverCfg, '#/tenants'));
      } }, 'Sign in with SSO'))
    : null;
  const dev = h('form', { class: 'card', id: 'dev-signin', onsubmit: (ev) => {
    ev.preventDefault();
    const token = ev.target.elements.token.value.trim();
    if (!token) { showErrors(ev.target, new ApiError(400, { title: 'Validation failed', errors: [{ field: 'token', message: 'enter the development token' }] })); return; }
    devSignIn(token);
    go('#/tenants');
  } },
  h('h2', {}, 'Development token'),
  h('p', { class: 'muted' }, 'The value of SSO_BOOTSTRAP_TOKEN (make run prints it). Development only.'),
  field('Token', h('input', { name: 'token', type: 'password', autocomplete: 'off' })),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: sso ? null : 'primary' }, 'Sign in with token')));
  page('Sign in', h('div', { class: 'signin' }, h('h1', {}, 'Sign in to ssodir'), sso, dev,
    h('details', { open: s.command_api ? null : true }, h('summary', {}, 'Connection settings'), conn)));
  focusHeading();
}

function tenantsPage() {
  const s = session();
  const recent = settings().recent_tenants || [];
  const choices = s.tenants || recent;
  const open = (id) => {
    const [sys, ten] = id.split('/');
    go(`#/t/${enc(sys)}/${enc(ten)}/users`);
  };
  const form = s.tenants ? null : h('form', { class: 'card', id: 'tenant-form', onsubmit: async (ev) => {
    ev.preventDefault();
    const f = ev.target;
    const sys = f.elements.system.value.trim();
    const ten = f.elements.tenant.value.trim();
    await perform(f, 'Tenant', async () => {
      await new Tenant(sys, ten).info();
      open(`${sys}/${ten}`);
    });
  } },
  h('h2', {}, 'Open a tenant'),
  h('div', { class: 'toolbar' },
    h('div', { class: 'grow' }, field('System', h('input', { name: 'system', required: true, autocomplete: 'off' }))),
    h('div', { class: 'grow' }, field('Tenant', h('input', { name: 'tenant', required: true, autocomplete: 'off' })))),
  h('button', { type: 'submit', class: 'primary' }, 'Open'));
  page('Tenants', h('h1', {}, 'Choose a tenant'),
    choices.length ? h('div', { class: 'card' }, h('h2', {}, s.tenants ? 'Your tenants' : 'Recent tenants'),
      h('div', { class: 'tenants' }, choices.map((id) => h('button', { type: 'button', onclick: () => open(id) }, id))))
      : (s.tenants ? h('p', {}, 'Your sign-in names no tenants.') : null),
    form);
  focusHeading();
}

// ---------------------------------------------------------------- users

function pager(load) {
  // Cursors are opaque; the stack of those already used gives "Previous".
  const stack = [];
  let current = '';
  let next = null;
  const prev = h('button', { type: 'button', class: 'prev', onclick: () => { current = stack.pop() || ''; load(current); } }, 'Previous');
  const nxt = h('button', { type: 'button', class: 'next', onclick: () => { stack.push(current); current = next; load(current); } }, 'Next');
  const el = h('div', { class: 'pager' }, prev, nxt);
  return {
    el,
    reset() { stack.length = 0; current = ''; },
    update(nextCursor) { next = nextCursor; prev.disabled = stack.length === 0; nxt.disabled = !nextCursor; el.hidden = !nextCursor && stack.length === 0; },
  };
}

function userName(u) { return [u.first_name, u.last_name].filter(Boolean).join(' ') || u.username; }
function status(active) { return h('span', { class: `badge ${active ? 'ok' : 'off'}` }, active ? 'Active' : 'Inactive'); }

async function usersPage(t, params, signal) {
  const by = ['last_name', 'first_name', 'email'].includes(params.get('by')) ? params.get('by') : 'last_name';
  const order = params.get('order') === 'updated_asc' ? 'updated_asc' : 'updated_desc';
  const search = h('input', { type: 'search', id: 'search', name: 'q', value: params.get('q') || '', autocomplete: 'off', placeholder: 'Type a name or an email' });
  const bySel = h('select', { id: 'search-by', name: 'by' },
    h('option', { value: 'last_name' }, 'Last name starts with'), h('option', { value: 'first_name' }, 'First name starts with'), h('option', { value: 'email' }, 'Email is'));
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
  let loadAbort = null;
  const pg = pager((c) => load(c));
  async function load(cursor) {
    if (loadAbort) loadAbort.abort();
    loadAbort = new AbortController();
    const q = search.value.trim();
    const mode = bySel.value;
    orderSel.disabled = !!q;
    const p = { limit: PAGE, cursor };
    if (q) p[mode === 'email' ? 'email' : `${mode}_prefix`] = q;
    else p.order = orderSel.value;
    clearErrors(form);
    try {
      const { data } = await t.users(p, { signal: loadAbort.signal });
      clear(tbody).append(...data.items.map((u) => h('tr', {},
        h('td', {}, h('a', { href: tenantHash(t, 'users', u.username) }, u.username),
          u.is_active ? null : h('span', { class: 'narrow-only' }, ' ', status(false))),
        h('td', {}, `${u.last_name || ''}${u.last_name && u.first_name ? ', ' : ''}${u.first_name || ''}`),
        h('td', {}, u.email),
        h('td', { class: 'wide-only' }, status(u.is_active)),
        h('td', { class: 'wide-only' }, time(u.updated_at)))));
      summary.textContent = data.items.length ? (q ? (mode === 'email' ? 'Match by email.' : `Sorted by ${mode.replace('_', ' ')}.`) : `Sorted by ${orderSel.options[orderSel.selectedIndex].text.toLowerCase()}.`) : 'No users match.';
      pg.update(data.next_cursor);
    } catch (e) {
      if (e.name === 'AbortError') return;
      showErrors(form, e, { email: 'q', last_name_prefix: 'q', first_name_prefix: 'q', order: 'order' });
    }
  }
  let timer = null;
  const changed = () => {
    if (search.value.includes('@') && bySel.value !== 'email') bySel.value = 'email';
    const q = new URLSearchParams();
    if (search.value.trim()) q.set('q', search.value.trim());
    if (bySel.value !== 'last_name') q.set('by', bySel.value);
    if (orderSel.value !== 'updated_desc') q.set('order', orderSel.value);
    const qs = q.toString();
    history.replaceState(null, '', `${location.pathname}${tenantHash(t, 'users')}${qs ? `?${qs}` : ''}`);
    pg.reset();
    clearTimeout(timer);
    timer = setTimeout(() => load(''), 200);
  };
  search.addEventListener('input', changed);
  bySel.addEventListener('change', changed);
  orderSel.addEventListener('change', changed);
  signal.addEventListener('abort', () => { clearTimeout(timer); if (loadAbort) loadAbort.abort(); });
  page('Users', h('h1', {}, 'Users', h('a', { class: 'button primary', href: tenantHash(t, 'users', '+new'), id: 'new-user' }, 'New user')),
    form, summary,
    h('div', { class: 'table-wrap' }, h('table', { id: 'users' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Username'), h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Email'),
        h('th', { scope: 'col', class: 'wide-only' }, 'Status'), h('th', { scope: 'col', class: 'wide-only' }, 'Updated'))),
      tbody)),
    pg.el);
  await load('');
}

function userFields(u = {}, creating = false) {
  return [
    creating ? field('Username', h('input', { name: 'username', required: true, autocomplete: 'off', maxlength: 128 }), 'Letters a–z, digits and . _ @ -; stored lower-cased.') : null,
    field('Email', h('input', { name: 'email', type: 'email', value: u.email || '', required: true, autocomplete: 'off' })),
    field('First name', h('input', { name: 'first_name', value: u.first_name || '', autocomplete: 'off' })),
    field('Last name', h('input', { name: 'last_name', value: u.last_name || '', autocomplete: 'off' })),
    creating ? field('Password (optional)', h('input', { name: 'password', type: 'password', autocomplete: 'new-password' }), '8 to 128 characters.') : null,
    field('Attributes (JSON)', h('textarea', { name: 'attributes', spellcheck: 'false' }, u.attributes && Object.keys(u.attributes).length ? JSON.stringify(u.attributes, null, 2) : ''), 'An object of string arrays, e.g. {"dept": ["eng"]}. Saving replaces all attributes.'),
  ];
}

function newUserPage(t) {
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
      pendingFlash = `User ${res.data.username} created.`;
      go(tenantHash(t, 'users', res.data.username));
    });
  } }, userFields({}, true), h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create user'), h('a', { href: tenantHash(t, 'users') }, 'Cancel')));
  page('New user', h('p', { class: 'crumbs' }, h('a', { href: tenantHash(t, 'users') }, 'Users'), ' / new'), h('h1', {}, 'New user'), form);
}

async function userPage(t, username, signal) {
  const min = takeReadAfter(`user:${username}`);
  const { data: u } = await t.user(username, { minVersion: min, signal });
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
  const reloadWith = (version, message) => { setReadAfter(`user:${u.username}`, version); pendingFlash = message; render(); };

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
  const delBox = h('div', { hidden: true, id: 'delete-confirm', role: 'group', 'aria-label': 'Confirm delete' },
    h('p', {}, h('strong', {}, `Delete ${u.username}?`), ' The user leaves every group; the username and email become free.'),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'danger', id: 'confirm-delete', onclick: () => perform(delBox, what, async () => {
        const res = await t.deleteUser(u.username, u.version);
        // Read our own delete: the view answers 404 once it has the deletion.
        if (res.version) await t.user(u.username, { minVersion: res.version }).catch((e) => { if (e.status !== 404) throw e; });
        pendingFlash = `User ${u.username} deleted.`;
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
    h('button', { type: 'button', id: 'delete-user', class: 'danger', onclick: () => show(delBox, '#confirm-delete') }, 'Delete'));
  details.append(actions, editForm, pwForm, delBox);

  const groupsSec = h('section', { class: 'card', 'aria-labelledby': 'groups-h' }, h('h2', { id: 'groups-h' }, 'Groups'));
  const activitySec = h('section', { class: 'card', 'aria-labelledby': 'activity-h' }, h('h2', { id: 'activity-h' }, 'Activity'));
  page(what, h('p', { class: 'crumbs' }, h('a', { href: tenantHash(t, 'users') }, 'Users'), ` / ${u.username}`),
    h('h1', {}, userName(u), status(u.is_active)),
    h('div', { class: 'grid' }, details, h('div', { class: 'stack' }, groupsSec, activitySec)));
  await Promise.all([
    userGroupsSection(t, u, groupsSec, signal),
    activitySection(t, `user:${u.username}`, u.version, activitySec, signal),
  ]);
}

function attrs(a) {
  const keys = Object.keys(a || {});
  if (!keys.length) return '—';
  return h('ul', { class: 'plain' }, keys.sort().map((k) => h('li', {}, h('code', {}, k), (a[k] || []).join(', '))));
}

// userGroupsSection lists the user's groups (paged) and adds or removes memberships, each
// on the group with the group's current version.
async function userGroupsSection(t, u, sec, signal) {
  const list = h('ul', { class: 'plain', id: 'user-groups' });
  const pg = pager((c) => load(c));
  async function load(cursor) {
    const { data } = await t.userGroups(u.username, { limit: PAGE, cursor }, { signal });
    clear(list).append(...data.items.map((g) => h('li', {},
      h('a', { href: tenantHash(t, 'groups', g.name) }, g.name),
      h('button', { type: 'button', class: 'link', 'aria-label': `Remove from ${g.name}`, onclick: (ev) => perform(ev.target.closest('li'), `Group ${g.name}`, async () => {
        const { data: cur } = await t.group(g.name);
        await t.removeMember(g.name, cur.version, u.username);
        await until(() => t.userGroups(u.username, { limit: PAGE }), (r) => !r.data.items.some((x) => x.name === g.name), signal);
        flash(`Removed from ${g.name}.`);
        pg.reset();
        await load('');
      }) }, 'Remove'))));
    if (!data.items.length) list.append(h('li', { class: 'muted' }, 'Not in any group.'));
    pg.update(data.next_cursor);
  }
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
      pg.reset();
      await load('');
    });
  } }, h('div', { class: 'grow' }, field('Add to group', input)), names, h('button', { type: 'submit' }, 'Add'));
  sec.append(list, pg.el, form);
  t.groups({ limit: 100 }, { signal }).then(({ data }) => names.append(...data.items.map((g) => h('option', { value: g.name })))).catch(() => {});
  await load('');
}

// ---------------------------------------------------------------- activity

const typeLabels = {
  'user.created': 'Created', 'user.updated': 'Updated', 'user.password_changed': 'Password changed',
  'user.deactivated': 'Deactivated', 'user.activated': 'Activated', 'user.deleted': 'Deleted',
  'group.created': 'Created', 'group.updated': 'Updated', 'group.deleted': 'Deleted',
  'group.member_added': 'Member added', 'group.member_removed': 'Member removed',
};

function show(v) {
  if (v === undefined || v === null || v === '') return '—';
  return typeof v === 'string' ? v : JSON.stringify(v);
}

function entityLink(t, entity) {
  const i = entity.indexOf(':');
  const kind = entity.slice(0, i);
  const name = entity.slice(i + 1);
  if (kind !== 'user' && kind !== 'group') return entity;
  return h('a', { href: tenantHash(t, `${kind}s`, name) }, `${kind} ${name}`);
}

function activityItem(t, a, withEntity) {
  const changes = Object.entries(a.changes || {});
  return h('li', {},
    h('div', { class: 'what' }, typeLabels[a.type] || a.type, withEntity ? [' · ', entityLink(t, a.entity)] : null, h('span', { class: 'muted' }, ` · v${a.version}`)),
    h('div', { class: 'meta' }, 'by ', h('a', { class: 'actor', href: `${tenantHash(t, 'activity')}?actor=${enc(a.actor)}` }, a.actor), ' at ', time(a.occurred_at)),
    changes.length ? h('div', { class: 'table-wrap' }, h('table', { class: 'changes' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Field'), h('th', { scope: 'col' }, 'Old'), h('th', { scope: 'col' }, 'New'))),
      h('tbody', {}, changes.map(([f, c]) => h('tr', {}, h('td', {}, h('code', {}, f)),
        h('td', {}, h('span', { class: 'old' }, show(c && c.old))), h('td', {}, '→ ', h('span', { class: 'new' }, show(c && c.new)))))))) : null);
}

// activitySection shows an entity's activity, newest first, waiting for the item of the
// version the page shows (the feed is written after the view).
async function activitySection(t, entity, version, sec, signal) {
  const list = h('ol', { class: 'timeline', id: 'activity' });
  const more = h('button', { type: 'button', id: 'older', hidden: true }, 'Show older');
  let next = null;
  more.addEventListener('click', async () => {
    const { data } = await t.activity({ entity, limit: PAGE, cursor: next }, { signal });
    list.append(...data.items.map((x) => activityItem(t, x)));
    next = data.next_cursor;
    more.hidden = !next;
  });
  sec.append(list, more);
  const read = () => t.activity({ entity, limit: PAGE }, { signal });
  const { data } = await until(read, (r) => !version || (r.data.items[0] && r.data.items[0].version >= version), signal);
  list.append(...data.items.map((x) => activityItem(t, x)));
  if (!data.items.length) list.append(h('li', { class: 'muted' }, 'No activity recorded.'));
  next = data.next_cursor;
  more.hidden = !next;
}

// tenantActivityPage answers "who changed what, and when": everything one actor did, or
// everything on one UTC day, newest first.
async function tenantActivityPage(t, params, signal) {
  const actor = params.get('actor') || '';
  const day = params.get('day') || (actor ? '' : new Date().toISOString().slice(0, 10));
  const actorIn = h('input', { name: 'actor', id: 'activity-actor', value: actor, autocomplete: 'off' });
  const dayIn = h('input', { name: 'day', id: 'activity-day', type: 'date', value: day });
  const form = h('form', { class: 'toolbar', id: 'activity-filter', onsubmit: (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    if (actorIn.value.trim()) q.set('actor', actorIn.value.trim());
    else if (dayIn.value) q.set('day', dayIn.value);
    go(`${tenantHash(t, 'activity')}?${q}`);
  } },
  h('div', { class: 'grow' }, field('Actor (the sub of a token; bootstrap for the dev token)', actorIn)),
  h('div', {}, field('or day (UTC)', dayIn)),
  h('button', { type: 'submit' }, 'Show'));
  const list = h('ol', { class: 'timeline', id: 'tenant-activity' });
  const more = h('button', { type: 'button', id: 'older', hidden: true }, 'Show older');
  page('Activity', h('h1', {}, 'Activity'),
    h('p', { class: 'muted', id: 'activity-scope' }, actor ? `Everything ${actor} did, newest first.` : `Everything on ${day} (UTC), newest first.`),
    form, h('section', { class: 'card', 'aria-labelledby': 'activity-scope' }, list, more));
  const q = actor ? { actor } : { day };
  let next = null;
  const load = async () => {
    try {
      const { data } = await t.activity({ ...q, limit: PAGE, cursor: next }, { signal });
      list.append(...data.items.map((x) => activityItem(t, x, true)));
      if (!next && !data.items.length) list.append(h('li', { class: 'muted' }, 'Nothing recorded.'));
      next = data.next_cursor;
      more.hidden = !next;
    } catch (e) {
      if (e.name === 'AbortError') return;
      showErrors(form, e);
    }
  };
  more.addEventListener('click', load);
  await load();
}

// ---------------------------------------------------------------- groups

async function groupsPage(t, signal) {
  const tbody = h('tbody', {});
  const pg = pager((c) => load(c));
  async function load(cursor) {
    const { data } = await t.groups({ limit: PAGE, cursor }, { signal });
    clear(tbody).append(...data.items.map((g) => h('tr', {},
      h('td', {}, h('a', { href: tenantHash(t, 'groups', g.name) }, g.name)),
      h('td', {}, g.description || ''),
      h('td', { class: 'wide-only' }, time(g.updated_at)))));
    if (!data.items.length) tbody.append(h('tr', {}, h('td', { colspan: 3, class: 'muted' }, 'No groups yet.')));
    pg.update(data.next_cursor);
  }
  page('Groups', h('h1', {}, 'Groups', h('a', { class: 'button primary', href: tenantHash(t, 'groups', '+new'), id: 'new-group' }, 'New group')),
    h('div', { class: 'table-wrap' }, h('table', { id: 'groups' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Name'), h('th', { scope: 'col' }, 'Description'), h('th', { scope: 'col', class: 'wide-only' }, 'Updated'))),
      tbody)), pg.el);
  await load('');
}

function groupFields(g = {}, creating = false) {
  return [
    creating ? field('Name', h('input', { name: 'name', required: true, autocomplete: 'off', maxlength: 128 }), 'Letters, digits, space, . _ -; unique in any case.') : null,
    field('Description', h('textarea', { name: 'description' }, g.description || '')),
    field('Attributes (JSON)', h('textarea', { name: 'attributes', spellcheck: 'false' }, g.attributes && Object.keys(g.attributes).length ? JSON.stringify(g.attributes, null, 2) : ''), 'An object of string arrays. Saving replaces all attributes.'),
  ];
}

function newGroupPage(t) {
  const form = h('form', { class: 'card', id: 'group-form', novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const f = form.elements;
    const attributes = parseAttributes(f.attributes.value);
    if (!attributes) { attrError(form); return; }
    await perform(form, 'The group', async () => {
      const res = await t.createGroup({ name: f.name.value.trim(), description: f.description.value.trim(), attributes });
      setReadAfter(`group:${res.data.name.toLowerCase()}`, res.version);
      pendingFlash = `Group ${res.data.name} created.`;
      go(tenantHash(t, 'groups', res.data.name));
    });
  } }, groupFields({}, true), h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary' }, 'Create group'), h('a', { href: tenantHash(t, 'groups') }, 'Cancel')));
  page('New group', h('p', { class: 'crumbs' }, h('a', { href: tenantHash(t, 'groups') }, 'Groups'), ' / new'), h('h1', {}, 'New group'), form);
}

async function groupPage(t, name, signal) {
  const key = `group:${name.toLowerCase()}`;
  const min = takeReadAfter(key);
  const { data: g } = await t.group(name, { minVersion: min, signal });
  const what = `Group ${g.name}`;
  const reloadWith = (version, message) => { setReadAfter(key, version); pendingFlash = message; render(); };
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
  const delBox = h('div', { hidden: true, id: 'delete-confirm', role: 'group', 'aria-label': 'Confirm delete' },
    h('p', {}, h('strong', {}, `Delete ${g.name}?`), ' Its memberships go with it.'),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'danger', id: 'confirm-delete', onclick: () => perform(delBox, what, async () => {
        const res = await t.deleteGroup(g.name, g.version);
        if (res.version) await t.group(g.name, { minVersion: res.version }).catch((e) => { if (e.status !== 404) throw e; });
        pendingFlash = `Group ${g.name} deleted.`;
        go(tenantHash(t, 'groups'));
      }) }, 'Delete group'),
      h('button', { type: 'button', onclick: () => { delBox.hidden = true; actions.hidden = false; } }, 'Cancel')));
  delBox.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') { delBox.hidden = true; actions.hidden = false; } });
  const showBox = (el, focus) => { actions.hidden = true; el.hidden = false; (el.querySelector(focus) || el).focus(); };
  const actions = h('div', { class: 'actions' },
    h('button', { type: 'button', id: 'edit-group', onclick: () => showBox(editForm, 'textarea') }, 'Edit'),
    h('button', { type: 'button', id: 'delete-group', class: 'danger', onclick: () => showBox(delBox, '#confirm-delete') }, 'Delete'));
  details.append(actions, editForm, delBox);

  const membersSec = h('section', { class: 'card', 'aria-labelledby': 'members-h' }, h('h2', { id: 'members-h' }, 'Members'));
  const activitySec = h('section', { class: 'card', 'aria-labelledby': 'activity-h' }, h('h2', { id: 'activity-h' }, 'Activity'));
  page(what, h('p', { class: 'crumbs' }, h('a', { href: tenantHash(t, 'groups') }, 'Groups'), ` / ${g.name}`), h('h1', {}, g.name),
    h('div', { class: 'grid' }, h('div', { class: 'stack' }, details, membersSec), activitySec));

  const list = h('ul', { class: 'plain', id: 'members' });
  const pg = pager((c) => loadMembers(c));
  async function loadMembers(cursor) {
    const { data } = await t.members(g.name, { limit: PAGE, cursor }, { signal });
    clear(list).append(...data.items.map((u) => h('li', {},
      h('span', {}, h('a', { href: tenantHash(t, 'users', u.username) }, u.username), h('span', { class: 'muted' }, ` ${userName(u)}`)),
      h('button', { type: 'button', class: 'link', 'aria-label': `Remove ${u.username}`, onclick: (ev) => perform(ev.target.closest('li'), what, async () => {
        const res = await t.removeMember(g.name, g.version, u.username);
        await until(() => t.userGroups(u.username, { limit: 500 }), (r) => !r.data.items.some((x) => x.name.toLowerCase() === g.name.toLowerCase()), signal);
        reloadWith(res.version, `${u.username} removed.`);
      }) }, 'Remove'))));
    if (!data.items.length) list.append(h('li', { class: 'muted' }, 'No members.'));
    pg.update(data.next_cursor);
  }
  const input = h('input', { name: 'username', id: 'add-member-name', autocomplete: 'off' });
  const form = h('form', { class: 'toolbar', id: 'add-member', onsubmit: async (ev) => {
    ev.preventDefault();
    const username = input.value.trim().toLowerCase();
    await perform(form, what, async () => {
      const res = await t.addMember(g.name, g.version, username);
      // The group's version is in the view before its membership items: wait for both.
      await until(() => t.userGroups(username, { limit: 500 }), (r) => r.data.items.some((x) => x.name.toLowerCase() === g.name.toLowerCase()), signal);
      reloadWith(res.version, `${username} added.`);
    });
  } }, h('div', { class: 'grow' }, field('Add member (username)', input)), h('button', { type: 'submit' }, 'Add member'));
  membersSec.append(list, pg.el, form);
  await Promise.all([loadMembers(''), activitySection(t, `group:${g.name.toLowerCase()}`, g.version, activitySec, signal)]);
}

// ---------------------------------------------------------------- operations

function sum(ms, name, labels) {
  let total = 0;
  let found = false;
  for (const m of ms) {
    if (m.name !== name) continue;
    if (Object.entries(labels).some(([k, v]) => m.labels[k] !== v)) continue;
    total += m.value;
    found = true;
  }
  return found ? total : null;
}

function seconds(v) {
  if (v === null) return '—';
  return v < 1 ? `${Math.round(v * 1000)} ms` : `${v.toFixed(1)} s`;
}

async function consumerCard(title, base, consumer, t, extra, signal) {
  const card = h('section', { class: 'card', 'aria-labelledby': `${consumer}-h` }, h('h2', { id: `${consumer}-h` }, title));
  if (!base) {
    card.append(h('p', { class: 'muted' }, `Set the ${title} address on the sign-in page’s connection settings.`));
    return card;
  }
  const [ok, ms] = await Promise.all([ready(base, signal), metrics(base, signal).catch((e) => e)]);
  card.append(h('p', {}, h('span', { class: `badge ${ok ? 'ok' : 'off'}`, id: `${consumer}-ready` }, ok ? 'Ready' : 'Not ready'), ' ', h('span', { class: 'muted' }, base)));
  if (ms instanceof Error) { card.append(problemBox(ms)); return card; }
  const l = { consumer, system: t.system, tenant: t.tenant };
  const failed = sum(ms, 'ssodir_stream_dead_letters_total', { ...l, kind: 'failed' });
  const parkedTotal = sum(ms, 'ssodir_stream_dead_letters_total', { ...l, kind: 'parked' });
  const stored = sum(ms, 'ssodir_stream_dead_letters_parked', l);
  const rows = [
    ['Lag of the last applied record', seconds(sum(ms, 'ssodir_stream_lag_seconds', l))],
    ['Records applied (all tenants)', String(sum(ms, 'ssodir_stream_records_total', { consumer }) ?? 0)],
    ['Dead letters now stored', String(stored ?? 0), stored ? 'warn' : null],
    ['Dead letters written (failed / parked)', `${failed ?? 0} / ${parkedTotal ?? 0}`, failed ? 'warn' : null],
    ['Stream gaps (replay needed)', String(sum(ms, 'ssodir_stream_gaps_total', l) ?? 0), sum(ms, 'ssodir_stream_gaps_total', l) ? 'off' : null],
    ...extra(ms),
  ];
  card.append(h('dl', { class: 'facts', id: `${consumer}-facts` }, rows.map(([k, v, cls]) => [h('dt', {}, k), h('dd', {}, cls ? h('span', { class: `badge ${cls}` }, v) : v)])));
  return card;
}

async function opsPage(t, signal) {
  const s = settings();
  const { data: info } = await t.info({ signal });
  const tenantCard = h('section', { class: 'card', 'aria-labelledby': 'tenant-h' }, h('h2', { id: 'tenant-h' }, 'Tenant'),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Tenant'), h('dd', {}, `${info.system_id}/${info.tenant_id}`),
      h('dt', {}, 'Status'), h('dd', {}, h('span', { class: `badge ${info.status === 'active' ? 'ok' : 'warn'}` }, info.status)),
      h('dt', {}, 'Keycloak'), h('dd', {}, info.keycloak && info.keycloak.url ? `${info.keycloak.url} realm ${info.keycloak.realm} (client ${info.keycloak.client_id}, on delete: ${info.keycloak.on_delete})` : 'not configured'),
      h('dt', {}, 'Created'), h('dd', {}, time(info.created_at)),
      h('dt', {}, 'Updated'), h('dd', {}, time(info.updated_at))));
  const [proj, sync] = await Promise.all([
    consumerCard('Projector', s.projector, 'projector', t, () => [], signal),
    consumerCard('Keycloak sync', s.keycloak_sync, 'keycloak-sync', t, (ms) => {
      const last = sum(ms, 'ssodir_keycloak_last_reconcile_success_timestamp_seconds', { system: t.system, tenant: t.tenant });
      const tl = { system: t.system, tenant: t.tenant };
      const found = sum(ms, 'ssodir_keycloak_last_reconcile_drift', { ...tl, outcome: 'found' });
      const parked = sum(ms, 'ssodir_keycloak_tenant_parked', { system: t.system, tenant: t.tenant });
      const waiting = sum(ms, 'ssodir_stream_parked_records', { consumer: 'keycloak-sync', system: t.system, tenant: t.tenant });
      return [
        ['Parked (the realm is failing; records wait in order)', parked ? `yes, ${waiting ?? 0} records waiting` : 'no', parked ? 'off' : null],
        ['Last successful reconcile', last ? time(new Date(last * 1000).toISOString()) : 'none yet', last ? null : 'warn'],
        ['Drift of the last reconcile (found / repaired / stale)', found === null ? 'no reconcile yet'
          : `${found} / ${sum(ms, 'ssodir_keycloak_last_reconcile_drift', { ...tl, outcome: 'repaired' }) ?? 0} / ${sum(ms, 'ssodir_keycloak_last_reconcile_drift', { ...tl, outcome: 'stale' }) ?? 0}`,
        found ? 'warn' : null],
      ];
    }, signal),
  ]);
  const refresh = h('button', { type: 'button', id: 'refresh', onclick: () => render() }, 'Refresh');
  page('Operations', h('h1', {}, 'Operations', refresh), h('p', { class: 'muted' }, 'From the services’ own /readyz and /metrics; figures for this tenant unless marked.'),
    h('div', { class: 'grid' }, tenantCard, proj, sync));
}

// ---------------------------------------------------------------- start

window.addEventListener('ssodir:unauthorized', () => {
  clearSession();
  pendingFlash = 'Your sign-in is no longer valid; sign in again.';
  go('#/signin');
});
window.addEventListener('hashchange', () => render());

async function start() {
  try {
    serverCfg = await serverConfig();
  } catch {
    serverCfg = {};
  }
  try {
    const next = await oidcFinish(serverCfg);
    if (next) { location.hash = next; return; }
  } catch (e) {
    page('Sign-in failed', h('h1', {}, 'Sign-in failed'), problemBox(e), h('p', {}, h('a', { href: '#/signin' }, 'Back to sign-in')));
    return;
  }
  if (!commandBase() && session() && !location.hash.startsWith('#/signin')) pendingFlash = 'Set the command API address in the connection settings to make changes.';
  render();
}

start();
