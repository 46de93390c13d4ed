// node:timers and its promises API (node:timers/promises). The callback functions are the
// globals the prelude defines; the promise forms are built on them, with Node's AbortSignal
// and `ref` options.

const abortError = (signal) => {
  const err = new Error("The operation was aborted", { cause: signal.reason });
  err.name = "AbortError";
  err.code = "ABORT_ERR";
  return err;
};

function checkOptions(options) {
  if (options === null || typeof options !== "object") {
    const err = new TypeError(`The "options" argument must be of type object. Received ${options === null ? "null" : `type ${typeof options}`}`);
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  const { signal, ref = true } = options;
  if (signal !== undefined && (signal === null || typeof signal.aborted !== "boolean")) {
    const err = new TypeError('The "options.signal" property must be an instance of AbortSignal');
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  return { signal, ref };
}

// One wait: `start(resolve)` arms the timer and returns its handle.
function wait(start, value, options) {
  let signal, ref;
  try {
    ({ signal, ref } = checkOptions(options));
  } catch (err) {
    return Promise.reject(err);
  }
  if (signal?.aborted) return Promise.reject(abortError(signal));
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(handle);
      reject(abortError(signal));
    };
    const handle = start(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(value);
    });
    if (!ref) handle.unref();
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function setTimeoutPromise(delay, value, options = {}) {
  return wait((done) => globalThis.setTimeout(done, delay), value, options);
}

function setImmediatePromise(value, options = {}) {
  return wait((done) => globalThis.setImmediate(done), value, options);
}

// An async iterator yielding `value` every `delay` ms; ticks that pass while nobody awaits
// are counted, and each `next()` takes one, as in Node.
async function* setIntervalPromise(delay, value, options = {}) {
  const { signal, ref } = checkOptions(options);
  if (signal?.aborted) throw abortError(signal);
  let ticks = 0;
  let wake = null;
  const handle = globalThis.setInterval(() => {
    ticks++;
    wake?.();
  }, delay);
  if (!ref) handle.unref();
  const onAbort = () => wake?.();
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    for (;;) {
      if (ticks === 0 && !signal?.aborted) await new Promise((resolve) => (wake = resolve));
      wake = null;
      if (signal?.aborted) throw abortError(signal);
      ticks--;
      yield value;
    }
  } finally {
    clearInterval(handle);
    signal?.removeEventListener("abort", onAbort);
  }
}

const scheduler = {
  wait: (delay, options) => setTimeoutPromise(delay, undefined, options),
  yield: () => setImmediatePromise(),
};

export const promises = {
  setTimeout: setTimeoutPromise,
  setImmediate: setImmediatePromise,
  setInterval: setIntervalPromise,
  scheduler,
};

export const setTimeout = (...args) => globalThis.setTimeout(...args);
export const setInterval = (...args) => globalThis.setInterval(...args);
export const setImmediate = (...args) => globalThis.setImmediate(...args);
export const clearTimeout = (handle) => globalThis.clearTimeout(handle);
export const clearInterval = (handle) => globalThis.clearInterval(handle);
export const clearImmediate = (handle) => globalThis.clearImmediate(handle);

export default { setTimeout, setInterval, setImmediate, clearTimeout, clearInterval, clearImmediate, promises };
