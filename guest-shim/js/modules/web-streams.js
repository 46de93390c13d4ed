// WHATWG web streams for pichamber (node:stream/web and the globals of the same names):
// ReadableStream with its default reader and controller, WritableStream with its writer and
// controller, TransformStream, the two queuing strategies, TextEncoderStream and
// TextDecoderStream. The algorithms follow the Streams Standard (https://streams.spec.whatwg.org)
// step by step, so that the order in which promises settle is the one Node's streams show.
//
// Left out: BYOB readers and ReadableByteStreamController. A stream made with `type: "bytes"`
// is a default stream whose chunks are Uint8Array views and whose queue is measured in bytes;
// getReader({ mode: "byob" }) throws. Transferring streams (postMessage) is not supported.

// Each public object keeps its state in a plain record under this key; the record's `api` is the
// public object again. The spec's "internal slots".
const I = Symbol("pichamber.webstreams");
const closeSentinel = Symbol("close");

/** The record behind `obj`, or a TypeError when `obj` is not a `kind` (the spec's brand checks). */
function slots(obj, kind) {
  const record = obj !== null && typeof obj === "object" ? obj[I] : undefined;
  if (record === undefined || record.kind !== kind) throw new TypeError(`Value of "this" must be of type ${kind}`);
  return record;
}
const illegalConstructor = () => new TypeError("Illegal constructor");

// ---- promises ---------------------------------------------------------------------------------

/** A promise with its resolve and reject, and whether it has settled yet. */
function deferred() {
  const d = { settled: false };
  d.promise = new Promise((resolve, reject) => {
    d.resolve = (value) => {
      if (d.settled) return;
      d.settled = true;
      resolve(value);
    };
    d.reject = (reason) => {
      if (d.settled) return;
      d.settled = true;
      reject(reason);
    };
  });
  return d;
}
// Marks a promise as handled: nobody has to wait for it, so its rejection is not "unhandled".
const handled = (promise) => {
  promise.then(undefined, () => {});
  return promise;
};
function rejectedDeferred(reason) {
  const d = deferred();
  d.reject(reason);
  handled(d.promise);
  return d;
}
function resolvedDeferred(value) {
  const d = deferred();
  d.resolve(value);
  return d;
}
const resolved = (value) => Promise.resolve(value);
const rejected = (reason) => Promise.reject(reason);

/** Calls a user callback the way the spec does for promise-returning ones: a throw rejects. */
function promiseCall(fn, thisArg, ...args) {
  try {
    return Promise.resolve(fn.call(thisArg, ...args));
  } catch (err) {
    return Promise.reject(err);
  }
}
/** A method of an underlying source, sink or transformer, read once at construction. */
function callback(obj, name) {
  const fn = obj[name];
  if (fn === undefined || fn === null) return undefined;
  if (typeof fn !== "function") throw new TypeError(`The "${name}" property must be a function`);
  return fn;
}

// ---- queues with sizes, and strategies -------------------------------------------------------

function resetQueue(holder) {
  holder.queue = [];
  holder.queueTotalSize = 0;
}
function enqueueWithSize(holder, value, size) {
  if (typeof size !== "number" || !(size >= 0) || size === Infinity) {
    throw new RangeError("The chunk's size must be a finite, non-negative number");
  }
  holder.queue.push({ value, size });
  holder.queueTotalSize += size;
}
function dequeue(holder) {
  const { value, size } = holder.queue.shift();
  // Rounding errors could leave a tiny negative total otherwise.
  holder.queueTotalSize = Math.max(0, holder.queueTotalSize - size);
  return value;
}

function highWaterMarkOf(strategy, fallback) {
  const value = strategy?.highWaterMark;
  if (value === undefined) return fallback;
  const hwm = Number(value);
  if (Number.isNaN(hwm) || hwm < 0) throw new RangeError(`Invalid highWaterMark: ${value}`);
  return hwm;
}
function sizeAlgorithmOf(strategy) {
  const size = strategy?.size;
  if (size === undefined) return () => 1;
  if (typeof size !== "function") throw new TypeError('The "size" property must be a function');
  return (chunk) => size(chunk);
}

// =============================================================================================
// ReadableStream

export class ReadableStream {
  constructor(underlyingSource = undefined, strategy = {}) {
    const source = underlyingSource ?? {};
    if (typeof source !== "object" && typeof source !== "function") throw new TypeError("The underlying source must be an object");
    const start = callback(source, "start");
    const pull = callback(source, "pull");
    const cancel = callback(source, "cancel");
    const type = source.type === undefined ? undefined : String(source.type);
    if (type !== undefined && type !== "bytes") throw new TypeError(`'${type}' is not a valid stream type`);
    const bytes = type === "bytes";
    if (bytes && strategy?.size !== undefined) throw new RangeError("A byte stream's strategy cannot have a size function");
    const hwm = highWaterMarkOf(strategy, bytes ? 0 : 1);
    const size = bytes ? (chunk) => chunk.byteLength : sizeAlgorithmOf(strategy);
    const stream = initReadableStream(this);
    setUpReadableController(stream, {
      start: (c) => (start ? start.call(source, c.api) : undefined),
      pull: (c) => (pull ? promiseCall(pull, source, c.api) : resolved()),
      cancel: (reason) => (cancel ? promiseCall(cancel, source, reason) : resolved()),
      hwm,
      size,
      bytes,
    });
  }

  get locked() {
    return slots(this, "ReadableStream").reader !== undefined;
  }

  cancel(reason = undefined) {
    let stream;
    try {
      stream = slots(this, "ReadableStream");
    } catch (err) {
      return rejected(err);
    }
    if (stream.reader) return rejected(new TypeError("Cannot cancel a locked ReadableStream"));
    return cancelReadable(stream, reason);
  }

  getReader(options = undefined) {
    const stream = slots(this, "ReadableStream");
    const mode = options?.mode;
    if (mode !== undefined) {
      if (String(mode) === "byob") throw new TypeError("BYOB readers are not supported in pichamber");
      throw new TypeError(`'${mode}' is not a valid reader mode`);
    }
    return acquireReader(stream).api;
  }

  pipeThrough(transform, options = {}) {
    const stream = slots(this, "ReadableStream");
    const { readable, writable } = transform ?? {};
    const dest = writable?.[I];
    if (!readable?.[I] || readable[I].kind !== "ReadableStream") throw new TypeError("pipeThrough needs a { readable } ReadableStream");
    if (!dest || dest.kind !== "WritableStream") throw new TypeError("pipeThrough needs a { writable } WritableStream");
    if (stream.reader) throw new TypeError("Cannot pipe a locked ReadableStream");
    if (dest.writer) throw new TypeError("Cannot pipe to a locked WritableStream");
    handled(pipeStreams(stream, dest, pipeOptions(options)));
    return readable;
  }

  pipeTo(destination, options = {}) {
    let stream, dest, opts;
    try {
      stream = slots(this, "ReadableStream");
      dest = slots(destination, "WritableStream");
      opts = pipeOptions(options);
    } catch (err) {
      return rejected(err);
    }
    if (stream.reader) return rejected(new TypeError("Cannot pipe a locked ReadableStream"));
    if (dest.writer) return rejected(new TypeError("Cannot pipe to a locked WritableStream"));
    return pipeStreams(stream, dest, opts);
  }

  tee() {
    return teeReadable(slots(this, "ReadableStream")).map((branch) => branch.api);
  }

  values(options = undefined) {
    const stream = slots(this, "ReadableStream");
    const reader = acquireReader(stream);
    const iterator = Object.create(readableIteratorPrototype);
    iterator[I] = { kind: "ReadableStreamAsyncIterator", reader, preventCancel: !!options?.preventCancel, ongoing: undefined, finished: false };
    return iterator;
  }

  static from(asyncIterable) {
    return readableFromIterable(asyncIterable).api;
  }
}
ReadableStream.prototype[Symbol.asyncIterator] = ReadableStream.prototype.values;
Object.defineProperty(ReadableStream.prototype, Symbol.toStringTag, { value: "ReadableStream", configurable: true });

function initReadableStream(api) {
  const stream = { kind: "ReadableStream", api, state: "readable", reader: undefined, storedError: undefined, disturbed: false, controller: undefined };
  api[I] = stream;
  return stream;
}

/** A stream made by this module (tee branches, TransformStream's readable side, from()). */
function createReadableStream({ start, pull, cancel, hwm = 1, size = () => 1 }) {
  const stream = initReadableStream(Object.create(ReadableStream.prototype));
  setUpReadableController(stream, { start, pull, cancel, hwm, size, bytes: false });
  return stream;
}

// ---- the controller ----------------------------------------------------------------------------

export class ReadableStreamDefaultController {
  constructor() {
    throw illegalConstructor();
  }
  get desiredSize() {
    return readableDesiredSize(slots(this, "ReadableStreamDefaultController"));
  }
  close() {
    const c = slots(this, "ReadableStreamDefaultController");
    if (!canCloseOrEnqueue(c)) throw new TypeError("The stream is not in a state that permits close");
    closeReadableController(c);
  }
  enqueue(chunk = undefined) {
    const c = slots(this, "ReadableStreamDefaultController");
    if (!canCloseOrEnqueue(c)) throw new TypeError("The stream is not in a state that permits enqueue");
    if (c.bytes) {
      if (!ArrayBuffer.isView(chunk)) throw new TypeError("A byte stream's chunk must be an ArrayBufferView");
      chunk = new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    }
    enqueueReadableController(c, chunk);
  }
  error(e = undefined) {
    errorReadableController(slots(this, "ReadableStreamDefaultController"), e);
  }
}
Object.defineProperty(ReadableStreamDefaultController.prototype, Symbol.toStringTag, { value: "ReadableStreamDefaultController", configurable: true });

function setUpReadableController(stream, { start, pull, cancel, hwm, size, bytes }) {
  const c = {
    kind: "ReadableStreamDefaultController",
    api: Object.create(ReadableStreamDefaultController.prototype),
    stream,
    queue: [],
    queueTotalSize: 0,
    started: false,
    closeRequested: false,
    pullAgain: false,
    pulling: false,
    pull,
    cancel,
    size,
    hwm,
    bytes,
  };
  c.api[I] = c;
  stream.controller = c;
  const startResult = start(c);
  resolved(startResult).then(
    () => {
      c.started = true;
      pullIfNeeded(c);
    },
    (r) => errorReadableController(c, r),
  );
}

// The algorithms are dropped once they can no longer run, so that the source can be collected.
function clearReadableAlgorithms(c) {
  c.pull = undefined;
  c.cancel = undefined;
  c.size = undefined;
}

const canCloseOrEnqueue = (c) => !c.closeRequested && c.stream.state === "readable";

function readableDesiredSize(c) {
  const state = c.stream.state;
  if (state === "errored") return null;
  if (state === "closed") return 0;
  return c.hwm - c.queueTotalSize;
}

function shouldPull(c) {
  if (!canCloseOrEnqueue(c) || !c.started) return false;
  const reader = c.stream.reader;
  if (reader && reader.readRequests.length > 0) return true;
  return readableDesiredSize(c) > 0;
}

/** Calls the source's pull() when the queue wants chunks, one call at a time. */
function pullIfNeeded(c) {
  if (!shouldPull(c)) return;
  if (c.pulling) {
    c.pullAgain = true;
    return;
  }
  c.pulling = true;
  c.pull(c).then(
    () => {
      c.pulling = false;
      if (c.pullAgain) {
        c.pullAgain = false;
        pullIfNeeded(c);
      }
    },
    (e) => errorReadableController(c, e),
  );
}

function closeReadableController(c) {
  if (!canCloseOrEnqueue(c)) return;
  c.closeRequested = true;
  // Queued chunks are still read; the stream closes when the last one is taken.
  if (c.queue.length === 0) {
    clearReadableAlgorithms(c);
    closeReadable(c.stream);
  }
}

function enqueueReadableController(c, chunk) {
  if (!canCloseOrEnqueue(c)) return;
  const stream = c.stream;
  // A waiting read takes the chunk directly: it never counts against the queue.
  if (stream.reader && stream.reader.readRequests.length > 0) {
    stream.reader.readRequests.shift().chunk(chunk);
  } else {
    let size;
    try {
      size = c.size(chunk);
      enqueueWithSize(c, chunk, size);
    } catch (err) {
      errorReadableController(c, err);
      throw err;
    }
  }
  pullIfNeeded(c);
}

function errorReadableController(c, e) {
  if (c.stream.state !== "readable") return;
  resetQueue(c);
  clearReadableAlgorithms(c);
  errorReadable(c.stream, e);
}

// A read made through a reader: a chunk from the queue, or the request waits for one.
function controllerPullSteps(c, readRequest) {
  if (c.queue.length > 0) {
    const chunk = dequeue(c);
    if (c.closeRequested && c.queue.length === 0) {
      clearReadableAlgorithms(c);
      closeReadable(c.stream);
    } else {
      pullIfNeeded(c);
    }
    readRequest.chunk(chunk);
  } else {
    c.stream.reader.readRequests.push(readRequest);
    pullIfNeeded(c);
  }
}

function controllerCancelSteps(c, reason) {
  resetQueue(c);
  const result = c.cancel(reason);
  clearReadableAlgorithms(c);
  return result;
}

// ---- the stream's state changes ----------------------------------------------------------------

function cancelReadable(stream, reason) {
  stream.disturbed = true;
  if (stream.state === "closed") return resolved();
  if (stream.state === "errored") return rejected(stream.storedError);
  closeReadable(stream);
  return controllerCancelSteps(stream.controller, reason).then(() => undefined);
}

function closeReadable(stream) {
  stream.state = "closed";
  const reader = stream.reader;
  if (!reader) return;
  reader.closed.resolve(undefined);
  const requests = reader.readRequests;
  reader.readRequests = [];
  for (const request of requests) request.close();
}

function errorReadable(stream, e) {
  stream.state = "errored";
  stream.storedError = e;
  const reader = stream.reader;
  if (!reader) return;
  reader.closed.reject(e);
  handled(reader.closed.promise);
  failReadRequests(reader, e);
}

// ---- the default reader -------------------------------------------------------------------------

export class ReadableStreamDefaultReader {
  constructor(stream) {
    setUpReader(this, slots(stream, "ReadableStream"));
  }
  get closed() {
    return slots(this, "ReadableStreamDefaultReader").closed.promise;
  }
  read() {
    let reader;
    try {
      reader = slots(this, "ReadableStreamDefaultReader");
    } catch (err) {
      return rejected(err);
    }
    if (!reader.stream) return rejected(new TypeError("The reader has been released"));
    const d = deferred();
    readerRead(reader, {
      chunk: (value) => d.resolve({ value, done: false }),
      close: () => d.resolve({ value: undefined, done: true }),
      error: (e) => d.reject(e),
    });
    return d.promise;
  }
  releaseLock() {
    const reader = slots(this, "ReadableStreamDefaultReader");
    if (reader.stream) releaseReader(reader);
  }
  cancel(reason = undefined) {
    let reader;
    try {
      reader = slots(this, "ReadableStreamDefaultReader");
    } catch (err) {
      return rejected(err);
    }
    if (!reader.stream) return rejected(new TypeError("The reader has been released"));
    return cancelReadable(reader.stream, reason);
  }
}
Object.defineProperty(ReadableStreamDefaultReader.prototype, Symbol.toStringTag, { value: "ReadableStreamDefaultReader", configurable: true });

function setUpReader(api, stream) {
  if (stream.reader) throw new TypeError("ReadableStream is locked");
  const reader = { kind: "ReadableStreamDefaultReader", api, stream, readRequests: [], closed: undefined };
  api[I] = reader;
  stream.reader = reader;
  if (stream.state === "readable") reader.closed = deferred();
  else if (stream.state === "closed") reader.closed = resolvedDeferred(undefined);
  else reader.closed = rejectedDeferred(stream.storedError);
  return reader;
}

const acquireReader = (stream) => setUpReader(Object.create(ReadableStreamDefaultReader.prototype), stream);

/** Reads through `reader`: exactly one of the request's chunk, close or error is called. */
function readerRead(reader, request) {
  const stream = reader.stream;
  stream.disturbed = true;
  if (stream.state === "closed") request.close();
  else if (stream.state === "errored") request.error(stream.storedError);
  else controllerPullSteps(stream.controller, request);
}

function failReadRequests(reader, e) {
  const requests = reader.readRequests;
  reader.readRequests = [];
  for (const request of requests) request.error(e);
}

function releaseReader(reader) {
  const stream = reader.stream;
  const released = new TypeError("The reader was released");
  if (stream.state === "readable") reader.closed.reject(released);
  else reader.closed = rejectedDeferred(released);
  handled(reader.closed.promise);
  stream.reader = undefined;
  reader.stream = undefined;
  failReadRequests(reader, released);
}

// ---- async iteration ----------------------------------------------------------------------------

const AsyncIteratorPrototype = Object.getPrototypeOf(Object.getPrototypeOf(async function* () {}).prototype);

// next() and return() queue behind the previous call, as WebIDL's async iterators do.
const readableIteratorPrototype = Object.create(AsyncIteratorPrototype, {
  next: {
    writable: true,
    configurable: true,
    value: function next() {
      let it;
      try {
        it = slots(this, "ReadableStreamAsyncIterator");
      } catch (err) {
        return rejected(err);
      }
      const nextSteps = () => {
        if (it.finished) return resolved({ value: undefined, done: true });
        return iteratorRead(it).then(
          (result) => {
            it.ongoing = undefined;
            if (result.done) it.finished = true;
            return result;
          },
          (reason) => {
            it.ongoing = undefined;
            it.finished = true;
            throw reason;
          },
        );
      };
      it.ongoing = it.ongoing ? it.ongoing.then(nextSteps, nextSteps) : nextSteps();
      return it.ongoing;
    },
  },
  return: {
    writable: true,
    configurable: true,
    value: function (value = undefined) {
      let it;
      try {
        it = slots(this, "ReadableStreamAsyncIterator");
      } catch (err) {
        return rejected(err);
      }
      const returnSteps = () => {
        if (it.finished) return resolved({ value, done: true });
        it.finished = true;
        return iteratorReturn(it, value);
      };
      const returning = it.ongoing ? it.ongoing.then(returnSteps, returnSteps) : returnSteps();
      return returning.then(() => ({ value, done: true }));
    },
  },
  [Symbol.toStringTag]: { value: "ReadableStreamAsyncIterator", configurable: true },
});

function iteratorRead(it) {
  const reader = it.reader;
  if (!reader.stream) return rejected(new TypeError("The iterator's reader was released"));
  const d = deferred();
  readerRead(reader, {
    chunk: (value) => d.resolve({ value, done: false }),
    close: () => {
      releaseReader(reader);
      d.resolve({ value: undefined, done: true });
    },
    error: (e) => {
      releaseReader(reader);
      d.reject(e);
    },
  });
  return d.promise;
}

// Leaving a for-await loop early (break, throw) cancels the stream unless preventCancel.
function iteratorReturn(it, value) {
  const reader = it.reader;
  if (!reader.stream) return resolved();
  if (!it.preventCancel) {
    const result = cancelReadable(reader.stream, value);
    releaseReader(reader);
    return result;
  }
  releaseReader(reader);
  return resolved();
}

// ---- tee ------------------------------------------------------------------------------------------

/** Two branches that each see every chunk; the source is cancelled once both are. */
function teeReadable(stream) {
  const reader = acquireReader(stream);
  let reading = false;
  let readAgain = false;
  const canceled = [false, false];
  const reasons = [undefined, undefined];
  const cancelled = deferred();
  const branches = [];

  const pull = () => {
    if (reading) {
      readAgain = true;
      return resolved();
    }
    reading = true;
    readerRead(reader, {
      // A microtask later, so that a read() on a branch settles before the next pull starts.
      chunk: (chunk) =>
        queueMicrotask(() => {
          readAgain = false;
          for (const i of [0, 1]) if (!canceled[i]) enqueueReadableController(branches[i].controller, chunk);
          reading = false;
          if (readAgain) pull();
        }),
      close: () => {
        reading = false;
        for (const i of [0, 1]) if (!canceled[i]) closeReadableController(branches[i].controller);
        if (!canceled[0] || !canceled[1]) cancelled.resolve(undefined);
      },
      error: () => {
        reading = false;
      },
    });
    return resolved();
  };
  const cancelBranch = (i) => (reason) => {
    canceled[i] = true;
    reasons[i] = reason;
    if (canceled[1 - i]) cancelled.resolve(cancelReadable(stream, [...reasons]));
    return cancelled.promise;
  };
  for (const i of [0, 1]) branches.push(createReadableStream({ start: () => undefined, pull, cancel: cancelBranch(i) }));
  reader.closed.promise.then(undefined, (r) => {
    for (const branch of branches) errorReadableController(branch.controller, r);
    if (!canceled[0] || !canceled[1]) cancelled.resolve(undefined);
  });
  return branches;
}

// ---- ReadableStream.from ---------------------------------------------------------------------------

function asyncIteratorOf(iterable) {
  if (iterable === null || iterable === undefined) throw new TypeError("ReadableStream.from needs an iterable");
  const asyncMethod = iterable[Symbol.asyncIterator];
  if (asyncMethod !== undefined && asyncMethod !== null) {
    const iterator = asyncMethod.call(iterable);
    if (iterator === null || typeof iterator !== "object") throw new TypeError("The async iterator is not an object");
    return iterator;
  }
  const syncMethod = iterable[Symbol.iterator];
  if (typeof syncMethod !== "function") throw new TypeError("ReadableStream.from needs an iterable or async iterable");
  const iterator = syncMethod.call(iterable);
  if (iterator === null || typeof iterator !== "object") throw new TypeError("The iterator is not an object");
  // A sync iterator seen as an async one: values that are promises are awaited.
  return {
    next: () => {
      const result = iterator.next();
      return resolved(result.value).then((value) => ({ value, done: !!result.done }));
    },
    return: typeof iterator.return === "function" ? (reason) => ({ value: iterator.return(reason)?.value, done: true }) : undefined,
  };
}

function readableFromIterable(iterable) {
  const iterator = asyncIteratorOf(iterable);
  const next = iterator.next;
  let stream;
  const pull = () => {
    let result;
    try {
      result = resolved(next.call(iterator));
    } catch (err) {
      return rejected(err);
    }
    return result.then((step) => {
      if (step === null || typeof step !== "object") throw new TypeError("The iterator's result is not an object");
      if (step.done) closeReadableController(stream.controller);
      else enqueueReadableController(stream.controller, step.value);
    });
  };
  const cancel = (reason) => {
    let returned;
    try {
      const method = iterator.return;
      if (method === undefined || method === null) return resolved();
      returned = resolved(method.call(iterator, reason));
    } catch (err) {
      return rejected(err);
    }
    return returned.then((step) => {
      if (step === null || typeof step !== "object") throw new TypeError("The iterator's return() result is not an object");
    });
  };
  stream = createReadableStream({ start: () => undefined, pull, cancel, hwm: 0 });
  return stream;
}

// ---- pipeTo ---------------------------------------------------------------------------------------

function pipeOptions(options) {
  const signal = options?.signal;
  if (signal !== undefined && (signal === null || typeof signal !== "object" || !("aborted" in signal))) {
    throw new TypeError('The "signal" option must be an AbortSignal');
  }
  return { preventClose: !!options?.preventClose, preventAbort: !!options?.preventAbort, preventCancel: !!options?.preventCancel, signal };
}

/**
 * Reads `source` and writes each chunk to `dest`, honouring the destination's backpressure.
 * The end of either side reaches the other: the source closing closes dest (unless
 * preventClose), the source erroring aborts dest (unless preventAbort), dest erroring or
 * closing cancels the source (unless preventCancel). The signal aborts both.
 */
function pipeStreams(source, dest, { preventClose, preventAbort, preventCancel, signal }) {
  const reader = acquireReader(source);
  const writer = acquireWriter(dest);
  source.disturbed = true;
  let shuttingDown = false;
  let currentWrite = resolved();
  const done = deferred();

  const finalize = (isError, error) => {
    releaseWriter(writer);
    releaseReader(reader);
    signal?.removeEventListener("abort", onAbort);
    if (isError) done.reject(error);
    else done.resolve(undefined);
  };
  // Chunks already read are written before the pipe ends.
  const waitForWrites = () => {
    const last = currentWrite;
    return last.then(() => (last === currentWrite ? undefined : waitForWrites()));
  };
  const afterWrites = (fn) => {
    if (dest.state === "writable" && !closeQueuedOrInFlight(dest)) waitForWrites().then(fn);
    else fn();
  };
  const shutdownWithAction = (action, isError = false, error = undefined) => {
    if (shuttingDown) return;
    shuttingDown = true;
    afterWrites(() =>
      promiseCall(action).then(
        () => finalize(isError, error),
        (newError) => finalize(true, newError),
      ),
    );
  };
  const shutdown = (isError = false, error = undefined) => {
    if (shuttingDown) return;
    shuttingDown = true;
    afterWrites(() => finalize(isError, error));
  };

  function onAbort() {
    const error = signal.reason;
    const actions = [];
    if (!preventAbort) actions.push(() => (dest.state === "writable" ? abortWritable(dest, error) : resolved()));
    if (!preventCancel) actions.push(() => (source.state === "readable" ? cancelReadable(source, error) : resolved()));
    shutdownWithAction(() => Promise.all(actions.map((action) => action())), true, error);
  }
  if (signal) {
    if (signal.aborted) {
      onAbort();
      return done.promise;
    }
    signal.addEventListener("abort", onAbort);
  }

  // The four conditions, in the spec's order of precedence.
  const sourceErrored = () => {
    const error = source.storedError;
    if (!preventAbort) shutdownWithAction(() => abortWritable(dest, error), true, error);
    else shutdown(true, error);
  };
  const destErrored = () => {
    const error = dest.storedError;
    if (!preventCancel) shutdownWithAction(() => cancelReadable(source, error), true, error);
    else shutdown(true, error);
  };
  const sourceClosed = () => {
    if (!preventClose) shutdownWithAction(() => closeWriterPropagatingErrors(writer));
    else shutdown();
  };
  const destClosed = () => {
    const error = new TypeError("The destination WritableStream closed before all data could be piped to it");
    if (!preventCancel) shutdownWithAction(() => cancelReadable(source, error), true, error);
    else shutdown(true, error);
  };
  const check = () => {
    if (source.state === "errored") sourceErrored();
    else if (dest.state === "errored") destErrored();
    else if (source.state === "closed") sourceClosed();
    else if (closeQueuedOrInFlight(dest) || dest.state === "closed") destClosed();
  };
  reader.closed.promise.then(check, check);
  writer.closed.promise.then(check, check);
  check();

  // One chunk at a time, each once the destination is ready for it.
  const step = () => {
    if (shuttingDown) return;
    writer.ready.promise
      .then(
        () =>
          new Promise((resolve, reject) => {
            if (shuttingDown) return resolve(true);
            readerRead(reader, {
              chunk: (chunk) => {
                if (writer.stream) currentWrite = handled(writeWithWriter(writer, chunk));
                resolve(false);
              },
              close: () => resolve(true),
              error: reject,
            });
          }),
      )
      .then((finished) => {
        if (!finished) step();
      }, () => {});
  };
  step();
  return done.promise;
}

// =============================================================================================
// WritableStream

export class WritableStream {
  constructor(underlyingSink = undefined, strategy = {}) {
    const sink = underlyingSink ?? {};
    if (typeof sink !== "object" && typeof sink !== "function") throw new TypeError("The underlying sink must be an object");
    const start = callback(sink, "start");
    const write = callback(sink, "write");
    const close = callback(sink, "close");
    const abort = callback(sink, "abort");
    if (sink.type !== undefined) throw new RangeError("A WritableStream has no type");
    const hwm = highWaterMarkOf(strategy, 1);
    const size = sizeAlgorithmOf(strategy);
    const stream = initWritableStream(this);
    setUpWritableController(stream, {
      start: (c) => (start ? start.call(sink, c.api) : undefined),
      write: (chunk, c) => (write ? promiseCall(write, sink, chunk, c.api) : resolved()),
      close: () => (close ? promiseCall(close, sink) : resolved()),
      abort: (reason) => (abort ? promiseCall(abort, sink, reason) : resolved()),
      hwm,
      size,
    });
  }

  get locked() {
    return slots(this, "WritableStream").writer !== undefined;
  }

  abort(reason = undefined) {
    let stream;
    try {
      stream = slots(this, "WritableStream");
    } catch (err) {
      return rejected(err);
    }
    if (stream.writer) return rejected(new TypeError("Cannot abort a locked WritableStream"));
    return abortWritable(stream, reason);
  }

  close() {
    let stream;
    try {
      stream = slots(this, "WritableStream");
    } catch (err) {
      return rejected(err);
    }
    if (stream.writer) return rejected(new TypeError("Cannot close a locked WritableStream"));
    if (closeQueuedOrInFlight(stream)) return rejected(new TypeError("The WritableStream is already closing"));
    return closeWritable(stream);
  }

  getWriter() {
    return acquireWriter(slots(this, "WritableStream")).api;
  }
}
Object.defineProperty(WritableStream.prototype, Symbol.toStringTag, { value: "WritableStream", configurable: true });

// state: "writable" → "erroring" (an error waits for the write in flight) → "errored"; or
// "writable" → "closed".
function initWritableStream(api) {
  const stream = {
    kind: "WritableStream",
    api,
    state: "writable",
    storedError: undefined,
    writer: undefined,
    controller: undefined,
    writeRequests: [],
    inFlightWriteRequest: undefined,
    closeRequest: undefined,
    inFlightCloseRequest: undefined,
    pendingAbortRequest: undefined,
    backpressure: false,
  };
  api[I] = stream;
  return stream;
}

function createWritableStream({ start, write, close, abort, hwm = 1, size = () => 1 }) {
  const stream = initWritableStream(Object.create(WritableStream.prototype));
  setUpWritableController(stream, { start, write, close, abort, hwm, size });
  return stream;
}

const closeQueuedOrInFlight = (stream) => stream.closeRequest !== undefined || stream.inFlightCloseRequest !== undefined;
const operationInFlight = (stream) => stream.inFlightWriteRequest !== undefined || stream.inFlightCloseRequest !== undefined;

function abortWritable(stream, reason) {
  if (stream.state === "closed" || stream.state === "errored") return resolved();
  // The sink's signal tells a write in progress to stop.
  stream.controller.abortController.abort(reason);
  const state = stream.state;
  if (state === "closed" || state === "errored") return resolved();
  if (stream.pendingAbortRequest) return stream.pendingAbortRequest.deferred.promise;
  const wasAlreadyErroring = state === "erroring";
  const d = deferred();
  stream.pendingAbortRequest = { deferred: d, reason: wasAlreadyErroring ? undefined : reason, wasAlreadyErroring };
  if (!wasAlreadyErroring) startErroring(stream, reason);
  return d.promise;
}

function closeWritable(stream) {
  if (stream.state === "closed" || stream.state === "errored") return rejected(new TypeError("The WritableStream is closed or errored"));
  const d = deferred();
  stream.closeRequest = d;
  if (stream.writer && stream.backpressure && stream.state === "writable") stream.writer.ready.resolve(undefined);
  const c = stream.controller;
  enqueueWithSize(c, closeSentinel, 0);
  advanceQueue(c);
  return d.promise;
}

function dealWithRejection(stream, error) {
  if (stream.state === "writable") startErroring(stream, error);
  else finishErroring(stream);
}

function startErroring(stream, reason) {
  stream.state = "erroring";
  stream.storedError = reason;
  if (stream.writer) rejectReady(stream.writer, reason);
  if (!operationInFlight(stream) && stream.controller.started) finishErroring(stream);
}

function finishErroring(stream) {
  stream.state = "errored";
  resetQueue(stream.controller);
  for (const request of stream.writeRequests) request.reject(stream.storedError);
  stream.writeRequests = [];
  const abortRequest = stream.pendingAbortRequest;
  if (!abortRequest) {
    rejectCloseAndClosed(stream);
    return;
  }
  stream.pendingAbortRequest = undefined;
  if (abortRequest.wasAlreadyErroring) {
    abortRequest.deferred.reject(stream.storedError);
    rejectCloseAndClosed(stream);
    return;
  }
  const c = stream.controller;
  const result = c.abort(abortRequest.reason);
  clearWritableAlgorithms(c);
  result.then(
    () => {
      abortRequest.deferred.resolve(undefined);
      rejectCloseAndClosed(stream);
    },
    (reason) => {
      abortRequest.deferred.reject(reason);
      rejectCloseAndClosed(stream);
    },
  );
}

function rejectCloseAndClosed(stream) {
  if (stream.closeRequest) {
    stream.closeRequest.reject(stream.storedError);
    stream.closeRequest = undefined;
  }
  if (stream.writer) {
    stream.writer.closed.reject(stream.storedError);
    handled(stream.writer.closed.promise);
  }
}

function finishInFlightWrite(stream, error, failed) {
  const request = stream.inFlightWriteRequest;
  stream.inFlightWriteRequest = undefined;
  if (!failed) {
    request.resolve(undefined);
    return;
  }
  request.reject(error);
  dealWithRejection(stream, error);
}

function finishInFlightClose(stream, error, failed) {
  const request = stream.inFlightCloseRequest;
  stream.inFlightCloseRequest = undefined;
  if (failed) {
    request.reject(error);
    if (stream.pendingAbortRequest) {
      stream.pendingAbortRequest.deferred.reject(error);
      stream.pendingAbortRequest = undefined;
    }
    dealWithRejection(stream, error);
    return;
  }
  request.resolve(undefined);
  // A close that finished wins over an abort that came while it was in flight.
  if (stream.state === "erroring") {
    stream.storedError = undefined;
    if (stream.pendingAbortRequest) {
      stream.pendingAbortRequest.deferred.resolve(undefined);
      stream.pendingAbortRequest = undefined;
    }
  }
  stream.state = "closed";
  if (stream.writer) stream.writer.closed.resolve(undefined);
}

function updateBackpressure(stream, backpressure) {
  const writer = stream.writer;
  if (writer && backpressure !== stream.backpressure) {
    if (backpressure) writer.ready = deferred();
    else writer.ready.resolve(undefined);
  }
  stream.backpressure = backpressure;
}

// ---- the controller ----------------------------------------------------------------------------

export class WritableStreamDefaultController {
  constructor() {
    throw illegalConstructor();
  }
  get signal() {
    return slots(this, "WritableStreamDefaultController").abortController.signal;
  }
  error(e = undefined) {
    const c = slots(this, "WritableStreamDefaultController");
    if (c.stream.state !== "writable") return;
    errorWritableController(c, e);
  }
}
Object.defineProperty(WritableStreamDefaultController.prototype, Symbol.toStringTag, { value: "WritableStreamDefaultController", configurable: true });

function setUpWritableController(stream, { start, write, close, abort, hwm, size }) {
  const c = {
    kind: "WritableStreamDefaultController",
    api: Object.create(WritableStreamDefaultController.prototype),
    stream,
    queue: [],
    queueTotalSize: 0,
    abortController: new AbortController(),
    started: false,
    write,
    close,
    abort,
    size,
    hwm,
  };
  c.api[I] = c;
  stream.controller = c;
  updateBackpressure(stream, writableDesiredSize(c) <= 0);
  const startResult = start(c);
  resolved(startResult).then(
    () => {
      c.started = true;
      advanceQueue(c);
    },
    (r) => {
      c.started = true;
      dealWithRejection(stream, r);
    },
  );
}

function clearWritableAlgorithms(c) {
  c.write = undefined;
  c.close = undefined;
  c.abort = undefined;
  c.size = undefined;
}

function writableDesiredSize(c) {
  return c.hwm - c.queueTotalSize;
}

function errorWritableController(c, e) {
  clearWritableAlgorithms(c);
  startErroring(c.stream, e);
}
function errorWritableIfNeeded(c, e) {
  if (c.stream.state === "writable") errorWritableController(c, e);
}

function chunkSize(c, chunk) {
  if (!c.size) return 1;
  try {
    return c.size(chunk);
  } catch (err) {
    errorWritableIfNeeded(c, err);
    return 1;
  }
}

function controllerWrite(c, chunk, size) {
  try {
    enqueueWithSize(c, chunk, size);
  } catch (err) {
    errorWritableIfNeeded(c, err);
    return;
  }
  const stream = c.stream;
  if (!closeQueuedOrInFlight(stream) && stream.state === "writable") updateBackpressure(stream, writableDesiredSize(c) <= 0);
  advanceQueue(c);
}

/** Hands the sink the next queued write or the close, once the one before has finished. */
function advanceQueue(c) {
  const stream = c.stream;
  if (!c.started || stream.inFlightWriteRequest !== undefined) return;
  if (stream.state === "erroring") {
    finishErroring(stream);
    return;
  }
  if (c.queue.length === 0) return;
  const value = c.queue[0].value;
  if (value === closeSentinel) processClose(c);
  else processWrite(c, value);
}

function processClose(c) {
  const stream = c.stream;
  stream.inFlightCloseRequest = stream.closeRequest;
  stream.closeRequest = undefined;
  dequeue(c);
  const closing = c.close();
  clearWritableAlgorithms(c);
  closing.then(
    () => finishInFlightClose(stream),
    (reason) => finishInFlightClose(stream, reason, true),
  );
}

function processWrite(c, chunk) {
  const stream = c.stream;
  stream.inFlightWriteRequest = stream.writeRequests.shift();
  c.write(chunk, c).then(
    () => {
      finishInFlightWrite(stream);
      dequeue(c);
      if (!closeQueuedOrInFlight(stream) && stream.state === "writable") updateBackpressure(stream, writableDesiredSize(c) <= 0);
      advanceQueue(c);
    },
    (reason) => {
      if (stream.state === "writable") clearWritableAlgorithms(c);
      finishInFlightWrite(stream, reason, true);
    },
  );
}

// ---- the writer -----------------------------------------------------------------------------------

export class WritableStreamDefaultWriter {
  constructor(stream) {
    setUpWriter(this, slots(stream, "WritableStream"));
  }
  get closed() {
    return slots(this, "WritableStreamDefaultWriter").closed.promise;
  }
  get ready() {
    return slots(this, "WritableStreamDefaultWriter").ready.promise;
  }
  get desiredSize() {
    const writer = slots(this, "WritableStreamDefaultWriter");
    if (!writer.stream) throw new TypeError("The writer has been released");
    const state = writer.stream.state;
    if (state === "errored" || state === "erroring") return null;
    if (state === "closed") return 0;
    return writableDesiredSize(writer.stream.controller);
  }
  abort(reason = undefined) {
    let writer;
    try {
      writer = slots(this, "WritableStreamDefaultWriter");
    } catch (err) {
      return rejected(err);
    }
    if (!writer.stream) return rejected(new TypeError("The writer has been released"));
    return abortWritable(writer.stream, reason);
  }
  close() {
    let writer;
    try {
      writer = slots(this, "WritableStreamDefaultWriter");
    } catch (err) {
      return rejected(err);
    }
    if (!writer.stream) return rejected(new TypeError("The writer has been released"));
    if (closeQueuedOrInFlight(writer.stream)) return rejected(new TypeError("The WritableStream is already closing"));
    return closeWritable(writer.stream);
  }
  releaseLock() {
    const writer = slots(this, "WritableStreamDefaultWriter");
    if (writer.stream) releaseWriter(writer);
  }
  write(chunk = undefined) {
    let writer;
    try {
      writer = slots(this, "WritableStreamDefaultWriter");
    } catch (err) {
      return rejected(err);
    }
    if (!writer.stream) return rejected(new TypeError("The writer has been released"));
    return writeWithWriter(writer, chunk);
  }
}
Object.defineProperty(WritableStreamDefaultWriter.prototype, Symbol.toStringTag, { value: "WritableStreamDefaultWriter", configurable: true });

function setUpWriter(api, stream) {
  if (stream.writer) throw new TypeError("WritableStream is locked");
  const writer = { kind: "WritableStreamDefaultWriter", api, stream, ready: undefined, closed: undefined };
  api[I] = writer;
  stream.writer = writer;
  const state = stream.state;
  if (state === "writable") {
    writer.ready = !closeQueuedOrInFlight(stream) && stream.backpressure ? deferred() : resolvedDeferred(undefined);
    writer.closed = deferred();
  } else if (state === "erroring") {
    writer.ready = rejectedDeferred(stream.storedError);
    writer.closed = deferred();
  } else if (state === "closed") {
    writer.ready = resolvedDeferred(undefined);
    writer.closed = resolvedDeferred(undefined);
  } else {
    writer.ready = rejectedDeferred(stream.storedError);
    writer.closed = rejectedDeferred(stream.storedError);
  }
  return writer;
}

const acquireWriter = (stream) => setUpWriter(Object.create(WritableStreamDefaultWriter.prototype), stream);

function rejectReady(writer, reason) {
  if (writer.ready.settled) writer.ready = rejectedDeferred(reason);
  else writer.ready.reject(reason);
  handled(writer.ready.promise);
}

function releaseWriter(writer) {
  const stream = writer.stream;
  const released = new TypeError("The writer was released");
  rejectReady(writer, released);
  if (writer.closed.settled) writer.closed = rejectedDeferred(released);
  else writer.closed.reject(released);
  handled(writer.closed.promise);
  stream.writer = undefined;
  writer.stream = undefined;
}

function writeWithWriter(writer, chunk) {
  const stream = writer.stream;
  const c = stream.controller;
  const size = chunkSize(c, chunk);
  if (stream !== writer.stream) return rejected(new TypeError("The writer was released"));
  const state = stream.state;
  if (state === "errored") return rejected(stream.storedError);
  if (closeQueuedOrInFlight(stream) || state === "closed") return rejected(new TypeError("The WritableStream is closing or closed"));
  if (state === "erroring") return rejected(stream.storedError);
  const d = deferred();
  stream.writeRequests.push(d);
  controllerWrite(c, chunk, size);
  return d.promise;
}

function closeWriterPropagatingErrors(writer) {
  const stream = writer.stream;
  if (closeQueuedOrInFlight(stream) || stream.state === "closed") return resolved();
  if (stream.state === "errored") return rejected(stream.storedError);
  return closeWritable(stream);
}

// =============================================================================================
// TransformStream: a writable side whose chunks go through transform() into a readable side.
// Backpressure: while the readable side's queue is full, writes wait (the writable side's sink
// does not finish them) until a read pulls.

export class TransformStream {
  constructor(transformer = undefined, writableStrategy = {}, readableStrategy = {}) {
    const t = transformer ?? {};
    if (typeof t !== "object" && typeof t !== "function") throw new TypeError("The transformer must be an object");
    const start = callback(t, "start");
    const transform = callback(t, "transform");
    const flush = callback(t, "flush");
    const cancel = callback(t, "cancel");
    if (t.readableType !== undefined) throw new RangeError("Invalid readableType");
    if (t.writableType !== undefined) throw new RangeError("Invalid writableType");
    const readableHwm = highWaterMarkOf(readableStrategy, 0);
    const readableSize = sizeAlgorithmOf(readableStrategy);
    const writableHwm = highWaterMarkOf(writableStrategy, 1);
    const writableSize = sizeAlgorithmOf(writableStrategy);
    const started = deferred();
    const stream = initTransformStream(this, started.promise, writableHwm, writableSize, readableHwm, readableSize);
    const c = setUpTransformController(stream, {
      transform: transform
        ? (chunk) => promiseCall(transform, t, chunk, c.api)
        : (chunk) => {
            try {
              enqueueTransformed(c, chunk);
              return resolved();
            } catch (err) {
              return rejected(err);
            }
          },
      flush: () => (flush ? promiseCall(flush, t, c.api) : resolved()),
      cancel: (reason) => (cancel ? promiseCall(cancel, t, reason) : resolved()),
    });
    started.resolve(start ? start.call(t, c.api) : undefined);
  }
  get readable() {
    return slots(this, "TransformStream").readable.api;
  }
  get writable() {
    return slots(this, "TransformStream").writable.api;
  }
}
Object.defineProperty(TransformStream.prototype, Symbol.toStringTag, { value: "TransformStream", configurable: true });

function initTransformStream(api, startPromise, writableHwm, writableSize, readableHwm, readableSize) {
  const stream = { kind: "TransformStream", api, readable: undefined, writable: undefined, backpressure: undefined, backpressureChange: undefined, controller: undefined };
  api[I] = stream;
  const start = () => startPromise;
  stream.writable = createWritableStream({
    start,
    write: (chunk) => sinkWrite(stream, chunk),
    close: () => sinkClose(stream),
    abort: (reason) => sinkAbort(stream, reason),
    hwm: writableHwm,
    size: writableSize,
  });
  stream.readable = createReadableStream({
    start,
    pull: () => sourcePull(stream),
    cancel: (reason) => sourceCancel(stream, reason),
    hwm: readableHwm,
    size: readableSize,
  });
  setBackpressure(stream, true);
  return stream;
}

function setBackpressure(stream, backpressure) {
  stream.backpressureChange?.resolve(undefined);
  stream.backpressureChange = deferred();
  stream.backpressure = backpressure;
}

function errorTransform(stream, e) {
  errorReadableController(stream.readable.controller, e);
  errorWritableAndUnblockWrite(stream, e);
}

function errorWritableAndUnblockWrite(stream, e) {
  clearTransformAlgorithms(stream.controller);
  errorWritableIfNeeded(stream.writable.controller, e);
  unblockWrite(stream);
}

// A write waiting for backpressure to lift would otherwise wait forever.
function unblockWrite(stream) {
  if (stream.backpressure) setBackpressure(stream, false);
}

// ---- the controller ----------------------------------------------------------------------------

export class TransformStreamDefaultController {
  constructor() {
    throw illegalConstructor();
  }
  get desiredSize() {
    return readableDesiredSize(slots(this, "TransformStreamDefaultController").stream.readable.controller);
  }
  enqueue(chunk = undefined) {
    enqueueTransformed(slots(this, "TransformStreamDefaultController"), chunk);
  }
  error(reason = undefined) {
    errorTransform(slots(this, "TransformStreamDefaultController").stream, reason);
  }
  terminate() {
    const stream = slots(this, "TransformStreamDefaultController").stream;
    closeReadableController(stream.readable.controller);
    errorWritableAndUnblockWrite(stream, new TypeError("The TransformStream was terminated"));
  }
}
Object.defineProperty(TransformStreamDefaultController.prototype, Symbol.toStringTag, { value: "TransformStreamDefaultController", configurable: true });

function setUpTransformController(stream, { transform, flush, cancel }) {
  const c = {
    kind: "TransformStreamDefaultController",
    api: Object.create(TransformStreamDefaultController.prototype),
    stream,
    transform,
    flush,
    cancel,
    finish: undefined,
  };
  c.api[I] = c;
  stream.controller = c;
  return c;
}

function clearTransformAlgorithms(c) {
  c.transform = undefined;
  c.flush = undefined;
  c.cancel = undefined;
}

function enqueueTransformed(c, chunk) {
  const stream = c.stream;
  const rc = stream.readable.controller;
  if (!canCloseOrEnqueue(rc)) throw new TypeError("The readable side cannot accept more chunks");
  try {
    enqueueReadableController(rc, chunk);
  } catch (err) {
    errorWritableAndUnblockWrite(stream, err);
    throw stream.readable.storedError;
  }
  const backpressure = !shouldPull(rc);
  if (backpressure !== stream.backpressure) setBackpressure(stream, true);
}

function performTransform(c, chunk) {
  // The algorithms are gone once the stream has ended: a late write fails like one on an errored stream.
  if (!c.transform) return rejected(c.stream.writable.storedError ?? new TypeError("The TransformStream has ended"));
  return c.transform(chunk).then(undefined, (r) => {
    errorTransform(c.stream, r);
    throw r;
  });
}

function sinkWrite(stream, chunk) {
  const c = stream.controller;
  if (!stream.backpressure) return performTransform(c, chunk);
  return stream.backpressureChange.promise.then(() => {
    const writable = stream.writable;
    if (writable.state === "erroring") throw writable.storedError;
    return performTransform(c, chunk);
  });
}

// The three ways the stream ends share one promise: whichever comes first decides.
function finishWith(stream, start, onDone, onFail) {
  const c = stream.controller;
  if (c.finish) return c.finish.promise;
  const finish = (c.finish = deferred());
  const pending = start(c);
  clearTransformAlgorithms(c);
  pending.then(
    () => onDone(finish),
    (r) => {
      onFail(r);
      finish.reject(r);
    },
  );
  return finish.promise;
}

function sinkAbort(stream, reason) {
  const readable = stream.readable;
  return finishWith(
    stream,
    (c) => (c.cancel ? c.cancel(reason) : resolved()),
    (finish) => {
      if (readable.state === "errored") return finish.reject(readable.storedError);
      errorReadableController(readable.controller, reason);
      finish.resolve(undefined);
    },
    (r) => errorReadableController(readable.controller, r),
  );
}

function sinkClose(stream) {
  const readable = stream.readable;
  return finishWith(
    stream,
    (c) => (c.flush ? c.flush() : resolved()),
    (finish) => {
      if (readable.state === "errored") return finish.reject(readable.storedError);
      closeReadableController(readable.controller);
      finish.resolve(undefined);
    },
    (r) => errorReadableController(readable.controller, r),
  );
}

function sourcePull(stream) {
  setBackpressure(stream, false);
  return stream.backpressureChange.promise;
}

function sourceCancel(stream, reason) {
  const writable = stream.writable;
  return finishWith(
    stream,
    (c) => (c.cancel ? c.cancel(reason) : resolved()),
    (finish) => {
      if (writable.state === "errored") return finish.reject(writable.storedError);
      errorWritableIfNeeded(writable.controller, reason);
      unblockWrite(stream);
      finish.resolve(undefined);
    },
    (r) => {
      errorWritableIfNeeded(writable.controller, r);
      unblockWrite(stream);
    },
  );
}

// =============================================================================================
// Queuing strategies

const strategyInit = (init) => {
  if (init === null || typeof init !== "object" || init.highWaterMark === undefined) {
    throw new TypeError('The "init" argument must have a highWaterMark');
  }
  return Number(init.highWaterMark);
};
// Each class's size is one shared function, as in the spec (strategy.size === other.size).
const byteLengthSize = function size(chunk) {
  return chunk.byteLength;
};
const countSize = function size() {
  return 1;
};

export class ByteLengthQueuingStrategy {
  #highWaterMark;
  constructor(init) {
    this.#highWaterMark = strategyInit(init);
  }
  get highWaterMark() {
    return this.#highWaterMark;
  }
  get size() {
    return byteLengthSize;
  }
}
Object.defineProperty(ByteLengthQueuingStrategy.prototype, Symbol.toStringTag, { value: "ByteLengthQueuingStrategy", configurable: true });

export class CountQueuingStrategy {
  #highWaterMark;
  constructor(init) {
    this.#highWaterMark = strategyInit(init);
  }
  get highWaterMark() {
    return this.#highWaterMark;
  }
  get size() {
    return countSize;
  }
}
Object.defineProperty(CountQueuingStrategy.prototype, Symbol.toStringTag, { value: "CountQueuingStrategy", configurable: true });

// =============================================================================================
// Text encoding streams

/** Strings in, UTF-8 bytes out; a surrogate pair split across two chunks stays one character. */
export class TextEncoderStream {
  #transform;
  constructor() {
    const encoder = new TextEncoder();
    let pendingHigh = "";
    this.#transform = new TransformStream({
      transform(chunk, controller) {
        let text = pendingHigh + String(chunk);
        pendingHigh = "";
        const last = text.charCodeAt(text.length - 1);
        if (last >= 0xd800 && last <= 0xdbff) {
          pendingHigh = text.slice(-1);
          text = text.slice(0, -1);
        }
        if (text) controller.enqueue(encoder.encode(text));
      },
      flush(controller) {
        // A high surrogate with nothing after it is U+FFFD.
        if (pendingHigh) controller.enqueue(new Uint8Array([0xef, 0xbf, 0xbd]));
      },
    });
  }
  get encoding() {
    return "utf-8";
  }
  get readable() {
    return this.#transform.readable;
  }
  get writable() {
    return this.#transform.writable;
  }
}
Object.defineProperty(TextEncoderStream.prototype, Symbol.toStringTag, { value: "TextEncoderStream", configurable: true });

/** How many bytes at the end of `bytes` begin a UTF-8 sequence that the next chunk completes. */
const asBytes = (chunk) => {
  if (chunk instanceof ArrayBuffer) return new Uint8Array(chunk);
  if (ArrayBuffer.isView(chunk)) return new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength);
  throw new TypeError('The "chunk" argument must be an ArrayBuffer or an ArrayBufferView');
};

/** UTF-8 bytes in, strings out. Other encodings only where the engine's TextDecoder has them. */
export class TextDecoderStream {
  #transform;
  #encoding;
  #fatal;
  #ignoreBOM;
  constructor(label = "utf-8", options = {}) {
    const fatal = !!options?.fatal;
    const ignoreBOM = !!options?.ignoreBOM;
    // Validates the label the way TextDecoder does (RangeError for an unknown one), and keeps
    // a character cut between chunks for the next one.
    const decoder = new TextDecoder(label, { fatal, ignoreBOM });
    this.#encoding = decoder.encoding;
    this.#fatal = fatal;
    this.#ignoreBOM = ignoreBOM;
    this.#transform = new TransformStream({
      transform(chunk, controller) {
        const text = decoder.decode(asBytes(chunk), { stream: true });
        if (text) controller.enqueue(text);
      },
      flush(controller) {
        const text = decoder.decode(new Uint8Array(0), { stream: false });
        if (text) controller.enqueue(text);
      },
    });
  }
  get encoding() {
    return this.#encoding;
  }
  get fatal() {
    return this.#fatal;
  }
  get ignoreBOM() {
    return this.#ignoreBOM;
  }
  get readable() {
    return this.#transform.readable;
  }
  get writable() {
    return this.#transform.writable;
  }
}
Object.defineProperty(TextDecoderStream.prototype, Symbol.toStringTag, { value: "TextDecoderStream", configurable: true });

export default {
  ReadableStream,
  ReadableStreamDefaultReader,
  ReadableStreamDefaultController,
  WritableStream,
  WritableStreamDefaultWriter,
  WritableStreamDefaultController,
  TransformStream,
  TransformStreamDefaultController,
  ByteLengthQueuingStrategy,
  CountQueuingStrategy,
  TextEncoderStream,
  TextDecoderStream,
};
