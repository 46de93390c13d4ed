// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-timers.js's promise forms against Node's node:timers/promises: the same scenario on
// both, the same outcomes in the same order. (The Timeout handles are the prelude's; they run
// inside a real instance in tests/cli.rs.)
import { test } from "node:test";
import assert from "node:assert/strict";
import * as nodeTimers from "node:timers/promises";
import * as ours from "pichamber:node/timers-promises";
import oursTimers from "pichamber:node/timers";

const outcome = (promise) =>
  promise.then(
    (value) => `value ${value}`,
    (err) => `${err.name} ${err.code}${err.cause !== undefined ? ` cause=${err.cause?.message ?? err.cause}` : ""}`,
  );

async function same(name, scenario) {
  const run = async (mod) => {
    const log = [];
    try {
      await scenario(mod, log);
    } catch (err) {
      log.push(`threw ${err.name} ${err.code}`);
    }
    return log;
  };
  const expected = await run(nodeTimers);
  const actual = await run(ours);
  assert.deepEqual(actual, expected, `${name}\n node: ${expected.join(" | ")}\n ours: ${actual.join(" | ")}`);
}

test("setTimeout and setImmediate resolve with their value, in time order", () =>
  same("order", async ({ setTimeout, setImmediate }, log) => {
    await Promise.all([
      setTimeout(20, "late").then((v) => log.push(v)),
      setTimeout(1, "early", { ref: false }).then((v) => log.push(v)),
      setImmediate("now").then((v) => log.push(v)),
    ]);
  }));

test("an abort rejects with AbortError carrying the reason, before or during the wait", () =>
  same("abort", async ({ setTimeout, setImmediate }, log) => {
    log.push(await outcome(setTimeout(1, "x", { signal: AbortSignal.abort(new Error("before")) })));
    const c = new AbortController();
    const waiting = outcome(setTimeout(10_000, "x", { signal: c.signal }));
    c.abort("during");
    log.push(await waiting);
    log.push(await outcome(setImmediate("y", { signal: AbortSignal.abort() })));
    // Settled first: a later abort changes nothing.
    const c2 = new AbortController();
    log.push(await outcome(setTimeout(1, "kept", { signal: c2.signal })));
    c2.abort();
  }));

test("bad options are refused with ERR_INVALID_ARG_TYPE", () =>
  same("options", async ({ setTimeout, setImmediate }, log) => {
    log.push(await outcome(setTimeout(1, "x", null)));
    log.push(await outcome(setTimeout(1, "x", "fast")));
    log.push(await outcome(setImmediate("x", { signal: {} })));
  }));

test("setInterval yields its value per tick until the loop leaves or the signal aborts", () =>
  same("interval", async ({ setInterval }, log) => {
    let n = 0;
    for await (const v of setInterval(2, "tick")) {
      log.push(v);
      if (++n === 3) break;
    }
    const c = new AbortController();
    try {
      for await (const v of setInterval(2, "t", { signal: c.signal })) {
        log.push(v);
        c.abort();
      }
    } catch (err) {
      log.push(`${err.name} ${err.code}`);
    }
  }));

test("scheduler.wait waits; node:timers carries the callback forms and the promises", async () => {
  await same("scheduler", async ({ scheduler }, log) => {
    await scheduler.wait(2);
    log.push("waited");
    await scheduler.yield();
    log.push("yielded");
  });
  assert.equal(oursTimers.promises.setTimeout, ours.setTimeout);
  const fired = await new Promise((resolve) => oursTimers.setTimeout(resolve, 1, "cb"));
  assert.equal(fired, "cb");
});
