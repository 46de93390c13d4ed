// node:readline (and readline/promises) for pichamber: an Interface that reads lines from any
// input that emits 'data' and 'end' (fs.createReadStream, a child's stdout, process.stdin)
// with Node's line splitting (\n, \r\n, a lone \r), 'line' / 'close' events, question(),
// prompts written to `output`, and async iteration. There is no terminal: `terminal` is false
// and keypress events never fire.
import { Buffer } from "pichamber:node/buffer";
import { EventEmitter } from "pichamber:node/events";

/** How many bytes at the end of `bytes` start a UTF-8 sequence that is not complete yet. */
function incompleteTail(bytes) {
  for (let back = 1; back <= Math.min(3, bytes.length); back++) {
    const b = bytes[bytes.length - back];
    if ((b & 0xc0) === 0x80) continue; // a continuation byte: look further back
    const need = b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : b >= 0xc0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

export class Interface extends EventEmitter {
  constructor(input, output, completer, terminal) {
    super();
    const options = input && typeof input.on !== "function" && !Buffer.isBuffer(input) ? input : { input, output, completer, terminal };
    this.input = options.input;
    this.output = options.output;
    this.terminal = false;
    this.line = "";
    this.cursor = 0;
    this.closed = false;
    this._prompt = options.prompt ?? "> ";
    this._pending = ""; // text after the last line break
    this._bytes = Buffer.alloc(0); // bytes of a character split across chunks
    this._lastWasCR = false;
    this._questions = [];
    this._queue = []; // lines for async iteration
    this._waiters = [];
    this._paused = false;
    this._onData = (chunk) => this._feed(chunk);
    this._onEnd = () => {
      if (this._pending.length > 0) this._emitLine(this._pending);
      this._pending = "";
      this.close();
    };
    if (this.input) {
      this.input.on("data", this._onData);
      this.input.on("end", this._onEnd);
      this.input.on("close", this._onEnd);
      this.input.on("error", (err) => this.emit("error", err));
      this.input.resume?.();
    }
  }

  _feed(chunk) {
    if (this.closed) return;
    let text;
    if (typeof chunk === "string") text = chunk;
    else {
      const bytes = this._bytes.length ? Buffer.concat([this._bytes, Buffer.from(chunk)]) : Buffer.from(chunk);
      const keep = incompleteTail(bytes);
      this._bytes = keep ? Buffer.from(bytes.subarray(bytes.length - keep)) : Buffer.alloc(0);
      text = bytes.subarray(0, bytes.length - keep).toString("utf8");
    }
    let start = 0;
    for (let i = 0; i < text.length; i++) {
      const c = text[i];
      if (c === "\n" && this._lastWasCR) {
        // The \n of a \r\n (its \r, maybe at the end of the last chunk, ended the line).
        this._lastWasCR = false;
        start = i + 1;
        continue;
      }
      this._lastWasCR = c === "\r";
      if (c === "\n" || c === "\r") {
        this._emitLine(this._pending + text.slice(start, i));
        this._pending = "";
        start = i + 1;
      }
    }
    this._pending += text.slice(start);
  }

  _emitLine(line) {
    const question = this._questions.shift();
    if (question) {
      question(line);
      return;
    }
    this.emit("line", line);
    if (this._waiters.length) this._waiters.shift()({ value: line, done: false });
    else if (this._iterating) this._queue.push(line);
  }

  setPrompt(prompt) {
    this._prompt = String(prompt);
  }
  getPrompt() {
    return this._prompt;
  }
  prompt() {
    if (this.closed) throw closedError();
    this.output?.write?.(this._prompt);
  }
  question(query, options, callback) {
    if (typeof options === "function") callback = options;
    if (this.closed) throw closedError();
    this.output?.write?.(String(query));
    this._questions.push((answer) => callback?.(answer));
  }
  write(data) {
    if (this.closed) throw closedError();
    if (data !== undefined && data !== null) this._feed(String(data));
  }
  pause() {
    if (this._paused) return this;
    this._paused = true;
    this.input?.pause?.();
    this.emit("pause");
    return this;
  }
  resume() {
    if (!this._paused) return this;
    this._paused = false;
    this.input?.resume?.();
    this.emit("resume");
    return this;
  }
  close() {
    if (this.closed) return;
    this.closed = true;
    if (this.input) {
      this.input.removeListener?.("data", this._onData);
      this.input.removeListener?.("end", this._onEnd);
      this.input.removeListener?.("close", this._onEnd);
    }
    this.emit("close");
    for (const waiter of this._waiters.splice(0)) waiter({ value: undefined, done: true });
  }
  getCursorPos() {
    return { rows: 0, cols: this.cursor };
  }
  [Symbol.asyncIterator]() {
    this._iterating = true;
    return {
      next: () => {
        if (this._queue.length) return Promise.resolve({ value: this._queue.shift(), done: false });
        if (this.closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => this._waiters.push(resolve));
      },
      return: () => {
        this.close();
        return Promise.resolve({ value: undefined, done: true });
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }
}

function closedError() {
  const err = new Error("readline was closed");
  err.code = "ERR_USE_AFTER_CLOSE";
  return err;
}

export function createInterface(input, output, completer, terminal) {
  return new Interface(input, output, completer, terminal);
}

// Cursor control writes the ANSI sequences to the stream, as Node does.
const writeTo = (stream, data, callback) => {
  stream?.write?.(data);
  if (typeof callback === "function") queueMicrotask(callback);
  return true;
};
export function clearLine(stream, dir, callback) {
  return writeTo(stream, dir < 0 ? "\x1b[1K" : dir > 0 ? "\x1b[0K" : "\x1b[2K", callback);
}
export function clearScreenDown(stream, callback) {
  return writeTo(stream, "\x1b[0J", callback);
}
export function cursorTo(stream, x, y, callback) {
  if (typeof y === "function") [y, callback] = [undefined, y];
  return writeTo(stream, y === undefined ? `\x1b[${x + 1}G` : `\x1b[${y + 1};${x + 1}H`, callback);
}
export function moveCursor(stream, dx, dy, callback) {
  let data = "";
  if (dx < 0) data += `\x1b[${-dx}D`;
  else if (dx > 0) data += `\x1b[${dx}C`;
  if (dy < 0) data += `\x1b[${-dy}A`;
  else if (dy > 0) data += `\x1b[${dy}B`;
  return writeTo(stream, data, callback);
}
export function emitKeypressEvents() {}

/** readline/promises: question() answers with a promise. */
class PromisesInterface extends Interface {
  question(query, options) {
    return new Promise((resolve, reject) => {
      try {
        super.question(query, options, resolve);
      } catch (err) {
        reject(err);
      }
    });
  }
}
export const promises = {
  Interface: PromisesInterface,
  createInterface: (input, output, completer, terminal) => new PromisesInterface(input, output, completer, terminal),
};

export default {
  Interface, createInterface, clearLine, clearScreenDown, cursorTo, moveCursor, emitKeypressEvents, promises,
};
