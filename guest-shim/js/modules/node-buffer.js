// node:buffer for pichamber: a Buffer that is a Uint8Array subclass, with the encodings Node
// supports (utf8, hex, base64, base64url, latin1/binary, ascii, utf16le/ucs2), plus atob/btoa.

const B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const B64_LOOKUP = new Int16Array(256).fill(-1);
for (let i = 0; i < 64; i++) B64_LOOKUP[B64.charCodeAt(i)] = i;
B64_LOOKUP["-".charCodeAt(0)] = 62;
B64_LOOKUP["_".charCodeAt(0)] = 63;

export const kMaxLength = 2 ** 32;
export const kStringMaxLength = 2 ** 29 - 24;
export const constants = { MAX_LENGTH: kMaxLength, MAX_STRING_LENGTH: kStringMaxLength };
export const INSPECT_MAX_BYTES = 50;

function normEncoding(enc) {
  if (enc === undefined || enc === null) return "utf8";
  switch (String(enc).toLowerCase()) {
    case "utf8":
    case "utf-8":
      return "utf8";
    case "hex":
      return "hex";
    case "base64":
      return "base64";
    case "base64url":
      return "base64url";
    case "latin1":
    case "binary":
      return "latin1";
    case "ascii":
      return "ascii";
    case "ucs2":
    case "ucs-2":
    case "utf16le":
    case "utf-16le":
      return "utf16le";
    default: {
      const err = new TypeError(`Unknown encoding: ${enc}`);
      err.code = "ERR_UNKNOWN_ENCODING";
      throw err;
    }
  }
}

// ---- UTF-8 -------------------------------------------------------------------------------

function utf8Encode(str) {
  if (typeof TextEncoder !== "undefined") return new TextEncoder().encode(str);
  const out = [];
  for (let i = 0; i < str.length; i++) {
    let c = str.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < str.length) {
      const d = str.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
        i++;
      } else c = 0xfffd;
    } else if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
    if (c < 0x80) out.push(c);
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
  }
  return new Uint8Array(out);
}

function utf8Decode(bytes) {
  if (typeof TextDecoder !== "undefined") return new TextDecoder("utf-8").decode(bytes);
  let out = "";
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i];
    let need = 0;
    let cp = 0;
    let min = 0;
    if (b < 0x80) {
      out += String.fromCharCode(b);
      i++;
      continue;
    } else if (b >= 0xc2 && b <= 0xdf) {
      need = 1;
      cp = b & 0x1f;
      min = 0x80;
    } else if (b >= 0xe0 && b <= 0xef) {
      need = 2;
      cp = b & 0x0f;
      min = 0x800;
    } else if (b >= 0xf0 && b <= 0xf4) {
      need = 3;
      cp = b & 0x07;
      min = 0x10000;
    } else {
      out += "\ufffd";
      i++;
      continue;
    }
    let j = 1;
    for (; j <= need; j++) {
      const c = bytes[i + j];
      if (c === undefined || (c & 0xc0) !== 0x80) break;
      cp = (cp << 6) | (c & 0x3f);
    }
    if (j <= need || cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) {
      out += "\ufffd";
      i += Math.max(1, j);
      continue;
    }
    out += String.fromCodePoint(cp);
    i += need + 1;
  }
  return out;
}

// ---- base64 / hex ------------------------------------------------------------------------

export function base64Encode(bytes, alphabet = B64, pad = true) {
  let out = "";
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8) | bytes[i + 2];
    out += alphabet[(n >> 18) & 63] + alphabet[(n >> 12) & 63] + alphabet[(n >> 6) & 63] + alphabet[n & 63];
  }
  const rem = bytes.length - i;
  if (rem === 1) {
    const n = bytes[i] << 16;
    out += alphabet[(n >> 18) & 63] + alphabet[(n >> 12) & 63] + (pad ? "==" : "");
  } else if (rem === 2) {
    const n = (bytes[i] << 16) | (bytes[i + 1] << 8);
    out += alphabet[(n >> 18) & 63] + alphabet[(n >> 12) & 63] + alphabet[(n >> 6) & 63] + (pad ? "=" : "");
  }
  return out;
}

export function base64Decode(str) {
  // Node's decoder is forgiving: it accepts both alphabets, skips characters outside them and
  // stops at the first '='.
  const out = new Uint8Array(Math.ceil((str.length * 3) / 4));
  let len = 0;
  let acc = 0;
  let bits = 0;
  for (let i = 0; i < str.length; i++) {
    const c = str.charCodeAt(i);
    if (c === 61) break;
    const v = c < 256 ? B64_LOOKUP[c] : -1;
    if (v < 0) continue;
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[len++] = (acc >> bits) & 0xff;
    }
  }
  return out.subarray(0, len);
}

function hexEncode(bytes) {
  let out = "";
  for (let i = 0; i < bytes.length; i++) out += (bytes[i] < 16 ? "0" : "") + bytes[i].toString(16);
  return out;
}

function hexDecode(str) {
  const n = str.length >>> 1;
  const out = new Uint8Array(n);
  let i = 0;
  for (; i < n; i++) {
    const hi = hexVal(str.charCodeAt(i * 2));
    const lo = hexVal(str.charCodeAt(i * 2 + 1));
    if (hi < 0 || lo < 0) break;
    out[i] = (hi << 4) | lo;
  }
  return out.subarray(0, i);
}

function hexVal(c) {
  if (c >= 48 && c <= 57) return c - 48;
  if (c >= 97 && c <= 102) return c - 87;
  if (c >= 65 && c <= 70) return c - 55;
  return -1;
}

function encodeString(str, enc) {
  switch (normEncoding(enc)) {
    case "utf8":
      return utf8Encode(str);
    case "hex":
      return hexDecode(str);
    case "base64":
    case "base64url":
      return base64Decode(str);
    case "latin1":
    case "ascii": {
      const out = new Uint8Array(str.length);
      for (let i = 0; i < str.length; i++) out[i] = str.charCodeAt(i) & 0xff;
      return out;
    }
    case "utf16le": {
      const out = new Uint8Array(str.length * 2);
      for (let i = 0; i < str.length; i++) {
        const c = str.charCodeAt(i);
        out[i * 2] = c & 0xff;
        out[i * 2 + 1] = c >> 8;
      }
      return out;
    }
  }
}

function decodeBytes(bytes, enc) {
  switch (normEncoding(enc)) {
    case "utf8":
      return utf8Decode(bytes);
    case "hex":
      return hexEncode(bytes);
    case "base64":
      return base64Encode(bytes, B64, true);
    case "base64url":
      return base64Encode(bytes, B64URL, false);
    case "latin1": {
      let out = "";
      for (let i = 0; i < bytes.length; i += 4096) out += String.fromCharCode(...bytes.subarray(i, i + 4096));
      return out;
    }
    case "ascii": {
      let out = "";
      for (let i = 0; i < bytes.length; i++) out += String.fromCharCode(bytes[i] & 0x7f);
      return out;
    }
    case "utf16le": {
      let out = "";
      for (let i = 0; i + 1 < bytes.length; i += 2) out += String.fromCharCode(bytes[i] | (bytes[i + 1] << 8));
      return out;
    }
  }
}

function invalidArg(name, expected, value) {
  const err = new TypeError(
    `The "${name}" argument must be ${expected}. Received ${value === null ? "null" : typeof value}`,
  );
  err.code = "ERR_INVALID_ARG_TYPE";
  return err;
}

function outOfRange(name, range, value) {
  const err = new RangeError(`The value of "${name}" is out of range. It must be ${range}. Received ${value}`);
  err.code = "ERR_OUT_OF_RANGE";
  return err;
}

// ---- Buffer ------------------------------------------------------------------------------

export class Buffer extends Uint8Array {
  static from(value, encodingOrOffset, length) {
    if (typeof value === "string") {
      const bytes = encodeString(value, encodingOrOffset);
      return fromBytes(bytes);
    }
    if (
      value instanceof ArrayBuffer ||
      (typeof SharedArrayBuffer !== "undefined" && value instanceof SharedArrayBuffer)
    ) {
      const offset = encodingOrOffset === undefined ? 0 : Number(encodingOrOffset) || 0;
      const len = length === undefined ? value.byteLength - offset : Number(length) || 0;
      if (offset > value.byteLength) throw outOfRange("offset", `<= ${value.byteLength}`, offset);
      return new Buffer(value, offset, len);
    }
    if (ArrayBuffer.isView(value)) {
      if (value instanceof Uint8Array) return fromBytes(value.slice());
      const out = new Buffer(value.length);
      for (let i = 0; i < value.length; i++) out[i] = Number(value[i]) & 0xff;
      return out;
    }
    if (Array.isArray(value)) {
      const out = new Buffer(value.length);
      for (let i = 0; i < value.length; i++) out[i] = Number(value[i]) & 0xff;
      return out;
    }
    if (value && typeof value === "object") {
      if (value.type === "Buffer" && Array.isArray(value.data)) return Buffer.from(value.data);
      if (typeof value.length === "number") {
        const out = new Buffer(value.length);
        for (let i = 0; i < value.length; i++) out[i] = Number(value[i]) & 0xff;
        return out;
      }
      const prim = typeof value.valueOf === "function" ? value.valueOf() : value;
      if (prim !== value && prim != null) return Buffer.from(prim, encodingOrOffset, length);
      if (typeof value[Symbol.toPrimitive] === "function")
        return Buffer.from(value[Symbol.toPrimitive]("string"), encodingOrOffset);
    }
    throw invalidArg(
      "first",
      "of type string or an instance of Buffer, ArrayBuffer, or Array or an Array-like Object",
      value,
    );
  }

  static alloc(size, fill, encoding) {
    checkSize(size);
    const buf = new Buffer(size);
    if (fill !== undefined && fill !== 0) buf.fill(fill, 0, buf.length, encoding);
    return buf;
  }

  static allocUnsafe(size) {
    checkSize(size);
    return new Buffer(size);
  }

  static allocUnsafeSlow(size) {
    checkSize(size);
    return new Buffer(size);
  }

  static isBuffer(value) {
    return value instanceof Buffer;
  }

  static isEncoding(enc) {
    if (typeof enc !== "string" || enc.length === 0) return false;
    try {
      normEncoding(enc);
      return true;
    } catch {
      return false;
    }
  }

  static byteLength(value, encoding) {
    if (typeof value !== "string") {
      if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) return value.byteLength;
      throw invalidArg("string", "of type string or an instance of Buffer or ArrayBuffer", value);
    }
    const enc = normEncoding(encoding);
    if (enc === "utf8") return utf8Length(value);
    if (enc === "latin1" || enc === "ascii") return value.length;
    if (enc === "utf16le") return value.length * 2;
    if (enc === "hex") return value.length >>> 1;
    return base64ByteLength(value);
  }

  static concat(list, totalLength) {
    if (!Array.isArray(list)) throw invalidArg("list", "an instance of Array", list);
    if (list.length === 0) return new Buffer(0);
    if (totalLength === undefined) {
      totalLength = 0;
      for (const b of list) totalLength += b.length;
    }
    const out = Buffer.alloc(totalLength);
    let pos = 0;
    for (const b of list) {
      if (!(b instanceof Uint8Array)) throw invalidArg("list[i]", "an instance of Buffer or Uint8Array", b);
      if (pos + b.length > totalLength) {
        out.set(b.subarray(0, totalLength - pos), pos);
        pos = totalLength;
        break;
      }
      out.set(b, pos);
      pos += b.length;
    }
    return out;
  }

  static compare(a, b) {
    const n = Math.min(a.length, b.length);
    for (let i = 0; i < n; i++) {
      if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
    }
    return a.length < b.length ? -1 : a.length > b.length ? 1 : 0;
  }

  static get poolSize() {
    return 8192;
  }

  get parent() {
    return this.buffer;
  }

  get offset() {
    return this.byteOffset;
  }

  toString(encoding, start, end) {
    if (arguments.length === 0) return utf8Decode(this);
    start = start === undefined ? 0 : Math.max(0, start | 0);
    end = end === undefined ? this.length : Math.min(this.length, end | 0);
    if (end <= start) return "";
    return decodeBytes(start === 0 && end === this.length ? this : this.subarray(start, end), encoding);
  }

  toLocaleString(encoding, start, end) {
    return this.toString(encoding, start, end);
  }

  toJSON() {
    return { type: "Buffer", data: Array.from(this) };
  }

  equals(other) {
    if (!(other instanceof Uint8Array)) throw invalidArg("otherBuffer", "an instance of Buffer or Uint8Array", other);
    if (this.length !== other.length) return false;
    for (let i = 0; i < this.length; i++) if (this[i] !== other[i]) return false;
    return true;
  }

  compare(target, targetStart = 0, targetEnd = target.length, sourceStart = 0, sourceEnd = this.length) {
    return Buffer.compare(this.subarray(sourceStart, sourceEnd), target.subarray(targetStart, targetEnd));
  }

  // Node's slice is a view, like subarray (not a copy as in Uint8Array).
  slice(start, end) {
    return this.subarray(start, end);
  }

  subarray(start, end) {
    const view = Uint8Array.prototype.subarray.call(this, start, end);
    return Object.setPrototypeOf(view, Buffer.prototype);
  }

  copy(target, targetStart = 0, sourceStart = 0, sourceEnd = this.length) {
    if (sourceEnd > this.length) sourceEnd = this.length;
    if (targetStart >= target.length || sourceStart >= sourceEnd) return 0;
    const n = Math.min(sourceEnd - sourceStart, target.length - targetStart);
    target.set(this.subarray(sourceStart, sourceStart + n), targetStart);
    return n;
  }

  write(string, offset, length, encoding) {
    if (typeof offset === "string") {
      encoding = offset;
      offset = 0;
      length = this.length;
    } else if (typeof length === "string") {
      encoding = length;
      length = this.length - (offset || 0);
    }
    offset = offset === undefined ? 0 : offset >>> 0;
    const remaining = this.length - offset;
    length = length === undefined ? remaining : Math.min(remaining, length >>> 0);
    let bytes = encodeString(string, encoding);
    if (bytes.length > length) {
      let end = length;
      // never write a partial UTF-8 character
      if (normEncoding(encoding) === "utf8") while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
      bytes = bytes.subarray(0, end);
    }
    this.set(bytes, offset);
    return bytes.length;
  }

  fill(value, offset = 0, end = this.length, encoding) {
    if (typeof offset === "string") {
      encoding = offset;
      offset = 0;
      end = this.length;
    } else if (typeof end === "string") {
      encoding = end;
      end = this.length;
    }
    if (typeof value === "number" || typeof value === "boolean") {
      Uint8Array.prototype.fill.call(this, Number(value) & 0xff, offset, end);
      return this;
    }
    const bytes = typeof value === "string" ? encodeString(value, encoding) : value;
    if (!bytes || bytes.length === 0) {
      Uint8Array.prototype.fill.call(this, 0, offset, end);
      return this;
    }
    for (let i = offset, j = 0; i < end; i++, j = (j + 1) % bytes.length) this[i] = bytes[j];
    return this;
  }

  indexOf(value, byteOffset = 0, encoding) {
    return bufIndexOf(this, value, byteOffset, encoding, true);
  }

  lastIndexOf(value, byteOffset, encoding) {
    return bufIndexOf(this, value, byteOffset, encoding, false);
  }

  includes(value, byteOffset = 0, encoding) {
    return this.indexOf(value, byteOffset, encoding) !== -1;
  }

  swap16() {
    for (let i = 0; i + 1 < this.length; i += 2) [this[i], this[i + 1]] = [this[i + 1], this[i]];
    return this;
  }

  swap32() {
    for (let i = 0; i + 3 < this.length; i += 4) {
      [this[i], this[i + 1], this[i + 2], this[i + 3]] = [this[i + 3], this[i + 2], this[i + 1], this[i]];
    }
    return this;
  }

  [Symbol.for("nodejs.util.inspect.custom")]() {
    let str = "";
    const max = Math.min(this.length, INSPECT_MAX_BYTES);
    for (let i = 0; i < max; i++) str += ` ${this[i] < 16 ? "0" : ""}${this[i].toString(16)}`;
    if (this.length > max) str += ` ... ${this.length - max} more byte${this.length - max > 1 ? "s" : ""}`;
    return `<Buffer${str}>`;
  }
}

function fromBytes(bytes) {
  return new Buffer(bytes.buffer, bytes.byteOffset, bytes.length);
}

function checkSize(size) {
  if (typeof size !== "number") throw invalidArg("size", "of type number", size);
  if (!(size >= 0 && size <= kMaxLength)) throw outOfRange("size", `>= 0 && <= ${kMaxLength}`, size);
}

function utf8Length(str) {
  let n = 0;
  for (let i = 0; i < str.length; i++) {
    const c = str.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < str.length) {
      const d = str.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        n += 4;
        i++;
      } else n += 3;
    } else n += 3;
  }
  return n;
}

function base64ByteLength(str) {
  let n = str.length;
  if (n > 0 && str.charCodeAt(n - 1) === 61) n--;
  if (n > 1 && str.charCodeAt(n - 1) === 61) n--;
  return (n * 3) >>> 2;
}

function bufIndexOf(buf, value, byteOffset, encoding, forward) {
  if (typeof byteOffset === "string") {
    encoding = byteOffset;
    byteOffset = undefined;
  }
  let needle;
  if (typeof value === "number") needle = [value & 0xff];
  else if (typeof value === "string") needle = encodeString(value, encoding);
  else needle = value;
  const len = buf.length;
  let start;
  if (byteOffset === undefined || Number.isNaN(Number(byteOffset))) start = forward ? 0 : len - needle.length;
  else {
    start = Number(byteOffset) | 0;
    if (start < 0) start += len;
    if (!forward) start = Math.min(start, len - needle.length);
  }
  if (needle.length === 0) return forward ? Math.min(Math.max(start, 0), len) : Math.min(Math.max(start, 0), len);
  if (forward) {
    for (let i = Math.max(start, 0); i <= len - needle.length; i++) if (matchAt(buf, needle, i)) return i;
  } else {
    for (let i = start; i >= 0; i--) if (matchAt(buf, needle, i)) return i;
  }
  return -1;
}

function matchAt(buf, needle, i) {
  for (let j = 0; j < needle.length; j++) if (buf[i + j] !== needle[j]) return false;
  return true;
}

// Fixed-width reads and writes through a DataView.
function dv(buf) {
  return new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
}

function checkOffset(buf, offset, size) {
  if (offset === undefined) offset = 0;
  if (typeof offset !== "number") throw invalidArg("offset", "of type number", offset);
  if (!Number.isInteger(offset) || offset < 0 || offset + size > buf.length) {
    throw outOfRange("offset", `>= 0 and <= ${buf.length - size}`, offset);
  }
  return offset;
}

const accessors = [
  ["UInt8", 1, "getUint8", "setUint8"],
  ["Int8", 1, "getInt8", "setInt8"],
  ["UInt16LE", 2, "getUint16", "setUint16", true],
  ["UInt16BE", 2, "getUint16", "setUint16", false],
  ["Int16LE", 2, "getInt16", "setInt16", true],
  ["Int16BE", 2, "getInt16", "setInt16", false],
  ["UInt32LE", 4, "getUint32", "setUint32", true],
  ["UInt32BE", 4, "getUint32", "setUint32", false],
  ["Int32LE", 4, "getInt32", "setInt32", true],
  ["Int32BE", 4, "getInt32", "setInt32", false],
  ["FloatLE", 4, "getFloat32", "setFloat32", true],
  ["FloatBE", 4, "getFloat32", "setFloat32", false],
  ["DoubleLE", 8, "getFloat64", "setFloat64", true],
  ["DoubleBE", 8, "getFloat64", "setFloat64", false],
  ["BigUInt64LE", 8, "getBigUint64", "setBigUint64", true],
  ["BigUInt64BE", 8, "getBigUint64", "setBigUint64", false],
  ["BigInt64LE", 8, "getBigInt64", "setBigInt64", true],
  ["BigInt64BE", 8, "getBigInt64", "setBigInt64", false],
];
for (const [name, size, get, set, le] of accessors) {
  const read = function (offset) {
    offset = checkOffset(this, offset, size);
    return dv(this)[get](offset, le);
  };
  const write = function (value, offset) {
    offset = checkOffset(this, offset, size);
    dv(this)[set](offset, value, le);
    return offset + size;
  };
  Buffer.prototype[`read${name}`] = read;
  Buffer.prototype[`write${name}`] = write;
  if (name.includes("UInt")) {
    Buffer.prototype[`read${name.replace("UInt", "Uint")}`] = read;
    Buffer.prototype[`write${name.replace("UInt", "Uint")}`] = write;
  }
}

export const SlowBuffer = Buffer;

export function atob(data) {
  const str = String(data).replace(/[\t\n\f\r ]/g, "");
  if (str.length % 4 === 1 || /[^A-Za-z0-9+/=]/.test(str) || /=[^=]/.test(str) || /={3,}$/.test(str)) {
    const err = new Error("The string to be decoded is not correctly encoded.");
    err.name = "InvalidCharacterError";
    throw err;
  }
  return decodeBytes(base64Decode(str), "latin1");
}

export function btoa(data) {
  const str = String(data);
  const bytes = new Uint8Array(str.length);
  for (let i = 0; i < str.length; i++) {
    const c = str.charCodeAt(i);
    if (c > 0xff) {
      const err = new Error("Invalid character");
      err.name = "InvalidCharacterError";
      throw err;
    }
    bytes[i] = c;
  }
  return base64Encode(bytes);
}

export function isUtf8(input) {
  const bytes = input instanceof Uint8Array ? input : new Uint8Array(input.buffer ?? input);
  if (typeof TextDecoder !== "undefined") {
    try {
      new TextDecoder("utf-8", { fatal: true }).decode(bytes);
      return true;
    } catch {
      return false;
    }
  }
  return !utf8Decode(bytes).includes("\ufffd") || bytes.length === 0;
}

export function isAscii(input) {
  const bytes = input instanceof Uint8Array ? input : new Uint8Array(input.buffer ?? input);
  for (let i = 0; i < bytes.length; i++) if (bytes[i] > 0x7f) return false;
  return true;
}

export const Blob = globalThis.Blob;
export const File = globalThis.File;

export default {
  Buffer,
  SlowBuffer,
  kMaxLength,
  kStringMaxLength,
  constants,
  INSPECT_MAX_BYTES,
  atob,
  btoa,
  isUtf8,
  isAscii,
  Blob,
  File,
};
