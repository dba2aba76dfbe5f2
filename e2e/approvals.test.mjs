// Approvals (CONTRACT 6, docs/permissions.md) through the official openai
// Node client: a call behind `ask` pauses the run with an approval_required
// reply, a person decides (POST /v1/sessions/{id}/approvals/{id}, or the
// next request's `approvals`), and the session's next request resumes it.
// The desk's support graph asks about lookup_charges and escalate_refund
// only for requests whose metadata has gate=on (desk.yaml), so the other
// files' tests are not gated.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';

import { GATEWAY, fake, tools, reset, client, sessionId, user, toolResults, collect, text, finishReason, assertWellFormed } from './helpers.mjs';

beforeEach(reset);

const gate = { gate: 'on' };
const APR = /^apr_[0-9a-f]{32}$/;

/** decide posts one decision with fetch and returns [status, body]. */
async function decide(session, id, body) {
  const res = await fetch(`${GATEWAY}/v1/sessions/${session}/approvals/${id}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return [res.status, await res.json()];
}

/** checkApproval checks one approval object of a paused reply. */
function checkApproval(a, tool, args, agent) {
  assert.match(a.id, APR);
  assert.equal(a.tool, tool);
  assert.deepEqual(a.arguments, args);
  assert.equal(a.agent, agent);
  assert.equal(a.status, 'pending');
  assert.ok(a.toolCallId);
  assert.ok(a.expiresAt > Date.now() / 1000);
}

function pauseScript() {
  return fake.script(
    { tool_calls: [{ id: 'c1', name: 'transfer_to_billing', arguments: {} }] },
    { tool_calls: [{ id: 'l1', name: 'lookup_charges', arguments: {} }] },
  );
}

test('chat: ask pauses with approval_required; approved by POST, an empty messages array resumes it', async () => {
  await pauseScript();
  const id = sessionId('approve');
  const oa = client({ defaultHeaders: { 'X-Session-Id': id } });
  const { data: c, response } = await oa.chat.completions.create(user('why two charges?', { metadata: gate })).withResponse();
  assert.equal(response.status, 200);
  assert.equal(c.choices[0].finish_reason, 'stop');
  assert.equal(c.choices[0].message.content, 'Approval required: lookup_charges {}');
  assert.equal(c.metadata.event, 'approval_required');
  assert.equal(c.metadata.agentName, 'billing');
  assert.equal(c.metadata.approvals.length, 1);
  const [a] = c.metadata.approvals;
  checkApproval(a, 'lookup_charges', {}, 'billing');
  assert.deepEqual(await tools.calls(), [], 'the tool ran before it was approved');

  const session = await (await fetch(`${GATEWAY}/v1/sessions/${id}`)).json();
  assert.deepEqual(session.pendingApprovals.map((p) => p.id), [a.id]);

  const [status, decided] = await decide(id, a.id, { approve: true });
  assert.equal(status, 200);
  assert.equal(decided.status, 'approved');
  const [again, err] = await decide(id, a.id, { approve: false });
  assert.equal(again, 409);
  assert.equal(err.error.code, 'approval_decided');

  await fake.script({ text: 'You were charged twice.' });
  const done = await oa.chat.completions.create({ model: 'support', messages: [], metadata: gate });
  assert.equal(done.choices[0].message.content, 'You were charged twice.');
  assert.equal(done.metadata.agentName, 'billing');
  assert.deepEqual(await tools.calls(), [{ path: '/charges', body: '{}' }]);
  const reqs = await fake.requests();
  assert.equal(reqs.length, 3);
  assert.match(toolResults(reqs[2]).l1, /ch_1/);
  for (const m of reqs[2].body.messages) assert.ok(!String(m.content ?? '').includes('Approval required'), 'the approval message reached the model');
});

test('chat: an approved call still runs when the next request brings a new user message, and its result comes first', async () => {
  await pauseScript();
  const id = sessionId('approve-then-new');
  const oa = client({ defaultHeaders: { 'X-Session-Id': id } });
  const c = await oa.chat.completions.create(user('why two charges?', { metadata: gate }));
  const [a] = c.metadata.approvals;
  const [status] = await decide(id, a.id, { approve: true });
  assert.equal(status, 200);

  await fake.script({ text: 'About your other question.' });
  const done = await oa.chat.completions.create(user('and another thing', { metadata: gate }));
  assert.equal(done.choices[0].message.content, 'About your other question.');
  assert.deepEqual(await tools.calls(), [{ path: '/charges', body: '{}' }], 'the approved call did not run');
  const reqs = await fake.requests();
  assertWellFormed(reqs);
  const msgs = reqs[2].body.messages;
  const result = msgs.findIndex((m) => m.role === 'tool' && m.tool_call_id === 'l1');
  const asked = msgs.findIndex((m) => m.role === 'user' && m.content === 'and another thing');
  assert.ok(result >= 0 && asked > result, `want l1's result, then the new message: ${JSON.stringify(msgs)}`);
  assert.match(msgs[result].content, /ch_1/);
});

test('chat stream: the pause is one chunk with the approvals; rejected in the next request, with the history resent', async () => {
  await fake.script({ tool_calls: [{ id: 'r1', name: 'escalate_refund', arguments: { orderId: 'o-7' } }] });
  const id = sessionId('reject-stream');
  const oa = client({ defaultHeaders: { 'X-Session-Id': id } });
  const chunks = await collect(await oa.chat.completions.create({ ...user('refund o-7', { metadata: gate }), stream: true }));
  const pause = chunks.filter((c) => c.metadata?.event === 'approval_required');
  assert.equal(pause.length, 1);
  assert.equal(text(chunks), 'Approval required: escalate_refund {"orderId":"o-7"}');
  assert.equal(finishReason(chunks), 'stop');
  const [a] = pause[0].metadata.approvals;
  checkApproval(a, 'escalate_refund', { orderId: 'o-7' }, 'triage');

  await fake.script({ text: 'No refund, then.' });
  const done = await oa.chat.completions.create({
    model: 'support',
    metadata: gate,
    messages: [{ role: 'user', content: 'refund o-7' }, { role: 'assistant', content: text(chunks) }],
    approvals: [{ id: a.id, approve: false, reason: 'not this order' }],
  });
  assert.equal(done.choices[0].message.content, 'No refund, then.');
  assert.equal(done.metadata.agentName, 'triage', 'a rejected handoff does not happen');
  const reqs = await fake.requests();
  const result = JSON.parse(toolResults(reqs[1]).r1);
  assert.deepEqual(result, { error: { code: 'rejected', message: 'not this order' } });
});

test('chat stream via chat.completions.stream: an approved handoff happens at the resume', async () => {
  await fake.script({ tool_calls: [{ id: 'r1', name: 'escalate_refund', arguments: { orderId: 'o-8' } }] });
  const id = sessionId('handoff-stream');
  const oa = client({ defaultHeaders: { 'X-Session-Id': id } });
  const stream = oa.chat.completions.stream(user('refund o-8', { metadata: gate }));
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  const final = await stream.finalChatCompletion();
  assert.equal(final.choices[0].message.content, 'Approval required: escalate_refund {"orderId":"o-8"}');
  const a = chunks.find((c) => c.metadata?.event === 'approval_required').metadata.approvals[0];
  const [status] = await decide(id, a.id, { approve: true });
  assert.equal(status, 200);
  await fake.script({ text: 'Refund on its way.' });
  const done = await collect(await oa.chat.completions.create({ model: 'support', messages: [], metadata: gate, stream: true }));
  assert.equal(text(done), 'Refund on its way.');
  assert.ok(done.some((c) => c.metadata?.event === 'handoff' && c.metadata.to === 'refunds'));
  const reqs = await fake.requests();
  assert.equal(reqs[1].body.model, 'refunds-model');
});

test('responses: a paused run is incomplete with the approvals in metadata; previous_response_id with no input resumes it', async () => {
  await pauseScript();
  const oa = client();
  const r = await oa.responses.create({ model: 'support', input: 'why two charges?', metadata: gate });
  assert.equal(r.status, 'incomplete');
  assert.deepEqual(r.incomplete_details, { reason: 'approval_required' });
  assert.equal(r.metadata.event, 'approval_required');
  assert.equal(r.output_text, 'Approval required: lookup_charges {}');
  const aps = JSON.parse(r.metadata.approvals);
  assert.equal(aps.length, 1);
  checkApproval(aps[0], 'lookup_charges', {}, 'billing');

  const [status] = await decide(r.metadata.sessionId, aps[0].id, { approve: true });
  assert.equal(status, 200);
  await fake.script({ text: 'You were charged twice.' });
  const done = await oa.responses.create({ model: 'support', previous_response_id: r.id, input: [], metadata: gate });
  assert.equal(done.status, 'completed');
  assert.equal(done.output_text, 'You were charged twice.');
  assert.equal(done.metadata.sessionId, r.metadata.sessionId);
  assert.deepEqual(await tools.calls(), [{ path: '/charges', body: '{}' }]);
});

test('responses stream: response.incomplete ends the pause; body approvals reject and resume', async () => {
  await pauseScript();
  const oa = client();
  const events = [];
  for await (const ev of await oa.responses.create({ model: 'support', input: 'charges?', metadata: gate, stream: true })) events.push(ev);
  const last = events.at(-1);
  assert.equal(last.type, 'response.incomplete');
  assert.equal(last.response.incomplete_details.reason, 'approval_required');
  assert.ok(events.some((e) => e.type === 'response.output_text.delta'));
  const [a] = JSON.parse(last.response.metadata.approvals);

  await fake.script({ text: 'I will not look.' });
  const done = await oa.responses.create({
    model: 'support', previous_response_id: last.response.id, metadata: gate,
    approvals: [{ id: a.id, approve: false }],
  });
  assert.equal(done.output_text, 'I will not look.');
  assert.deepEqual(await tools.calls(), []);
  const reqs = await fake.requests();
  assert.deepEqual(JSON.parse(toolResults(reqs[2]).l1), { error: { code: 'rejected', message: 'rejected by the approver' } });
});

test('responses.stream: finalResponse() is the paused response, approvals and all', async () => {
  await fake.script({ tool_calls: [{ id: 'r1', name: 'escalate_refund', arguments: { orderId: 'o-3' } }] });
  const stream = client().responses.stream({ model: 'support', input: 'refund o-3', metadata: gate });
  const final = await stream.finalResponse();
  assert.equal(final.status, 'incomplete');
  assert.equal(final.incomplete_details.reason, 'approval_required');
  assert.equal(final.output_text, 'Approval required: escalate_refund {"orderId":"o-3"}');
  const [a] = JSON.parse(final.metadata.approvals);
  checkApproval(a, 'escalate_refund', { orderId: 'o-3' }, 'triage');
});

/** askAuditor scripts the tech desk asking its auditor sub-agent, whose lookup_charges waits. */
function askAuditor() {
  return fake.script(
    { tool_calls: [{ id: 'a1', name: 'ask_auditor', arguments: { task: 'check the charges' } }] },
    { tool_calls: [{ id: 'l1', name: 'lookup_charges', arguments: {} }] },
  );
}

test('chat: a call behind ask inside a sub-agent pauses the whole run; approved, the sub-agent goes on from where it stopped', async () => {
  await askAuditor();
  const id = sessionId('subagent');
  const oa = client({ defaultHeaders: { 'X-Session-Id': id } });
  const c = await oa.chat.completions.create({ model: 'tech', messages: [{ role: 'user', content: 'my app charged me twice' }], metadata: gate });
  assert.equal(c.choices[0].finish_reason, 'stop');
  assert.equal(c.choices[0].message.content, 'Approval required: lookup_charges {}');
  assert.equal(c.metadata.event, 'approval_required');
  assert.equal(c.metadata.agentName, 'tech-support');
  assert.equal(c.metadata.approvals.length, 1);
  const [a] = c.metadata.approvals;
  checkApproval(a, 'lookup_charges', {}, 'auditor');
  assert.equal(a.toolCallId, 'l1');
  assert.equal(a.nest, undefined, 'the kept sub-agent transcript reached the client');
  assert.deepEqual(await tools.calls(), [], 'the tool ran before it was approved');

  const [status] = await decide(id, a.id, { approve: true });
  assert.equal(status, 200);
  await fake.script({ text: 'Two charges: one is a retry.' }, { text: 'A retry charged you twice.' });
  const done = await oa.chat.completions.create({ model: 'tech', messages: [], metadata: gate });
  assert.equal(done.choices[0].message.content, 'A retry charged you twice.');
  assert.equal(done.metadata.agentName, 'tech-support');
  assert.deepEqual(await tools.calls(), [{ path: '/charges', body: '{}' }]);
  const reqs = await fake.requests();
  assert.equal(reqs.length, 4);
  assert.equal(reqs[2].body.model, 'auditor-model');
  assert.deepEqual(reqs[2].body.messages.slice(1).map((m) => m.role), ['user', 'assistant', 'tool'], 'the auditor did not go on from its own transcript');
  assert.match(toolResults(reqs[2]).l1, /ch_1/);
  assert.equal(reqs[3].body.model, 'tech-model');
  assert.equal(toolResults(reqs[3]).a1, 'Two charges: one is a retry.');
});

test('responses: a call inside a sub-agent pauses the response; previous_response_id resumes the sub-agent', async () => {
  await askAuditor();
  const oa = client();
  const r = await oa.responses.create({ model: 'tech', input: 'my app charged me twice', metadata: gate });
  assert.equal(r.status, 'incomplete');
  assert.deepEqual(r.incomplete_details, { reason: 'approval_required' });
  const [a] = JSON.parse(r.metadata.approvals);
  checkApproval(a, 'lookup_charges', {}, 'auditor');

  await fake.script({ text: 'Two charges: one is a retry.' }, { text: 'A retry charged you twice.' });
  const done = await oa.responses.create({
    model: 'tech', previous_response_id: r.id, metadata: gate,
    approvals: [{ id: a.id, approve: true }],
  });
  assert.equal(done.status, 'completed');
  assert.equal(done.output_text, 'A retry charged you twice.');
  assert.deepEqual(await tools.calls(), [{ path: '/charges', body: '{}' }]);
});
