// node:events for pichamber: EventEmitter with Node's semantics for the common API, plus
// once(), on() (async iterator) and the static helpers extensions reach for.

const kCapture = Symbol("kCapture");
let defaultMaxListeners = 10;

export const errorMonitor = Symbol("events.errorMonitor");
export const captureRejectionSymbol = Symbol.for("nodejs.rejection");

function checkListener(listener) {
  if (typeof listener !== "function") {
    const err = new TypeError(
      `The "listener" argument must be of type function. Received ${listener === null ? "null" : typeof listener}`,
    );
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
}

export class EventEmitter {
  constructor(opts) {
    EventEmitter.init.call(this, opts);
  }

  static init(opts) {
    if (this._events === undefined || this._events === Object.getPrototypeOf(this)._events) {
      this._events = Object.create(null);
      this._eventsCount = 0;
    }
    this._maxListeners = this._maxListeners || undefined;
    if (opts?.captureRejections) this[kCapture] = true;
  }

  static get defaultMaxListeners() {
    return defaultMaxListeners;
  }

  static set defaultMaxListeners(n) {
    defaultMaxListeners = n;
  }

  setMaxListeners(n) {
    this._maxListeners = n;
    return this;
  }

  getMaxListeners() {
    return this._maxListeners === undefined ? defaultMaxListeners : this._maxListeners;
  }

  emit(type, ...args) {
    const events = this._events;
    if (type === "error" && events?.[errorMonitor] !== undefined) this.emit(errorMonitor, ...args);
    const handler = events?.[type];
    if (handler === undefined) {
      if (type === "error") {
        const er = args[0];
        if (er instanceof Error) throw er;
        const err = new Error(`Unhandled error.${er === undefined ? "" : ` (${stringify(er)})`}`);
        err.code = "ERR_UNHANDLED_ERROR";
        err.context = er;
        throw err;
      }
      return false;
    }
    if (typeof handler === "function") {
      handler.apply(this, args);
    } else {
      for (const listener of handler.slice()) listener.apply(this, args);
    }
    return true;
  }

  addListener(type, listener) {
    return addListener(this, type, listener, false);
  }

  on(type, listener) {
    return addListener(this, type, listener, false);
  }

  prependListener(type, listener) {
    return addListener(this, type, listener, true);
  }

  once(type, listener) {
    checkListener(listener);
    this.on(type, onceWrapper(this, type, listener));
    return this;
  }

  prependOnceListener(type, listener) {
    checkListener(listener);
    this.prependListener(type, onceWrapper(this, type, listener));
    return this;
  }

  removeListener(type, listener) {
    checkListener(listener);
    const events = this._events;
    if (events === undefined) return this;
    const list = events[type];
    if (list === undefined) return this;
    if (list === listener || list.listener === listener) {
      if (--this._eventsCount === 0) this._events = Object.create(null);
      else delete events[type];
      if (events.removeListener) this.emit("removeListener", type, list.listener || listener);
    } else if (typeof list !== "function") {
      let position = -1;
      for (let i = list.length - 1; i >= 0; i--) {
        if (list[i] === listener || list[i].listener === listener) {
          position = i;
          break;
        }
      }
      if (position < 0) return this;
      const removed = list[position];
      list.splice(position, 1);
      if (list.length === 1) events[type] = list[0];
      if (events.removeListener !== undefined) this.emit("removeListener", type, removed.listener || listener);
    }
    return this;
  }

  off(type, listener) {
    return this.removeListener(type, listener);
  }

  removeAllListeners(type) {
    const events = this._events;
    if (events === undefined) return this;
    if (events.removeListener === undefined) {
      if (arguments.length === 0) {
        this._events = Object.create(null);
        this._eventsCount = 0;
      } else if (events[type] !== undefined) {
        if (--this._eventsCount === 0) this._events = Object.create(null);
        else delete events[type];
      }
      return this;
    }
    if (arguments.length === 0) {
      for (const key of Reflect.ownKeys(events)) {
        if (key === "removeListener") continue;
        this.removeAllListeners(key);
      }
      this.removeAllListeners("removeListener");
      this._events = Object.create(null);
      this._eventsCount = 0;
      return this;
    }
    const listeners = events[type];
    if (typeof listeners === "function") this.removeListener(type, listeners);
    else if (listeners !== undefined) {
      for (let i = listeners.length - 1; i >= 0; i--) this.removeListener(type, listeners[i]);
    }
    return this;
  }

  listeners(type) {
    return listenersOf(this, type, true);
  }

  rawListeners(type) {
    return listenersOf(this, type, false);
  }

  listenerCount(type, listener) {
    const list = this._events?.[type];
    if (list === undefined) return 0;
    if (typeof list === "function") return listener == null || list === listener || list.listener === listener ? 1 : 0;
    if (listener == null) return list.length;
    return list.filter((l) => l === listener || l.listener === listener).length;
  }

  eventNames() {
    return this._eventsCount > 0 ? Reflect.ownKeys(this._events) : [];
  }

  static listenerCount(emitter, type) {
    return emitter.listenerCount(type);
  }
}

EventEmitter.prototype._events = undefined;
EventEmitter.prototype._eventsCount = 0;
EventEmitter.prototype._maxListeners = undefined;

function stringify(v) {
  try {
    return typeof v === "string" ? `'${v}'` : (JSON.stringify(v) ?? String(v));
  } catch {
    return String(v);
  }
}

function addListener(target, type, listener, prepend) {
  checkListener(listener);
  let events = target._events;
  if (events === undefined) {
    events = target._events = Object.create(null);
    target._eventsCount = 0;
  } else if (events.newListener !== undefined) {
    target.emit("newListener", type, listener.listener ? listener.listener : listener);
    events = target._events;
  }
  const existing = events[type];
  if (existing === undefined) {
    events[type] = listener;
    ++target._eventsCount;
  } else if (typeof existing === "function") {
    events[type] = prepend ? [listener, existing] : [existing, listener];
  } else if (prepend) existing.unshift(listener);
  else existing.push(listener);
  return target;
}

function onceWrapper(target, type, listener) {
  const state = { fired: false, target, type, listener };
  const wrapped = function (...args) {
    if (!state.fired) {
      state.target.removeListener(state.type, wrapped);
      state.fired = true;
      return state.listener.apply(state.target, args);
    }
  };
  wrapped.listener = listener;
  return wrapped;
}

function listenersOf(target, type, unwrap) {
  const list = target._events?.[type];
  if (list === undefined) return [];
  if (typeof list === "function") return unwrap ? [list.listener || list] : [list];
  return unwrap ? list.map((l) => l.listener || l) : list.slice();
}

function abortError(signal) {
  const err = new Error("The operation was aborted");
  err.name = "AbortError";
  err.code = "ABORT_ERR";
  if (signal?.reason !== undefined) err.cause = signal.reason;
  return err;
}

export function once(emitter, name, options = {}) {
  const signal = options?.signal;
  if (signal?.aborted) return Promise.reject(abortError(signal));
  return new Promise((resolve, reject) => {
    if (typeof emitter.addEventListener === "function" && typeof emitter.on !== "function") {
      const handler = (...args) => {
        signal?.removeEventListener?.("abort", onAbort);
        resolve(args);
      };
      const onAbort = () => {
        emitter.removeEventListener(name, handler);
        reject(abortError(signal));
      };
      emitter.addEventListener(name, handler, { once: true });
      signal?.addEventListener?.("abort", onAbort, { once: true });
      return;
    }
    const errorListener = (err) => {
      emitter.removeListener(name, resolver);
      signal?.removeEventListener?.("abort", onAbort);
      reject(err);
    };
    const resolver = (...args) => {
      if (name !== "error") emitter.removeListener("error", errorListener);
      signal?.removeEventListener?.("abort", onAbort);
      resolve(args);
    };
    const onAbort = () => {
      emitter.removeListener(name, resolver);
      emitter.removeListener("error", errorListener);
      reject(abortError(signal));
    };
    emitter.once(name, resolver);
    if (name !== "error") emitter.once("error", errorListener);
    signal?.addEventListener?.("abort", onAbort, { once: true });
  });
}

export function on(emitter, event, options = {}) {
  const queue = [];
  const waiting = [];
  let error = null;
  let finished = false;
  const handler = (...args) => {
    const w = waiting.shift();
    if (w) w.resolve({ value: args, done: false });
    else queue.push(args);
  };
  const errorHandler = (err) => {
    finished = true;
    const w = waiting.shift();
    if (w) w.reject(err);
    else error = err;
    iterator.return();
  };
  emitter.on(event, handler);
  if (event !== "error") emitter.on("error", errorHandler);
  const signal = options?.signal;
  const iterator = {
    next() {
      if (queue.length) return Promise.resolve({ value: queue.shift(), done: false });
      if (error) {
        const p = Promise.reject(error);
        error = null;
        return p;
      }
      if (finished) return Promise.resolve({ value: undefined, done: true });
      return new Promise((resolve, reject) => waiting.push({ resolve, reject }));
    },
    return() {
      emitter.removeListener(event, handler);
      emitter.removeListener("error", errorHandler);
      finished = true;
      for (const w of waiting.splice(0)) w.resolve({ value: undefined, done: true });
      return Promise.resolve({ value: undefined, done: true });
    },
    throw(err) {
      error = err;
      emitter.removeListener(event, handler);
      emitter.removeListener("error", errorHandler);
      return Promise.reject(err);
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
  signal?.addEventListener?.("abort", () => errorHandler(abortError(signal)), { once: true });
  return iterator;
}

export function listenerCount(emitter, type) {
  return emitter.listenerCount(type);
}

export function getEventListeners(emitter, type) {
  if (typeof emitter.listeners === "function") return emitter.listeners(type);
  return [];
}

export function setMaxListeners(n = defaultMaxListeners, ...targets) {
  if (targets.length === 0) defaultMaxListeners = n;
  for (const t of targets) t.setMaxListeners?.(n);
}

export function getMaxListeners(emitter) {
  return emitter.getMaxListeners?.() ?? defaultMaxListeners;
}

export function addAbortListener(signal, listener) {
  if (signal.aborted) queueMicrotask(() => listener());
  else signal.addEventListener("abort", listener, { once: true });
  return { [Symbol.dispose ?? Symbol.for("Symbol.dispose")]: () => signal.removeEventListener("abort", listener) };
}

export const usingDomains = false;

EventEmitter.EventEmitter = EventEmitter;
EventEmitter.once = once;
EventEmitter.on = on;
EventEmitter.errorMonitor = errorMonitor;
EventEmitter.captureRejectionSymbol = captureRejectionSymbol;
EventEmitter.getEventListeners = getEventListeners;
EventEmitter.setMaxListeners = setMaxListeners;
EventEmitter.getMaxListeners = getMaxListeners;
EventEmitter.addAbortListener = addAbortListener;
EventEmitter.usingDomains = false;

export default EventEmitter;
