// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-buffer.js against Node's own Buffer.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as nodeBuffer from "node:buffer";
import bufferDefault, { Buffer, atob, btoa, isUtf8, isAscii } from "pichamber:node/buffer";

const NB = nodeBuffer.Buffer;
const strings = [
  "",
  "a",
  "hello world",
  "héllo wörld",
  "日本語テキスト",
  "emoji 😀👍🏽",
  "\u0000\u0001\u007f\u0080\u00ff",
  "a\ud800b",
  "\udc00",
  "x".repeat(1000),
  "ab\ncd\r\n",
];
const encodings = ["utf8", "utf-8", "hex", "base64", "base64url", "latin1", "binary", "ascii", "utf16le", "ucs2"];

test("from(string, enc) / toString(enc) match Node for all encodings", () => {
  for (const s of strings) {
    for (const enc of encodings) {
      const mine = Buffer.from(s, enc);
      const real = NB.from(s, enc);
      assert.deepEqual(Array.from(mine), Array.from(real), `from(${JSON.stringify(s)}, ${enc})`);
      for (const out of encodings) {
        assert.equal(mine.toString(out), real.toString(out), `from(${JSON.stringify(s)}, ${enc}).toString(${out})`);
      }
      assert.equal(Buffer.byteLength(s, enc), NB.byteLength(s, enc), `byteLength(${JSON.stringify(s)}, ${enc})`);
    }
  }
});

test("lenient hex and base64 decoding matches Node", () => {
  const hex = ["abz1", "abc", "ABCDEF", "0g", "", "  ff", "ff  "];
  for (const h of hex) assert.deepEqual(Array.from(Buffer.from(h, "hex")), Array.from(NB.from(h, "hex")), `hex ${h}`);
  const b64 = [
    "aGVsbG8=",
    "aGVsbG8",
    "aGV sbG8=",
    "aGVsbG8==",
    "a-_b",
    "YQ",
    "YQ=",
    "YQ==",
    "Y",
    "!!!!aGk=",
    "aGk=aGk=",
    "\naGk=\n",
    "/+/+",
    "_-_-",
  ];
  for (const b of b64) {
    assert.deepEqual(
      Array.from(Buffer.from(b, "base64")),
      Array.from(NB.from(b, "base64")),
      `base64 ${JSON.stringify(b)}`,
    );
    assert.deepEqual(
      Array.from(Buffer.from(b, "base64url")),
      Array.from(NB.from(b, "base64url")),
      `base64url ${JSON.stringify(b)}`,
    );
  }
});

test("binary data round trips and byte-level equality", () => {
  const bytes = Array.from({ length: 256 }, (_, i) => i);
  const mine = Buffer.from(bytes);
  const real = NB.from(bytes);
  for (const enc of encodings) assert.equal(mine.toString(enc), real.toString(enc), enc);
  assert.equal(mine.toString("utf8", 10, 100), real.toString("utf8", 10, 100));
  assert.deepEqual(Array.from(Buffer.from(mine.toString("base64"), "base64")), bytes);
  assert.deepEqual(Array.from(Buffer.from([256, -1, 3.7, "7"])), Array.from(NB.from([256, -1, 3.7, "7"])));
  const ab = new Uint8Array([1, 2, 3, 4, 5]).buffer;
  assert.deepEqual(Array.from(Buffer.from(ab, 1, 3)), Array.from(NB.from(ab, 1, 3)));
  assert.deepEqual(Array.from(Buffer.from(ab, 2)), Array.from(NB.from(ab, 2)));
});

test("alloc, concat, compare, equals, isBuffer, slice/subarray views", () => {
  assert.deepEqual(Array.from(Buffer.alloc(5, "ab")), Array.from(NB.alloc(5, "ab")));
  assert.deepEqual(Array.from(Buffer.alloc(4, 7)), Array.from(NB.alloc(4, 7)));
  assert.deepEqual(Array.from(Buffer.alloc(6, "aGk=", "base64")), Array.from(NB.alloc(6, "aGk=", "base64")));
  const a = Buffer.from("abc");
  const b = Buffer.from("abd");
  assert.equal(Buffer.compare(a, b), NB.compare(NB.from("abc"), NB.from("abd")));
  assert.equal(Buffer.compare(b, a), 1);
  assert.equal(Buffer.compare(a, Buffer.from("ab")), 1);
  assert.equal(a.equals(Buffer.from("abc")), true);
  assert.equal(a.equals(b), false);
  assert.equal(Buffer.isBuffer(a), true);
  assert.equal(Buffer.isBuffer(new Uint8Array(2)), false);
  assert.equal(Buffer.concat([a, b]).toString(), "abcabd");
  assert.equal(Buffer.concat([a, b], 4).toString(), "abca");
  assert.equal(Buffer.concat([a], 5).length, 5);
  const s = a.slice(1);
  assert.ok(s instanceof Buffer);
  s[0] = 0x7a;
  assert.equal(a.toString(), "azc", "slice is a view like Node's");
  assert.ok(a.subarray(0, 1) instanceof Buffer);
  assert.ok(a instanceof Uint8Array);
  assert.equal(Buffer.isEncoding("UTF-8"), true);
  assert.equal(Buffer.isEncoding("nope"), false);
  assert.throws(() => Buffer.from("x", "nope"), { code: "ERR_UNKNOWN_ENCODING" });
  assert.throws(() => Buffer.from(5), { code: "ERR_INVALID_ARG_TYPE" });
});

test("write, fill, indexOf, includes, copy, toJSON, numeric accessors match Node", () => {
  const mine = Buffer.alloc(10);
  const real = NB.alloc(10);
  assert.equal(mine.write("héllo", 2), real.write("héllo", 2));
  assert.deepEqual(Array.from(mine), Array.from(real));
  const m2 = Buffer.alloc(3);
  const r2 = NB.alloc(3);
  assert.equal(m2.write("a€"), r2.write("a€"), "partial characters are not written");
  assert.deepEqual(Array.from(m2), Array.from(r2));
  const hay = Buffer.from("hello world, hello");
  const rhay = NB.from("hello world, hello");
  for (const [needle, off] of [
    ["hello", 0],
    ["hello", 1],
    ["o", -3],
    ["zz", 0],
    ["", 3],
  ]) {
    assert.equal(hay.indexOf(needle, off), rhay.indexOf(needle, off), `indexOf(${needle}, ${off})`);
    assert.equal(hay.lastIndexOf(needle), rhay.lastIndexOf(needle), `lastIndexOf(${needle})`);
  }
  assert.equal(hay.indexOf(0x6f), rhay.indexOf(0x6f));
  assert.equal(hay.includes("world"), true);
  const target = Buffer.alloc(5);
  assert.equal(hay.copy(target, 1, 0, 3), 3);
  assert.equal(target.toString("latin1"), "\u0000hel\u0000");
  assert.deepEqual(Buffer.from("hi").toJSON(), NB.from("hi").toJSON());
  assert.deepEqual(JSON.parse(JSON.stringify(Buffer.from("hi"))), JSON.parse(JSON.stringify(NB.from("hi"))));
  const n = Buffer.alloc(16);
  const rn = NB.alloc(16);
  for (const [w, v, o] of [
    ["writeUInt32BE", 0xdeadbeef, 0],
    ["writeInt16LE", -2, 4],
    ["writeDoubleLE", Math.PI, 8],
  ]) {
    assert.equal(n[w](v, o), rn[w](v, o));
  }
  assert.deepEqual(Array.from(n), Array.from(rn));
  assert.equal(n.readUInt32BE(0), rn.readUInt32BE(0));
  assert.equal(n.readUint32LE(0), rn.readUint32LE(0));
  assert.equal(n.readInt16LE(4), -2);
  assert.equal(n.readDoubleLE(8), Math.PI);
  assert.throws(() => n.readUInt32LE(14), { code: "ERR_OUT_OF_RANGE" });
});

test("atob/btoa, isUtf8/isAscii, default export", () => {
  for (const s of ["", "a", "hello", "\u00ff\u0000"]) {
    assert.equal(btoa(s), globalThis.btoa(s));
    assert.equal(atob(btoa(s)), s);
  }
  assert.equal(atob(" aGk= "), globalThis.atob(" aGk= "));
  assert.throws(() => btoa("€"));
  assert.throws(() => atob("a"));
  assert.equal(isUtf8(Buffer.from("héllo")), nodeBuffer.isUtf8(NB.from("héllo")));
  assert.equal(isUtf8(new Uint8Array([0xff])), nodeBuffer.isUtf8(new Uint8Array([0xff])));
  assert.equal(isAscii(Buffer.from("abc")), true);
  assert.equal(isAscii(Buffer.from("é")), false);
  assert.equal(bufferDefault.Buffer, Buffer);
});
