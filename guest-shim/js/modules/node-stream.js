// node:stream for pichamber: Readable, Writable, Duplex, Transform and PassThrough with Node's
// events and backpressure (highWaterMark, push/write return values, 'drain'), paused and
// flowing modes, pipe, async iteration, Readable.from, pipeline (streams, iterables and async
// generator stages) and finished; stream/promises has the promise forms. Readable and Writable
// convert to and from web streams (fromWeb/toWeb, over web-streams.js).
import { Buffer } from "pichamber:node/buffer";
import { EventEmitter } from "pichamber:node/events";
import { StringDecoder } from "pichamber:node/string_decoder";
import { ReadableStream, WritableStream, CountQueuingStrategy, ByteLengthQueuingStrategy } from "pichamber:web-streams";

const tick = (fn, ...args) => process.nextTick(fn, ...args);

function codeError(code, message, Ctor = Error) {
  const err = new Ctor(message);
  err.code = code;
  return err;
}
const notImplemented = (method) => codeError("ERR_METHOD_NOT_IMPLEMENTED", `The ${method} method is not implemented`);
const prematureClose = () => codeError("ERR_STREAM_PREMATURE_CLOSE", "Premature close");

export function getDefaultHighWaterMark(objectMode) {
  return objectMode ? 16 : 65536;
}

const isChunk = (chunk) => typeof chunk === "string" || chunk instanceof Uint8Array;
const sizeOf = (objectMode, chunk) => (objectMode ? 1 : chunk.length);

/** The legacy base class: an EventEmitter with pipe(). */
export function Stream(options) {
  EventEmitter.init.call(this, options);
}
Object.setPrototypeOf(Stream.prototype, EventEmitter.prototype);
Object.setPrototypeOf(Stream, EventEmitter);

// ---- destroying (shared by both sides) --------------------------------------------------------

function destroy(err, cb) {
  const r = this._readableState;
  const w = this._writableState;
  if ((r ?? w).destroyed) {
    if (typeof cb === "function") cb();
    return this;
  }
  for (const state of [r, w]) {
    if (!state) continue;
    state.destroyed = true;
    if (err && !state.errored) state.errored = err;
  }
  this._destroy(err ?? null, (er) => {
    for (const state of [r, w]) if (state && er && !state.errored) state.errored = er;
    tick(() => {
      if (er) this.emit("error", er);
      for (const state of [r, w]) if (state) state.closed = true;
      if ((r ?? w).emitClose) this.emit("close");
    });
    if (typeof cb === "function") cb(er);
  });
  return this;
}

function defaultDestroy(err, cb) {
  cb(err);
}

/** Destroys a stream whose both sides are done (autoDestroy). */
function maybeAutoDestroy(stream) {
  const r = stream._readableState;
  const w = stream._writableState;
  const readDone = !r || !stream._readableSide || r.endEmitted;
  const writeDone = !w || !stream._writableSide || w.finished;
  if (readDone && writeDone && (r ?? w).autoDestroy && !(r ?? w).destroyed) stream.destroy();
}

// ---- Readable ---------------------------------------------------------------------------------

function initReadable(stream, options) {
  const objectMode = !!(options.objectMode || options.readableObjectMode);
  stream._readableState = {
    objectMode,
    highWaterMark: options.readableHighWaterMark ?? options.highWaterMark ?? getDefaultHighWaterMark(objectMode),
    buffer: [],
    length: 0,
    flowing: null,
    ended: false,
    endEmitted: false,
    reading: false,
    readableListening: false,
    emittedReadable: false,
    scheduled: false,
    decoder: null,
    encoding: null,
    destroyed: false,
    closed: false,
    errored: null,
    autoDestroy: options.autoDestroy !== false,
    emitClose: options.emitClose !== false,
    pipes: [],
  };
  stream._readableSide = options.readable !== false;
  if (typeof options.read === "function") stream._read = options.read;
  if (typeof options.destroy === "function") stream._destroy = options.destroy;
  if (options.encoding) stream.setEncoding(options.encoding);
  if (options.signal) addAbortSignal(options.signal, stream);
}

export function Readable(options = {}) {
  if (!(this instanceof Readable)) return new Readable(options);
  Stream.call(this, options);
  initReadable(this, options);
}
Object.setPrototypeOf(Readable.prototype, Stream.prototype);
Object.setPrototypeOf(Readable, Stream);

Object.assign(Readable.prototype, {
  _read() {
    throw notImplemented("_read()");
  },
  _destroy: defaultDestroy,
  destroy,

  push(chunk, encoding) {
    const state = this._readableState;
    if (state.destroyed) return false;
    state.reading = false;
    if (chunk === null) {
      if (!state.ended) {
        if (state.decoder) {
          const rest = state.decoder.end();
          if (rest) addChunk(this, rest);
        }
        state.ended = true;
      }
      schedule(this);
      return false;
    }
    if (state.ended) {
      this.destroy(codeError("ERR_STREAM_PUSH_AFTER_EOF", "stream.push() after EOF"));
      return false;
    }
    if (!state.objectMode) {
      if (!isChunk(chunk)) {
        this.destroy(codeError("ERR_INVALID_ARG_TYPE", 'The "chunk" argument must be of type string or an instance of Buffer or Uint8Array', TypeError));
        return false;
      }
      if (typeof chunk === "string" && !state.decoder) chunk = Buffer.from(chunk, encoding);
      else if (typeof chunk !== "string" && !Buffer.isBuffer(chunk)) chunk = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
      if (state.decoder && typeof chunk !== "string") chunk = state.decoder.write(chunk);
      if (chunk.length === 0) {
        schedule(this);
        return state.length < state.highWaterMark;
      }
    }
    addChunk(this, chunk);
    schedule(this);
    return state.length < state.highWaterMark;
  },

  unshift(chunk, encoding) {
    const state = this._readableState;
    if (chunk === null) return this.push(null);
    if (!state.objectMode && typeof chunk === "string" && !state.decoder) chunk = Buffer.from(chunk, encoding);
    state.buffer.unshift(chunk);
    state.length += sizeOf(state.objectMode, chunk);
    schedule(this);
    return state.length < state.highWaterMark;
  },

  read(n) {
    const state = this._readableState;
    state.emittedReadable = false;
    let out = null;
    if (state.length > 0 && n !== 0) {
      if (state.objectMode) out = takeObject(state);
      else if (n === undefined || n >= state.length) out = takeAll(state);
      else if (n > 0) out = takeBytes(state, n);
      else if (state.ended) out = takeAll(state);
    }
    if (out !== null) this.emit("data", out);
    schedule(this, true);
    return out;
  },

  setEncoding(encoding) {
    const state = this._readableState;
    state.decoder = new StringDecoder(encoding);
    state.encoding = state.decoder.encoding;
    const text = state.buffer.map((c) => (typeof c === "string" ? c : state.decoder.write(c))).join("");
    state.buffer = text ? [text] : [];
    state.length = text.length;
    return this;
  },

  pause() {
    const state = this._readableState;
    if (state.flowing !== false) {
      state.flowing = false;
      this.emit("pause");
    }
    return this;
  },

  resume() {
    const state = this._readableState;
    if (!state.flowing) {
      state.flowing = !state.readableListening;
      // Node says 'resume' on the next tick, just before the data flows.
      tick(() => {
        if (!state.destroyed) this.emit("resume");
        flow(this);
      });
    }
    return this;
  },

  isPaused() {
    return this._readableState.flowing === false;
  },

  on(event, listener) {
    const out = Stream.prototype.on.call(this, event, listener);
    const state = this._readableState;
    if (event === "data") {
      if (state.flowing !== false) this.resume();
    } else if (event === "readable") {
      state.readableListening = true;
      state.flowing = false;
      state.emittedReadable = false;
      schedule(this, true);
    }
    return out;
  },

  pipe(dest, options) {
    const src = this;
    const end = options?.end !== false && typeof dest.end === "function" && dest !== globalThis.process?.stdout && dest !== globalThis.process?.stderr;
    const ondata = (chunk) => {
      if (dest.write(chunk) === false) src.pause();
    };
    const ondrain = () => src.resume();
    const onend = () => dest.end();
    const cleanup = () => {
      src.removeListener("data", ondata);
      src.removeListener("end", onend);
      dest.removeListener("drain", ondrain);
      dest.removeListener("error", onerror);
    };
    const onerror = () => src.unpipe(dest);
    src.on("data", ondata);
    dest.on("drain", ondrain);
    dest.on("error", onerror);
    if (end) src.once("end", onend);
    this._readableState.pipes.push({ dest, cleanup });
    dest.emit("pipe", src);
    if (!this._readableState.flowing) this.resume();
    return dest;
  },

  unpipe(dest) {
    const state = this._readableState;
    for (const pipe of [...state.pipes]) {
      if (dest !== undefined && pipe.dest !== dest) continue;
      pipe.cleanup();
      state.pipes.splice(state.pipes.indexOf(pipe), 1);
      pipe.dest.emit("unpipe", this);
    }
    return this;
  },

  async toArray() {
    const out = [];
    for await (const chunk of this) out.push(chunk);
    return out;
  },

  async forEach(fn) {
    for await (const chunk of this) await fn(chunk);
  },

  [Symbol.asyncIterator]() {
    return iterate(this);
  },
});

Readable.prototype.addListener = Readable.prototype.on;

function getters(proto, entries) {
  for (const [name, get] of Object.entries(entries)) Object.defineProperty(proto, name, { get, configurable: true });
}

getters(Readable.prototype, {
  readable() {
    const s = this._readableState;
    return this._readableSide && !s.destroyed && !s.errored && !s.endEmitted;
  },
  readableEnded() {
    return this._readableState.endEmitted;
  },
  readableFlowing() {
    return this._readableState.flowing;
  },
  readableLength() {
    return this._readableState.length;
  },
  readableHighWaterMark() {
    return this._readableState.highWaterMark;
  },
  readableObjectMode() {
    return this._readableState.objectMode;
  },
  readableEncoding() {
    return this._readableState.encoding;
  },
  readableAborted() {
    const s = this._readableState;
    return (s.destroyed || !!s.errored) && !s.endEmitted;
  },
  closed() {
    return (this._readableState ?? this._writableState).closed;
  },
  errored() {
    return (this._readableState ?? this._writableState).errored ?? null;
  },
});
Object.defineProperty(Readable.prototype, "destroyed", {
  get() {
    return (this._readableState ?? this._writableState).destroyed;
  },
  set(value) {
    for (const state of [this._readableState, this._writableState]) if (state) state.destroyed = !!value;
  },
  configurable: true,
});

function addChunk(stream, chunk) {
  const state = stream._readableState;
  state.buffer.push(chunk);
  state.length += sizeOf(state.objectMode, chunk);
}

function takeObject(state) {
  state.length -= 1;
  return state.buffer.shift();
}

function takeAll(state) {
  const chunks = state.buffer;
  state.buffer = [];
  state.length = 0;
  if (chunks.length === 1) return chunks[0];
  return state.decoder ? chunks.join("") : Buffer.concat(chunks);
}

function takeBytes(state, n) {
  const parts = [];
  let need = n;
  while (need > 0) {
    const head = state.buffer[0];
    if (head.length <= need) {
      parts.push(state.buffer.shift());
      need -= head.length;
    } else {
      parts.push(head.slice(0, need));
      state.buffer[0] = head.slice(need);
      need = 0;
    }
  }
  state.length -= n;
  return state.decoder ? parts.join("") : Buffer.concat(parts);
}

/** Runs the stream's flow on a later tick (once per tick); `demand` asks for data. */
function schedule(stream, demand = false) {
  const state = stream._readableState;
  if (demand) state.demand = true;
  if (state.scheduled) return;
  state.scheduled = true;
  tick(() => {
    state.scheduled = false;
    flow(stream);
  });
}

function flow(stream) {
  const state = stream._readableState;
  if (state.destroyed) return;
  // Flowing, each chunk is its own 'data' event, as pushed.
  while (state.flowing && state.length > 0) {
    const chunk = state.buffer.shift();
    state.length -= sizeOf(state.objectMode, chunk);
    stream.emit("data", chunk);
  }
  if (state.readableListening && !state.emittedReadable && (state.length > 0 || state.ended)) {
    state.emittedReadable = true;
    stream.emit("readable");
  }
  if (state.destroyed) return;
  if (state.ended) {
    if (state.length === 0 && !state.endEmitted && (state.flowing || state.demand || state.readableListening)) {
      tick(() => {
        if (state.endEmitted || state.length > 0 || state.destroyed) return;
        state.endEmitted = true;
        stream.emit("end");
        if (stream._writableState && !stream.allowHalfOpen && !stream._writableState.ending) stream.end();
        maybeAutoDestroy(stream);
      });
    }
    return;
  }
  const wanted = state.flowing || state.demand || state.readableListening;
  if (wanted && !state.reading && state.length < state.highWaterMark) {
    state.demand = false;
    state.reading = true;
    const before = state.length;
    try {
      stream._read(state.highWaterMark);
    } catch (err) {
      stream.destroy(err);
      return;
    }
    // A chunk pushed within _read is delivered on the tick it scheduled.
    if (state.length > before && !state.reading) schedule(stream);
  }
}

function iterate(stream) {
  const state = stream._readableState;
  let error = null;
  let done = false;
  let wake = null;
  const next = () => {
    const w = wake;
    wake = null;
    if (w) w();
  };
  const onend = () => {
    done = true;
    next();
  };
  const onerror = (err) => {
    error = err;
    next();
  };
  const onclose = () => {
    if (!state.endEmitted && !error) error = prematureClose();
    done = true;
    next();
  };
  stream.on("readable", next);
  stream.on("end", onend);
  stream.on("error", onerror);
  stream.on("close", onclose);
  const cleanup = () => {
    stream.removeListener("readable", next);
    stream.removeListener("end", onend);
    stream.removeListener("error", onerror);
    stream.removeListener("close", onclose);
  };
  return (async function* () {
    let completed = false;
    try {
      for (;;) {
        const chunk = state.destroyed ? null : stream.read();
        if (chunk !== null) yield chunk;
        else if (error) throw error;
        else if (done) {
          completed = true;
          return;
        } else await new Promise((resolve) => (wake = resolve));
      }
    } finally {
      cleanup();
      // Leaving the loop early (break, throw) destroys the stream, as in Node.
      if (!completed && !state.destroyed) stream.destroy(error ?? undefined);
    }
  })();
}

Readable.from = function from(iterable, options) {
  if (typeof iterable === "string" || iterable instanceof Uint8Array) {
    let sent = false;
    return new Readable({
      objectMode: true,
      ...options,
      read() {
        this.push(sent ? null : iterable);
        sent = true;
      },
    });
  }
  const iterator = iterable?.[Symbol.asyncIterator]?.() ?? iterable?.[Symbol.iterator]?.();
  if (!iterator) throw codeError("ERR_INVALID_ARG_TYPE", 'The "iterable" argument must be an instance of Iterable', TypeError);
  let pulling = false;
  return new Readable({
    objectMode: true,
    highWaterMark: 1,
    ...options,
    read() {
      if (pulling) return;
      pulling = true;
      (async () => {
        try {
          for (;;) {
            const { value, done } = await iterator.next();
            if (done) {
              this.push(null);
              return;
            }
            const chunk = await value;
            if (chunk === null) throw codeError("ERR_STREAM_NULL_VALUES", "May not write null values to stream", TypeError);
            if (!this.push(chunk)) return;
          }
        } catch (err) {
          this.destroy(err);
        } finally {
          pulling = false;
        }
      })();
    },
    destroy(err, cb) {
      Promise.resolve(iterator.return?.()).then(
        () => cb(err),
        (e) => cb(err ?? e),
      );
    },
  });
};

// ---- Writable ---------------------------------------------------------------------------------

function initWritable(stream, options) {
  const objectMode = !!(options.objectMode || options.writableObjectMode);
  stream._writableState = {
    objectMode,
    highWaterMark: options.writableHighWaterMark ?? options.highWaterMark ?? getDefaultHighWaterMark(objectMode),
    decodeStrings: options.decodeStrings !== false,
    defaultEncoding: options.defaultEncoding ?? "utf8",
    buffer: [],
    length: 0,
    writing: false,
    corked: 0,
    ending: false,
    finalCalled: false,
    finished: false,
    needDrain: false,
    destroyed: false,
    closed: false,
    errored: null,
    autoDestroy: options.autoDestroy !== false,
    emitClose: options.emitClose !== false,
    finishCallbacks: [],
  };
  stream._writableSide = options.writable !== false;
  if (typeof options.write === "function") stream._write = options.write;
  if (typeof options.writev === "function") stream._writev = options.writev;
  if (typeof options.final === "function") stream._final = options.final;
  if (typeof options.destroy === "function") stream._destroy = options.destroy;
  if (options.signal) addAbortSignal(options.signal, stream);
}

export function Writable(options = {}) {
  if (!(this instanceof Writable)) return new Writable(options);
  Stream.call(this, options);
  initWritable(this, options);
}
Object.setPrototypeOf(Writable.prototype, Stream.prototype);
Object.setPrototypeOf(Writable, Stream);

// A Duplex is a Writable too, though its prototype chain runs through Readable.
Object.defineProperty(Writable, Symbol.hasInstance, {
  value(object) {
    if (Function.prototype[Symbol.hasInstance].call(this, object)) return true;
    return this === Writable && object?._writableState !== undefined && object instanceof Duplex;
  },
});

const writableMethods = {
  _write(chunk, encoding, cb) {
    if (this._writev) this._writev([{ chunk, encoding }], cb);
    else throw notImplemented("_write()");
  },
  _destroy: defaultDestroy,
  destroy,

  write(chunk, encoding, cb) {
    const state = this._writableState;
    if (typeof encoding === "function") {
      cb = encoding;
      encoding = null;
    }
    encoding = encoding || state.defaultEncoding;
    if (chunk === null) throw codeError("ERR_STREAM_NULL_VALUES", "May not write null values to stream", TypeError);
    if (!state.objectMode) {
      if (typeof chunk === "string") {
        if (state.decodeStrings) {
          chunk = Buffer.from(chunk, encoding);
          encoding = "buffer";
        }
      } else if (chunk instanceof Uint8Array) {
        if (!Buffer.isBuffer(chunk)) chunk = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
        encoding = "buffer";
      } else {
        throw codeError("ERR_INVALID_ARG_TYPE", 'The "chunk" argument must be of type string or an instance of Buffer or Uint8Array', TypeError);
      }
    }
    let err = null;
    if (state.ending) err = codeError("ERR_STREAM_WRITE_AFTER_END", "write after end");
    else if (state.destroyed) err = codeError("ERR_STREAM_DESTROYED", "Cannot call write after a stream was destroyed");
    if (err) {
      if (typeof cb === "function") tick(cb, err);
      if (!state.destroyed) this.destroy(err);
      return false;
    }
    const size = sizeOf(state.objectMode, chunk);
    state.length += size;
    const ok = state.length < state.highWaterMark;
    if (!ok) state.needDrain = true;
    const request = { chunk, encoding, size, cb: typeof cb === "function" ? cb : null };
    if (state.writing || state.corked || state.errored) state.buffer.push(request);
    else writeOne(this, [request]);
    return ok && !state.errored && !state.destroyed;
  },

  end(chunk, encoding, cb) {
    const state = this._writableState;
    if (typeof chunk === "function") {
      cb = chunk;
      chunk = null;
      encoding = null;
    } else if (typeof encoding === "function") {
      cb = encoding;
      encoding = null;
    }
    if (chunk !== null && chunk !== undefined) this.write(chunk, encoding);
    if (state.corked) {
      state.corked = 1;
      this.uncork();
    }
    if (typeof cb === "function") {
      if (state.finished) tick(cb, codeError("ERR_STREAM_ALREADY_FINISHED", "Cannot call end after a stream was finished"));
      else if (state.errored || state.destroyed) tick(cb, state.errored ?? codeError("ERR_STREAM_DESTROYED", "Cannot call end after a stream was destroyed"));
      else state.finishCallbacks.push(cb);
    }
    if (!state.ending) {
      state.ending = true;
      finishMaybe(this);
    }
    return this;
  },

  cork() {
    this._writableState.corked++;
  },

  uncork() {
    const state = this._writableState;
    if (state.corked > 0 && --state.corked === 0 && !state.writing) clearBuffer(this);
  },

  setDefaultEncoding(encoding) {
    this._writableState.defaultEncoding = String(encoding).toLowerCase();
    return this;
  },
};

const writableGetters = {
  writable() {
    const s = this._writableState;
    return this._writableSide && !s.destroyed && !s.errored && !s.ending;
  },
  writableEnded() {
    return this._writableState.ending;
  },
  writableFinished() {
    return this._writableState.finished;
  },
  writableLength() {
    return this._writableState.length;
  },
  writableHighWaterMark() {
    return this._writableState.highWaterMark;
  },
  writableObjectMode() {
    return this._writableState.objectMode;
  },
  writableNeedDrain() {
    return this._writableState.needDrain;
  },
  writableCorked() {
    return this._writableState.corked;
  },
};

Object.assign(Writable.prototype, writableMethods);
getters(Writable.prototype, writableGetters);
for (const name of ["destroyed", "closed", "errored"]) {
  Object.defineProperty(Writable.prototype, name, Object.getOwnPropertyDescriptor(Readable.prototype, name));
}

function writeOne(stream, requests) {
  const state = stream._writableState;
  state.writing = true;
  let called = false;
  const onwrite = (err) => {
    if (called) {
      stream.destroy(codeError("ERR_MULTIPLE_CALLBACK", "Callback called multiple times"));
      return;
    }
    called = true;
    state.writing = false;
    for (const r of requests) state.length -= r.size;
    if (err) {
      tick(() => {
        for (const r of requests) r.cb?.(err);
      });
      stream.destroy(err);
      return;
    }
    if (state.buffer.length && !state.corked) clearBuffer(stream);
    tick(() => {
      if (state.needDrain && state.length === 0 && !state.destroyed) {
        state.needDrain = false;
        if (!state.ending) stream.emit("drain");
      }
      for (const r of requests) r.cb?.(null);
      finishMaybe(stream);
    });
  };
  try {
    if (requests.length > 1) stream._writev(requests.map(({ chunk, encoding }) => ({ chunk, encoding })), onwrite);
    else stream._write(requests[0].chunk, requests[0].encoding, onwrite);
  } catch (err) {
    onwrite(err);
  }
}

function clearBuffer(stream) {
  const state = stream._writableState;
  if (!state.buffer.length || state.destroyed) return;
  if (state.buffer.length > 1 && typeof stream._writev === "function") {
    const all = state.buffer;
    state.buffer = [];
    writeOne(stream, all);
  } else {
    writeOne(stream, [state.buffer.shift()]);
  }
}

function finishMaybe(stream) {
  const state = stream._writableState;
  if (!state.ending || state.writing || state.length > 0 || state.buffer.length || state.finished || state.destroyed || state.errored) return;
  const finish = () => {
    if (state.finished || state.destroyed) return;
    state.finished = true;
    for (const cb of state.finishCallbacks.splice(0)) cb();
    stream.emit("finish");
    maybeAutoDestroy(stream);
  };
  if (state.finalCalled) return;
  state.finalCalled = true;
  if (typeof stream._final === "function") {
    stream.emit("prefinish");
    try {
      stream._final((err) => {
        if (err) stream.destroy(err);
        else tick(finish);
      });
    } catch (err) {
      stream.destroy(err);
    }
  } else {
    stream.emit("prefinish");
    tick(finish);
  }
}

// ---- Duplex, Transform, PassThrough -----------------------------------------------------------

export function Duplex(options = {}) {
  if (!(this instanceof Duplex)) return new Duplex(options);
  Readable.call(this, options);
  initWritable(this, options);
  this.allowHalfOpen = options.allowHalfOpen !== false;
  if (options.readable === false) this._readableState.endEmitted = this._readableState.ended = true;
  if (options.writable === false) this._writableState.ending = this._writableState.finished = true;
}
Object.setPrototypeOf(Duplex.prototype, Readable.prototype);
Object.setPrototypeOf(Duplex, Readable);
for (const [name, method] of Object.entries(writableMethods)) {
  if (name !== "destroy" && name !== "_destroy") Duplex.prototype[name] = method;
}
getters(Duplex.prototype, writableGetters);

export function Transform(options = {}) {
  if (!(this instanceof Transform)) return new Transform(options);
  Duplex.call(this, options);
  if (typeof options.transform === "function") this._transform = options.transform;
  if (typeof options.flush === "function") this._flush = options.flush;
  this._pendingWrite = null;
}
Object.setPrototypeOf(Transform.prototype, Duplex.prototype);
Object.setPrototypeOf(Transform, Duplex);

Object.assign(Transform.prototype, {
  _transform() {
    throw notImplemented("_transform()");
  },
  _write(chunk, encoding, cb) {
    this._transform(chunk, encoding, (err, data) => {
      if (err) return cb(err);
      if (data !== undefined && data !== null) this.push(data);
      // Backpressure: the next chunk waits until the readable side has room.
      const r = this._readableState;
      if (r.length < r.highWaterMark || r.ended) cb();
      else this._pendingWrite = cb;
    });
  },
  _read() {
    const cb = this._pendingWrite;
    if (cb) {
      this._pendingWrite = null;
      cb();
    }
  },
  _final(cb) {
    const done = (err, data) => {
      if (err) return cb(err);
      if (data !== undefined && data !== null) this.push(data);
      this.push(null);
      cb();
    };
    if (typeof this._flush === "function") this._flush(done);
    else done();
  },
});

export function PassThrough(options) {
  if (!(this instanceof PassThrough)) return new PassThrough(options);
  Transform.call(this, options);
}
Object.setPrototypeOf(PassThrough.prototype, Transform.prototype);
Object.setPrototypeOf(PassThrough, Transform);
PassThrough.prototype._transform = function (chunk, _encoding, cb) {
  cb(null, chunk);
};

// ---- finished, pipeline, helpers --------------------------------------------------------------

const isStream = (value) => value && typeof value.on === "function" && (value._readableState || value._writableState || typeof value.pipe === "function");

export function finished(stream, options, callback) {
  if (typeof options === "function") {
    callback = options;
    options = {};
  }
  const r = stream._readableState;
  const w = stream._writableState;
  const readable = (options?.readable ?? !!r) && !!r && stream._readableSide !== false;
  const writable = (options?.writable ?? !!w) && !!w && stream._writableSide !== false;
  let readDone = !readable || r.endEmitted;
  let writeDone = !writable || w.finished;
  let called = false;
  const done = (err) => {
    if (called) return;
    called = true;
    cleanup();
    callback.call(stream, err);
  };
  const onend = () => {
    readDone = true;
    if (writeDone) done();
  };
  const onfinish = () => {
    writeDone = true;
    if (readDone) done();
  };
  const onerror = (err) => done(err);
  const onclose = () => {
    const errored = (r ?? w)?.errored;
    if (errored) done(errored);
    else if (!readDone || !writeDone) done(prematureClose());
    else done();
  };
  stream.on("end", onend);
  stream.on("finish", onfinish);
  if (options?.error !== false) stream.on("error", onerror);
  stream.on("close", onclose);
  function cleanup() {
    stream.removeListener("end", onend);
    stream.removeListener("finish", onfinish);
    stream.removeListener("error", onerror);
    stream.removeListener("close", onclose);
  }
  const errored = (r ?? w)?.errored;
  if (errored) tick(done, errored);
  else if ((r ?? w)?.closed) tick(onclose);
  else if (readDone && writeDone) tick(done);
  return cleanup;
}

export function pipeline(...args) {
  const callback = args.pop();
  if (typeof callback !== "function") {
    throw codeError("ERR_INVALID_ARG_TYPE", 'The "callback" argument must be of type function', TypeError);
  }
  const stages = args.length === 1 && Array.isArray(args[0]) ? args[0] : args;
  if (stages.length < 2) throw codeError("ERR_MISSING_ARGS", 'The "streams" argument must be specified', TypeError);
  const streams = [];
  const controller = new AbortController();
  let called = false;
  const done = (err, value) => {
    if (called) return;
    called = true;
    if (err) {
      controller.abort(err);
      for (const s of streams) if (!s.destroyed) s.destroy(err);
    }
    tick(() => callback(err ?? undefined, value));
  };
  let previous = null;
  let last = null;
  stages.forEach((stage, i) => {
    const isLast = i === stages.length - 1;
    if (typeof stage === "function") {
      const out = stage(i === 0 ? undefined : previous, { signal: controller.signal });
      if (isLast && !isStream(out)) {
        Promise.resolve(out).then(
          (value) => done(null, value),
          (err) => done(err),
        );
        return;
      }
      previous = isStream(out) ? out : Readable.from(out);
    } else if (i === 0) {
      previous = isStream(stage) ? stage : Readable.from(stage);
    } else {
      if (!isStream(previous)) previous = Readable.from(previous);
      previous.pipe(stage);
      previous = stage;
    }
    const current = previous;
    if (!streams.includes(current)) {
      streams.push(current);
      finished(current, { readable: !isLast || !current._writableState, writable: i > 0 && !!current._writableState }, (err) => {
        if (err) done(err);
        else if (current === last) done(null);
      });
    }
    last = previous;
  });
  return last;
}

export function addAbortSignal(signal, stream) {
  const abort = () => {
    const err = new Error("The operation was aborted");
    err.name = "AbortError";
    err.code = "ABORT_ERR";
    err.cause = signal.reason;
    stream.destroy(err);
  };
  if (signal.aborted) abort();
  else signal.addEventListener("abort", abort, { once: true });
  return stream;
}

// ---- web streams ------------------------------------------------------------------------------
// Node's bridges between its streams and the WHATWG ones: each side's end, error and
// backpressure reach the other.

function abortError(cause) {
  const err = new Error("The operation was aborted", cause === undefined ? undefined : { cause });
  err.name = "AbortError";
  err.code = "ABORT_ERR";
  return err;
}
// A premature close seen from the web side is an abort, as in Node.
const asWebError = (err) => (err?.code === "ERR_STREAM_PREMATURE_CLOSE" ? abortError(err) : err);

function settleable() {
  const d = {};
  d.promise = new Promise((resolve, reject) => Object.assign(d, { resolve, reject }));
  return d;
}

/** A ReadableStream of the Readable's chunks; a read pulls (resumes) it, a full queue pauses it. */
Readable.toWeb = function toWeb(readable, options = {}) {
  const objectMode = readable.readableObjectMode;
  const highWaterMark = readable.readableHighWaterMark;
  const strategy = options?.strategy ?? (objectMode ? new CountQueuingStrategy({ highWaterMark }) : new ByteLengthQueuingStrategy({ highWaterMark }));
  let controller;
  const onData = (chunk) => {
    // A copy, as Node makes: the web side owns its bytes.
    if (!objectMode && Buffer.isBuffer(chunk)) chunk = new Uint8Array(chunk);
    controller.enqueue(chunk);
    if (controller.desiredSize <= 0) readable.pause();
  };
  readable.on("data", onData);
  const cleanup = finished(readable, (err) => {
    cleanup();
    readable.removeListener("data", onData);
    if (err) controller.error(asWebError(err));
    else controller.close();
  });
  return new ReadableStream(
    {
      start(c) {
        controller = c;
      },
      pull() {
        readable.resume();
      },
      cancel(reason) {
        readable.destroy(reason);
      },
    },
    strategy,
  );
};

/** A Readable that reads the web stream (locking it); destroying it cancels the stream. */
Readable.fromWeb = function fromWeb(stream, options = {}) {
  if (!(stream instanceof ReadableStream)) {
    throw codeError("ERR_INVALID_ARG_TYPE", 'The "readableStream" argument must be an instance of ReadableStream.', TypeError);
  }
  const { highWaterMark, encoding, objectMode = false, signal } = options ?? {};
  const reader = stream.getReader();
  let closed = false;
  const readable = new Readable({
    objectMode,
    highWaterMark,
    encoding,
    signal,
    read() {
      reader.read().then(
        ({ value, done }) => readable.push(done ? null : value),
        (err) => readable.destroy(err),
      );
    },
    destroy(err, cb) {
      if (closed) return cb(err);
      reader.cancel(err ?? undefined).then(
        () => cb(err),
        () => cb(err),
      );
    },
  });
  reader.closed.then(
    () => {
      closed = true;
    },
    (err) => {
      closed = true;
      readable.destroy(err);
    },
  );
  return readable;
};

/** A WritableStream writing to the Writable; a write waits for 'drain' when the Writable is full. */
Writable.toWeb = function toWeb(writable) {
  const highWaterMark = writable.writableHighWaterMark;
  let controller;
  let drained; // what a write waits on while the Writable is over its highWaterMark
  let ending; // what close() waits on until 'finish'
  writable.on("drain", () => drained?.resolve());
  const cleanup = finished(writable, (err) => {
    cleanup();
    writable.on("error", () => {});
    if (err) {
      err = asWebError(err);
      drained?.reject(err);
      ending?.reject(err);
      controller.error(err);
    } else if (ending) {
      ending.resolve();
    } else {
      controller.error(abortError());
    }
  });
  return new WritableStream(
    {
      start(c) {
        controller = c;
      },
      write(chunk) {
        if (writable.writableNeedDrain || !writable.write(chunk)) {
          drained = settleable();
          return drained.promise.finally(() => {
            drained = undefined;
          });
        }
      },
      abort(reason) {
        writable.destroy(reason);
      },
      close() {
        if (ending || writable.writableEnded) return;
        ending = settleable();
        writable.end();
        return ending.promise;
      },
    },
    // Counted in chunks, as Node does: strings have no byteLength.
    { highWaterMark },
  );
};

/** A Writable that writes to the web stream (locking it); ending it closes the stream. */
Writable.fromWeb = function fromWeb(stream, options = {}) {
  if (!(stream instanceof WritableStream)) {
    throw codeError("ERR_INVALID_ARG_TYPE", 'The "writableStream" argument must be an instance of WritableStream.', TypeError);
  }
  const { highWaterMark, decodeStrings = true, objectMode = false, signal } = options ?? {};
  const writer = stream.getWriter();
  let closed = false;
  const writable = new Writable({
    highWaterMark,
    decodeStrings,
    objectMode,
    signal,
    write(chunk, encoding, cb) {
      writer.ready.then(() => writer.write(chunk)).then(() => cb(), cb);
    },
    final(cb) {
      if (!closed) writer.close().then(() => cb(), cb);
    },
    destroy(err, cb) {
      if (closed) return cb(err);
      (err != null ? writer.abort(err) : writer.close()).then(
        () => cb(err),
        () => cb(err),
      );
    },
  });
  writer.closed.then(
    () => {
      closed = true;
      if (!writable.writableEnded) writable.destroy(prematureClose());
    },
    (err) => {
      closed = true;
      writable.destroy(err);
    },
  );
  return writable;
};

export const isReadable = (stream) => !!stream?.readable;
export const isWritable = (stream) => !!stream?.writable;
export const isErrored = (stream) => !!stream?.errored;
export const isDisturbed = (stream) => !!stream?._readableState && (stream._readableState.flowing !== null || stream._readableState.endEmitted || stream._readableState.destroyed);

export const promises = {
  pipeline: (...stages) =>
    new Promise((resolve, reject) => {
      const options = stages.length && !isStream(stages.at(-1)) && typeof stages.at(-1) === "object" && stages.at(-1)?.signal ? stages.pop() : null;
      const last = pipeline(...stages, (err, value) => (err ? reject(err) : resolve(value)));
      if (options?.signal) addAbortSignal(options.signal, last);
    }),
  finished: (stream, options) => new Promise((resolve, reject) => finished(stream, options ?? {}, (err) => (err ? reject(err) : resolve()))),
};

Object.assign(Stream, {
  Stream,
  Readable,
  Writable,
  Duplex,
  Transform,
  PassThrough,
  pipeline,
  finished,
  addAbortSignal,
  promises,
  getDefaultHighWaterMark,
  isReadable,
  isWritable,
  isErrored,
  isDisturbed,
});

// The legacy pipe of a plain Stream (an emitter of 'data' and 'end').
Stream.prototype.pipe = function (dest, options) {
  const src = this;
  src.on("data", (chunk) => {
    if (dest.write(chunk) === false && typeof src.pause === "function") src.pause();
  });
  dest.on("drain", () => src.resume?.());
  if (options?.end !== false && typeof dest.end === "function") src.on("end", () => dest.end());
  dest.emit("pipe", src);
  return dest;
};

export default Stream;
