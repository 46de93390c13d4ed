// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-readline.js against Node's readline on the same chunks; node-zlib.js's wrapper (the
// codecs themselves are the guest's Rust, checked in a real instance by tests/cli.rs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { EventEmitter } from "node:events";
import * as nodeReadline from "node:readline";
import * as nodeZlib from "node:zlib";
import * as readline from "pichamber:node/readline";
import * as readlinePromises from "pichamber:node/readline-promises";
import zlib, { gunzipSync, gzip, gzipSync, inflateSync, createGzip } from "pichamber:node/zlib";

/** Feeds `chunks` to a fresh input, one per tick; the lines and whether it closed. */
async function lines(make, chunks) {
  const input = new EventEmitter();
  input.resume = () => {};
  input.pause = () => {};
  const rl = make({ input, crlfDelay: Infinity });
  const seen = [];
  let closed = false;
  rl.on("line", (l) => seen.push(l));
  rl.on("close", () => (closed = true));
  for (const chunk of chunks) {
    await new Promise((r) => setImmediate(r));
    input.emit("data", chunk);
  }
  await new Promise((r) => setImmediate(r));
  input.emit("end");
  await new Promise((r) => setImmediate(r));
  return { seen, closed };
}

test("readline splits lines as Node's does, across chunk boundaries", async () => {
  const cases = [
    ["a\nb\n", "c"],
    ["a\r", "\nb\r\nc\rd"],
    ["\n\n", "x\r\r\n"],
    [Buffer.from("caf"), Buffer.from([0xc3]), Buffer.from([0xa9, 0x0a]), Buffer.from("€ end")],
    ["no newline at all"],
    [],
  ];
  for (const chunks of cases) {
    assert.deepEqual(
      await lines((o) => readline.createInterface(o), chunks),
      await lines((o) => nodeReadline.createInterface(o), chunks),
      JSON.stringify(chunks),
    );
  }
});

test("readline: question answers with the next line, async iteration ends at close, prompts go to output", async () => {
  const input = new EventEmitter();
  const written = [];
  const output = { write: (s) => written.push(s) };
  const rl = readline.createInterface({ input, output });
  const answer = new Promise((resolve) => rl.question("Name? ", resolve));
  input.emit("data", "Ada\nrest\n");
  assert.equal(await answer, "Ada");
  rl.setPrompt("$ ");
  rl.prompt();
  assert.deepEqual(written, ["Name? ", "$ "]);
  const iterated = [];
  const done = (async () => {
    for await (const line of rl) iterated.push(line);
  })();
  input.emit("data", "x\ny\n");
  rl.close();
  await done;
  assert.deepEqual(iterated, ["x", "y"]);
  assert.throws(() => rl.question("again?", () => {}), { code: "ERR_USE_AFTER_CLOSE" });
  const p = readlinePromises.createInterface({ input: new EventEmitter() });
  const q = p.question("?");
  p.write("typed\n");
  assert.equal(await q, "typed");
});

test("zlib: one-shot codecs, callbacks, Node's errors, streams refused by name", async () => {
  const text = "pichamber ".repeat(20);
  assert.equal(gunzipSync(nodeZlib.gzipSync(text)).toString(), text);
  assert.equal(nodeZlib.gunzipSync(gzipSync(text)).toString(), text);
  assert.equal(inflateSync(nodeZlib.deflateSync("€")).toString(), "€");
  const viaCallback = await new Promise((resolve, reject) =>
    gzip(new TextEncoder().encode("typed array"), (err, out) => (err ? reject(err) : resolve(out))),
  );
  assert.equal(nodeZlib.gunzipSync(viaCallback).toString(), "typed array");
  const mine = (() => { try { gunzipSync("nope"); } catch (e) { return e; } })();
  const theirs = (() => { try { nodeZlib.gunzipSync("nope"); } catch (e) { return e; } })();
  assert.deepEqual([mine.code, mine.errno, mine.message], [theirs.code, theirs.errno, theirs.message]);
  assert.throws(() => gzipSync(42), { code: "ERR_INVALID_ARG_TYPE" });
  assert.throws(() => createGzip(), /createGzip\(\) is not available inside a pichamber extension/);
  for (const [name, value] of Object.entries(zlib.constants)) assert.equal(value, nodeZlib.constants[name], name);
});
