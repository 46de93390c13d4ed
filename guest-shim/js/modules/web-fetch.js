// fetch, Headers and Response for pichamber. The host carries the request out under the
// network capability (`--allow-net=HOST`): the guest has no sockets. The whole body travels in
// one piece each way (base64 in JSON), capped by the host; a refused host is a TypeError whose
// message names the flag that grants it.
import { Buffer } from "pichamber:node/buffer";

const lower = (name) => String(name).toLowerCase();

// The Fetch standard's bad ports: a request to one fails before it is made, as in Node.
const BAD_PORTS = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102,
  103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465,
  512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993,
  995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668,
  6669, 6679, 6697, 10080,
]);

// The host starts a network failure (the request was allowed) with "fetch failed: " and what
// Node's cause says (host/access/src/net.rs, NETWORK_FAILURE); Node throws a TypeError "fetch
// failed" whose cause carries the code. A refusal by the grants keeps its whole message.
const NETWORK_FAILURE = "fetch failed: ";
function fetchError(message) {
  if (message === "bad port") return new TypeError("fetch failed", { cause: new Error(message) });
  if (!message.startsWith(NETWORK_FAILURE)) return new TypeError(message);
  const detail = message.slice(NETWORK_FAILURE.length);
  const cause = new Error(detail);
  const [syscall, code, target] = detail.split(" ");
  if (/^(E[A-Z_]+)$/.test(code)) {
    cause.code = code;
    cause.syscall = syscall;
    if (syscall === "getaddrinfo") cause.hostname = target;
    const at = syscall === "connect" && /^\[?([^\]]*)\]?:(\d+)$/.exec(target);
    if (at) {
      cause.address = at[1];
      cause.port = Number(at[2]);
    }
  } else {
    const code = /\((E[A-Z]+)\)$/.exec(detail);
    if (code) cause.code = code[1];
  }
  return new TypeError("fetch failed", { cause });
}

export class Headers {
  #map = new Map(); // lower-case name -> [original name, values[]]
  constructor(init) {
    if (init == null) return;
    if (init instanceof Headers || typeof init[Symbol.iterator] === "function") {
      for (const [k, v] of init) this.append(k, v);
    } else {
      for (const [k, v] of Object.entries(init)) this.append(k, v);
    }
  }
  append(name, value) {
    const key = lower(name);
    const entry = this.#map.get(key);
    if (entry) entry[1].push(String(value));
    else this.#map.set(key, [String(name), [String(value)]]);
  }
  set(name, value) {
    this.#map.set(lower(name), [String(name), [String(value)]]);
  }
  get(name) {
    const entry = this.#map.get(lower(name));
    return entry ? entry[1].join(", ") : null;
  }
  getSetCookie() {
    return this.#map.get("set-cookie")?.[1].slice() ?? [];
  }
  has(name) {
    return this.#map.has(lower(name));
  }
  delete(name) {
    this.#map.delete(lower(name));
  }
  forEach(callback, thisArg) {
    for (const [k, v] of this) callback.call(thisArg, v, k, this);
  }
  *entries() {
    for (const key of [...this.#map.keys()].sort()) {
      // Set-Cookie values cannot be joined: each is its own entry (the Fetch standard).
      if (key === "set-cookie") for (const v of this.#map.get(key)[1]) yield [key, v];
      else yield [key, this.get(key)];
    }
  }
  *keys() {
    for (const [k] of this.entries()) yield k;
  }
  *values() {
    for (const [, v] of this.entries()) yield v;
  }
  [Symbol.iterator]() {
    return this.entries();
  }
}

function bodyBytes(body) {
  if (body == null) return undefined;
  if (typeof body === "string") return Buffer.from(body, "utf8");
  if (body instanceof ArrayBuffer) return Buffer.from(new Uint8Array(body));
  if (ArrayBuffer.isView(body)) return Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  if (typeof body.toString === "function" && body.constructor?.name === "URLSearchParams") {
    return Buffer.from(body.toString(), "utf8");
  }
  throw new TypeError("fetch: this body type is not supported in pichamber (use a string, a typed array or URLSearchParams)");
}

export class Response {
  #bytes;
  #hasBody;
  #read = false;
  #stream = null;
  constructor(body, init = {}) {
    this.#hasBody = body != null;
    this.#bytes = bodyBytes(body) ?? Buffer.alloc(0);
    this.status = init.status ?? 200;
    this.statusText = init.statusText ?? "";
    this.headers = new Headers(init.headers);
    this.ok = this.status >= 200 && this.status < 300;
    this.url = init.url ?? "";
    this.redirected = init.redirected ?? false;
    this.type = "basic";
  }
  // The body as a stream (the global ReadableStream, loaded on first use): the whole body in
  // one chunk, as it arrived from the host. Reading it uses the body up, as text() does.
  get body() {
    if (!this.#hasBody) return null;
    if (!this.#stream) {
      const bytes = this.#bytes;
      this.#stream = new globalThis.ReadableStream({
        pull: (controller) => {
          this.#read = true;
          if (bytes.length) controller.enqueue(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength));
          controller.close();
        },
      });
    }
    return this.#stream;
  }
  get bodyUsed() {
    return this.#read;
  }
  #consume() {
    if (this.#read || this.#stream?.locked) throw new TypeError("Body is unusable: Body has already been read");
    this.#read = true;
    return this.#bytes;
  }
  async text() {
    return this.#consume().toString("utf8");
  }
  async json() {
    return JSON.parse(await this.text());
  }
  async arrayBuffer() {
    const bytes = this.#consume();
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  }
  async bytes() {
    return new Uint8Array(await this.arrayBuffer());
  }
  clone() {
    if (this.bodyUsed || this.#stream?.locked) throw new TypeError("Response.clone: Body has already been consumed.");
    const { status, statusText, headers, url, redirected } = this;
    return new Response(this.#hasBody ? this.#bytes : null, { status, statusText, headers, url, redirected });
  }
  static json(data, init = {}) {
    const headers = new Headers(init.headers);
    if (!headers.has("content-type")) headers.set("content-type", "application/json");
    return new Response(JSON.stringify(data), { ...init, headers });
  }
}

function abortError() {
  const err = new Error("This operation was aborted");
  err.name = "AbortError";
  err.code = 20;
  return err;
}

export async function fetch(input, init = {}) {
  const url = typeof input === "string" ? input : String(input?.href ?? input?.url ?? input);
  const method = String(init.method ?? input?.method ?? "GET").toUpperCase();
  const headers = new Headers(init.headers ?? input?.headers);
  const bytes = bodyBytes(init.body);
  if (bytes && (method === "GET" || method === "HEAD")) {
    throw new TypeError("Request with GET/HEAD method cannot have body.");
  }
  if (typeof init.body === "string" && !headers.has("content-type")) {
    headers.set("content-type", "text/plain;charset=UTF-8");
  }
  const signal = init.signal ?? input?.signal;
  if (signal?.aborted) throw abortError();
  let port = "";
  try {
    port = new URL(url).port;
  } catch {} // the host says what is wrong with the URL
  if (BAD_PORTS.has(Number(port))) throw fetchError("bad port");
  const request = {
    url,
    method,
    headers: [...headers],
    body: bytes?.toString("base64"),
  };
  const outcome = await globalThis.__pichamber_internal.fetchOperation(request, signal);
  if (outcome.cancelled) throw abortError();
  if ("error" in outcome) throw fetchError(outcome.error);
  const answer = outcome.ok;
  return new Response(Buffer.from(answer.body, "base64"), {
    status: answer.status,
    statusText: answer.statusText,
    headers: answer.headers,
    url: answer.url,
    redirected: answer.redirected,
  });
}
