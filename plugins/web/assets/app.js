// The taskhost web view: the tasks the viewer may see, live from one event stream; every text
// from a task is set as text (textContent), never parsed as HTML: output comes as runs of text
// with the classes of their colours (parsed from SGR sequences by the plugin), each a span. The page signs in by itself:
// the sign-in link's fragment (`/#token=TOKEN`, which no server ever receives) or the form gives
// a token, kept in localStorage (this origin's alone: scheme, host and port) once the host proved
// itself and the token named a principal; each request sends it as `Authorization: Bearer`, and
// only to a server that has just proved it holds the token's record (see `prove`). No cookie
// carries it: a browser sends cookies to every port.
'use strict';

const TOKEN_KEY = 'taskhost_token';
const TOKEN_PREFIX = 'taskhost_';
const TOKEN_SHAPE = /^taskhost_[0-9a-fA-F]{64}$/;
const PROOF_PATH = '/.well-known/taskhost-view-proof';
const PROOF_WITHIN_MS = 10000;
const NOT_OURS = 'this server is not the taskhost that issued your token';
const REVOKED = 'The token names no principal (unknown or revoked).';

const PAGE_ROWS = 100;
const TIMELINE_HOURS = 6;
const COLOURS = { running: '#1f5fbf', stopping: '#1f5fbf', queued: '#7c5cbf', completed: '#23803a', failed: '#b3261e', killed: '#b86200', lost: '#9ca3af' };

const tasks = new Map();
let watch = '';
let stream = null; // the open event stream's AbortController
let retryMs = 500; // the stream's `retry:`
const REFUSED_RETRY_MS = 5000;
let page = 0;
let drawing = false;
let offered = null; // a link's token naming another principal, until the person chooses
let chosen = false; // whether the person chose the task shown (else the newest running one is)
let tailRuns = []; // the shown task's output, as runs [classes, text]
let bars = []; // the timeline's bars: [x0, x1, y0, y1, task]

const $ = (id) => document.getElementById(id);

const token = () => localStorage.getItem(TOKEN_KEY);

const hex = (bytes) => [...new Uint8Array(bytes)].map((b) => b.toString(16).padStart(2, '0')).join('');
const utf8 = (text) => new TextEncoder().encode(text);

// Whether the server answering at this origin holds token `t`'s record: 'live', 'revoked' (its
// word, proved the same way) or 'not ours'. It is sent only P = SHA-256(H), where H = SHA-256 of
// the token's hex digits is what the host's store keeps, and a fresh nonce; it answers
// HMAC-SHA256(H, label, nonce, Host), which no server without H can compute. Throws when no
// server answers as a server.
async function prove(t) {
  const h = await crypto.subtle.digest('SHA-256', utf8(t.slice(TOKEN_PREFIX.length).toLowerCase()));
  const id = hex(await crypto.subtle.digest('SHA-256', h));
  const nonce = hex(crypto.getRandomValues(new Uint8Array(16)));
  const key = await crypto.subtle.importKey('raw', h, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const expected = async (label) => hex(await crypto.subtle.sign('HMAC', key, utf8(label + '\n' + nonce + '\n' + location.host)));
  const r = await fetch(PROOF_PATH + '?principal=' + id + '&nonce=' + nonce,
    { cache: 'no-store', credentials: 'omit', signal: AbortSignal.timeout(PROOF_WITHIN_MS) });
  if (r.status !== 200 && r.status !== 410 && r.status !== 404) throw new Error('no answer: ' + r.status);
  const mac = (await r.text()).trim();
  if (r.status === 200 && mac === await expected('taskhost-view-proof')) return 'live';
  if (r.status === 410 && mac === await expected('taskhost-view-revoked')) return 'revoked';
  return 'not ours';
}

// Who token `t` names at this origin ({name, all_owners}), the host proved first; null when the
// host cannot prove itself for it or it names nobody.
async function whoami(t) {
  try {
    if (await prove(t) !== 'live') return null;
    const r = await fetch('/api/whoami', authorized(t, {}));
    return r.ok ? await r.json() : null;
  } catch (e) {
    return null;
  }
}

// The token a link gives as `#token=...`, taken out of the address bar and the tab's history
// entry (replaced, so Back does not show it either); null when it gives none.
function takeFragment() {
  const given = new URLSearchParams(location.hash.slice(1)).get('token');
  if (given === null) return null;
  history.replaceState(null, '', location.pathname + location.search);
  return given;
}

// Keeps `given` (from the link or the form) once it has the shape of a token, the host proved
// itself for it and it names a principal; one that would replace a working token of another
// principal waits for the person's click. Why it was not taken, or '' (taken, kept, or asked).
async function offer(given) {
  if (!TOKEN_SHAPE.test(given)) return 'That is not a taskhost token; it was ignored.';
  const old = token();
  if (given === old) return '';
  const who = await whoami(given);
  if (!who) return 'That token names no principal of this host; it was ignored.';
  const was = old ? await whoami(old) : null;
  if (!was || was.name === who.name) {
    localStorage.setItem(TOKEN_KEY, given);
    return '';
  }
  offered = given;
  $('switch-to').textContent = 'Sign in as ' + who.name + ' instead of ' + was.name + '?';
  $('switch').hidden = false;
  return '';
}

// The person's answer to a link's other principal: switch to it, or keep the token kept.
function switchTo(yes) {
  if (yes && offered) localStorage.setItem(TOKEN_KEY, offered);
  offered = null;
  $('switch').hidden = true;
  if (yes) start();
}

// Takes a link's token, if there is one, and shows the view.
async function arrive() {
  const given = takeFragment();
  if (given !== null) $('notice').textContent = await offer(given);
  start();
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
  if (!TOKEN_SHAPE.test(token() || '')) {
    signIn('This view needs a token.');
    return;
  }
  document.title = 'taskhost';
  $('sign-in').hidden = true;
  $('view').hidden = false;
  connect();
}

// `init` for a fetch of this page's origin, with token `t`.
function authorized(t, init) {
  const headers = Object.assign({ Authorization: 'Bearer ' + t }, init.headers || {});
  return Object.assign({ cache: 'no-store', credentials: 'omit' }, init, { headers });
}

const handlers = {
  tasks(d) {
    if (d.full) tasks.clear();
    for (const r of d.rows) tasks.set(r.id, r);
    for (const id of d.removed) tasks.delete(id);
    if (d.watching && !chosen && !watch) {
      // The stream chose it and follows it already: shown without opening another.
      show(d.watching);
    } else if (!chosen && !tasks.has(watch)) {
      const first = newest();
      if (first) select(first.id, false);
    }
    redraw();
  },
  tail(d) {
    if (d.id !== watch) return;
    const t = tasks.get(d.id);
    const expired = t && t.expired ? '(its output expired: the state directory no longer keeps it)' : '';
    tailRuns = d.runs && d.runs.length ? d.runs : [['', expired]];
    showTail();
  },
  details(d) {
    if (d.id === watch) showDetails(d);
  },
  host: (d) => showHost(d),
};

// The page's one event stream: a streamed fetch read as text/event-stream (an EventSource cannot
// send the token), opened again `retry:` ms after it ends, as an EventSource would be; each time,
// the host proves itself first, and a server that cannot is sent nothing.
async function connect() {
  if (stream) stream.abort();
  const mine = new AbortController();
  stream = mine;
  const t = token();
  const url = '/api/events' + (watch ? '?watch=' + encodeURIComponent(watch) : '');
  let wait = retryMs;
  let shown = 'reconnecting…';
  try {
    const proof = await prove(t);
    if (stream !== mine) return;
    if (proof === 'revoked') {
      signIn(REVOKED);
      return;
    }
    if (proof !== 'live') throw new Error(shown = NOT_OURS);
    const r = await fetch(url, authorized(t, { headers: { Accept: 'text/event-stream' }, signal: mine.signal }));
    if (r.status === 401) {
      signIn(REVOKED);
      return;
    }
    if (r.ok && r.body) {
      $('connection').textContent = 'live';
      await follow(r.body.pipeThrough(new TextDecoderStream()).getReader());
    } else {
      wait = REFUSED_RETRY_MS; // 429 (this token's streams are all open elsewhere), 503, ...
    }
  } catch (e) {
    // Aborted for another stream, the connection dropped, or the server is not the host: opened
    // again below if still ours.
  }
  if (stream !== mine) return;
  $('connection').textContent = shown;
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

// The task shown when the person chose none: the newest running one, else the newest.
function newest() {
  const key = (t) => [t.status === 'running' ? 1 : 0, t.started_at_ms || 0, t.id];
  const later = (a, b) => a[0] - b[0] || a[1] - b[1] || (a[2] > b[2] ? 1 : a[2] < b[2] ? -1 : 0);
  let best = null;
  for (const t of tasks.values()) if (!best || later(key(t), key(best)) > 0) best = t;
  return best;
}

// The status a person reads: a task that completed with a non-zero exit (or a signal) failed.
function shownStatus(t) {
  return nonZero(t) ? 'failed' : t.status;
}

function filtered() {
  const status = $('f-status').value, owner = $('f-owner').value, kind = $('f-kind').value;
  const search = $('f-search').value.trim().toLowerCase();
  const rows = [];
  for (const t of tasks.values()) {
    if (status && shownStatus(t) !== status) continue;
    if (owner && ownerId(t) !== owner) continue;
    if (kind && t.kind !== kind) continue;
    if (search && !(t.command.toLowerCase().includes(search) || t.id.toLowerCase().includes(search))) continue;
    rows.push(t);
  }
  rows.sort((a, b) => b.started_at_ms - a.started_at_ms || (a.id < b.id ? 1 : -1));
  return rows;
}

// Adds to `select` an option for each of `values` it lacks: a value, or [value, label] (a
// label that changed is updated).
function options(select, values) {
  const keep = select.value;
  const have = new Map([...select.options].map((o) => [o.value, o]));
  const pairs = [...values].map((v) => (Array.isArray(v) ? v : [v, v]));
  for (const [v, label] of pairs.sort((a, b) => (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0))) {
    if (v === '') continue;
    const had = have.get(v);
    if (had) { if (had.textContent !== label) had.textContent = label; continue; }
    const o = document.createElement('option');
    o.value = v; o.textContent = label;
    if (label !== v) o.title = v;
    select.appendChild(o);
  }
  select.value = keep;
}

// The id of a task's owner (a row of an older host's view may lack `owner_id`).
function ownerId(t) {
  return t.owner_id === undefined ? t.owner : t.owner_id;
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
  const owners = new Map([...tasks.values()].map((t) => [ownerId(t), t.owner]));
  options($('f-owner'), [...owners.entries()]);
  options($('f-kind'), new Set([...tasks.values()].map((t) => t.kind)));
  const rows = filtered();
  const pages = Math.max(1, Math.ceil(rows.length / PAGE_ROWS));
  page = Math.min(page, pages - 1);
  statusCounts();
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
    const owner = cell(tr, t.owner, 'owner');
    if (ownerId(t) && ownerId(t) !== t.owner) { owner.title = ownerId(t); owner.dataset.ownerId = ownerId(t); }
    cell(tr, shownStatus(t), 'status status-' + shownStatus(t));
    cell(tr, t.command, 'command');
    cell(tr, clock(t.started_at_ms), 'started');
    cell(tr, duration(t), 'duration');
    cell(tr, (t.detail || '') + (t.expired ? ' (output expired)' : ''), 'exit');
    const td = cell(tr, '', 'actions');
    if (t.status === 'running' || t.status === 'queued') {
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
  $('detail-status').textContent = w ? shownStatus(w) + (w.detail ? ' (' + w.detail + ')' : '') : '';
  $('download').disabled = !w;
  timeline(rows);
}

// Each status filter says how many tasks it would show.
function statusCounts() {
  const n = new Map();
  for (const t of tasks.values()) n.set(shownStatus(t), (n.get(shownStatus(t)) || 0) + 1);
  for (const o of $('f-status').options) {
    if (o.value) o.textContent = o.value + ' (' + (n.get(o.value) || 0) + ')';
  }
}

// Shows task `id`'s output (`byPerson`: the person chose it, so no other is chosen for them).
function select(id, byPerson = true) {
  chosen = chosen || byPerson;
  if (id === watch) return;
  show(id);
  connect();
}

// Makes task `id` the one shown, its output and details to come from the stream.
function show(id) {
  watch = id;
  $('detail-id').textContent = id;
  tailRuns = [];
  $('tail').textContent = '';
  showDetails({});
  $('follow').checked = true;
  redraw();
}

async function kill(id) {
  if (!window.confirm('Kill task ' + id + '?')) return;
  const t = token();
  const proof = await prove(t).catch(() => 'unreachable');
  if (proof === 'revoked') return signIn(REVOKED);
  if (proof !== 'live') return window.alert('The kill was not sent: ' + (proof === 'not ours' ? NOT_OURS : 'the host cannot be reached') + '.');
  const r = await fetch('/api/tasks/' + encodeURIComponent(id) + '/kill', authorized(t, { method: 'POST' }));
  if (r.status === 401) signIn(REVOKED);
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
    // The plugin's live tasks, those the host runs for it (bash's processes) included; a
    // generation holds only those whose hooks are its own.
    cell(tr, String(p.live_tasks ?? gens.reduce((n, g) => n + g.live_tasks, 0)), 'live');
    body.appendChild(tr);
  }
  $('plugins').replaceChild(body, $('plugins').tBodies[0]);
}

window.addEventListener('hashchange', () => { arrive(); });

document.addEventListener('DOMContentLoaded', () => {
  $('sign-in').addEventListener('submit', async (e) => {
    e.preventDefault();
    const given = $('token').value.trim();
    $('token').value = '';
    const why = await offer(given);
    if (why) signIn(why);
    else start();
  });
  $('switch-to').addEventListener('click', () => switchTo(true));
  $('switch-keep').addEventListener('click', () => switchTo(false));
  for (const id of ['f-status', 'f-owner', 'f-kind', 'f-search']) $(id).addEventListener('input', () => { page = 0; redraw(); });
  $('follow').addEventListener('change', () => { if ($('follow').checked) $('tail').scrollTop = $('tail').scrollHeight; });
  $('tail').addEventListener('scroll', () => { $('follow').checked = atEnd($('tail')); });
  $('out-search').addEventListener('input', showTail);
  $('out-search').addEventListener('keydown', (e) => { if (e.key === 'Enter') { e.preventDefault(); nextMatch(); } });
  $('download').addEventListener('click', () => { if (watch) download(); });
  $('timeline').addEventListener('mousemove', hover);
  $('timeline').addEventListener('mouseleave', () => { $('timeline-hover').textContent = ''; });
  $('timeline').addEventListener('click', (e) => { const t = hover(e); if (t) select(t.id); });
  $('prev').addEventListener('click', () => { page = Math.max(0, page - 1); redraw(); });
  $('next').addEventListener('click', () => { page += 1; redraw(); });
  setInterval(() => { if ([...tasks.values()].some((t) => t.status === 'running')) redraw(); }, 1000);
  arrive();
});
