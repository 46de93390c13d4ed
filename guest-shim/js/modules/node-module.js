// node:module for pichamber: `createRequire` for the built-in modules the guest provides.
// Files cannot be required at run time (an extension's own modules are bundled at build time,
// and nothing is read from disk to be executed), so any other specifier fails as a missing
// module does in Node.

const PROVIDED = {
  buffer: "pichamber:node/buffer",
  child_process: "pichamber:node/child_process",
  crypto: "pichamber:node/crypto",
  events: "pichamber:node/events",
  fs: "pichamber:node/fs",
  "fs/promises": "pichamber:node/fs-promises",
  http: "pichamber:node/http",
  https: "pichamber:node/http",
  module: "pichamber:node/module",
  net: "pichamber:node/net",
  os: "pichamber:node/os",
  path: "pichamber:node/path",
  "path/posix": "pichamber:node/path",
  process: "pichamber:node/process",
  url: "pichamber:node/url",
  util: "pichamber:node/util",
};

export const builtinModules = Object.keys(PROVIDED);

export function isBuiltin(specifier) {
  const name = String(specifier).replace(/^node:/, "");
  return Object.hasOwn(PROVIDED, name);
}

function notFound(specifier, from) {
  const err = new Error(`Cannot find module '${specifier}'\nRequire stack:\n- ${from}`);
  err.code = "MODULE_NOT_FOUND";
  err.requireStack = [from];
  return err;
}

export function createRequire(filename) {
  const from = String(filename?.href ?? filename);
  const require = (specifier) => {
    const name = String(specifier).replace(/^node:/, "");
    const load = globalThis.__pichamber_internal?.requireBuiltin;
    if (!Object.hasOwn(PROVIDED, name) || typeof load !== "function") throw notFound(specifier, from);
    const namespace = load(PROVIDED[name]);
    return namespace.default ?? namespace;
  };
  require.resolve = (specifier) => {
    if (isBuiltin(specifier)) return String(specifier);
    throw notFound(specifier, from);
  };
  require.cache = Object.create(null);
  return require;
}

export class Module {
  static builtinModules = builtinModules;
  static createRequire = createRequire;
  static isBuiltin = isBuiltin;
}

export default { builtinModules, createRequire, isBuiltin, Module };
