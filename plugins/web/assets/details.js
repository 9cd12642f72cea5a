// A task's details in the web view (part of /app.js, after app.js): what the host records of the
// selected task, from the stream's `details` event: its owner, where its process runs, its
// policy's bounds, its place in the queue, its output's size, who asked to kill it. Text only.

const EVERY_OWNER = '*every-owner*';

// `n` bytes as people read them.
function bytes(n) {
  if (n < 1024) return n + ' B';
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n / 1024, i = 0;
  while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
  return v.toFixed(v < 10 ? 1 : 0) + ' ' + units[i];
}

// The name the page knows owner `id` by (a row's), else the id.
function ownerName(id) {
  if (id === EVERY_OWNER) return 'an overseer';
  for (const t of tasks.values()) if (ownerId(t) === id && t.owner) return t.owner;
  return id;
}

// A policy's bounds in one line, or that there are none.
function boundsText(b) {
  if (!b) return 'none (unbounded)';
  const parts = ['policy ' + b.policy];
  parts.push(b.filesystem ? 'writes ' + (b.write.length ? b.write.join(', ') : 'nothing') : 'filesystem unbounded');
  parts.push(b.network ? 'network' : 'no network');
  if (b.memory_max != null) parts.push('memory ' + bytes(b.memory_max));
  if (b.pids_max != null) parts.push(b.pids_max + ' processes');
  if (b.cpu_max_millis != null) parts.push((b.cpu_max_millis / 1000) + ' cores');
  return parts.join(' · ');
}

// The rows of the details list of `d`: [key, term, text], those that say something.
function detailRows(d) {
  const rows = [];
  if (d.owner) rows.push(['owner', 'owner', ownerName(d.owner) + (ownerName(d.owner) !== d.owner ? ' (' + d.owner + ')' : '')]);
  if (d.cwd) rows.push(['cwd', 'directory', d.cwd]);
  if (d.pid != null) rows.push(['pid', 'pid', String(d.pid)]);
  if (d.id) rows.push(['bounds', 'bounds', boundsText(d.bounds)]);
  if (d.ahead != null) rows.push(['queue', 'queue', d.ahead === 0 ? 'next to run' : d.ahead + ' ahead of it']);
  if (d.output_bytes != null) rows.push(['output', 'output kept', bytes(d.output_bytes)]);
  if (d.killed_by) {
    const k = d.killed_by;
    rows.push(['killed-by', 'killed by', ownerName(k.by) + (k.reason ? ': ' + k.reason : '')]);
  }
  return rows;
}

function showDetails(d) {
  const list = document.createElement('dl');
  list.id = 'task-details';
  list.className = 'task-details';
  for (const [key, term, text] of detailRows(d)) {
    const dt = document.createElement('dt');
    dt.textContent = term;
    const dd = document.createElement('dd');
    dd.textContent = text;
    dd.dataset.detail = key;
    list.append(dt, dd);
  }
  $('task-details').replaceWith(list);
}
