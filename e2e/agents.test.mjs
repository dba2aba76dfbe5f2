// The OpenAI Agents SDK for JS (@openai/agents, pinned in package.json)
// with a graph as its Responses model (docs/http-api.md): the SDK runs its own
// function tool between two requests to the gateway, streamed or not, and
// goes on with previous_response_id. Its traces are not exported (no
// network here).
import { test, beforeEach } from 'node:test';
import assert from 'node:assert/strict';
import { Agent, OpenAIResponsesModel, run, setTracingDisabled, tool } from '@openai/agents';
import { z } from 'zod';

import { fake, reset, client, assertWellFormed } from './helpers.mjs';

setTracingDisabled(true);
beforeEach(reset);

/** frontDesk is an SDK agent whose model is the support graph, with the SDK's own weather tool. */
function frontDesk(calls) {
  const getWeather = tool({
    name: 'get_weather',
    description: 'Current weather in a city',
    parameters: z.object({ city: z.string() }),
    execute: async ({ city }) => {
      calls.push(city);
      return `sunny in ${city}`;
    },
  });
  return new Agent({
    name: 'front desk',
    instructions: 'Answer with the tools you have.',
    model: new OpenAIResponsesModel(client(), 'support'),
    tools: [getWeather],
  });
}

for (const stream of [false, true]) {
  test(`@openai/agents runs a graph as its Responses model, its own tool between turns (stream: ${stream})`, async () => {
    await fake.script(
      { tool_calls: [{ id: 'w1', name: 'get_weather', arguments: { city: 'Oslo' } }] },
      stream ? { stream_chunks: ['Sunny ', 'in Oslo.'] } : { text: 'Sunny in Oslo.' },
      { text: 'You are welcome.' },
    );
    const calls = [];
    const agent = frontDesk(calls);
    let result = await run(agent, 'What is the weather in Oslo?', { stream });
    if (stream) {
      let text = '';
      for await (const ev of result.toTextStream()) text += ev;
      await result.completed;
      assert.equal(text, 'Sunny in Oslo.');
    }
    assert.equal(result.finalOutput, 'Sunny in Oslo.');
    assert.deepEqual(calls, ['Oslo'], 'the SDK did not run its tool once');

    // The next turn goes on from the last response.
    result = await run(agent, 'Thanks!', { previousResponseId: result.lastResponseId });
    assert.equal(result.finalOutput, 'You are welcome.');

    const reqs = await fake.requests();
    assert.equal(reqs.length, 3, `upstream got ${reqs.length} requests`);
    assert.ok(reqs[0].body.tools.some((t) => t.function.name === 'get_weather'), 'the SDK tool was not offered');
    assert.equal(reqs[0].body.messages[0].content.includes('Answer with the tools you have.'), true, 'the agent instructions were not kept');
    const result1 = reqs[1].body.messages.find((m) => m.role === 'tool' && m.tool_call_id === 'w1');
    assert.equal(result1?.content, 'sunny in Oslo');
    const texts = reqs[2].body.messages.filter((m) => m.role === 'user' || (m.role === 'assistant' && m.content)).map((m) => m.content);
    assert.deepEqual(texts, ['What is the weather in Oslo?', 'Sunny in Oslo.', 'Thanks!']);
    assertWellFormed(reqs);
  });
}
