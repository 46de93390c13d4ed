// node:tls for pichamber: like node:net, no sockets (an extension has no network access);
// the constants and checks that need none work.

import { noNetwork } from "pichamber:node/net";

const refuse = (what) =>
  function () {
    throw noNetwork(what);
  };

export const connect = refuse("tls.connect");
export const createServer = refuse("tls.createServer");
export const createSecureContext = refuse("tls.createSecureContext");
export class TLSSocket {
  constructor() {
    throw noNetwork("tls.TLSSocket");
  }
}
export class Server {
  constructor() {
    throw noNetwork("tls.Server");
  }
}
export const rootCertificates = Object.freeze([]);
export const DEFAULT_MIN_VERSION = "TLSv1.2";
export const DEFAULT_MAX_VERSION = "TLSv1.3";
export const DEFAULT_ECDH_CURVE = "auto";
export const DEFAULT_CIPHERS = "";
export function getCiphers() {
  return [];
}
export function checkServerIdentity() {
  return undefined;
}

export default {
  connect, createServer, createSecureContext, TLSSocket, Server, rootCertificates,
  DEFAULT_MIN_VERSION, DEFAULT_MAX_VERSION, DEFAULT_ECDH_CURVE, DEFAULT_CIPHERS, getCiphers, checkServerIdentity,
};
