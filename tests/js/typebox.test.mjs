// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// typebox.js against the real `typebox` 1.x package from the oracle ($PI_ORACLE_DIR).
import { test } from "node:test";
import assert from "node:assert/strict";
import TypeDefault, * as mine from "pichamber:typebox";
import { importOracle, oracleSkip } from "./oracle.mjs";

const real = await importOracle("typebox/build/index.mjs");

// Structural description including hidden (non-enumerable) keys such as ~kind and ~optional.
function describe(value, seen = new Set()) {
  if (typeof value === "function") return "<function>";
  if (typeof value !== "object" || value === null) return typeof value === "bigint" ? `${value}n` : value;
  if (seen.has(value)) return "<circular>";
  seen.add(value);
  if (Array.isArray(value)) return value.map((v) => describe(v, seen));
  const out = {};
  for (const key of Reflect.ownKeys(value)) {
    const d = Object.getOwnPropertyDescriptor(value, key);
    const name = typeof key === "symbol" ? key.toString() : key;
    out[d.enumerable ? name : `(hidden)${name}`] = describe(d.value, seen);
  }
  seen.delete(value);
  return out;
}

function json(v) {
  return JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? `${x}n` : x));
}

// Each case builds a schema from a Type namespace; run against both implementations.
const cases = {
  string: (T) => T.String(),
  stringOpts: (T) =>
    T.String({ description: "A name", minLength: 1, maxLength: 10, pattern: "^a", format: "email", default: "a" }),
  number: (T) => T.Number({ minimum: 0, maximum: 10, exclusiveMaximum: 11, multipleOf: 2 }),
  integer: (T) => T.Integer({ default: 3 }),
  boolean: (T) => T.Boolean({ description: "flag" }),
  null: (T) => T.Null(),
  undefined: (T) => T.Undefined(),
  void: (T) => T.Void(),
  any: (T) => T.Any({ description: "x" }),
  unknown: (T) => T.Unknown(),
  never: (T) => T.Never(),
  bigint: (T) => T.BigInt(),
  symbol: (T) => T.Symbol(),
  literals: (T) => [
    T.Literal("a"),
    T.Literal(1),
    T.Literal(true),
    T.Literal(10n),
    T.Literal("x", { description: "d" }),
  ],
  enumArray: (T) => T.Enum(["a", "b", 3]),
  enumTs: (T) => T.Enum({ A: "a", B: "b" }),
  enumNumericTs: (T) => T.Enum({ 0: "Zero", 1: "One", Zero: 0, One: 1 }),
  array: (T) => T.Array(T.String(), { minItems: 1, uniqueItems: true }),
  tuple: (T) => T.Tuple([T.String(), T.Number()], { description: "pair" }),
  emptyTuple: (T) => T.Tuple([]),
  object: (T) =>
    T.Object(
      {
        path: T.String({ description: "Path to the file" }),
        offset: T.Optional(T.Number({ description: "Line" })),
        limit: T.Optional(T.Integer()),
        flags: T.Array(T.Union([T.Literal("a"), T.Literal("b")])),
        ro: T.Readonly(T.String()),
        roOpt: T.Readonly(T.Optional(T.Boolean())),
        nested: T.Object({ x: T.Number() }, { additionalProperties: false }),
      },
      { additionalProperties: false, description: "params" },
    ),
  objectAllOptional: (T) => T.Object({ a: T.Optional(T.String()) }),
  objectEmpty: (T) => T.Object({}),
  union: (T) => T.Union([T.String(), T.Number(), T.Null()], { description: "u" }),
  unionEmpty: (T) => T.Union([]),
  intersect: (T) =>
    T.Intersect([T.Object({ a: T.String() }), T.Object({ b: T.Number() })], { unevaluatedProperties: false }),
  record: (T) => T.Record(T.String(), T.Number()),
  recordNumberKey: (T) => T.Record(T.Number(), T.String()),
  recordIntegerKey: (T) => T.Record(T.Integer(), T.String(), { description: "r" }),
  recordLiteralUnionKey: (T) => T.Record(T.Union([T.Literal("a"), T.Literal("b")]), T.Boolean()),
  recordLiteralKey: (T) => T.Record(T.Literal("only"), T.Boolean()),
  recordEnumKey: (T) => T.Record(T.Enum(["x", "y"]), T.Number()),
  recordBooleanKey: (T) => T.Record(T.Boolean(), T.Number()),
  recordAnyKey: (T) => T.Record(T.Any(), T.Number()),
  recordPatternKey: (T) => T.Record(T.String({ pattern: "^x-" }), T.Number()),
  recordMixedUnionKey: (T) => T.Record(T.Union([T.Literal("a"), T.String()]), T.Number()),
  optional: (T) => T.Optional(T.String({ description: "d" })),
  readonly: (T) => T.Readonly(T.Number()),
  readonlyOptional: (T) => T.Readonly(T.Optional(T.Number())),
  immutable: (T) => T.Immutable(T.Array(T.String())),
  ref: (T) => T.Ref("Node", { description: "ref" }),
  this: (T) => T.This(),
  unsafe: (T) => T.Unsafe({ type: "string", enum: ["a", "b"], description: "e" }),
  unsafeNested: (T) => T.Object({ op: T.Unsafe({ type: "string", enum: ["add"] }) }),
  function: (T) => T.Function([T.String()], T.Number()),
  constructor: (T) => T.Constructor([T.String()], T.Object({})),
  partial: (T) => T.Partial(T.Object({ a: T.String(), b: T.Optional(T.Number()) }, { additionalProperties: false })),
  partialOpts: (T) => T.Partial(T.Object({ a: T.String() }), { description: "p" }),
  partialUnion: (T) => T.Partial(T.Union([T.Object({ a: T.String() }), T.Object({ b: T.Number() })])),
  required: (T) => T.Required(T.Object({ a: T.Optional(T.String()), b: T.Number() })),
  pick: (T) => T.Pick(T.Object({ a: T.String(), b: T.Number(), c: T.Optional(T.Boolean()) }), ["a", "c"]),
  pickUnionIndexer: (T) => T.Pick(T.Object({ a: T.String(), b: T.Number() }), T.Union([T.Literal("b")])),
  pickMissingKey: (T) => T.Pick(T.Object({ a: T.String() }), ["zzz"]),
  omit: (T) => T.Omit(T.Object({ a: T.String(), b: T.Number(), c: T.Boolean() }), ["b"], { description: "o" }),
  with: (T) => T.With(T.String(), { description: "w" }),
  piTool: (T) =>
    T.Object({
      command: T.String({ description: "Bash command to execute" }),
      timeout: T.Optional(T.Number({ description: "Timeout in seconds (optional, no default timeout)" })),
    }),
  piEdit: (T) =>
    T.Object(
      {
        path: T.String({ description: "Path to the file to edit (relative or absolute)" }),
        edits: T.Array(
          T.Object(
            { oldText: T.String({ description: "old" }), newText: T.String({ description: "new" }) },
            { additionalProperties: false },
          ),
          { description: "One or more targeted replacements." },
        ),
      },
      { additionalProperties: false },
    ),
  todoLike: (T) =>
    T.Object({
      action: T.Union([T.Literal("list"), T.Literal("add"), T.Literal("toggle"), T.Literal("clear")]),
      text: T.Optional(T.String({ description: "Todo text (for add)" })),
      id: T.Optional(T.Number({ description: "Todo ID (for toggle)" })),
    }),
  pickOrder: (T) => T.Pick(T.Object({ a: T.String(), b: T.Number(), c: T.Boolean() }), ["c", "a"]),
  omitUnionIndexer: (T) => T.Omit(T.Object({ a: T.String(), b: T.Number() }), T.Union([T.Literal("a")])),
  recordLiteralUnionKeyOpts: (T) => T.Record(T.Union([T.Literal("a"), T.Literal(1)]), T.String(), { description: "d" }),
  recordStringKeyOpts: (T) => T.Record(T.String({ description: "k" }), T.String(), { additionalProperties: false }),
  requiredReadonly: (T) => T.Required(T.Object({ a: T.Readonly(T.Optional(T.String())) }), { title: "t" }),
  partialReadonly: (T) => T.Partial(T.Object({ a: T.Readonly(T.String()) })),
  withOptional: (T) => T.With(T.Optional(T.String()), { description: "w" }),
  tupleOpts: (T) => T.Tuple([T.String(), T.Optional(T.Number())], { maxItems: 4 }),
  optionsOverride: (T) => [T.Object({ a: T.String() }, { required: ["z"] }), T.String({ type: "x" })],
  enumOpts: (T) => T.Enum(["a"], { description: "d" }),
  sharedChild: (T) => {
    const s = T.String();
    return T.Object({ a: s, b: T.Optional(s), c: T.Readonly(s) });
  },
};

test("every Type builder output matches typebox 1.x (JSON and hidden markers)", (t) => {
  if (!real) return t.skip(oracleSkip("typebox"));
  for (const [name, build] of Object.entries(cases)) {
    const expected = build(real.Type);
    const actual = build(mine.Type);
    assert.equal(json(actual), json(expected), `${name}: JSON`);
    assert.deepEqual(describe(actual), describe(expected), `${name}: structure incl. hidden keys`);
  }
});

test("guards and helpers agree with typebox on the same schemas", (t) => {
  if (!real) return t.skip(oracleSkip("typebox"));
  const guards = Object.keys(real.Type).filter((k) => k.startsWith("Is"));
  for (const [name, build] of Object.entries(cases)) {
    const values = [build(real.Type)].flat();
    const mineValues = [build(mine.Type)].flat();
    values.forEach((value, i) => {
      for (const g of guards) {
        if (typeof mine.Type[g] !== "function") continue;
        if (g === "IsKind") continue;
        assert.equal(mine.Type[g](mineValues[i]), real.Type[g](value), `${g}(${name}[${i}])`);
      }
    });
  }
});

test("namespace shape: Type, default export, named exports match typebox", (t) => {
  assert.equal(TypeDefault, mine.Type);
  assert.equal(mine.Object, mine.Type.Object);
  assert.equal(typeof mine.Kind, "symbol");
  assert.equal(Object.isFrozen(mine.Type), true);
  if (!real) return t.skip(oracleSkip("typebox"));
  for (const k of Object.keys(mine.Type)) assert.equal(mine[k], mine.Type[k], `top-level export ${k}`);
  assert.deepEqual(
    Object.keys(mine.Type).sort(),
    Object.keys(real.Type).sort(),
    "Type namespace has exactly typebox's members",
  );
  assert.equal(real.default, real.Type);
});

test("errors: invalid literal, unsupported builders and inputs", () => {
  const T = mine.Type;
  assert.throws(() => T.Literal(null), { message: "Invalid Literal value" });
  assert.throws(() => T.Literal({}), mine.InvalidLiteralValue);
  assert.throws(() => T.Script("string"), /Type.Script is not supported in pichamber/);
  assert.throws(() => T.TemplateLiteral("a${string}"), /not supported in pichamber/);
  assert.throws(() => T.KeyOf(T.Object({ a: T.String() })), /Type.KeyOf is not supported in pichamber/);
  assert.throws(() => T.Evaluate(T.Union([])), /not supported in pichamber/);
  assert.throws(() => T.Partial(T.Intersect([T.Object({})])), /Type.Partial of a Intersect is not supported/);
  assert.throws(() => T.Omit(T.Ref("A"), ["x"]), /not supported in pichamber/);
  assert.throws(() => T.Record(T.Ref("K"), T.String()), /Type.Record with a Ref key is not supported/);
  assert.throws(() => T.Pick(T.Object({}), T.String()), /Pick\/Type.Omit take/);
});

test("codec and refine attach hidden metadata like typebox", (t) => {
  const r = mine.Type.Refine(
    mine.Type.Number(),
    (v) => v > 0,
    () => "positive",
  );
  assert.equal(mine.Type.IsRefine(r), true);
  assert.equal(JSON.stringify(r), '{"type":"number"}');
  const c = mine.Type.Codec(mine.Type.String())
    .Decode((s) => s.length)
    .Encode((n) => "x".repeat(n));
  assert.equal(mine.Type.IsCodec(c), true);
  assert.equal(c["~codec"].decode("abc"), 3);
  if (!real) return t.skip(oracleSkip("typebox"));
  const rr = real.Type.Refine(
    real.Type.Number(),
    (v) => v > 0,
    () => "positive",
  );
  assert.deepEqual(describe(r), describe(rr));
});
