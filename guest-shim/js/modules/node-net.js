// node:net for pichamber: the address helpers work; sockets do not, because an extension has
// no network access (no network capability exists yet).

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

export function isIPv4(input) {
  return IPV4.test(String(input));
}

export function isIPv6(input) {
  const text = String(input).split("%")[0];
  if (!text.includes(":")) return false;
  let groups = text.split(":");
  const last = groups[groups.length - 1];
  let needed = 8;
  if (last.includes(".")) {
    if (!isIPv4(last)) return false;
    groups = groups.slice(0, -1);
    needed = 6;
  }
  const compressed = text.indexOf("::");
  if (compressed !== text.lastIndexOf("::")) return false;
  const hex = /^[0-9a-fA-F]{1,4}$/;
  if (compressed >= 0) {
    const parts = groups.filter((g) => g !== "");
    return parts.length < needed && parts.every((g) => hex.test(g));
  }
  return groups.length === needed && groups.every((g) => hex.test(g));
}

export function isIP(input) {
  return isIPv4(input) ? 4 : isIPv6(input) ? 6 : 0;
}

/** The error every network operation gives: what was attempted, and why it cannot work. */
export function noNetwork(what) {
  const err = new Error(`${what} is not available inside a pichamber extension: extensions have no network access`);
  err.code = "ERR_ACCESS_DENIED";
  return err;
}

const refuse = (what) =>
  function () {
    throw noNetwork(what);
  };

export const connect = refuse("net.connect");
export const createConnection = refuse("net.createConnection");
export const createServer = refuse("net.createServer");
export class Socket {
  constructor() {
    throw noNetwork("net.Socket");
  }
}
export class Server {
  constructor() {
    throw noNetwork("net.Server");
  }
}

export default { isIP, isIPv4, isIPv6, connect, createConnection, createServer, Socket, Server };
