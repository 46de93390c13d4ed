// node:path for pichamber: an original implementation of the observable behaviour of Node's
// POSIX path functions (written for pichamber, checked against node:path.posix by
// tests/js/node-path.test.mjs). The guest only has POSIX paths, so `win32` is the same object.

function checkString(value, name) {
  if (typeof value === "string") return;
  const err = new TypeError(
    `The "${name}" argument must be of type string. Received ${value === null ? "null" : typeof value}`,
  );
  err.code = "ERR_INVALID_ARG_TYPE";
  throw err;
}

// The segments of `p` with "." and empty parts dropped and ".." applied; a ".." that climbs
// past the start is kept only for relative paths.
function segments(p, keepLeadingUp) {
  const out = [];
  for (const part of p.split("/")) {
    if (part === "" || part === ".") continue;
    if (part !== "..") out.push(part);
    else if (out.length > 0 && out[out.length - 1] !== "..") out.pop();
    else if (keepLeadingUp) out.push("..");
  }
  return out;
}

// Index of the separator before the last name (trailing slashes ignored), or -1.
function lastSeparator(p) {
  let end = p.length;
  while (end > 1 && p[end - 1] === "/") end--;
  return p.lastIndexOf("/", end - 1);
}

export function normalize(p) {
  checkString(p, "path");
  if (p === "") return ".";
  const absolute = p.startsWith("/");
  let body = segments(p, !absolute).join("/");
  if (body === "" && !absolute) body = ".";
  if (body !== "" && p.endsWith("/")) body += "/";
  return absolute ? `/${body}` : body;
}

export function join(...parts) {
  for (const part of parts) checkString(part, "path");
  const joined = parts.filter((part) => part !== "").join("/");
  return joined === "" ? "." : normalize(joined);
}

export function resolve(...parts) {
  let path = "";
  for (let i = parts.length - 1; i >= -1 && !path.startsWith("/"); i--) {
    const part = i >= 0 ? parts[i] : process.cwd();
    checkString(part, "paths[" + i + "]");
    if (part !== "") path = path === "" ? part : `${part}/${path}`;
  }
  return `/${segments(path, false).join("/")}`;
}

export function relative(from, to) {
  checkString(from, "from");
  checkString(to, "to");
  const a = segments(resolve(from), false);
  const b = segments(resolve(to), false);
  let common = 0;
  while (common < a.length && common < b.length && a[common] === b[common]) common++;
  return [...a.slice(common).map(() => ".."), ...b.slice(common)].join("/");
}

export function isAbsolute(p) {
  checkString(p, "path");
  return p.startsWith("/");
}

export function dirname(p) {
  checkString(p, "path");
  const cut = lastSeparator(p);
  if (cut > 1 || (cut === 1 && !p.startsWith("/"))) return p.slice(0, cut);
  if (cut === 1) return "//";
  return p.startsWith("/") ? "/" : ".";
}

export function basename(p, ext) {
  checkString(p, "path");
  if (ext !== undefined) checkString(ext, "ext");
  let base = p.replace(/\/+$/, "");
  base = base.slice(base.lastIndexOf("/") + 1);
  if (ext && ext.length <= p.length) {
    // Node compares the suffix against the raw path, which shows in these two corner cases.
    if (ext === p) return "";
    if (/^\/+$/.test(p)) return p;
    if (base !== ext && base.endsWith(ext)) base = base.slice(0, -ext.length);
  }
  return base;
}

export function extname(p) {
  checkString(p, "path");
  const base = basename(p);
  const dot = base.lastIndexOf(".");
  return dot <= 0 || base === ".." ? "" : base.slice(dot);
}

export function parse(p) {
  checkString(p, "path");
  const root = p.startsWith("/") ? "/" : "";
  const base = basename(p);
  // Node's parse() (unlike extname()) splits "/.." as name "." plus ext ".".
  const ext = /^\/\.\.\/*$/.test(p) ? "." : extname(p);
  const cut = lastSeparator(p);
  const dir = cut > 0 ? p.slice(0, cut) : root;
  return { root, dir, base, ext, name: ext ? base.slice(0, -ext.length) : base };
}

export function format(obj) {
  if (obj === null || typeof obj !== "object") {
    const err = new TypeError(`The "pathObject" argument must be of type object. Received ${obj}`);
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  const dir = obj.dir || obj.root;
  const ext = obj.ext ? (obj.ext.startsWith(".") ? obj.ext : `.${obj.ext}`) : "";
  const base = obj.base || `${obj.name || ""}${ext}`;
  if (!dir) return base;
  return dir === obj.root ? dir + base : `${dir}/${base}`;
}

export function toNamespacedPath(p) {
  return p;
}

export const sep = "/";
export const delimiter = ":";

const path = {
  normalize,
  join,
  resolve,
  relative,
  isAbsolute,
  dirname,
  basename,
  extname,
  parse,
  format,
  toNamespacedPath,
  sep,
  delimiter,
};
path.posix = path;
path.win32 = path;

export const posix = path;
export const win32 = path;
export default path;
