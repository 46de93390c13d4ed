// pichamber guest prelude: pi's ExtensionAPI (`pi`), ExtensionContext (`ctx`), the handler
// chains with pi 0.73.1's semantics (core/extensions/runner.js), and the web-platform globals
// extensions expect (timers, AbortController, process, console). Runs once per instance before
// the extension's modules. Every effect goes through `__host(name, args)`.


// Evaluating modules ahead, into the extension's snapshot (engine.rs `pre_evaluate`): a
// module's top level then runs once for every instance, so it may touch nothing that belongs
// to a session or differs between instances. What does calls `touchedAhead`, which refuses it
// while `ahead.on` (the module then runs per instance, as before) and is nothing afterwards.
// `known`: what load will say that every session the snapshot is for shares.
const ahead = { on: false, touched: [], grantedEnv: new Set(), known: {} };
function touchedAhead(what) {
  if (!ahead.on) return;
  ahead.touched.push({ what, stack: String(new Error().stack ?? "") });
  throw new Error(`${what} belongs to a session, not to the extension's snapshot`);
}

const hostCall = (name, ...args) => {
  if (ahead.on) touchedAhead(`the host (${name})`);
  const answer = globalThis.__host(name, args);
  return answer === null ? null : JSON.parse(answer);
};
// What the host says at load (the extension's name, cwd, mode, granted env, pi release). The
// prelude is evaluated before it, once for all instances (the pre-initialised snapshot), so
// its top level reads none of it and calls no host function; `applyLoadContext` does. Its
// keys are there from the start: an instance's load only sets them.
const loadValues = { extensionName: undefined, cwd: undefined, mode: undefined, hasUI: undefined, piVersion: undefined };
const loadContext = new Proxy(
  loadValues,
  {
    get(target, key) {
      if (ahead.on) {
        if (Object.hasOwn(ahead.known, key)) return ahead.known[key];
        touchedAhead("the load context");
      }
      return target[key];
    },
  },
);
// Whether the session follows pi 1.6.0 (README, "Which pi"): its additions to the API exist.
let followsPi16 = true;

const errorText = (err) => (err instanceof Error ? err.message : String(err));
// Stack frames inside pichamber's own modules are noise to an extension author.
const errorStack = (err) => {
  if (!(err instanceof Error) || !err.stack) return undefined;
  const frames = String(err.stack)
    .split("\n")
    .filter((line) => line.trim() && !line.includes("(pichamber:"));
  return frames.length ? frames.join("\n") : undefined;
};

// ---------------------------------------------------------------------------------------------
// Event loop: timers and host operations. The Rust side drains microtasks, then asks `state()`
// and suspends in the host's `wait` until an operation completes or the next timer is due.

// Both maps report how many timers and operations are pending to the shim, which then skips
// the prelude in a poll with nothing pending (the poll after every call, most of the time).
const reportPending = globalThis.__pichamber_pending;
delete globalThis.__pichamber_pending;
class PendingMap extends Map {
  set(key, value) {
    super.set(key, value);
    reportPending(timers.size + pendingOps.size);
    return this;
  }
  delete(key) {
    const had = super.delete(key);
    if (had) reportPending(timers.size + pendingOps.size);
    return had;
  }
}
const timers = new PendingMap();
let nextTimerId = 1;
const pendingOps = new PendingMap();

const eventLoop = {
  state() {
    let next = -1;
    const now = Date.now();
    for (const t of timers.values()) {
      const wait = Math.max(0, t.due - now);
      if (next < 0 || wait < next) next = wait;
    }
    return [next, pendingOps.size];
  },
  fireTimers() {
    const now = Date.now();
    const due = [...timers.entries()].filter(([, t]) => t.due <= now).sort((a, b) => a[1].due - b[1].due || a[0] - b[0]);
    for (const [id, t] of due) {
      if (!timers.has(id)) continue;
      if (t.interval !== undefined) t.due = now + t.interval;
      else timers.delete(id);
      try {
        t.fn(...t.args);
      } catch (err) {
        hostCall("log", "error", `Uncaught error in timer: ${errorStack(err) ?? errorText(err)}`);
      }
    }
  },
  complete(id, outcomeJson) {
    const op = pendingOps.get(id);
    if (!op) return;
    pendingOps.delete(id);
    op.resolve(JSON.parse(outcomeJson));
  },
  // What a spawned program sent: "stdout"/"stderr" with a Uint8Array, "exit" with {code,
  // signal} when it exited, "closed" once its output ended too (the last).
  programOutput(id, kind, data) {
    const program = programs.get(id);
    if (!program) return;
    if (kind === "closed") programs.delete(id);
    try {
      program(kind, data);
    } catch (err) {
      hostCall("log", "error", `Uncaught error in a child process handler: ${errorStack(err) ?? errorText(err)}`);
    }
  },
  // What a worker (or, in a worker, the parent: handle 0) sent: "message" with JSON text,
  // "error" with the text of what it threw, "exit" with its code (the last).
  workerEvent(id, kind, payload) {
    const listener = workerListeners.get(id);
    if (!listener) return;
    if (kind === "exit") workerListeners.delete(id);
    try {
      listener(kind, payload);
    } catch (err) {
      if (workerRun) workerRun.fail(err);
      else hostCall("log", "error", `Uncaught error in a worker handler: ${errorStack(err) ?? errorText(err)}`);
    }
  },
  // The session action a running command asked for and the host has not been given yet, as
  // [name, JSON options] (null for none): the command's call stops there (commandActions).
  waitingAction() {
    const next = commandActions[0];
    if (!next || next.sent) return null;
    next.sent = true;
    return [next.name, JSON.stringify(next.args)];
  },
  // Nothing is left to wait for: in a worker, its run ends (true); elsewhere nothing to do.
  idle() {
    if (!workerRun) return false;
    workerRun.finish();
    return true;
  },
};
// Programs running with live stdio, by host handle: the function their output goes to.
const programs = new Map();
// Workers by host handle (0: in a worker, its parent): the function their events go to.
const workerListeners = new Map();
// In a worker: its run, which ends when nothing is left to do or something goes uncaught.
let workerRun = null;
globalThis.__pichamber_loop = eventLoop;

// As in Node, a timer's delay is at least 1 ms (setTimeout(fn, 0) waits a millisecond); only
// setImmediate runs as soon as the loop turns. The handle is Node's Timeout (or Immediate):
// ref/unref (kept for hasRef: an extension's loop lives as long as its session, so neither
// holds anything open), refresh, and its id as its primitive value (`+timer`, clearTimeout(id)).
class Timeout {
  #id;
  #entry;
  #ref = true;
  constructor(entry, id) {
    this.#entry = entry;
    this.#id = id;
  }
  ref() {
    this.#ref = true;
    return this;
  }
  unref() {
    this.#ref = false;
    return this;
  }
  hasRef() {
    return this.#ref;
  }
  /** Starts the delay again from now, even after the timer fired. */
  refresh() {
    this.#entry.due = Date.now() + this.#entry.delay;
    timers.set(this.#id, this.#entry);
    return this;
  }
  close() {
    timers.delete(this.#id);
    return this;
  }
  [Symbol.toPrimitive]() {
    return this.#id;
  }
}
class Immediate extends Timeout {
  refresh() {
    return this;
  }
}
function addTimer(fn, ms, args, repeat, least = 1) {
  if (ahead.on) touchedAhead("a timer");
  if (typeof fn !== "function") throw new TypeError("The callback must be a function");
  // Node's range: a delay past 2^31 - 1 ms (or not a number) becomes the least one.
  let delay = Math.max(least, Number(ms) || 0);
  if (delay > 2147483647) delay = least;
  const id = nextTimerId++;
  const entry = { fn, args, delay, due: Date.now() + delay, interval: repeat ? delay : undefined };
  timers.set(id, entry);
  return least ? new Timeout(entry, id) : new Immediate(entry, id);
}
const clearTimer = (handle) => {
  if (handle instanceof Timeout) handle.close();
  else if (typeof handle === "number" || typeof handle === "string") timers.delete(Number(handle));
};
globalThis.setTimeout = (fn, ms, ...args) => addTimer(fn, ms, args, false);
globalThis.setInterval = (fn, ms, ...args) => addTimer(fn, ms, args, true);
globalThis.setImmediate = (fn, ...args) => addTimer(fn, 0, args, false, 0);
globalThis.clearTimeout = globalThis.clearInterval = globalThis.clearImmediate = clearTimer;
if (typeof globalThis.queueMicrotask !== "function") {
  globalThis.queueMicrotask = (fn) => void Promise.resolve().then(fn);
}

/** Starts a host operation; resolves with its outcome. Cancelling resolves `{cancelled:true}`. */
function startOperation(op, signal) {
  if (signal?.aborted) return Promise.resolve({ cancelled: true });
  const id = hostCall("start", op);
  return new Promise((resolve) => {
    const onAbort = () => {
      if (!pendingOps.has(id)) return;
      pendingOps.delete(id);
      hostCall("cancel", id);
      resolve({ cancelled: true, aborted: true });
    };
    pendingOps.set(id, {
      resolve: (outcome) => {
        signal?.removeEventListener?.("abort", onAbort);
        resolve(outcome);
      },
    });
    signal?.addEventListener?.("abort", onAbort, { once: true });
  });
}

// Math.random from the guest's random source (the host's, seeded under `pichamber check`)
// rather than QuickJS's clock-seeded generator: the shim's (guest-shim/src/random.rs), which
// it seeds at load (a snapshot's seed would be every instance's). Math.random stays this one
// function, so a reference taken before load (by a module evaluated ahead) draws from it.
const seededRandom = globalThis.__pichamber_random;
delete globalThis.__pichamber_random;
let drawRandom = Math.random;
Math.random = function random() {
  if (ahead.on) touchedAhead("Math.random");
  return drawRandom();
};

// ---------------------------------------------------------------------------------------------
// Web-platform globals QuickJS lacks.

class EventTargetLite {
  #listeners = new Map();
  addEventListener(type, listener, options) {
    if (!listener) return;
    const list = this.#listeners.get(type) ?? [];
    list.push({ listener, once: !!(options && options.once) });
    this.#listeners.set(type, list);
  }
  removeEventListener(type, listener) {
    const list = this.#listeners.get(type);
    if (list) this.#listeners.set(type, list.filter((l) => l.listener !== listener));
  }
  dispatchEvent(event) {
    const list = [...(this.#listeners.get(event.type) ?? [])];
    for (const entry of list) {
      if (entry.once) this.removeEventListener(event.type, entry.listener);
      try {
        if (typeof entry.listener === "function") entry.listener.call(this, event);
        else entry.listener.handleEvent(event);
      } catch (err) {
        hostCall("log", "error", `Uncaught error in event listener: ${errorText(err)}`);
      }
    }
    return true;
  }
}
if (typeof globalThis.EventTarget !== "function") globalThis.EventTarget = EventTargetLite;
if (typeof globalThis.Event !== "function") {
  globalThis.Event = class Event {
    constructor(type) {
      this.type = type;
    }
  };
}

class AbortSignalLite extends EventTargetLite {
  aborted = false;
  reason = undefined;
  onabort = null;
  throwIfAborted() {
    if (this.aborted) throw this.reason;
  }
  static abort(reason) {
    const c = new AbortControllerLite();
    c.abort(reason);
    return c.signal;
  }
  static timeout(ms) {
    const c = new AbortControllerLite();
    setTimeout(() => c.abort(new DOMExceptionLite("The operation timed out.", "TimeoutError")), ms);
    return c.signal;
  }
  static any(signals) {
    const c = new AbortControllerLite();
    for (const s of signals) {
      if (s.aborted) {
        c.abort(s.reason);
        break;
      }
      s.addEventListener("abort", () => c.abort(s.reason), { once: true });
    }
    return c.signal;
  }
}
class DOMExceptionLite extends Error {
  constructor(message, name = "Error") {
    super(message);
    this.name = name;
  }
}
class AbortControllerLite {
  signal = new AbortSignalLite();
  abort(reason) {
    const s = this.signal;
    if (s.aborted) return;
    s.aborted = true;
    s.reason = reason === undefined ? new DOMExceptionLite("This operation was aborted", "AbortError") : reason;
    const event = new globalThis.Event("abort");
    if (typeof s.onabort === "function") s.onabort(event);
    s.dispatchEvent(event);
  }
}
if (typeof globalThis.AbortController !== "function") {
  globalThis.AbortController = AbortControllerLite;
  globalThis.AbortSignal = AbortSignalLite;
}
if (typeof globalThis.DOMException !== "function") globalThis.DOMException = DOMExceptionLite;
// This QuickJS has no WeakRef or FinalizationRegistry. The language lets a WeakRef keep its
// target (collection is never promised) and a registry never call back, so these are correct
// if not thrifty: an instance's memory is bounded by its limit anyway.
if (typeof globalThis.WeakRef !== "function") {
  globalThis.WeakRef = class WeakRef {
    #target;
    constructor(target) {
      if ((typeof target !== "object" && typeof target !== "function") || target === null) {
        throw new TypeError("WeakRef: target must be an object");
      }
      this.#target = target;
    }
    deref() {
      return this.#target;
    }
    get [Symbol.toStringTag]() {
      return "WeakRef";
    }
  };
}
if (typeof globalThis.FinalizationRegistry !== "function") {
  globalThis.FinalizationRegistry = class FinalizationRegistry {
    constructor(cleanup) {
      if (typeof cleanup !== "function") throw new TypeError("FinalizationRegistry: cleanup must be callable");
    }
    register() {}
    unregister() {
      return false;
    }
    get [Symbol.toStringTag]() {
      return "FinalizationRegistry";
    }
  };
}
// Node's globals that extensions use without importing them, loaded on first use: most
// extensions never touch them, and compiling their modules would slow every start.
const requireModule = globalThis.__pichamber_require;
delete globalThis.__pichamber_require;
const loadingGlobals = new Set();
const lazyGlobalNames = new Set();
const lazyGlobal = (name, id, exportName) => {
  if (name in globalThis) return;
  lazyGlobalNames.add(name);
  const settle = (value) => Object.defineProperty(globalThis, name, { value, writable: true, configurable: true });
  Object.defineProperty(globalThis, name, {
    configurable: true,
    get() {
      // A module that reads its own global while it is being loaded sees it as absent.
      if (loadingGlobals.has(id)) return undefined;
      loadingGlobals.add(id);
      try {
        const value = requireModule(id)[exportName];
        settle(value);
        return value;
      } finally {
        loadingGlobals.delete(id);
      }
    },
    set: settle,
  });
};
// The engine's TextDecoder decodes whole inputs only. This one adds `{stream: true}`: the bytes
// of a UTF-8 character cut at a chunk's end wait for the next call, and only the stream's
// first BOM is dropped, as the WHATWG decoder does. Other encodings decode chunk by chunk.
const EngineTextDecoder = globalThis.TextDecoder;
if (typeof EngineTextDecoder === "function") {
  // How many bytes at the end of `bytes` begin a character the next chunk completes.
  const incompleteUtf8Tail = (bytes) => {
    const n = bytes.length;
    for (let back = 1; back <= Math.min(3, n); back++) {
      const b = bytes[n - back];
      if ((b & 0xc0) === 0x80) continue; // a continuation byte: its lead is further back
      const length = b >= 0xf0 && b <= 0xf4 ? 4 : b >= 0xe0 && b < 0xf0 ? 3 : b >= 0xc2 && b < 0xe0 ? 2 : 1;
      return length > back ? back : 0;
    }
    return 0;
  };
  const asBytes = (input) => {
    if (input === undefined) return new Uint8Array(0);
    if (input instanceof ArrayBuffer) return new Uint8Array(input);
    if (ArrayBuffer.isView(input)) return new Uint8Array(input.buffer, input.byteOffset, input.byteLength);
    throw new TypeError('The "input" argument must be an instance of ArrayBuffer or ArrayBufferView');
  };
  globalThis.TextDecoder = class TextDecoder {
    #engine;
    #fatal;
    #ignoreBOM;
    #pending = new Uint8Array(0);
    #atStart = true;
    constructor(label = "utf-8", options = {}) {
      this.#fatal = !!options?.fatal;
      this.#ignoreBOM = !!options?.ignoreBOM;
      // The BOM is dropped here (once per stream), not by the engine per call.
      this.#engine = new EngineTextDecoder(label, { fatal: !!options?.fatal, ignoreBOM: true });
    }
    get encoding() {
      return this.#engine.encoding;
    }
    get fatal() {
      return this.#fatal;
    }
    get ignoreBOM() {
      return this.#ignoreBOM;
    }
    decode(input, options) {
      const stream = !!options?.stream;
      let bytes = asBytes(input);
      if (this.#pending.length) {
        const joined = new Uint8Array(this.#pending.length + bytes.length);
        joined.set(this.#pending);
        joined.set(bytes, this.#pending.length);
        bytes = joined;
      }
      const keep = stream && this.encoding === "utf-8" ? incompleteUtf8Tail(bytes) : 0;
      this.#pending = bytes.slice(bytes.length - keep);
      let text = this.#engine.decode(bytes.subarray(0, bytes.length - keep));
      if (this.#atStart && text) {
        this.#atStart = false;
        if (!this.#ignoreBOM && text.charCodeAt(0) === 0xfeff) text = text.slice(1);
      }
      // The end of a stream: the next call starts another.
      if (!stream) this.#atStart = true;
      return text;
    }
  };
}
lazyGlobal("Buffer", "pichamber:node/buffer", "Buffer");
lazyGlobal("fetch", "pichamber:fetch", "fetch");
lazyGlobal("Headers", "pichamber:fetch", "Headers");
lazyGlobal("Response", "pichamber:fetch", "Response");
lazyGlobal("atob", "pichamber:node/buffer", "atob");
lazyGlobal("btoa", "pichamber:node/buffer", "btoa");
lazyGlobal("URL", "pichamber:node/url", "URLPolyfill");
lazyGlobal("URLSearchParams", "pichamber:node/url", "URLSearchParamsPolyfill");
// WHATWG streams (node:stream/web), which npm packages use as globals (an SSE parser that
// extends TransformStream, the MCP SDK's transports).
for (const name of [
  "ReadableStream",
  "ReadableStreamDefaultReader",
  "ReadableStreamDefaultController",
  "WritableStream",
  "WritableStreamDefaultWriter",
  "WritableStreamDefaultController",
  "TransformStream",
  "TransformStreamDefaultController",
  "ByteLengthQueuingStrategy",
  "CountQueuingStrategy",
  "TextEncoderStream",
  "TextDecoderStream",
]) {
  lazyGlobal(name, "pichamber:web-streams", name);
}
// The engine has no Intl: Intl.Segmenter, which extensions use to measure text, is provided.
lazyGlobal("Intl", "pichamber:intl", "Intl");
lazyGlobal("performance", "pichamber:node/perf_hooks", "performance");
// What async code lowered to generators calls (modules/async-lowering.js says when).
lazyGlobal("babelHelpers", "pichamber:async-lowering", "babelHelpers");
// Node's name for the global object (code written for Node and browsers looks for `global`,
// `window` or `self` to find it).
if (!("global" in globalThis)) globalThis.global = globalThis;
if (typeof globalThis.structuredClone !== "function") {
  globalThis.structuredClone = (value) => (value === undefined ? undefined : JSON.parse(JSON.stringify(value)));
}

// console.* goes to the host's log, never to the guest's stdout.
const formatArg = (a) => {
  if (typeof a === "string") return a;
  if (a instanceof Error) return errorStack(a) ?? errorText(a);
  try {
    return JSON.stringify(a) ?? String(a);
  } catch {
    return String(a);
  }
};
const logAt = (level) => (...args) => hostCall("log", level, args.map(formatArg).join(" "));
globalThis.console = {
  log: logAt("info"),
  info: logAt("info"),
  debug: logAt("debug"),
  trace: logAt("debug"),
  warn: logAt("warn"),
  error: logAt("error"),
  dir: logAt("info"),
  table: logAt("info"),
  assert: (cond, ...args) => {
    if (!cond) logAt("error")("Assertion failed:", ...args);
  },
  time() {},
  timeEnd() {},
  group() {},
  groupEnd() {},
};

// process: only granted environment variables, plus PiChamber's detection marker.
// process.env: a view of `env`, which load fills. Ahead of load it holds only the marker, as a
// session's holds only what is granted: a module evaluated ahead may read any variable the
// session's grants leave out (it is absent in both), never one they give (`ahead.grantedEnv`),
// nor list them, nor write.
let env = { PICHAMBER: "1" };
const envNameTouched = (key) => {
  if (ahead.on && typeof key === "string" && ahead.grantedEnv.has(key)) touchedAhead(`process.env.${key}`);
};
const envWritten = () => {
  if (ahead.on) touchedAhead("process.env (written)");
};
const envHandler = {
  get(target, key) {
    envNameTouched(key);
    return Reflect.get(target, key);
  },
  has(target, key) {
    envNameTouched(key);
    return Reflect.has(target, key);
  },
  getOwnPropertyDescriptor(target, key) {
    envNameTouched(key);
    return Reflect.getOwnPropertyDescriptor(target, key);
  },
  ownKeys(target) {
    if (ahead.on && ahead.grantedEnv.size > 0) touchedAhead("process.env's names");
    return Reflect.ownKeys(target);
  },
  set(target, key, value) {
    envWritten();
    return Reflect.set(target, key, value);
  },
  deleteProperty(target, key) {
    envWritten();
    return Reflect.deleteProperty(target, key);
  },
  defineProperty(target, key, descriptor) {
    envWritten();
    return Reflect.defineProperty(target, key, descriptor);
  },
};
let envView = new Proxy(env, envHandler);
const argv = ["pichamber", ""];
let startedAt = Date.now();
const sinceStart = () => {
  if (ahead.on) touchedAhead("process's clock");
  return Date.now() - startedAt;
};
globalThis.process = {
  get env() {
    return envView;
  },
  set env(value) {
    envWritten();
    env = value;
    envView = new Proxy(env, envHandler);
  },
  // ["pichamber", the extension's name]: the same in every session.
  get argv() {
    return argv;
  },
  platform: "linux",
  arch: "wasm32",
  version: "v20.0.0",
  versions: { node: "20.0.0", pichamber: "0.1.0" },
  pid: 1,
  cwd: () => loadContext.cwd,
  chdir() {
    throw new Error("process.chdir is not supported in pichamber");
  },
  exit(code) {
    throw new Error(`process.exit(${code ?? ""}) is not allowed in a pichamber extension`);
  },
  nextTick: (fn, ...args) => queueMicrotask(() => fn(...args)),
  hrtime: Object.assign(
    (prev) => {
      const ns = BigInt(Math.round(sinceStart() * 1e6));
      const t = [Number(ns / 1000000000n), Number(ns % 1000000000n)];
      return prev ? [t[0] - prev[0], t[1] - prev[1]] : t;
    },
    { bigint: () => BigInt(Math.round(sinceStart() * 1e6)) },
  ),
  uptime: () => sinceStart() / 1000,
  memoryUsage: Object.assign(
    () => {
      const { used, linear } = memoryUsage();
      return { rss: linear, heapTotal: linear, heapUsed: used, external: 0, arrayBuffers: 0 };
    },
    { rss: () => memoryUsage().linear },
  ),
  on() {
    return globalThis.process;
  },
  off() {
    return globalThis.process;
  },
  once() {
    return globalThis.process;
  },
  emitWarning: (w) => hostCall("log", "warn", String(w)),
  stdout: { write: (s) => (hostCall("log", "info", String(s)), true), isTTY: false },
  stderr: { write: (s) => (hostCall("log", "warn", String(s)), true), isTTY: false },
};
globalThis.__PICHAMBER__ = { version: 1 };

/** pi.exec / node:child_process: host-mediated, subject to the run capability. */
async function exec(command, args = [], options = {}) {
  const outcome = await startOperation(
    { op: "exec", command: String(command), args: (args ?? []).map(String), cwd: options.cwd, timeout: options.timeout },
    options.signal,
  );
  if (outcome.cancelled) return { stdout: "", stderr: "", code: 1, killed: true };
  if ("error" in outcome) throw new Error(outcome.error);
  return outcome.ok;
}
/** The same, blocking until the program ends (Node's synchronous child processes). */
function execBlocking(command, args = [], options = {}) {
  const id = hostCall("start", {
    op: "exec",
    command: String(command),
    args: (args ?? []).map(String),
    cwd: options.cwd,
    timeout: options.timeout,
  });
  const outcome = hostCall("waitFor", id);
  if ("error" in outcome) throw new Error(outcome.error);
  return outcome.ok;
}
// The built-in tools' wording and schemas are the host's, for the pi release the session
// follows: said once, in the host, and the same as the model sees them.
const builtinTools = () => hostCall("builtinTools");
/** One of pi's built-in tools, run by the host under this extension's grants. */
async function runBuiltinTool(tool, params, updateCallId, { cwd, signal } = {}) {
  const outcome = await startOperation({ op: "builtinTool", tool, params, updateCallId, cwd }, signal);
  if (outcome.cancelled) throw new Error("Operation aborted");
  if ("error" in outcome) throw new Error(outcome.error);
  return outcome.ok;
}
/**
 * Starts a program with live stdio under the run capability (child_process.spawn); `onOutput`
 * gets ("stdout" | "stderr", Uint8Array) as it arrives, ("exit", {code, signal}) when it
 * exits, and ("closed") last, when its output has ended too. Returns its controls; throws the
 * host's refusal.
 */
function spawnProgram(command, args, { cwd, env } = {}, onOutput) {
  const native = globalThis.__programs;
  const pairs = Object.entries(env ?? {})
    .filter(([, value]) => value !== undefined)
    .map(([name, value]) => [name, String(value)]);
  const id = native.spawn(String(command), (args ?? []).map(String), cwd === undefined ? undefined : String(cwd), pairs);
  programs.set(id, onOutput);
  return {
    id,
    write: (bytes) => native.write(id, bytes),
    closeStdin: () => native.closeStdin(id),
    kill: (signal) => native.kill(id, signal),
  };
}
/**
 * Starts a worker (node:worker_threads) from a bundled module id or script text with
 * `dataJson` as its workerData; `onEvent` gets ("message", json), ("error", text) and
 * ("exit", code), the last. Returns its handle; throws the host's refusal.
 */
function startWorker(kind, text, dataJson, onEvent) {
  const id = globalThis.__workers.start(kind, String(text), dataJson);
  workerListeners.set(id, onEvent);
  return id;
}
/**
 * The guest engine's memory: `used` by live objects, the extension's `limit` on it, and the
 * instance's whole `linear` memory (the engine's heap lives in it).
 */
const memoryUsage = () => hostCall("memoryUsage");

/** fetch, carried out by the host: `{cancelled}`, `{error}` or `{ok: response}`. */
const fetchOperation = (request, signal) => startOperation({ op: "fetch", ...request }, signal);
let currentWorker = null;
let loaded = false;
const loadedHooks = [];
globalThis.__pichamber_internal = {
  memoryUsage,
  exec,
  execBlocking,
  spawnProgram,
  startWorker,
  postToWorker: (id, json) => globalThis.__workers.post(id, json),
  terminateWorker: (id) => globalThis.__workers.terminate(id),
  // In a worker: { data (JSON text), threadId, onParentMessage(listener), listen(on), post };
  // null in the extension.
  get worker() {
    if (ahead.on) touchedAhead("worker_threads' worker");
    return currentWorker;
  },
  set worker(value) {
    currentWorker = value;
  },
  builtinTools,
  runBuiltinTool,
  fetchOperation,
  dnsLookup: (hostname) => startOperation({ op: "dnsLookup", hostname }),
  resizeImage: (bytes, mimeType, options) =>
    startOperation({ op: "resizeImage", data: Buffer.from(bytes).toString("base64"), mimeType, options }),
  // The pi release the session follows: pi-coding-agent's VERSION.
  get piVersion() {
    return loadContext.piVersion;
  },
  // Refuses, while modules are evaluated ahead, what belongs to a session (`what`).
  touchedAhead,
  // Runs `fn` once the load context is known: now, or at load for a module evaluated ahead.
  whenLoaded(fn) {
    if (loaded) fn();
    else loadedHooks.push(fn);
  },
};

// ---------------------------------------------------------------------------------------------
// The extension's registrations.

const extension = {
  handlers: new Map(),
  tools: new Map(),
  commands: new Map(),
  flags: new Map(),
  shortcuts: new Map(),
  renderers: new Map(),
  busListeners: new Map(),
  virtualModels: new Map(),
};
let loading = false;
const notInitialized = () => {
  if (loading) {
    throw new Error("Extension runtime not initialized. Action methods cannot be called during extension loading.");
  }
};
const action = (fn) => (...args) => {
  notInitialized();
  return fn(...args);
};

const eventBus = {
  emit(channel, data) {
    hostCall("emitBusEvent", String(channel), data === undefined ? null : data);
    deliverToListeners(String(channel), data);
  },
  on(channel, handler) {
    const key = String(channel);
    const list = extension.busListeners.get(key) ?? [];
    const entry = { handler };
    list.push(entry);
    extension.busListeners.set(key, list);
    return () => {
      const current = extension.busListeners.get(key) ?? [];
      extension.busListeners.set(key, current.filter((e) => e !== entry));
    };
  },
  clear() {
    extension.busListeners.clear();
  },
};
function deliverToListeners(channel, data) {
  // pi wraps each listener: async, errors logged, never thrown into the emitter.
  return Promise.all(
    [...(extension.busListeners.get(channel) ?? [])].map(({ handler }) =>
      (async () => handler(data))().catch((err) =>
        hostCall("log", "error", `Event handler error (${channel}): ${errorStack(err) ?? errorText(err)}`),
      ),
    ),
  );
}

const pi = {
  on(event, handler) {
    if (typeof handler !== "function") throw new TypeError(`pi.on("${event}"): handler must be a function`);
    const list = extension.handlers.get(event) ?? [];
    if (list.length === 0) hostCall("subscribe", String(event));
    list.push(handler);
    extension.handlers.set(event, list);
    // pi 1.6.0: the handler's unsubscribe function.
    return () => {
      const at = list.indexOf(handler);
      if (at >= 0) list.splice(at, 1);
    };
  },
  registerTool(tool) {
    if (!tool || typeof tool.name !== "string") throw new TypeError("registerTool: tool.name must be a string");
    if (typeof tool.execute !== "function") throw new TypeError(`registerTool(${tool.name}): execute must be a function`);
    hostCall("registerTool", {
      name: tool.name,
      label: tool.label ?? tool.name,
      description: tool.description ?? "",
      parameters: tool.parameters ?? { type: "object", properties: {} },
      promptSnippet: tool.promptSnippet,
      promptGuidelines: tool.promptGuidelines ?? [],
      hasPrepareArguments: typeof tool.prepareArguments === "function",
      executionMode: tool.executionMode,
      hasRenderCall: typeof tool.renderCall === "function",
      hasRenderResult: typeof tool.renderResult === "function",
      constrainedSampling: tool.constrainedSampling,
      exposure: tool.exposure,
      defaultActive: tool.defaultActive,
      namespace: tool.namespace,
      annotations: tool.annotations,
    });
    extension.tools.set(tool.name, tool);
  },
  registerCommand(name, options) {
    if (typeof options?.handler !== "function") throw new TypeError(`registerCommand(${name}): handler must be a function`);
    hostCall("registerCommand", {
      name: String(name),
      description: options.description,
      hasArgumentCompletions: typeof options.getArgumentCompletions === "function",
    });
    extension.commands.set(String(name), { name: String(name), ...options });
  },
  registerShortcut(shortcut, options) {
    hostCall("registerShortcut", { shortcut: String(shortcut), description: options?.description });
    extension.shortcuts.set(String(shortcut), options);
  },
  registerFlag(name, options) {
    hostCall("registerFlag", { name: String(name), description: options?.description, type: options?.type, default: options?.default });
    extension.flags.set(String(name), options);
  },
  getFlag(name) {
    if (!extension.flags.has(name)) return undefined;
    return hostCall("getFlag", String(name)) ?? undefined;
  },
  registerMessageRenderer(customType, renderer) {
    hostCall("registerMessageRenderer", String(customType));
    extension.renderers.set(String(customType), renderer);
  },
  // pi 1.6.0's terminal renderers of custom entries, tool calls and markdown: RPC mode draws
  // nothing, so it keeps them and never calls them; so does pichamber.
  registerEntryRenderer() {},
  registerToolRenderer() {},
  registerMarkdownTransformer() {},
  sendMessage: action((message, options) => void hostCall("sendMessage", message, options ?? {})),
  sendUserMessage: action((content, options) => void hostCall("sendUserMessage", content, options ?? {})),
  appendEntry: action((customType, data) => void hostCall("appendEntry", String(customType), data === undefined ? null : data)),
  setSessionName: action((name) => void hostCall("setSessionName", String(name))),
  getSessionName: action(() => hostCall("getSessionName") ?? undefined),
  setLabel: action((entryId, label) => void hostCall("setLabel", String(entryId), label ?? null)),
  exec: (command, args, options) => exec(command, args, options),
  getActiveTools: action(() => hostCall("getActiveTools")),
  getAllTools: action(() => hostCall("getAllTools")),
  // pi 1.6.0: the effective settings (a copy).
  getSettings: action(() => hostCall("getSettings")),
  setActiveTools: action((names) => void hostCall("setActiveTools", names)),
  getCommands: action(() => hostCall("getCommands")),
  setModel: (model) => {
    if (loading) return Promise.reject(new Error("Extension runtime not initialized"));
    return Promise.resolve(hostCall("setModel", model));
  },
  getThinkingLevel: action(() => hostCall("getThinkingLevel")),
  setThinkingLevel: action((level) => void hostCall("setThinkingLevel", String(level))),
  registerProvider(name, config) {
    const { streamSimple, oauth, ...data } = config ?? {};
    hostCall("registerProvider", String(name), { ...data, hasStreamSimple: typeof streamSimple === "function", hasOAuth: !!oauth });
  },
  unregisterProvider: (name) => void hostCall("unregisterProvider", String(name)),
  events: eventBus,
};
// What pi 1.6.0 added to the API; a session that follows 0.73.1 lacks it, as 0.73.1 does.
// `followPi` puts it on `pi`: at load, or in an extension's snapshot, made for one release.
const registeredWhileLoading = new Set();
const pi16Api = {
  // A catalog entry whose requests `route` sends to a model of the catalog. The host lists it
  // and asks `route` (through routeModel below) before each of its requests.
  registerVirtualModel(model) {
    const { route, ...definition } = model ?? {};
    if (typeof route !== "function") throw new TypeError(`registerVirtualModel(${definition.provider}/${definition.id}): route must be a function`);
    hostCall("registerVirtualModel", definition);
    extension.virtualModels.set(`${definition.provider}/${definition.id}`, { ...definition, route });
  },
  unregisterVirtualModel(provider, id) {
    hostCall("unregisterVirtualModel", String(provider), String(id));
    extension.virtualModels.delete(`${provider}/${id}`);
  },
  // pi 1.6.0's MCP server registry (the host checks and keeps it; see mcp_servers_change).
  registerMcpServer(name, config) {
    hostCall("registerMcpServer", String(name), config ?? null);
    if (loading) registeredWhileLoading.add(String(name));
  },
  unregisterMcpServer: (name) => void hostCall("unregisterMcpServer", String(name)),
  // pi applies what a factory registers once the factory returned: until then it lists only
  // the other extensions' servers.
  getMcpServers: () => {
    const servers = hostCall("getMcpServers");
    return loading ? servers.filter((s) => !registeredWhileLoading.has(s.name)) : servers;
  },
};

function followPi(version) {
  followsPi16 = !String(version ?? "1.6.0").startsWith("0.");
  const has16 = Object.hasOwn(pi, "registerVirtualModel");
  if (followsPi16 && !has16) Object.assign(pi, pi16Api);
  if (!followsPi16 && has16) for (const key of Object.keys(pi16Api)) delete pi[key];
}

// ---------------------------------------------------------------------------------------------
// ctx: rebuilt for every call from the host's snapshot (cwd, model, ...) plus live methods.

function dialog(op, defaultValue, parse, opts) {
  const { signal, timeout } = opts ?? {};
  return startOperation({ ...op, timeout }, signal).then((outcome) => (outcome.cancelled ? defaultValue : parse(outcome)));
}

let customWarned = false;
const ui = {
  select: (title, options, opts) =>
    dialog({ op: "select", title: String(title), options: (options ?? []).map(String) }, undefined, (r) => r.value, opts),
  confirm: (title, message, opts) =>
    dialog({ op: "confirm", title: String(title), message: String(message ?? "") }, false, (r) => r.confirmed === true, opts),
  input: (title, placeholder, opts) =>
    dialog({ op: "input", title: String(title), placeholder }, undefined, (r) => r.value, opts),
  editor: (title, prefill, opts) =>
    dialog({ op: "editor", title: String(title), prefill }, undefined, (r) => r.value, opts),
  form: (title, fields, opts) =>
    dialog({ op: "form", title: String(title), fields: fields ?? [] }, undefined, (r) => JSON.parse(r.value), opts),
  notify: (message, type) => void hostCall("ui", { kind: "notify", message: String(message), type }),
  onTerminalInput: () => () => {},
  setStatus: (key, text) => void hostCall("ui", { kind: "status", key: String(key), text: text === undefined ? undefined : String(text) }),
  setWorkingMessage() {},
  setWorkingVisible() {},
  setWorkingIndicator() {},
  setHiddenThinkingLabel() {},
  setWidget(key, content, options) {
    // pi's RPC mode forwards string arrays and ignores component factories.
    if (content === undefined || Array.isArray(content)) {
      hostCall("ui", { kind: "widget", key: String(key), lines: content?.map(String), placement: options?.placement });
    }
  },
  setFooter() {},
  setHeader() {},
  setTitle: (title) => void hostCall("ui", { kind: "title", title: String(title) }),
  // A terminal component: RPC mode (whose semantics pichamber follows) cannot show one and
  // resolves undefined; saying so once lets a GUI user see why a command showed nothing.
  async custom() {
    if (!customWarned) {
      customWarned = true;
      hostCall("log", "warn", "ctx.ui.custom() asks for a terminal component, which pichamber cannot show (neither can pi's RPC mode): it resolved to undefined and nothing was drawn");
    }
    return undefined;
  },
  pasteToEditor(text) {
    this.setEditorText(text);
  },
  setEditorText: (text) =>
    text === undefined
      ? void hostCall("clearEditorText")
      : void hostCall("ui", { kind: "editorText", text: String(text) }),
  getEditorText: () => hostCall("getEditorText"),
  addAutocompleteProvider() {},
  setEditorComponent() {},
  getEditorComponent: () => undefined,
  get theme() {
    return requireModule("pichamber:theme").sessionTheme(() => hostCall("theme"));
  },
  getAllThemes: () => [],
  getTheme: () => undefined,
  setTheme: () => ({ success: false, error: "Theme switching not supported in RPC mode" }),
  getToolsExpanded: () => false,
  setToolsExpanded() {},
};

const sessionRead = (method) => (...args) => hostCall("sessionRead", method, args);
const sessionManager = {
  getEntries: sessionRead("getEntries"),
  getBranch: sessionRead("getBranch"),
  getLeafId: () => sessionRead("getLeafId")() ?? null,
  getLeafEntry: () => sessionRead("getLeafEntry")() ?? undefined,
  getEntry: (id) => sessionRead("getEntry")(id) ?? undefined,
  getLabel: (id) => sessionRead("getLabel")(id) ?? undefined,
  getChildren: sessionRead("getChildren"),
  getTree: sessionRead("getTree"),
  getHeader: () => sessionRead("getHeader")() ?? null,
  getSessionFile: () => sessionRead("getSessionFile")() ?? undefined,
  getSessionId: sessionRead("getSessionId"),
  getSessionDir: sessionRead("getSessionDir"),
  getSessionName: () => sessionRead("getSessionName")() ?? undefined,
  getCwd: () => loadContext.cwd,
  buildContextEntries: sessionRead("buildContextEntries"),
};

// ctx.modelRegistry over the host's catalog (pi's models.json and virtual models). Model
// calls are made by the host, so API keys never enter the sandbox.
const catalog = () => hostCall("getModels");
const sameModel = (a, provider, id) => a.provider === provider && a.id === id;
const catalogEntry = (model) => model && catalog().find((e) => sameModel(e.model, model.provider, model.id));
// Reading a provider's key is a capability (--allow-model-key=PROVIDER): the host refuses
// it otherwise, naming the flag. Model calls need no grant: the host makes them.
const credentials = (provider, modelId) => hostCall("getApiKey", String(provider), modelId === undefined ? null : String(modelId));
async function apiKeyAndHeaders(model) {
  try {
    const { apiKey, headers } = credentials(model?.provider, model?.id);
    const auth = { ok: true };
    if (apiKey != null) auth.apiKey = apiKey;
    if (Object.keys(headers).length) auth.headers = headers;
    return auth;
  } catch (err) {
    return { ok: false, error: errorText(err) };
  }
}

async function completeModel(model, context, options) {
  if (!model || typeof model !== "object") throw new TypeError("ctx.modelRegistry.complete(model, context): model must be a Model");
  if (model.api === "pi-virtual") throw new Error(`Virtual model ${model.provider}/${model.id} must be routed before streaming`);
  const { signal, ...rest } = options ?? {};
  const plain = JSON.parse(JSON.stringify(rest));
  const outcome = await startOperation(
    { op: "model", provider: String(model.provider), modelId: String(model.id), context: JSON.parse(JSON.stringify(context ?? {})), options: plain },
    signal,
  );
  if (outcome.cancelled) {
    return { role: "assistant", content: [], api: model.api, provider: model.provider, model: model.id, stopReason: "aborted", errorMessage: "Request was aborted", timestamp: Date.now() };
  }
  if (outcome.error !== undefined) throw new Error(outcome.error);
  return outcome.ok;
}

// pi-ai's AssistantMessageEventStream over one host call: `start`, then `done` (or `error`),
// and `result()`. The host does not forward the provider's deltas to the guest.
function messageStream(model, context, options) {
  const result = completeModel(model, context, options).catch((err) => ({
    role: "assistant", content: [], api: model?.api, provider: model?.provider, model: model?.id,
    stopReason: "error", errorMessage: errorText(err), timestamp: Date.now(),
  }));
  return {
    result: () => result,
    async *[Symbol.asyncIterator]() {
      const message = await result;
      yield { type: "start", partial: message };
      if (message.stopReason === "error" || message.stopReason === "aborted") {
        yield { type: "error", reason: message.stopReason, error: message };
      } else {
        yield { type: "done", reason: message.stopReason, message };
      }
    },
  };
}

const ofType = (type, list) => (type === "chat" ? list : []);
const modelRegistry = {
  refresh: async () => ({ ok: true }),
  getError: () => undefined,
  getAll: () => catalog().map((e) => e.model),
  getAvailable: () => catalog().filter((e) => e.configured).map((e) => e.model),
  find: (provider, id) => catalog().find((e) => sameModel(e.model, provider, id))?.model,
  findOfType: (type, provider, id) => ofType(type, catalog()).find((e) => sameModel(e.model, provider, id))?.model,
  getModelOfType: (type, provider, id) => ofType(type, catalog()).find((e) => sameModel(e.model, provider, id))?.model,
  getModelsOfType: (type, provider) =>
    ofType(type, catalog()).filter((e) => provider === undefined || e.model.provider === provider).map((e) => e.model),
  getAvailableOfType: async (type, provider) =>
    ofType(type, catalog()).filter((e) => e.configured && (provider === undefined || e.model.provider === provider)).map((e) => e.model),
  hasConfiguredAuth: (model) => catalogEntry(model)?.configured === true,
  getProviderAuthStatus: (provider) =>
    catalog().some((e) => e.model.provider === provider && e.configured) ? { configured: true, source: "models_json_key" } : { configured: false },
  getProviderDisplayName: (provider) => String(provider),
  isUsingOAuth: () => false,
  getApiKeyAndHeaders: apiKeyAndHeaders,
  getApiKeyForProvider: async (provider) => credentials(provider).apiKey ?? undefined,
  getProviderAuth: async () => undefined,
  complete: completeModel,
  stream: messageStream,
  streamSimple: messageStream,
  classify: async () => ({ stopReason: "error", errorMessage: "pichamber's host has no classifier models", answers: {} }),
  generateImages: async () => ({ stopReason: "error", errorMessage: "pichamber's host has no image models", images: [] }),
  registerProvider: (name, config) => pi.registerProvider(name, config),
  unregisterProvider: (name) => pi.unregisterProvider(name),
  registerVirtualModel: (definition) => pi.registerVirtualModel({ ...definition, route: (request) => definition.route(request) }),
  unregisterVirtualModel: (provider, id) => pi.unregisterVirtualModel(provider, id),
  getRegisteredProviderConfig: () => undefined,
  getRegisteredNativeProvider: () => undefined,
  getRegisteredProviderIds: () => [],
};

const neverAborted = () => new AbortController().signal;

// ctx's methods read nothing of the call they are made for: made once, not for every call.
const contextMethods = {
  isIdle: () => hostCall("isIdle"),
  abort: () => void hostCall("abort"),
  hasPendingMessages: () => hostCall("hasPendingMessages"),
  shutdown: () => void hostCall("shutdown"),
  getContextUsage: () => hostCall("getContextUsage") ?? undefined,
  compact(options) {
    const { onComplete, onError, ...data } = options ?? {};
    let callback;
    if (typeof onComplete === "function" || typeof onError === "function") {
      callback = nextCompactionCallback++;
      compactionCallbacks.set(callback, { onComplete, onError });
    }
    // pi starts it at once, beside the command, which may then await its callbacks: from a
    // running command it is an action the command's call stops at.
    if (commandRunning) void awaitedAction("compact", { ...data, callback });
    else hostCall("compact", { ...data, callback });
  },
  getSystemPrompt: () => hostCall("getSystemPrompt"),
};
// Getters, as in pi: a context holds no value of its own that a handler could change in place
// (which lets a dispatch's context serve the next; see dispatchContext).
const pi16ContextAccessors = {
  thinkingLevel: { get: () => hostCall("getThinkingLevel"), enumerable: true, configurable: true },
  scopedModels: { get: () => [], enumerable: true, configurable: true },
};

// The host's context snapshot (cwd, model, ...) is the same text from call to call until the
// session changes: parsed once per change, so every ctx shares one `model` object until the
// model changes, as in pi, where ctx.model is the session's own.
let lastSnapshotJson = "";
let lastSnapshot = {};
function parseSnapshot(json) {
  if (json !== lastSnapshotJson) {
    lastSnapshot = JSON.parse(json);
    lastSnapshotJson = json;
  }
  return lastSnapshot;
}

const isTrusted = () => true;
const isNotTrusted = () => false;

function makeContext(snapshot, signal) {
  const m = contextMethods;
  const ctx = {
    ui,
    hasUI: snapshot.hasUI ?? loadValues.hasUI,
    mode: loadValues.mode,
    cwd: snapshot.cwd ?? loadValues.cwd,
    sessionManager,
    modelRegistry,
    model: snapshot.model ?? undefined,
    signal,
    isIdle: m.isIdle,
    abort: m.abort,
    hasPendingMessages: m.hasPendingMessages,
    shutdown: m.shutdown,
    getContextUsage: m.getContextUsage,
    compact: m.compact,
    getSystemPrompt: m.getSystemPrompt,
  };
  if (followsPi16) {
    Object.defineProperties(ctx, pi16ContextAccessors);
    // Whether the folder's own resources were trusted to load (pi counts a folder with none as
    // trusted): --trust-project, or pi's rules through the pi entry.
    ctx.isProjectTrusted = snapshot.projectTrusted !== false ? isTrusted : isNotTrusted;
  }
  return ctx;
}

// QuickJS frees a shape with the last object that has it, so every ctx built its shape again,
// a property at a time (allocating, growing, rehashing, then freeing it). An object kept with
// each of ctx's first k properties, made once in the snapshot, leaves each step a shape to find.
const contextShapes = (() => {
  const template = makeContext({}, undefined);
  const keys = Reflect.ownKeys(template);
  return keys.map((_, k) => {
    const kept = {};
    for (const key of keys.slice(0, k + 1)) Object.defineProperty(kept, key, Object.getOwnPropertyDescriptor(template, key));
    return kept;
  });
})();

// A dispatch's context serves the next dispatch when no one could tell it from a new one:
// nothing holds it (strongly or weakly), and it is exactly as made, for the same snapshot.
// `__pichamber_reusable` (the shim's reuse.rs) reads that from the engine; the check below
// makes sure it answers right on this engine before any context is reused.
const reusable = globalThis.__pichamber_reusable;
delete globalThis.__pichamber_reusable;
let spareContext = null;
let contextTemplate = null;
let templateSnapshot = null;
let templateSize = 0;

// The spare context when `reusable` says it may serve again, else null; never kept twice.
function takeSpareContext(template, size) {
  const candidate = spareContext;
  spareContext = null;
  return candidate !== null && reusable(candidate, template, size) ? candidate : null;
}

const reuseIsSound = (() => {
  const template = makeContext({}, undefined);
  const size = Reflect.ownKeys(template).length;
  spareContext = makeContext({}, undefined);
  if (takeSpareContext(template, size) === null) return false;
  let kept = makeContext({}, undefined);
  spareContext = kept;
  if (takeSpareContext(template, size) !== null) return false;
  kept = null;
  // Each changes one thing `reusable` reads; only the WeakSet is kept, while it is asked.
  const changes = [
    (c) => void (c.added = true),
    (c) => void (c.cwd = "/elsewhere"),
    (c) => void delete c.ui,
    (c) => void Object.preventExtensions(c),
    (c) => void Object.setPrototypeOf(c, null),
    (c) => new WeakSet([c]),
  ];
  for (const change of changes) {
    spareContext = makeContext({}, undefined);
    const weakly = change(spareContext); // alive until the spare has been asked about
    if (takeSpareContext(template, size) !== null) return false;
  }
  return true;
})();

// The context a dispatch hands its handlers: the last one's when it may serve again. The
// template it is compared with is made at the second dispatch of a snapshot, and a context
// is kept from then on: a session that dispatches once (a new one's session_start) makes one
// context and keeps none, as before (a kept one had each idle session in `serve` write five
// pages more).
function dispatchContext(snapshot) {
  if (snapshot !== templateSnapshot) {
    templateSnapshot = snapshot;
    contextTemplate = null;
    spareContext = null;
  } else if (reuseIsSound) {
    if (contextTemplate === null) {
      contextTemplate = makeContext(snapshot);
      templateSize = Reflect.ownKeys(contextTemplate).length;
    }
    const spare = takeSpareContext(contextTemplate, templateSize);
    if (spare !== null) return spare;
  }
  return makeContext(snapshot);
}

// The options of a session action as they can cross to the host: functions (withSession,
// setup) cannot, and are dropped with a warning.
function plainOptions(name, args) {
  const plain = {};
  for (const [key, value] of Object.entries(args ?? {})) {
    if (typeof value === "function") {
      console.warn(`ctx.${name}(): option ${key} is a function, which pichamber cannot call back; it is ignored`);
    } else if (value !== undefined) {
      plain[key] = value;
    }
  }
  return plain;
}

// Session control from a command (pi's ExtensionCommandContext) that replaces the session
// (newSession, fork, switchSession, reload): the host carries it out when the command returns,
// so the promise resolves at once.
function sessionAction(name, args) {
  return new Promise((resolve) => {
    hostCall("sessionRead", `action:${name}`, [plainOptions(name, args)]);
    resolve({ cancelled: false });
  });
}

// Session actions a running command awaits (navigateTree; compact), in the order it asked
// for them: its call stops at each (eventLoop.waitingAction), the host carries it out, its
// events reaching every extension's handlers, this one's too, as in pi; then resumeCommand
// settles its promise and the command goes on. Outside a running command (a context kept past
// its command) an action runs when the current call returns, as the others do.
const commandActions = [];
let commandRunning = false;
// The running (or last) command's reply, which resumeCommand hands back to the host.
let commandReply = null;

function awaitedAction(name, args) {
  if (!commandRunning) return sessionAction(name, args);
  return new Promise((resolve, reject) => {
    commandActions.push({ name, args: plainOptions(name, args), resolve, reject, sent: false });
  });
}

function makeCommandContext(snapshot) {
  const ctx = makeContext(snapshot);
  if (followsPi16) ctx.getSystemPromptOptions = sessionRead("getSystemPromptOptions");
  return Object.assign(ctx, {
    waitForIdle: async () => {},
    newSession: (options) => sessionAction("newSession", options),
    fork: (entryId, options) => sessionAction("fork", { ...options, entryId }),
    navigateTree: (targetId, options) => awaitedAction("navigateTree", { ...options, targetId }),
    switchSession: (sessionPath, options) => sessionAction("switchSession", { ...options, sessionPath }),
    reload: () => sessionAction("reload"),
  });
}

// ---------------------------------------------------------------------------------------------
// Handler chains: one extension's handlers for one event, with pi's per-event semantics. The
// host runs the same fold across extensions in load order, feeding each the updated event.

function reportHandlerError(event, err) {
  hostCall("reportError", event, errorText(err), errorStack(err) ?? null);
}

const LEADING_SYSTEM_MESSAGE_REMOVED =
  "Handler removed the leading system message; the request has no prompt or initial tool declarations. Keep it at index 0 or replace a dropped prefix with getCurrentSystemMessage().";
const sessionBefore = new Set(["session_before_switch", "session_before_fork", "session_before_compact", "session_before_tree"]);

// A notification (every event without a chain of its own below): handlers run in order, a
// session_before_* result can cancel. The busiest chain, so it runs without a generator while
// each handler's answer can be taken at once (`takeNow`, as `drive` does), and hands the rest
// to `notificationRest` from the first that cannot.
function notificationChain(name, event, ctx, handlers) {
  const chain = { result: undefined, event };
  for (let i = 0; i < handlers.length; i++) {
    let answer;
    try {
      const h = handlers[i]; // called bare, as pi calls a handler: `this` is not the list
      const returned = h(event, ctx);
      answer = takeNow(returned, notNow);
      if (answer === notNow) return drive(notificationRest(name, chain, ctx, handlers, i, returned));
    } catch (err) {
      reportHandlerError(name, err);
      continue;
    }
    if (foldNotification(name, chain, answer)) break;
  }
  return chain;
}
function* notificationRest(name, chain, ctx, handlers, from, returned) {
  for (let i = from; i < handlers.length; i++) {
    try {
      const h = handlers[i];
      const answer = yield i === from ? returned : h(chain.event, ctx);
      if (foldNotification(name, chain, answer)) break;
    } catch (err) {
      reportHandlerError(name, err);
    }
  }
  return chain;
}
// Whether the chain stops here.
function foldNotification(name, chain, answer) {
  if (!answer || !sessionBefore.has(name)) return false;
  chain.result = answer;
  return Boolean(answer.cancel);
}

// The events whose handlers' results pi folds in its own way, each with its chain.
const ownChains = new Map(
  Object.entries({
    *tool_call(name, event, ctx, handlers) {
      let result;
      // Errors propagate: a failing gate must not let the call through.
      for (let i = 0; i < handlers.length; i++) {
        const h = handlers[i];
        const r = yield h(event, ctx);
        if (r) {
          result = r;
          if (r.block) break;
        }
      }
      return { result, event };
    },
    *tool_result(name, event, ctx, handlers) {
      let modified = false;
      for (let i = 0; i < handlers.length; i++) {
        const h = handlers[i];
        try {
          const r = yield h(event, ctx);
          if (!r) continue;
          for (const key of ["content", "details", "isError"]) {
            if (r[key] !== undefined) {
              event[key] = r[key];
              modified = true;
            }
          }
        } catch (err) {
          reportHandlerError(name, err);
        }
      }
      return { result: modified ? { content: event.content, details: event.details, isError: event.isError } : undefined, event };
    },
    *message_end(name, event, ctx, handlers) {
      let modified = false;
      for (let i = 0; i < handlers.length; i++) {
        const h = handlers[i];
        try {
          const r = yield h({ ...event }, ctx);
          if (!r?.message) continue;
          if (r.message.role !== event.message.role) {
            reportHandlerError(name, new Error("message_end handlers must return a message with the same role"));
            continue;
          }
          event.message = r.message;
          modified = true;
        } catch (err) {
          reportHandlerError(name, err);
        }
      }
      return { result: modified ? { message: event.message } : undefined, event };
    },
    *context(name, event, ctx, handlers) {
      let modified = false;
      for (let i = 0; i < handlers.length; i++) {
        const h = handlers[i];
        try {
          const r = yield h({ type: "context", messages: event.messages }, ctx);
          if (r?.messages) {
            event.messages = r.messages;
            modified = true;
          }
        } catch (err) {
          reportHandlerError(name, err);
        }
      }
      return { result: modified ? { messages: event.messages } : undefined, event };
    },
    *context_with_system(name, event, ctx, handlers) {
      // pi 1.6.0: the whole transcript, system messages included; what handlers return (or
      // edit in place) is what the request gets.
      for (let i = 0; i < handlers.length; i++) {
        const h = handlers[i];
        try {
          const leading = event.messages[0]?.role === "system";
          const r = yield h({ type: name, messages: event.messages }, ctx);
          if (r?.messages) event.messages = r.messages;
          if (leading && event.messages[0]?.role !== "system") {
            reportHandlerError(name, new Error(LEADING_SYSTEM_MESSAGE_REMOVED));
          }
        } catch (err) {
          reportHandlerError(name, err);
        }
      }
      return { result: undefined, event };
    },
    *turn_end(name, event, ctx, handlers) {
      // pi 1.6.0's actionable boundaries: each handler sees the entries and continuation
      // proposed so far and the context rebuilt from them (the host checks the proposal again).
      const base = { ...event };
      for (let i = 0; i < handlers.length; i++) {
        const h = handlers[i];
        try {
          const r = yield h({ ...base, entries: event.entries, continue: event.continue, context: event.context }, ctx);
          if (r?.entries !== undefined) event.entries = r.entries;
          if (r?.continue !== undefined) event.continue = r.continue;
        } catch (err) {
          reportHandlerError(name, err);
        }
        try {
          event.context = hostCall("sessionRead", "boundaryContext", [name, event.entries]);
          event.valid = true;
        } catch (err) {
          event.valid = false;
          reportHandlerError(name, new Error(`Invalid boundary entries: ${errorText(err)}`));
        }
      }
      return { result: undefined, event };
    },
    *before_provider_request(name, event, ctx, handlers) {
      let modified = false;
      for (let i = 0; i < handlers.length; i++) {
        const h = handlers[i];
        try {
          const r = yield h({ type: name, payload: event.payload }, ctx);
          if (r !== undefined) {
            event.payload = r;
            modified = true;
          }
        } catch (err) {
          reportHandlerError(name, err);
        }
      }
      return { result: modified ? { payload: event.payload } : undefined, event };
    },
    *before_agent_start(name, event, ctx, handlers) {
      const messages = [];
      let systemPromptModified = false;
      ctx.getSystemPrompt = () => event.systemPrompt;
      for (let i = 0; i < handlers.length; i++) {
        const h = handlers[i];
        try {
          const r = yield h({ ...event }, ctx);
          if (!r) continue;
          if (r.message) messages.push(r.message);
          if (r.systemPrompt !== undefined) {
            event.systemPrompt = r.systemPrompt;
            systemPromptModified = true;
          }
        } catch (err) {
          reportHandlerError(name, err);
        }
      }
      return {
        result:
          messages.length > 0 || systemPromptModified
            ? { messages: messages.length ? messages : undefined, systemPrompt: systemPromptModified ? event.systemPrompt : undefined }
            : undefined,
        event,
      };
    },
    *input(name, event, ctx, handlers) {
      const original = { text: event.text, images: event.images };
      for (let i = 0; i < handlers.length; i++) {
        const h = handlers[i];
        try {
          const r = yield h({ type: "input", text: event.text, images: event.images, source: event.source }, ctx);
          if (r?.action === "handled") return { result: r, event };
          if (r?.action === "transform") {
            event.text = r.text;
            event.images = r.images ?? event.images;
          }
        } catch (err) {
          reportHandlerError(name, err);
        }
      }
      const changed = event.text !== original.text || event.images !== original.images;
      return { result: changed ? { action: "transform", text: event.text, images: event.images } : { action: "continue" }, event };
    },
    *user_bash(name, event, ctx, handlers) {
      for (let i = 0; i < handlers.length; i++) {
        const h = handlers[i];
        try {
          const r = yield h(event, ctx);
          if (r) return { result: r, event };
        } catch (err) {
          reportHandlerError(name, err);
        }
      }
      return { result: undefined, event };
    },
    *project_trust(name, event, ctx, handlers) {
      // pi 1.6.0's trust context, as its RPC and print modes give it: nobody can be asked, so
      // dialogs answer at once; a notice goes to the operator (stderr), not to a client. The
      // first "yes" or "no" decides; anything but "undecided" counts as a decision, as in pi.
      const trustCtx = {
        cwd: ctx.cwd,
        mode: ctx.mode,
        hasUI: false,
        ui: {
          select: async () => undefined,
          confirm: async () => false,
          input: async () => undefined,
          notify: (message, type) => ctx.ui.notify(message, type),
        },
      };
      for (let i = 0; i < handlers.length; i++) {
        const h = handlers[i];
        try {
          const r = yield h({ type: name, cwd: event.cwd }, trustCtx);
          if (r === null || r === undefined) throw new TypeError(`Cannot read properties of ${r} (reading 'trusted')`);
          if (r.trusted === "undecided") continue;
          return { result: { trusted: r.trusted, remember: r.remember === true }, event };
        } catch (err) {
          reportHandlerError(name, err);
        }
      }
      return { result: undefined, event };
    },
    *resources_discover(name, event, ctx, handlers) {
      const paths = { skillPaths: [], promptPaths: [], themePaths: [] };
      for (let i = 0; i < handlers.length; i++) {
        const h = handlers[i];
        try {
          const r = yield h({ type: name, cwd: event.cwd, reason: event.reason }, ctx);
          for (const key of Object.keys(paths)) if (r?.[key]?.length) paths[key].push(...r[key]);
        } catch (err) {
          reportHandlerError(name, err);
        }
      }
      return { result: paths, event };
    },
  }),
);
// pi 1.6.0's two actionable boundaries fold alike.
ownChains.set("agent_before_settle", ownChains.get("turn_end"));

// Each chain of its own is a generator whose `yield`s are its awaits, run by `drive`: a
// dispatch whose handlers return at once (an async handler that awaited nothing has settled
// when it returns) then makes no promise and queues no job of its own. The result is
// `{ result, event }`, or a promise of it.
function runChain(name, event, ctx) {
  const handlers = extension.handlers.get(name) ?? [];
  const chain = ownChains.get(name);
  // turn_end in sessions that follow pi 0.73.1 has no proposal fields: a notification there.
  if (chain && (name !== "turn_end" || Array.isArray(event.entries))) return drive(chain(name, event, ctx, handlers));
  return notificationChain(name, event, ctx, handlers);
}

// ctx.compact's callbacks, kept until the host reports the outcome (compactionOutcome).
const compactionCallbacks = new Map();
let nextCompactionCallback = 1;

async function reportCompaction({ callback, result, error }) {
  const callbacks = compactionCallbacks.get(callback);
  compactionCallbacks.delete(callback);
  if (!callbacks) return { result: undefined, event: {} };
  // As in pi, a throwing onComplete is reported to onError.
  try {
    if (error !== undefined) throw new Error(error);
    callbacks.onComplete?.(result);
  } catch (err) {
    callbacks.onError?.(err instanceof Error ? err : new Error(String(err)));
  }
  return { result: undefined, event: {} };
}

// ---------------------------------------------------------------------------------------------
// Exports called by the Rust side. Each returns a promise of an array: `[null, ...parts]`, each
// part the JSON text of a value (null for undefined or null), or `[message]` when it threw, or
// null for no parts at all. The Rust side hands the parts on as they are: nothing is parsed
// twice.

const jsonPart = (value) => (value === undefined || value === null ? null : JSON.stringify(value));
const failure = (err) => {
  const stack = errorStack(err);
  return [stack ? `${errorText(err)}\n${stack.trimEnd()}` : errorText(err)];
};
// The host leads a dispatch's context with this when it does not need the event back. What
// the last context said is kept: the shim hands "" for a dispatch whose context is the same
// text (most are).
const NO_EVENT_BACK = '{"returnEvent":false,';
let dispatchSnapshot = {};
let dispatchEventBack = true;
function readDispatchCtx(ctxJson) {
  dispatchEventBack = !ctxJson.startsWith(NO_EVENT_BACK);
  dispatchSnapshot = parseSnapshot(dispatchEventBack ? ctxJson : `{${ctxJson.slice(NO_EVENT_BACK.length)}`);
}
// null when there is nothing to hand back (no result, the event not wanted).
const dispatchReply = ({ result, event }, eventBack) =>
  eventBack || (result !== undefined && result !== null) ? [null, jsonPart(result), eventBack ? jsonPart(event) : "null"] : null;
async function dispatchLater(chain, eventBack) {
  try {
    return dispatchReply(await chain, eventBack);
  } catch (err) {
    return failure(err);
  }
}

// Runs a generator whose `yield`s stand for `await`s: synchronously while what it yields can
// be taken at once with nothing else to run first, which is when `await` would resume it with
// no other job in between (the shim's `__pichamber_now`, kept from extensions as
// `__pichamber_require` is); otherwise it awaits, and returns a promise of what the generator
// returns.
const takeNow = globalThis.__pichamber_now;
delete globalThis.__pichamber_now;
// `instanceof Promise` for the prelude's own values, at a tenth of its cost.
const isPromise = globalThis.__pichamber_is_promise;
delete globalThis.__pichamber_is_promise;
const notNow = Symbol("not now");
function drive(generator, input, threw = false) {
  for (;;) {
    const step = threw ? generator.throw(input) : generator.next(input);
    if (step.done) return step.value;
    input = takeNow(step.value, notNow);
    threw = false;
    if (input === notNow) return driveLater(generator, step.value);
  }
}
async function driveLater(generator, awaited) {
  let input;
  let threw = false;
  try {
    input = await awaited;
  } catch (err) {
    input = err;
    threw = true;
  }
  return drive(generator, input, threw);
}

// One part: what `fn` resolves to.
const envelope = (fn) => async (...args) => {
  try {
    return [null, jsonPart(await fn(...args))];
  } catch (err) {
    return failure(err);
  }
};
// A part for each element of the array `fn` resolves to.
const envelopeParts = (fn) => async (...args) => {
  try {
    return [null, ...(await fn(...args)).map(jsonPart)];
  } catch (err) {
    return failure(err);
  }
};

// pi 1.6.0's ExtensionToolContext: the tools a tool may call, and executeTool, which runs one
// through the session's pipeline (the host's: validation, tool_call and tool_result handlers,
// execution events) as the call `<toolCallId>/<n>`. It never rejects.
function toolContext(toolCallId) {
  const active = new Set(hostCall("getActiveTools"));
  const tools = hostCall("getAllTools")
    .filter((t) => t.exposure === "codemode" || t.exposure === "deferred" || (t.exposure === "direct" && active.has(t.name)))
    .map(({ name, description, parameters }) => ({ name, label: name, description, parameters }));
  return {
    tools,
    async executeTool(name, args, options) {
      const failed = (text) => ({
        toolCall: { type: "toolCall", id: `${toolCallId}/?`, name: String(name), arguments: args ?? {} },
        result: { content: [{ type: "text", text }], details: {} },
        isError: true,
      });
      const outcome = await startOperation({ op: "nestedTool", tool: String(name), arguments: args ?? {}, parent: toolCallId }, options?.signal);
      if (outcome.cancelled) return failed("Operation aborted");
      if ("error" in outcome) return failed(outcome.error);
      return outcome.ok;
    },
  };
}

const toolResultFromError = (err) => ({ content: [{ type: "text", text: errorText(err) }], details: {}, isError: true });

// The load context comes as separate texts, no JSON to parse but the granted variables'.
function applyLoadContext(extensionName, cwd, mode, hasUI, piVersion, envJson) {
  loadValues.extensionName = extensionName;
  loadValues.cwd = cwd;
  loadValues.mode = mode;
  loadValues.hasUI = hasUI === "true";
  loadValues.piVersion = piVersion;
  followPi(piVersion);
  if (envJson !== "{}") Object.assign(env, JSON.parse(envJson));
  env.PICHAMBER = "1";
  argv[1] = loadValues.extensionName;
  startedAt = Date.now();
  drawRandom = seededRandom;
  loaded = true;
  for (const hook of loadedHooks.splice(0)) hook();
}

const RESULT_FIELDS = new Set(["content", "details", "terminate", "structuredContent"]);

/** A tool result's other own fields (isError, usage, ...), or undefined when it has none. */
function extraFields(result) {
  const extra = {};
  let any = false;
  for (const [key, value] of Object.entries(result)) {
    if (RESULT_FIELDS.has(key) || value === undefined || typeof value === "function") continue;
    try {
      JSON.stringify(value); // what cannot cross as JSON stays behind, not failing the call
    } catch {
      continue;
    }
    extra[key] = value;
    any = true;
  }
  return any ? extra : undefined;
}

// A tool's execution, as pi's agent loop makes it: the tool's result or its error as one.
async function executeTool(toolName, toolCallId, paramsJson, ctxJson) {
  const tool = extension.tools.get(toolName);
  if (!tool) return toolResultFromError(new Error(`Tool "${toolName}" is not registered by this extension`));
  const snapshot = parseSnapshot(ctxJson);
  const signal = neverAborted();
  const ctx = makeContext(snapshot, signal);
  if (followsPi16) Object.assign(ctx, toolContext(toolCallId));
  const onUpdate = (partial) => hostCall("toolUpdate", toolCallId, partial ?? null);
  try {
    const result = await tool.execute(toolCallId, JSON.parse(paramsJson), signal, onUpdate, ctx);
    if (!result || typeof result !== "object") {
      return toolResultFromError(new Error(`Tool "${toolName}" returned ${JSON.stringify(result)} instead of { content, details }`));
    }
    return {
      content: Array.isArray(result.content) ? result.content : [],
      details: result.details,
      // pi 1.6.0 fails a call whose result says isError: true; 0.73.1 only one that threw,
      // the result keeping its isError all the same.
      isError: followsPi16 && result.isError === true,
      terminate: result.terminate === true,
      structuredContent: result.structuredContent,
      extra: extraFields(result),
    };
  } catch (err) {
    return toolResultFromError(err);
  }
}

/**
 * A worker's run (see wit `workers`): its module (or script) evaluated with no `pi`, then its
 * event loop turning until nothing is left to wait for (the engine's `idle`), or until an
 * error nobody caught ends it.
 */
async function runWorker({ worker, data, threadId }) {
  let finish;
  let fail;
  const ended = new Promise((resolve, reject) => {
    finish = resolve;
    fail = reject;
  });
  workerRun = { finish: () => finish(), fail: (err) => fail(err) };
  globalThis.__pichamber_internal.worker = {
    data,
    threadId,
    // The parent's messages (JSON text) go to `listener`.
    onParentMessage(listener) {
      workerListeners.set(0, (kind, payload) => {
        if (kind === "message") listener(payload);
      });
    },
    // Whether the worker waits for its parent's messages (its port is listened to).
    listen: (on) => globalThis.__workers.listen(!!on),
    post: (json) => globalThis.__workers.post(0, json),
  };
  if ("module" in worker) {
    await import(worker.module);
  } else {
    // `new Worker(code, { eval: true })`: a script, with require for the built-in modules.
    const run = new Function("require", "__filename", "__dirname", String(worker.script));
    run(requireModule("pichamber:node/module").createRequire("/ext/[worker eval]"), "[worker eval]", ".");
  }
  await ended;
  return null;
}

const runCommand = envelope(async (name, args, ctxJson) => {
  const command = extension.commands.get(name);
  if (!command) throw new Error(`Command "/${name}" is not registered by this extension`);
  await command.handler(args, makeCommandContext(parseSnapshot(ctxJson)));
  return null;
});

// The namespaces of the modules evaluated in the extension's snapshot, by id: its factory
// needs no import (a turn of the job queue) to be found.
const evaluatedAhead = new Map();

// Runs an extension's factory, as a generator for `drive`: its `yield`s are `await`s, taken at
// once when nothing would run in between, so a load whose module was evaluated ahead and whose
// factory returns no pending promise (most) finishes without a turn of the job queue.
function* runFactory(id) {
  const namespace = yield evaluatedAhead.get(id) ?? import(id);
  const factory = namespace.default;
  if (typeof factory !== "function") {
    throw new Error("The extension has no default export function (export default function (pi) { ... })");
  }
  loading = true;
  try {
    yield factory(pi);
  } finally {
    loading = false;
  }
  return null;
}

// A package's several extensions come as a JSON array of ids: their factories run in order in
// this instance, so what they pass each other over pi.events stays as it is (functions too). A
// failure names the extension and fails the package as a whole.
function* runFactories(ids) {
  for (const id of ids) {
    try {
      yield* runFactory(id);
    } catch (err) {
      const where = id.replace(/^\/ext\//, "");
      if (err instanceof Error) {
        err.message = `${where}: ${err.message}`;
        throw err;
      }
      throw new Error(`${where}: ${errorText(err)}`);
    }
  }
  return null;
}
const loadLater = envelope((done) => done);

// The objects whose properties a module evaluated ahead may not change (globalThis: may only
// add to): its top level would then have changed the world of every instance before the
// extension's factory runs, where it may look at them.
const watchedAhead = () => [
  globalThis,
  Object.prototype,
  Function.prototype,
  Array.prototype,
  String.prototype,
  Number.prototype,
  Boolean.prototype,
  Symbol.prototype,
  BigInt.prototype,
  Promise.prototype,
  Map.prototype,
  Set.prototype,
  WeakMap.prototype,
  RegExp.prototype,
  Date.prototype,
  Error.prototype,
  Object,
  Array,
  Promise,
  Symbol,
  JSON,
  Math,
  Reflect,
  globalThis.process,
];
const propertiesOf = (object) =>
  new Map(Reflect.ownKeys(object).map((key) => [key, Object.getOwnPropertyDescriptor(object, key)]));
const sameProperty = (a, b) =>
  Object.is(a.value, b.value) && a.get === b.get && a.set === b.set && a.writable === b.writable && a.enumerable === b.enumerable;
// The watched objects' properties as the last module left them (nothing runs between one
// module's end and the next one's begin), and their fingerprints (the shim's, kept from
// extensions as `__pichamber_now` is): a module that changed none of an object costs a
// fingerprint of it, not a copy of its properties. Keeping the properties also keeps their
// values alive, so no new value can take the place, and the fingerprint, of an old one.
const fingerprint = globalThis.__pichamber_fingerprint;
delete globalThis.__pichamber_fingerprint;
let aheadLast = null;
let aheadPrints = null;
let aheadWatch = false;

globalThis.__pichamber = {
  // Around the evaluation of one module ahead: begin, then end, which says what it touched,
  // in which modules' code, and which watched properties it changed.
  aheadBegin(sessionsJson) {
    const { grantedEnv, piVersion, extensionName, watchGlobals } = JSON.parse(sessionsJson);
    ahead.touched = [];
    ahead.grantedEnv = new Set(grantedEnv);
    ahead.known = { piVersion, extensionName };
    followPi(piVersion);
    argv[1] = extensionName;
    if (watchGlobals && !aheadLast) {
      const objects = watchedAhead();
      aheadLast = objects.map(propertiesOf);
      aheadPrints = objects.map(fingerprint);
    }
    aheadWatch = watchGlobals;
    ahead.on = true;
  },
  // A module evaluated ahead and kept in the snapshot: its namespace, for `load`.
  aheadKeep(id, namespace) {
    evaluatedAhead.set(id, namespace);
  },
  aheadEnd() {
    ahead.on = false;
    const touched = ahead.touched.map((t) => t.what);
    const implicated = new Set();
    for (const { stack } of ahead.touched) {
      for (const line of stack.split("\n")) {
        const frame = /\(([^()]+?):\d+(?::\d+)?\)\s*$/.exec(line) ?? /^\s*at ([^\s()]+?):\d+(?::\d+)?\s*$/.exec(line);
        if (frame && !frame[1].startsWith("pichamber:")) implicated.add(frame[1]);
      }
    }
    const objects = aheadWatch ? watchedAhead() : [];
    objects.forEach((object, i) => {
      const print = fingerprint(object);
      if (print === aheadPrints[i]) return;
      const before = aheadLast[i];
      const after = propertiesOf(object);
      aheadLast[i] = after;
      aheadPrints[i] = print;
      const name = (key) => (i === 0 ? `globalThis.${String(key)}` : `a built-in's ${String(key)}`);
      for (const [key, descriptor] of after) {
        const was = before.get(key);
        // A global of its own (zod's registry) is the module's: what ran before could not
        // have used it. A built-in's new property (a polyfill) could have been looked for.
        if (was === undefined) {
          if (i !== 0) touched.push(`${name(key)} (added)`);
        }
        // A lazily loaded global (Buffer, fetch...) taking its value is the prelude's doing.
        else if (!sameProperty(was, descriptor) && !(i === 0 && lazyGlobalNames.has(key) && was.get && !descriptor.get)) {
          touched.push(`${name(key)} (changed)`);
        }
      }
      for (const key of before.keys()) if (!after.has(key)) touched.push(`${name(key)} (deleted)`);
    });
    ahead.touched = [];
    return JSON.stringify({ touched, implicated: [...implicated] });
  },
  load(entry, ...context) {
    try {
      applyLoadContext(...context);
      if (entry.startsWith("{")) return loadLater(runWorker(JSON.parse(entry)));
      const done = drive(entry.startsWith("[") ? runFactories(JSON.parse(entry)) : runFactory(entry));
      return isPromise(done) ? loadLater(done) : [null, null];
    } catch (err) {
      return failure(err);
    }
  },
  // [chain result, event], at once when the chain did not have to wait: this is the busiest
  // call.
  dispatchEvent(name, eventJson, ctxJson) {
    try {
      if (ctxJson !== "") readDispatchCtx(ctxJson);
      const eventBack = dispatchEventBack;
      const ctx = dispatchContext(dispatchSnapshot);
      const chain = runChain(name, JSON.parse(eventJson), ctx);
      if (isPromise(chain)) return dispatchLater(chain, eventBack);
      if (contextTemplate !== null) spareContext = ctx;
      return dispatchReply(chain, eventBack);
    } catch (err) {
      return failure(err);
    }
  },
  prepareArguments: envelope(async (toolName, argsJson) => {
    const tool = extension.tools.get(toolName);
    const args = JSON.parse(argsJson);
    if (!tool?.prepareArguments) return args;
    return tool.prepareArguments(args);
  }),
  // [content, details, isError, terminate, structuredContent, extra]
  executeTool: envelopeParts(async (...args) => {
    const { content, details, isError, terminate, structuredContent, extra } = await executeTool(...args);
    return [content, details, isError, terminate, structuredContent, extra];
  }),
  runCommand: (...args) => {
    commandRunning = true;
    commandReply = runCommand(...args);
    commandReply.then(() => (commandRunning = false));
    return commandReply;
  },
  // The outcome of the session action the running command waits for ({result} or {error}),
  // then the command's reply as runCommand gave it.
  resumeCommand: async (outcomeJson) => {
    const action = commandActions[0];
    if (!action?.sent) return ["no command of this extension is waiting for a session action"];
    commandActions.shift();
    const { result, error } = JSON.parse(outcomeJson);
    if (error !== undefined) action.reject(new Error(error));
    else action.resolve(result);
    return commandReply;
  },
  completeArguments: envelope(async (name, prefix) => {
    const command = extension.commands.get(name);
    if (!command?.getArgumentCompletions) return null;
    return (await command.getArgumentCompletions(prefix)) ?? null;
  }),
  routeModel: envelope(async (provider, id, requestJson, ctxJson) => {
    const model = extension.virtualModels.get(`${provider}/${id}`);
    if (!model) throw new Error(`Virtual model ${provider}/${id} is not registered by this extension`);
    const request = { ...JSON.parse(requestJson), signal: neverAborted() };
    const route = await model.route(request, makeContext(parseSnapshot(ctxJson)));
    if (!route || typeof route.model !== "object" || route.model === null) {
      throw new Error(`Virtual model ${provider}/${id}: route() returned ${JSON.stringify(route)} instead of { model, thinkingLevel }`);
    }
    return {
      model: { provider: route.model.provider, id: route.model.id },
      thinkingLevel: route.thinkingLevel,
      state: route.state,
      keepsState: route.state !== undefined && route.state === request.state,
    };
  }),
  compactionOutcome: envelope(async (callback, outcomeJson) => {
    await reportCompaction({ callback: Number(callback), ...JSON.parse(outcomeJson) });
    return null;
  }),
  deliverBusEvent: envelope(async (channel, dataJson) => {
    await deliverToListeners(channel, JSON.parse(dataJson));
    return null;
  }),
};
