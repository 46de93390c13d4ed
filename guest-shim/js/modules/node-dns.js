// node:dns and dns/promises for pichamber. An address (IPv4 or IPv6) looks itself up, as in
// Node, without a query; a name is not resolved: an extension has no network access (its
// fetches go through the host, which resolves the hosts it was granted). The failure is
// Node's ENOTFOUND with a sentence saying why.

import { isIP } from "pichamber:node/net";

function notResolved(syscall, hostname) {
  const err = new Error(
    `${syscall} ENOTFOUND ${hostname}: names are not resolved inside a pichamber extension (it has no network access; fetch reaches the hosts it was granted)`,
  );
  err.code = "ENOTFOUND";
  err.errno = -3008;
  err.syscall = syscall;
  err.hostname = hostname;
  return err;
}

function lookupNow(hostname, options) {
  const opts = typeof options === "number" ? { family: options } : (options ?? {});
  const family = isIP(hostname);
  if (!family) throw notResolved("getaddrinfo", hostname);
  if (opts.family && opts.family !== family && opts.family !== 0) throw notResolved("getaddrinfo", hostname);
  const found = { address: hostname, family };
  return opts.all ? [found] : found;
}

export const promises = {
  async lookup(hostname, options) {
    return lookupNow(String(hostname), options);
  },
  async resolve(hostname) {
    throw notResolved("queryA", String(hostname));
  },
  async resolve4(hostname) {
    throw notResolved("queryA", String(hostname));
  },
  async resolve6(hostname) {
    throw notResolved("queryAaaa", String(hostname));
  },
  async reverse(ip) {
    throw notResolved("getHostByAddr", String(ip));
  },
  getServers: () => [],
  setServers() {},
  setDefaultResultOrder() {},
  getDefaultResultOrder: () => "verbatim",
};

export function lookup(hostname, options, callback) {
  const cb = typeof options === "function" ? options : callback;
  const opts = typeof options === "function" ? {} : options;
  queueMicrotask(() => {
    try {
      const found = lookupNow(String(hostname), opts);
      if (Array.isArray(found)) cb(null, found);
      else cb(null, found.address, found.family);
    } catch (err) {
      cb(err);
    }
  });
}

const callbackOf = (name) =>
  function (hostname, ...rest) {
    const cb = rest.pop();
    promises[name](hostname).then((r) => cb(null, r), (e) => cb(e));
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
