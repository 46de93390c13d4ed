// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// pi-ai.js against @mariozechner/pi-ai 0.73.1 from the oracle ($PI_ORACLE_DIR).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as mine from "pichamber:pi-ai";
import { Type as TypeboxType } from "pichamber:typebox";
import { importOracle, oracleSkip } from "./oracle.mjs";

const real = await importOracle("@mariozechner/pi-ai/dist/index.js");

function describe(value) {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return value.map(describe);
  const out = {};
  for (const key of Reflect.ownKeys(value)) {
    const d = Object.getOwnPropertyDescriptor(value, key);
    out[`${d.enumerable ? "" : "(hidden)"}${String(key)}`] = describe(d.value);
  }
  return out;
}

test("Type is the typebox module's Type; StringEnum matches pi-ai", (t) => {
  assert.equal(mine.Type, TypeboxType);
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-ai"));
  const inputs = [
    [["add", "subtract"]],
    [["a"], { description: "The operation" }],
    [["x", "y"], { description: "d", default: "y" }],
    [["x"], { default: "" }],
    [[]],
  ];
  for (const args of inputs) {
    const a = mine.StringEnum(...args);
    const b = real.StringEnum(...args);
    assert.equal(JSON.stringify(a), JSON.stringify(b));
    assert.deepEqual(describe(a), describe(b));
  }
  const schema = (T, SE) => T.Object({ op: SE(["a", "b"], { description: "op" }), n: T.Optional(T.Number()) });
  assert.equal(JSON.stringify(schema(mine.Type, mine.StringEnum)), JSON.stringify(schema(real.Type, real.StringEnum)));
});

test("calculateCost fills and returns usage.cost like pi-ai", (t) => {
  const model = { cost: { input: 3, output: 15, cacheRead: 0.3, cacheWrite: 3.75 } };
  const usage = () => ({ input: 1234, output: 567, cacheRead: 89, cacheWrite: 10, cost: {} });
  const u = usage();
  const cost = mine.calculateCost(model, u);
  assert.equal(cost, u.cost);
  assert.equal(cost.input, (3 / 1e6) * 1234);
  assert.equal(cost.total, cost.input + cost.output + cost.cacheRead + cost.cacheWrite);
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-ai"));
  assert.deepEqual(mine.calculateCost(model, usage()), real.calculateCost(model, usage()));
});

test("event streams deliver events in order and resolve the final result", async () => {
  const s = mine.createAssistantMessageEventStream();
  const seen = [];
  const consumer = (async () => {
    for await (const ev of s) seen.push(ev.type);
  })();
  s.push({ type: "start" });
  s.push({ type: "text_delta" });
  await Promise.resolve();
  s.push({ type: "done", message: { role: "assistant", content: [] } });
  s.push({ type: "ignored-after-done" });
  s.end();
  await consumer;
  assert.deepEqual(seen, ["start", "text_delta", "done"]);
  assert.deepEqual(await s.result(), { role: "assistant", content: [] });
  assert.ok(s instanceof mine.EventStream);
});

test("event streams: error events settle the result, end() releases waiting readers", async (t) => {
  const s = mine.createAssistantMessageEventStream();
  const pending = s[Symbol.asyncIterator]().next();
  s.push({ type: "error", error: { role: "assistant", stopReason: "error" } });
  assert.deepEqual(await pending, { value: { type: "error", error: { role: "assistant", stopReason: "error" } }, done: false });
  assert.deepEqual(await s.result(), { role: "assistant", stopReason: "error" });
  const open = new mine.EventStream(() => false, () => undefined);
  const waiting = open[Symbol.asyncIterator]().next();
  open.end("final");
  assert.deepEqual(await waiting, { value: undefined, done: true });
  assert.equal(await open.result(), "final");
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-ai"));
  const collect = async (lib) => {
    const st = lib.createAssistantMessageEventStream();
    const seen = [];
    st.push({ type: "start" });
    const consumer = (async () => {
      for await (const ev of st) seen.push(ev.type);
    })();
    st.push({ type: "text_delta" });
    st.push({ type: "done", message: { n: 1 } });
    st.end();
    await consumer;
    return [seen, await st.result()];
  };
  assert.deepEqual(await collect(mine), await collect(real));
});

test("network and catalogue functions throw clearly; export names cover pi-ai's", (t) => {
  assert.throws(
    () => mine.getModel("anthropic", "claude"),
    /getModel\(\) is not available inside a pichamber extension/,
  );
  assert.throws(() => mine.getModels("anthropic"), /not available inside a pichamber extension/);
  assert.throws(() => mine.streamAnthropic(), /not available inside a pichamber extension/);
  assert.throws(() => mine.validateToolArguments({}, {}), /not available inside a pichamber extension/);
  assert.throws(() => mine.complete({}, { messages: [] }), /complete\(\) is not available/);
  assert.throws(() => mine.streamSimple({}, {}), /streamSimple\(\) is not available/);
  assert.throws(() => mine.parseStreamingJson("{"), /not available/);
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-ai"));
  const missing = Object.keys(real).filter((k) => !(k in mine));
  assert.deepEqual(missing, [], "every runtime export of pi-ai exists");
});

test("uuidv7 (pi-ai 1.6.0): RFC 9562 layout, time-ordered, a given time kept, bad times refused", () => {
  const shape = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
  const ids = Array.from({ length: 5000 }, () => mine.uuidv7());
  for (const id of ids) assert.match(id, shape);
  // Many ids in one millisecond still sort in the order they were made, and are distinct.
  assert.deepEqual([...ids].sort(), ids);
  assert.equal(new Set(ids).size, ids.length);
  const millis = (id) => Number.parseInt(id.replace(/-/g, "").slice(0, 12), 16);
  const before = Date.now();
  assert.ok(Math.abs(millis(mine.uuidv7()) - before) < 5000);
  const given = Date.UTC(2024, 0, 2, 3, 4, 5, 6);
  const follower = mine.uuidv7(given);
  assert.match(follower, shape);
  assert.equal(millis(follower), given);
  for (const bad of [-1, 1.5, 2 ** 48, Number.NaN]) {
    assert.throws(() => mine.uuidv7(bad), RangeError, String(bad));
  }
});

// pi 1.6.0 runs on Node >= 22.19 (PICHAMBER_PI_NODE, set by tests/setup.sh); its pi-ai is in
// tests/oracle-1.6. The script runs there and prints JSON.
async function runPi16(script) {
  const node = process.env.PICHAMBER_PI_NODE;
  const dist = new URL("../oracle-1.6/node_modules/@earendil-works/pi-ai/dist/", import.meta.url);
  const { existsSync } = await import("node:fs");
  if (!node || !existsSync(dist)) return null;
  const { execFileSync } = await import("node:child_process");
  const prelude = `const index = await import(${JSON.stringify(new URL("index.js", dist).href)});
    const compat = await import(${JSON.stringify(new URL("compat.js", dist).href)});`;
  return JSON.parse(execFileSync(node, ["--input-type=module", "-e", prelude + script], { encoding: "utf8" }));
}
const SKIP_16 = "pi 1.6.0 (tests/oracle-1.6) or its node (PICHAMBER_PI_NODE) is missing";

test("every export of pi-ai 1.6.0 and of its /compat exists, constants equal", async (t) => {
  const real16 = await runPi16(`
    const all = { ...index, ...compat };
    console.log(JSON.stringify(Object.fromEntries(Object.entries(all).map(([k, v]) =>
      [k, typeof v === "function" ? "function" : typeof v === "object" ? "object" : v]))));`);
  if (!real16) return t.skip(SKIP_16);
  const missing = Object.keys(real16).filter((name) => !(name in mine));
  assert.deepEqual(missing, []);
  for (const [name, value] of Object.entries(real16)) {
    if (value === "function" || value === "object") assert.equal(typeof mine[name], value, name);
    else assert.equal(mine[name], value, name);
  }
});

test("pi-ai 1.6.0's transcript helpers replay system messages as pi-ai does", async (t) => {
  const tool = (name, extra = {}) => ({ name, description: `${name}!`, parameters: { type: "object" }, ...extra });
  const transcript = [
    { role: "system", content: "base", sections: { a: "A", b: "B" }, toolsAdded: [tool("read"), tool("bash")], timestamp: 5 },
    { role: "user", content: "hi", timestamp: 6 },
    { role: "system", content: [{ type: "text", text: "more" }], sections: { a: null, c: "C" }, toolsRemoved: [{ name: "bash" }], toolsAdded: [tool("read", { constrainedSampling: { type: "json_schema", strict: "prefer" } })], timestamp: 7 },
    { role: "assistant", content: [{ type: "text", text: "ok" }], timestamp: 8 },
  ];
  const calls = (m) => ({
    collapsed: m.collapseSystemMessages({ messages: transcript }),
    current: m.getCurrentSystemMessage(transcript),
    prompt: m.getCurrentSystemPrompt(transcript),
    tools: m.getCurrentTools(transcript),
    declared: m.getDeclaredTools(transcript),
    redefined: m.hasToolRedefinitions(transcript),
    nonAdditive: m.hasNonAdditiveToolChanges(transcript),
    update: m.renderSystemMessageUpdate(transcript[2]),
    text: m.getSystemMessageText(transcript[0]),
    changes: m.getToolStateChanges([tool("a"), tool("b")], [tool("b", { description: "new" }), tool("c")]),
    folded: ["none", "changes", "additions"].map((s) => m.resolveTranscriptTools(transcript, s)),
    normalized: m.normalizeContext({ systemPrompt: "p", tools: [tool("x")], messages: [] }),
    empty: m.normalizeContext({ systemPrompt: "", tools: [], messages: [] }),
    kept: m.resolveTranscript({ messages: transcript }, true).messages.length,
    without: m.withoutInitialSystemMessage(transcript).length,
  });
  const real16 = await runPi16(`
    const transcript = ${JSON.stringify(transcript)};
    const tool = ${tool.toString()};
    const calls = ${calls.toString()};
    console.log(JSON.stringify(calls(index)));`);
  if (!real16) return t.skip(SKIP_16);
  assert.deepEqual(JSON.parse(JSON.stringify(calls(mine))), real16);
});

test("the model helpers and the models, oauth and providers/all entries follow each pi-ai release", async (t) => {
  const { existsSync } = await import("node:fs");
  const { pathToFileURL } = await import("node:url");
  const pi16 = new URL("../oracle-1.6/node_modules/@earendil-works/pi-ai/dist/", import.meta.url);
  const releases = [["0.73.1", real]];
  if (existsSync(new URL("models.js", pi16))) {
    releases.push(["1.6.0", await import(pathToFileURL(new URL("models.js", pi16).pathname).href)]);
  }
  if (releases.every(([, r]) => !r)) return t.skip(oracleSkip("@mariozechner/pi-ai"));
  const models = [
    { id: "a", provider: "p", reasoning: false },
    { id: "b", provider: "p", reasoning: true },
    { id: "c", provider: "p", reasoning: true, thinkingLevelMap: { minimal: null, xhigh: "x", max: "m" } },
    { id: "c", provider: "p", type: "image", reasoning: true, thinkingLevelMap: { high: null } },
  ];
  const levels = ["off", "minimal", "low", "medium", "high", "xhigh", "max", "bogus"];
  for (const [version, theirs] of releases) {
    if (!theirs) continue;
    globalThis.__pichamber_internal ??= {};
    globalThis.__pichamber_internal.piVersion = version;
    for (const m of models) {
      assert.deepEqual(mine.getSupportedThinkingLevels(m), theirs.getSupportedThinkingLevels(m), `${version} ${m.id}`);
      for (const level of levels) {
        assert.equal(mine.clampThinkingLevel(m, level), theirs.clampThinkingLevel(m, level), `${version} ${m.id} ${level}`);
      }
      for (const other of [...models, undefined]) {
        assert.equal(mine.modelsAreEqual(m, other), theirs.modelsAreEqual(m, other), `${version} ${m.id}`);
      }
      if (theirs.hasApi) {
        assert.equal(mine.hasApi({ ...m, api: "x" }, "x"), theirs.hasApi({ ...m, api: "x" }, "x"));
        assert.equal(mine.getModelType(m), theirs.getModelType(m));
      }
    }
    if (theirs.ModelsError) {
      // The cause's reason joins the message unless the message says it already.
      const cases = [["cannot save", undefined], ["cannot save", new Error("disk full")], ["cannot save: disk full", "disk full"], ["cannot save", 7]];
      for (const [message, cause] of cases) {
        const a = new mine.ModelsError("store", message, { cause });
        const b = new theirs.ModelsError("store", message, { cause });
        assert.deepEqual([a.name, a.code, a.message], [b.name, b.code, b.message]);
      }
    }
  }
  delete globalThis.__pichamber_internal.piVersion;
  // The entries pi 1.6.0's loader adds load, with its names; the catalog's say what to use.
  const entries = await import("pichamber:pi-ai/models");
  assert.deepEqual(Object.keys(entries).sort(), [
    "AI_TELEMETRY_SCHEMA", "ModelsError", "calculateCost", "clampThinkingLevel", "createModels", "createProvider",
    "getModelType", "getSupportedThinkingLevels", "hasApi", "isModelType", "modelsAreEqual",
  ]);
  assert.deepEqual(Object.keys(await import("pichamber:pi-ai/oauth")), []);
  const all = await import("pichamber:pi-ai/providers/all");
  assert.equal(Object.keys(all).length, 12);
  assert.throws(() => all.getBuiltinModel("openai", "gpt-5.2"), /built-in model catalog.*ctx\.modelRegistry/);
});
