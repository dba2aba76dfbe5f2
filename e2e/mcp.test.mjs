// The gateway as an MCP server: the official TypeScript MCP client
// (@modelcontextprotocol/sdk) on POST /mcp lists the graphs as tools and
// calls one, in front of the scripted fake upstream.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

import { GATEWAY, fake, reset, sessionId } from './helpers.mjs';

beforeEach(reset);

async function connect(t) {
  const client = new Client({ name: 'switchboard-e2e', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${GATEWAY}/mcp`)));
  t.after(() => client.close());
  return client;
}

const textOf = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

test('the MCP client lists every graph as a tool with a message and a session_id', async (t) => {
  const client = await connect(t);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((tool) => tool.name).sort(), ['support', 'tech']);
  const support = tools.find((tool) => tool.name === 'support');
  assert.equal(support.description, 'Customer support desk');
  assert.equal(support.inputSchema.type, 'object');
  assert.equal(support.inputSchema.properties.message.type, 'string');
  assert.equal(support.inputSchema.properties.session_id.type, 'string');
  assert.deepEqual(support.inputSchema.required, ['message']);
});

test("the MCP client gets billing's answer from support, and the session goes on", async (t) => {
  await fake.script(
    { tool_calls: [{ id: 'call_1', name: 'transfer_to_billing', arguments: { reason: 'double charge' } }] },
    { text: 'You were charged twice; one charge is refunded.' },
    { text: 'The refund is on its way.' },
  );
  const client = await connect(t);
  const id = sessionId('mcp');

  const first = await client.callTool({ name: 'support', arguments: { message: 'I was charged twice', session_id: id } });
  assert.ok(!first.isError, textOf(first));
  assert.equal(textOf(first), 'You were charged twice; one charge is refunded.');
  assert.deepEqual(first.structuredContent, { agentName: 'billing', sessionId: id });

  const second = await client.callTool({ name: 'support', arguments: { message: 'When?', session_id: id } });
  assert.equal(textOf(second), 'The refund is on its way.');
  assert.deepEqual(second.structuredContent, { agentName: 'billing', sessionId: id });

  const reqs = await fake.requests();
  assert.deepEqual(reqs.map((r) => r.body.model), ['triage-model', 'billing-model', 'billing-model']);
  const res = await fetch(`${GATEWAY}/v1/sessions/${id}`);
  assert.equal((await res.json()).activeAgent, 'billing');
});

test('a failed run is a tool error, not a protocol error', async (t) => {
  const client = await connect(t);
  const result = await client.callTool({ name: 'tech', arguments: { message: 'hi', session_id: 'not a valid id' } });
  assert.equal(result.isError, true);
  assert.match(textOf(result), /^invalid_request: invalid session_id/);
});
