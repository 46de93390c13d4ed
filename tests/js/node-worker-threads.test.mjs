// node:worker_threads' message encoding: what a message turns into after crossing the host
// (JSON with the structured-clone types tagged) equals what Node's structuredClone makes of
// it, and what Node cannot clone pichamber refuses too. (Workers themselves run in real
// instances: tests/rpc.rs `workers::*`, tests/hostile.rs.)
import { test } from "node:test";
import assert from "node:assert/strict";
import {
  decodeMessage,
  encodeMessage,
  isMainThread,
  MessageChannel,
  parentPort,
  workerData,
} from "pichamber:node/worker_threads";

const cross = (value) => decodeMessage(encodeMessage(value));

test("messages come out as structuredClone makes them", () => {
  const values = [
    1,
    -0,
    NaN,
    Infinity,
    "text",
    null,
    undefined,
    true,
    10n,
    [1, undefined, [2, { a: 3 }]],
    { nested: { deep: [new Date(5), /x+/gi] } },
    new Map([["k", new Set([1, 2])], [3, { v: 4 }]]),
    new Uint8Array([1, 2, 255]),
    new Float64Array([1.5, -2]),
    new Uint8Array([9, 8]).buffer,
    { "$pichamber:clone": "not a tag" },
  ];
  for (const value of values) {
    assert.deepStrictEqual(cross(value), structuredClone(value), String(value));
  }
  const err = cross(new TypeError("bad"));
  assert.equal(err.message, "bad");
  assert.equal(err.name, "TypeError");
});

test("functions and symbols cannot be cloned, as in Node", () => {
  for (const value of [() => 1, { f() {} }, Symbol("s")]) {
    assert.throws(() => structuredClone(value), { name: "DataCloneError" });
    assert.throws(() => encodeMessage(value), { name: "DataCloneError" });
  }
});

test("outside a worker: the main thread, no parent port, null workerData", () => {
  assert.equal(isMainThread, true);
  assert.equal(parentPort, null);
  assert.equal(workerData, null);
});

test("a MessageChannel's ports pass clones to each other", async () => {
  const { port1, port2 } = new MessageChannel();
  const sent = { when: new Date(1), tags: new Set(["a"]) };
  const got = await new Promise((resolve) => {
    port2.on("message", resolve);
    port1.postMessage(sent);
  });
  assert.deepStrictEqual(got, sent);
  assert.notEqual(got, sent);
  port1.close();
});
