// The helpers that async code lowered to generators calls (pichamber:async-lowering), driven
// the way oxc's lowered output drives them and compared with Node's native async functions
// and async generators; and our AsyncLocalStorage carrying its store across lowered awaits.
// Each lowered function below is written in the shape the build emits for the native one
// next to it (host/artifact's bundle.rs, `Lowering::Async`).
import { test } from "node:test";
import assert from "node:assert/strict";
import { babelHelpers as H } from "pichamber:async-lowering";
import { AsyncLocalStorage } from "pichamber:node/async_hooks";

const tick = (value) => new Promise((resolve) => setTimeout(() => resolve(value), 1));

/** Every request's outcome, as `ok VALUE DONE` or `err MESSAGE`, with the generator's log. */
async function drive(makeGenerator, requests) {
  const log = [];
  const generator = makeGenerator(log);
  const outcomes = await Promise.all(
    requests.map(([method, arg]) =>
      generator[method](typeof arg === "function" ? arg() : arg).then(
        (r) => `ok ${JSON.stringify(r.value)} ${r.done}`,
        (e) => `err ${e.message}`,
      ),
    ),
  );
  return { outcomes, log };
}

async function* nativeInner(log) {
  try {
    yield "i1";
    log.push(`inner got ${await tick("t")}`);
    yield tick("i2");
  } finally {
    log.push("inner finally");
  }
  return "inner done";
}
const loweredInner = H.wrapAsyncGenerator(function* (log) {
  try {
    yield "i1";
    log.push(`inner got ${yield H.awaitAsyncGenerator(tick("t"))}`);
    yield tick("i2");
  } finally {
    log.push("inner finally");
  }
  return "inner done";
});

function outer(inner) {
  return {
    native: async function* (log) {
      try {
        log.push("start");
        const a = await Promise.resolve(1);
        yield a;
        yield Promise.resolve(2);
        const got = yield 3;
        log.push(`got ${got}`);
        const delegated = yield* inner.native(log);
        log.push(`delegated ${delegated}`);
        for await (const x of [tick("s1"), "s2"]) log.push(`sync ${x}`);
        try {
          yield Promise.reject(new Error("rejected yield"));
        } catch (e) {
          log.push(`caught ${e.message}`);
        }
        yield "last";
      } finally {
        log.push("finally");
        await null;
        log.push("finally after await");
      }
      return "end";
    },
    lowered: H.wrapAsyncGenerator(function* (log) {
      try {
        log.push("start");
        const a = yield H.awaitAsyncGenerator(Promise.resolve(1));
        yield a;
        yield Promise.resolve(2);
        const got = yield 3;
        log.push(`got ${got}`);
        const delegated = yield* H.asyncGeneratorDelegate(H.asyncIterator(inner.lowered(log)));
        log.push(`delegated ${delegated}`);
        var _iteratorAbruptCompletion = false;
        var _didIteratorError = false;
        var _iteratorError;
        try {
          for (
            var _iterator = H.asyncIterator([tick("s1"), "s2"]), _step;
            (_iteratorAbruptCompletion = !(_step = yield H.awaitAsyncGenerator(_iterator.next())).done);
            _iteratorAbruptCompletion = false
          ) {
            const x = _step.value;
            log.push(`sync ${x}`);
          }
        } catch (err) {
          _didIteratorError = true;
          _iteratorError = err;
        } finally {
          try {
            if (_iteratorAbruptCompletion && _iterator.return != null) {
              yield H.awaitAsyncGenerator(_iterator.return());
            }
          } finally {
            if (_didIteratorError) throw _iteratorError;
          }
        }
        try {
          yield Promise.reject(new Error("rejected yield"));
        } catch (e) {
          log.push(`caught ${e.message}`);
        }
        yield "last";
      } finally {
        log.push("finally");
        yield H.awaitAsyncGenerator(null);
        log.push("finally after await");
      }
      return "end";
    }),
  };
}

const generators = outer({ native: nativeInner, lowered: loweredInner });
const scenarios = {
  "run to the end, requests queued at once": [
    ["next"], ["next"], ["next"], ["next", "x"], ["next", "y"], ["next"], ["next"], ["next"], ["next"], ["next"],
  ],
  "return early, the value awaited": [["next"], ["return", () => tick("early")], ["next"]],
  "return while delegating": [["next"], ["next"], ["next"], ["next", "x"], ["return", "stop"], ["next"]],
  "throw while delegating": [["next"], ["next"], ["next"], ["next", "x"], ["throw", new Error("boom")], ["next"]],
  "throw before starting": [["throw", new Error("first")], ["next"]],
  "return a rejected promise": [["next"], ["return", () => Promise.reject(new Error("refused"))], ["next"]],
};

for (const [name, requests] of Object.entries(scenarios)) {
  test(`a lowered async generator answers as a native one: ${name}`, async () => {
    const native = await drive(generators.native, requests);
    const lowered = await drive(generators.lowered, requests);
    assert.deepEqual(lowered, native);
    assert.ok(native.outcomes.length === requests.length);
  });
}

test("a lowered async function resolves, rejects and keeps `this` as a native one", async () => {
  const nativeF = async function (x) {
    const a = await tick(x);
    if (a === "bad") throw new Error("bad input");
    return [this?.name, a, await { then: (resolve) => resolve("thenable") }];
  };
  const loweredF = H.asyncToGenerator(function* (x) {
    const a = yield tick(x);
    if (a === "bad") throw new Error("bad input");
    return [this?.name, a, yield { then: (resolve) => resolve("thenable") }];
  });
  const self = { name: "self" };
  assert.deepEqual(await loweredF.call(self, "ok"), await nativeF.call(self, "ok"));
  await assert.rejects(loweredF("bad"), /bad input/);
  // The part before the first await runs at the call, as in a native one.
  const order = [];
  const early = H.asyncToGenerator(function* () {
    order.push("body");
    yield null;
    order.push("resumed");
  });
  const done = early();
  order.push("returned");
  await done;
  assert.deepEqual(order, ["body", "returned", "resumed"]);
});

test("for await over something that is not iterable fails as Node says", async () => {
  assert.throws(() => H.asyncIterator(5), { name: "TypeError", message: "5 is not async iterable" });
});

test("AsyncLocalStorage keeps each run's store across lowered awaits, as Node's across native ones", async () => {
  const als = new AsyncLocalStorage();
  const step = H.asyncToGenerator(function* (label, seen) {
    seen.push(`${label} start ${als.getStore()}`);
    yield tick();
    seen.push(`${label} after timer ${als.getStore()}`);
    yield null;
    seen.push(`${label} after null ${als.getStore()}`);
  });
  const numbers = H.wrapAsyncGenerator(function* () {
    yield H.awaitAsyncGenerator(tick());
    yield `yielded ${als.getStore()}`;
  });
  const scenario = H.asyncToGenerator(function* (label, seen) {
    yield step(label, seen);
    seen.push(`${label} back ${als.getStore()}`);
    for (const iterator = numbers(); ; ) {
      const { value, done } = yield iterator.next();
      if (done) break;
      seen.push(`${label} ${value}`);
    }
  });
  const seenA = [];
  const seenB = [];
  await Promise.all([als.run("A", () => scenario("a", seenA)), als.run("B", () => scenario("b", seenB))]);
  for (const [seen, store] of [[seenA, "A"], [seenB, "B"]]) {
    assert.equal(seen.length, 5, String(seen));
    assert.ok(seen.every((line) => line.endsWith(store)), String(seen));
  }
  assert.equal(als.getStore(), undefined);
});
