// node:util for pichamber: promisify/callbackify, format, a reasonable inspect, types,
// isDeepStrictEqual, deprecate, inherits, and the TextEncoder/TextDecoder re-exports.

const customPromisify = Symbol.for("nodejs.util.promisify.custom");
const customInspect = Symbol.for("nodejs.util.inspect.custom");

// ---- promisify ---------------------------------------------------------------------------

export function promisify(original) {
  if (typeof original !== "function") {
    const err = new TypeError(`The "original" argument must be of type function`);
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  if (original[customPromisify]) {
    const fn = original[customPromisify];
    return Object.defineProperty(fn, customPromisify, {
      value: fn,
      enumerable: false,
      writable: false,
      configurable: true,
    });
  }
  function fn(...args) {
    return new Promise((resolve, reject) => {
      Reflect.apply(original, this, [
        ...args,
        (err, ...values) => {
          if (err) return reject(err);
          resolve(values[0]);
        },
      ]);
    });
  }
  Object.setPrototypeOf(fn, Object.getPrototypeOf(original));
  Object.defineProperty(fn, customPromisify, { value: fn, enumerable: false, writable: false, configurable: true });
  return Object.defineProperties(fn, Object.getOwnPropertyDescriptors(original));
}
promisify.custom = customPromisify;

export function callbackify(original) {
  if (typeof original !== "function") {
    const err = new TypeError(`The "original" argument must be of type function`);
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  return function (...args) {
    const cb = args.pop();
    if (typeof cb !== "function") {
      const err = new TypeError(`The last argument must be of type function`);
      err.code = "ERR_INVALID_ARG_TYPE";
      throw err;
    }
    Reflect.apply(original, this, args).then(
      (value) => queueMicrotask(() => cb(null, value)),
      (reason) => {
        if (!reason) {
          const e = new Error("Promise was rejected with a falsy value");
          e.code = "ERR_FALSY_VALUE_REJECTION";
          e.reason = reason;
          reason = e;
        }
        queueMicrotask(() => cb(reason));
      },
    );
  };
}

// ---- types -------------------------------------------------------------------------------

const tag = (v) => Object.prototype.toString.call(v);
const TypedArray = Object.getPrototypeOf(Uint8Array);

export const types = {
  isPromise: (v) => v instanceof Promise,
  isRegExp: (v) => v instanceof RegExp,
  isDate: (v) => v instanceof Date,
  isMap: (v) => v instanceof Map,
  isSet: (v) => v instanceof Set,
  isWeakMap: (v) => v instanceof WeakMap,
  isWeakSet: (v) => v instanceof WeakSet,
  isMapIterator: (v) => tag(v) === "[object Map Iterator]",
  isSetIterator: (v) => tag(v) === "[object Set Iterator]",
  isNativeError: (v) => v instanceof Error,
  isArrayBuffer: (v) => v instanceof ArrayBuffer,
  isSharedArrayBuffer: (v) => typeof SharedArrayBuffer !== "undefined" && v instanceof SharedArrayBuffer,
  isAnyArrayBuffer: (v) =>
    v instanceof ArrayBuffer || (typeof SharedArrayBuffer !== "undefined" && v instanceof SharedArrayBuffer),
  isArrayBufferView: (v) => ArrayBuffer.isView(v),
  isDataView: (v) => v instanceof DataView,
  isTypedArray: (v) => v instanceof TypedArray,
  isUint8Array: (v) => v instanceof Uint8Array,
  isUint8ClampedArray: (v) => v instanceof Uint8ClampedArray,
  isUint16Array: (v) => v instanceof Uint16Array,
  isUint32Array: (v) => v instanceof Uint32Array,
  isInt8Array: (v) => v instanceof Int8Array,
  isInt16Array: (v) => v instanceof Int16Array,
  isInt32Array: (v) => v instanceof Int32Array,
  isFloat32Array: (v) => v instanceof Float32Array,
  isFloat64Array: (v) => v instanceof Float64Array,
  isBigInt64Array: (v) => v instanceof BigInt64Array,
  isBigUint64Array: (v) => v instanceof BigUint64Array,
  isAsyncFunction: (v) => typeof v === "function" && tag(v) === "[object AsyncFunction]",
  isGeneratorFunction: (v) =>
    typeof v === "function" &&
    (tag(v) === "[object GeneratorFunction]" || tag(v) === "[object AsyncGeneratorFunction]"),
  isGeneratorObject: (v) => tag(v) === "[object Generator]",
  isBoxedPrimitive: (v) =>
    v instanceof Number || v instanceof String || v instanceof Boolean || v instanceof BigInt || v instanceof Symbol,
  isNumberObject: (v) => v instanceof Number,
  isStringObject: (v) => v instanceof String,
  isBooleanObject: (v) => v instanceof Boolean,
  isBigIntObject: (v) => typeof v === "object" && v instanceof BigInt,
  isSymbolObject: (v) => typeof v === "object" && v instanceof Symbol,
  isProxy: () => false,
  isExternal: () => false,
  isModuleNamespaceObject: (v) => tag(v) === "[object Module]",
  isArgumentsObject: (v) => tag(v) === "[object Arguments]",
  isKeyObject: () => false,
  isCryptoKey: () => false,
};

// Legacy helpers
export const isArray = Array.isArray;
export const isBoolean = (v) => typeof v === "boolean";
export const isNull = (v) => v === null;
export const isNullOrUndefined = (v) => v == null;
export const isNumber = (v) => typeof v === "number";
export const isString = (v) => typeof v === "string";
export const isSymbol = (v) => typeof v === "symbol";
export const isUndefined = (v) => v === undefined;
export const isRegExp = types.isRegExp;
export const isObject = (v) => v !== null && typeof v === "object";
export const isDate = types.isDate;
export const isError = (v) => v instanceof Error;
export const isFunction = (v) => typeof v === "function";
export const isPrimitive = (v) => v === null || (typeof v !== "object" && typeof v !== "function");

// ---- inspect -----------------------------------------------------------------------------

const defaultOptions = {
  showHidden: false,
  depth: 2,
  colors: false,
  customInspect: true,
  showProxy: false,
  maxArrayLength: 100,
  maxStringLength: 10000,
  breakLength: 80,
  compact: 3,
  sorted: false,
  getters: false,
  numericSeparator: false,
};

const identRe = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function quote(str) {
  let q = "'";
  if (str.includes("'")) {
    if (!str.includes('"')) q = '"';
    else if (!str.includes("`") && !str.includes("${")) q = "`";
  }
  const escaped = str.replace(/[\\\n\r\t\b\f\v\x00-\x1f\x7f]/g, (c) => {
    switch (c) {
      case "\\":
        return "\\\\";
      case "\n":
        return "\\n";
      case "\r":
        return "\\r";
      case "\t":
        return "\\t";
      case "\b":
        return "\\b";
      case "\f":
        return "\\f";
      case "\v":
        return "\\v";
      default:
        return `\\x${c.charCodeAt(0).toString(16).padStart(2, "0").toUpperCase()}`;
    }
  });
  return q + (q === "'" ? escaped.replace(/'/g, "\\'") : escaped) + q;
}

function formatKey(key) {
  if (typeof key === "symbol") return `[${key.toString()}]`;
  return identRe.test(key) ? key : quote(key);
}

function formatNumber(n) {
  return Object.is(n, -0) ? "-0" : String(n);
}

function formatPrimitive(v, ctx) {
  switch (typeof v) {
    case "string": {
      let s = v;
      let trailer = "";
      if (s.length > ctx.maxStringLength) {
        trailer = `... ${s.length - ctx.maxStringLength} more character${s.length - ctx.maxStringLength > 1 ? "s" : ""}`;
        s = s.slice(0, ctx.maxStringLength);
      }
      return quote(s) + trailer;
    }
    case "number":
      return formatNumber(v);
    case "bigint":
      return `${v}n`;
    case "boolean":
      return String(v);
    case "undefined":
      return "undefined";
    case "symbol":
      return v.toString();
  }
  return String(v);
}

function constructorName(obj) {
  let proto = obj;
  while (proto) {
    const desc = Object.getOwnPropertyDescriptor(proto, "constructor");
    if (desc && typeof desc.value === "function" && desc.value.name !== "") return desc.value.name;
    proto = Object.getPrototypeOf(proto);
  }
  return null;
}

function functionBase(fn) {
  const src = Function.prototype.toString.call(fn);
  if (src.startsWith("class") && /^class\b/.test(src)) {
    let base = `[class ${fn.name || "(anonymous)"}`;
    const sup = Object.getPrototypeOf(fn);
    if (sup && sup.name) base += ` extends ${sup.name}`;
    return `${base}]`;
  }
  let type = "Function";
  if (types.isGeneratorFunction(fn)) type = `${tag(fn).includes("Async") ? "Async" : ""}GeneratorFunction`;
  else if (types.isAsyncFunction(fn)) type = "AsyncFunction";
  return fn.name ? `[${type}: ${fn.name}]` : `[${type} (anonymous)]`;
}

function formatValue(ctx, value, recurseTimes, typedArrayKey) {
  if (value === null) return "null";
  if (typeof value !== "object" && typeof value !== "function") return formatPrimitive(value, ctx);

  if (ctx.customInspect) {
    const custom = value[customInspect];
    if (typeof custom === "function" && custom !== inspect) {
      const depth = ctx.depth === null ? null : ctx.depth - recurseTimes;
      const ret = custom.call(value, depth, { ...ctx, stylize: (s) => s }, inspect);
      if (ret !== value) return typeof ret === "string" ? ret : formatValue(ctx, ret, recurseTimes);
    }
  }

  if (ctx.seen.includes(value)) {
    let index = ctx.circular.get(value);
    if (index === undefined) {
      index = ctx.circular.size + 1;
      ctx.circular.set(value, index);
    }
    return `[Circular *${index}]`;
  }
  return formatRaw(ctx, value, recurseTimes, typedArrayKey);
}

function ownKeys(value, ctx, skipIndices) {
  let keys = ctx.showHidden ? Object.getOwnPropertyNames(value) : Object.keys(value);
  if (skipIndices) keys = keys.filter((k) => !/^(0|[1-9][0-9]*)$/.test(k) || Number(k) >= value.length);
  const syms = Object.getOwnPropertySymbols(value).filter(
    (s) => ctx.showHidden || Object.getOwnPropertyDescriptor(value, s).enumerable,
  );
  keys = keys.concat(syms);
  if (ctx.sorted) keys.sort(typeof ctx.sorted === "function" ? ctx.sorted : undefined);
  return keys;
}

function formatProperty(ctx, value, recurseTimes, key, isArrayLike) {
  const desc = Object.getOwnPropertyDescriptor(value, key) || { value: value[key], enumerable: true };
  let str;
  if (desc.value !== undefined || !("get" in desc)) {
    ctx.indentationLvl += 2;
    str = formatValue(ctx, desc.value, recurseTimes);
    ctx.indentationLvl -= 2;
  } else if (desc.get !== undefined) {
    str = desc.set !== undefined ? "[Getter/Setter]" : "[Getter]";
  } else {
    str = desc.set !== undefined ? "[Setter]" : "undefined";
  }
  if (isArrayLike) return str;
  const name = desc.enumerable === false ? `[${formatKey(key)}]` : formatKey(key);
  return `${name}: ${str}`;
}

function formatRaw(ctx, value, recurseTimes, typedArrayKey) {
  let keys;
  let base = "";
  let braces;
  let entries = [];
  let extrasType = "object";
  const ctor = constructorName(value);
  const prefixFor = (fallback, size) => {
    let p =
      ctor === null ? `[${fallback}: null prototype] ` : ctor !== fallback ? `${ctor} [${fallback}] ` : `${fallback} `;
    if (size !== undefined) p = `${p.trimEnd()}(${size}) `;
    return p;
  };

  if (typeof value === "function") {
    base = functionBase(value);
    keys = ownKeys(value, ctx).filter((k) => k !== "prototype" || ctx.showHidden);
    if (keys.length === 0) return base;
    braces = ["{", "}"];
  } else if (Array.isArray(value)) {
    keys = ownKeys(value, ctx, true);
    const prefix = ctor !== "Array" ? prefixFor("Array", value.length) : "";
    braces = [`${prefix}[`, "]"];
    extrasType = "array";
    if (value.length === 0 && keys.length === 0) return `${braces[0]}]`;
    if (recurseTimes > ctx.depth && ctx.depth !== null) return `[Array]`;
    ctx.currentDepth = recurseTimes;
    entries = formatList(ctx, value, recurseTimes);
  } else if (value instanceof TypedArray) {
    keys = ownKeys(value, ctx, true);
    const name = ctor || value[Symbol.toStringTag];
    braces = [`${name}(${value.length}) [`, "]"];
    extrasType = "array";
    if (value.length === 0 && keys.length === 0) return `${braces[0]}]`;
    const max = Math.min(value.length, ctx.maxArrayLength);
    for (let i = 0; i < max; i++) entries.push(formatPrimitive(value[i], ctx));
    if (value.length > max) entries.push(`... ${value.length - max} more item${value.length - max > 1 ? "s" : ""}`);
  } else if (value instanceof Set) {
    keys = ownKeys(value, ctx);
    braces = [`${prefixFor("Set", value.size)}{`, "}"];
    if (value.size === 0 && keys.length === 0) return `${braces[0]}}`;
    if (recurseTimes > ctx.depth && ctx.depth !== null) return `[Set]`;
    ctx.currentDepth = recurseTimes;
    ctx.seen.push(value);
    ctx.indentationLvl += 2;
    for (const v of value) entries.push(formatValue(ctx, v, recurseTimes + 1));
    ctx.indentationLvl -= 2;
    ctx.seen.pop();
    extrasType = "array";
  } else if (value instanceof Map) {
    keys = ownKeys(value, ctx);
    braces = [`${prefixFor("Map", value.size)}{`, "}"];
    if (value.size === 0 && keys.length === 0) return `${braces[0]}}`;
    if (recurseTimes > ctx.depth && ctx.depth !== null) return `[Map]`;
    ctx.currentDepth = recurseTimes;
    ctx.seen.push(value);
    ctx.indentationLvl += 2;
    for (const [k, v] of value) {
      entries.push(`${formatValue(ctx, k, recurseTimes + 1)} => ${formatValue(ctx, v, recurseTimes + 1)}`);
    }
    ctx.indentationLvl -= 2;
    ctx.seen.pop();
  } else {
    keys = ownKeys(value, ctx);
    braces = ["{", "}"];
    if (value instanceof Error) {
      base = formatError(value, ctx);
      keys = keys.filter((k) => k !== "stack" && k !== "message");
      if (keys.length === 0) return base;
    } else if (value instanceof Date) {
      base = Number.isNaN(value.getTime()) ? "Invalid Date" : value.toISOString();
      if (keys.length === 0) return base;
    } else if (value instanceof RegExp) {
      base = RegExp.prototype.toString.call(value);
      if (keys.length === 0) return base;
    } else if (value instanceof Promise) {
      braces[0] = `${prefixFor("Promise")}{`;
      entries.push("<pending>");
    } else if (value instanceof WeakMap || value instanceof WeakSet) {
      return `${prefixFor(value instanceof WeakMap ? "WeakMap" : "WeakSet")}{ <items unknown> }`;
    } else if (value instanceof ArrayBuffer) {
      const bytes = new Uint8Array(value);
      const hex = Array.from(bytes.subarray(0, 50), (b) => b.toString(16).padStart(2, "0")).join(" ");
      return `ArrayBuffer { [Uint8Contents]: <${hex}${bytes.length > 50 ? ` ... ${bytes.length - 50} more bytes` : ""}>, byteLength: ${bytes.length} }`;
    } else if (
      value instanceof Number ||
      value instanceof String ||
      value instanceof Boolean ||
      (typeof BigInt === "function" && value instanceof BigInt)
    ) {
      const prim = value.valueOf();
      const type =
        value instanceof Number
          ? "Number"
          : value instanceof String
            ? "String"
            : value instanceof Boolean
              ? "Boolean"
              : "BigInt";
      base = `[${type}: ${formatPrimitive(prim, ctx)}]`;
      if (value instanceof String) keys = keys.filter((k) => !/^(0|[1-9][0-9]*)$/.test(k) && k !== "length");
      if (keys.length === 0) return base;
    } else if (tag(value) === "[object Module]") {
      braces[0] = "[Module: null prototype] {";
    } else if (ctor === "Object") {
      if (tag(value) === "[object Arguments]") braces[0] = "[Arguments] [";
      const tg = value[Symbol.toStringTag];
      if (typeof tg === "string" && tg !== "") braces[0] = `Object [${tg}] {`;
      if (keys.length === 0) return `${braces[0]}}`;
    } else {
      const tg = value[Symbol.toStringTag];
      const name = ctor === null ? "[Object: null prototype]" : ctor;
      braces[0] = `${name}${typeof tg === "string" && tg !== "" && tg !== ctor ? ` [${tg}]` : ""} {`;
      if (keys.length === 0) return `${braces[0]}}`;
    }
  }

  if (recurseTimes > ctx.depth && ctx.depth !== null) {
    const name = ctor || "Object";
    return `[${name}]`;
  }

  ctx.seen.push(value);
  ctx.currentDepth = recurseTimes;
  for (const key of keys) entries.push(formatProperty(ctx, value, recurseTimes + 1, key, false));
  ctx.seen.pop();

  const index = ctx.circular.get(value);
  if (index !== undefined) {
    const reference = `<ref *${index}> `;
    if (base === "") braces[0] = reference + braces[0];
    else base = reference + base;
  }
  return reduceToSingleString(ctx, entries, base, braces, extrasType, recurseTimes);
}

function formatList(ctx, value, recurseTimes) {
  const out = [];
  const max = Math.min(value.length, ctx.maxArrayLength);
  ctx.seen.push(value);
  let holes = 0;
  for (let i = 0; i < max; i++) {
    if (!Object.prototype.hasOwnProperty.call(value, i)) {
      holes++;
      continue;
    }
    if (holes) {
      out.push(`<${holes} empty item${holes > 1 ? "s" : ""}>`);
      holes = 0;
    }
    out.push(formatProperty(ctx, value, recurseTimes + 1, String(i), true));
  }
  if (holes) out.push(`<${holes} empty item${holes > 1 ? "s" : ""}>`);
  ctx.seen.pop();
  if (value.length > max) out.push(`... ${value.length - max} more item${value.length - max > 1 ? "s" : ""}`);
  return out;
}

function formatError(err, ctx) {
  const stack = typeof err.stack === "string" && err.stack ? err.stack : `${err.name || "Error"}: ${err.message}`;
  let out = stack.includes(err.message) || !err.message ? stack : `${err.name}: ${err.message}\n${stack}`;
  if (!out.startsWith(err.name || "Error") && !out.includes(`${err.name}:`))
    out = `${err.name}: ${err.message}\n${out}`;
  if (ctx.indentationLvl !== 0) {
    const indent = " ".repeat(ctx.indentationLvl);
    out = out.split("\n").join(`\n${indent}`);
  }
  return err.stack ? out.trimEnd() : `[${out}]`;
}

function reduceToSingleString(ctx, output, base, braces, extrasType, recurseTimes) {
  if (ctx.compact !== true) {
    if (typeof ctx.compact === "number" && ctx.compact >= 1) {
      const entries = output.length;
      if (ctx.currentDepth - recurseTimes < ctx.compact && entries === output.length) {
        const start = output.length + ctx.indentationLvl + braces[0].length + base.length + 10;
        if (isBelowBreakLength(ctx, output, start, base)) {
          const joined = output.join(", ");
          if (!joined.includes("\n")) {
            return `${base ? `${base} ` : ""}${braces[0]} ${joined} ${braces[1]}`;
          }
        }
      }
    }
    const indentation = `\n${" ".repeat(ctx.indentationLvl)}`;
    return `${base ? `${base} ` : ""}${braces[0]}${indentation}  ${output.join(`,${indentation}  `)}${indentation}${braces[1]}`;
  }
  if (isBelowBreakLength(ctx, output, 0, base)) {
    return `${braces[0]}${base ? ` ${base}` : ""} ${output.join(", ")} ${braces[1]}`;
  }
  const indentation = `\n${" ".repeat(ctx.indentationLvl)}`;
  const ln = base === "" && braces[0].length === 1 ? " " : `${base ? ` ${base}` : ""}\n${indentation}  `;
  return `${braces[0]}${ln}${output.join(`,${indentation}  `)} ${braces[1]}`;
}

function isBelowBreakLength(ctx, output, start, base) {
  let totalLength = output.length + start;
  if (totalLength + output.length > ctx.breakLength) return false;
  for (const entry of output) {
    totalLength += entry.length;
    if (totalLength > ctx.breakLength) return false;
  }
  return base === "" || !base.includes("\n");
}

export function inspect(value, opts, ...rest) {
  const ctx = {
    ...defaultOptions,
    ...inspect.defaultOptions,
    seen: [],
    circular: new Map(),
    indentationLvl: 0,
    currentDepth: 0,
  };
  if (typeof opts === "boolean") {
    ctx.showHidden = opts;
    if (rest.length >= 1 && rest[0] !== undefined) ctx.depth = rest[0];
    if (rest.length >= 2 && rest[1] !== undefined) ctx.colors = rest[1];
  } else if (opts && typeof opts === "object") {
    Object.assign(ctx, opts);
  }
  if (ctx.depth === Infinity) ctx.depth = null;
  if (ctx.maxArrayLength === null) ctx.maxArrayLength = Infinity;
  if (ctx.maxStringLength === null) ctx.maxStringLength = Infinity;
  return formatValue(ctx, value, 0);
}
inspect.custom = customInspect;
inspect.defaultOptions = { ...defaultOptions };
inspect.colors = Object.assign(Object.create(null), {
  reset: [0, 0],
  bold: [1, 22],
  dim: [2, 22],
  italic: [3, 23],
  underline: [4, 24],
  blink: [5, 25],
  inverse: [7, 27],
  hidden: [8, 28],
  strikethrough: [9, 29],
  black: [30, 39],
  red: [31, 39],
  green: [32, 39],
  yellow: [33, 39],
  blue: [34, 39],
  magenta: [35, 39],
  cyan: [36, 39],
  white: [37, 39],
  gray: [90, 39],
  grey: [90, 39],
});
inspect.styles = Object.assign(Object.create(null), {
  special: "cyan",
  number: "yellow",
  bigint: "yellow",
  boolean: "yellow",
  undefined: "grey",
  null: "bold",
  string: "green",
  symbol: "green",
  date: "magenta",
  regexp: "red",
  module: "underline",
});

// ---- format ------------------------------------------------------------------------------

function hasBuiltInToString(value) {
  let proto = value;
  while (proto !== null && proto !== undefined) {
    if (Object.prototype.hasOwnProperty.call(proto, "toString")) {
      return (
        proto === Object.prototype ||
        proto === Array.prototype ||
        proto === Error.prototype ||
        proto === Date.prototype ||
        proto === RegExp.prototype ||
        proto === Function.prototype
      );
    }
    proto = Object.getPrototypeOf(proto);
  }
  return true;
}

export function formatWithOptions(inspectOptions, ...args) {
  const first = args[0];
  let a = 0;
  let str = "";
  let join = "";
  if (typeof first === "string") {
    if (args.length === 1) return first;
    let tempStr;
    let lastPos = 0;
    for (let i = 0; i < first.length - 1; i++) {
      if (first.charCodeAt(i) === 37) {
        const nextChar = first.charCodeAt(++i);
        if (a + 1 !== args.length) {
          switch (nextChar) {
            case 115: {
              const tempArg = args[++a];
              if (typeof tempArg === "number") tempStr = formatNumber(tempArg);
              else if (typeof tempArg === "bigint") tempStr = `${tempArg}n`;
              else if (typeof tempArg !== "object" || tempArg === null || !hasBuiltInToString(tempArg))
                tempStr = String(tempArg);
              else tempStr = inspect(tempArg, { ...inspectOptions, depth: 0, colors: false, compact: 3 });
              break;
            }
            case 106:
              tempStr = tryStringify(args[++a]);
              break;
            case 100: {
              const tempNum = args[++a];
              if (typeof tempNum === "bigint") tempStr = `${tempNum}n`;
              else if (typeof tempNum === "symbol") tempStr = "NaN";
              else tempStr = formatNumber(Number(tempNum));
              break;
            }
            case 79:
              tempStr = inspect(args[++a], inspectOptions);
              break;
            case 111:
              tempStr = inspect(args[++a], { ...inspectOptions, showHidden: true, showProxy: true, depth: 4 });
              break;
            case 105: {
              const tempInteger = args[++a];
              if (typeof tempInteger === "bigint") tempStr = `${tempInteger}n`;
              else if (typeof tempInteger === "symbol") tempStr = "NaN";
              else tempStr = formatNumber(Number.parseInt(tempInteger));
              break;
            }
            case 102: {
              const tempFloat = args[++a];
              if (typeof tempFloat === "symbol") tempStr = "NaN";
              else tempStr = formatNumber(Number.parseFloat(tempFloat));
              break;
            }
            case 99:
              a += 1;
              tempStr = "";
              break;
            case 37:
              str += first.slice(lastPos, i);
              lastPos = i + 1;
              continue;
            default:
              continue;
          }
          if (lastPos !== i - 1) str += first.slice(lastPos, i - 1);
          str += tempStr;
          lastPos = i + 1;
        } else if (nextChar === 37) {
          str += first.slice(lastPos, i);
          lastPos = i + 1;
        }
      }
    }
    if (lastPos !== 0) {
      a++;
      join = " ";
      if (lastPos < first.length) str += first.slice(lastPos);
    }
  }
  while (a < args.length) {
    const value = args[a];
    str += join;
    str += typeof value !== "string" ? inspect(value, inspectOptions) : value;
    join = " ";
    a++;
  }
  return str;
}

function tryStringify(arg) {
  try {
    return JSON.stringify(arg);
  } catch (err) {
    if (err instanceof TypeError && /circular/i.test(err.message)) return "[Circular]";
    throw err;
  }
}

export function format(...args) {
  return formatWithOptions(undefined, ...args);
}

// ---- deep equality -----------------------------------------------------------------------

export function isDeepStrictEqual(a, b) {
  return deepEqual(a, b, new Map());
}

function deepEqual(a, b, memo) {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) {
    return false;
  }
  if (Object.getPrototypeOf(a) !== Object.getPrototypeOf(b)) return false;
  if (tag(a) !== tag(b)) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const seen = memo.get(a);
  if (seen && seen.has(b)) return true;
  if (seen) seen.add(b);
  else memo.set(a, new Set([b]));

  if (a instanceof Date) {
    if (!Object.is(a.getTime(), b.getTime())) return false;
  } else if (a instanceof RegExp) {
    if (a.source !== b.source || a.flags !== b.flags || a.lastIndex !== b.lastIndex) return false;
  } else if (a instanceof Error) {
    if (a.message !== b.message || a.name !== b.name) return false;
  } else if (ArrayBuffer.isView(a)) {
    if (a.byteLength !== b.byteLength) return false;
    const x = new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
    const y = new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  } else if (a instanceof ArrayBuffer) {
    if (!deepEqual(new Uint8Array(a), new Uint8Array(b), memo)) return false;
  } else if (
    a instanceof Number ||
    a instanceof String ||
    a instanceof Boolean ||
    a instanceof BigInt ||
    a instanceof Symbol
  ) {
    if (!Object.is(a.valueOf(), b.valueOf())) return false;
  }

  if (a instanceof Map) {
    if (a.size !== b.size) return false;
    outer: for (const [k, v] of a) {
      if (b.has(k)) {
        if (!deepEqual(v, b.get(k), memo)) return false;
        continue;
      }
      if (typeof k !== "object" || k === null) return false;
      for (const [k2, v2] of b) {
        if (deepEqual(k, k2, memo) && deepEqual(v, v2, memo)) continue outer;
      }
      return false;
    }
  } else if (a instanceof Set) {
    if (a.size !== b.size) return false;
    outer: for (const v of a) {
      if (b.has(v)) continue;
      if (typeof v !== "object" || v === null) return false;
      for (const v2 of b) if (deepEqual(v, v2, memo)) continue outer;
      return false;
    }
  }

  const keysA = ownEnumerableKeys(a);
  const keysB = ownEnumerableKeys(b);
  if (keysA.length !== keysB.length) return false;
  for (const key of keysA) {
    if (!Object.prototype.propertyIsEnumerable.call(b, key)) return false;
    if (ArrayBuffer.isView(a) && /^(0|[1-9][0-9]*)$/.test(String(key))) continue;
    if (!deepEqual(a[key], b[key], memo)) return false;
  }
  return true;
}

function ownEnumerableKeys(o) {
  const keys = Object.keys(o);
  for (const s of Object.getOwnPropertySymbols(o)) if (Object.prototype.propertyIsEnumerable.call(o, s)) keys.push(s);
  return keys;
}

// ---- misc --------------------------------------------------------------------------------

const deprecationsWarned = new Set();
export function deprecate(fn, msg, code) {
  let warned = false;
  function deprecated(...args) {
    if (!warned && !(code && deprecationsWarned.has(code))) {
      warned = true;
      if (code) deprecationsWarned.add(code);
      const p = globalThis.process;
      if (!p?.noDeprecation) {
        if (typeof p?.emitWarning === "function") p.emitWarning(msg, "DeprecationWarning", code);
        else console.warn(`${code ? `[${code}] ` : ""}DeprecationWarning: ${msg}`);
      }
    }
    return new.target ? Reflect.construct(fn, args, new.target) : Reflect.apply(fn, this, args);
  }
  Object.setPrototypeOf(deprecated, fn);
  if (fn.prototype) deprecated.prototype = fn.prototype;
  return deprecated;
}

export function inherits(ctor, superCtor) {
  if (typeof ctor !== "function" || typeof superCtor !== "function" || superCtor.prototype === undefined) {
    const err = new TypeError(`The "ctor" and "superCtor" arguments must be functions with a prototype`);
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  Object.defineProperty(ctor, "super_", { value: superCtor, writable: true, configurable: true });
  Object.setPrototypeOf(ctor.prototype, superCtor.prototype);
}

export function debuglog(section) {
  const enabled = new RegExp(
    `^(${String(globalThis.process?.env?.NODE_DEBUG || "")
      .replace(/[|\\{}()[\]^$+?.]/g, "\\$&")
      .replace(/\*/g, ".*")
      .replace(/,/g, "$|^")})$`,
    "i",
  ).test(section);
  const fn = (...args) => {
    if (enabled) console.error(`${section.toUpperCase()}: ${format(...args)}`);
  };
  fn.enabled = enabled;
  return fn;
}
export const debug = debuglog;

export function stripVTControlCharacters(str) {
  return String(str).replace(
    /[\u001B\u009B][[\]()#;?]*(?:(?:(?:(?:;[-a-zA-Z\d/#&.:=?%@~_]+)*|[a-zA-Z\d]+(?:;[-a-zA-Z\d/#&.:=?%@~_]*)*)?\u0007)|(?:(?:\d{1,4}(?:;\d{0,4})*)?[\dA-PR-TZcf-ntqry=><~]))/g,
    "",
  );
}

export function toUSVString(str) {
  return String(str).replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, "\ufffd");
}

export function getSystemErrorName(code) {
  return (
    { [-2]: "ENOENT", [-13]: "EACCES", [-17]: "EEXIST", [-20]: "ENOTDIR", [-21]: "EISDIR", [-39]: "ENOTEMPTY" }[code] ??
    `Unknown system error ${code}`
  );
}

const styleCodes = inspect.colors;
export function styleText(format, text) {
  const formats = Array.isArray(format) ? format : [format];
  let out = String(text);
  for (const f of formats) {
    const c = styleCodes[f];
    if (!c) {
      const err = new TypeError(
        `The argument 'format' must be one of: ${Object.keys(styleCodes).join(", ")}. Received ${f}`,
      );
      err.code = "ERR_INVALID_ARG_VALUE";
      throw err;
    }
    out = `\x1b[${c[0]}m${out}\x1b[${c[1]}m`;
  }
  return out;
}

export function aborted(signal, _resource) {
  return new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}

export function parseEnv(content) {
  const out = {};
  for (const line of String(content).split(/\r?\n/)) {
    const m = /^\s*(?:export\s+)?([\w.-]+)\s*=\s*(.*)?\s*$/.exec(line);
    if (!m) continue;
    let v = (m[2] ?? "").trim();
    if (/^(['"`])[\s\S]*\1$/.test(v)) v = v.slice(1, -1).replace(/\\n/g, m[2].trim()[0] === '"' ? "\n" : "\\n");
    else v = v.replace(/\s+#.*$/, "");
    out[m[1]] = v;
  }
  return out;
}

export const TextEncoder = globalThis.TextEncoder;
export const TextDecoder = globalThis.TextDecoder;

export default {
  promisify,
  callbackify,
  types,
  inspect,
  format,
  formatWithOptions,
  isDeepStrictEqual,
  deprecate,
  inherits,
  debuglog,
  debug,
  stripVTControlCharacters,
  toUSVString,
  getSystemErrorName,
  styleText,
  aborted,
  parseEnv,
  TextEncoder,
  TextDecoder,
  isArray,
  isBoolean,
  isNull,
  isNullOrUndefined,
  isNumber,
  isString,
  isSymbol,
  isUndefined,
  isRegExp,
  isObject,
  isDate,
  isError,
  isFunction,
  isPrimitive,
};
