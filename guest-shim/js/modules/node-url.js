// node:url for pichamber: fileURLToPath/pathToFileURL, and URL/URLSearchParams. QuickJS has no
// URL, so when globalThis.URL is missing a compact WHATWG-style implementation is used
// (special schemes, relative resolution, dot segments, percent-encoding; no IDNA/punycode).
// The fallbacks are also exported as URLPolyfill/URLSearchParamsPolyfill.

import { resolve as resolvePath } from "pichamber:node/path";
import { Buffer } from "pichamber:node/buffer";

const SPECIAL = { "ftp:": "21", "file:": "", "http:": "80", "https:": "443", "ws:": "80", "wss:": "443" };

function utf8PercentEncode(str, shouldEncode) {
  let out = "";
  for (const ch of str) {
    const cp = ch.codePointAt(0);
    if (cp < 0x80 && !shouldEncode(cp, ch)) {
      out += ch;
      continue;
    }
    for (const b of Buffer.from(ch, "utf8")) out += `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

const C0 = (cp) => cp < 0x20 || cp === 0x7f;
const FRAGMENT = (cp, ch) => C0(cp) || ' "<>`'.includes(ch);
const QUERY = (cp, ch) => C0(cp) || ' "#<>'.includes(ch);
const SPECIAL_QUERY = (cp, ch) => QUERY(cp, ch) || ch === "'";
const PATH = (cp, ch) => QUERY(cp, ch) || "?`{}^".includes(ch);
const USERINFO = (cp, ch) => PATH(cp, ch) || "/:;=@[\\]|".includes(ch);
const FORM = (cp, ch) => !/[A-Za-z0-9*\-._]/.test(ch);

function percentDecodeBytes(str) {
  const bytes = [];
  const enc = Buffer.from(str, "utf8");
  for (let i = 0; i < enc.length; i++) {
    const b = enc[i];
    if (b === 0x25 && i + 2 < enc.length) {
      const hex = String.fromCharCode(enc[i + 1], enc[i + 2]);
      if (/^[0-9a-fA-F]{2}$/.test(hex)) {
        bytes.push(Number.parseInt(hex, 16));
        i += 2;
        continue;
      }
    }
    bytes.push(b);
  }
  return Buffer.from(bytes).toString("utf8");
}

function invalidURL(input) {
  const err = new TypeError("Invalid URL");
  err.code = "ERR_INVALID_URL";
  err.input = input;
  return err;
}

function parseHost(host, special, input) {
  if (host.startsWith("[")) {
    if (!host.endsWith("]")) throw invalidURL(input);
    return host.toLowerCase();
  }
  if (!special) return utf8PercentEncode(host, C0);
  const decoded = percentDecodeBytes(host).toLowerCase();
  if (/[\x00-\x20#%/:<>?@[\\\]^|]/.test(decoded)) throw invalidURL(input);
  // IPv4 with decimal parts is normalised by real parsers; keep simple dotted forms as-is.
  return decoded;
}

function normalizePath(segments, special) {
  const out = [];
  for (let i = 0; i < segments.length; i++) {
    const seg = segments[i];
    const lower = seg.toLowerCase();
    const isLast = i === segments.length - 1;
    if (seg === ".." || lower === ".%2e" || lower === "%2e." || lower === "%2e%2e") {
      if (out.length) out.pop();
      if (isLast) out.push("");
    } else if (seg === "." || lower === "%2e") {
      if (isLast) out.push("");
    } else {
      out.push(utf8PercentEncode(seg, PATH));
    }
  }
  return out;
}

function parseURL(input, base) {
  let s = String(input)
    .replace(/^[\x00-\x20]+|[\x00-\x20]+$/g, "")
    .replace(/[\t\n\r]/g, "");
  const rec = {
    protocol: "",
    username: "",
    password: "",
    hostname: "",
    hasHost: false,
    port: "",
    path: [],
    opaque: null,
    query: null,
    fragment: null,
  };
  const hashIdx = s.indexOf("#");
  if (hashIdx !== -1) {
    rec.fragment = utf8PercentEncode(s.slice(hashIdx + 1), FRAGMENT);
    s = s.slice(0, hashIdx);
  }
  const schemeMatch = /^([A-Za-z][A-Za-z0-9+\-.]*):/.exec(s);
  let rest;
  if (schemeMatch) {
    rec.protocol = `${schemeMatch[1].toLowerCase()}:`;
    rest = s.slice(schemeMatch[0].length);
    const special = rec.protocol in SPECIAL;
    if (special && base && base.protocol === rec.protocol && !/^[/\\]/.test(rest) && rec.protocol !== "file:") {
      return parseRelative(rest, base, rec);
    }
  } else {
    if (!base) throw invalidURL(input);
    return parseRelative(s, base, rec);
  }
  const special = rec.protocol in SPECIAL;
  const slashes = special ? /^[/\\]{2}/ : /^\/\//;
  if (slashes.test(rest) || (special && rec.protocol !== "file:")) {
    rest = rest.replace(special && rec.protocol !== "file:" ? /^[/\\]*/ : /^[/\\]{2}/, "");
    let end = rest.search(special ? /[/\\?]/ : /[/?]/);
    if (end === -1) end = rest.length;
    parseAuthority(rest.slice(0, end), rec, special, input);
    rest = rest.slice(end);
  } else if (special && rec.protocol === "file:") {
    rec.hasHost = true; // file:/path or file:path
  } else if (!rest.startsWith("/")) {
    // opaque path (mailto:, data:, ...)
    const q = rest.indexOf("?");
    if (q !== -1) {
      rec.query = utf8PercentEncode(rest.slice(q + 1), QUERY);
      rest = rest.slice(0, q);
    }
    rec.opaque = utf8PercentEncode(rest, C0);
    return rec;
  }
  parsePathAndQuery(rest, rec, special);
  if (special && rec.protocol !== "file:" && rec.hostname === "") throw invalidURL(input);
  return rec;
}

function parseAuthority(auth, rec, special, input) {
  rec.hasHost = true;
  const at = auth.lastIndexOf("@");
  if (at !== -1) {
    const info = auth.slice(0, at);
    const colon = info.indexOf(":");
    rec.username = utf8PercentEncode(colon === -1 ? info : info.slice(0, colon), USERINFO);
    rec.password = colon === -1 ? "" : utf8PercentEncode(info.slice(colon + 1), USERINFO);
    auth = auth.slice(at + 1);
  }
  let host = auth;
  const portMatch = /:(\d*)$/.exec(auth);
  if (portMatch && !auth.endsWith("]")) {
    host = auth.slice(0, portMatch.index);
    if (portMatch[1] !== "") {
      const port = Number.parseInt(portMatch[1], 10);
      if (port > 65535) throw invalidURL(input);
      rec.port = SPECIAL[rec.protocol] === String(port) ? "" : String(port);
    }
  } else if (/:[^\]]*$/.test(auth) && !auth.startsWith("[")) {
    throw invalidURL(input);
  }
  rec.hostname = host === "" ? "" : parseHost(host, special, input);
  if (rec.protocol === "file:" && rec.hostname === "localhost") rec.hostname = "";
}

function parsePathAndQuery(rest, rec, special) {
  const q = rest.indexOf("?");
  if (q !== -1) {
    rec.query = utf8PercentEncode(rest.slice(q + 1), special ? SPECIAL_QUERY : QUERY);
    rest = rest.slice(0, q);
  }
  if (special) rest = rest.replace(/\\/g, "/");
  if (rest === "") {
    rec.path = special ? [""] : [];
    return;
  }
  const segs = rest.replace(/^\//, "").split("/");
  rec.path = normalizePath(segs, special);
}

function parseRelative(s, base, rec) {
  const special = base.protocol in SPECIAL;
  rec.protocol = base.protocol;
  if (base.opaque !== null) {
    if (s === "" && rec.fragment !== null) return { ...base, fragment: rec.fragment };
    throw invalidURL(s);
  }
  if ((special ? /^[/\\]{2}/ : /^\/\//).test(s)) return parseURL(`${base.protocol}${s}`, null);
  rec.username = base.username;
  rec.password = base.password;
  rec.hostname = base.hostname;
  rec.hasHost = base.hasHost;
  rec.port = base.port;
  if (s === "") {
    rec.path = base.path.slice();
    rec.query = base.query;
    return rec;
  }
  if ((special ? /^[/\\]/ : /^\//).test(s)) {
    parsePathAndQuery(s, rec, special);
    return rec;
  }
  if (s.startsWith("?")) {
    rec.path = base.path.slice();
    rec.query = utf8PercentEncode(s.slice(1), special ? SPECIAL_QUERY : QUERY);
    return rec;
  }
  const dir = base.path.slice(0, -1);
  const q = s.indexOf("?");
  const pathPart = q === -1 ? s : s.slice(0, q);
  const joined = [...dir, ...(special ? pathPart.replace(/\\/g, "/") : pathPart).split("/")];
  rec.path = normalizePath(joined, special);
  if (q !== -1) rec.query = utf8PercentEncode(s.slice(q + 1), special ? SPECIAL_QUERY : QUERY);
  return rec;
}

const records = new WeakMap();

export class URLSearchParamsPolyfill {
  #list = [];
  #url = null;

  constructor(init = "") {
    if (typeof init === "object" && init !== null) {
      if (typeof init[Symbol.iterator] === "function") {
        for (const pair of init) {
          const arr = [...pair];
          if (arr.length !== 2) throw new TypeError("Each query pair must be an iterable [name, value] tuple");
          this.#list.push([String(arr[0]), String(arr[1])]);
        }
      } else {
        for (const key of Object.keys(init)) this.#list.push([key, String(init[key])]);
      }
    } else {
      this.#parse(String(init));
    }
  }

  #parse(str) {
    this.#list = [];
    if (str.startsWith("?")) str = str.slice(1);
    for (const part of str.split("&")) {
      if (part === "") continue;
      const eq = part.indexOf("=");
      const name = eq === -1 ? part : part.slice(0, eq);
      const value = eq === -1 ? "" : part.slice(eq + 1);
      this.#list.push([percentDecodeBytes(name.replace(/\+/g, " ")), percentDecodeBytes(value.replace(/\+/g, " "))]);
    }
  }

  static _attach(params, url, query) {
    params.#url = url;
    params.#parse(query ?? "");
  }

  static _reparse(params, query) {
    params.#parse(query ?? "");
  }

  #update() {
    if (!this.#url) return;
    const rec = records.get(this.#url);
    const s = this.toString();
    rec.query = s === "" ? null : s;
  }

  get size() {
    return this.#list.length;
  }

  append(name, value) {
    this.#list.push([String(name), String(value)]);
    this.#update();
  }

  delete(name, value) {
    name = String(name);
    this.#list = this.#list.filter(([k, v]) => !(k === name && (value === undefined || v === String(value))));
    this.#update();
  }

  get(name) {
    name = String(name);
    const found = this.#list.find(([k]) => k === name);
    return found ? found[1] : null;
  }

  getAll(name) {
    name = String(name);
    return this.#list.filter(([k]) => k === name).map(([, v]) => v);
  }

  has(name, value) {
    name = String(name);
    return this.#list.some(([k, v]) => k === name && (value === undefined || v === String(value)));
  }

  set(name, value) {
    name = String(name);
    value = String(value);
    const idx = this.#list.findIndex(([k]) => k === name);
    if (idx === -1) this.#list.push([name, value]);
    else {
      this.#list[idx][1] = value;
      this.#list = this.#list.filter(([k], i) => k !== name || i === idx);
    }
    this.#update();
  }

  sort() {
    this.#list = this.#list
      .map((entry, i) => [entry, i])
      .sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1]))
      .map(([entry]) => entry);
    this.#update();
  }

  forEach(callback, thisArg) {
    for (const [k, v] of this.#list) callback.call(thisArg, v, k, this);
  }

  keys() {
    return this.#list.map(([k]) => k)[Symbol.iterator]();
  }

  values() {
    return this.#list.map(([, v]) => v)[Symbol.iterator]();
  }

  entries() {
    return this.#list.map(([k, v]) => [k, v])[Symbol.iterator]();
  }

  [Symbol.iterator]() {
    return this.entries();
  }

  toString() {
    return this.#list
      .map(
        ([k, v]) =>
          `${utf8PercentEncode(k, FORM).replace(/%20/g, "+")}=${utf8PercentEncode(v, FORM).replace(/%20/g, "+")}`,
      )
      .join("&");
  }

  get [Symbol.toStringTag]() {
    return "URLSearchParams";
  }
}

function serializePath(rec) {
  if (rec.opaque !== null) return rec.opaque;
  const special = rec.protocol in SPECIAL;
  if (!special && rec.path.length === 0) return "";
  let p = `/${rec.path.join("/")}`;
  if (!rec.hasHost && rec.path.length > 1 && rec.path[0] === "") p = `/.${p}`;
  return p;
}

function hasAuthority(rec) {
  return rec.hasHost;
}

export class URLPolyfill {
  #searchParams;

  constructor(url, base) {
    let baseRec = null;
    if (base !== undefined) {
      baseRec = base instanceof URLPolyfill ? records.get(base) : parseURL(String(base), null);
    }
    const rec = parseURL(String(url), baseRec);
    records.set(this, rec);
    this.#searchParams = new URLSearchParamsPolyfill();
    URLSearchParamsPolyfill._attach(this.#searchParams, this, rec.query);
  }

  static canParse(url, base) {
    try {
      new URLPolyfill(url, base);
      return true;
    } catch {
      return false;
    }
  }

  static parse(url, base) {
    try {
      return new URLPolyfill(url, base);
    } catch {
      return null;
    }
  }

  get href() {
    const rec = records.get(this);
    let out = rec.protocol;
    if (hasAuthority(rec)) {
      out += "//";
      if (rec.username || rec.password) out += `${rec.username}${rec.password ? `:${rec.password}` : ""}@`;
      out += rec.hostname + (rec.port ? `:${rec.port}` : "");
    }
    out += serializePath(rec);
    if (rec.query !== null) out += `?${rec.query}`;
    if (rec.fragment !== null) out += `#${rec.fragment}`;
    return out;
  }

  set href(v) {
    const rec = parseURL(String(v), null);
    records.set(this, rec);
    URLSearchParamsPolyfill._reparse(this.#searchParams, rec.query);
  }

  get origin() {
    const rec = records.get(this);
    if (rec.protocol in SPECIAL && rec.protocol !== "file:") return `${rec.protocol}//${this.host}`;
    return "null";
  }

  get protocol() {
    return records.get(this).protocol;
  }

  set protocol(v) {
    const m = /^([A-Za-z][A-Za-z0-9+\-.]*)/.exec(String(v));
    if (!m) return;
    const p = `${m[1].toLowerCase()}:`;
    const rec = records.get(this);
    if (p in SPECIAL !== rec.protocol in SPECIAL) return;
    rec.protocol = p;
    if (SPECIAL[p] === rec.port) rec.port = "";
  }

  get username() {
    return records.get(this).username;
  }

  set username(v) {
    records.get(this).username = utf8PercentEncode(String(v), USERINFO);
  }

  get password() {
    return records.get(this).password;
  }

  set password(v) {
    records.get(this).password = utf8PercentEncode(String(v), USERINFO);
  }

  get host() {
    const rec = records.get(this);
    return rec.hostname + (rec.port ? `:${rec.port}` : "");
  }

  set host(v) {
    const rec = records.get(this);
    if (rec.opaque !== null) return;
    const tmp = { ...rec };
    try {
      parseAuthority(String(v), tmp, rec.protocol in SPECIAL, v);
      rec.hostname = tmp.hostname;
      if (/:\d+$/.test(String(v))) rec.port = tmp.port;
    } catch {}
  }

  get hostname() {
    return records.get(this).hostname;
  }

  set hostname(v) {
    const rec = records.get(this);
    if (rec.opaque !== null) return;
    try {
      rec.hostname = parseHost(String(v), rec.protocol in SPECIAL, v);
    } catch {}
  }

  get port() {
    return records.get(this).port;
  }

  set port(v) {
    const rec = records.get(this);
    const s = String(v);
    if (s === "") {
      rec.port = "";
      return;
    }
    const m = /^\d+/.exec(s);
    if (!m) return;
    const n = Number.parseInt(m[0], 10);
    if (n > 65535) return;
    rec.port = SPECIAL[rec.protocol] === String(n) ? "" : String(n);
  }

  get pathname() {
    return serializePath(records.get(this));
  }

  set pathname(v) {
    const rec = records.get(this);
    if (rec.opaque !== null) return;
    const special = rec.protocol in SPECIAL;
    let s = String(v);
    if (special) s = s.replace(/\\/g, "/");
    rec.path = normalizePath(s.replace(/^\//, "").split("/"), special);
  }

  get search() {
    const q = records.get(this).query;
    return q === null || q === "" ? "" : `?${q}`;
  }

  set search(v) {
    const rec = records.get(this);
    let s = String(v);
    if (s.startsWith("?")) s = s.slice(1);
    rec.query = s === "" ? null : utf8PercentEncode(s, rec.protocol in SPECIAL ? SPECIAL_QUERY : QUERY);
    URLSearchParamsPolyfill._reparse(this.#searchParams, rec.query);
  }

  get searchParams() {
    return this.#searchParams;
  }

  get hash() {
    const f = records.get(this).fragment;
    return f === null || f === "" ? "" : `#${f}`;
  }

  set hash(v) {
    let s = String(v);
    if (s.startsWith("#")) s = s.slice(1);
    records.get(this).fragment = s === "" ? null : utf8PercentEncode(s, FRAGMENT);
  }

  toString() {
    return this.href;
  }

  toJSON() {
    return this.href;
  }

  get [Symbol.toStringTag]() {
    return "URL";
  }
}

// Read the globals without triggering the prelude's lazy getters (which load this module).
const nativeGlobal = (name) => Object.getOwnPropertyDescriptor(globalThis, name)?.value;
export const URL = nativeGlobal("URL") ?? URLPolyfill;
export const URLSearchParams = nativeGlobal("URLSearchParams") ?? URLSearchParamsPolyfill;

function nodeError(Ctor, code, message) {
  const err = new Ctor(message);
  err.code = code;
  return err;
}

export function fileURLToPath(path, _options) {
  let url = path;
  if (typeof url === "string") url = new URL(url);
  else if (!url || typeof url !== "object" || typeof url.href !== "string") {
    throw nodeError(
      TypeError,
      "ERR_INVALID_ARG_TYPE",
      `The "path" argument must be of type string or an instance of URL. Received ${url === null ? "null" : typeof url}`,
    );
  }
  if (url.protocol !== "file:") throw nodeError(TypeError, "ERR_INVALID_URL_SCHEME", "The URL must be of scheme file");
  if (url.hostname !== "") {
    throw nodeError(
      TypeError,
      "ERR_INVALID_FILE_URL_HOST",
      `File URL host must be "localhost" or empty on ${globalThis.process?.platform ?? "linux"}`,
    );
  }
  const pathname = url.pathname;
  for (let n = 0; n < pathname.length; n++) {
    if (pathname[n] === "%") {
      const third = pathname.codePointAt(n + 2) | 0x20;
      if (pathname[n + 1] === "2" && third === 102) {
        throw nodeError(TypeError, "ERR_INVALID_FILE_URL_PATH", "File URL path must not include encoded / characters");
      }
    }
  }
  return decodeURIComponent(pathname);
}

function encodePathChars(filepath) {
  return filepath
    .replace(/%/g, "%25")
    .replace(/\\/g, "%5C")
    .replace(/\n/g, "%0A")
    .replace(/\r/g, "%0D")
    .replace(/\t/g, "%09");
}

export function pathToFileURL(filepath, _options) {
  let resolved = resolvePath(filepath);
  if (filepath.charCodeAt(filepath.length - 1) === 47 && resolved[resolved.length - 1] !== "/") resolved += "/";
  resolved = encodePathChars(resolved).replace(/\?/g, "%3F").replace(/#/g, "%23");
  return new URL(`file://${resolved}`);
}

export function urlToHttpOptions(url) {
  const options = {
    protocol: url.protocol,
    hostname: url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname,
    hash: url.hash,
    search: url.search,
    pathname: url.pathname,
    path: `${url.pathname || ""}${url.search || ""}`,
    href: url.href,
  };
  if (url.port !== "") options.port = Number(url.port);
  if (url.username || url.password)
    options.auth = `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}`;
  return options;
}

export function domainToASCII(domain) {
  return String(domain).toLowerCase();
}

export function domainToUnicode(domain) {
  return String(domain).toLowerCase();
}

// Legacy API (url.parse / url.format / url.resolve), a light subset.
export function parse(urlStr, parseQueryString = false) {
  const out = {
    protocol: null,
    slashes: null,
    auth: null,
    host: null,
    port: null,
    hostname: null,
    hash: null,
    search: null,
    query: null,
    pathname: null,
    path: null,
    href: urlStr,
  };
  let rest = String(urlStr).trim();
  const hashIdx = rest.indexOf("#");
  if (hashIdx !== -1) {
    out.hash = rest.slice(hashIdx);
    rest = rest.slice(0, hashIdx);
  }
  const qIdx = rest.indexOf("?");
  if (qIdx !== -1) {
    out.search = rest.slice(qIdx);
    out.query = rest.slice(qIdx + 1);
    rest = rest.slice(0, qIdx);
  } else if (parseQueryString) {
    out.search = "";
    out.query = {};
  }
  if (parseQueryString && typeof out.query === "string") {
    const q = {};
    for (const [k, v] of new URLSearchParams(out.query)) {
      if (k in q) q[k] = [].concat(q[k], v);
      else q[k] = v;
    }
    out.query = q;
  }
  const proto = /^([a-z0-9.+-]+:)/i.exec(rest);
  if (proto) {
    out.protocol = proto[1].toLowerCase();
    rest = rest.slice(proto[1].length);
  }
  if (rest.startsWith("//")) {
    out.slashes = true;
    rest = rest.slice(2);
    let end = rest.indexOf("/");
    if (end === -1) end = rest.length;
    let host = rest.slice(0, end);
    rest = rest.slice(end);
    const at = host.lastIndexOf("@");
    if (at !== -1) {
      out.auth = decodeURIComponent(host.slice(0, at));
      host = host.slice(at + 1);
    }
    const pm = /:(\d*)$/.exec(host);
    if (pm) {
      if (pm[1]) out.port = pm[1];
      host = host.slice(0, pm.index);
    }
    out.hostname = host.toLowerCase();
    out.host = out.hostname + (out.port ? `:${out.port}` : "");
    if (rest === "" && out.protocol && out.protocol in SPECIAL) rest = "/";
  }
  out.pathname = rest || null;
  out.path = (out.pathname || "") + (out.search || "") || null;
  out.href = format(out);
  return out;
}

export function format(urlObject, _options) {
  if (typeof urlObject === "string") urlObject = parse(urlObject);
  if (urlObject && typeof urlObject.href === "string" && typeof urlObject.searchParams === "object")
    return urlObject.href;
  let auth = urlObject.auth || "";
  if (auth) auth = `${encodeURIComponent(auth).replace(/%3A/i, ":")}@`;
  let protocol = urlObject.protocol || "";
  if (protocol && !protocol.endsWith(":")) protocol += ":";
  let host = "";
  if (urlObject.host) host = auth + urlObject.host;
  else if (urlObject.hostname) host = auth + urlObject.hostname + (urlObject.port ? `:${urlObject.port}` : "");
  let pathname = urlObject.pathname || "";
  let hash = urlObject.hash || "";
  let search = urlObject.search || "";
  if (!search && urlObject.query && typeof urlObject.query === "object") {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(urlObject.query)) {
      if (Array.isArray(v)) for (const x of v) qs.append(k, x);
      else qs.append(k, v);
    }
    const s = qs.toString();
    if (s) search = `?${s}`;
  }
  if (urlObject.slashes || ((!protocol || protocol in SPECIAL) && host !== "")) {
    host = `//${host}`;
    if (pathname && pathname[0] !== "/") pathname = `/${pathname}`;
  }
  if (hash && hash[0] !== "#") hash = `#${hash}`;
  if (search && search[0] !== "?") search = `?${search}`;
  pathname = pathname.replace(/[?#]/g, encodeURIComponent);
  search = search.replace(/#/g, "%23");
  return protocol + host + pathname + search + hash;
}

export function resolve(from, to) {
  return new URL(to, new URL(from, "resolve://")).href.replace(/^resolve:\/\/\/?/, from.startsWith("/") ? "/" : "");
}

export function Url() {}

export default {
  URL,
  URLSearchParams,
  fileURLToPath,
  pathToFileURL,
  urlToHttpOptions,
  domainToASCII,
  domainToUnicode,
  parse,
  format,
  resolve,
  Url,
};
