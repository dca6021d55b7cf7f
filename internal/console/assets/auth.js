// Signing in: the development token, or OIDC Authorization Code with PKCE (RFC 7636) as a
// public client against the issuer the query API names in /console/config.json.
import { ApiError, randomString, saveSession } from './api.js';

const PKCE = 'ssodir.pkce';

// serverConfig is {oidc_issuer, client_id} from the query API.
export async function serverConfig() {
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
  let res;
  try {
    res = await fetch(pending.token_endpoint, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'authorization_code', code: params.get('code'), redirect_uri: redirectURI(),
        client_id: cfg.client_id, code_verifier: pending.verifier,
      }),
    });
  } catch {
    throw new ApiError(0, { title: 'Cannot reach the sign-in server', detail: `${pending.token_endpoint} did not answer.` });
  }
  const body = await res.json().catch(() => ({}));
  if (!res.ok || !body.access_token) {
    throw new ApiError(res.status, { title: 'Sign-in failed', detail: body.error_description || body.error || `token endpoint answered ${res.status}` });
  }
  const c = claims(body.access_token) || {};
  const expires = body.expires_in ? Date.now() + body.expires_in * 1000 : (c.exp ? c.exp * 1000 : null);
  saveSession({
    token: body.access_token, kind: 'oidc', subject: c.preferred_username || c.sub || 'signed in',
    tenants: tenantsOf(c), expires_at: expires,
  });
  return pending.return_to || '#/tenants';
}
