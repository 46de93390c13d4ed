// node:sqlite for pichamber: DatabaseSync and StatementSync over the SQLite compiled into the
// guest (guest-shim/src/sqlite.rs, reached through `__host("sqlite.OP", ...)`; nothing crosses
// to the host). Database files are opened through WASI, so the extension's grants decide which
// exist. Not provided (each says so when called): user functions and aggregates, sessions and
// changesets, authorizers, serialize/deserialize, backup, loadable extensions.
import { resolve } from "pichamber:node/path";
import { Buffer } from "pichamber:node/buffer";

export const constants = Object.freeze({
  SQLITE_CHANGESET_OMIT: 0, SQLITE_CHANGESET_REPLACE: 1, SQLITE_CHANGESET_ABORT: 2,
  SQLITE_CHANGESET_DATA: 1, SQLITE_CHANGESET_NOTFOUND: 2, SQLITE_CHANGESET_CONFLICT: 3,
  SQLITE_CHANGESET_CONSTRAINT: 4, SQLITE_CHANGESET_FOREIGN_KEY: 5,
  SQLITE_OK: 0, SQLITE_DENY: 1, SQLITE_IGNORE: 2,
  SQLITE_CREATE_INDEX: 1, SQLITE_CREATE_TABLE: 2, SQLITE_CREATE_TEMP_INDEX: 3,
  SQLITE_CREATE_TEMP_TABLE: 4, SQLITE_CREATE_TEMP_TRIGGER: 5, SQLITE_CREATE_TEMP_VIEW: 6,
  SQLITE_CREATE_TRIGGER: 7, SQLITE_CREATE_VIEW: 8, SQLITE_DELETE: 9, SQLITE_DROP_INDEX: 10,
  SQLITE_DROP_TABLE: 11, SQLITE_DROP_TEMP_INDEX: 12, SQLITE_DROP_TEMP_TABLE: 13,
  SQLITE_DROP_TEMP_TRIGGER: 14, SQLITE_DROP_TEMP_VIEW: 15, SQLITE_DROP_TRIGGER: 16,
  SQLITE_DROP_VIEW: 17, SQLITE_INSERT: 18, SQLITE_PRAGMA: 19, SQLITE_READ: 20,
  SQLITE_SELECT: 21, SQLITE_TRANSACTION: 22, SQLITE_UPDATE: 23, SQLITE_ATTACH: 24,
  SQLITE_DETACH: 25, SQLITE_ALTER_TABLE: 26, SQLITE_REINDEX: 27, SQLITE_ANALYZE: 28,
  SQLITE_CREATE_VTABLE: 29, SQLITE_DROP_VTABLE: 30, SQLITE_FUNCTION: 31, SQLITE_SAVEPOINT: 32,
  SQLITE_COPY: 0, SQLITE_RECURSIVE: 33,
});

function nodeError(Kind, code, message) {
  const err = new Kind(message);
  err.code = code;
  return err;
}

// The guest's errors arrive as "code\x01errcode\x01errstr\x01message".
function call(op, args) {
  try {
    return JSON.parse(globalThis.__host(`sqlite.${op}`, args));
  } catch (e) {
    const parts = String(e?.message ?? e).split("\x01");
    if (parts.length < 4) throw e;
    const [code, errcode, errstr, ...rest] = parts;
    const Kind = code === "ERR_INVALID_ARG_TYPE" ? TypeError : Error;
    const err = nodeError(Kind, code, rest.join("\x01"));
    if (errcode !== "") {
      err.errcode = Number(errcode);
      err.errstr = errstr;
    }
    throw err;
  }
}

function argType(name, what) {
  return nodeError(TypeError, "ERR_INVALID_ARG_TYPE", `The "${name}" argument must be ${what}.`);
}

function unsupported(what) {
  return () => {
    throw nodeError(Error, "ERR_METHOD_NOT_IMPLEMENTED",
      `${what} is not available inside a pichamber extension (node:sqlite here runs SQL only)`);
  };
}

// A value as the guest binds it; JavaScript numbers are doubles, as Node binds them.
function encode(value, index) {
  if (value === null) return null;
  if (typeof value === "number") return Number.isFinite(value) ? value : { r: String(value) };
  if (typeof value === "string") return value;
  if (typeof value === "bigint") return { i: String(value) };
  if (ArrayBuffer.isView(value)) {
    return { b: Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("base64") };
  }
  throw nodeError(TypeError, "ERR_INVALID_ARG_TYPE", `Provided value cannot be bound to SQLite parameter ${index}.`);
}

function decode(cell, readBigInts) {
  if (cell === null) return null;
  if (typeof cell === "number") return readBigInts && Number.isInteger(cell) && !Object.is(cell, -0) ? BigInt(cell) : cell;
  if (typeof cell === "string") return cell;
  if ("b" in cell) return new Uint8Array(Buffer.from(cell.b, "base64"));
  if ("r" in cell) return Number(cell.r);
  if (readBigInts) return BigInt(cell.i);
  throw nodeError(RangeError, "ERR_OUT_OF_RANGE", `Value is too large to be represented as a JavaScript number: ${cell.i}`);
}

const STATEMENT = Symbol("statement");
let constructing = false;
let idOf; // DatabaseSync's open connection id, for its statements

export class DatabaseSync {
  #id = null;
  #path;
  #options;

  constructor(path, options = {}) {
    if (!new.target) throw nodeError(TypeError, "ERR_CONSTRUCT_CALL_REQUIRED", "Cannot call constructor without `new`");
    if (path instanceof URL) path = path.protocol === "file:" ? decodeURIComponent(path.pathname) : path.href;
    else if (path instanceof Uint8Array) path = Buffer.from(path).toString();
    if (typeof path !== "string" || path.includes("\0")) {
      throw argType("path", "a string, Uint8Array, or URL without null bytes");
    }
    if (options === null || typeof options !== "object") throw argType("options", "an object");
    for (const key of ["open", "readOnly", "enableForeignKeyConstraints", "enableDoubleQuotedStringLiterals", "allowExtension", "readBigInts", "returnArrays", "allowBareNamedParameters", "allowUnknownNamedParameters"]) {
      if (options[key] !== undefined && typeof options[key] !== "boolean") throw argType(`options.${key}`, "a boolean");
    }
    if (options.timeout !== undefined && !Number.isInteger(options.timeout)) throw argType("options.timeout", "an integer");
    // ":memory:" and "file:" URIs go to SQLite as given; a file name is taken from the cwd.
    this.#path = path === ":memory:" || path === "" || path.startsWith("file:") ? path : resolve(path);
    this.#options = { ...options };
    if (options.open !== false) this.open();
  }

  open() {
    if (this.#id !== null) throw nodeError(Error, "ERR_INVALID_STATE", "database is already open");
    this.#id = call("open", [this.#path, this.#options]);
  }

  close() {
    this.#open();
    const id = this.#id;
    this.#id = null;
    call("close", [id]);
  }

  get isOpen() {
    return this.#id !== null;
  }

  get isTransaction() {
    return call("isTransaction", [this.#open()]);
  }

  exec(sql) {
    if (typeof sql !== "string") throw argType("sql", "a string");
    call("exec", [this.#open(), sql]);
  }

  prepare(sql) {
    if (typeof sql !== "string") throw argType("sql", "a string");
    call("prepare", [this.#open(), sql]);
    constructing = true;
    try {
      return new StatementSync(STATEMENT, this, sql, this.#options);
    } finally {
      constructing = false;
    }
  }

  location(dbName = "main") {
    if (typeof dbName !== "string") throw argType("dbName", "a string");
    return call("location", [this.#open(), dbName]);
  }

  [Symbol.dispose]() {
    if (this.#id !== null) this.close();
  }

  // For StatementSync: the id, or Node's error when the database is closed.
  #open() {
    if (this.#id === null) throw nodeError(Error, "ERR_INVALID_STATE", "database is not open");
    return this.#id;
  }

  static {
    idOf = (db) => db.#open();
  }
}

for (const name of ["function", "aggregate", "createSession", "applyChangeset", "enableLoadExtension", "enableDefensive", "loadExtension", "serialize", "deserialize", "setAuthorizer", "createTagStore"]) {
  Object.defineProperty(DatabaseSync.prototype, name, {
    value: unsupported(`DatabaseSync.prototype.${name}()`), writable: true, configurable: true, enumerable: false,
  });
}

export class StatementSync {
  #db;
  #sql;
  #readBigInts;
  #returnArrays;
  #allowBare;
  #allowUnknown;
  #last = [null, []];

  constructor(token, db, sql, options) {
    if (token !== STATEMENT || !constructing) throw nodeError(Error, "ERR_ILLEGAL_CONSTRUCTOR", "Illegal constructor");
    this.#db = db;
    this.#sql = sql;
    this.#readBigInts = options.readBigInts === true;
    this.#returnArrays = options.returnArrays === true;
    this.#allowBare = options.allowBareNamedParameters !== false;
    this.#allowUnknown = options.allowUnknownNamedParameters === true;
    Object.defineProperty(this, "sourceSQL", { get: () => this.#sql, enumerable: true, configurable: true });
    Object.defineProperty(this, "expandedSQL", {
      get: () => call("expandedSQL", [this.#id(), this.#sql, ...this.#last, this.#binding()]),
      enumerable: true,
      configurable: true,
    });
  }

  #id() {
    if (!this.#db.isOpen) throw nodeError(Error, "ERR_INVALID_STATE", "statement has been finalized");
    return idOf(this.#db);
  }

  #binding() {
    return { allowBareNamedParameters: this.#allowBare, allowUnknownNamedParameters: this.#allowUnknown };
  }

  // Node's rule: a first argument that is a plain object names parameters; the rest bind
  // to the anonymous ones in order.
  #params(args) {
    let named = null;
    let rest = args;
    const first = args[0];
    if (first !== null && typeof first === "object" && !ArrayBuffer.isView(first)) {
      named = {};
      for (const key of Object.keys(first)) named[key] = encode(first[key], key);
      rest = args.slice(1);
    }
    let index = 1;
    const positional = rest.map((value) => encode(value, index++ + (named ? 1 : 0)));
    this.#last = [named, positional];
    return this.#last;
  }

  #query(op, args) {
    const id = this.#id();
    return call(op, [id, this.#sql, ...this.#params(args), this.#binding()]);
  }

  #row(names, cells) {
    if (this.#returnArrays) return cells.map((c) => decode(c, this.#readBigInts));
    const row = { __proto__: null };
    names.forEach((name, i) => { row[name] = decode(cells[i], this.#readBigInts); });
    return row;
  }

  run(...args) {
    const { changes, lastInsertRowid } = this.#query("run", args);
    return { changes: decode(changes, this.#readBigInts), lastInsertRowid: decode(lastInsertRowid, this.#readBigInts) };
  }

  get(...args) {
    const { names, rows } = this.#query("get", args);
    return rows.length ? this.#row(names, rows[0]) : undefined;
  }

  all(...args) {
    const { names, rows } = this.#query("all", args);
    return rows.map((cells) => this.#row(names, cells));
  }

  // Rows are read when the iteration starts (Node steps one at a time; only a statement
  // that changes the table it is still reading could tell the difference).
  iterate(...args) {
    return this.all(...args)[Symbol.iterator]();
  }

  columns() {
    return call("columns", [this.#id(), this.#sql]).map((c) => Object.assign({ __proto__: null }, c));
  }

  setReadBigInts(enabled) {
    if (typeof enabled !== "boolean") throw argType("readBigInts", "a boolean");
    this.#readBigInts = enabled;
  }

  setReturnArrays(enabled) {
    if (typeof enabled !== "boolean") throw argType("returnArrays", "a boolean");
    this.#returnArrays = enabled;
  }

  setAllowBareNamedParameters(enabled) {
    if (typeof enabled !== "boolean") throw argType("allowBareNamedParameters", "a boolean");
    this.#allowBare = enabled;
  }

  setAllowUnknownNamedParameters(enabled) {
    if (typeof enabled !== "boolean") throw argType("enabled", "a boolean");
    this.#allowUnknown = enabled;
  }
}

export class Session {
  constructor() {
    throw nodeError(Error, "ERR_ILLEGAL_CONSTRUCTOR", "Illegal constructor");
  }
}

export const backup = (...args) => Promise.resolve().then(unsupported("sqlite.backup()"));

export default { DatabaseSync, StatementSync, Session, backup, constants };
