// node:dns and dns/promises for pichamber. An address (IPv4 or IPv6) looks itself up, as in
// Node, without a query. A name is resolved by the host when the network capability grants
// it (`--allow-net=NAME`, as for fetch), with the system's resolver as Node's getaddrinfo;
// a name not granted fails with Node's ENOTFOUND and a sentence naming the flag. resolve4,
// resolve6 and resolve answer from the same lookup (no DNS query of their own), reverse
// lookups are not made.

import { isIP } from "pichamber:node/net";

const ERRNO = { ENOTFOUND: -3008, EAI_AGAIN: -3001, EAI_FAIL: -3007, ENODATA: -3008 };

function dnsError(syscall, code, hostname, why) {
  const err = new Error(`${syscall} ${code} ${hostname}${why ? `: ${why}` : ""}`);
  err.errno = ERRNO[code] ?? -3008;
  err.code = code;
  err.syscall = syscall;
  err.hostname = hostname;
  return err;
}

function invalidArg(name, value) {
  const err = new TypeError(`The "${name}" argument must be of type string. Received ${value === null ? "null" : typeof value}`);
  err.code = "ERR_INVALID_ARG_TYPE";
  return err;
}

const familyOf = (f) => (f === "IPv4" ? 4 : f === "IPv6" ? 6 : Number(f ?? 0) || 0);

/** Node's lookup result for `hostname`: `{address, family}`, or all of them as an array. */
async function lookupAll(hostname, options) {
  if (typeof hostname !== "string") throw invalidArg("hostname", hostname);
  const opts = typeof options === "number" ? { family: options } : (options ?? {});
  const family = familyOf(opts.family);
  let found;
  if (!hostname) {
    found = [];
  } else if (isIP(hostname)) {
    found = [{ address: hostname, family: isIP(hostname) }];
  } else {
    const outcome = await globalThis.__pichamber_internal.dnsLookup(hostname);
    if ("error" in outcome) {
      const code = /^E[A-Z_]+$/.test(outcome.error) ? outcome.error : "ENOTFOUND";
      throw dnsError("getaddrinfo", code, hostname, code === outcome.error ? "" : outcome.error);
    }
    found = outcome.ok.map((address) => ({ address, family: isIP(address) }));
  }
  if (family) found = found.filter((a) => a.family === family);
  const order = opts.order ?? (opts.verbatim === false ? "ipv4first" : "verbatim");
  if (order === "ipv4first") found.sort((a, b) => a.family - b.family);
  if (order === "ipv6first") found.sort((a, b) => b.family - a.family);
  if (hostname && found.length === 0) throw dnsError("getaddrinfo", "ENOTFOUND", hostname);
  return { found, all: opts.all === true, family };
}

async function lookupPromise(hostname, options) {
  const { found, all, family } = await lookupAll(hostname, options);
  if (all) return found;
  return found[0] ?? { address: null, family: family === 6 ? 6 : 4 };
}

async function resolveFamily(hostname, family) {
  const syscall = family === 6 ? "queryAaaa" : "queryA";
  let found;
  try {
    ({ found } = await lookupAll(hostname, { all: true }));
  } catch (err) {
    throw dnsError(syscall, err.code, hostname);
  }
  const addresses = found.filter((a) => a.family === family).map((a) => a.address);
  if (addresses.length === 0) throw dnsError(syscall, "ENODATA", hostname);
  return addresses;
}

export const promises = {
  lookup: lookupPromise,
  resolve(hostname, rrtype = "A") {
    if (rrtype === "A") return resolveFamily(hostname, 4);
    if (rrtype === "AAAA") return resolveFamily(hostname, 6);
    return Promise.reject(dnsError(`query${rrtype[0]}${rrtype.slice(1).toLowerCase()}`, "ENOTIMP", hostname, "only A and AAAA records are looked up in pichamber"));
  },
  resolve4: (hostname) => resolveFamily(hostname, 4),
  resolve6: (hostname) => resolveFamily(hostname, 6),
  async reverse(ip) {
    throw dnsError("getHostByAddr", "ENOTFOUND", String(ip), "reverse lookups are not made in pichamber");
  },
  getServers: () => [],
  setServers() {},
  setDefaultResultOrder() {},
  getDefaultResultOrder: () => "verbatim",
};

export function lookup(hostname, options, callback) {
  const cb = typeof options === "function" ? options : callback;
  const opts = typeof options === "function" ? {} : options;
  if (typeof cb !== "function") {
    const err = new TypeError(`The "callback" argument must be of type function. Received ${typeof cb}`);
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  if (typeof hostname !== "string" && hostname !== undefined && hostname !== null) throw invalidArg("hostname", hostname);
  lookupPromise(hostname ?? "", opts).then(
    (found) => (Array.isArray(found) ? cb(null, found) : cb(null, found.address, found.family)),
    (err) => cb(err),
  );
}

const callbackOf = (name) =>
  function (hostname, ...rest) {
    const cb = rest.pop();
    promises[name](hostname, ...rest).then((r) => cb(null, r), (e) => cb(e));
  };

export const resolve = callbackOf("resolve");
export const resolve4 = callbackOf("resolve4");
export const resolve6 = callbackOf("resolve6");
export const reverse = callbackOf("reverse");
export const getServers = promises.getServers;
export const setServers = promises.setServers;
export const setDefaultResultOrder = promises.setDefaultResultOrder;
export const getDefaultResultOrder = promises.getDefaultResultOrder;
export const ADDRCONFIG = 1024;
export const V4MAPPED = 2048;
export const ALL = 256;
export const NOTFOUND = "ENOTFOUND";

export default {
  lookup, resolve, resolve4, resolve6, reverse, getServers, setServers, setDefaultResultOrder,
  getDefaultResultOrder, promises, ADDRCONFIG, V4MAPPED, ALL, NOTFOUND,
};
