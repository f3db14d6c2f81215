// The Vercel AI SDK's OpenAI-compatible provider against Ragline: generateText, streamText with
// usage, a multi-turn conversation, an error, and a stream aborted by the client.
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText } from "ai";

const { BASE_URL, API_KEY, SLOW_BASE_URL, SLOW_API_KEY, QUESTION } = process.env;
const out = {};
const provider = (baseURL, apiKey) =>
  createOpenAICompatible({ name: "ragline", baseURL, apiKey, includeUsage: true });
const model = provider(BASE_URL, API_KEY).chatModel("ragline");

const whole = await generateText({ model, prompt: `${QUESTION} (whole)`, maxRetries: 0 });
out.whole = { text: whole.text, finishReason: whole.finishReason, usage: whole.usage };

const streamed = streamText({ model, prompt: `${QUESTION} (stream)`, maxRetries: 0 });
const parts = [];
for await (const part of streamed.textStream) parts.push(part);
out.stream = {
  parts: parts.length,
  text: parts.join(""),
  finishReason: await streamed.finishReason,
  usage: await streamed.usage,
};

const turns = await generateText({
  model,
  maxRetries: 0,
  messages: [
    { role: "user", content: `${QUESTION} (turn 1)` },
    { role: "assistant", content: whole.text },
    { role: "user", content: "And on Fridays?" },
  ],
});
out.turns = { text: turns.text, finishReason: turns.finishReason };

try {
  await generateText({ model: provider(BASE_URL, "rk_nope").chatModel("ragline"), prompt: QUESTION, maxRetries: 0 });
  out.error = null;
} catch (err) {
  out.error = { name: err.name, statusCode: err.statusCode, message: err.message };
}

const ac = new AbortController();
const slow = streamText({
  model: provider(SLOW_BASE_URL, SLOW_API_KEY).chatModel("ragline"),
  prompt: `${QUESTION} (cancel)`,
  abortSignal: ac.signal,
  maxRetries: 0,
  onError: () => {},
});
let seen = 0;
try {
  for await (const part of slow.textStream) {
    if (part) seen += 1;
    if (seen === 2) ac.abort();
  }
  out.cancel = { seen, aborted: ac.signal.aborted };
} catch (err) {
  out.cancel = { seen, aborted: true, name: err.name };
}
console.log(JSON.stringify(out));
