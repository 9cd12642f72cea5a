// A loopback proxy that adds `Authorization: Bearer $TASKHOST_TOKEN` to every request and passes
// everything else through unchanged (the Host header included, so the host's own checks still see
// what the client sent). The official conformance suite has no way to send a header; taskhost
// refuses every request without a token. Usage: node inject-token.mjs LISTEN_PORT UPSTREAM_PORT
// (prints `listening on PORT` once it accepts connections; LISTEN_PORT 0 picks one).
import http from 'node:http';

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);
const token = process.env.TASKHOST_TOKEN;
if (!token || !upstreamPort) {
  console.error('usage: TASKHOST_TOKEN=... node inject-token.mjs LISTEN_PORT UPSTREAM_PORT');
  process.exit(2);
}
const agent = new http.Agent({ keepAlive: true });
const server = http.createServer((req, res) => {
  const upstream = http.request(
    {
      host: '127.0.0.1',
      port: upstreamPort,
      method: req.method,
      path: req.url,
      headers: { ...req.headers, authorization: `Bearer ${token}` },
      agent,
    },
    (answer) => {
      res.writeHead(answer.statusCode, answer.rawHeaders);
      answer.pipe(res);
    },
  );
  upstream.on('error', (e) => {
    if (!res.headersSent) res.writeHead(502);
    res.end(String(e));
  });
  req.pipe(upstream);
  res.on('close', () => upstream.destroy());
});
server.listen(listenPort, '127.0.0.1', () => {
  console.log(`listening on ${server.address().port}`);
});
