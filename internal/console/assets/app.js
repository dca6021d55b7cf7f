// ssodir console: a hash-routed single-page application over the query and command APIs.
import {
  ApiError, SERVICES, Tenant, addressesFromServer, clearSession, commandBase, configure, endpoint, metrics, ready,
  saveSettings, serverConfig, session, settings, typedAddressProblem,
} from './api.js';
import { devSignIn, keepFresh, loadServerConfig, oidcFinish, oidcStart, redeemCode, renew } from './auth.js';
import { clear, field, h, time } from './dom.js';
import { listView, parseRoute, problemBox, setParams } from './ui.js';
import { actorName, fieldLabel, membershipChange, value } from './words.js';

const main = document.getElementById('main');
const PAGE = 25;
// The operations page reads the services' probes and metrics again this often.
const OPS_REFRESH_MS = 5000;
let pageAbort = null;
let loadingTimer = null;
// readAfter is the version the last write produced; the next page showing that entity
// reads with X-Min-Version so it never shows the state from before the write.
let readAfter = null;
let pendingFlash = '';
// linkNotices are what the last sign-in link asked for and the console did not do.
let linkNotices = [];
// pendingLink is what a sign-in link asks that needs the user's yes: addresses to use, or
// a development code to replace the tab's session with.
let pendingLink = null;
// codeError is why the one-time code of the last sign-in link did not sign in.
let codeError = null;

// ---------------------------------------------------------------- routing and frame

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
  clearTimeout(loadingTimer);
  clear(main);
  main.removeAttribute('aria-busy');
  document.title = `${title} · ssodir`;
  main.append(h('div', { id: 'conflict' }), ...children);
}

// pageLoading says that the page is being read when that takes more than a moment (a
// quick read shows the page without a flash of "Loading…").
function pageLoading() {
  clearTimeout(loadingTimer);
  loadingTimer = setTimeout(() => {
    page('Loading', h('p', { class: 'muted', id: 'page-loading', role: 'status' }, 'Loading…'));
    main.setAttribute('aria-busy', 'true');
  }, 150);
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
  pageLoading();
  try {
    if (parts[0] === 'signin') { header(null); await signinPage(params); return; }
    const s = session();
    if (!s) { header(null); await signinPage(new URLSearchParams()); return; }
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
    else if (section === 'users') await userPage(t, name, params, signal);
    else if (section === 'groups' && !name) await groupsPage(t, params, signal);
    else if (section === 'groups' && name === '+new') newGroupPage(t);
    else if (section === 'groups') await groupPage(t, name, params, signal);
    else if (section === 'activity') await tenantActivityPage(t, params, signal);
    else if (section === 'ops') await opsPage(t, signal);
    else page('Not found', h('h1', {}, 'Not found'), h('p', {}, h('a', { href: tenantHash(t, 'users') }, 'Users')));
    if (!sub) focusHeading();
  } catch (e) {
    if (e.name === 'AbortError') return;
    // A service that did not answer is the heading itself ("No answer from the query API").
    const heading = e.status === 0 && e.problem && e.problem.title ? e.problem.title
      : { 403: 'Not allowed', 404: 'Not found', 503: 'Service unavailable' }[e.status] || 'Something went wrong';
    page(heading, h('h1', {}, heading),
      e.status === 0 ? h('div', { class: 'form-error', role: 'alert' }, e.problem.detail || '') : problemBox(e),
      h('p', {}, h('button', { type: 'button', id: 'page-retry', onclick: () => render() }, 'Try again')));
  } finally {
    clearTimeout(loadingTimer);
  }
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

// perform runs a write (or a read a form asks for) from a form or a button: busy while it
// runs, saying busyText if given; a 412 shows the "changed by someone else" banner, other
// problems show next to their fields.
async function perform(form, what, fn, busyText) {
  clearErrors(form);
  flash('');
  const buttons = [...form.querySelectorAll('button')];
  for (const b of buttons) b.disabled = true;
  const busy = busyText ? h('p', { class: 'muted busy', role: 'status' }, busyText) : null;
  if (busy) form.append(busy);
  form.setAttribute('aria-busy', 'true');
  try {
    await fn();
  } catch (e) {
    if (e.name === 'AbortError') return;
    if (e instanceof ApiError && e.status === 412) { conflict(what); return; }
    showErrors(form, e);
  } finally {
    for (const b of buttons) b.disabled = false;
    if (busy) busy.remove();
    form.removeAttribute('aria-busy');
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

const rowOf = (cols) => (text) => h('tr', {}, h('td', { colspan: cols, class: 'muted' }, text));
const itemOf = (text) => h('li', { class: 'muted' }, text);

// ---------------------------------------------------------------- sign-in and tenants

const serviceLabels = { command_api: 'Command API', projector: 'Projector (operations)', keycloak_sync: 'Keycloak sync (operations)' };

// takeLink reads what a sign-in link carries and removes it from the address bar at once.
// Nothing in it takes effect silently: a token is never used, addresses only after the user
// confirms them (and only when the server names none), a one-time code signs in only a tab
// that is not signed in, or after the user agrees to replace the session.
function takeLink(params) {
  const link = { code: params.get('code') || '', tenant: params.get('tenant') || '', addresses: {} };
  for (const k of SERVICES) if (params.get(k)) link.addresses[k] = params.get(k);
  const hasToken = params.has('token');
  if (!link.code && !hasToken && !Object.keys(link.addresses).length && !link.tenant) return null;
  history.replaceState(null, '', `${location.pathname}#/signin`);
  linkNotices = [];
  if (hasToken) {
    linkNotices.push('This link carried a token. Sign-in links do not carry tokens: it was not used, and this tab is not signed in with it. Enter the development token below, or open a fresh link from make run (scripts/console-link.sh).');
  }
  if (Object.keys(link.addresses).length && addressesFromServer()) {
    linkNotices.push('This link named other service addresses. They were ignored: this console uses the addresses its server sets.');
    link.addresses = {};
  }
  return link;
}

async function signinPage(params) {
  const link = takeLink(params);
  if (link) {
    if (link.tenant && /^[a-z0-9-]+\/[a-z0-9-]+$/.test(link.tenant)) rememberTenant(link.tenant);
    pendingLink = (link.code || Object.keys(link.addresses).length) ? link : null;
    if (link.code && !session() && !Object.keys(link.addresses).length) {
      await signInWithCode(link);
      return;
    }
  }
  const s = settings();
  const notices = linkNotices.map((n) => h('div', { class: 'alert warn link-notice', role: 'alert' }, n));
  linkNotices = [];
  const failedCode = codeError ? h('div', { id: 'code-error' }, problemBox(codeError)) : null;
  codeError = null;
  const confirm = pendingLink ? linkConfirm(pendingLink) : null;

  const fromServer = addressesFromServer();
  const conn = fromServer
    ? h('div', { class: 'card', id: 'connection' }, h('h2', {}, 'Services'),
      h('p', { class: 'muted' }, 'Set by the server (SSO_CONSOLE_COMMAND_API, SSO_CONSOLE_PROJECTOR, SSO_CONSOLE_KEYCLOAK_SYNC on the query API).'),
      h('dl', { class: 'facts' }, SERVICES.map((k) => [h('dt', {}, serviceLabels[k]), h('dd', {}, endpoint(k) || 'not set')])))
    : connectionForm(s);

  const cfg = serverConfig();
  const sso = cfg.oidc_issuer && cfg.client_id
    ? h('div', { class: 'card' }, h('h2', {}, 'Single sign-on'),
      h('p', { class: 'muted' }, `Signs in at ${cfg.oidc_issuer}.`),
      h('button', { type: 'button', class: 'primary', id: 'sso', onclick: async (ev) => {
        const card = ev.target.closest('.card');
        await perform(card, 'Sign-in', () => oidcStart(cfg, '#/tenants'));
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
  h('p', { class: 'muted' }, 'The value of SSO_BOOTSTRAP_TOKEN (make run keeps it in .data/dev-token). Development only.'),
  field('Token', h('input', { name: 'token', type: 'password', autocomplete: 'off' })),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: sso ? null : 'primary' }, 'Sign in with token')));
  const current = session();
  page('Sign in', h('div', { class: 'signin' }, h('h1', {}, 'Sign in to ssodir'), failedCode, notices, confirm,
    current ? h('p', { class: 'muted', id: 'signed-in-as' }, `This tab is signed in as ${current.subject}. `, h('a', { href: '#/tenants' }, `Continue as ${current.subject}`)) : null,
    sso, dev,
    h('details', { open: !fromServer && !endpoint('command_api') ? true : null }, h('summary', {}, 'Connection settings'), conn)));
  focusHeading();
}

// signInWithCode exchanges a link's one-time code and opens the link's tenant.
async function signInWithCode(link) {
  pendingLink = null;
  try {
    devSignIn(await redeemCode(link.code));
  } catch (e) {
    // The sign-in page itself, with why the link did not sign in above the ways that can
    // (its message points to the token field there).
    linkNotices = [];
    codeError = e;
    await signinPage(new URLSearchParams());
    return;
  }
  pendingFlash = linkNotices.join(' ');
  linkNotices = [];
  const [sys, ten] = (link.tenant || '').split('/');
  go(sys && ten ? `#/t/${enc(sys)}/${enc(ten)}/users` : '#/tenants');
}

// linkConfirm asks before a link changes anything: the addresses it names (each shown, and
// refused when it is not on this machine), or replacing this tab's session.
function linkConfirm(link) {
  const names = Object.keys(link.addresses);
  const refused = names.filter((k) => typedAddressProblem(link.addresses[k]));
  const usable = names.filter((k) => !refused.includes(k));
  const s = session();
  const parts = [];
  if (names.length) {
    parts.push(h('p', {}, 'This link asks the console to send your sign-in token, and passwords you type, to:'),
      h('dl', { class: 'facts', id: 'link-addresses' }, names.map((k) => [h('dt', {}, serviceLabels[k]),
        h('dd', {}, h('code', {}, link.addresses[k]), refused.includes(k) ? h('span', { class: 'field-error' }, ` refused: ${typedAddressProblem(link.addresses[k])}`) : null)])));
  }
  if (link.code && s) parts.push(h('p', {}, `This link signs this tab in with the development token, in place of your session as ${s.subject}.`));
  else if (link.code) parts.push(h('p', {}, 'It then signs this tab in with the development token.'));
  const accept = async () => {
    if (usable.length) {
      const next = { ...settings() };
      for (const k of usable) next[k] = link.addresses[k];
      saveSettings(next);
    }
    if (link.code) { await signInWithCode(link); return; }
    pendingLink = null;
    pendingFlash = 'Connection saved.';
    render();
  };
  const acceptLabel = link.code && !usable.length ? 'Sign in with the link' : (usable.length ? 'Use these addresses' : null);
  return h('div', { class: 'card alert warn', role: 'alertdialog', 'aria-labelledby': 'link-h', id: 'link-confirm' },
    h('h2', { id: 'link-h' }, 'Check this sign-in link'), parts,
    h('div', { class: 'actions' },
      acceptLabel ? h('button', { type: 'button', class: 'primary', id: 'link-accept', onclick: accept }, acceptLabel) : null,
      h('button', { type: 'button', id: 'link-reject', onclick: () => { pendingLink = null; linkNotices = []; render(); } }, s ? `Stay signed in as ${s.subject}` : 'Ignore the link')));
}

// connectionForm lets the user type where the services are, when the server names none: on
// this machine only, and saved after the user confirms what will be sent there.
function connectionForm(s) {
  const inputs = Object.fromEntries(SERVICES.map((k) => [k, h('input', { name: k, type: 'url', value: s[k] || '', placeholder: k === 'command_api' ? 'http://127.0.0.1:8080' : '' })]));
  const confirmBox = h('div', { id: 'connection-confirm', hidden: true, role: 'group', 'aria-label': 'Confirm the addresses' });
  const form = h('form', { class: 'card', id: 'connection', novalidate: true, onsubmit: (ev) => {
    ev.preventDefault();
    clearErrors(form);
    const values = Object.fromEntries(SERVICES.map((k) => [k, inputs[k].value.trim().replace(/\/+$/, '')]));
    const errors = SERVICES.filter((k) => values[k] && typedAddressProblem(values[k])).map((k) => ({ field: k, message: typedAddressProblem(values[k]) }));
    if (errors.length) { showErrors(form, new ApiError(400, { title: 'Validation failed', errors })); return; }
    clear(confirmBox).append(h('p', {}, h('strong', {}, 'Send your sign-in token, and passwords you type, to these addresses?')),
      h('ul', {}, SERVICES.filter((k) => values[k]).map((k) => h('li', {}, `${serviceLabels[k]}: `, h('code', {}, values[k])))),
      h('div', { class: 'actions' },
        h('button', { type: 'button', class: 'primary', id: 'connection-accept', onclick: () => {
          saveSettings({ ...settings(), ...values });
          confirmBox.hidden = true;
          flash('Connection saved.');
        } }, 'Yes, save them'),
        h('button', { type: 'button', onclick: () => { confirmBox.hidden = true; } }, 'Cancel')));
    confirmBox.hidden = false;
    confirmBox.querySelector('button').focus();
  } },
  h('h2', {}, 'Connection'),
  h('p', { class: 'muted' }, 'The server names no service addresses, so the console may reach services on this machine only. The query API is this page’s own server.'),
  field('Command API', inputs.command_api, 'Where writes go.'),
  field('Projector (operations)', inputs.projector),
  field('Keycloak sync (operations)', inputs.keycloak_sync),
  h('div', { class: 'actions' }, h('button', { type: 'submit' }, 'Save connection')), confirmBox);
  return form;
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
    }, 'Looking for the tenant…');
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

function userName(u) { return [u.first_name, u.last_name].filter(Boolean).join(' ') || u.username; }
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

async function usersPage(t, params, signal) {
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

async function userPage(t, username, params, signal) {
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
  const renameForm = h('form', { id: 'rename-form', hidden: true, novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const username = renameForm.elements.username.value.trim().toLowerCase();
    await perform(renameForm, what, async () => {
      const res = await t.renameUser(u.username, u.version, username);
      // The person now lives under the new name: show that page, read at the new version.
      setReadAfter(`user:${username}`, res.version);
      pendingFlash = `Renamed from ${u.username}.`;
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
function gonePage(t, kind, name) {
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

function attrs(a) {
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
      h('a', { href: tenantHash(t, 'groups', g.name) }, g.name),
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
  if (m) return h('li', { class: 'membership' }, h('div', { class: 'what' }, `${m.words} `, h('a', { href: tenantHash(t, 'groups', m.key) }, m.name)), by);
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
function activitySection(t, entity, version, sec, signal) {
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
  h('div', { class: 'grow' }, field('Done by', actorIn, 'Who made the changes: a person’s sign-in name, scim-token:<id> for a SCIM token, bootstrap for the development token.')),
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

// ---------------------------------------------------------------- groups

function groupsPage(t, params, signal) {
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

async function groupPage(t, name, params, signal) {
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
  const renameForm = h('form', { id: 'rename-form', hidden: true, novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const newName = renameForm.elements.name.value.trim();
    await perform(renameForm, what, async () => {
      const res = await t.renameGroup(g.name, g.version, newName);
      // The group now lives under the new name: show that page, read at the new version.
      setReadAfter(`group:${newName.toLowerCase()}`, res.version);
      pendingFlash = `Renamed from ${g.name}.`;
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
        pendingFlash = `Group ${g.name} deleted.`;
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
      h('span', {}, h('a', { href: tenantHash(t, 'users', u.username) }, u.username), h('span', { class: 'muted' }, ` ${userName(u)}`)),
      h('button', { type: 'button', class: 'link', 'aria-label': `Remove ${u.username}`, onclick: (ev) => perform(ev.target.closest('li'), what, async () => {
        const res = await t.removeMember(g.name, g.version, u.username);
        await until(() => t.userGroups(u.username, { limit: 500 }), (r) => !r.data.items.some((x) => x.name.toLowerCase() === g.name.toLowerCase()), signal);
        reloadWith(res.version, `${u.username} removed.`);
      }) }, 'Remove'))),
  });
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
  membersSec.append(ul, list.el, form);
  list.load(params.get('cursor') || '');
  activitySection(t, `group:${g.name.toLowerCase()}`, g.version, activitySec, signal);
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
    card.append(h('p', { class: 'muted' }, addressesFromServer()
      ? `The server names no ${title} address (SSO_CONSOLE_${consumer === 'projector' ? 'PROJECTOR' : 'KEYCLOAK_SYNC'} on the query API).`
      : `Set the ${title} address on the sign-in page’s connection settings.`));
    return card;
  }
  const [ok, ms] = await Promise.all([ready(base, signal), metrics(base, signal).catch((e) => e)]);
  card.append(h('p', {}, h('span', { class: `badge ${ok ? 'ok' : 'off'}`, id: `${consumer}-ready` }, ok ? 'Ready' : 'Not ready'), ' ', h('span', { class: 'muted' }, base)));
  if (ms instanceof Error) {
    if (ms.name === 'AbortError') throw ms;
    card.append(problemBox(ms));
    return card;
  }
  const l = { consumer, system: t.system, tenant: t.tenant };
  const failed = sum(ms, 'ssodir_stream_dead_letters_total', { ...l, kind: 'failed' });
  const parkedTotal = sum(ms, 'ssodir_stream_dead_letters_total', { ...l, kind: 'parked' });
  const stored = sum(ms, 'ssodir_stream_dead_letters_parked', l);
  const rows = [
    ['How far behind: the delay of the last change applied', seconds(sum(ms, 'ssodir_stream_lag_seconds', l))],
    ['Records applied: changes taken from the stream (all tenants)', String(sum(ms, 'ssodir_stream_records_total', { consumer }) ?? 0)],
    ['Changes set aside after failing, now (dead letters)', String(stored ?? 0), stored ? 'warn' : null],
    ['Changes set aside so far (failed / parked)', `${failed ?? 0} / ${parkedTotal ?? 0}`, failed ? 'warn' : null],
    ['Changes lost from the stream (a replay is needed)', String(sum(ms, 'ssodir_stream_gaps_total', l) ?? 0), sum(ms, 'ssodir_stream_gaps_total', l) ? 'off' : null],
    ...extra(ms),
  ];
  card.append(h('dl', { class: 'facts', id: `${consumer}-facts` }, rows.map(([k, v, cls]) => [h('dt', {}, k), h('dd', {}, cls ? h('span', { class: `badge ${cls}` }, v) : v)])));
  return card;
}

async function tenantCard(t, signal) {
  const card = h('section', { class: 'card', 'aria-labelledby': 'tenant-h', id: 'tenant-card' }, h('h2', { id: 'tenant-h' }, 'Tenant'));
  let info;
  try {
    ({ data: info } = await t.info({ signal }));
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    card.append(problemBox(e));
    return card;
  }
  card.append(h('dl', { class: 'facts' },
    h('dt', {}, 'Tenant'), h('dd', {}, `${info.system_id}/${info.tenant_id}`),
    h('dt', {}, 'Status'), h('dd', {}, h('span', { class: `badge ${info.status === 'active' ? 'ok' : 'warn'}` }, info.status)),
    h('dt', {}, 'Keycloak'), h('dd', {}, info.keycloak && info.keycloak.url ? `${info.keycloak.url} realm ${info.keycloak.realm} (client ${info.keycloak.client_id}, on delete: ${info.keycloak.on_delete})` : 'not configured'),
    h('dt', {}, 'Created'), h('dd', {}, time(info.created_at)),
    h('dt', {}, 'Updated'), h('dd', {}, time(info.updated_at))));
  return card;
}

// opsPage shows the tenant and the consumers, and reads them again every OPS_REFRESH_MS
// while it is open (one read at a time; a failed read shows in its card until the next).
async function opsPage(t, signal) {
  const grid = h('div', { class: 'grid', id: 'ops' });
  const stamp = h('p', { class: 'muted', id: 'ops-updated', 'aria-live': 'off' }, 'Loading…');
  const refresh = h('button', { type: 'button', id: 'refresh' }, 'Refresh');
  page('Operations', h('h1', {}, 'Operations', refresh),
    h('p', { class: 'muted' }, 'From the services’ own /readyz and /metrics; figures for this tenant unless marked.'), stamp, grid);
  let busy = false;
  const load = async () => {
    if (busy) return;
    busy = true;
    refresh.disabled = true;
    grid.setAttribute('aria-busy', 'true');
    try {
      const cards = await Promise.all([
        tenantCard(t, signal),
        consumerCard('Projector', endpoint('projector'), 'projector', t, () => [], signal),
        consumerCard('Keycloak sync', endpoint('keycloak_sync'), 'keycloak-sync', t, (ms) => {
          const tl = { system: t.system, tenant: t.tenant };
          const last = sum(ms, 'ssodir_keycloak_last_reconcile_success_timestamp_seconds', tl);
          const found = sum(ms, 'ssodir_keycloak_last_reconcile_drift', { ...tl, outcome: 'found' });
          const parked = sum(ms, 'ssodir_keycloak_tenant_parked', tl);
          const waiting = sum(ms, 'ssodir_stream_parked_records', { consumer: 'keycloak-sync', ...tl });
          return [
            ['Parked (the realm is failing; records wait in order)', parked ? `yes, ${waiting ?? 0} records waiting` : 'no', parked ? 'off' : null],
            ['Last successful reconcile', last ? time(new Date(last * 1000).toISOString()) : 'none yet', last ? null : 'warn'],
            ['Drift of the last reconcile (found / repaired / stale)', found === null ? 'no reconcile yet'
              : `${found} / ${sum(ms, 'ssodir_keycloak_last_reconcile_drift', { ...tl, outcome: 'repaired' }) ?? 0} / ${sum(ms, 'ssodir_keycloak_last_reconcile_drift', { ...tl, outcome: 'stale' }) ?? 0}`,
            found ? 'warn' : null],
          ];
        }, signal),
      ]);
      grid.replaceChildren(...cards);
      stamp.textContent = `Updated ${new Date().toISOString().slice(11, 19)} UTC; refreshes every ${OPS_REFRESH_MS / 1000} s.`;
    } catch (e) {
      if (e.name !== 'AbortError') stamp.replaceChildren(problemBox(e));
    } finally {
      busy = false;
      refresh.disabled = false;
      grid.removeAttribute('aria-busy');
    }
  };
  refresh.addEventListener('click', load);
  const timer = setInterval(load, OPS_REFRESH_MS);
  signal.addEventListener('abort', () => clearInterval(timer));
  await load();
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
    configure(await loadServerConfig());
  } catch {
    configure({});
  }
  try {
    const next = await oidcFinish(serverConfig());
    if (next) { keepFresh(); location.hash = next; return; }
  } catch (e) {
    page('Sign-in failed', h('h1', {}, 'Sign-in failed'), problemBox(e), h('p', {}, h('a', { href: '#/signin' }, 'Back to sign-in')));
    return;
  }
  const s = session();
  if (s && s.kind === 'oidc' && s.expires_at && Date.now() > s.expires_at - 5000) await renew();
  keepFresh();
  if (!commandBase() && session() && !location.hash.startsWith('#/signin')) {
    pendingFlash = addressesFromServer() ? 'The server names no command API address: this console can read, not write.'
      : 'Set the command API address in the connection settings to make changes.';
  }
  render();
}

start();
