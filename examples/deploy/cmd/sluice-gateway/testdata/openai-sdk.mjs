// A client no one here wrote: the official OpenAI SDK for Node, against a
// running sluice-gateway whose band has one waiting place in front of one
// request in flight (-max-inflight 1, maxRequests 1).
//
//   node openai-sdk.mjs http://127.0.0.1:8080/v1
//
// The openai package is loaded from $SLUICE_OPENAI_NODE_MODULES when set
// (a node_modules directory), else from a node_modules beside this file or
// above it. It checks that a completion and a streamed completion succeed
// and carry x-llm-d-flow-band-headroom-requests, read through the SDK's raw
// response, and that a request refused by the saturated band reaches the SDK
// as a RateLimitError whose message names the dropped reason. It exits
// non-zero on any failure.

import { createRequire } from 'node:module';
import path from 'node:path';

const modules = process.env.SLUICE_OPENAI_NODE_MODULES;
const require = createRequire(modules ? path.join(path.resolve(modules), '..', 'resolve-from-here.js') : import.meta.url);
const OpenAI = require('openai');

const base = process.argv[2];
if (!base) {
  console.error('usage: node openai-sdk.mjs BASE_URL (such as http://127.0.0.1:8080/v1)');
  process.exit(2);
}
// Never hang: the Go test bounds the run too, but say why here.
setTimeout(() => {
  console.error('FAIL: still running after 40s');
  process.exit(1);
}, 40_000).unref();

const HEADROOM = 'x-llm-d-flow-band-headroom-requests';
const DROPPED = 'x-llm-d-request-dropped-reason';
// No retries: a 429 must reach this script, not be retried away.
const client = new OpenAI({ baseURL: base, apiKey: 'not-checked', maxRetries: 0, timeout: 30_000 });
const messages = [{ role: 'user', content: 'Say hello through the gateway.' }];

let failures = 0;
function check(ok, what) {
  if (ok) {
    console.log(`ok   ${what}`);
  } else {
    console.log(`FAIL ${what}`);
    failures++;
  }
}

function isCount(v) {
  return typeof v === 'string' && /^[0-9]+$/.test(v);
}

// waitQueued polls the gateway's metrics until one request waits in band 0.
async function waitQueued() {
  const metrics = new URL('/metrics', base).href;
  for (let i = 0; i < 2000; i++) {
    const page = await (await fetch(metrics)).text();
    if (/^llm_d_epp_flow_control_queue_size\{[^}]*priority="0"[^}]*\} 1$/m.test(page)) {
      return true;
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return false;
}

try {
  // A whole completion, with the raw response beside the parsed body.
  const { data, response } = await client.chat.completions
    .create({ model: 'sim', messages, max_tokens: 5 })
    .withResponse();
  check(response.status === 200, `completion: status ${response.status}`);
  check(isCount(response.headers.get(HEADROOM)), `completion: ${HEADROOM} = ${response.headers.get(HEADROOM)}`);
  const content = data.choices?.[0]?.message?.content ?? '';
  check(content.length > 0, `completion: content ${JSON.stringify(content)}`);

  // A streamed completion: the headers come with the first event.
  const { data: stream, response: streamed } = await client.chat.completions
    .create({ model: 'sim', messages, max_tokens: 6, stream: true })
    .withResponse();
  check(streamed.status === 200, `stream: status ${streamed.status}`);
  check(isCount(streamed.headers.get(HEADROOM)), `stream: ${HEADROOM} = ${streamed.headers.get(HEADROOM)}`);
  let text = '';
  let chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    text += chunk.choices?.[0]?.delta?.content ?? '';
  }
  check(chunks > 1 && text.trim().split(/\s+/).length === 6, `stream: ${chunks} chunks, text ${JSON.stringify(text)}`);

  // Saturate the band: one request runs (a long stream, held open), one
  // waits in the band's only place, and the next is refused.
  const holder = new AbortController();
  const held = await client.chat.completions.create(
    { model: 'sim', messages, max_tokens: 2000, stream: true },
    { signal: holder.signal },
  );
  const first = await held[Symbol.asyncIterator]().next();
  check(!first.done, 'saturation: a long stream runs and holds the only slot');
  const queued = client.chat.completions.create({ model: 'sim', messages, max_tokens: 2 }).withResponse();
  queued.catch(() => {}); // awaited below; a failure is reported there
  check(await waitQueued(), 'saturation: a second request waits in the band');
  try {
    await client.chat.completions.create({ model: 'sim', messages, max_tokens: 2 });
    check(false, 'saturation: a third request was admitted; want a RateLimitError');
  } catch (err) {
    check(err instanceof OpenAI.RateLimitError, `saturation: ${err.constructor.name} (status ${err.status})`);
    check(typeof err.message === 'string' && err.message.includes('rejected-saturated'),
      `saturation: message ${JSON.stringify(err.message)} names rejected-saturated`);
    check(err.headers?.get(DROPPED) === 'rejected-saturated', `saturation: ${DROPPED} = ${err.headers?.get(DROPPED)}`);
    check(err.code === 'rejected-saturated', `saturation: error code ${err.code}`);
  }
  holder.abort(); // the client goes away: its slot goes to the waiting request
  const { response: after } = await queued;
  check(after.status === 200, `saturation: the waiting request ran once the slot was free (status ${after.status})`);
} catch (err) {
  check(false, `unexpected ${err?.constructor?.name}: ${err?.message ?? err}`);
}

process.exit(failures === 0 ? 0 : 1);
