// End-to-end tests of POST /v1/responses (docs/http-api.md) with the official
// openai client's responses.create, responses.stream, retrieve and delete:
// a client nobody here wrote reads what the gateway sends.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

import { GATEWAY, fake, reset, client, sessionId, assertWellFormed } from './helpers.mjs';

beforeEach(reset);

const weatherTool = {
  type: 'function',
  name: 'get_weather',
  description: 'Current weather in a city',
  parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false },
  strict: true,
};

const handoff = (id) => ({ tool_calls: [{ id, name: 'transfer_to_billing', arguments: { reason: 'double charge' } }] });

/** texts lists the user and assistant texts an upstream request carried. */
function texts(req) {
  return req.body.messages
    .filter((m) => (m.role === 'user' || m.role === 'assistant') && typeof m.content === 'string' && m.content)
    .map((m) => `${m.role}:${m.content}`);
}

test('responses.create: a handoff, output_text, usage and metadata; retrieve returns it', async () => {
  await fake.script(handoff('c1'), { text: 'Billing here: one charge is refunded.' });
  const oa = client();
  const r = await oa.responses.create({ model: 'support', input: 'I was charged twice', metadata: { plan: 'basic' } });
  assert.match(r.id, /^resp_[0-9a-f]{48}$/);
  assert.equal(r.object, 'response');
  assert.equal(r.status, 'completed');
  assert.equal(r.model, 'support');
  assert.equal(r.output_text, 'Billing here: one charge is refunded.');
  assert.deepEqual(r.output.map((o) => o.type), ['message'], 'handoffs are not output items without include');
  assert.equal(r.metadata.agentName, 'billing');
  assert.equal(r.metadata.plan, 'basic');
  assert.match(r.metadata.sessionId, /^sess_/);
  assert.deepEqual(r.usage, {
    input_tokens: 20, output_tokens: 10, total_tokens: 30,
    input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 },
  });

  const again = await oa.responses.retrieve(r.id);
  assert.deepEqual(again, r);
  assertWellFormed(await fake.requests());
});

test('responses.stream: the standard event sequence, final response and output_text', async () => {
  await fake.script(handoff('c1'), { stream_chunks: ['Your ', 'refund ', 'is on its way.'] });
  const stream = client().responses.stream({ model: 'support', input: 'I was charged twice' });
  const types = [];
  const deltas = [];
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') deltas.push(ev.delta);
  }
  const final = await stream.finalResponse();
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  assert.equal(types.at(-1), 'response.completed');
  for (const t of ['response.output_item.added', 'response.content_part.added', 'response.output_text.done',
    'response.content_part.done', 'response.output_item.done']) {
    assert.ok(types.includes(t), `no ${t} in ${types}`);
  }
  assert.equal(deltas.join(''), 'Your refund is on its way.');
  assert.equal(final.status, 'completed');
  assert.equal(final.output_text, 'Your refund is on its way.');
  assert.equal(final.metadata.agentName, 'billing');
});

test('responses.retrieve with stream: true replays a stored response; starting_after and responses.stream({response_id}) resume it', async () => {
  await fake.script(handoff('c1'), { text: 'Your refund is on its way.' });
  const oa = client();
  const r = await oa.responses.create({ model: 'support', input: 'I was charged twice', background: true });
  const events = [];
  for await (const ev of await oa.responses.retrieve(r.id, { stream: true })) events.push(ev);
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  assert.deepEqual(events.map((e) => e.type), ['response.created', 'response.in_progress', 'response.output_item.added',
    'response.content_part.added', 'response.output_text.delta', 'response.output_text.done', 'response.content_part.done',
    'response.output_item.done', 'response.completed']);
  assert.equal(events[4].delta, 'Your refund is on its way.');
  assert.equal(events[4].item_id, r.output[0].id);
  // retrieve adds output_text, which is not part of the response sent.
  const { output_text: _, ...stored } = await oa.responses.retrieve(r.id);
  assert.deepEqual(events.at(-1).response, stored);

  const rest = [];
  for await (const ev of await oa.responses.retrieve(r.id, { stream: true, starting_after: 2 })) rest.push(ev);
  assert.deepEqual(rest, events.slice(3));

  const resumed = oa.responses.stream({ response_id: r.id, starting_after: 4 });
  const types = [];
  for await (const ev of resumed) types.push(ev.type);
  assert.deepEqual(types, events.slice(5).map((e) => e.type));
  const final = await resumed.finalResponse();
  assert.equal(final.output_text, 'Your refund is on its way.');
  assert.equal(final.id, r.id);

  // A streamed response is replayed as its stream numbered it: a client
  // that lost the stream's end goes on from the last event it read.
  await fake.script(handoff('c2'), { stream_chunks: ['One ', 'charge ', 'is ', 'refunded.'] });
  const live = [];
  const s = oa.responses.stream({ model: 'support', input: 'I was charged twice' });
  for await (const ev of s) live.push(ev);
  const id = (await s.finalResponse()).id;
  const lastRead = live.findIndex((e) => e.type === 'response.output_text.delta') + 1;
  const goOn = oa.responses.stream({ response_id: id, starting_after: lastRead });
  const more = [];
  for await (const ev of goOn) more.push(ev);
  assert.deepEqual(more.map((e) => [e.sequence_number, e.type, e.delta]), live.slice(lastRead + 1).map((e) => [e.sequence_number, e.type, e.delta]));
  assert.equal((await goOn.finalResponse()).output_text, 'One charge is refunded.');
});

// Chunks the gateway read together leave together (runtime.StreamPauser):
// the official client still reads every event, numbered in order.
test('a stream whose upstream chunks come in one read: every delta and event, numbered in order', async () => {
  await fake.script({ stream_chunks: ['One ', 'read, ', 'four ', 'chunks.'], together: true });
  const s = client().responses.stream({ model: 'tech', input: 'hi' });
  const events = [];
  for await (const ev of s) events.push(ev);
  assert.deepEqual(events.map((e) => e.sequence_number), events.map((_, i) => i));
  assert.deepEqual(events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta), ['One ', 'read, ', 'four ', 'chunks.']);
  const final = await s.finalResponse();
  assert.equal(final.output_text, 'One read, four chunks.');
  assert.equal(final.metadata.agentName, 'tech-support');
});

test('previous_response_id continues the session from the latest response and forks from an older one', async () => {
  await fake.script(
    handoff('c1'), { text: 'Billing here.' },
    { text: 'The invoice is on its way.' },
    { text: 'A refund, then.' },
  );
  const oa = client();
  const r1 = await oa.responses.create({ model: 'support', input: 'I was charged twice' });
  const r2 = await oa.responses.create({ model: 'support', input: 'and the invoice?', previous_response_id: r1.id });
  assert.equal(r2.metadata.sessionId, r1.metadata.sessionId, 'the latest response did not continue its session');
  assert.equal(r2.metadata.agentName, 'billing');
  assert.equal(r2.previous_response_id, r1.id);

  const before = await (await fetch(`${GATEWAY}/v1/sessions/${r1.metadata.sessionId}`)).json();
  const r3 = await oa.responses.create({ model: 'support', input: 'refund me instead', previous_response_id: r1.id });
  assert.notEqual(r3.metadata.sessionId, r1.metadata.sessionId, 'an older response did not fork');
  assert.equal(r3.output_text, 'A refund, then.');
  const after = await (await fetch(`${GATEWAY}/v1/sessions/${r1.metadata.sessionId}`)).json();
  assert.deepEqual(after, before, 'the fork changed the original session');

  const reqs = await fake.requests();
  assert.deepEqual(texts(reqs[2]), ['user:I was charged twice', 'assistant:Billing here.', 'user:and the invoice?']);
  assert.deepEqual(texts(reqs[3]), ['user:I was charged twice', 'assistant:Billing here.', 'user:refund me instead']);
  assertWellFormed(reqs);
});

test('client tools: a function_call item, then function_call_output with previous_response_id', async () => {
  await fake.script(
    { tool_calls: [{ id: 'w1', name: 'get_weather', arguments: { city: 'Oslo' } }] },
    { text: 'Sunny in Oslo.' },
  );
  const oa = client();
  const stream = oa.responses.stream({ model: 'support', input: 'weather in Oslo?', tools: [weatherTool] });
  const final = await stream.finalResponse();
  assert.equal(final.output.length, 1);
  const call = final.output[0];
  assert.equal(call.type, 'function_call');
  assert.equal(call.name, 'get_weather');
  assert.equal(call.call_id, 'w1');
  assert.deepEqual(JSON.parse(call.arguments), { city: 'Oslo' });
  assert.equal(call.status, 'completed');

  const r2 = await oa.responses.create({
    model: 'support', previous_response_id: final.id, tools: [weatherTool],
    input: [{ type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ sky: 'sunny' }) }],
  });
  assert.equal(r2.output_text, 'Sunny in Oslo.');
  const reqs = await fake.requests();
  assert.deepEqual(reqs[0].body.tools.map((t) => t.function.name).at(-1), 'get_weather');
  assert.equal(reqs[0].body.tools.at(-1).function.strict, true, "the client tool's strict reaches the provider");
  const result = reqs[1].body.messages.find((m) => m.role === 'tool');
  assert.deepEqual({ id: result.tool_call_id, content: result.content }, { id: 'w1', content: '{"sky":"sunny"}' });
  assertWellFormed(reqs);
});

test('a function_call_output that answers no call is BadRequestError (param input), and the model is not asked', async () => {
  await fake.script({ text: 'first' }, { text: 'never' });
  const oa = client();
  const r = await oa.responses.create({ model: 'support', input: 'hello' });
  await assert.rejects(
    oa.responses.create({
      model: 'support', previous_response_id: r.id,
      input: [{ type: 'function_call_output', call_id: 'call_zzz', output: 'a' }],
    }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'input' && /call_zzz/.test(err.message),
  );
  assert.equal((await fake.requests()).length, 1);
});

test("tool_choice 'none' is held on a model that calls a tool anyway: the call is dropped", async () => {
  await fake.script({ text: 'No tools, then.', tool_calls: [{ id: 'w1', name: 'get_weather', arguments: { city: 'Oslo' } }] });
  const r = await client().responses.create({ model: 'support', input: 'weather?', tools: [weatherTool], tool_choice: 'none' });
  assert.deepEqual(r.output.map((o) => o.type), ['message']);
  assert.equal(r.output_text, 'No tools, then.');
  assert.equal(r.status, 'completed');
});

test('include switchboard:handoffs: handoff items and switchboard:handoff events, opt-in', async () => {
  await fake.script(handoff('c1'), { text: 'a' }, handoff('c2'), { stream_chunks: ['b'] });
  const oa = client();
  const r = await oa.responses.create({ model: 'support', input: 'x', include: ['switchboard:handoffs'] });
  assert.deepEqual(r.output.map((o) => o.type), ['switchboard:handoff', 'message']);
  assert.deepEqual({ from: r.output[0].from, to: r.output[0].to, status: r.output[0].status }, { from: 'triage', to: 'billing', status: 'completed' });

  // The raw stream (responses.stream() refuses event types it does not know).
  const events = await oa.responses.create({ model: 'support', input: 'x', include: ['switchboard:handoffs'], stream: true });
  const seen = [];
  for await (const ev of events) seen.push(ev);
  const h = seen.find((e) => e.type === 'switchboard:handoff');
  assert.deepEqual({ from: h.from, to: h.to, toolCallId: h.toolCallId }, { from: 'triage', to: 'billing', toolCallId: 'c2' });
  seen.forEach((e, i) => assert.equal(e.sequence_number, i));
  assert.equal(seen.at(-1).response.output[0].type, 'switchboard:handoff');
});

test('responses.inputItems.list: each response lists its own input, newest first, and the client pages through it', async () => {
  await fake.script({ text: 'one' }, { text: 'two' });
  const oa = client();
  const r1 = await oa.responses.create({ model: 'support', input: 'hi' });
  const r2 = await oa.responses.create({
    model: 'support', previous_response_id: r1.id,
    input: [
      { role: 'developer', content: 'Be brief.' },
      { role: 'user', content: 'first' },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'second' }] },
    ],
  });
  const one = await oa.responses.inputItems.list(r1.id);
  assert.equal(one.data.length, 1);
  assert.equal(one.data[0].type, 'message');
  assert.equal(one.data[0].role, 'user');
  assert.deepEqual(one.data[0].content, [{ type: 'input_text', text: 'hi' }]);
  const text = (it) => `${it.role}:${it.content[0].text}`;
  const newest = await oa.responses.inputItems.list(r2.id);
  assert.deepEqual(newest.data.map(text), ['user:second', 'user:first', 'developer:Be brief.']);
  // One item a page: the client follows has_more with after = the last id.
  const paged = [];
  for await (const it of oa.responses.inputItems.list(r2.id, { limit: 1, order: 'asc' })) paged.push(text(it));
  assert.deepEqual(paged, ['developer:Be brief.', 'user:first', 'user:second']);
  await oa.responses.delete(r2.id);
  await assert.rejects(oa.responses.inputItems.list(r2.id), (err) => err instanceof OpenAI.NotFoundError && err.code === 'response_not_found');
});

test('responses.cancel of a stored response is BadRequestError: every response has ended when it is stored', async () => {
  await fake.script({ text: 'hello' });
  const oa = client();
  const r = await oa.responses.create({ model: 'support', input: 'hi', background: true });
  assert.equal(r.status, 'completed');
  await assert.rejects(oa.responses.cancel(r.id), (err) => {
    assert.ok(err instanceof OpenAI.BadRequestError, `want BadRequestError, got ${err}`);
    assert.equal(err.code, 'invalid_request');
    return true;
  });
  assert.equal((await oa.responses.retrieve(r.id)).status, 'completed');
});

test('delete forgets a response (its session stays); unknown ids are NotFoundError response_not_found', async () => {
  await fake.script({ text: 'hello' });
  const oa = client();
  const r = await oa.responses.create({ model: 'support', input: 'hi' });
  await oa.responses.delete(r.id);
  // One request at a time: a promise made before its assert.rejects is
  // awaited would reject unhandled, and node:test fails the test for it.
  for (const call of [
    () => oa.responses.retrieve(r.id),
    () => oa.responses.create({ model: 'support', input: 'again', previous_response_id: r.id }),
  ]) {
    await assert.rejects(call(), (err) => {
      assert.ok(err instanceof OpenAI.NotFoundError, `want NotFoundError, got ${err}`);
      assert.equal(err.code, 'response_not_found');
      return true;
    });
  }
  assert.equal((await fetch(`${GATEWAY}/v1/sessions/${r.metadata.sessionId}`)).status, 200);
});

test('a session header that names another session than previous_response_id is BadRequestError', async () => {
  await fake.script({ text: 'one' });
  const oa = client();
  const id = sessionId('responses');
  const r = await oa.responses.create({ model: 'support', input: 'hi' }, { headers: { 'X-Session-Id': id } });
  assert.equal(r.metadata.sessionId, id);
  await assert.rejects(
    oa.responses.create({ model: 'support', input: 'x', previous_response_id: r.id }, { headers: { 'X-Session-Id': `${id}-other` } }),
    (err) => err instanceof OpenAI.BadRequestError && err.code === 'invalid_request',
  );
});

test('store: false keeps nothing', async () => {
  await fake.script({ text: 'not kept' });
  const oa = client();
  const r = await oa.responses.create({ model: 'support', input: 'hi', store: false });
  assert.equal(r.store, false);
  assert.equal(r.metadata.sessionId, '');
  await assert.rejects(oa.responses.retrieve(r.id), OpenAI.NotFoundError);
});

test('CompatCanary 0.2.2, modern profile (chat and Responses probes): every probe passes', { timeout: 60_000 }, async () => {
  const home = new URL('./node_modules/compatcanary/', import.meta.url);
  const pkg = JSON.parse(readFileSync(new URL('package.json', home), 'utf8'));
  assert.equal(pkg.version, '0.2.2');
  // Each probe's answer, in CompatCanary's order (models.list makes no model call).
  await fake.script(
    { text: 'CANARY_OK' }, // chat.basic
    { stream_chunks: ['CANARY', '_OK'] }, // chat.streaming
    { tool_calls: [{ id: 'call_canary', name: 'compatcanary_echo', arguments: { value: 'CANARY_OK' } }] }, // chat.tool_call
    { text: '{"status":"ok"}' }, // chat.structured_output
    { text: 'CANARY_OK' }, // responses.basic
    { stream_chunks: ['CANARY', '_OK'] }, // responses.streaming
  );
  const env = { ...process.env };
  for (const k of ['OPENAI_BASE_URL', 'OPENAI_MODEL', 'OPENAI_API_KEY', 'COMPATCANARY_PROFILE']) delete env[k];
  const args = ['scan', '--base-url', `${GATEWAY}/v1`, '--model', 'support', '--profile', 'modern',
    '--format', 'json', '--fail-on', 'any', '--timeout', '20'];
  const { code, stdout, stderr } = await new Promise((resolve) => {
    execFile(process.execPath, [fileURLToPath(new URL(pkg.bin.compatcanary, home)), ...args], { env, timeout: 50_000 },
      (err, out, errOut) => resolve({ code: err ? (err.code ?? 1) : 0, stdout: out, stderr: errOut }));
  });
  let report;
  try {
    report = JSON.parse(stdout);
  } catch {
    assert.fail(`CompatCanary exited ${code} without a JSON report:\n${stdout}\n${stderr}`);
  }
  assert.deepEqual(
    report.results.map((r) => [r.id, r.status, r.status === 'pass' ? '' : r.summary]),
    [
      ['models.list', 'pass', ''], ['chat.basic', 'pass', ''], ['chat.streaming', 'pass', ''],
      ['chat.tool_call', 'pass', ''], ['chat.structured_output', 'pass', ''],
      ['responses.basic', 'pass', ''], ['responses.streaming', 'pass', ''],
    ],
  );
  assert.equal(report.compatible, true);
  assert.equal(code, 0, `exit ${code}: ${stderr}`);
  const reqs = await fake.requests();
  assert.equal(reqs.length, 6, `upstream got ${reqs.length} requests`);
  assert.equal(reqs[5].body.stream, true, 'responses.streaming did not stream from the provider');
});

test('each model turn that says something is a message item of its own, streamed or not', async () => {
  const turns = () => fake.script(
    handoff('h1'),
    { text: 'Let me check.', tool_calls: [{ id: 'l1', name: 'lookup_charges', arguments: {} }] },
    { text: 'You have two charges.' },
  );
  const messages = (r) => r.output.filter((i) => i.type === 'message').map((m) => m.content.map((p) => p.text).join(''));
  const oa = client();
  await turns();
  const plain = await oa.responses.create({ model: 'support', input: 'charged twice' });
  assert.deepEqual(messages(plain), ['Let me check.', 'You have two charges.']);
  await turns();
  const final = await oa.responses.stream({ model: 'support', input: 'charged twice' }).finalResponse();
  assert.deepEqual(messages(final), ['Let me check.', 'You have two charges.']);
  assert.equal(final.output_text, plain.output_text);
});

test('a function_call_output for some of the calls but not all is BadRequestError (param input), and the model is not asked', async () => {
  await fake.script({ tool_calls: [
    { id: 'w1', name: 'get_weather', arguments: { city: 'Oslo' } },
    { id: 'w2', name: 'get_weather', arguments: { city: 'Rome' } },
  ] });
  const oa = client();
  const r = await oa.responses.create({ model: 'support', input: 'weather twice', tools: [weatherTool] });
  await assert.rejects(
    oa.responses.create({
      model: 'support', previous_response_id: r.id, tools: [weatherTool],
      input: [{ type: 'function_call_output', call_id: 'w1', output: 'sunny' }],
    }),
    (err) => err instanceof OpenAI.BadRequestError && err.param === 'input' && /w2/.test(err.message),
  );
  assert.equal((await fake.requests()).length, 1);
});
