// The console's HTTP client: the query API (this page's origin), the command API and the
// projector's and keycloak-sync's operations endpoints, with the sign-in session.

const SETTINGS = 'ssodir.settings';
const SESSION = 'ssodir.session';

// settings are per browser: where the other services are, recently used tenants.
export function settings() {
  try { return JSON.parse(localStorage.getItem(SETTINGS)) || {}; } catch { return {}; }
}
export function saveSettings(s) { localStorage.setItem(SETTINGS, JSON.stringify(s)); }

// session is per tab: the bearer token and what the console knows about it.
export function session() {
  try {
    const s = JSON.parse(sessionStorage.getItem(SESSION));
    if (s && s.expires_at && Date.now() > s.expires_at) { sessionStorage.removeItem(SESSION); return null; }
    return s;
  } catch { return null; }
}
export function saveSession(s) { sessionStorage.setItem(SESSION, JSON.stringify(s)); }
export function clearSession() { sessionStorage.removeItem(SESSION); }

export const queryBase = () => location.origin;
export const commandBase = () => (settings().command_api || '').replace(/\/+$/, '');

// ApiError is a problem+json answer (RFC 9457), or an unreachable service (status 0).
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

// request calls base+path. Writes carry a fresh Idempotency-Key (a retry of the browser's
// own request is then harmless), If-Match when a version is given, and reads X-Min-Version
// when the page must see its own write.
export async function request(base, method, path, opts = {}) {
  if (!base) throw new ApiError(0, { title: 'Not configured', detail: 'Set the command API address on the sign-in page.' });
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
  let res;
  try {
    res = await fetch(base + path, { method, headers, body, signal: opts.signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { title: `Cannot reach ${base}`, detail: `${base} did not answer. Is it running, and does its SSO_CORS_ORIGINS allow ${location.origin}?` });
  }
  const etag = res.headers.get('ETag');
  const version = etag ? Number(etag.replace(/^W\//, '').replace(/"/g, '')) : null;
  const text = await res.text();
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

const enc = encodeURIComponent;

// Tenant is one tenant's routes on both APIs.
export class Tenant {
  constructor(system, tenant) {
    this.system = system;
    this.tenant = tenant;
    this.prefix = `/v1/systems/${enc(system)}/tenants/${enc(tenant)}`;
  }
  get id() { return `${this.system}/${this.tenant}`; }
  read(path, opts) { return request(queryBase(), 'GET', this.prefix + path, opts); }
  write(method, path, opts) { return request(commandBase(), method, this.prefix + path, opts); }
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
  createGroup(body) { return this.write('POST', '/groups', { body }); }
  updateGroup(name, version, body) { return this.write('PATCH', `/groups/${enc(name)}`, { body, ifMatch: version }); }
  deleteGroup(name, version) { return this.write('DELETE', `/groups/${enc(name)}`, { ifMatch: version }); }
  addMember(group, version, user) { return this.write('PUT', `/groups/${enc(group)}/members/${enc(user)}`, { ifMatch: version }); }
  removeMember(group, version, user) { return this.write('DELETE', `/groups/${enc(group)}/members/${enc(user)}`, { ifMatch: version }); }
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== '') q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

// metrics reads a Prometheus text exposition into [{name, labels, value}].
export async function metrics(base, signal) {
  let res;
  try {
    res = await fetch(`${base.replace(/\/+$/, '')}/metrics`, { signal });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { title: `Cannot reach ${base}`, detail: `${base}/metrics did not answer. Is it running, and does its SSO_CORS_ORIGINS allow ${location.origin}?` });
  }
  if (!res.ok) throw new ApiError(res.status, { title: `HTTP ${res.status}`, detail: `${base}/metrics answered ${res.status}` });
  return parseMetrics(await res.text());
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

// ready is whether base/readyz answers 200.
export async function ready(base, signal) {
  try {
    const res = await fetch(`${base.replace(/\/+$/, '')}/readyz`, { signal });
    return res.ok;
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    return false;
  }
}
