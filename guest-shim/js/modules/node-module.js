// node:module for pichamber. An extension is bundled when it is built, so nothing can be
// loaded from disk at run time: `createRequire(url)` gives a `require` that returns Node's
// built-in modules pichamber provides and, for anything else, fails as Node does for a module
// that is not installed (an Error with code MODULE_NOT_FOUND), which is what code probing for
// an optional dependency (`try { require.resolve("x") } catch {}`) expects.

import * as assert from "pichamber:node/assert";
import * as buffer from "pichamber:node/buffer";
import * as child_process from "pichamber:node/child_process";
import * as crypto from "pichamber:node/crypto";
import * as events from "pichamber:node/events";
import * as fs from "pichamber:node/fs";
import * as fsPromises from "pichamber:node/fs-promises";
import * as http from "pichamber:node/http";
import * as net from "pichamber:node/net";
import * as os from "pichamber:node/os";
import * as path from "pichamber:node/path";
import * as processModule from "pichamber:node/process";
import * as url from "pichamber:node/url";
import * as util from "pichamber:node/util";
import * as vm from "pichamber:node/vm";
import * as worker_threads from "pichamber:node/worker_threads";

const BUILTINS = {
  assert: assert.default,
  buffer,
  child_process,
  crypto,
  events,
  fs,
  "fs/promises": fsPromises,
  http,
  https: http,
  net,
  os,
  path,
  "path/posix": path,
  process: processModule,
  url,
  util,
  vm,
  worker_threads,
};

/** The built-in modules available (without the `node:` prefix), as Node lists them. */
export const builtinModules = Object.keys(BUILTINS).concat(["module"]).sort();

const bare = (id) => (typeof id === "string" && id.startsWith("node:") ? id.slice(5) : id);

/** Whether `id` names a built-in module that pichamber provides. */
export function isBuiltin(id) {
  return builtinModules.includes(bare(id));
}

function notFound(id, from) {
  const err = new Error(`Cannot find module '${id}'\nRequire stack:\n- ${from}`);
  err.code = "MODULE_NOT_FOUND";
  err.requireStack = [from];
  return err;
}

function checkId(id) {
  if (typeof id !== "string") {
    const err = new TypeError(
      `The "id" argument must be of type string. Received ${id === null ? "null" : typeof id}`,
    );
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  if (id === "") {
    const err = new TypeError("The argument 'id' must be a non-empty string. Received ''");
    err.code = "ERR_INVALID_ARG_VALUE";
    throw err;
  }
}

/** A `require` for the module at `filename` (a path or a file: URL). */
export function createRequire(filename) {
  const from = filename instanceof URL ? filename.href : String(filename);
  if (!from.startsWith("file:") && !from.startsWith("/")) {
    const err = new TypeError(
      `The argument 'filename' must be a file URL object, file URL string, or absolute path string. Received '${from}'`,
    );
    err.code = "ERR_INVALID_ARG_VALUE";
    throw err;
  }
  const shown = from.startsWith("file:") ? url.fileURLToPath(from) : from;
  function require(id) {
    checkId(id);
    if (id === "module" || id === "node:module") return moduleNamespace;
    const found = BUILTINS[bare(id)];
    if (found) return found;
    throw notFound(id, shown);
  }
  require.resolve = (id) => {
    checkId(id);
    if (isBuiltin(id)) return id;
    throw notFound(id, shown);
  };
  require.resolve.paths = (id) => (isBuiltin(id) ? null : []);
  require.cache = Object.create(null);
  require.main = undefined;
  return require;
}

const moduleNamespace = { builtinModules, createRequire, isBuiltin };

export default moduleNamespace;
