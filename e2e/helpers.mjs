// Shared plumbing of the e2e suite: where run.sh started things, the fake
// upstream's control API, the tools server's call log, and an openai client
// pointed at the gateway.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { appendFileSync } from 'node:fs';
import { basename } from 'node:path';
import OpenAI from 'openai';

function need(name) {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: run the suite with e2e/run.sh`);
  return v.replace(/\/+$/, '');
}

/** GATEWAY is the gateway's base URL (no /v1). */
export const GATEWAY = need('GATEWAY_URL');
const FAKE = need('FAKE_URL');
const TOOLS = need('TOOLS_URL');

/**
 * With E2E_REPLIES set (run.sh sets it), every answer of the gateway that
 * the suite reads whole, whoever fetched it (the openai client, a raw
 * fetch), is appended to that file as one JSON line; the Go suite then has
 * OpenAI's published schema judge each one (goclient/node_test.go). A body
 * the client cut short (an aborted stream) is not recorded.
 */
const REPLIES = process.env.E2E_REPLIES;
if (REPLIES) {
  const plainFetch = globalThis.fetch;
  const file = basename(process.argv[1] ?? '');
  globalThis.fetch = async function judgedFetch(input, init) {
    const res = await plainFetch(input, init);
    const url = new URL(input instanceof Request ? input.url : String(input));
    if (!url.href.startsWith(GATEWAY + '/v1/') || !res.body) return res;
    const method = (init?.method ?? (input instanceof Request ? input.method : 'GET')).toUpperCase();
    const [mine, theirs] = res.body.tee();
    new Response(mine).text().then(
      (body) => appendFileSync(REPLIES, JSON.stringify({
        test: file, method, path: url.pathname + url.search, status: res.status, contentType: res.headers.get('content-type') ?? '', body,
      }) + '\n'),
      () => {}, // cut short by the client
    );
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

async function control(base, method, path, body) {
  const res = await fetch(base + path, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${base}${path}: ${res.status} ${text}`);
  return JSON.parse(text);
}

/** fake drives the scripted fake upstream that serves every agent's model. */
export const fake = {
  reset: () => control(FAKE, 'POST', '/_control/reset'),
  /** script appends replies: {text, tool_calls: [{id, name, arguments}], usage, stream_chunks, chunk_delay_ms, together (the whole stream in one write), hang, ...}. */
  script: (...replies) => control(FAKE, 'POST', '/_control/script', replies),
  /** requests lists what the upstream received: [{path, body, headers, canceled}]. */
  requests: () => control(FAKE, 'GET', '/_control/requests'),
  /** waitFor polls requests until pred holds or timeoutMs passes, and returns the last list. */
  async waitFor(pred, timeoutMs = 3000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const reqs = await fake.requests();
      if (pred(reqs) || Date.now() > deadline) return reqs;
      await new Promise((r) => setTimeout(r, 20));
    }
  },
};

/** tools reads and resets the call log of the desk's HTTP tools. */
export const tools = {
  reset: () => control(TOOLS, 'POST', '/_reset'),
  calls: () => control(TOOLS, 'GET', '/_calls'),
  gates: () => control(TOOLS, 'GET', '/_gates'),
};

/** reset forgets the upstream script, the recorded requests and tool calls. */
export async function reset() {
  await Promise.all([fake.reset(), tools.reset()]);
}

/**
 * recordingFetch is a fetch for the openai client that keeps a copy of each
 * raw response body, so a test can check the wire (e.g. the SSE [DONE]).
 */
export function recordingFetch() {
  const responses = [];
  async function recFetch(url, init) {
    const res = await fetch(url, init);
    if (!res.body) {
      responses.push({ url: String(url), status: res.status, text: Promise.resolve('') });
      return res;
    }
    const [mine, theirs] = res.body.tee();
    // Read eagerly, so that the branch the client reads never stalls; a
    // broken body must not become an unhandled rejection.
    const text = new Response(mine).text().catch((err) => `<<body failed: ${err}>>`);
    responses.push({ url: String(url), status: res.status, text });
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  }
  return { fetch: recFetch, responses };
}

/** client is an official openai client for the gateway; no retries, so every failure shows. */
export function client(options = {}) {
  return new OpenAI({ baseURL: `${GATEWAY}/v1`, apiKey: 'x', maxRetries: 0, timeout: 10_000, ...options });
}

/** sessionId is unique per run, so a Redis store never carries state over. */
export function sessionId(name) {
  return `e2e-${name}-${randomUUID().slice(0, 8)}`;
}

/** user is a one-user-message request for the support graph. */
export function user(text, extra = {}) {
  return { model: 'support', messages: [{ role: 'user', content: text }], ...extra };
}

/** systemPrompt is a recorded upstream request's leading system message. */
export function systemPrompt(req) {
  const first = req.body.messages?.[0];
  assert.equal(first?.role, 'system', `upstream request does not start with a system message: ${JSON.stringify(req.body)}`);
  return first.content;
}

/** toolNames lists the tools a recorded upstream request offered. */
export function toolNames(req) {
  return (req.body.tools ?? []).map((t) => t.function.name);
}

/** toolResults maps tool_call_id to content in a recorded upstream request. */
export function toolResults(req) {
  return Object.fromEntries(req.body.messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id, m.content]));
}

/** assertWellFormed checks CONTRACT 4.5 on every recorded request: system first only, no orphan tool result. */
export function assertWellFormed(reqs) {
  reqs.forEach((r, i) => {
    const calls = new Set();
    r.body.messages.forEach((m, j) => {
      if (j > 0) assert.ok(m.role !== 'system' && m.role !== 'developer', `upstream request ${i}: ${m.role} message at position ${j}`);
      for (const c of m.tool_calls ?? []) calls.add(c.id);
      if (m.role === 'tool') assert.ok(calls.has(m.tool_call_id), `upstream request ${i}: tool result ${m.tool_call_id} without its call`);
    });
  });
}

/** collect reads a chat completion stream to its end, returning every chunk. */
export async function collect(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

/** text joins the content deltas of chunks. */
export function text(chunks) {
  return chunks.map((c) => c.choices?.[0]?.delta?.content ?? '').join('');
}

/** toolCallsOf assembles streamed tool call deltas by index. */
export function toolCallsOf(chunks) {
  const calls = [];
  for (const c of chunks) {
    for (const d of c.choices?.[0]?.delta?.tool_calls ?? []) {
      const call = (calls[d.index] ??= { id: '', type: 'function', function: { name: '', arguments: '' } });
      if (d.id) call.id = d.id;
      if (d.function?.name) call.function.name += d.function.name;
      if (d.function?.arguments) call.function.arguments += d.function.arguments;
    }
  }
  return calls;
}

/** finishReason is the stream's finish_reason. */
export function finishReason(chunks) {
  return chunks.map((c) => c.choices?.[0]?.finish_reason).find((r) => r) ?? null;
}
