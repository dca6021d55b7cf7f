// Signing in: the development token (typed, or from make run's one-time code), or OIDC
// Authorization Code with PKCE (RFC 7636) as a public client against the issuer the query
// API names in /console/config.json, renewed with the refresh token before it expires.
import { ApiError, randomString, saveSession, session, timedFetch } from './api.js';

const PKCE = 'ssodir.pkce';

// loadServerConfig reads /console/config.json from the query API.
export async function loadServerConfig() {
  const res = await fetch('config.json');
  if (!res.ok) throw new ApiError(res.status, { title: 'Console configuration unavailable' });
  return res.json();
}

// claims decodes a JWT's payload (no verification: the APIs verify; the console only reads
// which tenants the token names and whose it is).
export function claims(token) {
  try {
    const part = token.split('.')[1].replace(/-/g, '+').replace(/_/g, '/');
    const json = decodeURIComponent(Array.from(atob(part), (c) => `%${c.charCodeAt(0).toString(16).padStart(2, '0')}`).join(''));
    return JSON.parse(json);
  } catch {
    return null;
  }
}

// tenantsOf is the list of "system/tenant" a token may touch, or null for every tenant.
export function tenantsOf(c) {
  if (!c) return null;
  let t = c.sso_tenants;
  if (typeof t === 'string') t = [t];
  if (!Array.isArray(t) || t.includes('*')) return null;
  return t.filter((x) => typeof x === 'string' && x.includes('/'));
}

export function devSignIn(token) {
  saveSession({ token, kind: 'dev', subject: 'bootstrap', tenants: null });
}

// redeemCode exchanges a one-time code of make run's link for the development token (the
// query API refuses a code used before or older than a minute).
export async function redeemCode(code) {
  const res = await timedFetch('dev-codes/redeem', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ code }) }, location.origin, 'query_api');
  const body = await res.json().catch(() => ({}));
  if (res.status === 400) {
    throw new ApiError(400, { title: 'This sign-in link was used or has expired',
      detail: 'A link from make run signs in once, within a minute. Print a fresh one with scripts/console-link.sh (or ssodirctl console-link), or enter the development token below.' });
  }
  if (!res.ok || !body.token) throw new ApiError(res.status, body.title ? body : { title: 'Sign-in failed', detail: `the query API answered ${res.status}` });
  return body.token;
}

const redirectURI = () => location.origin + location.pathname;

async function discover(issuer) {
  let res;
  try {
    res = await fetch(`${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`);
  } catch {
    throw new ApiError(0, { title: 'Cannot reach the sign-in server', detail: `${issuer} did not answer.` });
  }
  if (!res.ok) throw new ApiError(res.status, { title: 'Sign-in server unavailable', detail: `${issuer} answered ${res.status}.` });
  return res.json();
}

function base64url(bytes) {
  return btoa(String.fromCharCode(...new Uint8Array(bytes))).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

// oidcStart sends the browser to the issuer's authorization endpoint.
export async function oidcStart(cfg, returnTo) {
  if (!crypto.subtle) throw new ApiError(0, { title: 'Secure page needed', detail: 'Sign-in with PKCE needs the console over https (or on localhost).' });
  const meta = await discover(cfg.oidc_issuer);
  const verifier = randomString(32);
  const challenge = base64url(await crypto.subtle.digest('SHA-256', new TextEncoder().encode(verifier)));
  const state = randomString(16);
  sessionStorage.setItem(PKCE, JSON.stringify({ verifier, state, token_endpoint: meta.token_endpoint, return_to: returnTo }));
  const q = new URLSearchParams({
    response_type: 'code', client_id: cfg.client_id, redirect_uri: redirectURI(),
    scope: 'openid directory:read directory:write', state,
    code_challenge: challenge, code_challenge_method: 'S256',
  });
  location.assign(`${meta.authorization_endpoint}?${q}`);
}

// tokenRequest posts a grant to the issuer's token endpoint and answers its JSON.
async function tokenRequest(endpoint, form) {
  let res;
  try {
    res = await timedFetch(endpoint, { method: 'POST', headers: { 'Content-Type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams(form) }, endpoint);
  } catch (e) {
    if (e instanceof ApiError) throw new ApiError(0, { title: 'Cannot reach the sign-in server', detail: `${endpoint} did not answer.` });
    throw e;
  }
  const body = await res.json().catch(() => ({}));
  if (!res.ok || !body.access_token) {
    throw new ApiError(res.status, { title: 'Sign-in failed', detail: body.error_description || body.error || `token endpoint answered ${res.status}` });
  }
  return body;
}

// oidcSession is the session of a token endpoint's answer.
function oidcSession(body, tokenEndpoint, clientID, previous) {
  const c = claims(body.access_token) || {};
  const now = Date.now();
  const expires = body.expires_in ? now + body.expires_in * 1000 : (c.exp ? c.exp * 1000 : null);
  return {
    token: body.access_token, kind: 'oidc', subject: c.preferred_username || c.sub || 'signed in',
    tenants: tenantsOf(c), expires_at: expires, issued_at: now,
    // Issuers may rotate the refresh token; an answer without one keeps the old one.
    refresh_token: body.refresh_token || (previous && previous.refresh_token) || null,
    token_endpoint: tokenEndpoint, client_id: clientID,
  };
}

// oidcFinish completes a sign-in when the issuer has sent the browser back with a code;
// it answers the hash to go to, or null when this load is not a return from the issuer.
export async function oidcFinish(cfg) {
  const params = new URLSearchParams(location.search);
  if (!params.has('code') && !params.has('error')) return null;
  const pending = JSON.parse(sessionStorage.getItem(PKCE) || 'null');
  sessionStorage.removeItem(PKCE);
  history.replaceState(null, '', location.pathname);
  if (params.has('error')) {
    throw new ApiError(401, { title: 'Sign-in refused', detail: params.get('error_description') || params.get('error') });
  }
  if (!pending || pending.state !== params.get('state')) {
    throw new ApiError(401, { title: 'Sign-in not completed', detail: 'The answer from the sign-in server does not match a sign-in started here; start again.' });
  }
  const body = await tokenRequest(pending.token_endpoint, {
    grant_type: 'authorization_code', code: params.get('code'), redirect_uri: redirectURI(),
    client_id: cfg.client_id, code_verifier: pending.verifier,
  });
  saveSession(oidcSession(body, pending.token_endpoint, cfg.client_id, null));
  return pending.return_to || '#/tenants';
}

// refreshDue is when a session should be renewed: a quarter of its lifetime, at most a
// minute, before it expires (a one-hour token at 59 minutes, a 20-second one at 15 s).
function refreshDue(s) {
  const lifetime = s.expires_at - (s.issued_at || s.expires_at - 60000);
  return s.expires_at - Math.min(60000, Math.max(lifetime, 0) / 4);
}

let refreshTimer = null;
let refreshing = null;

// renew exchanges the session's refresh token for a new access token, once at a time. A
// failed refresh is tried again every 10 s while the token lasts; a session whose token
// expired unrenewed ends with the next request's 401, which sends the user to sign in.
export function renew() {
  const s = session();
  if (!s || s.kind !== 'oidc' || !s.refresh_token) return Promise.resolve(false);
  if (!refreshing) {
    clearTimeout(refreshTimer);
    refreshing = tokenRequest(s.token_endpoint, { grant_type: 'refresh_token', refresh_token: s.refresh_token, client_id: s.client_id })
      .then((body) => {
        const now = session();
        // Signed out, or signed in anew, meanwhile: that session is not this one's to change.
        if (!now || now.refresh_token !== s.refresh_token) return false;
        saveSession(oidcSession(body, s.token_endpoint, s.client_id, s));
        return true;
      })
      .catch(() => false)
      .then((ok) => {
        refreshing = null;
        if (ok) keepFresh();
        else if (s.expires_at > Date.now()) refreshTimer = setTimeout(() => renew(), Math.min(10000, s.expires_at - Date.now()));
        return ok;
      });
  }
  return refreshing;
}

// keepFresh schedules the renewal of an OIDC session before its token expires. Timers of
// a hidden tab are throttled, so a tab that becomes visible again checks at once.
export function keepFresh() {
  clearTimeout(refreshTimer);
  const s = session();
  if (!s || s.kind !== 'oidc' || !s.refresh_token || !s.expires_at) return;
  const wait = refreshDue(s) - Date.now();
  if (wait <= 0) { renew(); return; }
  refreshTimer = setTimeout(() => renew(), Math.min(wait, 2 ** 31 - 1));
}

document.addEventListener('visibilitychange', () => {
  const s = session();
  if (document.visibilityState === 'visible' && s && s.refresh_token && s.expires_at && Date.now() >= refreshDue(s)) renew();
});
