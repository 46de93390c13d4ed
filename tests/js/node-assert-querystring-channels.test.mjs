// node:assert, node:querystring, node:diagnostics_channel, node:util/types, node:perf_hooks
// and node:console for pichamber, compared with Node's own modules on the same calls.
import { test } from "node:test";
import nodeAssert from "node:assert";
import * as nodeQs from "node:querystring";
import * as nodeChannels from "node:diagnostics_channel";
import * as nodeTypes from "node:util/types";
import assert, { strict, AssertionError } from "pichamber:node/assert";
import strictModule from "pichamber:node/assert-strict";
import * as qs from "pichamber:node/querystring";
import * as channels from "pichamber:node/diagnostics_channel";
import * as types from "pichamber:node/util-types";
import { performance } from "pichamber:node/perf_hooks";
import { Console } from "pichamber:node/console";

/** What a call does: "ok", or the thrown error's name, code and operator. */
function outcome(fn) {
  try {
    fn();
    return "ok";
  } catch (err) {
    return `${err.name} ${err.code} ${err.operator}`;
  }
}

test("assertions pass and fail as Node's do", () => {
  const cases = [
    (a) => a(1),
    (a) => a(0),
    (a) => a.ok(""),
    (a) => a.equal(1, "1"),
    (a) => a.equal(1, 2),
    (a) => a.notEqual(1, 2),
    (a) => a.strictEqual(NaN, NaN),
    (a) => a.strictEqual(1, "1"),
    (a) => a.notStrictEqual(1, 1),
    (a) => a.deepEqual({ a: [1, 2] }, { a: ["1", 2] }),
    (a) => a.deepStrictEqual({ a: [1, 2] }, { a: ["1", 2] }),
    (a) => a.deepStrictEqual(new Map([[1, { x: 1 }]]), new Map([[1, { x: 1 }]])),
    (a) => a.notDeepStrictEqual([1], [1]),
    (a) => a.match("abc", /b/),
    (a) => a.match("abc", /z/),
    (a) => a.doesNotMatch("abc", /b/),
    (a) => a.throws(() => { throw new TypeError("x"); }, TypeError),
    (a) => a.throws(() => { throw new TypeError("bad thing"); }, /bad/),
    (a) => a.throws(() => { throw new TypeError("x"); }, { name: "TypeError", message: "x" }),
    (a) => a.throws(() => {}),
    (a) => a.doesNotThrow(() => { throw new Error("no"); }),
    (a) => a.ifError(null),
    (a) => a.fail("stop"),
    (a) => a.strict.equal(1, "1"),
  ];
  for (const [i, call] of cases.entries()) {
    assert.equal(outcome(() => call(assert)), outcome(() => call(nodeAssert)), `case ${i}: ${call}`);
  }
  assert.equal(outcome(() => strictModule.deepEqual([1], ["1"])), outcome(() => nodeAssert.strict.deepEqual([1], ["1"])));
  const err = (() => { try { assert.strictEqual(1, 2, "custom"); } catch (e) { return e; } })();
  nodeAssert.ok(err instanceof AssertionError);
  nodeAssert.equal(err.message, "custom");
  nodeAssert.equal(err.actual, 1);
  nodeAssert.equal(err.expected, 2);
  nodeAssert.equal(strict.equal, strict.strictEqual);
});

test("rejects and doesNotReject settle as Node's do", async () => {
  const settle = (p) => p.then(() => "ok", (e) => `${e.name} ${e.code}`);
  const reject = () => Promise.reject(new RangeError("r"));
  for (const call of [
    (a) => a.rejects(reject, RangeError),
    (a) => a.rejects(Promise.resolve(1)),
    (a) => a.doesNotReject(reject),
  ]) {
    nodeAssert.equal(await settle(call(assert)), await settle(call(nodeAssert)), String(call));
  }
});

test("querystring parses and serialises as Node's", () => {
  for (const text of ["a=1&b=x&b=y", "q=hello+world&e=%C3%A9&empty=&flag", "a=%E0%A4%A&x=1", ""]) {
    nodeAssert.deepStrictEqual({ ...qs.parse(text) }, { ...nodeQs.parse(text) }, text);
  }
  nodeAssert.deepStrictEqual({ ...qs.parse("a:1;b:2", ";", ":") }, { ...nodeQs.parse("a:1;b:2", ";", ":") });
  for (const value of [{ a: 1, b: ["x", "y z"], c: "é!'()*", d: null, e: true }, {}]) {
    nodeAssert.equal(qs.stringify(value), nodeQs.stringify(value));
  }
  nodeAssert.equal(qs.escape("a b&c"), nodeQs.escape("a b&c"));
  nodeAssert.equal(qs.unescape("a%20b+c"), nodeQs.unescape("a%20b+c"));
});

test("diagnostics channels deliver as Node's", () => {
  for (const lib of [channels, nodeChannels]) {
    const seen = [];
    const ch = lib.channel("pichamber:test");
    nodeAssert.equal(ch.hasSubscribers, false);
    const listener = (message, name) => seen.push([message.n, name]);
    lib.subscribe("pichamber:test", listener);
    nodeAssert.equal(ch.hasSubscribers, true);
    nodeAssert.equal(lib.hasSubscribers("pichamber:test"), true);
    ch.publish({ n: 1 });
    nodeAssert.equal(lib.unsubscribe("pichamber:test", listener), true);
    ch.publish({ n: 2 });
    nodeAssert.deepStrictEqual(seen, [[1, "pichamber:test"]]);
    const traced = [];
    const tc = lib.tracingChannel("pichamber:trace");
    tc.subscribe({ start: () => traced.push("start"), end: () => traced.push("end") });
    nodeAssert.equal(tc.traceSync(() => 5), 5);
    nodeAssert.deepStrictEqual(traced, ["start", "end"]);
  }
});

test("util/types answers as Node's", () => {
  for (const value of [new Date(), /x/, new Map(), new Set(), new Uint8Array(1), Promise.resolve(), async () => {}, {}]) {
    for (const name of ["isDate", "isRegExp", "isMap", "isSet", "isUint8Array", "isTypedArray", "isPromise", "isAsyncFunction"]) {
      nodeAssert.equal(types[name](value), nodeTypes[name](value), `${name}(${value})`);
    }
  }
});

test("performance marks and measures; Console writes to its streams", () => {
  performance.mark("a", { startTime: 10 });
  performance.mark("b", { startTime: 25 });
  nodeAssert.equal(performance.measure("ab", "a", "b").duration, 15);
  nodeAssert.deepStrictEqual(performance.getEntriesByType("measure").map((e) => e.name), ["ab"]);
  const out = [];
  const err = [];
  const console = new Console({ write: (t) => out.push(t) }, { write: (t) => err.push(t) });
  console.log("x %d", 1);
  console.group("g");
  console.error("inner");
  nodeAssert.deepStrictEqual(out, ["x 1\n", "g\n"]);
  nodeAssert.deepStrictEqual(err, ["  inner\n"]);
});
