// typebox/value and typebox/compile for pichamber: an original implementation of the observable
// behaviour of typebox 1.x's value functions (Check, Errors, Assert, Parse, Decode, Encode,
// Clone, Equal, Default, Clean, Convert, Create, Hash, Pointer) and its `Compile` validator, over
// the schemas typebox.js builds (their "~kind" markers steer Default, Clean, Convert and Create,
// as in typebox) and plain JSON Schema. Errors carry typebox's keywords, paths, params and
// English messages, at most 8 per call (Parse under pi 0.73.1: 1). Where it differs: Decode and Encode run
// codecs' callbacks on objects, arrays and tuples only; unions are tried in the order given
// (typebox sorts them narrowest first); Hash is a 64-bit FNV-1a whose values differ from
// typebox's; Diff, Patch, Mutate and Repair throw.

const MAX_ERRORS = 8;
// What Parse reports of a failure: pi 1.6.0 pins typebox 1.3.27, which reports as many as
// Errors does; pi 0.73.1 takes the newest 1.x, whose Parse reports one (maxParseErrors).
const parseErrors = () => (String(globalThis.__pichamber_internal?.piVersion ?? "1.6.0").startsWith("0.") ? 1 : MAX_ERRORS);

// ---- arguments and references --------------------------------------------------------------

// (context, type, value) or (type, value): typebox's overloads.
function args(list, arity) {
  return list.length >= arity ? list : [{}, ...list];
}

function resolveRef(context, root, ref) {
  if (typeof ref !== "string") return undefined;
  if (Object.hasOwn(context, ref)) return context[ref];
  if (ref === "#") return root;
  if (ref.startsWith("#/")) {
    let node = root;
    for (const part of ref.slice(2).split("/")) {
      const key = part.replace(/~1/g, "/").replace(/~0/g, "~");
      if (node === null || typeof node !== "object" || !Object.hasOwn(node, key)) return undefined;
      node = node[key];
    }
    return node;
  }
  const id = ref.startsWith("#") ? ref.slice(1) : ref;
  return Object.hasOwn(context, id) ? context[id] : undefined;
}

// ---- guards ------------------------------------------------------------------------------------

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
const isSchemaObject = (v) => typeof v === "object" && v !== null;
const kindOf = (schema) => (isSchemaObject(schema) ? schema["~kind"] : undefined);
const hasKey = (value, key) => Object.hasOwn(value, key);

function isType(type, value) {
  switch (type) {
    case "object":
      return isObject(value);
    case "array":
      return Array.isArray(value);
    case "boolean":
      return typeof value === "boolean";
    case "integer":
      return Number.isInteger(value);
    case "number":
      return typeof value === "number" && Number.isFinite(value);
    case "null":
      return value === null;
    case "string":
      return typeof value === "string";
    case "bigint":
      return typeof value === "bigint";
    case "symbol":
      return typeof value === "symbol";
    case "undefined":
    case "void":
      return value === undefined;
    case "function":
    case "constructor":
      return typeof value === "function";
    default:
      return true;
  }
}

// ---- equality and cloning ---------------------------------------------------------------------

export function Equal(left, right) {
  if (left === right) return true;
  if (typeof left !== typeof right || left === null || right === null || typeof left !== "object") {
    return left === right;
  }
  if (Array.isArray(left) !== Array.isArray(right)) return false;
  if (left instanceof Date || right instanceof Date) {
    return left instanceof Date && right instanceof Date && left.getTime() === right.getTime();
  }
  if (ArrayBuffer.isView(left) || ArrayBuffer.isView(right)) {
    if (!ArrayBuffer.isView(left) || !ArrayBuffer.isView(right) || left.length !== right.length) return false;
    for (let i = 0; i < left.length; i++) if (left[i] !== right[i]) return false;
    return true;
  }
  if (Array.isArray(left)) {
    return left.length === right.length && left.every((v, i) => Equal(v, right[i]));
  }
  const keys = Object.keys(left);
  return keys.length === Object.keys(right).length && keys.every((k) => hasKey(right, k) && Equal(left[k], right[k]));
}

export function Clone(value) {
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return value.map(Clone);
  if (value instanceof Date) return new Date(value.getTime());
  if (ArrayBuffer.isView(value)) return value.slice();
  if (value instanceof Map) return new Map([...value].map(([k, v]) => [Clone(k), Clone(v)]));
  if (value instanceof Set) return new Set([...value].map(Clone));
  const out = {};
  for (const key of Object.keys(value)) out[key] = Clone(value[key]);
  return out;
}

// ---- errors ----------------------------------------------------------------------------------

function message(error) {
  const p = error.params;
  switch (error.keyword) {
    case "additionalProperties":
      return "must not have additional properties";
    case "anyOf":
      return "must match a schema in anyOf";
    case "boolean":
      return "schema is false";
    case "const":
      return "must be equal to constant";
    case "contains":
      return "must contain at least 1 valid item";
    case "dependencies":
    case "dependentRequired":
      return `must have properties ${p.dependencies.join(", ")} when property ${p.property} is present`;
    case "enum":
      return "must be equal to one of the allowed values";
    case "exclusiveMaximum":
    case "exclusiveMinimum":
    case "maximum":
    case "minimum":
      return `must be ${p.comparison} ${p.limit}`;
    case "format":
      return `must match format "${p.format}"`;
    case "if":
      return `must match "${p.failingKeyword}" schema`;
    case "maxItems":
      return `must not have more than ${p.limit} items`;
    case "maxLength":
      return `must not have more than ${p.limit} characters`;
    case "maxProperties":
      return `must not have more than ${p.limit} properties`;
    case "minItems":
      return `must not have fewer than ${p.limit} items`;
    case "minLength":
      return `must not have fewer than ${p.limit} characters`;
    case "minProperties":
      return `must not have fewer than ${p.limit} properties`;
    case "multipleOf":
      return `must be multiple of ${p.multipleOf}`;
    case "not":
      return "must not be valid";
    case "oneOf":
      return "must match exactly one schema in oneOf";
    case "pattern":
      return `must match pattern "${p.pattern}"`;
    case "propertyNames":
      return `property names ${p.propertyNames.join(", ")} are invalid`;
    case "required":
      return `must have required properties ${p.requiredProperties.join(", ")}`;
    case "type":
      return typeof p.type === "string" ? `must be ${p.type}` : `must be either ${p.type.join(" or ")}`;
    case "uniqueItems":
      return "must not have duplicate items";
    case "~refine":
      return p.message;
    default:
      return "an unknown validation error occurred";
  }
}

// Collects errors, at most MAX_ERRORS, or none at all when only the verdict is wanted.
class Report {
  constructor(collect, max = MAX_ERRORS) {
    this.collect = collect;
    this.max = max;
    this.errors = [];
  }
  full() {
    return this.collect && this.errors.length >= this.max;
  }
  add(keyword, schemaPath, instancePath, params) {
    if (this.collect && !this.full()) {
      const error = { keyword, schemaPath, instancePath, params };
      error.message = message(error);
      this.errors.push(error);
    }
    return false;
  }
  addAll(errors) {
    for (const e of errors) if (this.collect && !this.full()) this.errors.push(e);
    return false;
  }
}

// The string formats typebox knows, as checks of our own (an unknown format passes).
const octet = "(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)";
const ipv4 = new RegExp(`^${octet}(\\.${octet}){3}$`);
const label = "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?";
const hostname = new RegExp(`^(?=.{1,253}$)${label}(\\.${label})*\\.?$`, "i");
function isDate(text) {
  const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
  if (!m) return false;
  const [y, mo, d] = m.slice(1).map(Number);
  const days = [31, y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  return mo >= 1 && mo <= 12 && d >= 1 && d <= days[mo - 1];
}
const isTime = (text) => /^([01]\d|2[0-3]):[0-5]\d:([0-5]\d|60)(\.\d+)?(z|[+-]([01]\d|2[0-3]):?[0-5]\d)$/i.test(text);
function isIpv6(text) {
  if (!/^[0-9a-f:.]+$/i.test(text) || (text.match(/::/g) ?? []).length > 1) return false;
  const [head, tail] = text.includes("::") ? text.split("::") : [text, undefined];
  const groups = (part) => (part === "" ? [] : part.split(":"));
  const all = [...groups(head), ...(tail === undefined ? [] : groups(tail))];
  let count = all.length;
  if (all.length > 0 && all[all.length - 1].includes(".")) {
    if (!ipv4.test(all.pop())) return false;
    count += 1;
  }
  if (!all.every((g) => /^[0-9a-f]{1,4}$/i.test(g))) return false;
  return tail === undefined ? count === 8 : count < 8;
}
const FORMATS = {
  email: (t) => /^[^\s@"(),:;<>[\\\]]+@[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/i.test(t) && !/\.\.|^\.|\.@/.test(t),
  uuid: (t) => /^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$/i.test(t),
  date: isDate,
  time: isTime,
  "date-time": (t) => {
    const at = t.search(/t/i);
    return at === 10 && isDate(t.slice(0, at)) && isTime(t.slice(at + 1));
  },
  ipv4: (t) => ipv4.test(t),
  ipv6: isIpv6,
  hostname: (t) => hostname.test(t),
  uri: (t) => /^[a-z][a-z0-9+.-]*:[^\s]*$/i.test(t),
  url: (t) => /^(https?|ftp):\/\/[^\s/$.?#][^\s]*$/i.test(t),
  regex: (t) => {
    try {
      new RegExp(t, "u");
      return true;
    } catch {
      return false;
    }
  },
  "json-pointer": (t) => /^(\/([^~/]|~[01])*)*$/.test(t),
};

const pointerPart = (key) => String(key).replace(/~/g, "~0").replace(/\//g, "~1");
const codePoints = (s) => [...s].length;
const regex = (pattern) => new RegExp(pattern, "u");

class Walker {
  constructor(context, root) {
    this.context = context;
    this.root = root;
    this.depth = 0;
  }

  check(schema, value) {
    return this.walk(schema, value, "#", "", new Report(false));
  }

  // Every keyword that applies is evaluated (typebox reports them all), in typebox's order.
  walk(schema, value, sp, ip, report) {
    if (report.full()) return false;
    if (schema === true) return true;
    if (schema === false) return report.add("boolean", sp, ip, {});
    if (!isSchemaObject(schema)) return true;
    if (++this.depth > 256) {
      this.depth--;
      throw new RangeError("typebox/value: schema recursion is too deep");
    }
    try {
      return this.keywords(schema, value, sp, ip, report);
    } finally {
      this.depth--;
    }
  }

  keywords(s, v, sp, ip, report) {
    let ok = true;
    const all = (result) => {
      ok = result && ok;
    };
    if (s.type !== undefined) {
      const types = Array.isArray(s.type) ? s.type : [s.type];
      if (!types.some((t) => isType(t, v))) all(report.add("type", sp, ip, { type: s.type }));
    }
    if (isObject(v)) this.objectKeywords(s, v, sp, ip, report, all);
    if (Array.isArray(v)) this.arrayKeywords(s, v, sp, ip, report, all);
    if (typeof v === "string") {
      const n = s.minLength !== undefined || s.maxLength !== undefined ? codePoints(v) : 0;
      if (typeof s.minLength === "number" && n < s.minLength) all(report.add("minLength", sp, ip, { limit: s.minLength }));
      if (typeof s.maxLength === "number" && n > s.maxLength) all(report.add("maxLength", sp, ip, { limit: s.maxLength }));
      if (typeof s.format === "string" && Object.hasOwn(FORMATS, s.format) && !FORMATS[s.format](v))
        all(report.add("format", sp, ip, { format: s.format }));
      if (typeof s.pattern === "string" && !regex(s.pattern).test(v)) all(report.add("pattern", sp, ip, { pattern: s.pattern }));
    }
    if (isType("number", v) || typeof v === "bigint") {
      if (s.exclusiveMinimum !== undefined && !(v > s.exclusiveMinimum))
        all(report.add("exclusiveMinimum", sp, ip, { comparison: ">", limit: s.exclusiveMinimum }));
      if (s.exclusiveMaximum !== undefined && !(v < s.exclusiveMaximum))
        all(report.add("exclusiveMaximum", sp, ip, { comparison: "<", limit: s.exclusiveMaximum }));
      if (s.minimum !== undefined && !(v >= s.minimum)) all(report.add("minimum", sp, ip, { comparison: ">=", limit: s.minimum }));
      if (s.maximum !== undefined && !(v <= s.maximum)) all(report.add("maximum", sp, ip, { comparison: "<=", limit: s.maximum }));
      if (s.multipleOf !== undefined && !isMultiple(v, s.multipleOf))
        all(report.add("multipleOf", sp, ip, { multipleOf: s.multipleOf }));
    }
    if (typeof s.$ref === "string") {
      const target = resolveRef(this.context, this.root, s.$ref);
      all(target === undefined ? report.add("$ref", sp, ip, { $ref: s.$ref }) : this.walk(target, v, sp, ip, report));
    }
    if (hasKey(s, "const") && !Equal(s.const, v)) all(report.add("const", sp, ip, { allowedValue: s.const }));
    if (Array.isArray(s.enum) && !s.enum.some((e) => Equal(e, v))) all(report.add("enum", sp, ip, { allowedValues: s.enum }));
    if (s.if !== undefined) {
      const passes = this.check(s.if, v);
      const branch = passes ? "then" : "else";
      // As typebox: a failing `then` reports only itself, a failing `else` its errors too.
      const fails = passes ? !this.check(s.then ?? true, v) : !this.walk(s.else ?? true, v, `${sp}/else`, ip, report);
      if (fails) all(report.add("if", sp, ip, { failingKeyword: branch }));
    }
    if (s.not !== undefined && this.check(s.not, v)) all(report.add("not", sp, ip, {}));
    if (Array.isArray(s.allOf)) {
      const failed = [];
      s.allOf.forEach((member, i) => {
        const inner = new Report(report.collect);
        if (!this.walk(member, v, `${sp}/allOf/${i}`, ip, inner)) failed.push(inner);
      });
      if (failed.length > 0) all(report.addAll(failed.flatMap((f) => f.errors)));
    }
    if (Array.isArray(s.anyOf)) {
      const failed = [];
      let passed = false;
      s.anyOf.forEach((member, i) => {
        const inner = new Report(report.collect);
        if (this.walk(member, v, `${sp}/anyOf/${i}`, ip, inner)) passed = true;
        else failed.push(inner);
      });
      if (!passed) {
        report.addAll(failed.flatMap((f) => f.errors));
        all(report.add("anyOf", sp, ip, {}));
      }
    }
    if (Array.isArray(s.oneOf)) {
      const failed = [];
      const passing = [];
      s.oneOf.forEach((member, i) => {
        const inner = new Report(report.collect);
        if (this.walk(member, v, `${sp}/oneOf/${i}`, ip, inner)) passing.push(i);
        else failed.push(inner);
      });
      if (passing.length !== 1) {
        if (passing.length === 0) report.addAll(failed.flatMap((f) => f.errors));
        all(report.add("oneOf", sp, ip, { passingSchemas: passing }));
      }
    }
    if (Array.isArray(s["~refine"]) && ok) {
      for (const refinement of s["~refine"]) {
        if (!refinement.check(v)) all(report.add("~refine", sp, ip, { message: refinement.error(v) }));
      }
    }
    return ok;
  }

  objectKeywords(s, v, sp, ip, report, all) {
    const properties = isSchemaObject(s.properties) ? s.properties : {};
    const required = Array.isArray(s.required) ? s.required : [];
    if (required.length > 0) {
      const missing = required.filter((key) => !hasKey(v, key));
      if (missing.length > 0) all(report.add("required", sp, ip, { requiredProperties: missing }));
    }
    if (s.additionalProperties !== undefined) {
      const patterns = isSchemaObject(s.patternProperties) ? Object.keys(s.patternProperties).map(regex) : [];
      const extra = [];
      for (const key of Object.keys(v)) {
        if (hasKey(properties, key) || patterns.some((p) => p.test(key))) continue;
        if (!this.walk(s.additionalProperties, v[key], `${sp}/additionalProperties`, `${ip}/${pointerPart(key)}`, report)) {
          extra.push(key);
        }
      }
      if (extra.length > 0) all(report.add("additionalProperties", sp, ip, { additionalProperties: extra }));
    }
    if (isSchemaObject(s.dependentRequired)) {
      for (const [key, dependencies] of Object.entries(s.dependentRequired)) {
        if (hasKey(v, key) && !dependencies.every((d) => hasKey(v, d))) {
          all(report.add("dependentRequired", sp, ip, { property: key, dependencies }));
        }
      }
    }
    if (isSchemaObject(s.patternProperties)) {
      for (const [pattern, schema] of Object.entries(s.patternProperties)) {
        const re = regex(pattern);
        for (const key of Object.keys(v)) {
          if (re.test(key)) {
            all(this.walk(schema, v[key], `${sp}/patternProperties/${pointerPart(pattern)}`, `${ip}/${pointerPart(key)}`, report));
          }
        }
      }
    }
    for (const [key, schema] of Object.entries(properties)) {
      if (!hasKey(v, key)) continue;
      // An optional property set to undefined counts as absent.
      if (v[key] === undefined && !required.includes(key)) continue;
      all(this.walk(schema, v[key], `${sp}/properties/${pointerPart(key)}`, `${ip}/${pointerPart(key)}`, report));
    }
    if (s.propertyNames !== undefined) {
      const invalid = Object.keys(v).filter((key) => !this.check(s.propertyNames, key));
      if (invalid.length > 0) all(report.add("propertyNames", sp, ip, { propertyNames: invalid }));
    }
    const count = Object.keys(v).length;
    if (typeof s.minProperties === "number" && count < s.minProperties)
      all(report.add("minProperties", sp, ip, { limit: s.minProperties }));
    if (typeof s.maxProperties === "number" && count > s.maxProperties)
      all(report.add("maxProperties", sp, ip, { limit: s.maxProperties }));
  }

  arrayKeywords(s, v, sp, ip, report, all) {
    const sized = Array.isArray(s.items);
    if (sized && s.additionalItems !== undefined) {
      for (let i = s.items.length; i < v.length; i++) {
        all(this.walk(s.additionalItems, v[i], `${sp}/additionalItems`, `${ip}/${i}`, report));
      }
    }
    if (s.contains !== undefined) {
      const count = v.filter((item) => this.check(s.contains, item)).length;
      const min = typeof s.minContains === "number" ? s.minContains : 1;
      if (count < min) all(report.add("contains", sp, ip, { minContains: min }));
      if (typeof s.maxContains === "number" && count > s.maxContains) all(report.add("contains", sp, ip, { maxContains: s.maxContains }));
    }
    if (sized) {
      s.items.forEach((schema, i) => {
        if (i < v.length) all(this.walk(schema, v[i], `${sp}/items/${i}`, `${ip}/${i}`, report));
      });
    } else if (s.items !== undefined) {
      const from = Array.isArray(s.prefixItems) ? s.prefixItems.length : 0;
      for (let i = from; i < v.length; i++) all(this.walk(s.items, v[i], `${sp}/items`, `${ip}/${i}`, report));
    }
    if (typeof s.minItems === "number" && v.length < s.minItems) all(report.add("minItems", sp, ip, { limit: s.minItems }));
    if (typeof s.maxItems === "number" && v.length > s.maxItems) all(report.add("maxItems", sp, ip, { limit: s.maxItems }));
    if (Array.isArray(s.prefixItems)) {
      s.prefixItems.forEach((schema, i) => {
        if (i < v.length) all(this.walk(schema, v[i], `${sp}/prefixItems/${i}`, `${ip}/${i}`, report));
      });
    }
    if (s.uniqueItems === true) {
      const duplicates = [];
      v.forEach((item, i) => {
        if (v.slice(0, i).some((other) => Equal(other, item))) duplicates.push(i);
      });
      if (duplicates.length > 0) all(report.add("uniqueItems", sp, ip, { duplicateItems: duplicates }));
    }
  }
}

function isMultiple(value, divisor) {
  if (typeof value === "bigint" || typeof divisor === "bigint") return BigInt(value) % BigInt(divisor) === 0n;
  const quotient = value / divisor;
  return Math.abs(quotient - Math.round(quotient)) < 1e-9;
}

export function Check(...list) {
  const [context, type, value] = args(list, 3);
  return new Walker(context, type).check(type, value);
}

function errorsOf(context, type, value, max) {
  const report = new Report(true, max);
  new Walker(context, type).walk(type, value, "#", "", report);
  return report.errors;
}

export function Errors(...list) {
  const [context, type, value] = args(list, 3);
  return errorsOf(context, type, value, MAX_ERRORS);
}

// ---- assertions ---------------------------------------------------------------------------

export class AssertError extends Error {
  constructor(source, value, errors) {
    super(source);
    this.cause = { source, errors, value };
  }
}
export class ParseError extends AssertError {
  constructor(value, errors) {
    super("Parse", value, errors);
  }
}
export class DecodeError extends AssertError {
  constructor(value, errors) {
    super("Decode", value, errors);
  }
}
export class EncodeError extends AssertError {
  constructor(value, errors) {
    super("Encode", value, errors);
  }
}

export function Assert(...list) {
  const [context, type, value] = args(list, 3);
  if (!Check(context, type, value)) throw new AssertError("Assert", value, Errors(context, type, value));
}
export function Parse(...list) {
  const [context, type, value] = args(list, 3);
  if (!Check(context, type, value)) throw new ParseError(value, errorsOf(context, type, value, parseErrors()));
  return value;
}

// A codec's callbacks (`Type.Codec(...).Decode(f).Encode(g)`), members before their owner.
function runCodecs(direction, walker, schema, value) {
  let v = value;
  switch (kindOf(schema)) {
    case "Object":
      if (isObject(v)) {
        for (const [key, property] of Object.entries(schema.properties)) {
          if (hasKey(v, key)) v[key] = runCodecs(direction, walker, property, v[key]);
        }
      }
      break;
    case "Array":
      if (Array.isArray(v)) v = v.map((item) => runCodecs(direction, walker, schema.items, item));
      break;
    case "Tuple":
      if (Array.isArray(v)) v = v.map((item, i) => (i < schema.items.length ? runCodecs(direction, walker, schema.items[i], item) : item));
      break;
    default:
      break;
  }
  const codec = isSchemaObject(schema) ? schema["~codec"] : undefined;
  return isSchemaObject(codec) && typeof codec[direction] === "function" ? codec[direction](v) : v;
}

/** typebox's Decode: the value cloned, defaulted, converted and cleaned, checked, then decoded. */
export function Decode(...list) {
  const [context, type, input] = args(list, 3);
  const walker = new Walker(context, type);
  const value = clean(walker, type, convert(walker, type, fillDefaults(walker, type, Clone(input))));
  if (!walker.check(type, value)) throw new DecodeError(value, errorsOf(context, type, value, MAX_ERRORS));
  return runCodecs("decode", walker, type, value);
}

/** typebox's Encode: the value cloned, encoded, defaulted, converted and cleaned, then checked. */
export function Encode(...list) {
  const [context, type, input] = args(list, 3);
  const walker = new Walker(context, type);
  const encoded = runCodecs("encode", walker, type, Clone(input));
  const value = clean(walker, type, convert(walker, type, fillDefaults(walker, type, encoded)));
  if (!walker.check(type, value)) throw new EncodeError(value, errorsOf(context, type, value, MAX_ERRORS));
  return value;
}
export const HasCodec = (...list) => {
  const type = list[list.length - 1];
  return isSchemaObject(type) && isSchemaObject(type["~codec"]);
};

// ---- conversions ----------------------------------------------------------------------------

const isNumberText = (s) => typeof s === "string" && s.trim() !== "" && Number.isFinite(+s);

function tryString(v) {
  if (typeof v === "string") return { value: v };
  if (typeof v === "bigint" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v))) return { value: String(v) };
  if (v === null) return { value: "null" };
  if (v === undefined) return { value: "" };
  return undefined;
}
function tryNumber(v) {
  if (typeof v === "number" && Number.isFinite(v)) return { value: v };
  if (typeof v === "boolean") return { value: v ? 1 : 0 };
  if (typeof v === "bigint") return Math.abs(Number(v)) <= Number.MAX_SAFE_INTEGER ? { value: Number(v) } : undefined;
  if (v === null || v === undefined) return { value: 0 };
  if (typeof v !== "string") return undefined;
  if (Number.isFinite(+v)) return { value: +v };
  const lower = v.toLowerCase();
  if (lower === "true") return { value: 1 };
  if (lower === "false") return { value: 0 };
  const big = /^-?(0|[1-9]\d*)(n|\.\d+)?$/.exec(v);
  return big ? { value: Math.trunc(Number(v.replace(/n$/, ""))) } : undefined;
}
function tryBoolean(v) {
  if (typeof v === "boolean") return { value: v };
  if (v === null || v === undefined) return { value: false };
  if (v === 0 || v === 0n || v === "0") return { value: false };
  if (v === 1 || v === 1n || v === "1") return { value: true };
  if (typeof v === "string") {
    const lower = v.toLowerCase();
    if (lower === "true") return { value: true };
    if (lower === "false") return { value: false };
  }
  return undefined;
}
function tryNull(v) {
  if (v === null || v === undefined || v === false || v === 0 || v === 0n) return { value: null };
  if (typeof v === "string" && (["null", "undefined"].includes(v.toLowerCase()) || v === "" || v === "0")) return { value: null };
  return undefined;
}
function tryBigInt(v) {
  if (typeof v === "bigint") return { value: v };
  if (typeof v === "boolean") return { value: v ? 1n : 0n };
  if (typeof v === "number" && Number.isFinite(v)) return { value: BigInt(Math.trunc(v)) };
  if (v === null || v === undefined) return { value: 0n };
  if (typeof v === "string" && /^-?(0|[1-9]\d*)(n|\.\d+)?$/.test(v)) return { value: BigInt(v.replace(/n$/, "").split(".")[0]) };
  return undefined;
}
const or = (result, value) => (result === undefined ? value : result.value);

function convert(walker, schema, value) {
  switch (kindOf(schema)) {
    case "Array":
      return (Array.isArray(value) ? value : [value]).map((item) => convert(walker, schema.items, item));
    case "Tuple":
      return Array.isArray(value) ? value.map((item, i) => (i < schema.items.length ? convert(walker, schema.items[i], item) : item)) : value;
    case "BigInt":
      return or(tryBigInt(value), value);
    case "Boolean":
      return or(tryBoolean(value), value);
    case "Integer": {
      const n = tryNumber(value);
      return n === undefined ? value : Math.trunc(n.value);
    }
    case "Number":
      return or(tryNumber(value), value);
    case "String":
      return or(tryString(value), value);
    case "Null":
      return or(tryNull(value), value);
    case "Undefined":
    case "Void":
      return value === null || value === "" || value === "undefined" || value === "null" ? undefined : value;
    case "Literal": {
      if (Equal(schema.const, value)) return value;
      const tryer = { string: tryString, number: tryNumber, boolean: tryBoolean, bigint: tryBigInt }[typeof schema.const];
      const result = tryer?.(value);
      return result !== undefined && Equal(result.value, schema.const) ? result.value : value;
    }
    case "Enum": {
      if (schema.enum.some((e) => Equal(e, value))) return value;
      for (const member of schema.enum) {
        const result = (typeof member === "number" ? tryNumber : tryString)(value);
        if (result !== undefined && Equal(result.value, member)) return result.value;
      }
      return value;
    }
    case "Object":
    case "Record":
      return convertObject(walker, schema, value);
    case "Intersect": {
      let next = value;
      for (const member of schema.allOf) next = convert(walker, member, next);
      return next;
    }
    case "Union": {
      if (schema.anyOf.some((member) => walker.check(member, value))) return value;
      const candidates = schema.anyOf.map((member) => convert(walker, member, Clone(value)));
      const selected = candidates.find((candidate) => walker.check(schema, candidate));
      return selected === undefined ? value : selected;
    }
    case "Ref":
    case "This": {
      const target = resolveRef(walker.context, walker.root, schema.$ref);
      return target === undefined ? value : convert(walker, target, value);
    }
    default:
      return value;
  }
}

function convertObject(walker, schema, value) {
  if (!isObject(value)) return value;
  // Each name or pattern matches as `^name$`, as typebox's conversion matches them (a
  // pattern that anchors itself matches only its literal text there).
  const anchored = (text) => new RegExp(`^${text}$`);
  const entries = [
    ...Object.entries(schema.properties ?? {}).map(([k, s]) => [anchored(k), s, k]),
    ...Object.entries(schema.patternProperties ?? {}).map(([p, s]) => [anchored(p), s, undefined]),
  ];
  const keys = Object.keys(value);
  for (const [re, property, key] of entries) {
    for (const k of keys) {
      if (!re.test(k)) continue;
      const optional = key !== undefined && property["~optional"] === true && value[k] === undefined;
      if (!optional) value[k] = convert(walker, property, value[k]);
    }
  }
  if (isSchemaObject(schema.additionalProperties)) {
    for (const k of keys) {
      if (!entries.some(([re]) => re.test(k))) value[k] = convert(walker, schema.additionalProperties, value[k]);
    }
  }
  return value;
}

export function Convert(...list) {
  const [context, type, value] = args(list, 3);
  return convert(new Walker(context, type), type, value);
}

// ---- defaults and cleaning -------------------------------------------------------------------

function withDefault(schema, value) {
  if (value !== undefined || !isSchemaObject(schema) || !hasKey(schema, "default")) return value;
  return typeof schema.default === "function" ? schema.default() : Clone(schema.default);
}

function fillDefaults(walker, schema, value) {
  const v = withDefault(schema, value);
  switch (kindOf(schema)) {
    case "Array":
      if (Array.isArray(v)) for (let i = 0; i < v.length; i++) v[i] = fillDefaults(walker, schema.items, v[i]);
      return v;
    case "Tuple":
      if (Array.isArray(v)) schema.items.forEach((item, i) => (v[i] = fillDefaults(walker, item, v[i])));
      return v;
    case "Object": {
      if (!isObject(v)) return v;
      const known = Object.keys(schema.properties);
      for (const key of known) {
        const property = schema.properties[key];
        const next = fillDefaults(walker, property, v[key]);
        if (next === undefined && (property["~optional"] === true || !hasKey(property, "default"))) continue;
        v[key] = next;
      }
      if (isSchemaObject(schema.additionalProperties)) {
        for (const key of Object.keys(v)) if (!known.includes(key)) v[key] = fillDefaults(walker, schema.additionalProperties, v[key]);
      }
      return v;
    }
    case "Record": {
      if (!isObject(v)) return v;
      const [pattern, inner] = Object.entries(schema.patternProperties)[0];
      const re = regex(pattern);
      for (const key of Object.keys(v)) if (re.test(key)) v[key] = fillDefaults(walker, inner, v[key]);
      return v;
    }
    case "Intersect": {
      let next = v;
      for (const member of schema.allOf) next = fillDefaults(walker, member, next);
      return next;
    }
    case "Union":
      for (const member of schema.anyOf) {
        const result = fillDefaults(walker, member, Clone(v));
        if (walker.check(member, result)) return result;
      }
      return v;
    case "Ref": {
      const target = resolveRef(walker.context, walker.root, schema.$ref);
      return target === undefined ? v : fillDefaults(walker, target, v);
    }
    default:
      return v;
  }
}

export function Default(...list) {
  const [context, type, value] = args(list, 3);
  return fillDefaults(new Walker(context, type), type, value);
}

function clean(walker, schema, value) {
  switch (kindOf(schema)) {
    case "Array":
      return Array.isArray(value) ? value.map((item) => clean(walker, schema.items, item)) : value;
    case "Tuple":
      if (!Array.isArray(value)) return value;
      return value.slice(0, schema.items.length).map((item, i) => clean(walker, schema.items[i], item));
    case "Object": {
      if (!isObject(value)) return value;
      const extra = schema.additionalProperties;
      for (const key of Object.keys(value)) {
        if (hasKey(schema.properties, key) && isSchemaObject(schema.properties[key])) {
          value[key] = clean(walker, schema.properties[key], value[key]);
        } else if (extra === true || (isSchemaObject(extra) && walker.check(extra, value[key]))) {
          value[key] = clean(walker, extra, value[key]);
        } else {
          delete value[key];
        }
      }
      return value;
    }
    case "Record": {
      if (!isObject(value)) return value;
      const [pattern, inner] = Object.entries(schema.patternProperties)[0];
      const re = regex(pattern);
      for (const key of Object.keys(value)) {
        if (re.test(key)) value[key] = clean(walker, inner, value[key]);
        else delete value[key];
      }
      return value;
    }
    case "Intersect": {
      // Cleaned as the object its members make together.
      const properties = Object.assign({}, ...schema.allOf.map((member) => member.properties ?? {}));
      const merged = { "~kind": "Object", properties };
      if (hasKey(schema, "unevaluatedProperties")) merged.additionalProperties = schema.unevaluatedProperties;
      return clean(walker, merged, value);
    }
    case "Union":
      for (const member of schema.anyOf) {
        const result = clean(walker, member, Clone(value));
        if (walker.check(member, result)) return result;
      }
      return value;
    case "Ref": {
      const target = resolveRef(walker.context, walker.root, schema.$ref);
      return target === undefined ? value : clean(walker, target, value);
    }
    default:
      return value;
  }
}

export function Clean(...list) {
  const [context, type, value] = args(list, 3);
  return clean(new Walker(context, type), type, value);
}

// ---- creation ---------------------------------------------------------------------------------

export class CreateError extends Error {
  constructor(schema, message) {
    super(message);
    this.schema = schema;
  }
}

function create(walker, schema, depth = 0) {
  if (depth > 64) throw new CreateError(schema, "Create: the type is recursive without a default");
  if (isSchemaObject(schema) && hasKey(schema, "default")) {
    return typeof schema.default === "function" ? schema.default() : Clone(schema.default);
  }
  switch (kindOf(schema)) {
    case "Any":
    case "Unknown":
    case "Undefined":
    case "Void":
      return undefined;
    case "Array":
      return Array.from({ length: schema.minItems ?? 0 }, () => create(walker, schema.items, depth + 1));
    case "Tuple":
      return schema.items.map((item) => create(walker, item, depth + 1));
    case "BigInt":
      return typeof schema.minimum === "bigint" ? schema.minimum : 0n;
    case "Boolean":
      return false;
    case "Integer":
    case "Number":
      return schema.minimum ?? (schema.exclusiveMinimum !== undefined ? schema.exclusiveMinimum + 1 : 0);
    case "String":
      return typeof schema.minLength === "number" ? " ".repeat(schema.minLength) : "";
    case "Null":
      return null;
    case "Literal":
      return schema.const;
    case "Enum":
      return schema.enum[0];
    case "Object": {
      const out = {};
      for (const [key, property] of Object.entries(schema.properties)) {
        if (property["~optional"] === true) continue;
        out[key] = create(walker, property, depth + 1);
      }
      return out;
    }
    case "Record":
      return {};
    case "Intersect":
      return Object.assign({}, ...schema.allOf.map((member) => create(walker, member, depth + 1)));
    case "Union":
      return create(walker, schema.anyOf[0], depth + 1);
    case "Ref": {
      const target = resolveRef(walker.context, walker.root, schema.$ref);
      if (target === undefined) throw new CreateError(schema, `Create: cannot resolve ${schema.$ref}`);
      return create(walker, target, depth + 1);
    }
    case "Symbol":
      return Symbol();
    case "Function":
      return () => create(walker, schema.returnType, depth + 1);
    default:
      throw new CreateError(schema, "Create: the type cannot be created without a default");
  }
}

export function Create(...list) {
  const [context, type] = list.length >= 2 ? list : [{}, ...list];
  return create(new Walker(context, type), type);
}

// ---- hashing and pointers --------------------------------------------------------------------

export function Hash(value) {
  let hash = 0xcbf29ce484222325n;
  const prime = 0x100000001b3n;
  const text = JSON.stringify(value, (_k, v) => (typeof v === "bigint" ? `${v}n` : v === undefined ? null : v)) ?? "undefined";
  const mix = (byte) => {
    hash ^= BigInt(byte);
    hash = (hash * prime) & 0xffffffffffffffffn;
  };
  // The text's UTF-8 bytes.
  for (const char of text) {
    const c = char.codePointAt(0);
    if (c < 0x80) mix(c);
    else if (c < 0x800) [0xc0 | (c >> 6), 0x80 | (c & 63)].forEach(mix);
    else if (c < 0x10000) [0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63)].forEach(mix);
    else [0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63)].forEach(mix);
  }
  return hash;
}

const parsePointer = (pointer) =>
  pointer === "" ? [] : pointer.replace(/^\//, "").split("/").map((p) => p.replace(/~1/g, "/").replace(/~0/g, "~"));

export const Pointer = Object.freeze({
  Format: (pointer) => parsePointer(pointer),
  Get(value, pointer) {
    let node = value;
    for (const key of parsePointer(pointer)) {
      if (node === null || typeof node !== "object") return undefined;
      node = node[key];
    }
    return node;
  },
  Has(value, pointer) {
    let node = value;
    for (const key of parsePointer(pointer)) {
      if (node === null || typeof node !== "object" || !hasKey(node, key)) return false;
      node = node[key];
    }
    return true;
  },
  Set(value, pointer, next) {
    const keys = parsePointer(pointer);
    if (keys.length === 0) throw new Error("Pointer.Set: cannot set the root value");
    let node = value;
    for (const key of keys.slice(0, -1)) {
      if (node[key] === undefined) node[key] = {};
      node = node[key];
    }
    node[keys[keys.length - 1]] = next;
  },
  Delete(value, pointer) {
    const keys = parsePointer(pointer);
    if (keys.length === 0) throw new Error("Pointer.Delete: cannot delete the root value");
    const parent = Pointer.Get(value, `/${keys.slice(0, -1).join("/")}`);
    if (Array.isArray(parent)) parent.splice(Number(keys[keys.length - 1]), 1);
    else if (parent !== null && typeof parent === "object") delete parent[keys[keys.length - 1]];
  },
});

function unsupported(name) {
  return () => {
    throw new Error(`Value.${name} is not supported in pichamber (only checking, parsing, defaults, cleaning, conversion and creation are)`);
  };
}
export const Diff = unsupported("Diff");
export const Patch = unsupported("Patch");
export const Mutate = unsupported("Mutate");
export const Repair = unsupported("Repair");

// The `Value` namespace, as typebox's `export * as Value`.
export const Value = Object.freeze({
  Assert, Check, Clean, Clone, Convert, Create, Decode, Default, Diff, Encode, Equal, Errors, HasCodec, Hash,
  Mutate, Parse, Patch, Pointer, Repair,
});
export default Value;

// ---- typebox/compile ------------------------------------------------------------------------

export class Validator {
  #context;
  #type;
  constructor(context, type) {
    this.#context = context;
    this.#type = type;
  }
  IsAccelerated() {
    return true;
  }
  Context() {
    return this.#context;
  }
  Type() {
    return this.#type;
  }
  Code() {
    return `// pichamber validates this type without generating code\nreturn (value) => Check(${JSON.stringify(this.#type)}, value)`;
  }
  Check(value) {
    return Check(this.#context, this.#type, value);
  }
  Errors(value) {
    return Errors(this.#context, this.#type, value);
  }
  Parse(value) {
    return Parse(this.#context, this.#type, value);
  }
  Clean(value) {
    return Clean(this.#context, this.#type, value);
  }
  Convert(value) {
    return Convert(this.#context, this.#type, value);
  }
  Create() {
    return Create(this.#context, this.#type);
  }
  Default(value) {
    return Default(this.#context, this.#type, value);
  }
  Decode(value) {
    return Decode(this.#context, this.#type, value);
  }
  Encode(value) {
    return Encode(this.#context, this.#type, value);
  }
}

export function Compile(...list) {
  const [context, type] = list.length >= 2 ? list : [{}, ...list];
  return new Validator(context, type);
}
export const Code = (...list) => Compile(...list).Code();
