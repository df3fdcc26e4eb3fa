// openai_client.mjs — drives `octet serve` with the official openai client.
// usage: node openai_client.mjs BASE_URL API_KEY MODEL EXPECTED_JSON
// EXPECTED_JSON: {"completion": text, "chat": text} (temperature-0 outputs of
// `octet generate` for the prompts below).  Prints "ok <check>" per check and
// exits non-zero on the first mismatch.
import OpenAI from 'openai';

const [baseURL, apiKey, model, expectedJson] = process.argv.slice(2);
const expected = JSON.parse(expectedJson);
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 30000 });

function check(name, cond, detail) {
  if (!cond) {
    console.error(`FAIL ${name}: ${detail}`);
    process.exit(1);
  }
  console.log(`ok ${name}`);
}

const models = await client.models.list();
check('models.list', models.data.length === 1 && models.data[0].id === model,
      JSON.stringify(models.data));

const c = await client.completions.create({
  model, prompt: 'Once upon a time', max_tokens: 40, temperature: 0 });
check('completions.create', c.choices[0].text === expected.completion,
      JSON.stringify(c.choices[0].text));
check('completions.usage', c.usage.prompt_tokens > 0 &&
      c.usage.total_tokens === c.usage.prompt_tokens + c.usage.completion_tokens,
      JSON.stringify(c.usage));

const ch = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: 'Hi there' }], max_tokens: 10, temperature: 0 });
check('chat.completions.create', ch.choices[0].message.content === expected.chat,
      JSON.stringify(ch.choices[0].message));

let text = '', chunks = 0, finish = null;
const stream = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: 'Hi there' }], max_tokens: 10, temperature: 0,
  stream: true });
for await (const part of stream) {
  chunks++;
  text += part.choices[0]?.delta?.content ?? '';
  finish = part.choices[0]?.finish_reason ?? finish;
}
check('chat stream', text === expected.chat && chunks > 2 && finish !== null,
      JSON.stringify({ text, chunks, finish }));

let ctext = '';
const cs = await client.completions.create({
  model, prompt: 'Once upon a time', max_tokens: 40, temperature: 0, stream: true });
for await (const part of cs) ctext += part.choices[0]?.text ?? '';
check('completions stream', ctext === expected.completion, JSON.stringify(ctext));

try {
  await client.completions.create({ model, prompt: 'x', temperature: 'hot' });
  check('bad request', false, 'no error');
} catch (e) {
  check('bad request', e.status === 400 && /temperature/.test(e.message), `${e.status} ${e.message}`);
}
try {
  const bad = new OpenAI({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  await bad.models.list();
  check('auth', false, 'no error');
} catch (e) {
  check('auth', e.status === 401, `${e.status}`);
}
