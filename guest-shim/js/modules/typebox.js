// typebox for pichamber: an original implementation of the observable behaviour of the common
// `Type` builders of the `typebox` 1.x package (also served for `@sinclair/typebox` imports).
// Schemas serialize to the same JSON, key order included, and carry the same non-enumerable
// markers ("~kind", "~optional", "~readonly", ...) so `Type.Is*` guards and the `required`
// list of `Type.Object` behave as in typebox. Type-level programming (KeyOf, Index, Evaluate,
// TemplateLiteral, Mapped, Script, Module...) is not provided: those builders throw.

const hide = (target, key, value) =>
  Object.defineProperty(target, key, { value, writable: true, configurable: true, enumerable: false });

// A schema of the given kind: its own keys first, then the caller's options.
function schema(kind, own, options) {
  return hide({ ...own, ...options }, "~kind", kind);
}

// A copy that keeps the hidden markers, with `marks` set (or removed when undefined).
function remark(source, marks, options) {
  const copy = Object.defineProperties({}, Object.getOwnPropertyDescriptors(source));
  for (const [key, value] of Object.entries(marks)) {
    if (value === undefined) delete copy[key];
    else hide(copy, key, value);
  }
  return Object.assign(copy, options);
}

const kindOf = (value) => (IsSchema(value) ? value["~kind"] : undefined);

export class InvalidLiteralValue extends Error {
  constructor(value) {
    super("Invalid Literal value");
    this.value = value;
  }
}

function unsupported(name) {
  return () => {
    throw new Error(`Type.${name} is not supported in pichamber (only the common schema builders are provided)`);
  };
}

// ---- guards ----------------------------------------------------------------------------------

function IsSchema(value) {
  return typeof value === "object" && value !== null;
}
function IsKind(value, kind) {
  return kindOf(value) === kind;
}
const KINDS = [
  "Any", "Array", "BigInt", "Boolean", "Call", "Constructor", "Cyclic", "Dependent", "Enum", "Function",
  "Generic", "Identifier", "Infer", "Integer", "Intersect", "Literal", "Never", "Null", "Number", "Object",
  "Parameter", "Record", "Ref", "Rest", "String", "Symbol", "TemplateLiteral", "This", "Tuple", "Undefined",
  "Union", "Unknown", "Void",
];
const guards = Object.fromEntries(KINDS.map((kind) => [`Is${kind}`, (value) => IsKind(value, kind)]));
const marked = (key) => (value) => IsSchema(value) && value[key] === true;
Object.assign(guards, {
  IsSchema,
  IsKind,
  IsOptional: marked("~optional"),
  IsReadonly: marked("~readonly"),
  IsImmutable: marked("~immutable"),
  IsUnsafe: (value) => IsSchema(value) && "~unsafe" in value,
  IsRefine: (value) => IsSchema(value) && Array.isArray(value["~refine"]),
  IsCodec: (value) => IsSchema(value) && IsSchema(value["~codec"]),
  IsEnumValue: (value) => typeof value === "string" || typeof value === "number",
});

// ---- builders --------------------------------------------------------------------------------

const primitive = (kind, type) => (options) => schema(kind, type === undefined ? {} : { type }, options);

// The property names a Record key schema stands for: a finite list, or a pattern.
function recordKeys(key) {
  switch (kindOf(key)) {
    case "Literal":
      return [String(key.const)];
    case "Enum":
      return key.enum.map(String);
    case "Boolean":
      return ["true", "false"];
    case "String":
      return key.pattern ?? "^.*$";
    case "Any":
      return "^.*$";
    case "Number":
      return "^-?(?:0|[1-9][0-9]*)(?:\\.[0-9]+)?$";
    case "Integer":
      return "^-?(?:0|[1-9][0-9]*)$";
    case "Union": {
      const parts = key.anyOf.map(recordKeys);
      return parts.every(Array.isArray) ? parts.flat() : "^.*$";
    }
    default:
      throw new Error(`Type.Record with a ${kindOf(key) ?? "non-schema"} key is not supported in pichamber`);
  }
}

// Property names selected by a Pick/Omit indexer: an array, a Literal or a Union of Literals.
function indexerKeys(indexer) {
  if (Array.isArray(indexer)) return indexer.map(String);
  if (kindOf(indexer) === "Literal") return [String(indexer.const)];
  if (kindOf(indexer) === "Union") return indexer.anyOf.flatMap(indexerKeys);
  throw new Error("Type.Pick/Type.Omit take an array of keys, a Literal or a Union of Literals in pichamber");
}

// Rebuilds an Object schema (or each member of a Union of them) with its properties mapped.
function reshape(name, source, options, mapProperties) {
  if (kindOf(source) === "Union") {
    return schema("Union", { anyOf: source.anyOf.map((s) => reshape(name, s, {}, mapProperties)) }, options);
  }
  if (kindOf(source) !== "Object") {
    throw new Error(`Type.${name} of a ${kindOf(source) ?? "non-schema"} is not supported in pichamber (objects only)`);
  }
  return TObject(mapProperties(source.properties), options);
}
const mapValues = (props, fn) => Object.fromEntries(Object.entries(props).map(([k, v]) => [k, fn(v)]));

function TObject(properties, options) {
  const required = Object.keys(properties).filter((key) => properties[key]["~optional"] !== true);
  const own = required.length > 0 ? { type: "object", required, properties } : { type: "object", properties };
  return schema("Object", own, options);
}

function Literal(value, options) {
  const type = typeof value;
  if (!["string", "number", "boolean", "bigint"].includes(type)) throw new InvalidLiteralValue(value);
  return schema("Literal", { type, const: value }, options);
}

function Enum(values, options) {
  const list = Array.isArray(values)
    ? values
    : Object.keys(values)
        .filter((key) => Number.isNaN(Number(key)))
        .map((key) => values[key]);
  return schema("Enum", { enum: list }, options);
}

function Record(key, value, options) {
  const keys = recordKeys(key);
  if (Array.isArray(keys)) return TObject(Object.fromEntries(keys.map((k) => [k, value])), options);
  return schema("Record", { type: "object", patternProperties: { [keys]: value } }, options);
}

function Codec(type) {
  return {
    Decode: (decode) => ({ Encode: (encode) => remark(type, { "~codec": { decode, encode } }) }),
  };
}

const builders = {
  Any: primitive("Any"),
  Unknown: primitive("Unknown"),
  Never: (options) => schema("Never", { not: {} }, options),
  String: primitive("String", "string"),
  Number: primitive("Number", "number"),
  Integer: primitive("Integer", "integer"),
  Boolean: primitive("Boolean", "boolean"),
  Null: primitive("Null", "null"),
  Undefined: primitive("Undefined", "undefined"),
  Void: primitive("Void", "void"),
  BigInt: primitive("BigInt", "bigint"),
  Symbol: primitive("Symbol", "symbol"),
  Literal,
  Enum,
  Array: (items, options) => schema("Array", { type: "array", items }, options),
  Tuple: (items, options) =>
    schema("Tuple", { type: "array", additionalItems: false, items, minItems: items.length }, options),
  Object: TObject,
  Record,
  Union: (anyOf, options) => schema("Union", { anyOf }, options),
  Intersect: (allOf, options) => schema("Intersect", { allOf }, options),
  Ref: (ref, options) => schema("Ref", { $ref: ref }, options),
  This: (options) => schema("This", { $ref: "#" }, options),
  Function: (parameters, returnType, options) =>
    schema("Function", { type: "function", parameters, returnType }, options),
  Constructor: (parameters, instanceType, options) =>
    schema("Constructor", { type: "constructor", parameters, instanceType }, options),
  Unsafe: (definition) => remark(definition, { "~unsafe": null }),
  Optional: (type) => remark(type, { "~optional": true }),
  Readonly: (type) => remark(type, { "~readonly": true }),
  Immutable: (type) => remark(type, { "~immutable": true }),
  With: (type, options) => remark(type, {}, options),
  Refine: (type, check, error = () => "Refinement failed") =>
    remark(type, { "~refine": [...(type["~refine"] ?? []), { check, error }] }),
  Codec,
  Partial: (type, options) =>
    reshape("Partial", type, options, (props) => mapValues(props, (p) => remark(p, { "~optional": true }))),
  Required: (type, options) =>
    reshape("Required", type, options, (props) => mapValues(props, (p) => remark(p, { "~optional": undefined }))),
  Pick: (type, indexer, options) => {
    const keys = indexerKeys(indexer);
    return reshape("Pick", type, options, (props) =>
      Object.fromEntries(Object.entries(props).filter(([k]) => keys.includes(k))),
    );
  },
  Omit: (type, indexer, options) => {
    const keys = indexerKeys(indexer);
    return reshape("Omit", type, options, (props) =>
      Object.fromEntries(Object.entries(props).filter(([k]) => !keys.includes(k))),
    );
  },
};

const UNSUPPORTED = [
  "Call", "Capitalize", "Conditional", "ConstructorParameters", "Cyclic", "Decode", "DecodeBuilder",
  "Dependent", "Encode", "EncodeBuilder", "Evaluate", "Exclude", "Extends", "ExtendsResult", "Extract",
  "Generic", "Identifier", "Index", "Infer", "InstanceType", "Instantiate", "Interface", "KeyOf", "Lowercase",
  "Mapped", "Module", "NonNullable", "Parameter", "Parameters", "ReadonlyObject", "ReadonlyType", "RecordKey",
  "RecordPattern", "RecordValue", "Rest", "ReturnType", "Script", "TemplateLiteral", "Uncapitalize", "Uppercase",
];
for (const name of UNSUPPORTED) builders[name] = unsupported(name);

// Like typebox's `export * as Type`: a frozen, module-namespace-like object.
export const Type = Object.freeze(
  Object.assign(Object.create(null), builders, guards, { [Symbol.toStringTag]: "Module" }),
);
export default Type;

// @sinclair/typebox 0.34 imports are aliased here; these symbols let them link.
export const Kind = Symbol.for("TypeBox.Kind");
export const Hint = Symbol.for("TypeBox.Hint");
export const OptionalKind = Symbol.for("TypeBox.Optional");
export const ReadonlyKind = Symbol.for("TypeBox.Readonly");
export const TransformKind = Symbol.for("TypeBox.Transform");

// Every Type member as a named export (several are global names, hence the renames).
const {
  Any, Array: TArray, BigInt: TBigInt, Boolean: TBoolean, Call, Capitalize, Conditional, Constructor,
  ConstructorParameters, Cyclic, Decode, DecodeBuilder, Dependent, Encode, EncodeBuilder, Evaluate, Exclude,
  Extends, ExtendsResult, Extract, Function: TFunction, Generic, Identifier, Immutable, Index, Infer,
  InstanceType, Instantiate, Integer, Interface, Intersect, IsAny, IsArray, IsBigInt, IsBoolean, IsCall, IsCodec,
  IsConstructor, IsCyclic, IsDependent, IsEnum, IsEnumValue, IsFunction, IsGeneric, IsIdentifier, IsImmutable,
  IsInfer, IsInteger, IsIntersect, IsLiteral, IsNever, IsNull, IsNumber, IsObject, IsOptional, IsParameter,
  IsReadonly, IsRecord, IsRef, IsRefine, IsRest, IsString, IsSymbol, IsTemplateLiteral, IsThis, IsTuple,
  IsUndefined, IsUnion, IsUnknown, IsUnsafe, IsVoid, KeyOf, Lowercase, Mapped, Module, Never, NonNullable, Null,
  Number: TNumber, Omit, Optional, Parameter, Parameters, Partial, Pick, Readonly, ReadonlyObject, ReadonlyType,
  RecordKey, RecordPattern, RecordValue, Ref, Refine, Required, Rest, ReturnType, Script, String: TString,
  Symbol: TSymbol, TemplateLiteral, This, Tuple, Uncapitalize, Undefined, Union, Unknown, Unsafe, Uppercase, Void,
  With,
} = Type;
export {
  Any, TArray as Array, TBigInt as BigInt, TBoolean as Boolean, Call, Capitalize, Codec, Conditional, Constructor,
  ConstructorParameters, Cyclic, Decode, DecodeBuilder, Dependent, Encode, EncodeBuilder, Enum, Evaluate, Exclude,
  Extends, ExtendsResult, Extract, TFunction as Function, Generic, Identifier, Immutable, Index, Infer,
  InstanceType, Instantiate, Integer, Interface, Intersect, IsAny, IsArray, IsBigInt, IsBoolean, IsCall, IsCodec,
  IsConstructor, IsCyclic, IsDependent, IsEnum, IsEnumValue, IsFunction, IsGeneric, IsIdentifier, IsImmutable,
  IsInfer, IsInteger, IsIntersect, IsKind, IsLiteral, IsNever, IsNull, IsNumber, IsObject, IsOptional, IsParameter,
  IsReadonly, IsRecord, IsRef, IsRefine, IsRest, IsSchema, IsString, IsSymbol, IsTemplateLiteral, IsThis, IsTuple,
  IsUndefined, IsUnion, IsUnknown, IsUnsafe, IsVoid, KeyOf, Literal, Lowercase, Mapped, Module, Never,
  NonNullable, Null, TNumber as Number, TObject as Object, Omit, Optional, Parameter, Parameters, Partial, Pick,
  Readonly, ReadonlyObject, ReadonlyType, Record, RecordKey, RecordPattern, RecordValue, Ref, Refine, Required,
  Rest, ReturnType, Script, TString as String, TSymbol as Symbol, TemplateLiteral, This, Tuple, Uncapitalize,
  Undefined, Union, Unknown, Unsafe, Uppercase, Void, With,
};
