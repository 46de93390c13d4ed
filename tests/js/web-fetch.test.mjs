// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// web-fetch.js: Headers and Response compared with Node's own; fetch over the stubbed
// host operation (the request the host receives, the response it hands back, refusals).
import { test } from "node:test";
import assert from "node:assert/strict";
import { Headers, Response, fetch } from "pichamber:fetch";

test("Headers behave as Node's", () => {
  const init = [["Content-Type", "text/plain"], ["X-A", "1"], ["x-a", "2"], ["Set-Cookie", "a=1"], ["set-cookie", "b=2"]];
  const mine = new Headers(init);
  const real = new globalThis.Headers(init);
  assert.deepEqual([...mine], [...real]);
  for (const name of ["content-type", "X-A", "missing"]) assert.equal(mine.get(name), real.get(name));
  assert.deepEqual(mine.getSetCookie(), real.getSetCookie());
  mine.set("x-a", "3");
  real.set("x-a", "3");
  mine.delete("content-type");
  real.delete("content-type");
  assert.deepEqual([...mine.entries()], [...real.entries()]);
  assert.equal(mine.has("X-A"), real.has("X-A"));
  assert.deepEqual([...new Headers({ B: "2", a: "1" })], [...new globalThis.Headers({ B: "2", a: "1" })]);
});

test("Response bodies read as Node's", async () => {
  const mine = new Response('{"a":1}', { status: 201, headers: { "X-Y": "z" } });
  const real = new globalThis.Response('{"a":1}', { status: 201, headers: { "X-Y": "z" } });
  assert.equal(mine.ok, real.ok);
  assert.equal(mine.status, real.status);
  assert.equal(mine.headers.get("x-y"), real.headers.get("x-y"));
  assert.deepEqual(await mine.clone().json(), await real.clone().json());
  assert.equal(await mine.text(), await real.text());
  await assert.rejects(mine.text(), TypeError);
  await assert.rejects(real.text(), TypeError);
  assert.equal(await Response.json({ b: 2 }).text(), await globalThis.Response.json({ b: 2 }).text());
});

test("Response.body streams the bytes as Node's does, and reading it uses the body up", async () => {
  const outcome = async (make) => {
    const r = make();
    const log = [r.body === null ? "no body" : "body", r.bodyUsed];
    if (r.body) {
      const chunks = [];
      for await (const chunk of r.body) chunks.push(chunk instanceof Uint8Array, Buffer.from(chunk).toString());
      log.push(chunks, r.bodyUsed);
      log.push(await r.text().then((t) => t, (e) => e.constructor.name));
      log.push((() => { try { r.clone(); return "cloned"; } catch (e) { return e.constructor.name; } })());
    }
    return log;
  };
  for (const [name, body] of [["text", "héllo"], ["empty", ""], ["null", null], ["bytes", new Uint8Array([104, 105])]]) {
    assert.deepEqual(await outcome(() => new Response(body)), await outcome(() => new globalThis.Response(body)), name);
  }
  // A body locked by a reader cannot be read as text either.
  const mine = new Response("x");
  const real = new globalThis.Response("x");
  mine.body.getReader();
  real.body.getReader();
  await assert.rejects(mine.text(), TypeError);
  await assert.rejects(real.text(), TypeError);
});

test("fetch hands the host one request and builds the response from its answer", async () => {
  const internal = globalThis.__pichamber_internal;
  let seen;
  internal.fetchHandler = (request) => {
    seen = request;
    return {
      url: "https://example.com/final", status: 404, statusText: "Not Found", redirected: true,
      headers: [["content-type", "application/json"]], body: Buffer.from('{"missing":true}').toString("base64"),
    };
  };
  const r = await fetch("https://example.com/x", { method: "post", body: "hi", headers: { "X-K": "v" } });
  assert.deepEqual(seen, {
    url: "https://example.com/x", method: "POST",
    headers: [["content-type", "text/plain;charset=UTF-8"], ["x-k", "v"]],
    body: Buffer.from("hi").toString("base64"),
  });
  assert.equal(r.status, 404);
  assert.equal(r.ok, false);
  assert.equal(r.redirected, true);
  assert.deepEqual(await r.json(), { missing: true });
  // A refusal by the host is a TypeError carrying the host's message.
  internal.fetchHandler = () => Promise.reject(new Error("fetch of https://x/ denied: … (grant it with --allow-net=x)"));
  await assert.rejects(fetch("https://x/"), (e) => e instanceof TypeError && /--allow-net=x/.test(e.message));
  await assert.rejects(fetch("https://x/", { method: "GET", body: "no" }), /cannot have body/);
  // A network failure is Node's "fetch failed", its cause carrying what the host saw.
  internal.fetchHandler = () => Promise.reject(new Error("fetch failed: connect ECONNREFUSED ::1:8080"));
  await assert.rejects(fetch("http://localhost:8080/"), (e) =>
    e instanceof TypeError && e.message === "fetch failed" && e.cause.code === "ECONNREFUSED"
    && e.cause.syscall === "connect" && e.cause.address === "::1" && e.cause.port === 8080);
  internal.fetchHandler = () => Promise.reject(new Error("fetch failed: fetch of https://x/ timed out (ETIMEDOUT)"));
  await assert.rejects(fetch("https://x/"), (e) => e.message === "fetch failed" && e.cause.code === "ETIMEDOUT");
  // A bad port never reaches the host.
  internal.fetchHandler = () => assert.fail("a bad port reached the host");
  await assert.rejects(fetch("http://x:6667/"), (e) => e.message === "fetch failed" && e.cause.message === "bad port");
  internal.fetchHandler = null;
});
