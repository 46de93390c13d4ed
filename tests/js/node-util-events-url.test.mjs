// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-util.js, node-events.js, node-url.js, node-os.js and node-process.js against Node.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as realUtil from "node:util";
import { EventEmitter as RealEE } from "node:events";
import * as realUrl from "node:url";
import util, {
  promisify,
  callbackify,
  format,
  inspect,
  isDeepStrictEqual,
  types,
  inherits,
  deprecate,
} from "pichamber:node/util";
import EventEmitterDefault, { EventEmitter, once, on } from "pichamber:node/events";
import url, { fileURLToPath, pathToFileURL, URLPolyfill, URLSearchParamsPolyfill } from "pichamber:node/url";
import os from "pichamber:node/os";
import proc, { env, cwd, platform, nextTick } from "pichamber:node/process";

test("util.format matches Node", () => {
  const cases = [
    ["%s", "a"],
    ["%s:%s", "a"],
    ["%d", 42],
    ["%d", "42"],
    ["%d", -0],
    ["%i", 4.7],
    ["%f", "3.5"],
    ["%j", { a: 1 }],
    ["%s", 1n],
    ["%d", 5n],
    ["%%s", "x"],
    ["100%"],
    ["%c styled", "color: red"],
    ["a", "b", 3],
    ["%s", null],
    ["%s", undefined],
    ["%s", Symbol("s")],
    ["%o", 5],
    ["%s %s", "only-one"],
    ["no format", { x: [1, 2] }],
    [1, 2, "three"],
    ["%x", 1],
    ["%s", -0],
    ["%s", { a: 1 }],
    ["%s", [1, 2]],
    ["%s", new Error("boom").message],
    ["%O", { a: { b: 1 } }],
    ["%j", "str"],
    ["%s", true],
  ];
  for (const args of cases)
    assert.equal(
      format(...args),
      realUtil.format(...args),
      JSON.stringify(args, (_k, v) => (typeof v === "bigint" ? `${v}n` : typeof v === "symbol" ? String(v) : v)),
    );
  const circ = { a: 1 };
  circ.self = circ;
  assert.equal(format("%j", circ), realUtil.format("%j", circ));
});

test("util.inspect matches Node on common values", () => {
  class Foo {
    constructor() {
      this.x = 1;
    }
  }
  const nullProto = Object.create(null);
  nullProto.k = 1;
  const values = [
    1,
    -0,
    "str",
    "it's",
    'say "hi"',
    true,
    null,
    undefined,
    10n,
    Symbol("s"),
    [],
    {},
    [1, 2, 3],
    { a: 1, b: "two" },
    { nested: { deeper: { deepest: { gone: 1 } } } },
    [[1, [2, [3, [4]]]]],
    new Map([["a", 1]]),
    new Set([1, "x"]),
    new Foo(),
    nullProto,
    { "needs-quote": 1, valid_id: 2 },
    function named() {},
    () => {},
    class K {},
    new Date(0),
    /re/gi,
    [1, , 3],
    { f() {} },
    { [Symbol("k")]: 1 },
    new Uint8Array([1, 2]),
    { long: "x".repeat(100) },
    new Map(),
    new Set(),
    Object.assign([1, 2], { extra: true }),
    { a: [1, 2, { b: 3 }] },
  ];
  for (const v of values) assert.equal(inspect(v), realUtil.inspect(v), `inspect(${realUtil.inspect(v)})`);
  const circ = { name: "c" };
  circ.self = circ;
  assert.equal(inspect(circ), realUtil.inspect(circ));
  assert.equal(inspect({ a: { b: { c: 1 } } }, { depth: 0 }), realUtil.inspect({ a: { b: { c: 1 } } }, { depth: 0 }));
  assert.equal(inspect("x".repeat(5), { maxStringLength: 2 }), realUtil.inspect("x".repeat(5), { maxStringLength: 2 }));
  const custom = { [inspect.custom]: () => "CUSTOM" };
  assert.equal(inspect(custom), "CUSTOM");
  assert.equal(inspect.custom, realUtil.inspect.custom);
});

test("promisify/callbackify, including custom symbol", async () => {
  const cbFn = (a, b, cb) => setTimeout(() => (a < 0 ? cb(new Error("neg")) : cb(null, a + b)), 1);
  const p = promisify(cbFn);
  assert.equal(await p(1, 2), 3);
  await assert.rejects(p(-1, 2), /neg/);
  const withCustom = () => {};
  withCustom[promisify.custom] = async () => "custom";
  assert.equal(await promisify(withCustom)(), "custom");
  assert.equal(promisify.custom, realUtil.promisify.custom);
  const cbified = callbackify(async (x) => x * 2);
  const result = await new Promise((resolve, reject) => cbified(21, (err, v) => (err ? reject(err) : resolve(v))));
  assert.equal(result, 42);
  const failing = callbackify(async () => {
    throw new Error("bad");
  });
  const err = await new Promise((resolve) => failing((e) => resolve(e)));
  assert.match(err.message, /bad/);
});

test("isDeepStrictEqual matches Node", () => {
  const pairs = [
    [1, 1],
    [1, "1"],
    [NaN, NaN],
    [0, -0],
    [{ a: 1 }, { a: 1 }],
    [{ a: 1 }, { a: 2 }],
    [
      [1, 2],
      [1, 2],
    ],
    [
      [1, 2],
      [2, 1],
    ],
    [new Map([[1, { a: 1 }]]), new Map([[1, { a: 1 }]])],
    [new Set([1, 2]), new Set([2, 1])],
    [new Set([{}]), new Set([{}])],
    [new Date(1), new Date(1)],
    [new Date(1), new Date(2)],
    [/a/g, /a/g],
    [/a/g, /a/i],
    [{ a: undefined }, {}],
    [Object.create(null), {}],
    [new Uint8Array([1]), new Uint8Array([1])],
    [new Uint8Array([1]), new Uint16Array([1])],
    [
      [1, , 3],
      [1, undefined, 3],
    ],
    [new Error("x"), new Error("x")],
    [{ a: [{ b: new Map() }] }, { a: [{ b: new Map() }] }],
  ];
  for (const [a, b] of pairs)
    assert.equal(
      isDeepStrictEqual(a, b),
      realUtil.isDeepStrictEqual(a, b),
      `${realUtil.inspect(a)} vs ${realUtil.inspect(b)}`,
    );
});

test("util.types, inherits, deprecate, TextEncoder export", () => {
  assert.equal(types.isPromise(Promise.resolve()), true);
  assert.equal(
    types.isAsyncFunction(async () => {}),
    true,
  );
  assert.equal(
    types.isAsyncFunction(() => {}),
    false,
  );
  assert.equal(types.isRegExp(/x/), true);
  assert.equal(types.isUint8Array(new Uint8Array()), true);
  assert.equal(types.isTypedArray(new Float32Array()), true);
  assert.equal(types.isDate(new Date()), true);
  function A() {}
  function B() {}
  inherits(B, A);
  assert.ok(new B() instanceof A);
  assert.equal(B.super_, A);
  let warned = 0;
  const origWarn = process.emitWarning;
  process.emitWarning = () => warned++;
  try {
    const dep = deprecate(() => 5, "old");
    assert.equal(dep(), 5);
    dep();
  } finally {
    process.emitWarning = origWarn;
  }
  assert.equal(warned, 1);
  assert.equal(util.TextEncoder, globalThis.TextEncoder);
  assert.equal(
    util.stripVTControlCharacters("\x1b[31mred\x1b[39m"),
    realUtil.stripVTControlCharacters("\x1b[31mred\x1b[39m"),
  );
});

test("EventEmitter behaves like Node's", async () => {
  const log = [];
  const real = new RealEE();
  const mine = new EventEmitter();
  for (const ee of [real, mine]) {
    const out = [];
    const h = (x) => out.push(`h${x}`);
    ee.on("e", h);
    ee.prependListener("e", (x) => out.push(`p${x}`));
    ee.once("e", (x) => out.push(`o${x}`));
    ee.emit("e", 1);
    ee.emit("e", 2);
    ee.off("e", h);
    ee.emit("e", 3);
    out.push(ee.listenerCount("e"), ee.eventNames().length, ee.emit("nothing"));
    ee.removeAllListeners();
    out.push(ee.listenerCount("e"));
    const removed = [];
    ee.on("removeListener", (n) => removed.push(n));
    ee.on("x", h);
    ee.removeListener("x", h);
    out.push(removed.join(","));
    log.push(out);
  }
  assert.deepEqual(log[1], log[0]);
  assert.throws(() => mine.emit("error", new Error("unhandled")), /unhandled/);
  assert.throws(() => mine.emit("error", "str"), { code: "ERR_UNHANDLED_ERROR" });
  setTimeout(() => mine.emit("ready", 1, 2), 1);
  assert.deepEqual(await once(mine, "ready"), [1, 2]);
  setTimeout(() => mine.emit("error", new Error("failed")), 1);
  await assert.rejects(once(mine, "never"), /failed/);
  assert.equal(EventEmitterDefault, EventEmitter);
  assert.equal(EventEmitter.EventEmitter, EventEmitter);
  class Sub extends EventEmitter {}
  const s = new Sub();
  let got = 0;
  s.on("a", () => got++);
  s.emit("a");
  assert.equal(got, 1);
  const it = on(mine, "tick");
  setTimeout(() => {
    mine.emit("tick", "a");
    mine.emit("tick", "b");
  }, 1);
  const seen = [];
  for await (const [v] of it) {
    seen.push(v);
    if (seen.length === 2) break;
  }
  assert.deepEqual(seen, ["a", "b"]);
});

test("fileURLToPath / pathToFileURL match Node", () => {
  for (const p of [
    "/a/b",
    "/a b/c",
    "/x/%20/y",
    "/ü/ñ",
    "/a/b/",
    "/q?x#y",
    "/tab\tnew\nline",
    "/back\\slash",
    "relative/x",
    "/a/./b/../c",
  ]) {
    assert.equal(pathToFileURL(p).href, realUrl.pathToFileURL(p).href, `pathToFileURL(${JSON.stringify(p)})`);
    assert.equal(fileURLToPath(pathToFileURL(p)), realUrl.fileURLToPath(realUrl.pathToFileURL(p)));
  }
  for (const u of ["file:///a/b", "file:///a%20b", "file://localhost/etc/x", "file:///%E2%82%AC"]) {
    assert.equal(fileURLToPath(u), realUrl.fileURLToPath(u), u);
  }
  assert.throws(() => fileURLToPath("http://x/y"), { code: "ERR_INVALID_URL_SCHEME" });
  assert.throws(() => fileURLToPath("file://host/y"), { code: "ERR_INVALID_FILE_URL_HOST" });
  assert.throws(() => fileURLToPath("file:///a%2fb"), { code: "ERR_INVALID_FILE_URL_PATH" });
});

test("URL polyfill matches the WHATWG URL on common inputs", () => {
  const cases = [
    ["https://example.com"],
    ["https://Example.COM:443/a/../b/./c?q=1#frag"],
    ["http://user:pa ss@host:8080/p a t h?x=a b#h h"],
    ["file:///home/user/x.ts"],
    ["file:/x"],
    ["file://localhost/x"],
    ["mailto:someone@example.com"],
    ["data:text/plain,hi"],
    ["../c/d?z", "https://h.com/a/b/e"],
    ["/root", "https://h.com/a/b"],
    ["?q=2", "https://h.com/a/b?q=1#f"],
    ["#x", "https://h.com/a"],
    ["//other.com/p", "https://h.com/"],
    ["x", "file:///dir/file.ts"],
    ["https://h.com/%7Efoo/ü"],
    ["HTTP://H.COM:80/"],
    ["ws://h:81/s"],
    ["foo://bar/baz"],
    ["foo:/bar/baz"],
    ["https://h.com/a?b=c&d=é"],
    ["https://h.com\\a\\b"],
  ];
  for (const [input, base] of cases) {
    const mine = new URLPolyfill(input, base);
    const real = new URL(input, base);
    for (const k of [
      "href",
      "protocol",
      "username",
      "password",
      "host",
      "hostname",
      "port",
      "pathname",
      "search",
      "hash",
      "origin",
    ]) {
      assert.equal(mine[k], real[k], `${k} of ${input} (base ${base})`);
    }
    assert.deepEqual([...mine.searchParams], [...real.searchParams]);
  }
  for (const bad of ["", "no-scheme", "http://", "https://h:99999/"]) {
    assert.throws(() => new URLPolyfill(bad), { code: "ERR_INVALID_URL" }, bad);
  }
  const u = new URLPolyfill("https://h.com/p?a=1");
  u.searchParams.append("b", "x y");
  assert.equal(u.href, "https://h.com/p?a=1&b=x+y");
  u.pathname = "/new path";
  u.hash = "top";
  assert.equal(u.href, new URL("https://h.com/new%20path?a=1&b=x+y#top").href);
  const sp = new URLSearchParamsPolyfill("a=1&b=2&a=3&c=%20d+e");
  const rsp = new URLSearchParams("a=1&b=2&a=3&c=%20d+e");
  assert.deepEqual(sp.getAll("a"), rsp.getAll("a"));
  assert.equal(sp.get("c"), rsp.get("c"));
  sp.set("a", "z");
  rsp.set("a", "z");
  sp.sort();
  rsp.sort();
  assert.equal(sp.toString(), rsp.toString());
  assert.equal(
    new URLSearchParamsPolyfill({ x: "1 2", y: "&" }).toString(),
    new URLSearchParams({ x: "1 2", y: "&" }).toString(),
  );
  assert.equal(url.URL, globalThis.URL, "uses the global URL when present");
});

test("os and process modules", () => {
  assert.equal(os.homedir(), process.env.HOME || "/");
  assert.equal(
    os.tmpdir(),
    (process.env.TMPDIR || process.env.TMP || process.env.TEMP || "/tmp").replace(/(.)\/$/, "$1"),
  );
  assert.equal(os.EOL, "\n");
  assert.equal(os.platform(), process.platform);
  assert.equal(os.hostname(), "pichamber");
  assert.deepEqual(os.cpus(), []);
  assert.equal(typeof os.totalmem(), "number");
  assert.equal(os.userInfo().homedir, os.homedir());
  assert.equal(proc, process);
  assert.equal(env, process.env);
  assert.equal(cwd(), process.cwd());
  assert.equal(platform, process.platform);
  return new Promise((resolve) => nextTick(resolve));
});
