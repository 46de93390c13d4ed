// node:crypto for pichamber: pure-JS MD5, SHA-1, SHA-224/256, SHA-384/512 with createHash and
// createHmac, pbkdf2, and random values from the host (`__host("randomBytes", [n])`).
// QuickJS has no WebCrypto; ciphers, keys and signatures are not provided.

import { Buffer } from "pichamber:node/buffer";

// ---- random ------------------------------------------------------------------------------

const HOST_CHUNK = 65536;

function hostRandom(n) {
  const out = new Uint8Array(n);
  let off = 0;
  while (off < n) {
    const take = Math.min(HOST_CHUNK, n - off);
    const host = globalThis.__host;
    if (typeof host !== "function") throw new Error("crypto random source is not available (no host)");
    const arr = JSON.parse(host("randomBytes", [take]));
    if (!Array.isArray(arr) || arr.length !== take) throw new Error("crypto random source returned a short read");
    out.set(arr, off);
    off += take;
  }
  return out;
}

function rangeError(name, range, value) {
  const err = new RangeError(`The value of "${name}" is out of range. It must be ${range}. Received ${value}`);
  err.code = "ERR_OUT_OF_RANGE";
  return err;
}

function typeError(code, message) {
  const err = new TypeError(message);
  err.code = code;
  return err;
}

export function randomBytes(size, callback) {
  if (typeof size !== "number" || Number.isNaN(size)) {
    throw typeError("ERR_INVALID_ARG_TYPE", `The "size" argument must be of type number. Received ${typeof size}`);
  }
  if (size < 0 || size > 2 ** 31 - 1) throw rangeError("size", ">= 0 && <= 2147483647", size);
  if (typeof callback === "function") {
    let buf;
    try {
      buf = Buffer.from(hostRandom(size));
    } catch (err) {
      queueMicrotask(() => callback(err));
      return;
    }
    queueMicrotask(() => callback(null, buf));
    return;
  }
  const bytes = hostRandom(size);
  return new Buffer(bytes.buffer, bytes.byteOffset, bytes.length);
}

export const pseudoRandomBytes = randomBytes;
export const prng = randomBytes;
export const rng = randomBytes;

export function randomFillSync(buf, offset = 0, size) {
  const view = new Uint8Array(buf.buffer ?? buf, buf.byteOffset ?? 0, buf.byteLength);
  if (size === undefined) size = view.length - offset;
  view.set(hostRandom(size), offset);
  return buf;
}

export function randomFill(buf, offset, size, callback) {
  if (typeof offset === "function") {
    callback = offset;
    offset = 0;
    size = undefined;
  } else if (typeof size === "function") {
    callback = size;
    size = undefined;
  }
  try {
    randomFillSync(buf, offset, size);
  } catch (err) {
    queueMicrotask(() => callback(err));
    return;
  }
  queueMicrotask(() => callback(null, buf));
}

export function getRandomValues(typedArray) {
  if (
    !ArrayBuffer.isView(typedArray) ||
    typedArray instanceof Float32Array ||
    typedArray instanceof Float64Array ||
    typedArray instanceof DataView
  ) {
    const err = new TypeError("The data argument must be an integer-type TypedArray");
    err.name = "TypeMismatchError";
    throw err;
  }
  if (typedArray.byteLength > 65536) {
    const err = new Error(
      `The ArrayBufferView's byte length (${typedArray.byteLength}) exceeds the number of bytes of entropy available via this API (65536)`,
    );
    err.name = "QuotaExceededError";
    throw err;
  }
  new Uint8Array(typedArray.buffer, typedArray.byteOffset, typedArray.byteLength).set(
    hostRandom(typedArray.byteLength),
  );
  return typedArray;
}

export function randomUUID(_options) {
  const b = hostRandom(16);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  const h = Array.from(b, (x) => x.toString(16).padStart(2, "0")).join("");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

export function randomInt(min, max, callback) {
  if (typeof max === "function" || max === undefined) {
    callback = max;
    max = min;
    min = 0;
  }
  if (!Number.isSafeInteger(min))
    throw typeError("ERR_INVALID_ARG_TYPE", `The "min" argument must be a safe integer. Received ${min}`);
  if (!Number.isSafeInteger(max))
    throw typeError("ERR_INVALID_ARG_TYPE", `The "max" argument must be a safe integer. Received ${max}`);
  if (max <= min) throw rangeError("max", `greater than the value of "min" (${min})`, max);
  const range = max - min;
  if (range > 2 ** 48) throw rangeError("max - min", "<= 281474976710655", range);
  const limit = 2 ** 48 - (2 ** 48 % range);
  let x;
  do {
    const b = hostRandom(6);
    x = b[0] * 2 ** 40 + b[1] * 2 ** 32 + b[2] * 2 ** 24 + b[3] * 2 ** 16 + b[4] * 2 ** 8 + b[5];
  } while (x >= limit);
  const n = min + (x % range);
  if (typeof callback === "function") {
    queueMicrotask(() => callback(null, n));
    return;
  }
  return n;
}

export function timingSafeEqual(a, b) {
  if (!ArrayBuffer.isView(a) && !(a instanceof ArrayBuffer)) {
    throw typeError(
      "ERR_INVALID_ARG_TYPE",
      'The "buf1" argument must be an instance of ArrayBuffer, Buffer, TypedArray, or DataView.',
    );
  }
  if (!ArrayBuffer.isView(b) && !(b instanceof ArrayBuffer)) {
    throw typeError(
      "ERR_INVALID_ARG_TYPE",
      'The "buf2" argument must be an instance of ArrayBuffer, Buffer, TypedArray, or DataView.',
    );
  }
  const x = toBytes(a);
  const y = toBytes(b);
  if (x.length !== y.length) {
    const err = new RangeError("Input buffers must have the same byte length");
    err.code = "ERR_CRYPTO_TIMING_SAFE_EQUAL_LENGTH";
    throw err;
  }
  let diff = 0;
  for (let i = 0; i < x.length; i++) diff |= x[i] ^ y[i];
  return diff === 0;
}

function toBytes(data, encoding) {
  if (typeof data === "string") return Buffer.from(data, encoding ?? "utf8");
  if (data instanceof Uint8Array) return data;
  if (ArrayBuffer.isView(data)) return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer) return new Uint8Array(data);
  throw typeError(
    "ERR_INVALID_ARG_TYPE",
    `The "data" argument must be of type string or an instance of Buffer, TypedArray, or DataView. Received ${data === null ? "null" : typeof data}`,
  );
}

// ---- hash cores --------------------------------------------------------------------------
// Each core: { blockSize, outputSize, init(), compress(state, block, offset), finalState(state) }

class BlockHash {
  constructor(core, state, buffer, bufLen, total) {
    this.core = core;
    this.state = state ?? core.init();
    this.buffer = buffer ?? new Uint8Array(core.blockSize);
    this.bufLen = bufLen ?? 0;
    this.total = total ?? 0;
  }

  update(bytes) {
    const bs = this.core.blockSize;
    let i = 0;
    this.total += bytes.length;
    if (this.bufLen > 0) {
      const take = Math.min(bs - this.bufLen, bytes.length);
      this.buffer.set(bytes.subarray(0, take), this.bufLen);
      this.bufLen += take;
      i = take;
      if (this.bufLen === bs) {
        this.core.compress(this.state, this.buffer, 0);
        this.bufLen = 0;
      }
    }
    for (; i + bs <= bytes.length; i += bs) this.core.compress(this.state, bytes, i);
    if (i < bytes.length) {
      this.buffer.set(bytes.subarray(i), 0);
      this.bufLen = bytes.length - i;
    }
  }

  digest() {
    const core = this.core;
    const bs = core.blockSize;
    const lenBytes = bs === 128 ? 16 : 8;
    const padLen = this.bufLen < bs - lenBytes ? bs - this.bufLen : 2 * bs - this.bufLen;
    const pad = new Uint8Array(padLen);
    pad[0] = 0x80;
    const bitLenHi = Math.floor(this.total / 0x20000000);
    const bitLenLo = (this.total * 8) >>> 0;
    if (core.littleEndian) {
      pad[padLen - 8] = bitLenLo & 0xff;
      pad[padLen - 7] = (bitLenLo >>> 8) & 0xff;
      pad[padLen - 6] = (bitLenLo >>> 16) & 0xff;
      pad[padLen - 5] = (bitLenLo >>> 24) & 0xff;
      pad[padLen - 4] = bitLenHi & 0xff;
      pad[padLen - 3] = (bitLenHi >>> 8) & 0xff;
      pad[padLen - 2] = (bitLenHi >>> 16) & 0xff;
      pad[padLen - 1] = (bitLenHi >>> 24) & 0xff;
    } else {
      pad[padLen - 8] = (bitLenHi >>> 24) & 0xff;
      pad[padLen - 7] = (bitLenHi >>> 16) & 0xff;
      pad[padLen - 6] = (bitLenHi >>> 8) & 0xff;
      pad[padLen - 5] = bitLenHi & 0xff;
      pad[padLen - 4] = (bitLenLo >>> 24) & 0xff;
      pad[padLen - 3] = (bitLenLo >>> 16) & 0xff;
      pad[padLen - 2] = (bitLenLo >>> 8) & 0xff;
      pad[padLen - 1] = bitLenLo & 0xff;
    }
    const total = this.total;
    this.update(pad);
    this.total = total;
    return core.output(this.state);
  }

  clone() {
    return new BlockHash(this.core, this.state.slice(), this.buffer.slice(), this.bufLen, this.total);
  }
}

function wordsOut(words, count, littleEndian) {
  const out = new Uint8Array(count * 4);
  for (let i = 0; i < count; i++) {
    const w = words[i];
    if (littleEndian) {
      out[i * 4] = w & 0xff;
      out[i * 4 + 1] = (w >>> 8) & 0xff;
      out[i * 4 + 2] = (w >>> 16) & 0xff;
      out[i * 4 + 3] = (w >>> 24) & 0xff;
    } else {
      out[i * 4] = (w >>> 24) & 0xff;
      out[i * 4 + 1] = (w >>> 16) & 0xff;
      out[i * 4 + 2] = (w >>> 8) & 0xff;
      out[i * 4 + 3] = w & 0xff;
    }
  }
  return out;
}

// MD5
const MD5_S = [
  7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20, 4,
  11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21, 6, 10, 15, 21,
];
const MD5_K = new Int32Array(64);
for (let i = 0; i < 64; i++) MD5_K[i] = Math.floor(Math.abs(Math.sin(i + 1)) * 2 ** 32) | 0;
const md5Words = new Int32Array(16);
const MD5 = {
  blockSize: 64,
  outputSize: 16,
  littleEndian: true,
  init: () => new Int32Array([0x67452301, 0xefcdab89 | 0, 0x98badcfe | 0, 0x10325476]),
  compress(s, b, o) {
    const M = md5Words;
    for (let i = 0; i < 16; i++)
      M[i] = b[o + i * 4] | (b[o + i * 4 + 1] << 8) | (b[o + i * 4 + 2] << 16) | (b[o + i * 4 + 3] << 24);
    let a = s[0];
    let bb = s[1];
    let c = s[2];
    let d = s[3];
    for (let i = 0; i < 64; i++) {
      let f;
      let g;
      if (i < 16) {
        f = (bb & c) | (~bb & d);
        g = i;
      } else if (i < 32) {
        f = (d & bb) | (~d & c);
        g = (5 * i + 1) & 15;
      } else if (i < 48) {
        f = bb ^ c ^ d;
        g = (3 * i + 5) & 15;
      } else {
        f = c ^ (bb | ~d);
        g = (7 * i) & 15;
      }
      const tmp = d;
      d = c;
      c = bb;
      const x = (a + f + MD5_K[i] + M[g]) | 0;
      bb = (bb + ((x << MD5_S[i]) | (x >>> (32 - MD5_S[i])))) | 0;
      a = tmp;
    }
    s[0] = (s[0] + a) | 0;
    s[1] = (s[1] + bb) | 0;
    s[2] = (s[2] + c) | 0;
    s[3] = (s[3] + d) | 0;
  },
  output: (s) => wordsOut(s, 4, true),
};

// SHA-1
const sha1W = new Int32Array(80);
const SHA1 = {
  blockSize: 64,
  outputSize: 20,
  init: () => new Int32Array([0x67452301, 0xefcdab89 | 0, 0x98badcfe | 0, 0x10325476, 0xc3d2e1f0 | 0]),
  compress(s, b, o) {
    const W = sha1W;
    for (let i = 0; i < 16; i++)
      W[i] = (b[o + i * 4] << 24) | (b[o + i * 4 + 1] << 16) | (b[o + i * 4 + 2] << 8) | b[o + i * 4 + 3];
    for (let i = 16; i < 80; i++) {
      const x = W[i - 3] ^ W[i - 8] ^ W[i - 14] ^ W[i - 16];
      W[i] = (x << 1) | (x >>> 31);
    }
    let a = s[0];
    let bb = s[1];
    let c = s[2];
    let d = s[3];
    let e = s[4];
    for (let i = 0; i < 80; i++) {
      let f;
      let k;
      if (i < 20) {
        f = (bb & c) | (~bb & d);
        k = 0x5a827999;
      } else if (i < 40) {
        f = bb ^ c ^ d;
        k = 0x6ed9eba1;
      } else if (i < 60) {
        f = (bb & c) | (bb & d) | (c & d);
        k = 0x8f1bbcdc | 0;
      } else {
        f = bb ^ c ^ d;
        k = 0xca62c1d6 | 0;
      }
      const t = (((a << 5) | (a >>> 27)) + f + e + k + W[i]) | 0;
      e = d;
      d = c;
      c = (bb << 30) | (bb >>> 2);
      bb = a;
      a = t;
    }
    s[0] = (s[0] + a) | 0;
    s[1] = (s[1] + bb) | 0;
    s[2] = (s[2] + c) | 0;
    s[3] = (s[3] + d) | 0;
    s[4] = (s[4] + e) | 0;
  },
  output: (s) => wordsOut(s, 5, false),
};

// SHA-256 / SHA-224
const K256 = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
]);
const sha256W = new Int32Array(64);
function sha256Compress(s, b, o) {
  const W = sha256W;
  for (let i = 0; i < 16; i++)
    W[i] = (b[o + i * 4] << 24) | (b[o + i * 4 + 1] << 16) | (b[o + i * 4 + 2] << 8) | b[o + i * 4 + 3];
  for (let i = 16; i < 64; i++) {
    const x = W[i - 15];
    const y = W[i - 2];
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3);
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10);
    W[i] = (W[i - 16] + s0 + W[i - 7] + s1) | 0;
  }
  let a = s[0];
  let bb = s[1];
  let c = s[2];
  let d = s[3];
  let e = s[4];
  let f = s[5];
  let g = s[6];
  let h = s[7];
  for (let i = 0; i < 64; i++) {
    const S1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7));
    const ch = (e & f) ^ (~e & g);
    const t1 = (h + S1 + ch + K256[i] + W[i]) | 0;
    const S0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10));
    const maj = (a & bb) ^ (a & c) ^ (bb & c);
    const t2 = (S0 + maj) | 0;
    h = g;
    g = f;
    f = e;
    e = (d + t1) | 0;
    d = c;
    c = bb;
    bb = a;
    a = (t1 + t2) | 0;
  }
  s[0] = (s[0] + a) | 0;
  s[1] = (s[1] + bb) | 0;
  s[2] = (s[2] + c) | 0;
  s[3] = (s[3] + d) | 0;
  s[4] = (s[4] + e) | 0;
  s[5] = (s[5] + f) | 0;
  s[6] = (s[6] + g) | 0;
  s[7] = (s[7] + h) | 0;
}
const SHA256 = {
  blockSize: 64,
  outputSize: 32,
  init: () =>
    new Int32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]),
  compress: sha256Compress,
  output: (s) => wordsOut(s, 8, false),
};
const SHA224 = {
  ...SHA256,
  outputSize: 28,
  init: () =>
    new Int32Array([0xc1059ed8, 0x367cd507, 0x3070dd17, 0xf70e5939, 0xffc00b31, 0x68581511, 0x64f98fa7, 0xbefa4fa4]),
  output: (s) => wordsOut(s, 7, false),
};

// SHA-512 / SHA-384 on 32-bit halves (state: 16 Int32 = 8 x [hi, lo])
const K512 = new Int32Array([
  0x428a2f98, 0xd728ae22, 0x71374491, 0x23ef65cd, 0xb5c0fbcf, 0xec4d3b2f, 0xe9b5dba5, 0x8189dbbc, 0x3956c25b,
  0xf348b538, 0x59f111f1, 0xb605d019, 0x923f82a4, 0xaf194f9b, 0xab1c5ed5, 0xda6d8118, 0xd807aa98, 0xa3030242,
  0x12835b01, 0x45706fbe, 0x243185be, 0x4ee4b28c, 0x550c7dc3, 0xd5ffb4e2, 0x72be5d74, 0xf27b896f, 0x80deb1fe,
  0x3b1696b1, 0x9bdc06a7, 0x25c71235, 0xc19bf174, 0xcf692694, 0xe49b69c1, 0x9ef14ad2, 0xefbe4786, 0x384f25e3,
  0x0fc19dc6, 0x8b8cd5b5, 0x240ca1cc, 0x77ac9c65, 0x2de92c6f, 0x592b0275, 0x4a7484aa, 0x6ea6e483, 0x5cb0a9dc,
  0xbd41fbd4, 0x76f988da, 0x831153b5, 0x983e5152, 0xee66dfab, 0xa831c66d, 0x2db43210, 0xb00327c8, 0x98fb213f,
  0xbf597fc7, 0xbeef0ee4, 0xc6e00bf3, 0x3da88fc2, 0xd5a79147, 0x930aa725, 0x06ca6351, 0xe003826f, 0x14292967,
  0x0a0e6e70, 0x27b70a85, 0x46d22ffc, 0x2e1b2138, 0x5c26c926, 0x4d2c6dfc, 0x5ac42aed, 0x53380d13, 0x9d95b3df,
  0x650a7354, 0x8baf63de, 0x766a0abb, 0x3c77b2a8, 0x81c2c92e, 0x47edaee6, 0x92722c85, 0x1482353b, 0xa2bfe8a1,
  0x4cf10364, 0xa81a664b, 0xbc423001, 0xc24b8b70, 0xd0f89791, 0xc76c51a3, 0x0654be30, 0xd192e819, 0xd6ef5218,
  0xd6990624, 0x5565a910, 0xf40e3585, 0x5771202a, 0x106aa070, 0x32bbd1b8, 0x19a4c116, 0xb8d2d0c8, 0x1e376c08,
  0x5141ab53, 0x2748774c, 0xdf8eeb99, 0x34b0bcb5, 0xe19b48a8, 0x391c0cb3, 0xc5c95a63, 0x4ed8aa4a, 0xe3418acb,
  0x5b9cca4f, 0x7763e373, 0x682e6ff3, 0xd6b2b8a3, 0x748f82ee, 0x5defb2fc, 0x78a5636f, 0x43172f60, 0x84c87814,
  0xa1f0ab72, 0x8cc70208, 0x1a6439ec, 0x90befffa, 0x23631e28, 0xa4506ceb, 0xde82bde9, 0xbef9a3f7, 0xb2c67915,
  0xc67178f2, 0xe372532b, 0xca273ece, 0xea26619c, 0xd186b8c7, 0x21c0c207, 0xeada7dd6, 0xcde0eb1e, 0xf57d4f7f,
  0xee6ed178, 0x06f067aa, 0x72176fba, 0x0a637dc5, 0xa2c898a6, 0x113f9804, 0xbef90dae, 0x1b710b35, 0x131c471b,
  0x28db77f5, 0x23047d84, 0x32caab7b, 0x40c72493, 0x3c9ebe0a, 0x15c9bebc, 0x431d67c4, 0x9c100d4c, 0x4cc5d4be,
  0xcb3e42b6, 0x597f299c, 0xfc657e2a, 0x5fcb6fab, 0x3ad6faec, 0x6c44198c, 0x4a475817,
]);
const W512 = new Int32Array(160);
function sha512Compress(s, b, o) {
  const W = W512;
  for (let i = 0; i < 32; i++)
    W[i] = (b[o + i * 4] << 24) | (b[o + i * 4 + 1] << 16) | (b[o + i * 4 + 2] << 8) | b[o + i * 4 + 3];
  for (let i = 16; i < 80; i++) {
    // sigma0(W[i-15])
    let xh = W[(i - 15) * 2];
    let xl = W[(i - 15) * 2 + 1];
    const s0h = ((xh >>> 1) | (xl << 31)) ^ ((xh >>> 8) | (xl << 24)) ^ (xh >>> 7);
    const s0l = ((xl >>> 1) | (xh << 31)) ^ ((xl >>> 8) | (xh << 24)) ^ ((xl >>> 7) | (xh << 25));
    // sigma1(W[i-2])
    xh = W[(i - 2) * 2];
    xl = W[(i - 2) * 2 + 1];
    const s1h = ((xh >>> 19) | (xl << 13)) ^ ((xl >>> 29) | (xh << 3)) ^ (xh >>> 6);
    const s1l = ((xl >>> 19) | (xh << 13)) ^ ((xh >>> 29) | (xl << 3)) ^ ((xl >>> 6) | (xh << 26));
    // W[i] = W[i-16] + s0 + W[i-7] + s1
    let lo = (W[(i - 16) * 2 + 1] >>> 0) + (s0l >>> 0) + (W[(i - 7) * 2 + 1] >>> 0) + (s1l >>> 0);
    const hi = W[(i - 16) * 2] + s0h + W[(i - 7) * 2] + s1h + Math.floor(lo / 0x100000000);
    W[i * 2] = hi | 0;
    W[i * 2 + 1] = lo | 0;
  }
  let ah = s[0],
    al = s[1],
    bh = s[2],
    bl = s[3],
    ch = s[4],
    cl = s[5],
    dh = s[6],
    dl = s[7];
  let eh = s[8],
    el = s[9],
    fh = s[10],
    fl = s[11],
    gh = s[12],
    gl = s[13],
    hh = s[14],
    hl = s[15];
  for (let i = 0; i < 80; i++) {
    // Sigma1(e)
    const S1h = ((eh >>> 14) | (el << 18)) ^ ((eh >>> 18) | (el << 14)) ^ ((el >>> 9) | (eh << 23));
    const S1l = ((el >>> 14) | (eh << 18)) ^ ((el >>> 18) | (eh << 14)) ^ ((eh >>> 9) | (el << 23));
    const chh = (eh & fh) ^ (~eh & gh);
    const chl = (el & fl) ^ (~el & gl);
    // t1 = h + S1 + ch + K[i] + W[i]
    let lo = (hl >>> 0) + (S1l >>> 0) + (chl >>> 0) + (K512[i * 2 + 1] >>> 0) + (W[i * 2 + 1] >>> 0);
    const t1h = (hh + S1h + chh + K512[i * 2] + W[i * 2] + Math.floor(lo / 0x100000000)) | 0;
    const t1l = lo | 0;
    // Sigma0(a)
    const S0h = ((ah >>> 28) | (al << 4)) ^ ((al >>> 2) | (ah << 30)) ^ ((al >>> 7) | (ah << 25));
    const S0l = ((al >>> 28) | (ah << 4)) ^ ((ah >>> 2) | (al << 30)) ^ ((ah >>> 7) | (al << 25));
    const majh = (ah & bh) ^ (ah & ch) ^ (bh & ch);
    const majl = (al & bl) ^ (al & cl) ^ (bl & cl);
    lo = (S0l >>> 0) + (majl >>> 0);
    const t2h = (S0h + majh + Math.floor(lo / 0x100000000)) | 0;
    const t2l = lo | 0;
    hh = gh;
    hl = gl;
    gh = fh;
    gl = fl;
    fh = eh;
    fl = el;
    lo = (dl >>> 0) + (t1l >>> 0);
    eh = (dh + t1h + Math.floor(lo / 0x100000000)) | 0;
    el = lo | 0;
    dh = ch;
    dl = cl;
    ch = bh;
    cl = bl;
    bh = ah;
    bl = al;
    lo = (t1l >>> 0) + (t2l >>> 0);
    ah = (t1h + t2h + Math.floor(lo / 0x100000000)) | 0;
    al = lo | 0;
  }
  const add = (i, h, l) => {
    const lo = (s[i + 1] >>> 0) + (l >>> 0);
    s[i] = (s[i] + h + Math.floor(lo / 0x100000000)) | 0;
    s[i + 1] = lo | 0;
  };
  add(0, ah, al);
  add(2, bh, bl);
  add(4, ch, cl);
  add(6, dh, dl);
  add(8, eh, el);
  add(10, fh, fl);
  add(12, gh, gl);
  add(14, hh, hl);
}
const SHA512 = {
  blockSize: 128,
  outputSize: 64,
  init: () =>
    new Int32Array([
      0x6a09e667, 0xf3bcc908, 0xbb67ae85, 0x84caa73b, 0x3c6ef372, 0xfe94f82b, 0xa54ff53a, 0x5f1d36f1, 0x510e527f,
      0xade682d1, 0x9b05688c, 0x2b3e6c1f, 0x1f83d9ab, 0xfb41bd6b, 0x5be0cd19, 0x137e2179,
    ]),
  compress: sha512Compress,
  output: (s) => wordsOut(s, 16, false),
};
const SHA384 = {
  ...SHA512,
  outputSize: 48,
  init: () =>
    new Int32Array([
      0xcbbb9d5d, 0xc1059ed8, 0x629a292a, 0x367cd507, 0x9159015a, 0x3070dd17, 0x152fecd8, 0xf70e5939, 0x67332667,
      0xffc00b31, 0x8eb44a87, 0x68581511, 0xdb0c2e0d, 0x64f98fa7, 0x47b5481d, 0xbefa4fa4,
    ]),
  output: (s) => wordsOut(s, 12, false),
};

const CORES = {
  md5: MD5,
  sha1: SHA1,
  sha224: SHA224,
  sha256: SHA256,
  sha384: SHA384,
  sha512: SHA512,
};
const ALIASES = {
  "sha-1": "sha1",
  "sha-224": "sha224",
  "sha-256": "sha256",
  "sha-384": "sha384",
  "sha-512": "sha512",
  rsa_md5: "md5",
  "rsa-md5": "md5",
  "rsa-sha1": "sha1",
  "rsa-sha256": "sha256",
  "rsa-sha512": "sha512",
};

function getCore(algorithm) {
  const name = String(algorithm).toLowerCase();
  const core = CORES[ALIASES[name] ?? name];
  if (!core) {
    const err = new Error("Digest method not supported");
    err.code = "ERR_CRYPTO_INVALID_DIGEST";
    throw err;
  }
  return core;
}

function encodeOutput(bytes, encoding) {
  const buf = Buffer.from(bytes);
  if (encoding === undefined || encoding === "buffer") return buf;
  return buf.toString(encoding);
}

export function getHashes() {
  return ["md5", "sha1", "sha224", "sha256", "sha384", "sha512"];
}

export function getCiphers() {
  return [];
}

export function getCurves() {
  return [];
}

// ---- Hash / Hmac -------------------------------------------------------------------------

function digestAlreadyCalled() {
  const err = new Error("Digest already called");
  err.code = "ERR_CRYPTO_HASH_FINALIZED";
  return err;
}

export class Hash {
  #impl;
  #finalized = false;

  constructor(algorithm, _options, impl) {
    this.#impl = impl ?? new BlockHash(getCore(algorithm));
  }

  update(data, inputEncoding) {
    if (this.#finalized) throw digestAlreadyCalled();
    this.#impl.update(toBytes(data, inputEncoding));
    return this;
  }

  digest(encoding) {
    if (this.#finalized) throw digestAlreadyCalled();
    this.#finalized = true;
    return encodeOutput(this.#impl.digest(), encoding);
  }

  copy() {
    if (this.#finalized) throw digestAlreadyCalled();
    return new Hash(null, undefined, this.#impl.clone());
  }
}

function hmacRaw(core, keyBytes) {
  let key = keyBytes;
  if (key.length > core.blockSize) {
    const h = new BlockHash(core);
    h.update(key);
    key = h.digest();
  }
  const ipad = new Uint8Array(core.blockSize);
  const opad = new Uint8Array(core.blockSize);
  ipad.set(key);
  opad.set(key);
  for (let i = 0; i < core.blockSize; i++) {
    ipad[i] ^= 0x36;
    opad[i] ^= 0x5c;
  }
  const inner = new BlockHash(core);
  inner.update(ipad);
  return {
    update: (bytes) => inner.update(bytes),
    digest: () => {
      const outer = new BlockHash(core);
      outer.update(opad);
      outer.update(inner.digest());
      return outer.digest();
    },
  };
}

export class Hmac {
  #impl;
  #finalized = false;

  constructor(algorithm, key, _options) {
    const keyBytes =
      key && typeof key === "object" && key.type === "secret" && typeof key.export === "function"
        ? key.export()
        : toBytes(key);
    this.#impl = hmacRaw(getCore(algorithm), keyBytes);
  }

  update(data, inputEncoding) {
    if (this.#finalized) throw digestAlreadyCalled();
    this.#impl.update(toBytes(data, inputEncoding));
    return this;
  }

  digest(encoding) {
    if (this.#finalized) return encodeOutput(new Uint8Array(0), encoding);
    this.#finalized = true;
    return encodeOutput(this.#impl.digest(), encoding);
  }
}

export function createHash(algorithm, options) {
  return new Hash(algorithm, options);
}

export function createHmac(algorithm, key, options) {
  return new Hmac(algorithm, key, options);
}

// crypto.hash(algorithm, data, outputEncoding = "hex") (Node >= 21.7)
export function hash(algorithm, data, outputEncoding = "hex") {
  const h = new BlockHash(getCore(algorithm));
  h.update(toBytes(data));
  return encodeOutput(h.digest(), outputEncoding);
}

export function pbkdf2Sync(password, salt, iterations, keylen, digest) {
  const core = getCore(digest);
  const pw = toBytes(password);
  const saltBytes = toBytes(salt);
  const out = new Uint8Array(keylen);
  const blocks = Math.ceil(keylen / core.outputSize);
  for (let i = 1; i <= blocks; i++) {
    const mac = hmacRaw(core, pw);
    mac.update(saltBytes);
    mac.update(new Uint8Array([(i >>> 24) & 0xff, (i >>> 16) & 0xff, (i >>> 8) & 0xff, i & 0xff]));
    let u = mac.digest();
    const t = u.slice();
    for (let j = 1; j < iterations; j++) {
      const m = hmacRaw(core, pw);
      m.update(u);
      u = m.digest();
      for (let k = 0; k < t.length; k++) t[k] ^= u[k];
    }
    out.set(t.subarray(0, Math.min(t.length, keylen - (i - 1) * core.outputSize)), (i - 1) * core.outputSize);
  }
  return Buffer.from(out);
}

export function pbkdf2(password, salt, iterations, keylen, digest, callback) {
  let result;
  try {
    result = pbkdf2Sync(password, salt, iterations, keylen, digest);
  } catch (err) {
    queueMicrotask(() => callback(err));
    return;
  }
  queueMicrotask(() => callback(null, result));
}

function unsupported(name) {
  return () => {
    throw new Error(`crypto.${name} is not available inside a pichamber extension`);
  };
}

export const createCipheriv = unsupported("createCipheriv");
export const createDecipheriv = unsupported("createDecipheriv");
export const createSign = unsupported("createSign");
export const createVerify = unsupported("createVerify");
export const generateKeyPair = unsupported("generateKeyPair");
export const generateKeyPairSync = unsupported("generateKeyPairSync");
export const createPublicKey = unsupported("createPublicKey");
export const createPrivateKey = unsupported("createPrivateKey");
export const createSecretKey = unsupported("createSecretKey");
export const publicEncrypt = unsupported("publicEncrypt");
export const privateDecrypt = unsupported("privateDecrypt");
export const scrypt = unsupported("scrypt");
export const scryptSync = unsupported("scryptSync");
export const sign = unsupported("sign");
export const verify = unsupported("verify");
export const diffieHellman = unsupported("diffieHellman");
export const createDiffieHellman = unsupported("createDiffieHellman");
export const createECDH = unsupported("createECDH");
export const hkdfSync = unsupported("hkdfSync");
export const hkdf = unsupported("hkdf");

export const webcrypto = {
  getRandomValues,
  randomUUID,
  get subtle() {
    throw new Error("crypto.subtle is not available inside a pichamber extension");
  },
};
export const subtle = undefined;
export const constants = {};

export default {
  createHash,
  createHmac,
  hash,
  Hash,
  Hmac,
  getHashes,
  getCiphers,
  getCurves,
  randomBytes,
  pseudoRandomBytes,
  prng,
  rng,
  randomFill,
  randomFillSync,
  randomUUID,
  randomInt,
  getRandomValues,
  timingSafeEqual,
  pbkdf2,
  pbkdf2Sync,
  createCipheriv,
  createDecipheriv,
  createSign,
  createVerify,
  generateKeyPair,
  generateKeyPairSync,
  createPublicKey,
  createPrivateKey,
  createSecretKey,
  publicEncrypt,
  privateDecrypt,
  scrypt,
  scryptSync,
  sign,
  verify,
  diffieHellman,
  createDiffieHellman,
  createECDH,
  hkdf,
  hkdfSync,
  webcrypto,
  subtle,
  constants,
};
