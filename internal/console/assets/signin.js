// ssodir console: sign-in (development code, OIDC, sign-in links), the connection settings and the tenants list (app.js routes here).
import { ApiError, SERVICES, Tenant, addressesFromServer, endpoint, saveSettings, serverConfig, session, settings, typedAddressProblem } from './api.js';
import { devSignIn, oidcStart, redeemCode } from './auth.js';
import { clear, field, h } from './dom.js';
import { actorText } from './words.js';
import { problemBox } from './ui.js';
import { clearErrors, enc, flash, focusHeading, go, page, perform, rememberTenant, render, setPendingFlash, showErrors } from './app.js';

// linkNotices are what the last sign-in link asked for and the console did not do.
let linkNotices = [];
// pendingLink is what a sign-in link asks that needs the user's yes: addresses to use, or
// a development code to replace the tab's session with.
let pendingLink = null;
// codeError is why the one-time code of the last sign-in link did not sign in.
let codeError = null;

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

// whoText is the session's subject in words: the development token says what it is.
const whoText = (s) => (s.kind === 'dev' ? actorText(s.subject) : s.subject);

export async function signinPage(params) {
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
    current ? h('p', { class: 'muted', id: 'signed-in-as' }, `This tab is signed in as ${whoText(current)}. `, h('a', { href: '#/tenants' }, `Continue as ${current.subject}`)) : null,
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
  setPendingFlash(linkNotices.join(' '));
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
  if (link.code && s) parts.push(h('p', {}, `This link signs this tab in with the development token, in place of your session as ${whoText(s)}.`));
  else if (link.code) parts.push(h('p', {}, 'It then signs this tab in with the development token.'));
  const accept = async () => {
    if (usable.length) {
      const next = { ...settings() };
      for (const k of usable) next[k] = link.addresses[k];
      saveSettings(next);
    }
    if (link.code) { await signInWithCode(link); return; }
    pendingLink = null;
    setPendingFlash('Connection saved.');
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

export function tenantsPage() {
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
