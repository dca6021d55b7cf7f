// The console's HTTP client: the query API (this page's origin), the command API and the
// projector's and keycloak-sync's operations endpoints, with the sign-in session.

const SETTINGS = 'ssodir.settings';
const SESSION = 'ssodir.session';

// server is /console/config.json: how to sign in, where the services are, how long to
// wait for a read. Set once at start by configure().
let server = {};
export function configure(cfg) { server = cfg || {}; }
export function serverConfig() { return server; }
const readTimeout = () => server.read_timeout_ms || 15000;

// settings are per browser: recently used tenants and, only when the query API names no
// service address, the loopback addresses the user typed and confirmed on the sign-in page.
export function settings() {
  try { return JSON.parse(localStorage.getItem(SETTINGS)) || {}; } catch { return {}; }
}
export function saveSettings(s) { localStorage.setItem(SETTINGS, JSON.stringify(s)); }

export const SERVICES = ['command_api', 'projector', 'keycloak_sync'];

// addressesFromServer is whether the operator named the services (SSO_CONSOLE_*): then the
// console talks to those and to nothing the browser holds.
export const addressesFromServer = () => SERVICES.some((k) => server[k]);

// typedAddressProblem says why an address the user typed (or a link carried) may not be
// used, or '' when it may: without the operator's addresses the console may reach only
// this machine (its Content-Security-Policy allows nothing else).
export function typedAddressProblem(raw) {
  let u;
  try { u = new URL(raw); } catch { return 'is not an absolute http(s) URL'; }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return 'is not an absolute http(s) URL';
  if (u.username || u.password || u.search || u.hash) return 'must not hold a user, a query or a fragment';
  if (u.origin === location.origin) return '';
  if (u.hostname === 'localhost' || /^127\.0\.0\.1$/.test(u.hostname)) return '';
  return 'is not on this machine: addresses of other hosts are set by the operator (SSO_CONSOLE_COMMAND_API, SSO_CONSOLE_PROJECTOR, SSO_CONSOLE_KEYCLOAK_SYNC on the query API)';
}

// endpoint is the base URL of a service: the operator's, else the user's confirmed one if
// it is still allowed (an address saved by an older console from a link is not).
export function endpoint(name) {
  if (addressesFromServer()) return (server[name] || '').replace(/\/+$/, '');
  const v = settings()[name] || '';
  return v && !typedAddressProblem(v) ? v.replace(/\/+$/, '') : '';
}

// session is per tab: the bearer token and what the console knows about it.
export function session() {
  try {
    const s = JSON.parse(sessionStorage.getItem(SESSION));
    // An expired session with a refresh token is renewed at start; without one it is over.
    if (s && s.expires_at && Date.now() > s.expires_at && !s.refresh_token) { sessionStorage.removeItem(SESSION); return null; }
    return s;
  } catch { return null; }
}
export function saveSession(s) { sessionStorage.setItem(SESSION, JSON.stringify(s)); }
export function clearSession() { sessionStorage.removeItem(SESSION); }

export const queryBase = () => location.origin;
export const commandBase = () => endpoint('command_api');

// ApiError is a problem+json answer (RFC 9457), or a service that did not answer (status 0;
// code 'timeout' when it did not answer in time).
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
    this.code = problem.code || '';
  }
  get fields() { return Array.isArray(this.problem.errors) ? this.problem.errors : []; }
}

export function randomString(bytes) {
  const b = new Uint8Array(bytes);
  crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

// NAMES are the services in words, as the messages name them.
const NAMES = { query_api: 'the query API', command_api: 'the command API', projector: 'the projector', keycloak_sync: 'the Keycloak sync' };

// serviceName is which service base is, in words: the query API (this page's server), the
// command API, the projector or the Keycloak sync, as the console was told their addresses.
// key, when the caller knows it (one of NAMES), names the service whatever its address: a
// service behind the same origin as the query API is still itself.
export function serviceName(base, key) {
  if (key && NAMES[key]) return NAMES[key];
  const b = (base || '').replace(/\/+$/, '');
  if (b === location.origin) return NAMES.query_api;
  for (const k of SERVICES) if (b && endpoint(k) === b) return NAMES[k];
  return 'the service';
}

// sameOrigin is whether base is on this page's origin: the browser then asks nothing of
// CORS, so no SSO_CORS_ORIGINS can be at fault.
function sameOrigin(base) {
  try { return new URL(base || '', location.href).origin === location.origin; } catch { return false; }
}

// unreachable is a service that refused the connection or failed before answering, named
// once with its address, with only the hints that can apply: the query API served this
// page, so only its having stopped since can; a service on this page's origin may be down;
// one on another origin may also not list this console's origin in its SSO_CORS_ORIGINS
// (the browser then hides its answer, which looks the same from here).
function unreachable(base, key) {
  const name = serviceName(base, key);
  const query = key ? key === 'query_api' : name === NAMES.query_api;
  const hint = query
    ? 'Is it running? It served this page, so it stopped or restarted since.'
    : sameOrigin(base)
      ? 'Is it running?'
      : `Is it running, and does its SSO_CORS_ORIGINS list this console's origin, ${location.origin}?`;
  return new ApiError(0, { code: 'unreachable', title: `Cannot reach ${name}`, detail: `${cap(name)} at ${base} did not answer. ${hint}` });
}
const noAnswer = (base, ms, key) => new ApiError(0, { code: 'timeout', title: `No answer from ${serviceName(base, key)}`,
  detail: `${cap(serviceName(base, key))} at ${base} did not answer within ${Math.round(ms / 1000)} s. It may be overloaded or paused; try again.` });
const cap = (s) => s.charAt(0).toUpperCase() + s.slice(1);

// timedFetch is fetch with the read timeout, which also bounds reading the body: a read
// that takes longer fails with a 'timeout' ApiError, while the page's own abort (it went
// elsewhere) stays an AbortError.
// key names the service (one of NAMES) when the caller knows it.
export async function timedFetch(url, init, base, key) {
  const timeout = AbortSignal.timeout(readTimeout());
  const signal = init.signal ? AbortSignal.any([init.signal, timeout]) : timeout;
  try {
    return await fetch(url, { ...init, signal });
  } catch (e) {
    throw failure(e, base, init.signal, key);
  }
}

// failure turns what fetch or a body read threw into the error to show.
function failure(e, base, signal, key) {
  if (signal && signal.aborted) return new DOMException('aborted', 'AbortError');
  if (e && e.name === 'TimeoutError') return noAnswer(base, readTimeout(), key);
  if (e instanceof ApiError) return e;
  return unreachable(base, key);
}

async function readBody(res, base, signal, key) {
  try {
    return await res.text();
  } catch (e) {
    throw failure(e, base, signal, key);
  }
}

// request calls base+path. Reads give up after the read timeout. Writes carry a fresh
// Idempotency-Key (a retry of the browser's own request is then harmless), If-Match when a
// version is given, and reads X-Min-Version when the page must see its own write. Writes
// are not cut short: a write abandoned half-way would leave the user guessing. opts.service
// names the service (one of NAMES) for the messages of one that does not answer.
export async function request(base, method, path, opts = {}) {
  if (!base) throw new ApiError(0, { title: 'Not configured', detail: 'The command API address is not set: ask the operator to set SSO_CONSOLE_COMMAND_API on the query API, or, on a development machine, set it in the sign-in page’s connection settings.' });
  const headers = { Accept: 'application/json' };
  const s = session();
  if (s && s.token && opts.auth !== false) headers.Authorization = `Bearer ${s.token}`;
  let body;
  if (opts.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(opts.body);
  }
  if (opts.ifMatch != null) headers['If-Match'] = `"${opts.ifMatch}"`;
  if (opts.minVersion) headers['X-Min-Version'] = String(opts.minVersion);
  if (method !== 'GET') headers['Idempotency-Key'] = randomString(16);
  const init = { method, headers, body, signal: opts.signal };
  let res;
  if (method === 'GET') {
    res = await timedFetch(base + path, init, base, opts.service);
  } else {
    try {
      res = await fetch(base + path, init);
    } catch (e) {
      throw failure(e, base, opts.signal, opts.service);
    }
  }
  const etag = res.headers.get('ETag');
  const version = etag ? Number(etag.replace(/^W\//, '').replace(/"/g, '')) : null;
  const text = await readBody(res, base, opts.signal, opts.service);
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { data = text; }
  }
  if (!res.ok) {
    const problem = data && typeof data === 'object' ? data : { title: `HTTP ${res.status}`, detail: String(data || '') };
    const err = new ApiError(res.status, problem);
    if (res.status === 401 && opts.auth !== false) window.dispatchEvent(new CustomEvent('ssodir:unauthorized', { detail: err }));
    throw err;
  }
  return { status: res.status, data, version };
}

// enc is one path segment: '@' stays as it is (RFC 3986 allows it in a path), so that a
// username that is an email address reaches every route as it is written.
const enc = (s) => encodeURIComponent(s).replace(/%40/g, '@');

// Tenant is one tenant's routes on both APIs.
export class Tenant {
  constructor(system, tenant) {
    this.system = system;
    this.tenant = tenant;
    this.prefix = `/v1/systems/${enc(system)}/tenants/${enc(tenant)}`;
  }
  get id() { return `${this.system}/${this.tenant}`; }
  read(path, opts) { return request(queryBase(), 'GET', this.prefix + path, { ...opts, service: 'query_api' }); }
  write(method, path, opts) { return request(commandBase(), method, this.prefix + path, { ...opts, service: 'command_api' }); }
  info(opts) { return this.read('', opts); }

  user(name, opts) { return this.read(`/users/${enc(name)}`, opts); }
  group(name, opts) { return this.read(`/groups/${enc(name)}`, opts); }
  users(params, opts) { return this.read(`/users${query(params)}`, opts); }
  groups(params, opts) { return this.read(`/groups${query(params)}`, opts); }
  userGroups(name, params, opts) { return this.read(`/users/${enc(name)}/groups${query(params)}`, opts); }
  members(name, params, opts) { return this.read(`/groups/${enc(name)}/members${query(params)}`, opts); }
  activity(params, opts) { return this.read(`/activity${query(params)}`, opts); }

  createUser(body) { return this.write('POST', '/users', { body }); }
  updateUser(name, version, body) { return this.write('PATCH', `/users/${enc(name)}`, { body, ifMatch: version }); }
  setActive(name, version, active) { return this.write('POST', `/users/${enc(name)}/${active ? 'activate' : 'deactivate'}`, { ifMatch: version }); }
  setPassword(name, version, password) { return this.write('PUT', `/users/${enc(name)}/password`, { body: { password }, ifMatch: version }); }
  deleteUser(name, version) { return this.write('DELETE', `/users/${enc(name)}`, { ifMatch: version }); }
  renameUser(name, version, username) { return this.write('POST', `/users/${enc(name)}/rename`, { body: { username }, ifMatch: version }); }
  createGroup(body) { return this.write('POST', '/groups', { body }); }
  updateGroup(name, version, body) { return this.write('PATCH', `/groups/${enc(name)}`, { body, ifMatch: version }); }
  deleteGroup(name, version) { return this.write('DELETE', `/groups/${enc(name)}`, { ifMatch: version }); }
  renameGroup(name, version, newName) { return this.write('POST', `/groups/${enc(name)}/rename`, { body: { name: newName }, ifMatch: version }); }
  // expiresAt (an ISO instant), when given, is when the membership ends by itself.
  addMember(group, version, user, expiresAt) { return this.write('PUT', `/groups/${enc(group)}/members/${enc(user)}`, { ifMatch: version, body: expiresAt ? { expires_at: expiresAt } : undefined }); }
  // The membership goes on without an end (`{"expires_at": null}` clears the expiry).
  clearExpiry(group, version, user) { return this.write('PUT', `/groups/${enc(group)}/members/${enc(user)}`, { ifMatch: version, body: { expires_at: null } }); }
  changeMembers(group, version, body) { return this.write('POST', `/groups/${enc(group)}/members`, { body, ifMatch: version }); }
  scimTokens(opts) { return request(commandBase(), 'GET', `${this.prefix}/scim-tokens`, { ...opts, service: 'command_api' }); }
  // Webhooks live on the command API only (tenants:admin), reads included.
  hooks(method, path, opts) { return request(commandBase(), method, `${this.prefix}/webhooks${path}`, { ...opts, service: 'command_api' }); }
  webhooks(opts) { return this.hooks('GET', '', opts); }
  webhook(id, opts) { return this.hooks('GET', `/${enc(id)}`, opts); }
  webhookDeliveries(id, params, opts) { return this.hooks('GET', `/${enc(id)}/deliveries${query(params)}`, opts); }
  createWebhook(body) { return this.hooks('POST', '', { body }); }
  deleteWebhook(id) { return this.hooks('DELETE', `/${enc(id)}`); }
  replayWebhook(id, body) { return this.hooks('POST', `/${enc(id)}/replay`, { body }); }
  rotateWebhookSecret(id) { return this.hooks('POST', `/${enc(id)}/rotate-secret`); }
  removeMember(group, version, user) { return this.write('DELETE', `/groups/${enc(group)}/members/${enc(user)}`, { ifMatch: version }); }
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

// metrics reads a Prometheus text exposition into [{name, labels, value}].
export async function metrics(base, signal, key) {
  const res = await timedFetch(`${base}/metrics`, { signal }, base, key);
  const text = await readBody(res, base, signal, key);
  if (!res.ok) throw new ApiError(res.status, { title: `HTTP ${res.status}`, detail: `${cap(serviceName(base, key))} at ${base} answered ${res.status} to /metrics.` });
  return parseMetrics(text);
}

export function parseMetrics(text) {
  const out = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    const re = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;
    let l;
    while ((l = re.exec(m[3] || ''))) labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

// ready is whether base/readyz answers 200 in time.
export async function ready(base, signal, key) {
  try {
    const res = await timedFetch(`${base}/readyz`, { signal }, base, key);
    return res.ok;
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    return false;
  }
}
