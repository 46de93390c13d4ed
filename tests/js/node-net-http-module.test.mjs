// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-net.js and node-http.js compared with Node's own modules where they
// work in the guest, and refusing clearly where they cannot (no network access).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as realNet from "node:net";
import * as realHttp from "node:http";
import net from "pichamber:node/net";
import http, { METHODS, STATUS_CODES } from "pichamber:node/http";
import { builtinModules, createRequire, isBuiltin } from "pichamber:node/module";

test("net address helpers agree with Node", () => {
  const inputs = [
    "127.0.0.1", "255.255.255.255", "256.1.1.1", "1.2.3", "01.2.3.4", "::1", "::", "fe80::1%eth0",
    "2001:db8::8a2e:370:7334", "2001:db8:0:0:0:0:2:1", "1:2:3:4:5:6:7:8:9", "::ffff:192.168.1.1",
    "1::2::3", "gggg::1", "", "localhost", "1:2:3:4:5:6:7::", "::1.2.3.4",
  ];
  for (const input of inputs) {
    assert.equal(net.isIP(input), realNet.isIP(input), input);
    assert.equal(net.isIPv4(input), realNet.isIPv4(input), input);
    assert.equal(net.isIPv6(input), realNet.isIPv6(input), input);
  }
});

test("http tables match Node; sockets, servers and requests are refused", () => {
  assert.deepEqual(METHODS, realHttp.METHODS);
  for (const [code, text] of Object.entries(STATUS_CODES)) assert.equal(text, realHttp.STATUS_CODES[code], code);
  for (const attempt of [() => http.createServer(), () => http.request("http://example.com"), () => net.connect(80)]) {
    assert.throws(attempt, (e) => e.code === "ERR_ACCESS_DENIED" && /extensions have no network access/.test(e.message));
  }
});

test("createRequire serves the network modules with the others", () => {
  const require = createRequire("/ext/pkg/index.js");
  assert.equal(require("node:http").STATUS_CODES, STATUS_CODES);
  assert.equal(require("https").request, http.request);
  assert.equal(require("net").isIP, net.isIP);
  assert.ok(isBuiltin("node:net") && isBuiltin("https") && !isBuiltin("node:dgram"));
  assert.ok(builtinModules.includes("http"));
});
