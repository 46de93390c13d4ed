// node:zlib for pichamber: the one-shot codecs (deflate, inflate, deflateRaw, inflateRaw, gzip,
// gunzip, unzip), sync and with callbacks, computed by the guest's Rust (flate2) through
// `__host("zlib", ...)`; nothing crosses to the host. Streams (createGzip & co.) and brotli
// are not provided and say so when called.
import { Buffer } from "pichamber:node/buffer";

const ERRNO = { Z_STREAM_ERROR: -2, Z_DATA_ERROR: -3, Z_BUF_ERROR: -5 };

export const constants = Object.freeze({
  Z_NO_FLUSH: 0, Z_PARTIAL_FLUSH: 1, Z_SYNC_FLUSH: 2, Z_FULL_FLUSH: 3, Z_FINISH: 4, Z_BLOCK: 5,
  Z_OK: 0, Z_STREAM_END: 1, Z_NEED_DICT: 2, Z_ERRNO: -1, Z_STREAM_ERROR: -2, Z_DATA_ERROR: -3,
  Z_MEM_ERROR: -4, Z_BUF_ERROR: -5, Z_VERSION_ERROR: -6,
  Z_NO_COMPRESSION: 0, Z_BEST_SPEED: 1, Z_BEST_COMPRESSION: 9, Z_DEFAULT_COMPRESSION: -1,
  Z_FILTERED: 1, Z_HUFFMAN_ONLY: 2, Z_RLE: 3, Z_FIXED: 4, Z_DEFAULT_STRATEGY: 0,
  DEFLATE: 1, INFLATE: 2, GZIP: 3, GUNZIP: 4, DEFLATERAW: 5, INFLATERAW: 6, UNZIP: 7,
  Z_MIN_WINDOWBITS: 8, Z_MAX_WINDOWBITS: 15, Z_DEFAULT_WINDOWBITS: 15,
  Z_MIN_LEVEL: -1, Z_MAX_LEVEL: 9, Z_MIN_MEMLEVEL: 1, Z_MAX_MEMLEVEL: 9, Z_DEFAULT_MEMLEVEL: 8,
});

function toBytes(data) {
  if (typeof data === "string") return Buffer.from(data);
  if (Buffer.isBuffer(data)) return data;
  if (ArrayBuffer.isView(data)) return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  const err = new TypeError(
    `The "buffer" argument must be of type string or an instance of Buffer, TypedArray, DataView, or ArrayBuffer. Received ${data === null ? "null" : typeof data}`,
  );
  err.code = "ERR_INVALID_ARG_TYPE";
  throw err;
}

function run(op, data, options = {}) {
  const bytes = toBytes(data);
  const settings = { level: options?.level, maxOutputLength: options?.maxOutputLength };
  let out;
  try {
    out = JSON.parse(globalThis.__host("zlib", [op, bytes.toString("base64"), settings]));
  } catch (e) {
    const text = String(e?.message ?? e);
    const at = text.indexOf(": ");
    const code = at > 0 ? text.slice(0, at) : "Z_DATA_ERROR";
    const message = at > 0 ? text.slice(at + 2) : text;
    const err = code.startsWith("ERR_") ? new RangeError(message) : new Error(message);
    err.code = code;
    if (code in ERRNO) err.errno = ERRNO[code];
    throw err;
  }
  return Buffer.from(out, "base64");
}

const sync = (op) => (buffer, options) => run(op, buffer, options);
const withCallback = (op) => (buffer, options, callback) => {
  if (typeof options === "function") [options, callback] = [{}, options];
  if (typeof callback !== "function") {
    const err = new TypeError('The "callback" argument must be of type function');
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  let result;
  let error = null;
  try {
    result = run(op, buffer, options);
  } catch (e) {
    error = e;
  }
  // Node calls back asynchronously.
  queueMicrotask(() => (error ? callback(error) : callback(null, result)));
};

export const deflateSync = sync("deflate");
export const inflateSync = sync("inflate");
export const deflateRawSync = sync("deflateRaw");
export const inflateRawSync = sync("inflateRaw");
export const gzipSync = sync("gzip");
export const gunzipSync = sync("gunzip");
export const unzipSync = sync("unzip");
export const deflate = withCallback("deflate");
export const inflate = withCallback("inflate");
export const deflateRaw = withCallback("deflateRaw");
export const inflateRaw = withCallback("inflateRaw");
export const gzip = withCallback("gzip");
export const gunzip = withCallback("gunzip");
export const unzip = withCallback("unzip");

const unavailable = (name, why) =>
  function () {
    throw new Error(`zlib.${name}() is not available inside a pichamber extension (${why})`);
  };
const NO_STREAMS = "zlib streams need node:stream, which the guest does not provide; use the one-shot functions";
const NO_BROTLI = "brotli is not compiled into the guest";
export const createDeflate = unavailable("createDeflate", NO_STREAMS);
export const createInflate = unavailable("createInflate", NO_STREAMS);
export const createDeflateRaw = unavailable("createDeflateRaw", NO_STREAMS);
export const createInflateRaw = unavailable("createInflateRaw", NO_STREAMS);
export const createGzip = unavailable("createGzip", NO_STREAMS);
export const createGunzip = unavailable("createGunzip", NO_STREAMS);
export const createUnzip = unavailable("createUnzip", NO_STREAMS);
export const createBrotliCompress = unavailable("createBrotliCompress", NO_BROTLI);
export const createBrotliDecompress = unavailable("createBrotliDecompress", NO_BROTLI);
export const brotliCompress = unavailable("brotliCompress", NO_BROTLI);
export const brotliDecompress = unavailable("brotliDecompress", NO_BROTLI);
export const brotliCompressSync = unavailable("brotliCompressSync", NO_BROTLI);
export const brotliDecompressSync = unavailable("brotliDecompressSync", NO_BROTLI);

export default {
  constants, deflateSync, inflateSync, deflateRawSync, inflateRawSync, gzipSync, gunzipSync, unzipSync,
  deflate, inflate, deflateRaw, inflateRaw, gzip, gunzip, unzip,
  createDeflate, createInflate, createDeflateRaw, createInflateRaw, createGzip, createGunzip, createUnzip,
  createBrotliCompress, createBrotliDecompress, brotliCompress, brotliDecompress, brotliCompressSync, brotliDecompressSync,
};
