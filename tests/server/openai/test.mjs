// test.mjs SPECD MODELS_DIR WORK_DIR - specd serve's OpenAI routes driven by the official `openai`
// npm client (installed into WORK_DIR by run.sh): chat, chat streaming (the deltas make the same
// text as the plain answer), completions, models.list, response_format json_schema, logprobs,
// errors as the client sees them (BadRequestError, AuthenticationError), lossless speculation
// (the draft model's answer equals the one without speculation at temperature 0), and the chat
// template options (--chat-template, and the 400 naming it when a model has none); tools through the
// Jinja chat code with a real model's template (TEMPLATES_DIR: the pinned llama.cpp's
// models/templates): a required call blocking and streamed, a round trip with the tool's result;
// responses.create (blocking, streamed: the events make the blocking response's output, a function
// call and a round trip with its output); the official @anthropic-ai/sdk (run.sh installs it beside
// openai) on /v1/messages: blocking, streamed, a tool_use round trip, countTokens.
import { spawn } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import assert from "node:assert/strict";

const [specd, models, work, templates] = process.argv.slice(2);
const require = createRequire(path.join(work, "package.json"));
const { default: OpenAI, BadRequestError, AuthenticationError } = require("openai");

const KEY = "test-key-openai";
const servers = [];

// Starts `specd serve ARGS --port 0` and resolves with its base URL (from its first line).
function startServer(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(specd, ["serve", ...args, "--port", "0"], { stdio: ["ignore", "pipe", "pipe"] });
    servers.push(child);
    let out = "", err = "";
    child.stdout.on("data", (d) => {
      out += d;
      const m = out.match(/listening on (http:\/\/\S+)/);
      if (m) resolve(m[1]);
    });
    child.stderr.on("data", (d) => (err += d));
    child.exited = new Promise((done) => child.on("exit", (code, signal) => done({ code, signal, stderr: err })));
    child.on("exit", (code) => reject(new Error(`specd serve ${args.join(" ")} exited with ${code}: ${err}`)));
  });
}

// SIGTERM to every server; each must stop cleanly (exit 0: under ASAN a leak report fails it).
async function stopServers() {
  for (const s of servers) {
    s.kill("SIGTERM");
    const { code, signal, stderr } = await s.exited;
    if (code !== 0) {
      failures++;
      console.log(`FAIL specd serve stopped with code ${code} signal ${signal}: ${stderr}`);
    }
  }
}

// Runs `specd serve ARGS` expecting it to refuse to start; resolves with {code, stderr}.
function failingServer(args) {
  return new Promise((resolve) => {
    const child = spawn(specd, ["serve", ...args, "--port", "0"], { stdio: ["ignore", "ignore", "pipe"] });
    let err = "";
    child.stderr.on("data", (d) => (err += d));
    child.on("exit", (code) => resolve({ code, stderr: err }));
  });
}

const client = (baseURL, apiKey = KEY) => new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 60000 });
const model = path.join(models, "chat-chatml.gguf");
const draft = path.join(models, "draft.gguf");
const messages = [
  { role: "system", content: "You are terse." },
  { role: "user", content: [{ type: "text", text: "Say something " }, { type: "text", text: "about birds." }] },
];

let failures = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok   ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

async function main() {
  // 256 tokens a slot (-c / -np): a chat longer than a slot is refused, not cut, and the tiny
  // models' own context (-c's default) is 256 for all four slots
  const CTX = ["-c", "1024"];
  const base = await startServer(["-m", model, "-md", draft, "--api-key", KEY, ...CTX]);
  const openai = client(base);
  const ask = { model: "anything", messages, temperature: 0, max_tokens: 24 };
  let plain = null;

  await check("models.list names the model file", async () => {
    const list = [];
    for await (const m of openai.models.list()) list.push(m);
    assert.equal(list.length, 1);
    assert.equal(list[0].id, "chat-chatml.gguf");
    assert.equal(list[0].object, "model");
    assert.equal(list[0].owned_by, "specd");
    assert.equal(typeof list[0].created, "number");
  });

  await check("chat.completions.create (not streamed)", async () => {
    plain = await openai.chat.completions.create(ask);
    assert.equal(plain.object, "chat.completion");
    assert.match(plain.id, /^chatcmpl-/);
    const c = plain.choices[0];
    assert.equal(c.index, 0);
    assert.equal(c.message.role, "assistant");
    assert.equal(typeof c.message.content, "string");
    assert.ok(c.message.content.length > 0, "empty answer");
    assert.ok(["stop", "length"].includes(c.finish_reason));
    assert.ok(plain.usage.prompt_tokens > 10, "the chat template's text is in the prompt");
    assert.ok(plain.usage.completion_tokens > 0 && plain.usage.completion_tokens <= 24);
    assert.equal(plain.usage.total_tokens, plain.usage.prompt_tokens + plain.usage.completion_tokens);
    assert.equal(typeof plain.speculative.steps, "number");
  });

  await check("chat streamed: deltas make the same text, usage and speculative at the end", async () => {
    const stream = await openai.chat.completions.create({ ...ask, stream: true, stream_options: { include_usage: true },
                                                          return_origins: true });
    let text = "", first = null, finish = null, usage = null, spec = null, originsText = "";
    for await (const chunk of stream) {
      assert.equal(chunk.object, "chat.completion.chunk");
      if (chunk.usage) usage = chunk.usage;
      if (chunk.speculative) spec = chunk.speculative;
      for (const o of chunk.origins || []) originsText += o.text;
      const c = chunk.choices[0];
      if (!c) continue;
      if (first === null) first = c.delta;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
    assert.equal(first.role, "assistant");
    assert.equal(text, plain.choices[0].message.content);
    assert.equal(originsText, text, "the origins pieces cover the text");
    assert.equal(finish, plain.choices[0].finish_reason);
    assert.deepEqual(usage, plain.usage);
    assert.equal(typeof spec.drafted, "number");
  });

  await check("completions.create", async () => {
    const r = await openai.completions.create({ model: "x", prompt: "The birds", temperature: 0, max_tokens: 8, stop: "\n\n" });
    assert.equal(r.object, "text_completion");
    assert.equal(typeof r.choices[0].text, "string");
    assert.ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 8);
    const again = await openai.completions.create({ model: "x", prompt: "The birds", temperature: 0, max_tokens: 8,
                                                     stop: "\n\n" });
    assert.equal(again.choices[0].text, r.choices[0].text, "temperature 0 repeats itself");
    const ids = await openai.completions.create({ model: "x", prompt: [300, 301, 302], temperature: 0, max_tokens: 4 });
    assert.equal(ids.usage.prompt_tokens, 3, "token ids are the prompt as they are");
  });

  await check("response_format json_schema: the answer parses and fits the schema", async () => {
    const schema = {
      type: "object",
      properties: { name: { type: "string", maxLength: 6 }, age: { type: "integer", minimum: 0, maximum: 120 } },
      required: ["name", "age"],
      additionalProperties: false,
    };
    const r = await openai.chat.completions.create({ ...ask, max_tokens: 200,
      response_format: { type: "json_schema", json_schema: { name: "person", schema, strict: true } } });
    assert.equal(r.choices[0].finish_reason, "stop", `cut short: ${r.choices[0].message.content}`);
    const value = JSON.parse(r.choices[0].message.content);
    assert.deepEqual(Object.keys(value).sort(), ["age", "name"]);
    assert.equal(typeof value.name, "string");
    // llama.cpp's grammar reads a lead byte and the bytes after it as one code point whether they
    // continue it or not (llama-server gives these same bytes): a run of U+FFFD, the decoder's
    // bytes that are no UTF-8, is one of the grammar's code points
    assert.ok([...value.name.replace(/\uFFFD+/g, "\uFFFD")].length <= 6, `name too long: ${r.choices[0].message.content}`);
    assert.ok(Number.isInteger(value.age) && value.age >= 0 && value.age <= 120);
  });

  await check("logprobs: one entry per token, top_logprobs sorted", async () => {
    const r = await openai.chat.completions.create({ ...ask, max_tokens: 6, logprobs: true, top_logprobs: 3 });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    assert.equal(content.map((e) => e.token).join(""), r.choices[0].message.content);
    for (const e of content) {
      assert.equal(e.top_logprobs.length, 3);
      assert.equal(e.top_logprobs[0].logprob, e.logprob, "greedy: the chosen token is the likeliest");
      assert.deepEqual(Buffer.from(e.bytes).toString(), e.token);
    }
  });

  await check("errors: n out of range, unknown and unsupported fields are BadRequestError naming the field", async () => {
    const cases = [
      [{ n: 9 }, "n", /'n' must be an integer from 1 to 4/],
      [{ n: 0 }, "n", /'n' must be an integer from 1 to 4/],
      [{ n: 1.5 }, "n", /'n' must be an integer/],
      [{ tools: [{ type: "function", function: { name: "f", parameters: "x" } }] }, "tools", /parameters/],
      [{ tool_choice: { type: "function", function: { name: "nope" } } }, "tool_choice", /'nope'/],
      [{ frobnicate: true }, "frobnicate", /unknown field 'frobnicate'/],
      [{ messages: [{ role: "wizard", content: "hi" }] }, "messages[0].role", /'messages\[0\]\.role' is 'wizard'/],
      [{ messages: [{ role: "function", content: "42" }] }, "messages[0].role", /"tool"/],
      [{ top_p: 2 }, "top_p", /'top_p' must be a number from 0 to 1/],
      [{ top_k: -5 }, "top_k", /'top_k' must be an integer from -1/],
    ];
    for (const [extra, param, message] of cases) {
      await assert.rejects(openai.chat.completions.create({ ...ask, ...extra }), (e) => {
        assert.ok(e instanceof BadRequestError, `${param}: ${e}`);
        assert.equal(e.status, 400);
        assert.equal(e.param, param);
        assert.equal(e.type, "invalid_request_error");
        assert.match(e.message, message);
        return true;
      });
    }
    const withNull = await openai.chat.completions.create({ ...ask, max_tokens: 2,
      messages: [...messages, { role: "assistant", content: null }, { role: "user", content: "more" }] });
    assert.equal(withNull.choices.length, 1, "a null content is an empty message");
    // harmless fields clients send by habit are accepted
    const ok = await openai.chat.completions.create({ ...ask, max_tokens: 2, user: "u", store: false, metadata: { a: "b" },
                                                      parallel_tool_calls: false, tool_choice: "none" });
    assert.equal(ok.choices.length, 1);
  });

  await check("raw HTTP: errors in OpenAI's shape (no key, 404, bad JSON, a non-text part)", async () => {
    const post = (url, body, key = KEY) => fetch(base + url, { method: "POST", body,
      headers: key ? { Authorization: `Bearer ${key}`, "Content-Type": "application/json" } : {} });
    const expect = async (response, status, param, message) => {
      assert.equal(response.status, status);
      const { error } = await response.json();
      assert.equal(typeof error.message, "string");
      assert.match(error.message, message);
      assert.equal(error.param, param);
      assert.ok(["invalid_request_error", "server_error"].includes(error.type));
      assert.ok("code" in error);
    };
    await expect(await post("/v1/chat/completions", JSON.stringify(ask), null), 401, null, /API key/);
    await expect(await post("/v1/nothing", "{}"), 404, null, /not found/);
    await expect(await post("/v1/chat/completions", "{\"messages\": ["), 400, null, /not JSON/);
    await expect(await post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: [
      { type: "input_audio", input_audio: { data: "x", format: "wav" } }] }] })), 400, "messages[0].content",
      /a part of type 'input_audio' is not supported: only text parts .* and image_url parts \(with --mmproj\) are/);
    await expect(await post("/v1/chat/completions", JSON.stringify({ messages: [{ role: "user", content: [
      { type: "image_url", image_url: { url: "x" } }] }] })), 400, "messages[0].content[0].image_url",
      /image URLs are not fetched: send the image as a data URI/);
    await expect(await post("/v1/completions", JSON.stringify({ prompt: "a", messages: [] })), 400, "messages",
      /unknown field 'messages'/);
    await expect(await post("/v1/chat/completions", JSON.stringify({ ...ask, temperature: "hot" })), 400, "temperature",
      /temperature/);
  });

  await check("response_format json_object: a JSON object", async () => {
    const r = await openai.chat.completions.create({ ...ask, max_tokens: 300, response_format: { type: "json_object" } });
    if (r.choices[0].finish_reason === "stop") {
      const value = JSON.parse(r.choices[0].message.content);
      assert.ok(value && typeof value === "object" && !Array.isArray(value));
    } else {
      assert.match(r.choices[0].message.content, /^\s*\{/); // cut short by max_tokens: still an object's start
    }
  });

  await check("a wrong API key is AuthenticationError", async () => {
    await assert.rejects(client(base, "wrong").chat.completions.create(ask), (e) => {
      assert.ok(e instanceof AuthenticationError, String(e));
      assert.match(e.message, /API key/);
      return true;
    });
  });

  await check("lossless: the draft model's answer equals the one without speculation", async () => {
    // Fixed chains of 4: an adaptive length drafts where the engine's cost model says it pays, which
    // on a busy machine may be nowhere in 48 tokens.
    const long = { ...ask, max_tokens: 48 };
    const none = await openai.chat.completions.create({ ...long, speculative: { type: ["none"] } });
    const drafted = await openai.chat.completions.create({ ...long, speculative: { type: ["draft"], n_min: 4, n_max: 4 } });
    assert.equal(none.speculative.drafted, 0);
    assert.ok(drafted.speculative.drafted > 0, "the draft model drafted nothing: the comparison would prove nothing");
    assert.equal(drafted.choices[0].message.content, none.choices[0].message.content);
    assert.equal(drafted.usage.completion_tokens, none.usage.completion_tokens);
  });

  // A server whose template lets the tiny model's answer begin with a call (see the tools check's comment).
  const fbase = await startServer(["-m", path.join(models, "target.gguf"), "--api-key", KEY, "-c", "4096", "-np", "1",
    "--chat-template-file", path.join(templates, "meetkai-functionary-medium-v3.2.jinja")]);
  const schema = { type: "object", properties: { city: { type: "string", enum: ["Rome", "Oslo"] } }, required: ["city"] };

  await check("n: greedy choices equal the answer of n 1; index i in choices; usage sums the choices", async () => {
    const one = await openai.chat.completions.create({ ...ask, max_tokens: 12 });
    const three = await openai.chat.completions.create({ ...ask, max_tokens: 12, n: 3 });
    assert.deepEqual(three.choices.map((c) => c.index), [0, 1, 2]);
    for (const c of three.choices) {
      assert.equal(c.message.content, one.choices[0].message.content);
      assert.equal(c.finish_reason, one.choices[0].finish_reason);
      assert.equal(typeof c.speculative.steps, "number", "each choice's own speculation figures");
    }
    assert.equal(three.usage.prompt_tokens, one.usage.prompt_tokens, "the prompt is counted once");
    assert.equal(three.usage.completion_tokens, 3 * one.usage.completion_tokens);
    assert.equal(three.usage.total_tokens, three.usage.prompt_tokens + three.usage.completion_tokens);
  });

  await check("n: seeded sampled choices differ, and choice i is the answer with seed + i", async () => {
    const sampled = { ...ask, temperature: 1.5, top_k: 0, top_p: 1, min_p: 0, max_tokens: 12, seed: 1234 };
    const r = await openai.chat.completions.create({ ...sampled, n: 3 });
    const texts = r.choices.map((c) => c.message.content);
    assert.equal(new Set(texts).size, 3, `choices alike: ${JSON.stringify(texts)}`);
    for (let i = 0; i < 3; i++) {
      const alone = await openai.chat.completions.create({ ...sampled, seed: 1234 + i });
      assert.equal(alone.choices[0].message.content, texts[i], `choice ${i} against seed ${1234 + i}`);
    }
    const again = await openai.completions.create({ model: "x", prompt: "The birds", temperature: 1.5, top_k: 0,
                                                     max_tokens: 8, seed: 7, n: 2 });
    const first = await openai.completions.create({ model: "x", prompt: "The birds", temperature: 1.5, top_k: 0,
                                                     max_tokens: 8, seed: 8 });
    assert.equal(again.choices[1].text, first.choices[0].text, "/v1/completions: choice 1 has seed + 1");
  });

  await check("n streamed: chunks carry their choice's index and make each blocking choice; one usage chunk", async () => {
    const blocking = await openai.chat.completions.create({ ...ask, max_tokens: 10, n: 2 });
    const stream = await openai.chat.completions.create({ ...ask, max_tokens: 10, n: 2, stream: true,
                                                          stream_options: { include_usage: true } });
    const texts = ["", ""], roles = [0, 0], finish = [null, null], ids = new Set(), usages = [];
    for await (const chunk of stream) {
      ids.add(chunk.id);
      if (chunk.usage) usages.push(chunk.usage);
      for (const c of chunk.choices) {
        assert.ok(c.index === 0 || c.index === 1, `index ${c.index}`);
        if (c.delta.role) roles[c.index]++;
        texts[c.index] += c.delta.content ?? "";
        if (c.finish_reason) finish[c.index] = c.finish_reason;
      }
    }
    assert.equal(ids.size, 1, "one id for the request's chunks");
    assert.deepEqual(roles, [1, 1]);
    assert.deepEqual(texts, blocking.choices.map((c) => c.message.content));
    assert.deepEqual(finish, blocking.choices.map((c) => c.finish_reason));
    assert.equal(usages.length, 1);
    assert.deepEqual(usages[0], blocking.usage);
    const text = await openai.completions.create({ model: "x", prompt: "The birds", temperature: 0, max_tokens: 6, n: 3,
                                                   stream: true });
    const pieces = ["", "", ""];
    for await (const chunk of text) for (const c of chunk.choices) pieces[c.index] += c.text;
    assert.equal(new Set(pieces).size, 1, `greedy choices alike: ${JSON.stringify(pieces)}`);
  });

  await check("several prompts: prompts x n outputs, index p * n + c, each as its own request; usage counts each prompt once", async () => {
    const one = { model: "x", temperature: 0, max_tokens: 6 };
    const a = await openai.completions.create({ ...one, prompt: "The birds" });
    const b = await openai.completions.create({ ...one, prompt: "Once upon" });
    const r = await openai.completions.create({ ...one, prompt: ["The birds", "Once upon"], n: 2 });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2, 3]);
    assert.deepEqual(r.choices.map((c) => c.text), [a, a, b, b].map((x) => x.choices[0].text));
    assert.equal(r.usage.prompt_tokens, a.usage.prompt_tokens + b.usage.prompt_tokens);
    assert.equal(r.usage.completion_tokens, 2 * (a.usage.completion_tokens + b.usage.completion_tokens));
    const stream = await openai.completions.create({ ...one, prompt: ["The birds", "Once upon"], n: 2, stream: true,
                                                     stream_options: { include_usage: true } });
    const texts = ["", "", "", ""], usages = [];
    for await (const chunk of stream) {
      if (chunk.usage) usages.push(chunk.usage);
      for (const c of chunk.choices) texts[c.index] += c.text;
    }
    assert.deepEqual(texts, r.choices.map((c) => c.text));
    assert.equal(usages.length, 1);
    assert.deepEqual(usages[0], r.usage);
    const ids = await openai.completions.create({ ...one, prompt: [[300, 301], [302, 303, 304]] });
    assert.equal(ids.choices.length, 2);
    assert.equal(ids.usage.prompt_tokens, 5, "token id lists are the prompts as they are");
    for (const [prompt, message] of [[["a", 3], /'prompt\[1\]' must be a string or an array of token ids/],
                                     [Array(40).fill("a"), /40 prompts x n 2: at most 64/]]) {
      await assert.rejects(openai.completions.create({ ...one, prompt, n: 2 }), (e) => {
        assert.ok(e instanceof BadRequestError, String(e));
        assert.equal(e.param, "prompt");
        assert.match(e.message, message);
        return true;
      });
    }
  });

  await check("n with one slot: n 1 works, n 2 is a BadRequestError naming -np", async () => {
    const single = client(await startServer(["-m", model, "--api-key", KEY, "-np", "1"]));
    const r = await single.chat.completions.create({ ...ask, max_tokens: 4, n: 1 });
    assert.equal(r.choices.length, 1);
    await assert.rejects(single.chat.completions.create({ ...ask, n: 2 }), (e) => {
      assert.ok(e instanceof BadRequestError, String(e));
      assert.equal(e.param, "n");
      assert.match(e.message, /from 1 to 1.*-np/);
      return true;
    });
  });

  await check("tools: a required call (blocking, streamed) and a round trip with the result", async () => {
    // Functionary v3.2's tool grammar lets the answer begin with the call (most templates allow free
    // text first, which the random tiny model never ends); an enum keeps the arguments short; room
    // for the whole prompt.
    const qwen = client(fbase);
    const tools = [{ type: "function", function: { name: "get_weather", description: "The weather in a city",
      parameters: { type: "object", properties: { city: { type: "string", enum: ["Rome", "Oslo"] } },
                    required: ["city"] } } }];
    const req = { model: "m", messages: [{ role: "user", content: "Weather in Paris?" }], tools, tool_choice: "required",
                  temperature: 0, max_tokens: 60 };
    const r = await qwen.chat.completions.create(req);
    const c = r.choices[0];
    assert.equal(c.finish_reason, "tool_calls");
    assert.ok(c.message.tool_calls.length >= 1);
    const call = c.message.tool_calls[0];
    assert.equal(call.type, "function");
    assert.equal(call.function.name, "get_weather");
    assert.ok(["Rome", "Oslo"].includes(JSON.parse(call.function.arguments).city));
    const stream = await qwen.chat.completions.create({ ...req, stream: true });
    const calls = [];
    let finish = null;
    for await (const chunk of stream) {
      for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
        calls[d.index] ??= { id: "", name: "", arguments: "" };
        if (d.id) calls[d.index].id = d.id;
        calls[d.index].name += d.function?.name ?? "";
        calls[d.index].arguments += d.function?.arguments ?? "";
      }
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    assert.equal(finish, "tool_calls");
    assert.deepEqual(calls.map((x) => [x.name, x.arguments]),
                     c.message.tool_calls.map((x) => [x.function.name, x.function.arguments]));
    const back = await qwen.chat.completions.create({ ...req, tool_choice: "none", max_tokens: 4, messages: [
      ...req.messages, c.message, { role: "tool", tool_call_id: call.id, content: "18 degrees" }] });
    assert.equal(back.choices[0].message.role, "assistant");
    assert.ok(back.usage.prompt_tokens > r.usage.prompt_tokens, "the call and its result are in the prompt");
  });

  await check("responses.create: blocking and streamed, the events make the same response", async () => {
    const req = { model: "m", input: [{ role: "user", content: "Say something about birds." }], instructions: "Be terse.",
                  temperature: 0, max_output_tokens: 16 };
    const r = await openai.responses.create(req);
    assert.equal(r.object, "response");
    assert.match(r.id, /^resp_/);
    assert.ok(["completed", "incomplete"].includes(r.status));
    assert.equal(typeof r.output_text, "string");
    assert.ok(r.output_text.length > 0, "empty answer");
    assert.ok(r.usage.input_tokens > 5 && r.usage.output_tokens > 0 && r.usage.output_tokens <= 16);
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
    const stream = await openai.responses.create({ ...req, stream: true });
    let deltas = "", created = null, completed = null, last = -1;
    for await (const event of stream) {
      assert.ok(event.sequence_number > last, "sequence numbers grow");
      last = event.sequence_number;
      if (event.type === "response.created") created = event.response;
      if (event.type === "response.output_text.delta") deltas += event.delta;
      if (event.type === "response.completed" || event.type === "response.incomplete") completed = event.response;
    }
    assert.equal(created.status, "in_progress");
    assert.equal(deltas, r.output_text);
    assert.equal(completed.status, r.status);
    assert.deepEqual(completed.output.map((o) => o.type), r.output.map((o) => o.type));
    assert.deepEqual(completed.usage, r.usage);
    // the client's own stream helper assembles the same message (it sets no output_text)
    const helper = await openai.responses.stream(req).finalResponse();
    const texts = (resp) => resp.output.filter((o) => o.type === "message")
      .flatMap((o) => o.content.filter((c) => c.type === "output_text").map((c) => c.text)).join("");
    assert.equal(texts(helper), r.output_text);
  });

  await check("responses.create: a function call (blocking, streamed) and a round trip with its output", async () => {
    const fc = client(fbase);
    const tools = [{ type: "function", name: "get_weather", description: "The weather in a city", parameters: schema,
                     strict: false }];
    const req = { model: "m", input: "Weather in Paris?", tools, tool_choice: "required", temperature: 0,
                  max_output_tokens: 60 };
    const r = await fc.responses.create(req);
    assert.equal(r.object, "response");
    assert.equal(r.status, "completed");
    const call = r.output.find((o) => o.type === "function_call");
    assert.equal(call.name, "get_weather");
    assert.ok(["Rome", "Oslo"].includes(JSON.parse(call.arguments).city));
    const streamed = await fc.responses.stream(req).finalResponse();
    const scall = streamed.output.find((o) => o.type === "function_call");
    assert.deepEqual([scall.name, scall.arguments], [call.name, call.arguments]);
    const back = await fc.responses.create({ model: "m", tools, tool_choice: "none", temperature: 0, max_output_tokens: 3,
      input: [{ role: "user", content: "Weather in Paris?" }, call,
              { type: "function_call_output", call_id: call.call_id, output: "18 degrees" }] });
    assert.equal(back.status, "incomplete");
    assert.equal(back.incomplete_details.reason, "max_output_tokens");
    assert.equal(typeof back.output_text, "string");
    assert.ok(back.usage.input_tokens > r.usage.input_tokens, "the call and its output are in the prompt");
  });

  await check("@anthropic-ai/sdk: messages (blocking, streamed, a tool_use round trip) and countTokens", async () => {
    const { default: Anthropic, BadRequestError: AnthropicBadRequest } = require("@anthropic-ai/sdk");
    const anthropic = new Anthropic({ baseURL: fbase, apiKey: KEY, maxRetries: 0, timeout: 60000 });
    const req = { model: "m", max_tokens: 60, temperature: 0, tool_choice: { type: "any" },
                  tools: [{ name: "get_weather", description: "The weather in a city", input_schema: schema }],
                  messages: [{ role: "user", content: "Weather in Paris?" }] };
    const m = await anthropic.messages.create(req);
    assert.equal(m.type, "message");
    assert.equal(m.role, "assistant");
    assert.equal(m.stop_reason, "tool_use");
    const use = m.content.find((b) => b.type === "tool_use");
    assert.equal(use.name, "get_weather");
    assert.ok(["Rome", "Oslo"].includes(use.input.city));
    assert.ok(m.usage.input_tokens > 5 && m.usage.output_tokens > 0);
    const streamed = await anthropic.messages.stream(req).finalMessage();
    assert.equal(streamed.stop_reason, "tool_use");
    assert.deepEqual(streamed.content.filter((b) => b.type === "tool_use").map((b) => [b.name, b.input]),
                     m.content.filter((b) => b.type === "tool_use").map((b) => [b.name, b.input]));
    assert.deepEqual(streamed.usage.output_tokens, m.usage.output_tokens);
    const back = await anthropic.messages.create({ ...req, tool_choice: { type: "none" }, max_tokens: 4, messages: [
      ...req.messages, { role: "assistant", content: m.content },
      { role: "user", content: [{ type: "tool_result", tool_use_id: use.id, content: "18 degrees" }] }] });
    assert.equal(back.stop_reason, "max_tokens");
    assert.ok(back.usage.input_tokens > m.usage.input_tokens, "the call and its result are in the prompt");
    const { max_tokens, ...counted } = req;
    const count = await anthropic.messages.countTokens(counted);
    assert.equal(count.input_tokens, m.usage.input_tokens);
    await assert.rejects(anthropic.messages.create({ ...req, tool_choice: { type: "tool", name: "nope" } }), (e) => {
      assert.ok(e instanceof AnthropicBadRequest, String(e));
      assert.equal(e.error.type, "error");
      assert.equal(e.error.error.type, "invalid_request_error");
      assert.match(e.error.error.message, /nope/);
      return true;
    });
  });

  await check("@anthropic-ai/sdk: plain text blocking and streamed, the text events make the same text", async () => {
    const { default: Anthropic, AuthenticationError: AnthropicAuth } = require("@anthropic-ai/sdk");
    const anthropic = new Anthropic({ baseURL: base, apiKey: KEY, maxRetries: 0, timeout: 60000 });
    const req = { model: "m", max_tokens: 16, temperature: 0, system: "You are terse.",
                  messages: [{ role: "user", content: [{ type: "text", text: "Say something about birds." }] }] };
    const m = await anthropic.messages.create(req);
    assert.ok(["end_turn", "max_tokens", "stop_sequence"].includes(m.stop_reason));
    assert.equal(m.content[0].type, "text");
    let text = "";
    const stream = anthropic.messages.stream(req).on("text", (t) => (text += t));
    const fin = await stream.finalMessage();
    assert.equal(text, m.content[0].text);
    assert.equal(fin.stop_reason, m.stop_reason);
    assert.equal(fin.usage.output_tokens, m.usage.output_tokens);
    await assert.rejects(new Anthropic({ baseURL: base, apiKey: "wrong", maxRetries: 0 }).messages.create(req), (e) => {
      assert.ok(e instanceof AnthropicAuth, String(e));
      return true;
    });
  });

  await check("a model without a chat template: ChatML through Jinja; with --no-jinja a 400 naming --chat-template; --chat-template chatml works", async () => {
    const bare = path.join(models, "target.gguf");
    const jinja = await client(await startServer(["-m", bare, ...CTX])).chat.completions.create(ask);
    assert.ok(jinja.usage.prompt_tokens > 10);
    const noTemplate = client(await startServer(["-m", bare, "--no-jinja", ...CTX]));
    await assert.rejects(noTemplate.chat.completions.create(ask), (e) => {
      assert.ok(e instanceof BadRequestError, String(e));
      assert.match(e.message, /--chat-template/);
      return true;
    });
    const chatml = client(await startServer(["-m", bare, "--chat-template", "chatml", ...CTX]));
    const r = await chatml.chat.completions.create(ask);
    assert.ok(r.usage.prompt_tokens > 10);
    const bad = await failingServer(["-m", bare, "--chat-template", "no-such-template"]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /--chat-template 'no-such-template'.*chatml/s);
  });
}

try {
  await main();
} catch (e) {
  failures++;
  console.log(`FAIL: ${e && e.stack ? e.stack : e}`);
} finally {
  await stopServers();
}
console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
