// CompatCanary (npm compatcanary, pinned in package.json), a third-party
// scanner of "OpenAI-compatible" APIs, runs its chat profile against the
// built gateway, with the fake upstream scripted to answer what each probe
// asks. Every probe must pass (--fail-on any), and what the probes asked
// for must have reached the provider.
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { GATEWAY, fake, reset } from './helpers.mjs';

// The package exports only its library; its CLI is run from where npm put it.
const home = new URL('./node_modules/compatcanary/', import.meta.url);
const pkg = JSON.parse(readFileSync(new URL('package.json', home), 'utf8'));
const cli = fileURLToPath(new URL(pkg.bin.compatcanary, home));

beforeEach(reset);

/** scan runs the CompatCanary CLI and returns its exit code and JSON report. */
function scan(args) {
  return new Promise((resolve) => {
    const env = { ...process.env };
    for (const k of ['OPENAI_BASE_URL', 'OPENAI_MODEL', 'OPENAI_API_KEY', 'COMPATCANARY_PROFILE']) delete env[k];
    execFile(process.execPath, [cli, 'scan', ...args], { env, timeout: 50_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr });
    });
  });
}

test('CompatCanary 0.2.2, chat profile: every probe passes', { timeout: 60_000 }, async () => {
  assert.equal(pkg.version, '0.2.2');
  // The chat profile's probes, in CompatCanary's order (models.list makes
  // no model call): each reply is what that probe asks the model for.
  await fake.script(
    { text: 'CANARY_OK' }, // chat.basic: "Reply briefly with CANARY_OK."
    { stream_chunks: ['CANARY', '_OK'] }, // chat.streaming
    { tool_calls: [{ id: 'call_canary', name: 'compatcanary_echo', arguments: { value: 'CANARY_OK' } }] }, // chat.tool_call
    { text: '{"status":"ok"}' }, // chat.structured_output, a strict json_schema
  );
  const { code, stdout, stderr } = await scan([
    '--base-url', `${GATEWAY}/v1`, '--model', 'support', '--profile', 'chat',
    '--format', 'json', '--fail-on', 'any', '--timeout', '20',
  ]);
  let report;
  try {
    report = JSON.parse(stdout);
  } catch {
    assert.fail(`CompatCanary exited ${code} without a JSON report:\n${stdout}\n${stderr}`);
  }
  assert.deepEqual(
    report.results.map((r) => [r.id, r.status, r.status === 'pass' ? '' : r.summary]),
    [
      ['models.list', 'pass', ''],
      ['chat.basic', 'pass', ''],
      ['chat.streaming', 'pass', ''],
      ['chat.tool_call', 'pass', ''],
      ['chat.structured_output', 'pass', ''],
    ],
  );
  assert.equal(report.compatible, true);
  assert.equal(report.score, 100);
  assert.equal(code, 0, `exit ${code}: ${stderr}`);

  // What the probes asked for reached the provider: a stream, the forced
  // client tool (strict), the strict JSON schema.
  const reqs = await fake.requests();
  assert.equal(reqs.length, 4, `upstream got ${reqs.length} requests`);
  assert.equal(reqs[1].body.stream, true);
  const echo = reqs[2].body.tools?.find((t) => t.function.name === 'compatcanary_echo');
  assert.ok(echo, `the client tool was not offered: ${JSON.stringify(reqs[2].body.tools)}`);
  assert.equal(echo.function.strict, true);
  assert.deepEqual(reqs[2].body.tool_choice, { type: 'function', function: { name: 'compatcanary_echo' } });
  assert.equal(reqs[3].body.response_format?.type, 'json_schema');
  assert.equal(reqs[3].body.response_format?.json_schema?.name, 'compatcanary_status');
});
