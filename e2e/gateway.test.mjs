// End-to-end tests: the built switchboard binary, driven through the
// official openai Node client, in front of the scripted fake upstream.
// Run them with e2e/run.sh, which starts everything and sets the URLs.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';

import {
  GATEWAY, fake, tools, reset, client, recordingFetch, sessionId, user,
  systemPrompt, toolNames, toolResults, assertWellFormed, collect, text, toolCallsOf, finishReason,
} from './helpers.mjs';

const NOTE = '[routing note - not from the user]';

const weatherTool = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
};

beforeEach(reset);

test('models.list lists the graphs; retrieve of an unknown one is NotFoundError', async () => {
  const oa = client();
  const models = [];
  for await (const m of oa.models.list()) models.push(m);
  assert.deepEqual(models.map((m) => m.id).sort(), ['support', 'tech']);
  for (const m of models) {
    assert.equal(m.object, 'model');
    assert.equal(m.owned_by, 'switchboard');
  }

  const support = await oa.models.retrieve('support');
  assert.equal(support.id, 'support');
  assert.equal(support.owned_by, 'switchboard');

  await assert.rejects(oa.models.retrieve('no-such-graph'), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError, `want NotFoundError, got ${err?.constructor?.name}: ${err}`);
    assert.equal(err.status, 404);
    assert.equal(err.code, 'model_not_found');
    return true;
  });
});

test('a chat with an unknown model is NotFoundError model_not_found', async () => {
  await assert.rejects(client().chat.completions.create({ ...user('hi'), model: 'no-such-graph' }), (err) => {
    assert.ok(err instanceof OpenAI.NotFoundError, `want NotFoundError, got ${err}`);
    assert.equal(err.code, 'model_not_found');
    return true;
  });
  assert.deepEqual(await fake.requests(), [], 'the upstream was called for an unknown model');
});

test('non-streaming handoff triage -> billing, with billing running its HTTP tool', async () => {
  await fake.script(
    { tool_calls: [{ id: 'call_1', name: 'transfer_to_billing', arguments: { reason: 'duplicate charge' } }] },
    { tool_calls: [{ id: 'call_2', name: 'lookup_charges', arguments: {} }] },
    { text: 'You were charged twice; one charge is refunded.' },
  );
  const { data: c, response } = await client().chat.completions.create(user('I was charged twice')).withResponse();

  assert.equal(c.object, 'chat.completion');
  assert.equal(c.model, 'support');
  assert.equal(c.choices[0].message.role, 'assistant');
  assert.equal(c.choices[0].message.content, 'You were charged twice; one charge is refunded.');
  assert.equal(c.choices[0].finish_reason, 'stop');
  assert.equal(c.metadata?.agentName, 'billing', `metadata: ${JSON.stringify(c.metadata)}`);
  assert.equal(response.headers.get('x-agent-name'), 'billing');
  // Three upstream calls at the fake's default usage (10 prompt, 5 completion).
  assert.deepEqual(
    { p: c.usage.prompt_tokens, c: c.usage.completion_tokens, t: c.usage.total_tokens },
    { p: 30, c: 15, t: 45 },
  );

  const reqs = await fake.requests();
  assert.equal(reqs.length, 3, `upstream got ${reqs.length} requests`);
  const [triage, billing, billingAfterTool] = reqs;
  assert.equal(triage.body.model, 'triage-model');
  assert.equal(systemPrompt(triage), 'You are the triage desk.');
  assert.deepEqual(toolNames(triage), ['transfer_to_billing', 'transfer_to_tech-support', 'escalate_refund']);

  assert.equal(billing.body.model, 'billing-model');
  assert.equal(systemPrompt(billing), `You are the billing desk.\n\n${NOTE} handoff triage -> billing: reason="duplicate charge"`);
  assert.deepEqual(toolNames(billing), ['lookup_charges', 'transfer_to_triage']);
  assert.equal(toolResults(billing).call_1, '{"assistant": "billing"}');

  // lookup_charges ran once on the tools server, and its body went back to billing.
  assert.deepEqual(await tools.calls(), [{ path: '/charges', body: '{}' }]);
  assert.deepEqual(JSON.parse(toolResults(billingAfterTool).call_2), { charges: [{ id: 'ch_1', amount: 4200 }, { id: 'ch_2', amount: 4200 }] });
  assertWellFormed(reqs);
});

test('escalate_refund: arguments are checked against the orderId schema', async () => {
  await fake.script(
    { tool_calls: [{ id: 'r1', name: 'escalate_refund', arguments: { reason: 'no order id' } }] },
    { tool_calls: [{ id: 'r2', name: 'escalate_refund', arguments: { orderId: 'A-1001' } }] },
    { text: 'Refund for A-1001 confirmed.' },
  );
  const c = await client().chat.completions.create(user('I want my money back'));
  assert.equal(c.choices[0].message.content, 'Refund for A-1001 confirmed.');
  assert.equal(c.metadata?.agentName, 'refunds');

  const reqs = await fake.requests();
  assert.equal(reqs.length, 3);
  // The first call broke the schema: triage is told so and goes on.
  assert.equal(reqs[1].body.model, 'triage-model');
  assert.equal(JSON.parse(toolResults(reqs[1]).r1).error?.code, 'invalid_args', toolResults(reqs[1]).r1);
  // The second went through, with the order in the routing note; remove_tool_calls hid the calls.
  assert.equal(reqs[2].body.model, 'refunds-model');
  assert.equal(systemPrompt(reqs[2]), `You are the refunds desk.\n\n${NOTE} handoff triage -> refunds: orderId="A-1001"`);
  assert.deepEqual(toolResults(reqs[2]), {}, 'remove_tool_calls left tool results for refunds');
  assertWellFormed(reqs);
});

test('a bad JSON body is 400 invalid_request in the OpenAI error shape', async () => {
  const res = await fetch(`${GATEWAY}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: '{"model": "support", "messages": [',
  });
  assert.equal(res.status, 400);
  assert.match(res.headers.get('content-type') ?? '', /application\/json/);
  const body = await res.json();
  assert.equal(typeof body.error?.message, 'string', JSON.stringify(body));
  assert.ok(body.error.message.length > 0);
  assert.equal(typeof body.error.type, 'string');
  assert.ok('param' in body.error, `no param in ${JSON.stringify(body)}`);
  assert.equal(body.error.code, 'invalid_request');
  assert.deepEqual(await fake.requests(), [], 'a bad request reached the upstream');
});

// Under load a provider's chunks reach the gateway several to a read; the
// gateway then writes them together (runtime.StreamPauser), and a client
// must still read every chunk, whole and in order.
test('a stream whose upstream chunks come in one read: every chunk, in order, with its agent', async () => {
  await fake.script({ stream_chunks: ['One ', 'read, ', 'four ', 'chunks.'], together: true, usage: { prompt_tokens: 5, completion_tokens: 4 } });
  const rec = recordingFetch();
  const stream = await client({ fetch: rec.fetch }).chat.completions
    .create(user('hi', { model: 'tech', stream: true, stream_options: { include_usage: true } }));
  const chunks = await collect(stream);
  const deltas = chunks.map((c) => c.choices?.[0]?.delta?.content).filter(Boolean);
  assert.deepEqual(deltas, ['One ', 'read, ', 'four ', 'chunks.']);
  for (const [i, c] of chunks.entries()) {
    assert.equal(c.object, 'chat.completion.chunk', `chunk ${i}`);
    assert.equal(c.metadata?.agentName, 'tech-support', `chunk ${i}: ${JSON.stringify(c)}`);
  }
  assert.equal(finishReason(chunks), 'stop');
  assert.equal(chunks.at(-1).usage?.total_tokens, 9);
  const raw = await rec.responses.at(-1).text;
  assert.ok(raw.endsWith('data: [DONE]\n\n'), `the stream does not end with [DONE]:\n${raw.slice(-300)}`);
});

test('streaming handoff: text, handoff chunk, agent names, summed usage, [DONE]', async () => {
  await fake.script(
    { tool_calls: [{ id: 'call_s1', name: 'transfer_to_billing', arguments: { reason: 'double charge' } }], usage: { prompt_tokens: 11, completion_tokens: 7 } },
    { stream_chunks: ['Your ', 'refund ', 'is on ', 'its way.'], usage: { prompt_tokens: 13, completion_tokens: 9 } },
  );
  const rec = recordingFetch();
  const { data: stream, response } = await client({ fetch: rec.fetch }).chat.completions
    .create(user('I was charged twice', { stream: true, stream_options: { include_usage: true } }))
    .withResponse();
  assert.equal(response.headers.get('x-agent-name'), 'triage', 'a stream names the agent that starts the run');
  const chunks = await collect(stream);

  assert.equal(text(chunks), 'Your refund is on its way.');
  for (const [i, c] of chunks.entries()) {
    assert.equal(c.object, 'chat.completion.chunk', `chunk ${i}`);
    assert.equal(c.model, 'support', `chunk ${i}`);
    assert.ok(c.metadata?.agentName, `chunk ${i} has no metadata.agentName: ${JSON.stringify(c)}`);
  }

  const handoffs = chunks.map((c, i) => [c, i]).filter(([c]) => c.metadata?.event === 'handoff');
  assert.equal(handoffs.length, 1, `want one handoff chunk, got ${handoffs.length}`);
  const [handoff, at] = handoffs[0];
  assert.deepEqual(
    { agentName: handoff.metadata.agentName, from: handoff.metadata.from, to: handoff.metadata.to, toolCallId: handoff.metadata.toolCallId },
    { agentName: 'billing', from: 'triage', to: 'billing', toolCallId: 'call_s1' },
  );
  assert.ok(!handoff.choices?.[0]?.delta?.content, `the handoff chunk carries text: ${JSON.stringify(handoff)}`);

  const contentAt = chunks.map((c, i) => (c.choices?.[0]?.delta?.content ? i : -1)).filter((i) => i >= 0);
  assert.ok(contentAt.length > 0, 'no content chunks');
  assert.ok(contentAt[0] > at, 'billing text came before the handoff chunk');
  assert.equal(chunks[contentAt.at(-1)].metadata.agentName, 'billing');

  assert.equal(finishReason(chunks), 'stop');
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, [], `the last chunk is not the usage chunk: ${JSON.stringify(last)}`);
  assert.deepEqual(
    { p: last.usage?.prompt_tokens, c: last.usage?.completion_tokens, t: last.usage?.total_tokens },
    { p: 24, c: 16, t: 40 },
  );
  const raw = await rec.responses.at(-1).text;
  assert.ok(raw.endsWith('data: [DONE]\n\n'), `the stream does not end with [DONE]:\n${raw.slice(-300)}`);

  // The gateway always asks for usage on streamed upstream calls.
  const reqs = await fake.requests();
  assert.equal(reqs.length, 2);
  for (const r of reqs) {
    assert.equal(r.body.stream, true);
    assert.equal(r.body.stream_options?.include_usage, true);
  }
  assert.equal(systemPrompt(reqs[1]), `You are the billing desk.\n\n${NOTE} handoff triage -> billing: reason="double charge"`);
  assert.equal(toolResults(reqs[1]).call_s1, '{"assistant": "billing"}');
});

test('sessions: the second turn is answered by billing', async () => {
  await fake.script(
    { tool_calls: [{ id: 'c1', name: 'transfer_to_billing', arguments: { reason: 'charge' } }] },
    { text: 'billing: which charge?' },
    { text: 'billing: the May 3 charge is refunded.' },
  );
  const id = sessionId('turns');
  const oa = client({ defaultHeaders: { 'X-Session-Id': id } });

  const { data: first, response } = await oa.chat.completions.create(user('I was charged twice')).withResponse();
  assert.equal(first.metadata?.agentName, 'billing');
  assert.equal(first.metadata?.sessionId, id);
  assert.equal(response.headers.get('x-session-id'), id);

  // Only the new turn: the session holds the rest.
  const second = await oa.chat.completions.create(user('the one on May 3'));
  assert.equal(second.choices[0].message.content, 'billing: the May 3 charge is refunded.');
  assert.equal(second.metadata?.agentName, 'billing');

  const reqs = await fake.requests();
  assert.equal(reqs.length, 3);
  assert.equal(reqs[2].body.model, 'billing-model', 'turn 2 did not go to billing');
  assert.deepEqual(
    reqs[2].body.messages.filter((m) => m.role === 'user').map((m) => m.content),
    ['I was charged twice', 'the one on May 3'],
  );
  assert.ok(systemPrompt(reqs[2]).includes('handoff triage -> billing: reason="charge"'), systemPrompt(reqs[2]));
  assertWellFormed(reqs);

  // The session resource says the same.
  const res = await fetch(`${GATEWAY}/v1/sessions/${id}`);
  assert.equal(res.status, 200);
  const s = await res.json();
  assert.equal(s.id, id);
  assert.equal(s.activeAgent, 'billing');
  assert.deepEqual(s.transcript.filter((m) => m.handoff).map((m) => m.handoff), [{ from: 'triage', to: 'billing' }]);
});

test('client tools round trip, non-streaming: the same agent goes on', async () => {
  await fake.script(
    { tool_calls: [{ id: 'h1', name: 'transfer_to_billing', arguments: { reason: 'weather surcharge' } }] },
    { tool_calls: [{ id: 'w1', name: 'get_weather', arguments: { city: 'Paris' } }] },
    { text: 'Sunny in Paris, so no surcharge.' },
  );
  const id = sessionId('client-tools');
  const oa = client();
  const headers = { 'X-Session-Id': id };
  const messages = [{ role: 'user', content: 'Was I charged a weather surcharge in Paris?' }];

  const first = await oa.chat.completions.create({ model: 'support', messages, tools: [weatherTool] }, { headers });
  assert.equal(first.choices[0].finish_reason, 'tool_calls');
  assert.equal(first.metadata?.agentName, 'billing');
  const calls = first.choices[0].message.tool_calls;
  assert.deepEqual(
    calls?.map((c) => [c.id, c.type, c.function.name, JSON.parse(c.function.arguments)]),
    [['w1', 'function', 'get_weather', { city: 'Paris' }]],
  );

  // The whole history back, with the tool result.
  messages.push(first.choices[0].message, { role: 'tool', tool_call_id: 'w1', content: '{"sky":"sunny","tempC":21}' });
  const second = await oa.chat.completions.create({ model: 'support', messages, tools: [weatherTool] }, { headers });
  assert.equal(second.choices[0].message.content, 'Sunny in Paris, so no surcharge.');
  assert.equal(second.choices[0].finish_reason, 'stop');
  assert.equal(second.metadata?.agentName, 'billing', 'the client tool result went to another agent');

  const reqs = await fake.requests();
  assert.equal(reqs.length, 3);
  assert.ok(toolNames(reqs[1]).includes('get_weather'), `billing was not offered the client tool: ${toolNames(reqs[1])}`);
  assert.equal(reqs[2].body.model, 'billing-model');
  const msgs = reqs[2].body.messages;
  const callAt = msgs.findIndex((m) => m.tool_calls?.some((c) => c.id === 'w1'));
  assert.ok(callAt > 0, 'the get_weather call is missing upstream');
  assert.deepEqual(msgs[callAt + 1], { role: 'tool', tool_call_id: 'w1', content: '{"sky":"sunny","tempC":21}' });
  assert.equal(msgs.filter((m) => m.role === 'user').length, 1, 'the resent history was duplicated');
  assertWellFormed(reqs);
});

test('client tools round trip, streaming: the same agent goes on', async () => {
  await fake.script(
    { tool_calls: [{ id: 'h1', name: 'transfer_to_billing', arguments: {} }] },
    { tool_calls: [{ id: 'w2', name: 'get_weather', arguments: { city: 'Oslo' } }] },
    { stream_chunks: ['Snow ', 'in Oslo.'] },
  );
  const oa = client({ defaultHeaders: { 'X-Session-Id': sessionId('client-tools-stream') } });

  const first = await collect(await oa.chat.completions.create(
    { ...user('Weather in Oslo for my invoice?'), tools: [weatherTool], stream: true },
  ));
  assert.equal(finishReason(first), 'tool_calls');
  assert.deepEqual(
    toolCallsOf(first).map((c) => [c.id, c.function.name, JSON.parse(c.function.arguments || 'null')]),
    [['w2', 'get_weather', { city: 'Oslo' }]],
  );
  assert.equal(first.at(-1).metadata?.agentName, 'billing');

  // Only the new input this time: the tool result.
  const second = await collect(await oa.chat.completions.create({
    model: 'support',
    messages: [{ role: 'tool', tool_call_id: 'w2', content: '{"sky":"snow"}' }],
    tools: [weatherTool],
    stream: true,
  }));
  assert.equal(text(second), 'Snow in Oslo.');
  assert.equal(finishReason(second), 'stop');
  for (const c of second) assert.equal(c.metadata?.agentName, 'billing', JSON.stringify(c));

  const reqs = await fake.requests();
  assert.equal(reqs.length, 3);
  assert.equal(reqs[2].body.model, 'billing-model');
  assert.equal(toolResults(reqs[2]).w2, '{"sky":"snow"}');
  assertWellFormed(reqs);
});

test('a client that aborts mid-stream cancels the upstream call and frees the session', async () => {
  await fake.script(
    { stream_chunks: ['Hel', 'lo ', 'there'], chunk_delay_ms: 5000 },
    { text: 'fresh answer' },
  );
  const oa = client({ defaultHeaders: { 'X-Session-Id': sessionId('abort') } });
  const ac = new AbortController();
  const stream = await oa.chat.completions.create(user('hello', { stream: true }), { signal: ac.signal });
  let seen = '';
  try {
    for await (const chunk of stream) {
      seen += chunk.choices?.[0]?.delta?.content ?? '';
      if (seen) ac.abort();
    }
  } catch (err) {
    // The client ends the iteration quietly on an abort, or raises one.
    if (!(err instanceof OpenAI.APIUserAbortError || err?.name === 'AbortError')) throw err;
  }
  assert.ok(ac.signal.aborted, 'the stream ended before the client aborted it');
  assert.equal(seen, 'Hel', 'want the first chunk only, before the abort');

  const reqs = await fake.waitFor((r) => r[0]?.canceled);
  assert.ok(reqs[0]?.canceled, `the upstream call was not cancelled: ${JSON.stringify(reqs.map((r) => ({ path: r.path, canceled: r.canceled })))}`);

  // The session is free at once, and holds no half-finished answer.
  const next = await oa.chat.completions.create(user('are you there?'));
  assert.equal(next.choices[0].message.content, 'fresh answer');
  assert.equal(next.metadata?.agentName, 'triage');
  const after = (await fake.requests())[1];
  assert.ok(
    !after.body.messages.some((m) => m.role === 'assistant' && String(m.content ?? '').includes('Hel')),
    `a half-finished answer was kept: ${JSON.stringify(after.body.messages)}`,
  );
});

test('a request on a session another run holds is ConflictError session_busy, whose reply names the session', async () => {
  await fake.script({ stream_chunks: ['Hel', 'lo'], chunk_delay_ms: 5000 });
  const id = sessionId('busy');
  const oa = client({ defaultHeaders: { 'X-Session-Id': id } });
  const ac = new AbortController();
  const stream = await oa.chat.completions.create(user('hello', { stream: true }), { signal: ac.signal });
  const chunks = stream[Symbol.asyncIterator]();
  await chunks.next(); // the first run holds the session now
  try {
    // No retries: the client would retry a 409 while the first run holds on.
    await assert.rejects(oa.chat.completions.create(user('again'), { maxRetries: 0 }), (err) => {
      assert.ok(err instanceof OpenAI.ConflictError, `want ConflictError, got ${err}`);
      assert.equal(err.code, 'session_busy');
      assert.equal(err.headers.get('x-session-id'), id);
      return true;
    });
  } finally {
    ac.abort();
    await chunks.return?.();
  }
});

test('requests the gateway refuses before any model call are BadRequestError naming the field', async () => {
  const oa = client();
  const cases = [
    [{ ...user('hi'), tools: [{ type: 'function', function: { name: 'bad name!', parameters: { type: 'object' } } }] }, 'tools[0].function.name'],
    [{ ...user('hi'), response_format: { type: 'yaml' } }, 'response_format.type'],
    [{ ...user('hi'), metadata: { customer: { id: 1 } } }, 'metadata.customer'],
    [{ model: 'support', messages: [{ role: 'user', content: null }] }, 'messages[0].content'],
  ];
  for (const [body, param] of cases) {
    await assert.rejects(oa.chat.completions.create(body), (err) => err instanceof OpenAI.BadRequestError && err.param === param,
      `want BadRequestError with param ${param}`);
  }
  assert.equal((await fake.requests()).length, 0, 'a refused request reached the model');
});
