// ssodir console: the Webhooks pages (app.js routes here): a tenant's endpoints, a new one
// (its secret shown once), and an endpoint's page with its recent deliveries, replay, a new
// secret and delete. All on the command API (tenants:admin); docs/webhooks.md is the API.
import { field, h, time } from './dom.js';
import { listView, problemBox } from './ui.js';
import { actorName } from './words.js';
import { go, page, perform, render, rowOf, setPendingFlash, tenantHash } from './app.js';

// The event names an endpoint may choose (none chosen: every change).
const TYPES = [
  ['user.created', 'User created'], ['user.updated', 'User changed'], ['user.renamed', 'User renamed'],
  ['user.password_changed', 'Password changed'], ['user.activated', 'User activated'], ['user.deactivated', 'User deactivated'],
  ['user.deleted', 'User deleted'], ['user.erased', 'User erased'],
  ['group.created', 'Group created'], ['group.updated', 'Group changed'], ['group.renamed', 'Group renamed'], ['group.deleted', 'Group deleted'],
  ['group.member_added', 'Member added'], ['group.member_removed', 'Member removed'], ['group.members_changed', 'Members changed'],
  ['group.member_expiry_set', 'Membership end set'],
];

// shown is the secret of the endpoint just created or rotated, kept for the one page that
// shows it: a reload, or coming back, does not show it again (the API never answers it again).
let shown = null;

const HTTP = { 400: 'Bad Request', 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 405: 'Method Not Allowed', 408: 'Request Timeout',
  410: 'Gone', 413: 'Payload Too Large', 429: 'Too Many Requests', 500: 'Internal Server Error', 502: 'Bad Gateway', 503: 'Service Unavailable', 504: 'Gateway Timeout' };

// problemWords is a delivery's error as a support person reads it; the error as the
// projector recorded it stays on hover.
export function problemWords(err) {
  if (!err) return '';
  const s = String(err);
  let m = /^answered (\d{3}): redirects/.exec(s);
  if (m) return `The receiver answered with a redirect (HTTP ${m[1]}); redirects are not followed: register the final URL.`;
  m = /^answered (\d{3})/.exec(s);
  if (m) {
    const code = Number(m[1]);
    const name = HTTP[code] ? ` ${HTTP[code]}` : '';
    return code >= 500 ? `The receiver failed: it answered HTTP ${code}${name}. Its own logs say why.`
      : `The receiver refused the change: it answered HTTP ${code}${name}.${code === 401 || code === 403 ? ' Does it hold the current secret?' : ''}`;
  }
  if (s === 'timed out' || /deadline exceeded|timeout/i.test(s)) return 'The receiver did not answer within 10 seconds.';
  if (/connection refused/.test(s)) return 'Nothing accepted the connection at that address: is the receiver running?';
  if (/no such host|does not resolve/.test(s)) return 'The host name of the URL does not resolve (DNS).';
  if (/not a public address/.test(s)) return 'The host name now leads to a private address, which webhooks may not reach.';
  if (/certificate|x509|tls/i.test(s)) return 'The receiver’s HTTPS certificate is not trusted.';
  if (/connection reset|EOF|broken pipe/.test(s)) return 'The receiver closed the connection without answering.';
  if (/retention/.test(s)) return 'It stopped so long ago that the changes it missed are no longer kept.';
  return s;
}

function stateBadge(e) {
  if (e.state === 'disabled') return h('span', { class: 'badge off', title: 'Nothing is sent until it is replayed' }, 'Disabled');
  if (e.failing_since) return h('span', { class: 'badge warn', title: 'Retrying with backoff' }, 'Failing');
  return h('span', { class: 'badge ok' }, 'Active');
}

const typesText = (types) => (types && types.length ? types.join(', ') : 'every change');

// noHooks is the command API's 404 for the list: it serves no webhook routes without the
// key that keeps their secrets.
function noHooks(e) {
  e.problem = { ...e.problem, title: 'No webhooks here', detail: 'The command API serves no webhook routes: it needs SSO_WEBHOOK_KEY (or SSO_SECRET_KEY) to keep their secrets.' };
  return e;
}

export async function webhooksPage(t, signal) {
  let items;
  try {
    ({ data: { items } } = await t.webhooks({ signal }));
  } catch (e) {
    throw e.status === 404 ? noHooks(e) : e;
  }
  const rows = items.map((e) => h('tr', { class: e.state === 'disabled' ? 'disabled' : null },
    h('td', {}, h('a', { href: tenantHash(t, 'webhooks', e.id) }, e.url), e.description ? h('div', { class: 'muted' }, e.description) : null),
    h('td', {}, stateBadge(e)),
    h('td', { class: 'wide-only' }, typesText(e.types)),
    h('td', {}, e.last_error ? h('span', { title: e.last_error }, problemWords(e.last_error)) : e.last_delivered_at ? ['Delivered ', time(e.last_delivered_at)] : h('span', { class: 'muted' }, 'Nothing sent yet'))));
  if (!rows.length) rows.push(rowOf(4)('No webhooks yet: add one to send this tenant’s changes to another system.'));
  page('Webhooks', h('h1', {}, 'Webhooks', h('button', { type: 'button', id: 'webhooks-refresh', onclick: () => render() }, 'Refresh'), h('a', { class: 'button primary', href: tenantHash(t, 'webhooks', '+new'), id: 'new-webhook' }, 'New webhook')),
    h('p', { class: 'muted' }, 'Every change of this tenant is POSTed to each endpoint, signed, in order; a failing endpoint is retried for 24 hours, then disabled until replayed.'),
    h('div', { class: 'table-wrap' }, h('table', { id: 'webhooks' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Endpoint'), h('th', { scope: 'col' }, 'State'),
        h('th', { scope: 'col', class: 'wide-only' }, 'Changes sent'), h('th', { scope: 'col' }, 'Last outcome'))),
      h('tbody', {}, rows))));
}

export function newWebhookPage(t) {
  const boxes = TYPES.map(([name, label]) => h('label', { class: 'check' }, h('input', { type: 'checkbox', name: 'types', value: name }), ` ${label} `, h('code', {}, name)));
  const form = h('form', { class: 'card', id: 'webhook-form', novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const f = form.elements;
    const types = [...form.querySelectorAll('input[name="types"]:checked')].map((x) => x.value);
    await perform(form, 'The webhook', async () => {
      const { data } = await t.createWebhook({ url: f.url.value.trim(), types, description: f.description.value.trim() });
      shown = { id: data.id, secret: data.secret, why: 'created' };
      setPendingFlash('Webhook created.');
      go(tenantHash(t, 'webhooks', data.id));
    });
  } },
  field('URL', h('input', { name: 'url', type: 'url', required: true, autocomplete: 'off', placeholder: 'https://hooks.example.com/ssodir' }),
    'An https address on the internet; addresses inside a private network are refused.'),
  h('fieldset', { class: 'field', id: 'webhook-types' }, h('legend', {}, 'Changes to send (none chosen: every change)'), h('div', { class: 'checks' }, boxes)),
  field('Description', h('textarea', { name: 'description', maxlength: 500 }), 'Who receives it and why, for whoever looks at it next.'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'create-webhook' }, 'Create webhook'), h('a', { href: tenantHash(t, 'webhooks') }, 'Cancel')));
  page('New webhook', h('p', { class: 'crumbs' }, h('a', { href: tenantHash(t, 'webhooks') }, 'Webhooks'), ' / new'), h('h1', {}, 'New webhook'), form);
}

// secretBox shows a secret the API answers only once, with a way to copy it.
function secretBox(s) {
  const out = h('output', { class: 'mono', id: 'webhook-secret-value' }, s.secret);
  const copied = h('span', { class: 'muted', 'aria-live': 'polite' });
  const copy = h('button', { type: 'button', id: 'copy-secret', onclick: async () => {
    try {
      await navigator.clipboard.writeText(s.secret);
      copied.textContent = ' Copied.';
    } catch {
      getSelection().selectAllChildren(out);
      copied.textContent = ' Selected: press Ctrl+C (⌘C) to copy.';
    }
  } }, 'Copy');
  return h('div', { class: 'alert warn', role: 'alert', id: 'webhook-secret' },
    h('p', {}, h('strong', {}, s.why === 'rotated' ? 'The new signing secret. ' : 'The signing secret. '),
      'Copy it now and give it to the receiver: you will not see it again. ',
      s.why === 'rotated' ? 'For 24 hours changes are signed with both the old and the new secret, so the receiver can switch without missing one.' : 'The receiver checks each change’s webhook-signature with it.'),
    h('p', {}, out, ' ', copy, copied));
}

function facts(t, e) {
  const rows = [
    ['URL', h('span', { class: 'mono' }, e.url)],
    ['State', stateBadge(e)],
    ['Changes sent', typesText(e.types)],
    ['Description', e.description || '—'],
    ['Created', [time(e.created_at), ' by ', actorName(t, e.created_by, h('span', {}))]],
    ['Last delivered', time(e.last_delivered_at)],
  ];
  if (e.failed_attempts) rows.push(['Failed attempts in a row', String(e.failed_attempts)]);
  if (e.failing_since) rows.push(['Failing since', time(e.failing_since)]);
  if (e.next_attempt && e.state !== 'disabled') rows.push(['Next attempt', time(e.next_attempt)]);
  if (e.previous_secret_until) rows.push(['Old secret still signs until', time(e.previous_secret_until)]);
  return h('dl', { class: 'facts', id: 'webhook-facts' }, rows.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

// stateAlert says what is wrong with an endpoint, and what to do, in words.
function stateAlert(e) {
  const why = e.last_error ? h('span', { title: e.last_error }, problemWords(e.last_error)) : '';
  if (e.state === 'disabled') {
    return h('div', { class: 'form-error', role: 'alert', id: 'webhook-state' },
      h('strong', {}, 'Disabled: nothing is sent to this endpoint. '),
      e.disabled_at ? ['It was disabled ', time(e.disabled_at), e.failed_attempts ? ` after ${e.failed_attempts} failed attempt${e.failed_attempts === 1 ? '' : 's'}. ` : '. '] : '',
      why ? ['Last problem: ', why, ' '] : '',
      /retention/.test(e.last_error || '')
        ? 'Replay from a recent cursor of the change feed (GET /events) enables it; changes before that cursor are not sent.'
        : 'Once the receiver works again, Replay enables it; it then gets every change it missed, in order.');
  }
  if (e.failing_since) {
    return h('div', { class: 'alert warn', role: 'status', id: 'webhook-state' },
      h('strong', {}, 'Failing: '), why, ' ', 'Deliveries are held at the change that failed and retried with backoff; after 24 hours of failures the endpoint is disabled. ',
      e.next_attempt ? ['Next attempt ', time(e.next_attempt), '.'] : '');
  }
  return null;
}

function deliveriesSection(t, e, signal) {
  const tbody = h('tbody', {});
  const list = listView({
    id: 'deliveries', body: tbody, signal, more: true, moreId: 'deliveries-more', trailKey: `${t.id} webhook ${e.id}`,
    empty: 'Nothing sent yet: a change of this tenant is delivered within seconds.', emptyRow: rowOf(5),
    fetch: async (cursor, sig) => {
      const { data } = await t.webhookDeliveries(e.id, { limit: 25, after: cursor }, { signal: sig });
      return { items: data.items, next: data.next_cursor };
    },
    render: (items) => items.map((d) => h('tr', { class: d.status },
      h('td', {}, time(d.at)),
      h('td', {}, h('span', { class: `badge ${d.status === 'delivered' ? 'ok' : 'off'}` }, d.status === 'delivered' ? 'Delivered' : 'Failed'),
        d.error ? h('div', { class: 'muted', title: d.error }, problemWords(d.error)) : null),
      h('td', {}, d.response_status ? `HTTP ${d.response_status}` : '—'),
      h('td', {}, h('code', {}, d.type), d.subject ? h('div', { class: 'muted' }, d.subject) : null),
      h('td', {}, String(d.attempt), d.next_attempt ? h('div', { class: 'muted' }, 'again ', time(d.next_attempt)) : null))),
  });
  const refresh = h('button', { type: 'button', id: 'deliveries-refresh', onclick: () => list.reload() }, 'Refresh');
  const sec = h('section', { class: 'card', 'aria-labelledby': 'deliveries-h' },
    h('h2', { id: 'deliveries-h' }, 'Recent deliveries', refresh),
    h('p', { class: 'muted' }, 'Every attempt, newest first, kept 7 days.'),
    h('div', { class: 'table-wrap' }, h('table', { id: 'deliveries' },
      h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'When'), h('th', { scope: 'col' }, 'Outcome'), h('th', { scope: 'col' }, 'Response'),
        h('th', { scope: 'col' }, 'Change'), h('th', { scope: 'col' }, 'Attempt'))),
      tbody)), list.el);
  list.load('');
  return sec;
}

export async function webhookPage(t, id, signal) {
  let e;
  try {
    ({ data: e } = await t.webhook(id, { signal }));
  } catch (err) {
    if (err.status !== 404) throw err;
    page('Webhook not found', h('h1', {}, 'Webhook not found'), problemBox(err),
      h('p', {}, 'It may have been deleted. ', h('a', { href: tenantHash(t, 'webhooks') }, 'All webhooks')));
    return;
  }
  const secret = shown && shown.id === e.id ? shown : null;
  shown = null;
  const what = 'The webhook';

  const replayForm = h('form', { id: 'replay-form', hidden: true, novalidate: true, onsubmit: async (ev) => {
    ev.preventDefault();
    const after = replayForm.elements.after.value.trim();
    await perform(replayForm, what, async () => {
      await t.replayWebhook(e.id, after ? { after } : {});
      setPendingFlash(after ? 'Replaying from the chosen change on.' : 'Delivering again from where it stopped.');
      render();
    });
  } }, h('h2', {}, 'Replay'),
  h('p', {}, 'Enables the endpoint again and sends, in order, every change after the point chosen. Without one, it goes on from the change it is held at (nothing is lost or skipped).'),
  field('From the change after (optional)', h('input', { name: 'after', id: 'replay-after', autocomplete: 'off', spellcheck: 'false' }),
    'A next_cursor of the change feed (GET /events) to send older changes again.'),
  h('div', { class: 'actions' }, h('button', { type: 'submit', class: 'primary', id: 'confirm-replay' }, 'Replay'),
    h('button', { type: 'button', onclick: () => { replayForm.hidden = true; actions.hidden = false; } }, 'Cancel')));

  const rotateBox = h('div', { hidden: true, id: 'rotate-confirm', role: 'group', 'aria-label': 'Confirm new secret' },
    h('p', {}, h('strong', {}, 'Make a new signing secret? '), 'The old one keeps signing for 24 hours, beside the new one: give the receiver the new secret within that time.'),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'primary', id: 'confirm-rotate', onclick: () => perform(rotateBox, what, async () => {
        const { data } = await t.rotateWebhookSecret(e.id);
        shown = { id: e.id, secret: data.secret, why: 'rotated' };
        render();
      }) }, 'Make a new secret'),
      h('button', { type: 'button', onclick: () => { rotateBox.hidden = true; actions.hidden = false; } }, 'Cancel')));

  const delBox = h('div', { hidden: true, id: 'delete-confirm', role: 'group', 'aria-label': 'Confirm delete' },
    h('p', {}, h('strong', {}, `Delete the webhook to ${e.url}?`), ' Nothing more is sent to it; its deliveries are forgotten. This cannot be undone.'),
    h('div', { class: 'actions' },
      h('button', { type: 'button', class: 'danger', id: 'confirm-delete', onclick: () => perform(delBox, what, async () => {
        await t.deleteWebhook(e.id);
        setPendingFlash(`Webhook to ${e.url} deleted.`);
        go(tenantHash(t, 'webhooks'));
      }) }, 'Delete webhook'),
      h('button', { type: 'button', onclick: () => { delBox.hidden = true; actions.hidden = false; } }, 'Cancel')));
  for (const box of [replayForm, rotateBox, delBox]) {
    box.addEventListener('keydown', (ev) => { if (ev.key === 'Escape') { box.hidden = true; actions.hidden = false; } });
  }
  const show = (el, focus) => { actions.hidden = true; el.hidden = false; (el.querySelector(focus) || el).focus(); };
  const actions = h('div', { class: 'actions', id: 'webhook-actions' },
    h('button', { type: 'button', id: 'replay-webhook', class: e.state === 'disabled' ? 'primary' : null, onclick: () => show(replayForm, '#confirm-replay') },
      e.state === 'disabled' ? 'Replay and enable' : 'Replay'),
    h('button', { type: 'button', id: 'rotate-secret', onclick: () => show(rotateBox, '#confirm-rotate') }, 'New secret'),
    h('button', { type: 'button', id: 'delete-webhook', class: 'danger', onclick: () => show(delBox, '#confirm-delete') }, 'Delete'));
  const details = h('section', { class: 'card', 'aria-labelledby': 'webhook-h' }, h('h2', { id: 'webhook-h' }, 'Endpoint'),
    facts(t, e), actions, replayForm, rotateBox, delBox);

  page('Webhook', h('p', { class: 'crumbs' }, h('a', { href: tenantHash(t, 'webhooks') }, 'Webhooks'), ` / ${e.url}`),
    h('h1', {}, 'Webhook', stateBadge(e)),
    ...[secret ? secretBox(secret) : null, stateAlert(e)].filter(Boolean),
    h('div', { class: 'grid' }, details, deliveriesSection(t, e, signal)));
}
