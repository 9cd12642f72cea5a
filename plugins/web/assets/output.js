// The output pane of the web view (part of /app.js, after app.js): the shown task's output in
// its colours, the find box's marks, following its end, and the download of all of it.

// Whether element `e` is scrolled to its end.
const atEnd = (e) => e.scrollTop + e.clientHeight >= e.scrollHeight - 4;

// Draws the shown task's output: a span per run, its classes the run's colours, its text as text;
// what the find box holds is marked. Keeps the end in view while following.
function showTail() {
  const pre = $('tail');
  const find = $('out-search').value.toLowerCase();
  const out = document.createDocumentFragment();
  let matches = 0;
  for (const [classes, text] of tailRuns) {
    const span = document.createElement('span');
    if (classes) span.className = classes;
    matches += marked(span, text, find);
    out.appendChild(span);
  }
  pre.replaceChildren(out);
  $('out-matches').textContent = find ? matches + (matches === 1 ? ' match' : ' matches') : '';
  if ($('follow').checked) pre.scrollTop = pre.scrollHeight;
}

// Fills `span` with `text`, each occurrence of `find` (lower case) in a <mark>; how many.
function marked(span, text, find) {
  if (!find) {
    span.textContent = text;
    return 0;
  }
  const lower = text.toLowerCase();
  let n = 0;
  let from = 0;
  for (let at = lower.indexOf(find); at >= 0; at = lower.indexOf(find, at + find.length)) {
    span.appendChild(document.createTextNode(text.slice(from, at)));
    const m = document.createElement('mark');
    m.textContent = text.slice(at, at + find.length);
    span.appendChild(m);
    from = at + find.length;
    n += 1;
  }
  span.appendChild(document.createTextNode(text.slice(from)));
  return n;
}

// Brings the next match of the find box into view (following stops).
function nextMatch() {
  const marks = [...$('tail').querySelectorAll('mark')];
  if (!marks.length) return;
  const at = marks.findIndex((m) => m.classList.contains('current'));
  for (const m of marks) m.classList.remove('current');
  const next = marks[(at + 1) % marks.length];
  next.classList.add('current');
  $('follow').checked = false;
  next.scrollIntoView({ block: 'center' });
}

// The whole kept output of the shown task, as a file (fetched with the token, after the host
// proved itself, as every request).
async function download() {
  const id = watch;
  const t = token();
  const proof = await prove(t).catch(() => 'unreachable');
  if (proof === 'revoked') return signIn(REVOKED);
  if (proof !== 'live') return window.alert('Nothing was fetched: ' + (proof === 'not ours' ? NOT_OURS : 'the host cannot be reached') + '.');
  const r = await fetch('/api/tasks/' + encodeURIComponent(id) + '/output', authorized(t, {}));
  if (r.status === 401) return signIn(REVOKED);
  if (!r.ok) return window.alert('The download failed: ' + (await r.text()));
  const url = URL.createObjectURL(new Blob([await r.text()], { type: 'text/plain' }));
  const a = document.createElement('a');
  a.href = url;
  a.download = id + '.txt';
  a.click();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}
