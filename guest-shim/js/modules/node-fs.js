// node:fs for pichamber, over the host primitives `__host("fs.<op>", args)`. The host sees
// only the trees it preopened for the extension; everything else fails like Node would
// (ENOENT/EACCES...). Paths are resolved against process.cwd() before they reach the host.
// File descriptors are emulated in-guest (open/read/write/close over whole-file primitives).

import { Buffer } from "pichamber:node/buffer";
import { resolve as resolvePath, dirname, join as joinPath } from "pichamber:node/path";
import { EventEmitter } from "pichamber:node/events";
import { fileURLToPath } from "pichamber:node/url";

export const constants = Object.freeze({
  UV_FS_SYMLINK_DIR: 1,
  UV_FS_SYMLINK_JUNCTION: 2,
  O_RDONLY: 0,
  O_WRONLY: 1,
  O_RDWR: 2,
  UV_DIRENT_UNKNOWN: 0,
  UV_DIRENT_FILE: 1,
  UV_DIRENT_DIR: 2,
  UV_DIRENT_LINK: 3,
  UV_DIRENT_FIFO: 4,
  UV_DIRENT_SOCKET: 5,
  UV_DIRENT_CHAR: 6,
  UV_DIRENT_BLOCK: 7,
  S_IFMT: 61440,
  S_IFREG: 32768,
  S_IFDIR: 16384,
  S_IFCHR: 8192,
  S_IFBLK: 24576,
  S_IFIFO: 4096,
  S_IFLNK: 40960,
  S_IFSOCK: 49152,
  O_CREAT: 64,
  O_EXCL: 128,
  UV_FS_O_FILEMAP: 0,
  O_NOCTTY: 256,
  O_TRUNC: 512,
  O_APPEND: 1024,
  O_DIRECTORY: 65536,
  O_NOATIME: 262144,
  O_NOFOLLOW: 131072,
  O_SYNC: 1052672,
  O_DSYNC: 4096,
  O_DIRECT: 16384,
  O_NONBLOCK: 2048,
  S_IRWXU: 448,
  S_IRUSR: 256,
  S_IWUSR: 128,
  S_IXUSR: 64,
  S_IRWXG: 56,
  S_IRGRP: 32,
  S_IWGRP: 16,
  S_IXGRP: 8,
  S_IRWXO: 7,
  S_IROTH: 4,
  S_IWOTH: 2,
  S_IXOTH: 1,
  F_OK: 0,
  R_OK: 4,
  W_OK: 2,
  X_OK: 1,
  UV_FS_COPYFILE_EXCL: 1,
  COPYFILE_EXCL: 1,
  UV_FS_COPYFILE_FICLONE: 2,
  COPYFILE_FICLONE: 2,
  UV_FS_COPYFILE_FICLONE_FORCE: 4,
  COPYFILE_FICLONE_FORCE: 4,
});
export const F_OK = 0;
export const R_OK = 4;
export const W_OK = 2;
export const X_OK = 1;

const ERRNO = {
  ENOENT: -2,
  EIO: -5,
  EBADF: -9,
  EACCES: -13,
  EEXIST: -17,
  EXDEV: -18,
  ENOTDIR: -20,
  EISDIR: -21,
  EINVAL: -22,
  EMFILE: -24,
  EROFS: -30,
  ENOSYS: -38,
  ENOTEMPTY: -39,
  EPERM: -1,
};

// ---- plumbing ----------------------------------------------------------------------------

function fsError(code, text, syscall, path, dest) {
  let message = `${code}: ${text}, ${syscall}`;
  if (path !== undefined) message += ` '${path}'`;
  if (dest !== undefined) message += ` -> '${dest}'`;
  const err = new Error(message);
  err.errno = ERRNO[code] ?? -5;
  err.code = code;
  err.syscall = syscall;
  if (path !== undefined) err.path = path;
  if (dest !== undefined) err.dest = dest;
  return err;
}

// Turns a host error ("ENOENT: no such file or directory, open '/abs' (os detail)") into a
// Node-shaped error reporting the path as the caller gave it.
function convertHostError(e, syscallOverride, shownPath, hostPath, dest) {
  const msg = String(e?.message ?? e);
  // An optional " — hint" (a missing capability and the flag that grants it) is kept.
  const [detail, hint] = msg.split(" — ", 2);
  const m = /^([A-Z][A-Z0-9_]*): ([^,]*), (\w+)(?: '([\s\S]*?)')?(?: \([\s\S]*\))?$/.exec(detail);
  if (!m) {
    const err = new Error(msg);
    err.code = /^([A-Z][A-Z0-9_]+):/.exec(msg)?.[1] ?? "EIO";
    err.errno = ERRNO[err.code] ?? -5;
    return err;
  }
  const [, code, text, syscall, reportedPath] = m;
  let path = reportedPath;
  if (shownPath !== undefined && (reportedPath === undefined || reportedPath === hostPath)) path = shownPath;
  const err = fsError(code, text, syscallOverride ?? syscall, path, dest);
  if (hint) err.message += ` — ${hint}`;
  return err;
}

function hostCall(op, args, syscall, shownPath, dest) {
  const host = globalThis.__host;
  if (typeof host !== "function") throw fsError("ENOSYS", "function not implemented", syscall ?? op, shownPath);
  let text;
  try {
    text = host(`fs.${op}`, args);
  } catch (e) {
    throw convertHostError(e, syscall, shownPath, args[0], dest);
  }
  return text === undefined || text === "" ? undefined : JSON.parse(text);
}

function invalidArgType(name, expected, value) {
  const err = new TypeError(`The "${name}" argument must be ${expected}. Received ${describe(value)}`);
  err.code = "ERR_INVALID_ARG_TYPE";
  return err;
}

function describe(value) {
  if (value == null) return String(value);
  if (typeof value === "function") return `function ${value.name}`;
  if (typeof value === "object")
    return value.constructor?.name ? `an instance of ${value.constructor.name}` : "an object";
  return `type ${typeof value} (${typeof value === "string" ? `'${value}'` : String(value)})`;
}

// Returns [shown, absolute]: the path as the caller spelled it, and the one the host receives.
function toPath(path, name = "path") {
  let p = path;
  if (p instanceof Uint8Array) p = Buffer.from(p.buffer, p.byteOffset, p.byteLength).toString("utf8");
  else if (p && typeof p === "object" && typeof p.href === "string" && p.protocol === "file:") p = fileURLToPath(p);
  if (typeof p !== "string") throw invalidArgType(name, "of type string or an instance of Buffer or URL", path);
  if (p.includes("\u0000")) {
    const err = new TypeError(
      `The argument '${name}' must be a string, Uint8Array, or URL without null bytes. Received ${JSON.stringify(p)}`,
    );
    err.code = "ERR_INVALID_ARG_VALUE";
    throw err;
  }
  return [p, resolvePath(p)];
}

function getOptions(options, defaults = {}) {
  if (options == null || typeof options === "function") return { ...defaults };
  if (typeof options === "string") return { ...defaults, encoding: options };
  if (typeof options !== "object") throw invalidArgType("options", "one of type string or object", options);
  return { ...defaults, ...options };
}

function normEncoding(enc) {
  if (enc == null || enc === "buffer") return null;
  const e = String(enc).toLowerCase();
  if (!Buffer.isEncoding(e)) {
    const err = new TypeError(`The argument 'encoding' is invalid encoding. Received '${enc}'`);
    err.code = "ERR_INVALID_ARG_VALUE";
    throw err;
  }
  return e;
}

function toByteArray(data, encoding) {
  if (typeof data === "string") {
    const enc = normEncoding(encoding) ?? "utf8";
    if (enc === "utf8" || enc === "utf-8") return data;
    return Array.from(Buffer.from(data, enc));
  }
  if (ArrayBuffer.isView(data)) return Array.from(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  if (data instanceof ArrayBuffer) return Array.from(new Uint8Array(data));
  throw invalidArgType("data", "of type string or an instance of Buffer, TypedArray, or DataView", data);
}

function readBytes(abs, shown, syscall = "open") {
  const arr = hostCall("readFile", [abs, "bytes"], syscall, shown);
  return Buffer.from(arr);
}

// ---- Stats / Dirent ----------------------------------------------------------------------

// What Stats and Dirent share: the kind of the entry, and Node's is*() predicates over it.
function setKind(target, raw) {
  Object.defineProperty(target, "_kind", {
    value: raw.isSymbolicLink ? "link" : raw.isDirectory ? "dir" : raw.isFile ? "file" : "other",
    enumerable: false,
  });
}

class EntryKind {
  isFile() {
    return this._kind === "file";
  }

  isDirectory() {
    return this._kind === "dir";
  }

  isSymbolicLink() {
    return this._kind === "link";
  }

  isBlockDevice() {
    return false;
  }

  isCharacterDevice() {
    return false;
  }

  isFIFO() {
    return false;
  }

  isSocket() {
    return false;
  }
}

export class Stats extends EntryKind {
  constructor(raw) {
    super();
    const mode = raw.isSymbolicLink ? 0o120777 : (raw.mode ?? (raw.isDirectory ? 0o40755 : 0o100644));
    this.dev = 0;
    this.mode = mode;
    this.nlink = 1;
    this.uid = 1000;
    this.gid = 1000;
    this.rdev = 0;
    this.blksize = 4096;
    this.ino = 0;
    this.size = raw.size ?? 0;
    this.blocks = Math.ceil(this.size / 512);
    this.atimeMs = raw.atimeMs ?? 0;
    this.mtimeMs = raw.mtimeMs ?? 0;
    this.ctimeMs = raw.mtimeMs ?? 0;
    this.birthtimeMs = raw.birthtimeMs ?? 0;
    this.atime = new Date(this.atimeMs);
    this.mtime = new Date(this.mtimeMs);
    this.ctime = new Date(this.ctimeMs);
    this.birthtime = new Date(this.birthtimeMs);
    setKind(this, raw);
  }

}

export class Dirent extends EntryKind {
  constructor(name, parentPath, raw) {
    super();
    this.name = name;
    this.parentPath = parentPath;
    this.path = parentPath;
    setKind(this, raw);
  }

}

// ---- synchronous API ---------------------------------------------------------------------

export function existsSync(path) {
  try {
    const [, abs] = toPath(path);
    return hostCall("exists", [abs], "access") === true;
  } catch {
    return false;
  }
}

export function readFileSync(path, options) {
  if (typeof path === "number") return fdRead(path, options);
  const opts = getOptions(options, { flag: "r" });
  const [shown, abs] = toPath(path);
  const enc = normEncoding(opts.encoding);
  if (enc === "utf8" || enc === "utf-8") {
    return hostCall("readFile", [abs, "utf8"], "open", shown);
  }
  const buf = readBytes(abs, shown);
  return enc ? buf.toString(enc) : buf;
}

export function writeFileSync(path, data, options) {
  if (typeof path === "number") return fdWrite(path, data, options);
  const opts = getOptions(options, { encoding: "utf8", flag: "w" });
  const [shown, abs] = toPath(path);
  const append = String(opts.flag).startsWith("a");
  if (String(opts.flag).includes("x") && existsSync(abs)) throw fsError("EEXIST", "file already exists", "open", shown);
  hostCall("writeFile", [abs, toByteArray(data, opts.encoding), append], "open", shown);
}

export function appendFileSync(path, data, options) {
  const opts = getOptions(options, { encoding: "utf8", flag: "a" });
  if (typeof path === "number") return fdWrite(path, data, opts);
  const [shown, abs] = toPath(path);
  hostCall("writeFile", [abs, toByteArray(data, opts.encoding), true], "open", shown);
}

export function statSync(path, options) {
  if (typeof path === "number") return fstatSync(path, options);
  const [shown, abs] = toPath(path);
  try {
    return new Stats(hostCall("stat", [abs, true], "stat", shown));
  } catch (err) {
    if (options?.throwIfNoEntry === false && err.code === "ENOENT") return undefined;
    throw err;
  }
}

export function lstatSync(path, options) {
  const [shown, abs] = toPath(path);
  try {
    return new Stats(hostCall("stat", [abs, false], "lstat", shown));
  } catch (err) {
    if (options?.throwIfNoEntry === false && err.code === "ENOENT") return undefined;
    throw err;
  }
}

export function readdirSync(path, options) {
  const opts = getOptions(options, { encoding: "utf8" });
  const [shown, abs] = toPath(path);
  const out = [];
  const walk = (dirAbs, dirShown, rel) => {
    const entries = hostCall("readdir", [dirAbs], "scandir", dirShown);
    for (const e of entries) {
      const name = rel ? `${rel}/${e.name}` : e.name;
      if (opts.withFileTypes) out.push(new Dirent(e.name, rel ? joinPath(shown, rel) : shown, e));
      else out.push(name);
      if (opts.recursive && e.isDirectory) walk(joinPath(dirAbs, e.name), joinPath(dirShown, e.name), name);
    }
  };
  walk(abs, shown, "");
  if (!opts.withFileTypes && opts.encoding === "buffer") return out.map((n) => Buffer.from(n));
  return out;
}

export function mkdirSync(path, options) {
  const opts = typeof options === "number" || typeof options === "string" ? { mode: options } : getOptions(options);
  const [shown, abs] = toPath(path);
  if (opts.recursive) {
    let first;
    let cur = abs;
    while (!existsSync(cur)) {
      first = cur;
      const parent = dirname(cur);
      if (parent === cur) break;
      cur = parent;
    }
    hostCall("mkdir", [abs, true], "mkdir", shown);
    return first;
  }
  hostCall("mkdir", [abs, false], "mkdir", shown);
  return undefined;
}

export function mkdtempSync(prefix, options) {
  const opts = getOptions(options);
  if (typeof prefix !== "string") throw invalidArgType("prefix", "of type string", prefix);
  const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  for (let attempt = 0; attempt < 100; attempt++) {
    let suffix = "";
    const bytes = randomBytes(6);
    for (let i = 0; i < 6; i++) suffix += chars[bytes[i] % chars.length];
    const candidate = prefix + suffix;
    const [, abs] = toPath(candidate);
    if (existsSync(abs)) continue;
    hostCall("mkdir", [abs, false], "mkdtemp", `${prefix}XXXXXX`);
    return opts.encoding === "buffer" ? Buffer.from(candidate) : candidate;
  }
  throw fsError("EEXIST", "file already exists", "mkdtemp", `${prefix}XXXXXX`);
}

function randomBytes(n) {
  try {
    return JSON.parse(globalThis.__host("randomBytes", [n]));
  } catch {
    return Array.from({ length: n }, () => Math.floor(Math.random() * 256));
  }
}

export function rmSync(path, options) {
  const opts = getOptions(options);
  const [shown, abs] = toPath(path);
  if (!opts.recursive) {
    let st;
    try {
      st = hostCall("stat", [abs, false], "rm", shown);
    } catch (err) {
      if (opts.force && err.code === "ENOENT") return;
      if (err.code === "ENOENT") throw fsError("ENOENT", "no such file or directory", "lstat", shown);
      throw err;
    }
    if (st.isDirectory) {
      const err = new Error(`Path is a directory: rm returned EISDIR (is a directory) ${shown}`);
      err.code = "ERR_FS_EISDIR";
      err.errno = 21;
      err.syscall = "rm";
      err.path = shown;
      throw err;
    }
  }
  try {
    hostCall("rm", [abs, !!opts.recursive, !!opts.force], "rm", shown);
  } catch (err) {
    if (err.code === "ENOENT" && !opts.force) throw fsError("ENOENT", "no such file or directory", "lstat", shown);
    throw err;
  }
}

export function rmdirSync(path, options) {
  const opts = getOptions(options);
  const [shown, abs] = toPath(path);
  if (opts.recursive) return hostCall("rm", [abs, true, false], "rmdir", shown);
  hostCall("rmdir", [abs], "rmdir", shown);
}

export function unlinkSync(path) {
  const [shown, abs] = toPath(path);
  hostCall("unlink", [abs], "unlink", shown);
}

export function renameSync(oldPath, newPath) {
  const [shownFrom, from] = toPath(oldPath, "oldPath");
  const [shownTo, to] = toPath(newPath, "newPath");
  hostCall("rename", [from, to], "rename", shownFrom, shownTo);
}

export function copyFileSync(src, dest, mode = 0) {
  const [shownSrc, from] = toPath(src, "src");
  const [shownDest, to] = toPath(dest, "dest");
  if (mode & constants.COPYFILE_EXCL && existsSync(to))
    throw fsError("EEXIST", "file already exists", "copyfile", shownSrc, shownDest);
  hostCall("copyFile", [from, to], "copyfile", shownSrc, shownDest);
}

export function cpSync(src, dest, options) {
  const opts = getOptions(options);
  const [shownSrc, from] = toPath(src, "src");
  const [, to] = toPath(dest, "dest");
  const st = hostCall("stat", [from, !opts.verbatimSymlinks], "cp", shownSrc);
  if (st.isDirectory) {
    if (!opts.recursive) {
      const err = new Error(`Recursive option is required to copy a directory: ${shownSrc}`);
      err.code = "ERR_FS_EISDIR";
      throw err;
    }
    hostCall("mkdir", [to, true], "mkdir", to);
    for (const e of hostCall("readdir", [from], "scandir", from)) {
      const s = joinPath(from, e.name);
      if (typeof opts.filter === "function" && !opts.filter(s, joinPath(to, e.name))) continue;
      cpSync(s, joinPath(to, e.name), opts);
    }
    return;
  }
  if (opts.errorOnExist && opts.force === false && existsSync(to))
    throw fsError("EEXIST", "file already exists", "cp", to);
  if (opts.force === false && existsSync(to)) return;
  hostCall("copyFile", [from, to], "copyfile", shownSrc, to);
}

export function realpathSync(path, options) {
  const opts = getOptions(options);
  const [shown, abs] = toPath(path);
  const real = hostCall("realpath", [abs], "realpath", shown);
  return opts.encoding === "buffer" ? Buffer.from(real) : real;
}
realpathSync.native = realpathSync;

export function accessSync(path, mode = constants.F_OK) {
  const [shown, abs] = toPath(path);
  let st;
  try {
    st = hostCall("stat", [abs, true], "access", shown);
  } catch (err) {
    throw err;
  }
  if (mode & constants.W_OK && (st.mode & 0o222) === 0) throw fsError("EACCES", "permission denied", "access", shown);
}

export function truncateSync(path, len = 0) {
  if (typeof path === "number") return ftruncateSync(path, len);
  const [shown, abs] = toPath(path);
  const buf = readBytes(abs, shown);
  const out = Buffer.alloc(len);
  buf.copy(out, 0, 0, Math.min(len, buf.length));
  hostCall("writeFile", [abs, Array.from(out), false], "open", shown);
}

export function readlinkSync(path, options) {
  const opts = getOptions(options);
  const [shown, abs] = toPath(path);
  const target = hostCall("readlink", [abs], "readlink", shown);
  return opts.encoding === "buffer" ? Buffer.from(target) : target;
}

export function symlinkSync(target, path) {
  const [shown] = toPath(path);
  throw fsError("ENOSYS", "function not implemented", "symlink", shown);
}

export function linkSync(existingPath, newPath) {
  const [shown] = toPath(existingPath);
  throw fsError("ENOSYS", "function not implemented", "link", shown, String(newPath));
}

// Permissions and times cannot be changed through the host; these check existence only.
export function chmodSync(path, _mode) {
  const [shown, abs] = toPath(path);
  hostCall("stat", [abs, true], "chmod", shown);
}
export const lchmodSync = chmodSync;
export function chownSync(path, _uid, _gid) {
  const [shown, abs] = toPath(path);
  hostCall("stat", [abs, true], "chown", shown);
}
export const lchownSync = chownSync;
export function utimesSync(path, _atime, _mtime) {
  const [shown, abs] = toPath(path);
  hostCall("stat", [abs, true], "utime", shown);
}
export const lutimesSync = utimesSync;

// ---- emulated file descriptors -----------------------------------------------------------

const fds = new Map();
let nextFd = 10;

function parseFlags(flags) {
  if (typeof flags === "number") {
    const acc = flags & 3;
    return {
      read: acc === 0 || acc === 2,
      write: acc === 1 || acc === 2,
      append: !!(flags & constants.O_APPEND),
      create: !!(flags & constants.O_CREAT),
      truncate: !!(flags & constants.O_TRUNC),
      exclusive: !!(flags & constants.O_EXCL),
    };
  }
  const f = String(flags ?? "r");
  const base = f.replace(/[sx]/g, "");
  const plus = base.includes("+");
  const map = {
    r: { read: true, write: plus, append: false, create: false, truncate: false },
    w: { read: plus, write: true, append: false, create: true, truncate: true },
    a: { read: plus, write: true, append: true, create: true, truncate: false },
  };
  const entry = map[base[0]];
  if (!entry) {
    const err = new TypeError(`The value "${flags}" is invalid for option "flags"`);
    err.code = "ERR_INVALID_ARG_VALUE";
    throw err;
  }
  return { ...entry, exclusive: f.includes("x") };
}

function getFd(fd, syscall) {
  const entry = fds.get(fd);
  if (!entry) throw fsError("EBADF", "bad file descriptor", syscall);
  return entry;
}

export function openSync(path, flags = "r", _mode) {
  const [shown, abs] = toPath(path);
  const f = parseFlags(flags);
  const exists = existsSync(abs);
  if (f.exclusive && exists) throw fsError("EEXIST", "file already exists", "open", shown);
  if (!exists) {
    if (!f.create) throw fsError("ENOENT", "no such file or directory", "open", shown);
    hostCall("writeFile", [abs, "", false], "open", shown);
  } else {
    const st = hostCall("stat", [abs, true], "open", shown);
    if (st.isDirectory && f.write) throw fsError("EISDIR", "illegal operation on a directory", "open", shown);
    if (f.truncate) hostCall("writeFile", [abs, "", false], "open", shown);
  }
  const fd = nextFd++;
  fds.set(fd, { path: abs, shown, flags: f, position: 0 });
  return fd;
}

export function closeSync(fd) {
  getFd(fd, "close");
  fds.delete(fd);
}

export function fstatSync(fd, _options) {
  const entry = getFd(fd, "fstat");
  return new Stats(hostCall("stat", [entry.path, true], "fstat", entry.shown));
}

export function fsyncSync(fd) {
  getFd(fd, "fsync");
}

// As chmodSync and its kin: permissions, owners and times stay as the host made them.
export function fchmodSync(fd, _mode) {
  const entry = getFd(fd, "fchmod");
  hostCall("stat", [entry.path, true], "fchmod", entry.shown);
}
export function fchownSync(fd, _uid, _gid) {
  const entry = getFd(fd, "fchown");
  hostCall("stat", [entry.path, true], "fchown", entry.shown);
}
export function futimesSync(fd, _atime, _mtime) {
  const entry = getFd(fd, "futime");
  hostCall("stat", [entry.path, true], "futime", entry.shown);
}
export const fdatasyncSync = fsyncSync;

export function ftruncateSync(fd, len = 0) {
  const entry = getFd(fd, "ftruncate");
  truncateSync(entry.path, len);
}

export function readSync(fd, buffer, offsetOrOptions, length, position) {
  const entry = getFd(fd, "read");
  let offset = offsetOrOptions;
  if (offsetOrOptions && typeof offsetOrOptions === "object") {
    ({ offset = 0, length = buffer.byteLength - offset, position = null } = offsetOrOptions);
  }
  offset = offset ?? 0;
  length = length ?? buffer.byteLength - offset;
  const data = readBytes(entry.path, entry.shown, "read");
  const pos = position == null || position < 0 ? entry.position : Number(position);
  const n = Math.max(0, Math.min(length, data.length - pos));
  new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength).set(data.subarray(pos, pos + n), offset);
  if (position == null || position < 0) entry.position += n;
  return n;
}

export function writeSync(fd, data, offsetOrPosition, lengthOrEncoding, position) {
  const entry = getFd(fd, "write");
  let bytes;
  if (typeof data === "string") {
    bytes = Buffer.from(data, typeof lengthOrEncoding === "string" ? lengthOrEncoding : "utf8");
    position = offsetOrPosition;
  } else {
    const view = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    const offset = offsetOrPosition ?? 0;
    const length = typeof lengthOrEncoding === "number" ? lengthOrEncoding : view.length - offset;
    bytes = view.subarray(offset, offset + length);
  }
  if (entry.flags.append || (position == null && entry.position === fileSize(entry))) {
    hostCall("writeFile", [entry.path, Array.from(bytes), true], "write", entry.shown);
    entry.position = fileSize(entry);
  } else {
    const pos = position == null ? entry.position : Number(position);
    const cur = readBytes(entry.path, entry.shown, "write");
    const out = Buffer.alloc(Math.max(cur.length, pos + bytes.length));
    out.set(cur, 0);
    out.set(bytes, pos);
    hostCall("writeFile", [entry.path, Array.from(out), false], "write", entry.shown);
    if (position == null) entry.position = pos + bytes.length;
  }
  return bytes.length;
}

function fileSize(entry) {
  return hostCall("stat", [entry.path, true], "fstat", entry.shown).size;
}

function fdRead(fd, options) {
  const entry = getFd(fd, "read");
  const opts = getOptions(options);
  const data = readBytes(entry.path, entry.shown, "read").subarray(entry.position);
  entry.position += data.length;
  const buf = Buffer.from(data);
  const enc = normEncoding(opts.encoding);
  return enc ? buf.toString(enc) : buf;
}

function fdWrite(fd, data, options) {
  const opts = getOptions(options, { encoding: "utf8" });
  const bytes = typeof data === "string" ? Buffer.from(data, normEncoding(opts.encoding) ?? "utf8") : data;
  writeSync(fd, bytes);
}

// ---- unsupported -------------------------------------------------------------------------

function notSupported(name) {
  return () => {
    throw new Error(`fs.${name} is not available inside a pichamber extension`);
  };
}

// ---- watching, by polling ------------------------------------------------------------------
// The sandbox has no inotify: a watcher compares what stat (and, for a folder, its listing)
// says at each tick of a timer, and reports what changed.

const WATCH_INTERVAL_MS = 250;

// A file's size and modification time, or null when it does not exist.
function signature(abs) {
  try {
    const raw = hostCall("stat", [abs, true], "stat");
    return { file: `${raw.size ?? 0}:${raw.mtimeMs ?? 0}`, isDirectory: raw.isDirectory };
  } catch {
    return null;
  }
}

// A path's signature and, for a folder, its entries' signatures by name.
function snapshot(abs) {
  const own = signature(abs);
  if (!own?.isDirectory) return own && { file: own.file, entries: null };
  const entries = new Map();
  try {
    for (const e of hostCall("readdir", [abs], "scandir")) entries.set(e.name, signature(joinPath(abs, e.name))?.file ?? "");
  } catch {
    // An unreadable folder reports only its own changes.
  }
  return { file: own.file, entries };
}

class FSWatcher extends EventEmitter {
  #timer;
  constructor(abs, encoding, listener) {
    super();
    if (listener) this.on("change", listener);
    const base = abs.split("/").pop();
    const name = (n) => (encoding === "buffer" ? Buffer.from(n) : n);
    let before = snapshot(abs);
    this.#timer = setInterval(() => {
      const now = snapshot(abs);
      if (before?.entries && now?.entries) {
        for (const [n, sig] of now.entries) {
          if (!before.entries.has(n)) this.emit("change", "rename", name(n));
          else if (before.entries.get(n) !== sig) this.emit("change", "change", name(n));
        }
        for (const n of before.entries.keys()) if (!now.entries.has(n)) this.emit("change", "rename", name(n));
      } else if ((before === null) !== (now === null)) {
        this.emit("change", "rename", name(base));
      } else if (now && before.file !== now.file) {
        this.emit("change", "change", name(base));
      }
      before = now;
    }, WATCH_INTERVAL_MS);
  }
  close() {
    if (this.#timer === undefined) return;
    clearInterval(this.#timer);
    this.#timer = undefined;
    queueMicrotask(() => this.emit("close"));
  }
  ref() {
    return this;
  }
  unref() {
    return this;
  }
}

export function watch(filename, options, listener) {
  if (typeof options === "function") [listener, options] = [options, {}];
  const opts = typeof options === "string" ? { encoding: options } : (options ?? {});
  const [shown, abs] = toPath(filename, "filename");
  hostCall("stat", [abs, true], "watch", shown); // Node refuses a missing path at once
  return new FSWatcher(abs, opts.encoding, listener);
}

// fs/promises' watch: the same watcher as an async iterator of { eventType, filename }.
function watchAsync(filename, options = {}) {
  const queue = [];
  let wake;
  let done = false;
  const watcher = watch(filename, options, (eventType, name) => {
    queue.push({ eventType, filename: name });
    wake?.();
  });
  const finish = () => {
    done = true;
    watcher.close();
    wake?.();
  };
  options?.signal?.addEventListener?.("abort", finish);
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      while (!queue.length && !done) await new Promise((resolve) => (wake = resolve));
      if (queue.length) return { value: queue.shift(), done: false };
      return { value: undefined, done: true };
    },
    async return() {
      finish();
      return { value: undefined, done: true };
    },
  };
}

const fileWatchers = new Map(); // absolute path -> { listeners, timer, previous }

function statOrEmpty(abs) {
  try {
    return new Stats(hostCall("stat", [abs, true], "stat"));
  } catch {
    return new Stats({ size: 0, mtimeMs: 0, mode: 0 });
  }
}

export function watchFile(filename, options, listener) {
  if (typeof options === "function") [listener, options] = [options, {}];
  if (typeof listener !== "function") throw invalidArgType("listener", "of type function", listener);
  const [, abs] = toPath(filename, "filename");
  let watcher = fileWatchers.get(abs);
  if (!watcher) {
    watcher = { listeners: new Set(), previous: statOrEmpty(abs) };
    watcher.timer = setInterval(() => {
      const current = statOrEmpty(abs);
      const previous = watcher.previous;
      watcher.previous = current;
      if (current.mtimeMs !== previous.mtimeMs || current.size !== previous.size) {
        for (const l of watcher.listeners) l(current, previous);
      }
    }, options?.interval ?? 5007);
    fileWatchers.set(abs, watcher);
  }
  watcher.listeners.add(listener);
  return new EventEmitter();
}

export function unwatchFile(filename, listener) {
  const [, abs] = toPath(filename, "filename");
  const watcher = fileWatchers.get(abs);
  if (!watcher) return;
  if (listener) watcher.listeners.delete(listener);
  else watcher.listeners.clear();
  if (watcher.listeners.size === 0) {
    clearInterval(watcher.timer);
    fileWatchers.delete(abs);
  }
}
export const opendirSync = notSupported("opendirSync");
export const opendir = notSupported("opendir");
export const statfsSync = notSupported("statfsSync");

// ---- streams -----------------------------------------------------------------------------

class ReadStream extends EventEmitter {
  constructor(path, options) {
    super();
    const opts = getOptions(options);
    this.path = path;
    this.bytesRead = 0;
    this.readable = true;
    this.destroyed = false;
    this._encoding = normEncoding(opts.encoding);
    this._start = opts.start ?? 0;
    this._end = opts.end ?? Infinity;
    this._flowing = false;
    this._done = false;
    this._chunks = null;
    queueMicrotask(() => this._open());
  }

  _load() {
    if (this._chunks) return;
    try {
      const [shown, abs] = toPath(this.path);
      let buf = readBytes(abs, shown);
      buf = buf.subarray(this._start, this._end === Infinity ? undefined : this._end + 1);
      this.bytesRead = buf.length;
      const chunks = [];
      for (let i = 0; i < buf.length; i += 65536) chunks.push(Buffer.from(buf.subarray(i, i + 65536)));
      this._chunks = chunks;
    } catch (err) {
      this._chunks = [];
      this._error = err;
    }
  }

  _open() {
    this._load();
    if (this._error) {
      this.destroyed = true;
      this.emit("error", this._error);
      this.emit("close");
      return;
    }
    this.emit("open", 0);
    this.emit("ready");
    if (this.listenerCount("data") > 0) this._flow();
  }

  _flow() {
    if (this._flowing || this._done) return;
    this._flowing = true;
    queueMicrotask(() => {
      for (const c of this._chunks) this.emit("data", this._encoding ? c.toString(this._encoding) : c);
      this._done = true;
      this.readable = false;
      this.emit("end");
      this.emit("close");
    });
  }

  on(event, listener) {
    super.on(event, listener);
    if (event === "data" && this._chunks && !this._error) this._flow();
    return this;
  }

  resume() {
    if (this._chunks) this._flow();
    return this;
  }

  pause() {
    return this;
  }

  setEncoding(enc) {
    this._encoding = normEncoding(enc);
    return this;
  }

  pipe(dest) {
    this.on("data", (c) => dest.write(c));
    this.on("end", () => dest.end?.());
    return dest;
  }

  destroy(err) {
    this.destroyed = true;
    if (err) this.emit("error", err);
    this.emit("close");
    return this;
  }

  close(cb) {
    this.destroy();
    if (cb) queueMicrotask(cb);
  }

  async *[Symbol.asyncIterator]() {
    this._load();
    if (this._error) throw this._error;
    this._done = true;
    for (const c of this._chunks) yield this._encoding ? c.toString(this._encoding) : c;
  }
}

class WriteStream extends EventEmitter {
  constructor(path, options) {
    super();
    const opts = getOptions(options, { flags: "w", encoding: "utf8" });
    this.path = path;
    this.bytesWritten = 0;
    this.writable = true;
    this.destroyed = false;
    this._encoding = opts.encoding;
    try {
      const [shown, abs] = toPath(path);
      this._abs = abs;
      this._shown = shown;
      const f = parseFlags(opts.flags);
      if (f.exclusive && existsSync(abs)) throw fsError("EEXIST", "file already exists", "open", shown);
      if (f.truncate || !existsSync(abs)) hostCall("writeFile", [abs, "", false], "open", shown);
      queueMicrotask(() => {
        this.emit("open", 0);
        this.emit("ready");
      });
    } catch (err) {
      this.destroyed = true;
      queueMicrotask(() => {
        this.emit("error", err);
        this.emit("close");
      });
    }
  }

  write(chunk, encoding, cb) {
    if (typeof encoding === "function") {
      cb = encoding;
      encoding = undefined;
    }
    if (this.destroyed || !this.writable) {
      const err = new Error("write after end");
      err.code = "ERR_STREAM_WRITE_AFTER_END";
      queueMicrotask(() => {
        cb?.(err);
        this.emit("error", err);
      });
      return false;
    }
    try {
      const data = toByteArray(chunk, encoding ?? this._encoding);
      hostCall("writeFile", [this._abs, data, true], "write", this._shown);
      this.bytesWritten += typeof data === "string" ? Buffer.byteLength(data) : data.length;
      if (cb) queueMicrotask(() => cb(null));
    } catch (err) {
      queueMicrotask(() => {
        cb?.(err);
        this.emit("error", err);
      });
    }
    return true;
  }

  end(chunk, encoding, cb) {
    if (typeof chunk === "function") {
      cb = chunk;
      chunk = undefined;
    } else if (typeof encoding === "function") {
      cb = encoding;
      encoding = undefined;
    }
    if (chunk !== undefined && chunk !== null) this.write(chunk, encoding);
    this.writable = false;
    queueMicrotask(() => {
      this.emit("finish");
      this.emit("close");
      cb?.();
    });
    return this;
  }

  destroy(err) {
    this.destroyed = true;
    this.writable = false;
    if (err) queueMicrotask(() => this.emit("error", err));
    queueMicrotask(() => this.emit("close"));
    return this;
  }

  close(cb) {
    this.end(cb);
  }

  cork() {}

  uncork() {}

  setDefaultEncoding(enc) {
    this._encoding = enc;
    return this;
  }
}

export function createReadStream(path, options) {
  return new ReadStream(path, options);
}

export function createWriteStream(path, options) {
  return new WriteStream(path, options);
}

export { ReadStream, WriteStream };

// ---- callback API ------------------------------------------------------------------------

function callbackify(fn, name) {
  const wrapped = function (...args) {
    const cb = args[args.length - 1];
    if (typeof cb !== "function") {
      throw invalidArgType("cb", "of type function", cb);
    }
    args.pop();
    let result;
    try {
      result = fn(...args);
    } catch (err) {
      queueMicrotask(() => cb(err));
      return;
    }
    queueMicrotask(() => cb(null, result));
  };
  Object.defineProperty(wrapped, "name", { value: name });
  return wrapped;
}

export const readFile = callbackify(readFileSync, "readFile");
export const writeFile = callbackify(writeFileSync, "writeFile");
export const appendFile = callbackify(appendFileSync, "appendFile");
export const stat = callbackify(statSync, "stat");
export const lstat = callbackify(lstatSync, "lstat");
export const fstat = callbackify(fstatSync, "fstat");
export const readdir = callbackify(readdirSync, "readdir");
export const mkdir = callbackify(mkdirSync, "mkdir");
export const mkdtemp = callbackify(mkdtempSync, "mkdtemp");
export const rm = callbackify(rmSync, "rm");
export const rmdir = callbackify(rmdirSync, "rmdir");
export const unlink = callbackify(unlinkSync, "unlink");
export const rename = callbackify(renameSync, "rename");
export const copyFile = callbackify(copyFileSync, "copyFile");
export const cp = callbackify(cpSync, "cp");
export const realpath = callbackify(realpathSync, "realpath");
realpath.native = realpath;
export const access = callbackify(accessSync, "access");
export const truncate = callbackify(truncateSync, "truncate");
export const ftruncate = callbackify(ftruncateSync, "ftruncate");
export const readlink = callbackify(readlinkSync, "readlink");
export const symlink = callbackify(symlinkSync, "symlink");
export const link = callbackify(linkSync, "link");
export const chmod = callbackify(chmodSync, "chmod");
export const lchmod = callbackify(lchmodSync, "lchmod");
export const chown = callbackify(chownSync, "chown");
export const lchown = callbackify(lchownSync, "lchown");
export const utimes = callbackify(utimesSync, "utimes");
export const lutimes = callbackify(lutimesSync, "lutimes");
export const open = callbackify(openSync, "open");
export const close = function (fd, cb = () => {}) {
  try {
    closeSync(fd);
  } catch (err) {
    queueMicrotask(() => cb(err));
    return;
  }
  queueMicrotask(() => cb(null));
};
export const fsync = callbackify(fsyncSync, "fsync");
export const fchmod = callbackify(fchmodSync, "fchmod");
export const fchown = callbackify(fchownSync, "fchown");
export const futimes = callbackify(futimesSync, "futimes");
export const fdatasync = callbackify(fdatasyncSync, "fdatasync");
export function read(fd, buffer, offset, length, position, cb) {
  if (typeof buffer === "function") {
    cb = buffer;
    buffer = Buffer.alloc(16384);
    offset = 0;
    length = buffer.length;
    position = null;
  } else if (typeof offset === "function") {
    cb = offset;
    offset = 0;
    length = buffer.byteLength;
    position = null;
  } else if (typeof length === "function") {
    cb = length;
    ({ offset = 0, length = buffer.byteLength - offset, position = null } = offset ?? {});
  }
  try {
    const n = readSync(fd, buffer, offset, length, position);
    queueMicrotask(() => cb(null, n, buffer));
  } catch (err) {
    queueMicrotask(() => cb(err));
  }
}
export function write(fd, data, ...rest) {
  const cb = rest.pop();
  try {
    const n = writeSync(fd, data, ...rest);
    queueMicrotask(() => cb(null, n, data));
  } catch (err) {
    queueMicrotask(() => cb(err));
  }
}
export function exists(path, cb) {
  const result = existsSync(path);
  queueMicrotask(() => cb(result));
}

// ---- promises ----------------------------------------------------------------------------

function promisified(fn) {
  return async (...args) => fn(...args);
}

class FileHandle extends EventEmitter {
  constructor(fd) {
    super();
    this.fd = fd;
  }

  async readFile(options) {
    const entry = getFd(this.fd, "read");
    entry.position = 0;
    return fdRead(this.fd, options);
  }

  async writeFile(data, options) {
    const entry = getFd(this.fd, "write");
    if (!entry.flags.append) {
      hostCall("writeFile", [entry.path, "", false], "write", entry.shown);
      entry.position = 0;
    }
    fdWrite(this.fd, data, options);
  }

  async appendFile(data, options) {
    const entry = getFd(this.fd, "write");
    hostCall(
      "writeFile",
      [entry.path, toByteArray(data, getOptions(options, { encoding: "utf8" }).encoding), true],
      "write",
      entry.shown,
    );
  }

  async read(buffer, offset, length, position) {
    if (buffer && !ArrayBuffer.isView(buffer)) {
      ({ buffer = Buffer.alloc(16384), offset = 0, length = buffer.byteLength - offset, position = null } = buffer);
    }
    buffer = buffer ?? Buffer.alloc(16384);
    const bytesRead = readSync(this.fd, buffer, offset ?? 0, length ?? buffer.byteLength - (offset ?? 0), position);
    return { bytesRead, buffer };
  }

  async write(data, ...rest) {
    const bytesWritten = writeSync(this.fd, data, ...rest);
    return { bytesWritten, buffer: data };
  }

  async stat(options) {
    return fstatSync(this.fd, options);
  }

  async truncate(len = 0) {
    ftruncateSync(this.fd, len);
  }

  async sync() {}

  async datasync() {}

  async close() {
    if (fds.has(this.fd)) closeSync(this.fd);
    this.emit("close");
  }

  async [Symbol.asyncDispose ?? Symbol.for("Symbol.asyncDispose")]() {
    return this.close();
  }

  createReadStream(options) {
    return new ReadStream(getFd(this.fd, "read").path, options);
  }

  createWriteStream(options) {
    return new WriteStream(getFd(this.fd, "write").path, { flags: "a", ...getOptions(options) });
  }

  async *readLines(options) {
    const text = await this.readFile({ encoding: getOptions(options).encoding ?? "utf8" });
    const lines = text.split(/\r?\n/);
    if (lines[lines.length - 1] === "") lines.pop();
    yield* lines;
  }
}

export const promises = {
  constants,
  readFile: async (path, options) => {
    if (path instanceof FileHandle) return path.readFile(options);
    return readFileSync(path, options);
  },
  writeFile: async (path, data, options) => {
    if (path instanceof FileHandle) return path.writeFile(data, options);
    if (
      data &&
      typeof data === "object" &&
      !ArrayBuffer.isView(data) &&
      (Symbol.asyncIterator in data || Symbol.iterator in data) &&
      typeof data !== "string"
    ) {
      const parts = [];
      for await (const chunk of data) parts.push(typeof chunk === "string" ? Buffer.from(chunk) : Buffer.from(chunk));
      data = Buffer.concat(parts);
    }
    return writeFileSync(path, data, options);
  },
  appendFile: async (path, data, options) => {
    if (path instanceof FileHandle) return path.appendFile(data, options);
    return appendFileSync(path, data, options);
  },
  stat: promisified(statSync),
  lstat: promisified(lstatSync),
  readdir: promisified(readdirSync),
  mkdir: promisified(mkdirSync),
  mkdtemp: promisified(mkdtempSync),
  rm: promisified(rmSync),
  rmdir: promisified(rmdirSync),
  unlink: promisified(unlinkSync),
  rename: promisified(renameSync),
  copyFile: promisified(copyFileSync),
  cp: promisified(cpSync),
  realpath: promisified(realpathSync),
  access: promisified(accessSync),
  truncate: promisified(truncateSync),
  readlink: promisified(readlinkSync),
  symlink: promisified(symlinkSync),
  link: promisified(linkSync),
  chmod: promisified(chmodSync),
  lchmod: promisified(lchmodSync),
  chown: promisified(chownSync),
  lchown: promisified(lchownSync),
  utimes: promisified(utimesSync),
  lutimes: promisified(lutimesSync),
  open: async (path, flags, mode) => new FileHandle(openSync(path, flags, mode)),
  opendir: async () => opendir(),
  watch: watchAsync,
  statfs: async () => statfsSync(),
};

export { FileHandle };

export default {
  constants,
  F_OK,
  R_OK,
  W_OK,
  X_OK,
  Stats,
  Dirent,
  ReadStream,
  WriteStream,
  promises,
  existsSync,
  readFileSync,
  writeFileSync,
  appendFileSync,
  statSync,
  lstatSync,
  fstatSync,
  readdirSync,
  mkdirSync,
  mkdtempSync,
  rmSync,
  rmdirSync,
  unlinkSync,
  renameSync,
  copyFileSync,
  cpSync,
  realpathSync,
  accessSync,
  truncateSync,
  ftruncateSync,
  readlinkSync,
  symlinkSync,
  linkSync,
  chmodSync,
  lchmodSync,
  chownSync,
  lchownSync,
  utimesSync,
  lutimesSync,
  openSync,
  closeSync,
  readSync,
  writeSync,
  fsyncSync,
  fdatasyncSync,
  fchmodSync,
  fchownSync,
  futimesSync,
  createReadStream,
  createWriteStream,
  watch,
  watchFile,
  unwatchFile,
  opendir,
  opendirSync,
  statfsSync,
  readFile,
  writeFile,
  appendFile,
  stat,
  lstat,
  fstat,
  readdir,
  mkdir,
  mkdtemp,
  rm,
  rmdir,
  unlink,
  rename,
  copyFile,
  cp,
  realpath,
  access,
  truncate,
  ftruncate,
  readlink,
  symlink,
  link,
  chmod,
  lchmod,
  chown,
  lchown,
  utimes,
  lutimes,
  open,
  close,
  fsync,
  fdatasync,
  fchmod,
  fchown,
  futimes,
  read,
  write,
  exists,
};
