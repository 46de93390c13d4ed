// The helpers that async code lowered to generators calls. The build lowers an extension's
// async functions, async generators and `for await` loops when any of its modules imports
// node:async_hooks (host/artifact's bundle.rs; oxc's transforms call these as
// `babelHelpers.NAME`, which the prelude defines). Each `await` then resumes through
// `Promise.prototype.then`, which AsyncLocalStorage wraps, so a store carries across it as in
// Node; QuickJS resumes its own `await` with no hook the guest can see.

/** `await x` inside a lowered async generator: what the generator yields for it. */
class Awaited {
  constructor(value) {
    this.value = value;
  }
}

/** A step of `yield*` inside a lowered async generator: the inner iterator's pending result. */
class DelegateStep {
  constructor(result, method) {
    this.result = result;
    this.method = method;
  }
}

/** What `yield*` gets back when its inner iterator finished (value) or failed (error). */
class DelegateDone {
  constructor(value) {
    this.value = value;
  }
}
class DelegateFailed {
  constructor(error) {
    this.error = error;
  }
}

/** An async function, from the generator whose every `yield` is one of its `await`s. */
export function asyncToGenerator(makeGenerator) {
  return function () {
    const generator = makeGenerator.apply(this, arguments);
    return new Promise((resolve, reject) => {
      const step = (method, input) => {
        let result;
        try {
          result = generator[method](input);
        } catch (error) {
          reject(error);
          return;
        }
        if (result.done) {
          resolve(result.value);
        } else {
          Promise.resolve(result.value).then(
            (value) => step("next", value),
            (error) => step("throw", error),
          );
        }
      };
      step("next", undefined);
    });
  };
}

export function awaitAsyncGenerator(value) {
  return new Awaited(value);
}

/** An async generator function, from the generator that yields its values and its awaits. */
export function wrapAsyncGenerator(makeGenerator) {
  return function () {
    return new AsyncGenerator(makeGenerator.apply(this, arguments));
  };
}

/** An async generator object: requests queue and are answered in order, one step at a time. */
class AsyncGenerator {
  #generator;
  #queue = [];

  constructor(generator) {
    this.#generator = generator;
  }
  next(value) {
    return this.#request("next", value);
  }
  throw(error) {
    return this.#request("throw", error);
  }
  return(value) {
    return this.#request("return", value);
  }
  [Symbol.asyncIterator]() {
    return this;
  }

  #request(method, input) {
    return new Promise((resolve, reject) => {
      this.#queue.push({ method, input, resolve, reject });
      if (this.#queue.length === 1) this.#start(method, input);
    });
  }

  #start(method, input) {
    if (method === "return") {
      // An async generator awaits the value it is asked to return before it returns it.
      Promise.resolve(input).then(
        (value) => this.#resume("return", value),
        (error) => this.#resume("throw", error),
      );
    } else {
      this.#resume(method, input);
    }
  }

  #resume(method, input) {
    let result;
    try {
      result = this.#generator[method](input);
    } catch (error) {
      this.#answer(false, error);
      return;
    }
    const { value, done } = result;
    if (value instanceof Awaited) {
      Promise.resolve(value.value).then(
        (awaited) => this.#resume("next", awaited),
        (error) => this.#resume("throw", error),
      );
    } else if (value instanceof DelegateStep) {
      Promise.resolve(value.result).then(
        (inner) => {
          if (inner === null || typeof inner !== "object") {
            const error = new TypeError(`Iterator result ${String(inner)} is not an object`);
            this.#resume("throw", new DelegateFailed(error));
          } else if (!inner.done) {
            this.#answer(true, { value: inner.value, done: false });
          } else {
            // The inner iterator returned: `yield*` ends with its value (a return asked of it
            // ends the generator too).
            const next = value.method === "return" ? "return" : "next";
            this.#resume(next, new DelegateDone(inner.value));
          }
        },
        (error) => this.#resume("throw", new DelegateFailed(error)),
      );
    } else {
      // `yield v` and `return v` hand out v awaited; a rejected yield throws at the yield.
      Promise.resolve(value).then(
        (settled) => this.#answer(true, { value: settled, done }),
        (error) => (done ? this.#answer(false, error) : this.#resume("throw", error)),
      );
    }
  }

  #answer(fulfilled, value) {
    const request = this.#queue.shift();
    if (fulfilled) request.resolve(value);
    else request.reject(value);
    if (this.#queue.length > 0) this.#start(this.#queue[0].method, this.#queue[0].input);
  }
}
Object.defineProperty(AsyncGenerator.prototype, Symbol.toStringTag, {
  value: "AsyncGenerator",
  configurable: true,
});

/** `yield* inner` inside a lowered async generator: a sync iterator of steps. */
export function asyncGeneratorDelegate(inner) {
  const forward = (method, input) => {
    if (input instanceof DelegateDone) return { value: input.value, done: true };
    if (input instanceof DelegateFailed) throw input.error;
    const call = inner[method];
    if (call == null) {
      if (method === "return") return { value: input, done: true };
      if (typeof inner.return === "function") inner.return();
      throw new TypeError("The iterator does not provide a 'throw' method");
    }
    return { value: new DelegateStep(call.call(inner, input), method), done: false };
  };
  return {
    [Symbol.iterator]() {
      return this;
    },
    next: (value) => forward("next", value),
    throw: (error) => forward("throw", error),
    return: (value) => forward("return", value),
  };
}

/** What `for await` and `yield*` iterate: an async iterator, or a sync one whose values are awaited. */
export function asyncIterator(iterable) {
  if (iterable != null) {
    const asyncMethod = iterable[Symbol.asyncIterator];
    if (asyncMethod != null) return asyncMethod.call(iterable);
    const syncMethod = iterable[Symbol.iterator];
    if (syncMethod != null) return new AsyncFromSyncIterator(syncMethod.call(iterable));
  }
  throw new TypeError(`${typeof iterable === "object" ? "object" : String(iterable)} is not async iterable`);
}

class AsyncFromSyncIterator {
  #iterator;

  constructor(iterator) {
    this.#iterator = iterator;
  }
  next(value) {
    return this.#settle(() => this.#iterator.next(value));
  }
  return(value) {
    const method = this.#iterator.return;
    if (method == null) return Promise.resolve({ value, done: true });
    return this.#settle(() => method.call(this.#iterator, value));
  }
  throw(error) {
    const method = this.#iterator.throw;
    if (method == null) return Promise.reject(error);
    return this.#settle(() => method.call(this.#iterator, error));
  }
  #settle(call) {
    try {
      const result = call();
      const done = Boolean(result.done);
      return Promise.resolve(result.value).then((value) => ({ value, done }));
    } catch (error) {
      return Promise.reject(error);
    }
  }
}

/** What lowered code calls: the prelude makes it the global `babelHelpers`. */
export const babelHelpers = Object.freeze({
  asyncToGenerator,
  awaitAsyncGenerator,
  wrapAsyncGenerator,
  asyncGeneratorDelegate,
  asyncIterator,
});
