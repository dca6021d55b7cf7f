// ssodir console: a hash-routed single-page application over the query and command APIs.
import { ApiError, Tenant, addressesFromServer, clearSession, commandBase, configure, saveSettings, serverConfig, session, settings } from './api.js';
import { keepFresh, loadServerConfig, oidcFinish, renew } from './auth.js';
import { clear, h } from './dom.js';
import { parseRoute, problemBox } from './ui.js';
import { signinPage, tenantsPage } from './signin.js';
import { newUserPage, userPage, usersPage } from './users.js';
import { tenantActivityPage } from './activity.js';
import { groupPage, groupsPage, newGroupPage } from './groups.js';
import { opsPage } from './ops.js';
import { accessPage } from './access.js';
import { newWebhookPage, webhookPage, webhooksPage } from './webhooks.js';

const main = document.getElementById('main');
export const PAGE = 25;
// The operations page reads the services' probes and metrics again this often.
export const OPS_REFRESH_MS = 5000;
let pageAbort = null;
let loadingTimer = null;
// readAfter is the version the last write produced; the next page showing that entity
// reads with X-Min-Version so it never shows the state from before the write.
let readAfter = null;
let pendingFlash = '';
// setPendingFlash sets what the next page shows in its flash.
export function setPendingFlash(text) { pendingFlash = text; }

// ---------------------------------------------------------------- routing and frame

export const enc = encodeURIComponent;
export const tenantHash = (t, ...rest) => `#/t/${enc(t.system)}/${enc(t.tenant)}${rest.map((r) => `/${enc(r)}`).join('')}`;

export function go(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

export function flash(text) {
  const el = document.getElementById('flash');
  clear(el);
  if (text) el.append(h('p', {}, text));
}

export function setReadAfter(key, version) {
  readAfter = version ? { key, version } : null;
}

export function takeReadAfter(key) {
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
    for (const [key, label] of [['users', 'Users'], ['groups', 'Groups'], ['activity', 'Activity'], ['access', 'Access'], ['webhooks', 'Webhooks'], ['ops', 'Operations']]) {
      nav.append(h('a', { href: tenantHash(t, key), 'aria-current': section === key ? 'page' : null }, label));
    }
    who.append(h('span', { class: 'tenant', title: 'Tenant' }, t.id), h('a', { href: '#/tenants' }, 'Change tenant'));
  }
  who.append(h('span', { class: 'wide-only' }, s.subject),
    h('button', { type: 'button', id: 'signout', onclick: () => { clearSession(); go('#/signin'); } }, 'Sign out'));
}

export function page(title, ...children) {
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

export function focusHeading() {
  const h1 = main.querySelector('h1');
  if (h1) { h1.tabIndex = -1; h1.focus({ preventScroll: true }); }
}

export async function render() {
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
    else if (section === 'access') await accessPage(t, params, signal);
    else if (section === 'webhooks' && !name) await webhooksPage(t, signal);
    else if (section === 'webhooks' && name === '+new') newWebhookPage(t);
    else if (section === 'webhooks') await webhookPage(t, name, signal);
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

export function rememberTenant(id) {
  const s = settings();
  const recent = [id, ...(s.recent_tenants || []).filter((x) => x !== id)].slice(0, 8);
  if ((s.recent_tenants || [])[0] !== id) saveSettings({ ...s, recent_tenants: recent });
}

// ---------------------------------------------------------------- errors next to fields

// Problem fields that are query parameters or codes map to the form control that sent them.
const codeField = { username_taken: 'username', email_taken: 'email', group_exists: 'name' };

export function clearErrors(form) {
  for (const el of form.querySelectorAll('.field-error, .form-error')) el.remove();
  for (const el of form.querySelectorAll('[aria-invalid]')) {
    el.removeAttribute('aria-invalid');
    const ids = (el.getAttribute('aria-describedby') || '').split(' ').filter((x) => x && !x.endsWith('-error'));
    if (ids.length) el.setAttribute('aria-describedby', ids.join(' ')); else el.removeAttribute('aria-describedby');
  }
}

export function showErrors(form, e, aliases = {}) {
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
export async function perform(form, what, fn, busyText) {
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
export async function until(read, done, signal) {
  let last;
  for (let i = 0; i < 100; i++) {
    last = await read();
    if (done(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
    if (signal && signal.aborted) throw new DOMException('aborted', 'AbortError');
  }
  return last;
}

export function parseAttributes(text) {
  const t = text.trim();
  if (!t) return {};
  let v;
  try { v = JSON.parse(t); } catch { return null; }
  if (!v || typeof v !== 'object' || Array.isArray(v)) return null;
  return v;
}

export function attrError(form) {
  showErrors(form, new ApiError(400, { title: 'Validation failed', errors: [{ field: 'attributes', message: 'must be a JSON object of string arrays, e.g. {"dept": ["eng"]}' }] }));
}

export const rowOf = (cols) => (text) => h('tr', {}, h('td', { colspan: cols, class: 'muted' }, text));
export const itemOf = (text) => h('li', { class: 'muted' }, text);

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
