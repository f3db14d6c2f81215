// The official `openai` Node SDK against Ragline: models, a whole answer, a stream with usage,
// an OpenAI-shaped error, and a stream aborted by the client. Prints one JSON object.
import OpenAI from "openai";

const { BASE_URL, API_KEY, SLOW_BASE_URL, SLOW_API_KEY, QUESTION } = process.env;
const out = {};
const client = new OpenAI({ baseURL: BASE_URL, apiKey: API_KEY, maxRetries: 0 });

const models = await client.models.list();
out.models = models.data.map((m) => ({ id: m.id, object: m.object, owned_by: m.owned_by }));
out.model = await client.models.retrieve("ragline");

const whole = await client.chat.completions.create({
  model: "ragline",
  messages: [{ role: "user", content: `${QUESTION} (whole)` }],
});
out.whole = {
  object: whole.object,
  id: whole.id,
  model: whole.model,
  created: whole.created,
  choice: whole.choices[0],
  usage: whole.usage,
  ragline: whole.ragline,
};

const stream = await client.chat.completions.create({
  model: "ragline",
  messages: [{ role: "user", content: `${QUESTION} (stream)` }],
  stream: true,
  stream_options: { include_usage: true },
});
const chunks = [];
for await (const chunk of stream) chunks.push(chunk);
out.stream = {
  objects: [...new Set(chunks.map((c) => c.object))],
  ids: [...new Set(chunks.map((c) => c.id))],
  text: chunks.map((c) => c.choices[0]?.delta?.content ?? "").join(""),
  finish: chunks.map((c) => c.choices[0]?.finish_reason).filter(Boolean),
  last_usage: chunks.at(-1).usage,
  last_choices: chunks.at(-1).choices.length,
  count: chunks.length,
};

try {
  await new OpenAI({ baseURL: BASE_URL, apiKey: "rk_nope", maxRetries: 0 }).chat.completions.create({
    model: "ragline",
    messages: [{ role: "user", content: QUESTION }],
  });
  out.error = null;
} catch (err) {
  out.error = { status: err.status, code: err.code, type: err.type, message: err.message, name: err.constructor.name };
}

const slow = new OpenAI({ baseURL: SLOW_BASE_URL, apiKey: SLOW_API_KEY, maxRetries: 0 });
const cancelled = await slow.chat.completions.create({
  model: "ragline",
  messages: [{ role: "user", content: `${QUESTION} (cancel)` }],
  stream: true,
});
let seen = 0;
try {
  for await (const chunk of cancelled) {
    if (chunk.choices[0]?.delta?.content) seen += 1;
    if (seen === 2) cancelled.controller.abort();
  }
  out.cancel = { seen, aborted: cancelled.controller.signal.aborted }; // v6 ends the loop quietly
} catch (err) {
  out.cancel = { seen, aborted: true, name: err.constructor.name };
}
console.log(JSON.stringify(out));
