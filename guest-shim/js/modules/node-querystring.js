// node:querystring for pichamber: Node's legacy query-string parser and serializer.

export function unescape(text) {
  try {
    return decodeURIComponent(text);
  } catch {
    return unescapeBytes(text);
  }
}

/** Node's fallback for malformed escapes: each valid %XX is a byte, the rest UTF-8, decoded. */
function unescapeBytes(text) {
  const bytes = [];
  const encoder = new TextEncoder();
  for (let i = 0; i < text.length; i++) {
    if (text[i] === "%" && /^[0-9a-fA-F]{2}$/.test(text.slice(i + 1, i + 3))) {
      bytes.push(parseInt(text.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      const code = text.codePointAt(i);
      const char = String.fromCodePoint(code);
      bytes.push(...encoder.encode(char));
      i += char.length - 1;
    }
  }
  return new TextDecoder().decode(new Uint8Array(bytes));
}

export function escape(text) {
  return encodeURIComponent(String(text));
}

function stringifyPrimitive(v) {
  if (typeof v === "string") return v;
  if ((typeof v === "number" && Number.isFinite(v)) || typeof v === "bigint" || typeof v === "boolean") return String(v);
  return "";
}

/** `{a: 1, b: ["x", "y"]}` → `a=1&b=x&b=y`. */
export function stringify(object, sep = "&", eq = "=", options) {
  const encode = options?.encodeURIComponent ?? escape;
  if (object === null || typeof object !== "object") return "";
  return Object.keys(object)
    .map((key) => {
      const k = encode(stringifyPrimitive(key));
      const value = object[key];
      if (Array.isArray(value)) return value.map((v) => `${k}${eq}${encode(stringifyPrimitive(v))}`).join(sep);
      return `${k}${eq}${encode(stringifyPrimitive(value))}`;
    })
    .filter(Boolean)
    .join(sep);
}

/** `a=1&b=x&b=y` → `{a: "1", b: ["x", "y"]}` (a null-prototype object, as in Node). */
export function parse(text, sep = "&", eq = "=", options) {
  const out = Object.create(null);
  if (typeof text !== "string" || text.length === 0) return out;
  const decode = options?.decodeURIComponent ?? unescape;
  const max = options?.maxKeys ?? 1000;
  let parts = text.split(sep);
  if (max > 0) parts = parts.slice(0, max);
  for (const part of parts) {
    if (part === "") continue;
    const at = part.indexOf(eq);
    // A "+" is a space in a query string (before decoding, so "%2B" stays a plus).
    const spaced = part.replace(/\+/g, " ");
    const key = decode(at >= 0 ? spaced.slice(0, at) : spaced);
    const value = at >= 0 ? decode(spaced.slice(at + eq.length)) : "";
    if (!(key in out)) out[key] = value;
    else if (Array.isArray(out[key])) out[key].push(value);
    else out[key] = [out[key], value];
  }
  return out;
}

export const decode = parse;
export const encode = stringify;

export default { parse, stringify, escape, unescape, decode, encode };
