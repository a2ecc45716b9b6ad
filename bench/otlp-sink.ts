// The tracing benchmark's collector: takes OTLP/HTTP trace exports (any encoding) and drops them, counting
// requests and bytes, so a traced gateway pays its whole export path but no collector's work shares its cost.
// Runs as its own process: `node dist/bench/otlp-sink.js` prints {"port":N} once listening; on SIGTERM it prints
// {"exports":N,"bytes":B} and exits.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

let exports = 0;
let bytes = 0;
const server = createServer((req, res) => {
  req.on('data', (c: Buffer) => { bytes += c.length; });
  req.on('end', () => {
    exports++;
    // An empty ExportTraceServiceResponse in the request's own encoding.
    const json = (req.headers['content-type'] ?? '').includes('json');
    res.setHeader('content-type', json ? 'application/json' : 'application/x-protobuf');
    res.end(json ? '{}' : '');
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => {
  console.log(JSON.stringify({ port: (server.address() as AddressInfo).port }));
});
process.once('SIGTERM', () => {
  console.log(JSON.stringify({ exports, bytes }));
  process.exit(0);
});
