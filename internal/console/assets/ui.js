// Pieces every page uses: the route and its parameters in the address bar, problem boxes,
// and lists that show their loading, their errors and their pager where the user looks.
import { ApiError } from './api.js';
import { clear, h } from './dom.js';

// ---------------------------------------------------------------- the route in the URL

// parseRoute reads the hash: #/path/parts?params.
export function parseRoute() {
  const raw = location.hash.replace(/^#/, '') || '/';
  const i = raw.indexOf('?');
  const path = i < 0 ? raw : raw.slice(0, i);
  const params = new URLSearchParams(i < 0 ? '' : raw.slice(i + 1));
  const parts = path.split('/').filter(Boolean).map((p) => { try { return decodeURIComponent(p); } catch { return p; } });
  return { path, parts, params };
}

// setParams changes parameters of the current route in the address bar without loading
// anything: push makes a history entry (a page of a list, so that Back returns to it),
// otherwise the current entry is replaced (a keystroke of a search). Empty values go.
export function setParams(changes, push) {
  const { path, params } = parseRoute();
  for (const [k, v] of Object.entries(changes)) {
    if (v === undefined || v === null || v === '') params.delete(k); else params.set(k, v);
  }
  const qs = params.toString();
  const url = `${location.pathname}${location.search}#${path}${qs ? `?${qs}` : ''}`;
  if (url === `${location.pathname}${location.search}${location.hash}`) return;
  if (push) history.pushState(null, '', url); else history.replaceState(null, '', url);
}

// ---------------------------------------------------------------- problems

export function problemBox(e) {
  const p = e instanceof ApiError ? e.problem : { title: 'Error', detail: String(e && e.message) };
  return h('div', { class: 'form-error', role: 'alert' }, h('strong', {}, p.title || 'Error'), p.detail ? ` ${p.detail}` : '');
}

// ---------------------------------------------------------------- the trail of pages

// A cursor is opaque and leads only forward. The trail remembers, per list, which cursor
// came before each one and its page number, in sessionStorage: Previous, Back and a reload
// then find their way in this tab. A page reached without its trail (a link opened in
// another tab) pages back to the first page.
const TRAIL = 'ssodir.trail';
const TRAIL_MAX = 300;

function trail() {
  try { return JSON.parse(sessionStorage.getItem(TRAIL)) || {}; } catch { return {}; }
}

function trailGet(list, cursor) { return trail()[`${list}\n${cursor}`]; }

function trailSet(list, cursor, prev, n) {
  const all = trail();
  const key = `${list}\n${cursor}`;
  delete all[key];
  all[key] = { prev, n };
  const keys = Object.keys(all);
  for (const k of keys.slice(0, Math.max(0, keys.length - TRAIL_MAX))) delete all[k];
  try { sessionStorage.setItem(TRAIL, JSON.stringify(all)); } catch { /* full: paging still works, Previous goes to page 1 */ }
}

// ---------------------------------------------------------------- lists

// listView is one list where the user looks at it: while a page loads the list is marked
// busy, "Loading…" shows beside it and its pager or "Show older" is disabled; a failed or
// timed-out read says so there with "Try again"; an empty list says that it is empty.
//
//   id       names the list's status element (`${id}-status`)
//   body     the element the items go into (a tbody or a list)
//   fetch    (cursor, signal) → {items, next}: one page
//   render   items → elements
//   empty    what an empty first page says; emptyRow wraps it into a row for body
//   signal   the page's: a list stops when the page goes
//   more     true: "Show older" appends; false: Previous / Next replace
//   trailKey identifies the list and its parameters for the trail of pages; param is the
//            URL parameter of the current cursor (pages are then in the address bar)
//   onError  e → true when the page shows e itself (a bad search next to its field)
//   onLoading  () → when a page starts to replace the one shown (drop what was chosen on it)
//   onLoaded items → after each page is shown (no items after a page failed to come)
export function listView(o) {
  const status = h('div', { class: 'list-status', id: `${o.id}-status`, 'aria-live': 'polite' });
  let current = '';
  let next = null;
  let loading = null;
  let failed = false;
  const prev = h('button', { type: 'button', class: 'prev' }, 'Previous');
  const nxt = h('button', { type: 'button', class: o.more ? 'more' : 'next', id: o.more ? o.moreId : null }, o.more ? 'Show older' : 'Next');
  const pageNo = h('span', { class: 'muted page-no' });
  const pager = o.more ? h('div', { class: 'pager' }, nxt) : h('div', { class: 'pager' }, prev, nxt, pageNo);

  function update() {
    const busy = !!loading;
    prev.disabled = busy || current === '';
    nxt.disabled = busy || !next;
    if (o.more) nxt.hidden = !next;
    else pager.hidden = !busy && !failed && current === '' && !next;
    const n = current === '' ? 1 : (trailGet(o.trailKey, current) || {}).n;
    pageNo.textContent = n ? `Page ${n}` : '';
  }

  async function load(cursor, append = false) {
    if (loading) loading.abort();
    const ctl = new AbortController();
    loading = ctl;
    const stop = () => ctl.abort();
    o.signal.addEventListener('abort', stop);
    if (!append) current = cursor;
    failed = false;
    o.body.setAttribute('aria-busy', 'true');
    o.body.classList.add('stale');
    // The rows shown are not the page being read: nothing on them can be clicked or chosen
    // until it is there (a selection made on them is dropped).
    if (!append) {
      o.body.inert = true;
      if (o.onLoading) o.onLoading();
    }
    // "Loading…" only when it takes a moment, so that a quick page does not flicker.
    clear(status);
    const slow = setTimeout(() => clear(status).append(h('p', { class: 'muted loading' }, 'Loading…')), 150);
    update();
    try {
      const r = await o.fetch(cursor, ctl.signal);
      clearTimeout(slow);
      if (ctl.signal.aborted) return;
      const items = o.render(r.items);
      if (append) o.body.append(...items);
      else clear(o.body).append(...items);
      if (!r.items.length && !append) o.body.append(o.emptyRow(cursor === '' ? o.empty : 'Nothing more.'));
      next = r.next || null;
      clear(status);
      if (o.onLoaded) o.onLoaded(r.items);
    } catch (e) {
      clearTimeout(slow);
      if (e.name === 'AbortError' || ctl.signal.aborted) return;
      failed = true;
      clear(status);
      // The rows shown are another page's (the one before): they go, so that the list, its
      // pager and the address bar agree and nothing is done to rows of the wrong page.
      // Items "Show older" appended to stay: they are the list's, and still true.
      if (!append) {
        clear(o.body);
        next = null;
        if (o.onLoaded) o.onLoaded([]);
      }
      if (!(o.onError && o.onError(e))) {
        const retry = h('button', { type: 'button', class: 'retry', onclick: () => load(cursor, append) }, 'Try again');
        status.append(h('div', { class: 'list-error', role: 'alert' }, problemBox(e), retry));
        // Where the user looks: the message is not left below the fold.
        status.scrollIntoView({ block: 'nearest' });
      }
    } finally {
      clearTimeout(slow);
      o.signal.removeEventListener('abort', stop);
      if (loading === ctl) {
        loading = null;
        o.body.removeAttribute('aria-busy');
        o.body.classList.remove('stale');
        o.body.inert = false;
        update();
      }
    }
  }

  nxt.addEventListener('click', () => {
    if (o.more) { load(next, true); return; }
    const to = next;
    const n = (current === '' ? 1 : (trailGet(o.trailKey, current) || {}).n) || 0;
    trailSet(o.trailKey, to, current, n ? n + 1 : 0);
    if (o.param) setParams({ [o.param]: to }, true);
    load(to);
  });
  prev.addEventListener('click', () => {
    const back = trailGet(o.trailKey, current);
    const to = back ? back.prev : '';
    if (o.param) setParams({ [o.param]: to }, true);
    load(to);
  });
  update();
  return {
    el: h('div', { class: 'list-foot' }, status, pager),
    load: (cursor = '') => load(cursor),
    reload: () => load(current),
    // stop abandons the page being read (the list is being replaced).
    stop: () => { if (loading) loading.abort(); },
    get items() { return o.body; },
  };
}
