// The pre_tool_call hook (CONTRACT 6) through the official openai Node
// client: the support graph's hook (tools-server.mjs POST /gate) is sent
// every call the gateway runs; it may rewrite a call's arguments, and a hook
// that fails denies the call (fail closed). Requests pick the hook's
// behaviour with metadata.hook; without it the hook allows everything.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';

import { GATEWAY, fake, tools, reset, client, sessionId, user, toolResults } from './helpers.mjs';

beforeEach(reset);

test('the hook rewrites a tool call: the tool, the model and the stored session see its arguments', async () => {
  await fake.script(
    { tool_calls: [{ id: 'h1', name: 'transfer_to_billing', arguments: {} }] },
    { tool_calls: [{ id: 'l1', name: 'lookup_charges', arguments: { month: '2026-01' } }] },
    { text: 'Two charges in November.' },
  );
  const id = sessionId('hook-rewrite');
  const oa = client({ defaultHeaders: { 'X-Session-Id': id } });
  const c = await oa.chat.completions.create(user('why two charges?', { metadata: { hook: 'rewrite' } }));
  assert.equal(c.choices[0].message.content, 'Two charges in November.');
  assert.equal(c.metadata.agentName, 'billing');

  const calls = await tools.calls();
  assert.equal(calls.length, 1);
  assert.equal(calls[0].path, '/charges');
  assert.deepEqual(JSON.parse(calls[0].body), { month: '2026-11' });

  const gates = await tools.gates();
  assert.deepEqual(gates.map((g) => [g.agent, g.tool]), [['triage', 'transfer_to_billing'], ['billing', 'lookup_charges']]);
  const lookup = gates[1];
  assert.deepEqual(lookup.arguments, { month: '2026-01' });
  assert.equal(lookup.toolCallId, 'l1');
  assert.equal(lookup.sessionId, id);
  assert.equal(lookup.metadata.hook, 'rewrite');

  const reqs = await fake.requests();
  assert.equal(reqs.length, 3);
  assert.match(toolResults(reqs[2]).l1, /ch_1/);
  assert.ok(!JSON.stringify(reqs[2].body).includes('2026-01'), 'the model read the arguments the hook replaced');
  const stored = await (await fetch(`${GATEWAY}/v1/sessions/${id}`)).text();
  assert.ok(stored.includes('2026-11') && !stored.includes('2026-01'), `stored session: ${stored}`);
});

test('a hook that fails denies the call: a denied handoff does not happen and the same agent goes on', async () => {
  await fake.script(
    { tool_calls: [{ id: 'h1', name: 'transfer_to_billing', arguments: {} }] },
    { text: 'Triage here still.' },
  );
  const oa = client({ defaultHeaders: { 'X-Session-Id': sessionId('hook-fail') } });
  const stream = await oa.chat.completions.create({ ...user('billing please', { metadata: { hook: 'fail' } }), stream: true });
  let content = '';
  let agent;
  for await (const chunk of stream) {
    content += chunk.choices[0]?.delta?.content ?? '';
    agent = chunk.metadata?.agentName ?? agent;
  }
  assert.equal(content, 'Triage here still.');
  assert.equal(agent, 'triage');
  assert.equal((await tools.gates()).length, 1);

  const reqs = await fake.requests();
  assert.equal(reqs.length, 2);
  const result = JSON.parse(toolResults(reqs[1]).h1);
  assert.equal(result.error.code, 'denied');
  assert.match(result.error.message, /pre_tool_call hook failed/);
  assert.ok(!result.error.message.includes('127.0.0.1'), 'the hook URL reached the model');
});

test('a hook that denies gives the model its reason, and the tool never runs', async () => {
  await fake.script(
    { tool_calls: [{ id: 'h1', name: 'transfer_to_billing', arguments: {} }] },
    { text: 'Sorry.' },
  );
  const oa = client();
  const c = await oa.chat.completions.create(user('billing please', { metadata: { hook: 'deny' } }));
  assert.equal(c.choices[0].message.content, 'Sorry.');
  assert.equal(c.metadata.agentName, 'triage');
  const result = JSON.parse(toolResults((await fake.requests())[1]).h1);
  assert.deepEqual(result, { error: { code: 'denied', message: 'charges are closed today' } });
});
