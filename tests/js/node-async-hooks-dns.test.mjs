// node:async_hooks' AsyncLocalStorage and AsyncResource compared with Node's on what
// pichamber carries a store through (run, promise callbacks, timers, bind), and node:dns's
// answers without a network. (Across `await`: async-lowering.test.mjs and tests/differential.rs.)
import { test } from "node:test";
import assert from "node:assert/strict";
import * as nodeHooks from "node:async_hooks";
import * as ours from "pichamber:node/async_hooks";
import * as dns from "pichamber:node/dns";
import dnsPromises from "pichamber:node/dns-promises";

/** What each step of a scenario saw, with one implementation. */
function scenario({ AsyncLocalStorage, AsyncResource }) {
  const als = new AsyncLocalStorage();
  const seen = [];
  return new Promise((done) => {
    als.run("outer", () => {
      seen.push(`sync ${als.getStore()}`);
      Promise.resolve().then(() => seen.push(`then ${als.getStore()}`));
      Promise.reject(new Error("x")).catch(() => seen.push(`catch ${als.getStore()}`));
      setTimeout(() => seen.push(`timeout ${als.getStore()}`), 1);
      setImmediate(() => seen.push(`immediate ${als.getStore()}`));
      queueMicrotask(() => seen.push(`microtask ${als.getStore()}`));
      const resource = new AsyncResource("test");
      als.run("inner", () => {
        seen.push(`nested ${als.getStore()}`);
        resource.runInAsyncScope(() => seen.push(`resource ${als.getStore()}`));
        als.exit(() => seen.push(`exit ${als.getStore()}`));
      });
      const bound = AsyncLocalStorage.bind(() => seen.push(`bound ${als.getStore()}`));
      als.run("other", bound);
    });
    seen.push(`after ${als.getStore()}`);
    setTimeout(() => done(seen.sort()), 20);
  });
}

test("AsyncLocalStorage carries its store where Node's does, through callbacks", async () => {
  assert.deepEqual(await scenario(ours), await scenario(nodeHooks));
});

test("AsyncResource.bind and snapshot run in the context they were made in", () => {
  for (const lib of [ours, nodeHooks]) {
    const als = new lib.AsyncLocalStorage();
    const bound = als.run(7, () => lib.AsyncResource.bind(() => als.getStore()));
    const snap = als.run(8, () => lib.AsyncLocalStorage.snapshot());
    assert.equal(bound(), 7);
    assert.equal(snap(() => als.getStore()), 8);
    assert.equal(als.getStore(), undefined);
  }
});

test("dns looks up addresses as themselves, names through the host, and says why one is refused", async () => {
  assert.deepEqual(await dnsPromises.lookup("127.0.0.1"), { address: "127.0.0.1", family: 4 });
  assert.deepEqual(await dnsPromises.lookup("::1", { all: true }), [{ address: "::1", family: 6 }]);
  await assert.rejects(dnsPromises.lookup("example.com"), (err) =>
    err.code === "ENOTFOUND" && err.syscall === "getaddrinfo" && err.hostname === "example.com" && /--allow-net=example.com/.test(err.message));
  const internal = globalThis.__pichamber_internal;
  internal.dnsHandler = (name) => {
    if (name === "gone.example") throw new Error("ENOTFOUND");
    return ["2001:db8::1", "192.0.2.1"];
  };
  assert.deepEqual(await dnsPromises.lookup("both.example"), { address: "2001:db8::1", family: 6 });
  assert.deepEqual(await dnsPromises.lookup("both.example", { family: 4 }), { address: "192.0.2.1", family: 4 });
  assert.deepEqual(await dnsPromises.lookup("both.example", { all: true, order: "ipv4first" }), [
    { address: "192.0.2.1", family: 4 }, { address: "2001:db8::1", family: 6 }]);
  assert.deepEqual(await dnsPromises.resolve6("both.example"), ["2001:db8::1"]);
  await assert.rejects(dnsPromises.lookup("gone.example"), (err) =>
    err.message === "getaddrinfo ENOTFOUND gone.example" && err.errno === -3008);
  await assert.rejects(dnsPromises.resolve4("gone.example"), (err) => err.message === "queryA ENOTFOUND gone.example");
  internal.dnsHandler = null;
  const viaCallback = await new Promise((resolve) => dns.lookup("10.0.0.1", (err, address, family) => resolve([err, address, family])));
  assert.deepEqual(viaCallback, [null, "10.0.0.1", 4]);
});
