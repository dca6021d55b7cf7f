// ssodir console: the Access page (app.js routes here): a group's members at a chosen
// date and time, from the log (GET /groups/{name}/members?as_of=), and the access report
// of a range to download (GET /access-report). docs/history.md says how far back both go.
import { ApiError, queryBase, session } from './api.js';
import { field, h, time } from './dom.js';
import { listView, setParams } from './ui.js';
import { actorName } from './words.js';
import { PAGE, clearErrors, go, page, perform, rowOf, showErrors, tenantHash } from './app.js';

// Date-and-time inputs are in UTC: the value is "YYYY-MM-DDTHH:MM[:SS]".
const utcValue = (d) => d.toISOString().slice(0, 19);
const toInstant = (v) => (v ? `${v.length === 16 ? `${v}:00` : v}Z` : '');
const fromInstant = (iso) => (iso ? iso.replace(/Z$/, '').slice(0, 19) : '');

function dateTimeInput(name, id, value) {
  return h('input', { name, id, type: 'datetime-local', step: '1', value, required: true });
}

// downloadReport reads the report with the session's token (a plain link could not send
// it) and hands it to the browser as a file.
async function downloadReport(t, q) {
  const headers = { Accept: 'text/csv, application/json' };
  const s = session();
  if (s && s.token) headers.Authorization = `Bearer ${s.token}`;
  const res = await fetch(`${queryBase()}${t.prefix}/access-report?${new URLSearchParams(q)}`, { headers });
  const text = await res.text();
  if (!res.ok) {
    let p;
    try { p = JSON.parse(text); } catch { p = { title: `HTTP ${res.status}`, detail: text }; }
    throw new ApiError(res.status, p);
  }
  const cd = res.headers.get('Content-Disposition') || '';
  const name = (/filename="([^"]+)"/.exec(cd) || [])[1] || `access-report.${q.format}`;
  const rows = q.format === 'csv' ? Math.max(0, text.split('\r\n').filter(Boolean).length - 1) : JSON.parse(text).items.length;
  const url = URL.createObjectURL(new Blob([text], { type: res.headers.get('Content-Type') || 'application/octet-stream' }));
  return { name, rows, url };
}

export async function accessPage(t, params, signal) {
  const group = params.get('group') || '';
  const at = params.get('as_of') || '';
  const now = utcValue(new Date());

  // ---- members at an instant
  const groupIn = h('input', { name: 'name', id: 'access-group', value: group, autocomplete: 'off', required: true });
  const atIn = dateTimeInput('as_of', 'access-at', fromInstant(at) || now);
  const membersForm = h('form', { class: 'toolbar', id: 'access-members-form', onsubmit: (ev) => {
    ev.preventDefault();
    go(`${tenantHash(t, 'access')}?${new URLSearchParams({ group: groupIn.value.trim(), as_of: toInstant(atIn.value) })}`);
  } },
  h('div', { class: 'grow' }, field('Group', groupIn, 'The name the group had then.')),
  h('div', {}, field('At (UTC)', atIn)),
  h('button', { type: 'submit' }, 'Show members'));
  const membersSec = h('section', { class: 'card', 'aria-labelledby': 'access-members-h' },
    h('h2', { id: 'access-members-h' }, 'Members at a date and time'), membersForm);
  if (group && at) {
    const tbody = h('tbody', { id: 'access-members' });
    const list = listView({
      id: 'access-members', body: tbody, signal, param: 'cursor', trailKey: `${t.id} access ${group.toLowerCase()} ${at}`,
      empty: 'No members at that instant.', emptyRow: rowOf(3),
      fetch: async (cursor, sig) => {
        const { data } = await t.members(group, { as_of: at, limit: PAGE, cursor }, { signal: sig });
        return { items: data.items, next: data.next_cursor };
      },
      render: (items) => items.map((m) => h('tr', {},
        h('td', {}, m.erased ? h('span', { class: 'muted' }, 'an erased member') : [m.username, ' ', h('span', { class: 'muted' }, m.user_id)]),
        h('td', {}, time(m.added_at)),
        h('td', {}, actorName(t, m.added_by, h('span', {}))))),
      onError: (e) => {
        if (!(e instanceof ApiError) || (e.status !== 400 && e.status !== 404)) return false;
        showErrors(membersForm, e.status === 404 ? new ApiError(404, { title: 'No such group then', detail: `No group was named ${group} at ${at}.` }) : e);
        return true;
      },
    });
    membersSec.append(h('p', { class: 'muted', id: 'access-members-scope' }, `The members of ${group} at `, time(at), ', from the log.'),
      h('div', { class: 'table-wrap' }, h('table', { id: 'access-members-table' },
        h('thead', {}, h('tr', {}, h('th', { scope: 'col' }, 'Member'), h('th', { scope: 'col' }, 'Member since'), h('th', { scope: 'col' }, 'Added by'))),
        tbody)), list.el);
    list.load(params.get('cursor') || '');
  }

  // ---- the access report
  // from is an input's value, or an exact instant (RFC 3339 with its milliseconds) that the
  // input shows to the second: the tenant's creation, whose first second holds changes too.
  let from = params.get('from') || '';
  if (!from) {
    // A month back, or the tenant's creation when later (the history before it is not kept).
    from = utcValue(new Date(Date.now() - 30 * 864e5));
    try {
      const { data } = await t.info({ signal });
      if (data && data.created_at && new Date(data.created_at) > new Date(`${from}Z`)) from = new Date(data.created_at).toISOString();
    } catch (e) {
      if (e.name === 'AbortError') throw e;
    }
  }
  const fromIn = dateTimeInput('from', 'report-from', fromInstant(from));
  const toIn = dateTimeInput('to', 'report-to', now);
  const formatIn = h('select', { name: 'format', id: 'report-format' },
    h('option', { value: 'csv' }, 'CSV (spreadsheets)'), h('option', { value: 'json' }, 'JSON'));
  const result = h('div', { id: 'report-result', 'aria-live': 'polite' });
  const reportForm = h('form', { id: 'report-form', onsubmit: (ev) => {
    ev.preventDefault();
    clearErrors(reportForm);
    result.replaceChildren();
    // Unchanged, the shown second stands for the exact instant behind it.
    const exact = from.endsWith('Z') && toInstant(fromIn.value) === toInstant(fromInstant(from));
    const q = { from: exact ? from : toInstant(fromIn.value), to: toInstant(toIn.value), format: formatIn.value };
    setParams({ from: exact ? from : fromIn.value });
    perform(reportForm, 'The report', async () => {
      const r = await downloadReport(t, q);
      const link = h('a', { href: r.url, download: r.name, id: 'report-link' }, `Save ${r.name} again`);
      result.append(h('p', { id: 'report-status' }, `${r.rows} membership interval${r.rows === 1 ? '' : 's'} in ${r.name}. `, link));
      link.click();
    }, 'Reading the report…');
  } },
  h('div', { class: 'toolbar' },
    h('div', {}, field('From (UTC)', fromIn)),
    h('div', {}, field('To (UTC), excluded', toIn)),
    h('div', {}, field('Format', formatIn)),
    h('button', { type: 'submit', class: 'primary', id: 'report-download' }, 'Download')));
  const reportSec = h('section', { class: 'card', 'aria-labelledby': 'report-h' }, h('h2', { id: 'report-h' }, 'Access report'),
    h('p', { class: 'muted' }, 'Every membership that overlaps the range: who added and removed each member and when, and when each member could sign in. For very large tenants use ssodirctl access-report.'),
    reportForm, result);

  page('Access', h('h1', {}, 'Access'),
    h('p', { class: 'muted' }, 'Who had access when, from the log of every change.'),
    h('div', { class: 'stack' }, membersSec, reportSec));
}
