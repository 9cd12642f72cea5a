// The taskhost web view: the tasks the viewer may see, live from one event stream; every text
// from a task is set as text (textContent), never parsed as HTML. The page signs in by itself:
// the sign-in link's fragment (`/#token=TOKEN`, which no server ever receives) or the form puts
// the token in localStorage (this origin's alone: scheme, host and port), and each request sends
// it as `Authorization: Bearer`. No cookie carries it: a browser sends cookies to every port.
'use strict';

const TOKEN_KEY = 'taskhost_token';

const PAGE_ROWS = 100;
const TIMELINE_HOURS = 6;
const COLOURS = { running: '#1f5fbf', stopping: '#1f5fbf', completed: '#23803a', failed: '#b3261e', killed: '#b86200', lost: '#9ca3af' };

const tasks = new Map();
let watch = '';
let stream = null; // the open event stream's AbortController
let retryMs = 500; // the stream's `retry:`
const REFUSED_RETRY_MS = 5000;
let page = 0;
let drawing = false;

const $ = (id) => document.getElementById(id);

const token = () => localStorage.getItem(TOKEN_KEY);

// Moves a token given as `#token=...` into localStorage, and out of the address bar and the
// history entry (replaced, so Back does not show it either).
function takeFragment() {
  const given = new URLSearchParams(location.hash.slice(1)).get('token');
  if (given === null) return false;
  history.replaceState(null, '', location.pathname + location.search);
  if (given) localStorage.setItem(TOKEN_KEY, given);
  return true;
}

// The form in place of the view: no token is kept, or the one kept names nobody (it is dropped).
function signIn(why) {
  if (stream) stream.abort();
  stream = null;
  localStorage.removeItem(TOKEN_KEY);
  document.title = 'taskhost: sign in';
  $('sign-in-why').textContent = why;
  $('sign-in').hidden = false;
  $('view').hidden = true;
  $('connection').textContent = 'signed out';
}

function start() {
  if (!token()) {
    signIn('This view needs a token.');
    return;
  }
  document.title = 'taskhost';
  $('sign-in').hidden = true;
  $('view').hidden = false;
  connect();
}

// `init` for a fetch of this page's origin, with the token.
function authorized(init) {
  const headers = Object.assign({ Authorization: 'Bearer ' + token() }, init.headers || {});
  return Object.assign({ cache: 'no-store', credentials: 'omit' }, init, { headers });
}

const handlers = {
  tasks(d) {
    if (d.full) tasks.clear();
    for (const r of d.rows) tasks.set(r.id, r);
    for (const id of d.removed) tasks.delete(id);
    redraw();
  },
  tail(d) {
    if (d.id !== watch) return;
    const pre = $('tail');
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    const t = tasks.get(d.id);
    pre.textContent = d.text || (t && t.expired ? '(its output expired: the state directory no longer keeps it)' : '');
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  },
  host: (d) => showHost(d),
};

// The page's one event stream: a streamed fetch read as text/event-stream (an EventSource cannot
// send the token), opened again `retry:` ms after it ends, as an EventSource would be.
async function connect() {
  if (stream) stream.abort();
  const mine = new AbortController();
  stream = mine;
  const url = '/api/events' + (watch ? '?watch=' + encodeURIComponent(watch) : '');
  let wait = retryMs;
  try {
    const r = await fetch(url, authorized({ headers: { Accept: 'text/event-stream' }, signal: mine.signal }));
    if (r.status === 401) {
      signIn('The token names no principal (unknown or revoked).');
      return;
    }
    if (r.ok && r.body) {
      $('connection').textContent = 'live';
      await follow(r.body.pipeThrough(new TextDecoderStream()).getReader());
    } else {
      wait = REFUSED_RETRY_MS; // 429 (this token's streams are all open elsewhere), 503, ...
    }
  } catch (e) {
    // Aborted for another stream, or the connection dropped: opened again below if still ours.
  }
  if (stream !== mine) return;
  $('connection').textContent = 'reconnecting…';
  setTimeout(() => { if (stream === mine) connect(); }, wait);
}

// Reads events (blocks ended by a blank line) until the stream ends.
async function follow(reader) {
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      dispatch(buffer.slice(0, end));
      buffer = buffer.slice(end + 2);
    }
  }
}

function dispatch(block) {
  let name = 'message';
  const data = [];
  for (const line of block.split('\n')) {
    const colon = line.indexOf(':');
    if (colon === 0) continue;
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'event') name = value;
    else if (field === 'data') data.push(value);
    else if (field === 'retry' && /^\d+$/.test(value)) retryMs = Number(value);
  }
  const handle = handlers[name];
  if (handle && data.length) handle(JSON.parse(data.join('\n')));
}

function redraw() {
  if (drawing) return;
  drawing = true;
  requestAnimationFrame(() => { drawing = false; render(); });
}

function filtered() {
  const status = $('f-status').value, owner = $('f-owner').value, kind = $('f-kind').value;
  const search = $('f-search').value.trim().toLowerCase();
  const rows = [];
  for (const t of tasks.values()) {
    if (status && t.status !== status) continue;
    if (owner && t.owner !== owner) continue;
    if (kind && t.kind !== kind) continue;
    if (search && !(t.command.toLowerCase().includes(search) || t.id.toLowerCase().includes(search))) continue;
    rows.push(t);
  }
  rows.sort((a, b) => b.started_at_ms - a.started_at_ms || (a.id < b.id ? 1 : -1));
  return rows;
}

function options(select, values) {
  const keep = select.value;
  const have = new Set([...select.options].map((o) => o.value));
  for (const v of [...values].sort()) {
    if (have.has(v) || v === '') continue;
    const o = document.createElement('option');
    o.value = v; o.textContent = v;
    select.appendChild(o);
  }
  select.value = keep;
}

function cell(tr, text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

// A task that completed with a non-zero exit is shown as failing, as people read it.
function nonZero(t) {
  return t.status === 'completed' && /exit code: [1-9]|signal: /.test(t.detail || '');
}

function clock(ms) {
  return ms ? new Date(ms).toLocaleString() : '';
}

function duration(t) {
  const end = t.finished_at_ms || Date.now();
  let s = Math.max(0, Math.round((end - t.started_at_ms) / 1000));
  const h = Math.floor(s / 3600); s -= h * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  return (h ? h + 'h ' : '') + (h || m ? m + 'm ' : '') + s + 's';
}

function render() {
  options($('f-owner'), new Set([...tasks.values()].map((t) => t.owner)));
  options($('f-kind'), new Set([...tasks.values()].map((t) => t.kind)));
  const rows = filtered();
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_ROWS));
  page = Math.min(page, pages - 1);
  const running = [...tasks.values()].filter((t) => t.status === 'running').length;
  $('counts').textContent = rows.length + ' shown of ' + tasks.size + ' tasks, ' + running + ' running';
  $('page').textContent = 'page ' + (page + 1) + ' of ' + pages;
  const body = document.createElement('tbody');
  for (const t of rows.slice(page * PAGE_ROWS, (page + 1) * PAGE_ROWS)) {
    const tr = document.createElement('tr');
    tr.dataset.id = t.id;
    if (t.id === watch) tr.className = 'selected';
    cell(tr, t.id, 'id');
    cell(tr, t.kind, 'kind');
    cell(tr, t.owner, 'owner');
    cell(tr, t.status, 'status status-' + (nonZero(t) ? 'failed' : t.status));
    cell(tr, t.command, 'command');
    cell(tr, clock(t.started_at_ms), 'started');
    cell(tr, duration(t), 'duration');
    cell(tr, (t.detail || '') + (t.expired ? ' (output expired)' : ''), 'exit');
    const td = cell(tr, '', 'actions');
    if (t.status === 'running') {
      const b = document.createElement('button');
      b.type = 'button'; b.className = 'kill'; b.textContent = 'kill';
      b.addEventListener('click', (e) => { e.stopPropagation(); kill(t.id); });
      td.appendChild(b);
    }
    tr.addEventListener('click', () => select(t.id));
    body.appendChild(tr);
  }
  $('tasks').replaceChild(body, $('tasks').tBodies[0]);
  const w = tasks.get(watch);
  $('detail-status').textContent = w ? w.status + (w.detail ? ' (' + w.detail + ')' : '') : '';
  timeline(rows);
}

function timeline(rows) {
  const canvas = $('timeline');
  const ctx = canvas.getContext('2d');
  const now = Date.now();
  const since = now - TIMELINE_HOURS * 3600 * 1000;
  const shown = rows.filter((t) => (t.finished_at_ms || now) >= since).slice(0, 200).reverse();
  const oldest = shown.reduce((m, t) => Math.min(m, t.started_at_ms), now);
  const from = Math.max(since, oldest - 1000);
  const span = Math.max(1, now - from);
  $('timeline-span').textContent = 'since ' + new Date(from).toLocaleTimeString();
  ctx.clearRect(0, 0, canvas.width, canvas.height);
  const h = Math.max(1, Math.min(12, Math.floor(canvas.height / Math.max(1, shown.length))));
  shown.forEach((t, i) => {
    const x0 = ((Math.max(t.started_at_ms, from) - from) / span) * canvas.width;
    const x1 = (((t.finished_at_ms || now) - from) / span) * canvas.width;
    ctx.fillStyle = COLOURS[nonZero(t) ? 'failed' : t.status] || '#444';
    ctx.fillRect(x0, i * h, Math.max(2, x1 - x0), Math.max(1, h - 1));
  });
}

function select(id) {
  watch = id;
  $('detail').hidden = false;
  $('detail-id').textContent = id;
  $('tail').textContent = '';
  connect();
  redraw();
}

async function kill(id) {
  if (!window.confirm('Kill task ' + id + '?')) return;
  const r = await fetch('/api/tasks/' + encodeURIComponent(id) + '/kill', authorized({ method: 'POST' }));
  if (r.status === 401) signIn('The token names no principal (unknown or revoked).');
  else if (!r.ok) window.alert('The kill failed: ' + (await r.text()));
}

function showHost(s) {
  $('host').hidden = false;
  const h = s.health || {};
  const mib = (b) => (b / 1048576).toFixed(1) + ' MiB';
  $('health').textContent = 'tasks live ' + h.tasks_live + ' · threads ' + h.threads + ' · descriptors ' + h.descriptors +
    ' · RSS ' + mib(h.rss_bytes || 0) + ' · keeper ' + (h.keeper_pid || 'none') + ' · store ' + mib(h.store_bytes || 0);
  const body = document.createElement('tbody');
  for (const p of s.plugins || []) {
    const tr = document.createElement('tr');
    tr.dataset.plugin = p.name;
    const gens = p.generations || [];
    cell(tr, p.name);
    cell(tr, gens.map((g) => g.generation + ' ' + g.state).join(', '), 'generations');
    const last = gens.reduce((m, g) => Math.max(m, g.loaded_at_ms || 0), 0);
    cell(tr, clock(last));
    cell(tr, String(gens.reduce((n, g) => n + g.live_tasks, 0)));
    body.appendChild(tr);
  }
  $('plugins').replaceChild(body, $('plugins').tBodies[0]);
}

takeFragment();
window.addEventListener('hashchange', () => { if (takeFragment()) start(); });

document.addEventListener('DOMContentLoaded', () => {
  $('sign-in').addEventListener('submit', (e) => {
    e.preventDefault();
    const given = $('token').value.trim();
    $('token').value = '';
    if (given) localStorage.setItem(TOKEN_KEY, given);
    start();
  });
  for (const id of ['f-status', 'f-owner', 'f-kind', 'f-search']) $(id).addEventListener('input', () => { page = 0; redraw(); });
  $('prev').addEventListener('click', () => { page = Math.max(0, page - 1); redraw(); });
  $('next').addEventListener('click', () => { page += 1; redraw(); });
  setInterval(() => { if ([...tasks.values()].some((t) => t.status === 'running')) redraw(); }, 1000);
  start();
});
