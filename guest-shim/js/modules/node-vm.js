// node:vm for pichamber. A context is a realm of its own (guest-shim/src/vm.rs): fresh
// built-ins and a global object that inherits from the contextified object, so a script reads
// that object's properties as globals; what a script defines at its top level is copied back
// to the object after each run. runInThisContext evaluates in the extension's own realm. As in
// Node, a context is not a security boundary: the extension's instance is. Not provided:
// `codeGeneration` limits, `timeout` (the extension's per-call limit applies), modules
// (`SourceTextModule`), cached data.

const native = globalThis.__vm;
const realms = new WeakMap();

function invalidContext(value) {
  const err = new TypeError(
    `The "contextifiedObject" argument must be an vm.Context. Received ${value === null ? "null" : typeof value}`,
  );
  err.code = "ERR_INVALID_ARG_TYPE";
  return err;
}

/** Makes `sandbox` a context (a realm whose globals it provides); returns it. */
export function createContext(sandbox = {}, _options) {
  if (sandbox === null || (typeof sandbox !== "object" && typeof sandbox !== "function")) {
    const err = new TypeError(`The "contextObject" argument must be of type object. Received ${typeof sandbox}`);
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  if (realms.has(sandbox)) return sandbox;
  const id = native.create(sandbox);
  const global = native.global(id);
  realms.set(sandbox, { id, global, builtins: new Set(Reflect.ownKeys(global)) });
  return sandbox;
}

export function isContext(value) {
  return realms.has(value);
}

function runIn(sandbox, code, filename) {
  const realm = realms.get(sandbox);
  if (!realm) throw invalidContext(sandbox);
  try {
    return native.run(realm.id, String(code), String(filename));
  } finally {
    // Node's context object is the global: what the script defined shows on it.
    for (const key of Reflect.ownKeys(realm.global)) {
      if (!realm.builtins.has(key)) sandbox[key] = realm.global[key];
    }
  }
}

const filenameOf = (options) =>
  typeof options === "string" ? options : (options?.filename ?? "evalmachine.<anonymous>");

export class Script {
  #code;
  #filename;
  constructor(code, options) {
    this.#code = String(code);
    this.#filename = filenameOf(options);
  }
  runInContext(contextifiedObject, _options) {
    return runIn(contextifiedObject, this.#code, this.#filename);
  }
  runInNewContext(sandbox, _options) {
    return runIn(createContext(sandbox ?? {}), this.#code, this.#filename);
  }
  runInThisContext(_options) {
    return (0, eval)(this.#code);
  }
  createCachedData() {
    return new Uint8Array(0);
  }
}

export const runInContext = (code, contextifiedObject, options) => new Script(code, options).runInContext(contextifiedObject);
export const runInNewContext = (code, sandbox, options) => new Script(code, options).runInNewContext(sandbox);
export const runInThisContext = (code, options) => new Script(code, options).runInThisContext();

/** A function of `params` whose body is `code`, in `options.parsingContext` when given. */
export function compileFunction(code, params = [], options = {}) {
  const source = `(function (${params.join(", ")}) {\n${code}\n})`;
  if (options.parsingContext) return runIn(options.parsingContext, source, filenameOf(options));
  return (0, eval)(source);
}

export function measureMemory() {
  return Promise.reject(new Error("vm.measureMemory is not available inside pichamber"));
}

export const constants = {
  USE_MAIN_CONTEXT_DEFAULT_LOADER: Symbol("vm_dynamic_import_main_context_default"),
  DONT_CONTEXTIFY: Symbol("vm_context_no_contextify"),
};

export default {
  Script,
  createContext,
  isContext,
  runInContext,
  runInNewContext,
  runInThisContext,
  compileFunction,
  measureMemory,
  constants,
};
