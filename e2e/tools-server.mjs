// The desk's server-side HTTP tools for the e2e suite: POST /charges
// answers the user's charges. Every call is recorded; GET /_calls lists
// them ({path, body}) and POST /_reset forgets them. POST /gate is the
// support graph's pre_tool_call hook (CONTRACT 6): it allows every call but
// for requests whose metadata names a `hook` behaviour (hook.test.mjs):
// rewrite (lookup_charges gets {"month": "2026-11"}), deny, or fail (500).
// GET /_gates lists what the hook was sent. Usage:
//   node tools-server.mjs ADDR_FILE
// It listens on a free loopback port and writes host:port to ADDR_FILE.
import { createServer } from 'node:http';
import { writeFileSync, renameSync } from 'node:fs';

const addrFile = process.argv[2];
if (!addrFile) {
  console.error('usage: node tools-server.mjs ADDR_FILE');
  process.exit(2);
}

const CHARGES = { charges: [{ id: 'ch_1', amount: 4200 }, { id: 'ch_2', amount: 4200 }] };

let calls = [];
let gates = [];

/** gate answers a pre_tool_call POST by the request metadata's `hook`. */
function gate(res, body) {
  const call = JSON.parse(body);
  gates.push(call);
  switch (call.metadata?.hook) {
    case 'rewrite':
      if (call.tool === 'lookup_charges') return json(res, 200, { action: 'allow', arguments: { month: '2026-11' } });
      return json(res, 200, { action: 'allow' });
    case 'deny':
      return json(res, 200, { action: 'deny', reason: 'charges are closed today' });
    case 'fail':
      return json(res, 500, { oops: true });
    default:
      return json(res, 200, { action: 'allow' });
  }
}

function json(res, status, value) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
}

const server = createServer(async (req, res) => {
  let body = '';
  for await (const chunk of req) body += chunk;
  if (req.method === 'GET' && req.url === '/_calls') return json(res, 200, calls);
  if (req.method === 'GET' && req.url === '/_gates') return json(res, 200, gates);
  if (req.method === 'POST' && req.url === '/gate') return gate(res, body);
  if (req.method === 'POST' && req.url === '/_reset') {
    calls = [];
    gates = [];
    return json(res, 200, { reset: true });
  }
  calls.push({ path: req.url, body });
  if (req.method === 'POST' && req.url === '/charges') return json(res, 200, CHARGES);
  json(res, 404, { error: `no tool at ${req.method} ${req.url}` });
});

server.listen(0, '127.0.0.1', () => {
  const { address, port } = server.address();
  // Through a rename, so that run.sh never reads a half-written file.
  writeFileSync(`${addrFile}.tmp`, `${address}:${port}\n`);
  renameSync(`${addrFile}.tmp`, addrFile);
});

for (const sig of ['SIGTERM', 'SIGINT']) process.on(sig, () => server.close(() => process.exit(0)));
