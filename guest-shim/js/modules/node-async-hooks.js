// node:async_hooks for pichamber. AsyncLocalStorage keeps a store for the code a `run` calls
// and carries it into the callbacks that code schedules: promise reactions (then, catch,
// finally), timers, setImmediate, queueMicrotask and process.nextTick, each restored as it
// runs. So does an `await`: QuickJS resumes its own with no hook, so the build lowers the
// async code of an extension that imports this module to steps through promise reactions
// (async-lowering.js). AsyncResource runs functions in the context it was made in.
// createHook's hooks are never called: the guest reports no async resources.

// The stores of every AsyncLocalStorage in the running code; replaced, never mutated.
let frame = new Map();
let patched = false;

function runIn(saved, fn, thisArg, args) {
  const previous = frame;
  frame = saved;
  try {
    return fn.apply(thisArg, args);
  } finally {
    frame = previous;
  }
}

function wrap(fn) {
  if (typeof fn !== "function") return fn;
  const saved = frame;
  return function (...args) {
    return runIn(saved, fn, this, args);
  };
}

/** From the first AsyncLocalStorage on, scheduled callbacks carry the stores along. */
function carryStores() {
  if (patched) return;
  patched = true;
  const then = Promise.prototype.then;
  Promise.prototype.then = function (onFulfilled, onRejected) {
    return then.call(this, wrap(onFulfilled), wrap(onRejected));
  };
  for (const name of ["setTimeout", "setInterval", "setImmediate", "queueMicrotask"]) {
    const original = globalThis[name];
    if (typeof original !== "function") continue;
    globalThis[name] = function (fn, ...rest) {
      return original.call(this, wrap(fn), ...rest);
    };
  }
  const proc = globalThis.process;
  if (proc && typeof proc.nextTick === "function") {
    const nextTick = proc.nextTick;
    proc.nextTick = (fn, ...args) => nextTick.call(proc, wrap(fn), ...args);
  }
}

export class AsyncLocalStorage {
  constructor() {
    carryStores();
  }
  getStore() {
    return frame.get(this);
  }
  run(store, fn, ...args) {
    const next = new Map(frame);
    next.set(this, store);
    return runIn(next, fn, undefined, args);
  }
  exit(fn, ...args) {
    const next = new Map(frame);
    next.delete(this);
    return runIn(next, fn, undefined, args);
  }
  enterWith(store) {
    frame = new Map(frame);
    frame.set(this, store);
  }
  disable() {
    frame = new Map(frame);
    frame.delete(this);
  }
  static bind(fn) {
    return wrap(fn);
  }
  static snapshot() {
    const saved = frame;
    return (fn, ...args) => runIn(saved, fn, undefined, args);
  }
}

let nextAsyncId = 1;

export class AsyncResource {
  #frame;
  #id;
  constructor(type, _options) {
    this.type = type;
    this.#frame = frame;
    this.#id = ++nextAsyncId;
  }
  runInAsyncScope(fn, thisArg, ...args) {
    return runIn(this.#frame, fn, thisArg, args);
  }
  bind(fn, thisArg) {
    const resource = this;
    const bound = function (...args) {
      return resource.runInAsyncScope(fn, thisArg ?? this, ...args);
    };
    Object.defineProperty(bound, "length", { value: fn.length });
    bound.asyncResource = this;
    return bound;
  }
  static bind(fn, type, thisArg) {
    return new AsyncResource(type ?? (fn.name || "bound-anonymous-fn")).bind(fn, thisArg);
  }
  emitDestroy() {
    return this;
  }
  asyncId() {
    return this.#id;
  }
  triggerAsyncId() {
    return 1;
  }
}

export function executionAsyncId() {
  return 1;
}
export function triggerAsyncId() {
  return 0;
}
export function executionAsyncResource() {
  return {};
}
export function createHook(_callbacks) {
  return {
    enable() {
      return this;
    },
    disable() {
      return this;
    },
  };
}
export const asyncWrapProviders = Object.freeze({});

export default {
  AsyncLocalStorage,
  AsyncResource,
  executionAsyncId,
  triggerAsyncId,
  executionAsyncResource,
  createHook,
  asyncWrapProviders,
};
