// ssodir console: the operations page: the services' probes and metrics, and the tenant's sync (app.js routes here).
import { ApiError, addressesFromServer, endpoint, metrics, ready } from './api.js';
import { h, time } from './dom.js';
import { problemBox } from './ui.js';
import { OPS_REFRESH_MS, page } from './app.js';

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

// consumerCard is a consumer's probe and figures. One that does not answer says so once,
// by its name and address (the problem's detail), and nothing else.
async function consumerCard(title, key, consumer, t, extra, signal) {
  const base = endpoint(key);
  const card = h('section', { class: 'card', 'aria-labelledby': `${consumer}-h` }, h('h2', { id: `${consumer}-h` }, title));
  if (!base) {
    card.append(h('p', { class: 'muted' }, addressesFromServer()
      ? `The server names no ${title} address (SSO_CONSOLE_${consumer === 'projector' ? 'PROJECTOR' : 'KEYCLOAK_SYNC'} on the query API).`
      : `Set the ${title} address on the sign-in page’s connection settings.`));
    return card;
  }
  const [ok, ms] = await Promise.all([ready(base, signal, key), metrics(base, signal, key).catch((e) => e)]);
  if (ms instanceof Error && ms.name === 'AbortError') throw ms;
  const silent = ms instanceof ApiError && ms.status === 0;
  card.append(h('p', {}, h('span', { class: `badge ${ok ? 'ok' : 'off'}`, id: `${consumer}-ready`, title: `${base}/readyz` }, ok ? 'Ready' : silent ? 'Not answering' : 'Not ready'),
    silent ? null : [' ', h('span', { class: 'muted' }, base)]));
  if (ms instanceof Error) {
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
    ['Changes set aside so far (failed / held back behind a failed change of the same item)', `${failed ?? 0} / ${parkedTotal ?? 0}`, failed ? 'warn' : null,
      'Dead letters so far: failed / parked (ssodir_stream_dead_letters_total)'],
    ['Changes lost from the stream (a replay is needed)', String(sum(ms, 'ssodir_stream_gaps_total', l) ?? 0), sum(ms, 'ssodir_stream_gaps_total', l) ? 'off' : null],
    ...extra(ms),
  ];
  card.append(h('dl', { class: 'facts', id: `${consumer}-facts` }, rows.map(([k, v, cls, tech]) => [h('dt', { title: tech || null }, k), h('dd', {}, cls ? h('span', { class: `badge ${cls}` }, v) : v)])));
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
export async function opsPage(t, signal) {
  const grid = h('div', { class: 'grid', id: 'ops' });
  const stamp = h('p', { class: 'muted', id: 'ops-updated', 'aria-live': 'off' }, 'Loading…');
  const refresh = h('button', { type: 'button', id: 'refresh' }, 'Refresh');
  page('Operations', h('h1', {}, 'Operations', refresh),
    h('p', { class: 'muted', id: 'ops-intro', title: 'Read from each service’s /readyz and /metrics' }, 'What each service says about itself right now. Figures are for this tenant unless they say “all tenants”.'), stamp, grid);
  let busy = false;
  const load = async () => {
    if (busy) return;
    busy = true;
    refresh.disabled = true;
    grid.setAttribute('aria-busy', 'true');
    try {
      const cards = await Promise.all([
        tenantCard(t, signal),
        consumerCard('Projector', 'projector', 'projector', t, () => [], signal),
        consumerCard('Keycloak sync', 'keycloak_sync', 'keycloak-sync', t, (ms) => {
          const tl = { system: t.system, tenant: t.tenant };
          const last = sum(ms, 'ssodir_keycloak_last_reconcile_success_timestamp_seconds', tl);
          const found = sum(ms, 'ssodir_keycloak_last_reconcile_drift', { ...tl, outcome: 'found' });
          const parked = sum(ms, 'ssodir_keycloak_tenant_parked', tl);
          const waiting = sum(ms, 'ssodir_stream_parked_records', { consumer: 'keycloak-sync', ...tl });
          // The words a support person reads; the metrics they come from on hover.
          return [
            ['On hold because Keycloak keeps failing', parked ? `yes: ${waiting ?? 0} changes wait their turn` : 'no', parked ? 'off' : null,
              'Parked: the realm is failing; its records wait in order (ssodir_keycloak_tenant_parked, ssodir_stream_parked_records)'],
            ['Last full check that Keycloak matches the directory', last ? time(new Date(last * 1000).toISOString()) : 'none yet', last ? null : 'warn',
              'The last successful reconcile (ssodir_keycloak_last_reconcile_success_timestamp_seconds)'],
            ['Differences that check found / put right / skipped (the directory had changed since)', found === null ? 'no check yet'
              : `${found} / ${sum(ms, 'ssodir_keycloak_last_reconcile_drift', { ...tl, outcome: 'repaired' }) ?? 0} / ${sum(ms, 'ssodir_keycloak_last_reconcile_drift', { ...tl, outcome: 'stale' }) ?? 0}`,
            found ? 'warn' : null, 'Drift of the last reconcile: found / repaired / stale (ssodir_keycloak_last_reconcile_drift)'],
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
