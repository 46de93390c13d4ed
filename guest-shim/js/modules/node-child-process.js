// node:child_process for pichamber; the host decides whether a program may run at all.
// `spawn` runs it with live stdio (`__pichamber_internal.spawnProgram`): stdin is a Writable,
// stdout and stderr Readables fed as output arrives, signals reach the program. exec and
// execFile collect the whole output (`__pichamber_internal.exec`, which resolves to
// { stdout, stderr, code, killed } once the program has finished: 'data' fires once per
// stream). The synchronous variants block the extension (not the host) until the program
// ends, through `__pichamber_internal.execBlocking`.

import { EventEmitter } from "pichamber:node/events";
import { Buffer } from "pichamber:node/buffer";
import { Readable, Writable } from "pichamber:node/stream";

const customPromisify = Symbol.for("nodejs.util.promisify.custom");
let nextPid = 1000;

function runHost(command, args, options, signal) {
  const internal = globalThis.__pichamber_internal;
  if (!internal || typeof internal.exec !== "function") {
    return Promise.reject(new Error("child processes are not available inside this pichamber extension"));
  }
  // The host runs the program with the extension's environment; options.env is not forwarded.
  const opts = {
    cwd: options.cwd === undefined ? undefined : String(options.cwd),
    timeout: options.timeout || undefined,
    signal,
  };
  try {
    return Promise.resolve(internal.exec(command, args, opts));
  } catch (err) {
    return Promise.reject(err);
  }
}

function makeController() {
  return typeof AbortController === "function" ? new AbortController() : null;
}

function normalizeExecFileArgs(file, args, options, callback) {
  if (typeof args === "function") {
    callback = args;
    args = [];
    options = {};
  } else if (args != null && !Array.isArray(args)) {
    callback = options;
    options = args;
    args = [];
  }
  if (typeof options === "function") {
    callback = options;
    options = {};
  }
  return { file: String(file), args: (args ?? []).map(String), options: { ...(options ?? {}) }, callback };
}

function decode(text, encoding) {
  if (encoding === "buffer" || encoding === null) return Buffer.from(text ?? "", "utf8");
  if (!encoding || encoding === "utf8" || encoding === "utf-8") return text ?? "";
  return Buffer.from(text ?? "", "utf8").toString(encoding);
}

function shellFor(options) {
  return typeof options.shell === "string" ? options.shell : "sh";
}

class Pipe extends EventEmitter {
  constructor(readable) {
    super();
    this.readable = readable;
    this.writable = !readable;
    this.destroyed = false;
    this._encoding = null;
  }

  setEncoding(encoding) {
    this._encoding = encoding;
    return this;
  }

  _push(text) {
    if (text === undefined || text === null || text === "") return;
    const buf = Buffer.from(text, "utf8");
    this.emit("data", this._encoding ? buf.toString(this._encoding) : buf);
  }

  _finish() {
    this.readable = false;
    this.emit("end");
    this.emit("close");
  }

  pipe(dest) {
    this.on("data", (chunk) => dest.write(chunk));
    return dest;
  }

  resume() {
    return this;
  }

  pause() {
    return this;
  }

  write() {
    throw new Error("writing to a child process's stdin is not supported in pichamber");
  }

  end() {
    this.writable = false;
    return this;
  }

  destroy() {
    this.destroyed = true;
    return this;
  }

  unref() {
    return this;
  }

  ref() {
    return this;
  }
}

export class ChildProcess extends EventEmitter {
  constructor() {
    super();
    this.pid = nextPid++;
    this.exitCode = null;
    this.signalCode = null;
    this.killed = false;
    this.connected = false;
    this.spawnfile = "";
    this.spawnargs = [];
    this.stdin = new Pipe(false);
    this.stdout = new Pipe(true);
    this.stderr = new Pipe(true);
    this.stdio = [this.stdin, this.stdout, this.stderr];
    this._controller = null;
  }

  kill(signal = "SIGTERM") {
    if (this.exitCode !== null || this.signalCode !== null) return false;
    if (!this._controller) return false;
    this.killed = true;
    this._killSignal = typeof signal === "number" ? "SIGTERM" : signal;
    this._controller.abort();
    return true;
  }

  ref() {}

  unref() {}

  disconnect() {}

  send() {
    throw new Error("IPC is not supported in pichamber");
  }
}

// Starts a program; settles with { stdout, stderr, code, signal, killed } or rejects.
function start(child, command, args, options) {
  child.spawnfile = command;
  child.spawnargs = [command, ...args];
  const controller = makeController();
  child._controller = controller;
  const external = options.signal;
  if (external) {
    if (external.aborted) controller?.abort();
    else external.addEventListener?.("abort", () => child.kill(options.killSignal), { once: true });
  }
  return runHost(command, args, options, controller?.signal).then((result) => {
    const killed = !!result?.killed || child.killed;
    const signal = killed ? (child._killSignal ?? options.killSignal ?? "SIGTERM") : null;
    const code = killed ? null : typeof result?.code === "number" ? result.code : 1;
    child.killed = killed;
    return { stdout: result?.stdout ?? "", stderr: result?.stderr ?? "", code, signal, killed };
  });
}

function abortError(signal) {
  const err = new Error("The operation was aborted");
  err.name = "AbortError";
  err.code = "ABORT_ERR";
  if (signal?.reason !== undefined) err.cause = signal.reason;
  return err;
}

// The program ended: record its status and deliver its whole output on the streams.
function settleOutput(child, r) {
  child.exitCode = r.code;
  child.signalCode = r.signal;
  child.stdout._push(r.stdout);
  child.stderr._push(r.stderr);
  child.stdout._finish();
  child.stderr._finish();
}

function runWithCallback(command, args, options, callback, displayCmd) {
  const child = new ChildProcess();
  const encoding = options.encoding === undefined ? "utf8" : options.encoding;
  queueMicrotask(() => child.emit("spawn"));
  start(child, command, args, options).then(
    (r) => {
      const stdout = decode(r.stdout, encoding);
      const stderr = decode(r.stderr, encoding);
      settleOutput(child, r);
      child.emit("exit", r.code, r.signal);
      child.emit("close", r.code, r.signal);
      if (!callback) return;
      if (r.code === 0 && !r.killed) {
        callback(null, stdout, stderr);
        return;
      }
      let err;
      if (r.killed && options.signal?.aborted) err = abortError(options.signal);
      else {
        err = new Error(`Command failed: ${displayCmd}\n${typeof stderr === "string" ? stderr : stderr.toString()}`);
      }
      err.code = r.code;
      err.killed = r.killed;
      err.signal = r.signal;
      err.cmd = displayCmd;
      err.stdout = stdout;
      err.stderr = stderr;
      callback(err, stdout, stderr);
    },
    (error) => {
      const err = error instanceof Error ? error : new Error(String(error));
      if (err.path === undefined) err.path = command;
      if (err.spawnargs === undefined) err.spawnargs = args;
      if (err.cmd === undefined) err.cmd = displayCmd;
      child.stdout._finish();
      child.stderr._finish();
      if (child.listenerCount("error") > 0) child.emit("error", err);
      child.emit("close", typeof err.errno === "number" ? err.errno : -2, null);
      callback?.(err, decode("", encoding), decode("", encoding));
    },
  );
  return child;
}

export function execFile(file, args, options, callback) {
  const n = normalizeExecFileArgs(file, args, options, callback);
  let command = n.file;
  let argv = n.args;
  let display = [n.file, ...n.args].join(" ");
  if (n.options.shell) {
    const line = [n.file, ...n.args].join(" ");
    command = shellFor(n.options);
    argv = ["-c", line];
    display = line;
  }
  return runWithCallback(command, argv, n.options, n.callback, display);
}

export function exec(command, options, callback) {
  if (typeof options === "function") {
    callback = options;
    options = {};
  }
  const opts = { ...(options ?? {}) };
  return runWithCallback(shellFor(opts), ["-c", String(command)], opts, callback, String(command));
}

function promisifyCustom(fn) {
  return (...args) => {
    let child;
    const promise = new Promise((resolve, reject) => {
      child = fn(...args, (err, stdout, stderr) => {
        if (err) {
          err.stdout = stdout;
          err.stderr = stderr;
          reject(err);
        } else resolve({ stdout, stderr });
      });
    });
    promise.child = child;
    return promise;
  };
}

Object.defineProperty(exec, customPromisify, { value: promisifyCustom(exec), enumerable: false });
Object.defineProperty(execFile, customPromisify, { value: promisifyCustom(execFile), enumerable: false });

export function spawn(command, args, options) {
  if (args != null && !Array.isArray(args)) {
    options = args;
    args = [];
  }
  const opts = { ...(options ?? {}) };
  let cmd = String(command);
  let argv = (args ?? []).map(String);
  if (opts.shell) {
    const line = [cmd, ...argv].join(" ");
    cmd = shellFor(opts);
    argv = ["-c", line];
  }
  if (typeof globalThis.__pichamber_internal?.spawnProgram === "function") return spawnLive(cmd, argv, opts);
  const child = new ChildProcess();
  queueMicrotask(() => child.emit("spawn"));
  start(child, cmd, argv, opts).then(
    (r) => {
      settleOutput(child, r);
      if (r.killed && opts.signal?.aborted && child.listenerCount("error") > 0)
        child.emit("error", abortError(opts.signal));
      child.emit("exit", r.code, r.signal);
      child.emit("close", r.code, r.signal);
    },
    (error) => {
      const err = error instanceof Error ? error : new Error(String(error));
      if (err.path === undefined) err.path = cmd;
      if (err.spawnargs === undefined) err.spawnargs = argv;
      child.stdout._finish();
      child.stderr._finish();
      child.emit("error", err);
      child.emit("close", typeof err.errno === "number" ? err.errno : -2, null);
    },
  );
  return child;
}

// Node's `stdio` option as three entries: "pipe", or null for a stream the child does not
// share with the extension ("ignore", "inherit": the host's terminal is not the extension's).
function stdioModes(stdio) {
  const list = typeof stdio === "string" ? [stdio, stdio, stdio] : Array.isArray(stdio) ? stdio : [];
  return [0, 1, 2].map((i) => {
    const mode = list[i] ?? "pipe";
    return mode === "pipe" || mode === "overlapped" ? "pipe" : null;
  });
}

// How long a write waits before it is offered again when the host's queue for the program's
// stdin is full (the program is not reading): Writable's own buffer holds the rest meanwhile.
const STDIN_RETRY_MS = 5;

function spawnLive(cmd, argv, opts) {
  const child = new ChildProcess();
  child.spawnfile = cmd;
  child.spawnargs = [cmd, ...argv];
  const [inMode, outMode, errMode] = stdioModes(opts.stdio);
  let program = null;
  let exited = false;

  const feed = (bytes, callback) => {
    if (exited) return callback(codeError("EPIPE", "write EPIPE"));
    try {
      program.write(bytes);
      callback();
    } catch (err) {
      if (/not read yet/.test(err?.message)) setTimeout(() => feed(bytes, callback), STDIN_RETRY_MS);
      else callback(codeError("EPIPE", err?.message ?? "write EPIPE"));
    }
  };
  const stdin = new Writable({
    decodeStrings: true,
    write(chunk, encoding, callback) {
      const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk, encoding);
      feed(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength), callback);
    },
    final(callback) {
      if (!exited) program?.closeStdin();
      callback();
    },
    destroy(err, callback) {
      if (!exited) program?.closeStdin();
      callback(err);
    },
  });
  const reader = () => new Readable({ read() {} });
  const stdout = reader();
  const stderr = reader();
  child.stdin = inMode ? stdin : null;
  child.stdout = outMode ? stdout : null;
  child.stderr = errMode ? stderr : null;
  child.stdio = [child.stdin, child.stdout, child.stderr];

  // 'close' comes once the program exited and its piped streams are done, as in Node.
  let openStreams = 1 + (outMode ? 1 : 0) + (errMode ? 1 : 0);
  const streamDone = () => {
    if (--openStreams === 0) child.emit("close", child.exitCode, child.signalCode);
  };
  for (const stream of [child.stdout, child.stderr]) stream?.once("close", streamDone);

  const onOutput = (kind, data) => {
    if (kind === "stdout" && outMode) stdout.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    else if (kind === "stderr" && errMode) stderr.push(Buffer.from(data.buffer, data.byteOffset, data.byteLength));
    else if (kind === "exit") {
      exited = true;
      child.exitCode = data.code ?? null;
      child.signalCode = data.signal ?? null;
      child.emit("exit", child.exitCode, child.signalCode);
      if (!stdin.destroyed) stdin.destroy();
    } else if (kind === "closed") {
      for (const stream of [child.stdout, child.stderr]) {
        if (!stream) continue;
        stream.push(null);
        // Node flushes what nobody reads, so 'close' does not wait for a reader.
        if (!stream._readableState.readableListening) stream.resume();
      }
      streamDone();
    }
  };

  try {
    program = globalThis.__pichamber_internal.spawnProgram(cmd, argv, { cwd: opts.cwd, env: opts.env }, onOutput);
  } catch (error) {
    const err = error instanceof Error ? error : new Error(String(error));
    err.code ??= /denied|refused/.test(err.message) ? "EACCES" : "ENOENT";
    err.errno ??= err.code === "EACCES" ? -13 : -2;
    err.syscall ??= `spawn ${cmd}`;
    err.path ??= cmd;
    err.spawnargs ??= argv;
    exited = true;
    child.pid = undefined;
    queueMicrotask(() => {
      child.emit("error", err);
      child.emit("close", err.errno, null);
      for (const stream of [child.stdin, child.stdout, child.stderr]) stream?.destroy();
    });
    return child;
  }
  child._program = program;
  child.kill = (signal = "SIGTERM") => {
    if (exited) return false;
    const name = typeof signal === "number" ? signalName(signal) : String(signal);
    const sent = program.kill(name);
    if (sent) child.killed = true;
    return sent;
  };
  const external = opts.signal;
  if (external) {
    const onAbort = () => {
      if (child.kill(opts.killSignal ?? "SIGTERM")) child.emit("error", abortError(external));
    };
    if (external.aborted) queueMicrotask(onAbort);
    else external.addEventListener?.("abort", onAbort, { once: true });
  }
  if (opts.timeout > 0) {
    const timer = setTimeout(() => child.kill(opts.killSignal ?? "SIGTERM"), opts.timeout);
    child.once("exit", () => clearTimeout(timer));
  }
  queueMicrotask(() => child.emit("spawn"));
  return child;
}

const SIGNALS = { 1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 9: "SIGKILL", 10: "SIGUSR1", 12: "SIGUSR2", 15: "SIGTERM" };
const signalName = (number) => SIGNALS[number] ?? `SIG${number}`;

function codeError(code, message) {
  const err = new Error(message);
  err.code = code;
  return err;
}

export function fork() {
  throw new Error("child_process.fork is not supported in pichamber");
}

// ---- synchronous variants ------------------------------------------------------------------

// Runs a program to its end; Node's spawnSync result ({ pid, output, stdout, stderr, status,
// signal, error? }), with output decoded per options.encoding.
function runBlocking(command, args, options) {
  const encoding = options.encoding === undefined || options.encoding === "buffer" ? null : options.encoding;
  const pid = nextPid++;
  if (options.input !== undefined && options.input !== null && options.input !== "") {
    const error = new Error("writing to a child process's stdin (options.input) is not supported in pichamber");
    error.code = "ENOTSUP";
    return { pid, output: null, stdout: null, stderr: null, status: null, signal: null, error };
  }
  const internal = globalThis.__pichamber_internal;
  let result;
  try {
    if (!internal || typeof internal.execBlocking !== "function") {
      throw new Error("child processes are not available inside this pichamber extension");
    }
    result = internal.execBlocking(command, args, {
      cwd: options.cwd === undefined ? undefined : String(options.cwd),
      timeout: options.timeout || undefined,
    });
  } catch (err) {
    const error = err instanceof Error ? err : new Error(String(err));
    if (error.path === undefined) error.path = command;
    if (error.spawnargs === undefined) error.spawnargs = args;
    return { pid, output: null, stdout: null, stderr: null, status: null, signal: null, error };
  }
  const stdout = decode(result.stdout, encoding);
  const stderr = decode(result.stderr, encoding);
  const signal = result.killed ? (options.killSignal ?? "SIGTERM") : null;
  const status = result.killed ? null : result.code;
  return { pid, output: [null, stdout, stderr], stdout, stderr, status, signal };
}

// execSync / execFileSync: the output, or Node's "Command failed" error carrying the result.
function outputOrThrow(result, display) {
  if (result.error) throw result.error;
  if (result.status !== 0) {
    const stderr = result.stderr?.toString() ?? "";
    const err = new Error(`Command failed: ${display}${stderr ? `\n${stderr}` : ""}`);
    Object.assign(err, result);
    throw err;
  }
  return result.stdout;
}

export function execSync(command, options) {
  const opts = { ...(options ?? {}) };
  return outputOrThrow(runBlocking(shellFor(opts), ["-c", String(command)], opts), String(command));
}

export function execFileSync(file, args, options) {
  const n = normalizeExecFileArgs(file, args, options);
  const line = [n.file, ...n.args].join(" ");
  const result = n.options.shell
    ? runBlocking(shellFor(n.options), ["-c", line], n.options)
    : runBlocking(n.file, n.args, n.options);
  return outputOrThrow(result, line);
}

export function spawnSync(command, args, options) {
  if (args != null && !Array.isArray(args)) [options, args] = [args, []];
  const opts = { ...(options ?? {}) };
  const argv = (args ?? []).map(String);
  if (opts.shell) return runBlocking(shellFor(opts), ["-c", [String(command), ...argv].join(" ")], opts);
  return runBlocking(String(command), argv, opts);
}

export default {
  ChildProcess,
  exec,
  execFile,
  spawn,
  fork,
  execSync,
  execFileSync,
  spawnSync,
};
