// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-crypto.js against node:crypto.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as real from "node:crypto";
import crypto, {
  createHash,
  createHmac,
  randomUUID,
  randomBytes,
  getRandomValues,
  timingSafeEqual,
  pbkdf2Sync,
  randomInt,
  hash,
} from "pichamber:node/crypto";
import { Buffer } from "pichamber:node/buffer";

const ALGOS = ["md5", "sha1", "sha224", "sha256", "sha384", "sha512"];
const inputs = [
  "",
  "a",
  "abc",
  "The quick brown fox jumps over the lazy dog",
  "日本語 😀",
  "x".repeat(55),
  "x".repeat(56),
  "x".repeat(63),
  "x".repeat(64),
  "x".repeat(111),
  "x".repeat(112),
  "x".repeat(127),
  "x".repeat(128),
  "x".repeat(1000),
];

test("createHash digests match node:crypto (hex, base64, buffer, latin1)", () => {
  for (const algo of ALGOS) {
    for (const input of inputs) {
      assert.equal(
        createHash(algo).update(input).digest("hex"),
        real.createHash(algo).update(input).digest("hex"),
        `${algo}(${input.length})`,
      );
    }
    const big = real.randomBytes(5000);
    assert.equal(
      createHash(algo).update(big).digest("base64"),
      real.createHash(algo).update(big).digest("base64"),
      `${algo} binary`,
    );
    const d = createHash(algo).update("abc").digest();
    assert.ok(d instanceof Uint8Array && Buffer.isBuffer(d));
    assert.deepEqual(Array.from(d), Array.from(real.createHash(algo).update("abc").digest()));
    assert.equal(createHash(algo).update("abc").digest("latin1"), real.createHash(algo).update("abc").digest("latin1"));
    assert.equal(
      createHash(algo).update("abc").digest("base64url"),
      real.createHash(algo).update("abc").digest("base64url"),
    );
  }
});

test("incremental updates, input encodings, copy()", () => {
  const data = real.randomBytes(3000);
  for (const algo of ALGOS) {
    const h = createHash(algo);
    let pos = 0;
    for (const step of [1, 2, 3, 60, 61, 64, 127, 128, 500, 2054]) {
      h.update(data.subarray(pos, pos + step));
      pos += step;
    }
    assert.equal(h.digest("hex"), real.createHash(algo).update(data).digest("hex"), `${algo} chunked`);
    const base = createHash(algo).update("part1");
    const copy = base.copy();
    base.update("A");
    copy.update("B");
    assert.equal(base.digest("hex"), real.createHash(algo).update("part1A").digest("hex"));
    assert.equal(copy.digest("hex"), real.createHash(algo).update("part1B").digest("hex"));
  }
  assert.equal(
    createHash("sha256").update("68656c6c6f", "hex").digest("hex"),
    real.createHash("sha256").update("hello").digest("hex"),
  );
  assert.equal(
    createHash("SHA256")
      .update(new Uint16Array([1, 2]))
      .digest("hex"),
    real
      .createHash("sha256")
      .update(new Uint16Array([1, 2]))
      .digest("hex"),
  );
  const h = createHash("sha1");
  h.digest();
  assert.throws(() => h.update("x"), { code: "ERR_CRYPTO_HASH_FINALIZED" });
  assert.throws(() => createHash("whirlpool-9"), { code: "ERR_CRYPTO_INVALID_DIGEST" });
  assert.equal(hash("sha1", "abc"), real.createHash("sha1").update("abc").digest("hex"));
});

test("createHmac matches node:crypto, including long keys", () => {
  const keys = ["", "key", "k".repeat(64), "k".repeat(65), "k".repeat(200), real.randomBytes(129)];
  for (const algo of ALGOS) {
    for (const key of keys) {
      for (const input of ["", "message", "x".repeat(300)]) {
        assert.equal(
          createHmac(algo, key).update(input).digest("hex"),
          real.createHmac(algo, key).update(input).digest("hex"),
          `${algo} key=${key.length}`,
        );
      }
    }
  }
  assert.equal(
    createHmac("sha256", "k").update("a").update("b").digest("base64"),
    real.createHmac("sha256", "k").update("ab").digest("base64"),
  );
});

test("pbkdf2Sync matches node:crypto", () => {
  for (const [algo, len, iter] of [
    ["sha256", 32, 1],
    ["sha1", 20, 2],
    ["sha512", 100, 3],
    ["sha256", 70, 10],
  ]) {
    assert.equal(
      pbkdf2Sync("password", "salt", iter, len, algo).toString("hex"),
      real.pbkdf2Sync("password", "salt", iter, len, algo).toString("hex"),
    );
  }
});

test("random values come from the host and are well-formed", () => {
  const uuid = randomUUID();
  assert.match(uuid, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  assert.notEqual(randomUUID(), uuid);
  const b = randomBytes(70000);
  assert.ok(Buffer.isBuffer(b));
  assert.equal(b.length, 70000);
  assert.ok(new Set(b.subarray(0, 1000)).size > 100);
  const arr = getRandomValues(new Uint32Array(8));
  assert.ok(arr.some((x) => x !== 0));
  for (let i = 0; i < 50; i++) {
    const n = randomInt(5, 10);
    assert.ok(n >= 5 && n < 10 && Number.isInteger(n));
  }
  return new Promise((resolve, reject) => {
    randomBytes(8, (err, buf) => {
      try {
        assert.equal(err, null);
        assert.equal(buf.length, 8);
        resolve();
      } catch (e) {
        reject(e);
      }
    });
  });
});

test("timingSafeEqual and unsupported APIs", () => {
  assert.equal(timingSafeEqual(Buffer.from("abc"), Buffer.from("abc")), true);
  assert.equal(timingSafeEqual(Buffer.from("abc"), Buffer.from("abd")), false);
  assert.throws(() => timingSafeEqual(Buffer.from("a"), Buffer.from("ab")), {
    code: "ERR_CRYPTO_TIMING_SAFE_EQUAL_LENGTH",
  });
  assert.throws(() => crypto.createCipheriv("aes-256-gcm"), /not available inside a pichamber extension/);
  assert.equal(crypto.createHash, createHash);
  assert.deepEqual(crypto.getHashes(), ALGOS);
});
