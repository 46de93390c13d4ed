// node:worker_threads for pichamber. A Worker is a sibling instance of the extension's own
// component (its own memory, the extension's grants and limits; wit `workers`): it runs a
// module bundled into the extension (`new Worker(new URL("./worker.js", import.meta.url))`)
// or script text (`{ eval: true }`), with `workerData` and a `parentPort`. Messages cross the
// host as JSON with the structured-clone types tagged (undefined, NaN, BigInt, Date, RegExp,
// Map, Set, Error, typed arrays and ArrayBuffers); a function or symbol cannot be cloned, as
// in Node. MessageChannel's ports talk within one instance.

import { EventEmitter } from "pichamber:node/events";

const internal = globalThis.__pichamber_internal;
const inWorker = internal?.worker ?? null;

const TAG = "$pichamber:clone";

function dataCloneError(what) {
  const message = `${what} could not be cloned.`;
  return typeof DOMException === "function" ? new DOMException(message, "DataCloneError") : new Error(message);
}

const TYPED = {
  Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array,
  Float32Array, Float64Array, BigInt64Array, BigUint64Array,
};

function bytesToBase64(bytes) {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function base64ToBytes(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

/** `value` as JSON text, its structured-clone types tagged; throws DataCloneError. */
export function encodeMessage(value) {
  const seen = new Set();
  const walk = (v) => {
    switch (typeof v) {
      case "undefined":
        return { [TAG]: "undefined" };
      case "number":
        if (Object.is(v, -0)) return { [TAG]: "number", v: "-0" };
        if (!Number.isFinite(v)) return { [TAG]: "number", v: String(v) };
        return v;
      case "bigint":
        return { [TAG]: "bigint", v: v.toString() };
      case "function":
        throw dataCloneError(`${v.toString().slice(0, 60)}`);
      case "symbol":
        throw dataCloneError(String(v));
      case "object":
        break;
      default:
        return v;
    }
    if (v === null) return null;
    if (seen.has(v)) throw dataCloneError("A value with a cycle");
    seen.add(v);
    try {
      if (v instanceof Date) return { [TAG]: "Date", v: v.getTime() };
      if (v instanceof RegExp) return { [TAG]: "RegExp", source: v.source, flags: v.flags };
      if (v instanceof Map) return { [TAG]: "Map", v: [...v].map(([k, x]) => [walk(k), walk(x)]) };
      if (v instanceof Set) return { [TAG]: "Set", v: [...v].map(walk) };
      if (v instanceof Error) return { [TAG]: "Error", name: v.name, message: v.message, stack: v.stack };
      if (v instanceof ArrayBuffer) return { [TAG]: "ArrayBuffer", v: bytesToBase64(new Uint8Array(v)) };
      if (ArrayBuffer.isView(v)) {
        const type = Object.keys(TYPED).find((name) => v instanceof TYPED[name]) ?? "Uint8Array";
        const bytes = new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
        return { [TAG]: type, v: bytesToBase64(bytes) };
      }
      if (Array.isArray(v)) return v.map(walk);
      const out = {};
      for (const key of Object.keys(v)) out[key] = walk(v[key]);
      return TAG in v ? { [TAG]: "Object", v: out } : out;
    } finally {
      seen.delete(v);
    }
  };
  return JSON.stringify(walk(value));
}

/** A message's JSON text back as the value that was posted. */
export function decodeMessage(text) {
  const walk = (v) => {
    if (Array.isArray(v)) return v.map(walk);
    if (v === null || typeof v !== "object") return v;
    const tag = v[TAG];
    if (tag === undefined) {
      const out = {};
      for (const key of Object.keys(v)) out[key] = walk(v[key]);
      return out;
    }
    switch (tag) {
      case "undefined":
        return undefined;
      case "number":
        return Number(v.v);
      case "bigint":
        return BigInt(v.v);
      case "Date":
        return new Date(v.v);
      case "RegExp":
        return new RegExp(v.source, v.flags);
      case "Map":
        return new Map(v.v.map(([k, x]) => [walk(k), walk(x)]));
      case "Set":
        return new Set(v.v.map(walk));
      case "Error": {
        const err = new Error(v.message);
        err.name = v.name;
        if (v.stack !== undefined) err.stack = v.stack;
        return err;
      }
      case "ArrayBuffer":
        return base64ToBytes(v.v).buffer;
      case "Object": {
        // A plain object that has the tag's key itself: its own keys, read as they are.
        const out = {};
        for (const key of Object.keys(v.v)) out[key] = walk(v.v[key]);
        return out;
      }
      default: {
        const Type = TYPED[tag];
        if (!Type) return undefined;
        const bytes = base64ToBytes(v.v);
        return new Type(bytes.buffer, 0, bytes.byteLength / (Type.BYTES_PER_ELEMENT ?? 1));
      }
    }
  };
  return walk(JSON.parse(text));
}

export const isMainThread = !inWorker;
export const workerData = inWorker ? decodeMessage(inWorker.data) : null;
export const threadId = inWorker ? inWorker.threadId : 0;
export const resourceLimits = {};
export const SHARE_ENV = Symbol.for("nodejs.worker_threads.SHARE_ENV");

const environmentData = new Map();
export function getEnvironmentData(key) {
  return environmentData.get(key);
}
export function setEnvironmentData(key, value) {
  if (value === undefined) environmentData.delete(key);
  else environmentData.set(key, value);
}
export function markAsUntransferable() {}
export function isMarkedAsUntransferable() {
  return false;
}
export function markAsUncloneable() {}
export function moveMessagePortToContext(port) {
  return port;
}

/** A port of a MessageChannel: messages go to its twin in this instance, cloned. */
export class MessagePort extends EventEmitter {
  #other = null;
  #closed = false;
  static pair() {
    const a = new MessagePort();
    const b = new MessagePort();
    a.#other = b;
    b.#other = a;
    return [a, b];
  }
  postMessage(value) {
    if (this.#closed || !this.#other) return;
    const text = encodeMessage(value);
    const other = this.#other;
    setImmediate(() => {
      if (!other.#closed) other.emit("message", decodeMessage(text));
    });
  }
  start() {}
  ref() {
    return this;
  }
  unref() {
    return this;
  }
  hasRef() {
    return false;
  }
  close() {
    if (this.#closed) return;
    this.#closed = true;
    const other = this.#other;
    setImmediate(() => this.emit("close"));
    if (other && !other.#closed) other.close();
  }
}

export class MessageChannel {
  constructor() {
    [this.port1, this.port2] = MessagePort.pair();
  }
}

export function receiveMessageOnPort() {
  return undefined;
}

/** The worker's side of its parent: what it posts goes to the Worker object in the parent. */
class ParentPort extends EventEmitter {
  #ref = true;
  constructor() {
    super();
    inWorker.onParentMessage((text) => this.emit("message", decodeMessage(text)));
    const update = () => queueMicrotask(() => inWorker.listen(this.#ref && this.listenerCount("message") > 0));
    this.on("newListener", update);
    this.on("removeListener", update);
  }
  postMessage(value) {
    inWorker.post(encodeMessage(value));
  }
  ref() {
    this.#ref = true;
    inWorker.listen(this.listenerCount("message") > 0);
    return this;
  }
  unref() {
    this.#ref = false;
    inWorker.listen(false);
    return this;
  }
  hasRef() {
    return this.#ref;
  }
  close() {
    this.#ref = false;
    inWorker.listen(false);
    this.emit("close");
  }
  start() {}
}

export const parentPort = inWorker ? new ParentPort() : null;

/** The module id a worker's filename names (a file: URL or path of a bundled module). */
function moduleId(filename) {
  const text = filename instanceof URL ? filename.href : String(filename);
  if (text.startsWith("file:")) return decodeURIComponent(new URL(text).pathname);
  if (text.startsWith("/")) return text;
  const err = new Error(
    `Cannot find module '${text}': a worker in pichamber runs a module bundled into the extension; ` +
      `start it as new Worker(new URL("./worker.js", import.meta.url)), or pass its code with { eval: true }`,
  );
  err.code = "ERR_MODULE_NOT_FOUND";
  throw err;
}

export class Worker extends EventEmitter {
  #id;
  #exitCode = null;
  constructor(filename, options = {}) {
    super();
    const source = options.eval ? ["script", String(filename)] : ["module", moduleId(filename)];
    const data = encodeMessage(options.workerData);
    this.#id = internal.startWorker(source[0], source[1], data, (kind, payload) => this.#event(kind, payload));
    this.threadId = this.#id;
    this.resourceLimits = {};
    setImmediate(() => {
      if (this.#exitCode === null) this.emit("online");
    });
  }
  #event(kind, payload) {
    if (kind === "message") {
      this.emit("message", decodeMessage(payload));
    } else if (kind === "error") {
      const err = new Error(String(payload).split("\n")[0]);
      err.stack = String(payload);
      this.emit("error", err);
    } else if (kind === "exit") {
      this.#exitCode = Number(payload);
      this.emit("exit", this.#exitCode);
    }
  }
  postMessage(value) {
    if (this.#exitCode !== null) return;
    internal.postToWorker(this.#id, encodeMessage(value));
  }
  /** Stops the worker; resolves with its exit code. */
  terminate() {
    if (this.#exitCode !== null) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      this.once("exit", resolve);
      internal.terminateWorker(this.#id);
    });
  }
  ref() {
    return this;
  }
  unref() {
    return this;
  }
  getHeapSnapshot() {
    return Promise.reject(new Error("getHeapSnapshot is not available inside pichamber"));
  }
}

export default {
  isMainThread,
  parentPort,
  workerData,
  threadId,
  resourceLimits,
  SHARE_ENV,
  Worker,
  MessageChannel,
  MessagePort,
  getEnvironmentData,
  setEnvironmentData,
  markAsUntransferable,
  isMarkedAsUntransferable,
  markAsUncloneable,
  moveMessagePortToContext,
  receiveMessageOnPort,
};
