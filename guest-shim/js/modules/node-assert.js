// node:assert for pichamber: Node's assertions and AssertionError (name, code, actual,
// expected, operator). Failure messages say what failed in Node's words, without Node's
// coloured diff of the two values.

import { inspect, isDeepStrictEqual } from "pichamber:node/util";

export class AssertionError extends Error {
  constructor(options = {}) {
    const { message, actual, expected, operator } = options;
    super(message ?? `${inspect(actual)} ${operator} ${inspect(expected)}`);
    this.name = "AssertionError";
    this.code = "ERR_ASSERTION";
    this.actual = actual;
    this.expected = expected;
    this.operator = operator;
    this.generatedMessage = message === undefined;
  }
}

function fail(actual, expected, message, operator, generated) {
  if (message instanceof Error) throw message;
  throw new AssertionError({ message: message ?? generated, actual, expected, operator });
}

const show = (v) => inspect(v, { depth: 4 });

function isDeepLooseEqual(a, b, seen = new Map()) {
  if (a == b && (typeof a !== "object" || a === null || typeof b !== "object" || b === null)) return true;
  if (Number.isNaN(a) && Number.isNaN(b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (seen.get(a) === b) return true;
  seen.set(a, b);
  if (a instanceof Date && b instanceof Date) return a.getTime() === b.getTime();
  if (a instanceof RegExp && b instanceof RegExp) return String(a) === String(b);
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (a instanceof Map && b instanceof Map) {
    if (a.size !== b.size) return false;
    for (const [k, v] of a) if (!b.has(k) || !isDeepLooseEqual(v, b.get(k), seen)) return false;
    return true;
  }
  if (a instanceof Set && b instanceof Set) {
    if (a.size !== b.size) return false;
    for (const v of a) if (!b.has(v) && ![...b].some((w) => isDeepLooseEqual(v, w, seen))) return false;
    return true;
  }
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  if (ka.length !== kb.length) return false;
  return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && isDeepLooseEqual(a[k], b[k], seen));
}

export function ok(value, message) {
  if (!value) {
    fail(value, true, message, "==", arguments.length === 0 ? "No value argument passed to `assert.ok()`" : "The expression evaluated to a falsy value:\n\n  assert.ok(" + show(value) + ")\n");
  }
}

export function equal(actual, expected, message) {
  if (!(actual == expected || (Number.isNaN(actual) && Number.isNaN(expected)))) {
    fail(actual, expected, message, "==", `${show(actual)} == ${show(expected)}`);
  }
}
export function notEqual(actual, expected, message) {
  if (actual == expected || (Number.isNaN(actual) && Number.isNaN(expected))) {
    fail(actual, expected, message, "!=", `${show(actual)} != ${show(expected)}`);
  }
}
export function strictEqual(actual, expected, message) {
  if (!Object.is(actual, expected)) {
    fail(actual, expected, message, "strictEqual", `Expected values to be strictly equal:\n\n${show(actual)} !== ${show(expected)}\n`);
  }
}
export function notStrictEqual(actual, expected, message) {
  if (Object.is(actual, expected)) {
    fail(actual, expected, message, "notStrictEqual", `Expected "actual" to be strictly unequal to: ${show(expected)}`);
  }
}
export function deepEqual(actual, expected, message) {
  if (!isDeepLooseEqual(actual, expected)) {
    fail(actual, expected, message, "deepEqual", `Expected values to be loosely deep-equal:\n\n${show(actual)}\n\nshould loosely deep-equal\n\n${show(expected)}`);
  }
}
export function notDeepEqual(actual, expected, message) {
  if (isDeepLooseEqual(actual, expected)) {
    fail(actual, expected, message, "notDeepEqual", `Expected "actual" not to be loosely deep-equal to:\n\n${show(expected)}`);
  }
}
export function deepStrictEqual(actual, expected, message) {
  if (!isDeepStrictEqual(actual, expected)) {
    fail(actual, expected, message, "deepStrictEqual", `Expected values to be strictly deep-equal:\n${show(actual)}\n\nshould equal\n\n${show(expected)}`);
  }
}
export function notDeepStrictEqual(actual, expected, message) {
  if (isDeepStrictEqual(actual, expected)) {
    fail(actual, expected, message, "notDeepStrictEqual", `Expected "actual" not to be strictly deep-equal to: ${show(expected)}`);
  }
}

export function match(string, regexp, message) {
  if (typeof string !== "string" || !regexp.test(string)) {
    fail(string, regexp, message, "match", `The input did not match the regular expression ${regexp}. Input:\n\n${show(string)}\n`);
  }
}
export function doesNotMatch(string, regexp, message) {
  if (typeof string === "string" && regexp.test(string)) {
    fail(string, regexp, message, "doesNotMatch", `The input was expected to not match the regular expression ${regexp}. Input:\n\n${show(string)}\n`);
  }
}

/** Whether `error` is what `expected` (a class, RegExp, validation function or object) says. */
function matches(error, expected) {
  if (expected === undefined) return true;
  if (expected instanceof RegExp) return expected.test(String(error));
  if (typeof expected === "function") {
    if (expected.prototype !== undefined && error instanceof expected) return true;
    if (Error.isPrototypeOf?.(expected) || expected === Error) return false;
    return expected.call({}, error) === true;
  }
  if (typeof expected === "object" && expected !== null) {
    return Object.keys(expected).every((key) =>
      expected[key] instanceof RegExp && typeof error?.[key] === "string"
        ? expected[key].test(error[key])
        : isDeepStrictEqual(error?.[key], expected[key]),
    );
  }
  return false;
}

const NO_ERROR = Symbol("no error");

function checkThrown(thrown, expected, message, operator) {
  if (typeof expected === "string") {
    message = expected;
    expected = undefined;
  }
  if (thrown === NO_ERROR) {
    fail(undefined, expected, message, operator, `Missing expected ${operator === "rejects" ? "rejection" : "exception"}${message ? `: ${message}` : "."}`);
  }
  if (!matches(thrown, expected)) {
    if (typeof expected === "function" && expected.prototype !== undefined && !(thrown instanceof expected)) throw thrown;
    fail(thrown, expected, message, operator, `The error did not match the expected value:\n\n${show(thrown)}`);
  }
}

export function throws(fn, expected, message) {
  let thrown = NO_ERROR;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  checkThrown(thrown, expected, message, "throws");
}

export async function rejects(promiseOrFn, expected, message) {
  let thrown = NO_ERROR;
  try {
    await (typeof promiseOrFn === "function" ? promiseOrFn() : promiseOrFn);
  } catch (err) {
    thrown = err;
  }
  checkThrown(thrown, expected, message, "rejects");
}

export function doesNotThrow(fn, expected, message) {
  try {
    fn();
  } catch (err) {
    const text = typeof expected === "string" ? expected : message;
    fail(err, expected, undefined, "doesNotThrow", `Got unwanted exception${text ? `: ${text}` : "."}\nActual message: "${err?.message}"`);
  }
}

export async function doesNotReject(promiseOrFn, expected, message) {
  try {
    await (typeof promiseOrFn === "function" ? promiseOrFn() : promiseOrFn);
  } catch (err) {
    const text = typeof expected === "string" ? expected : message;
    fail(err, expected, undefined, "doesNotReject", `Got unwanted rejection${text ? `: ${text}` : "."}\nActual message: "${err?.message}"`);
  }
}

export function ifError(value) {
  if (value !== null && value !== undefined) {
    if (value instanceof Error) throw value;
    fail(value, null, undefined, "ifError", `ifError got unwanted exception: ${show(value)}`);
  }
}

function failNow(message = "Failed") {
  if (message instanceof Error) throw message;
  throw new AssertionError({ message, operator: "fail" });
}
export { failNow as fail };

function assert(value, message) {
  if (arguments.length === 0) ok();
  else ok(value, message);
}
Object.assign(assert, {
  ok, equal, notEqual, strictEqual, notStrictEqual, deepEqual, notDeepEqual, deepStrictEqual,
  notDeepStrictEqual, match, doesNotMatch, throws, rejects, doesNotThrow, doesNotReject, ifError,
  fail: failNow, AssertionError,
});

/** assert/strict: the loose comparisons are the strict ones. */
function strictAssert(value, message) {
  if (arguments.length === 0) ok();
  else ok(value, message);
}
Object.assign(strictAssert, assert, {
  equal: strictEqual,
  notEqual: notStrictEqual,
  deepEqual: deepStrictEqual,
  notDeepEqual: notDeepStrictEqual,
});
strictAssert.strict = strictAssert;
assert.strict = strictAssert;

export const strict = strictAssert;
export default assert;
