// The timeline of the web view (part of /app.js, after app.js): a bar per task over the last
// hours, coloured by how it ended, a time axis, and what the bar under the pointer is.

// The timeline's height for bars; below it, the time axis.
const AXIS_PX = 20;

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
  const height = canvas.height - AXIS_PX;
  const h = Math.max(1, Math.min(12, Math.floor(height / Math.max(1, shown.length))));
  const style = getComputedStyle(document.documentElement);
  const colour = (s) => style.getPropertyValue('--' + s).trim() || COLOURS[s] || '#444';
  bars = shown.map((t, i) => {
    const x0 = ((Math.max(t.started_at_ms, from) - from) / span) * canvas.width;
    const x1 = Math.max(x0 + 2, (((t.finished_at_ms || now) - from) / span) * canvas.width);
    ctx.fillStyle = colour(shownStatus(t));
    ctx.fillRect(x0, i * h, x1 - x0, Math.max(1, h - 1));
    return [x0, x1, i * h, i * h + h, t];
  });
  axis(ctx, from, span, canvas.width, height);
}

// The time axis under the bars: a tick and a clock time at each of a few round times.
function axis(ctx, from, span, width, top) {
  const steps = [1, 5, 10, 30, 60, 300, 600, 1800, 3600].map((s) => s * 1000);
  const step = steps.find((s) => span / s <= 8) || steps[steps.length - 1];
  ctx.fillStyle = getComputedStyle($('timeline')).color;
  ctx.font = '12px system-ui, sans-serif';
  ctx.fillRect(0, top, width, 1);
  for (let at = Math.ceil(from / step) * step; at <= from + span; at += step) {
    const x = ((at - from) / span) * width;
    ctx.fillRect(x, top, 1, 5);
    const label = new Date(at).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: step < 60000 ? '2-digit' : undefined });
    ctx.fillText(label, Math.min(x + 2, width - 60), top + 16);
  }
}

// What the timeline's bar under the pointer is: its task's id, status and command.
function hover(e) {
  const canvas = $('timeline');
  const r = canvas.getBoundingClientRect();
  const x = ((e.clientX - r.left) / r.width) * canvas.width;
  const y = ((e.clientY - r.top) / r.height) * canvas.height;
  const bar = bars.find(([x0, x1, y0, y1]) => x >= x0 - 2 && x <= x1 + 2 && y >= y0 && y < y1);
  const t = bar && bar[4];
  const text = t ? t.id + ' ' + shownStatus(t) + ' (' + duration(t) + ')' + (t.owner ? ' by ' + t.owner : '') + ': ' + t.command : '';
  $('timeline-hover').textContent = text;
  canvas.title = text;
  return t;
}
