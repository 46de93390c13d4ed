// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// web-streams.js (node:stream/web in the guest) against Node's own web streams: the same
// scenario on both, the same calls, results and errors in the same order. The Readable/Writable
// bridges (fromWeb/toWeb) run against Node's node:stream and ours (node-stream.js).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as nodeWeb from "node:stream/web";
import * as nodeStream from "node:stream";
import * as oursWeb from "pichamber:web-streams";
import * as oursStream from "pichamber:node/stream";

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
const tick = () => new Promise((resolve) => setImmediate(resolve));
// Errors made by the scenarios keep their message; the streams' own by their class only (the
// wording is each implementation's own).
const describe = (err) => {
  if (Array.isArray(err)) return `[${err.map(describe).join(",")}]`;
  if (err instanceof Error && err.message.startsWith("boom")) return err.message;
  if (err && typeof err === "object" && "name" in err) return err.name;
  return String(err);
};
const text = (chunk) => (typeof chunk === "string" ? chunk : chunk instanceof Uint8Array ? `bytes(${[...chunk].join(",")})` : JSON.stringify(chunk));
const outcome = (log, label, promise) =>
  promise.then(
    (value) => log.push(`${label} ok ${value === undefined ? "" : text(value)}`.trim()),
    (err) => log.push(`${label} rejected ${describe(err)}`),
  );
const readResult = (r) => (r.done ? "done" : `value ${text(r.value)}`);

/** Runs `scenario(web, log, stream)` on Node's modules and ours; both logs must be equal. */
async function same(name, scenario) {
  const run = async (web, stream) => {
    const log = [];
    try {
      await scenario(web, log, stream);
    } catch (err) {
      log.push(`threw ${describe(err)}`);
    }
    await settle();
    return log;
  };
  const expected = await run(nodeWeb, nodeStream);
  const actual = await run(oursWeb, oursStream);
  assert.deepEqual(actual, expected, `${name}\n node: ${expected.join(" | ")}\n ours: ${actual.join(" | ")}`);
  return actual;
}

test("ours are not Node's own (the comparison means something)", () => {
  assert.notEqual(oursWeb.ReadableStream, globalThis.ReadableStream);
  assert.notEqual(oursWeb.TransformStream, nodeWeb.TransformStream);
  assert.equal(Object.prototype.toString.call(new oursWeb.ReadableStream()), "[object ReadableStream]");
});

test("a pull-based source is pulled up to its highWaterMark, then once per read", async () => {
  const log = await same("pull", async ({ ReadableStream }, log) => {
    let n = 0;
    const rs = new ReadableStream(
      {
        start(c) {
          log.push(`start desired ${c.desiredSize}`);
        },
        pull(c) {
          n++;
          log.push(`pull ${n} desired ${c.desiredSize}`);
          if (n <= 4) c.enqueue(`c${n}`);
          else c.close();
        },
      },
      { highWaterMark: 2 },
    );
    await tick();
    log.push("after start");
    const reader = rs.getReader();
    for (;;) {
      const r = await reader.read();
      log.push(readResult(r));
      if (r.done) break;
    }
    await outcome(log, "closed", reader.closed);
  });
  assert.deepEqual(log.slice(0, 4), ["start desired 2", "pull 1 desired 2", "pull 2 desired 1", "after start"]);
  assert.ok(log.includes("value c4") && log.includes("done") && log.at(-1) === "closed ok");
});

test("a push source: desiredSize goes negative when nobody reads, reads drain the queue", async () => {
  const log = await same("push", async ({ ReadableStream, CountQueuingStrategy }, log) => {
    let controller;
    const rs = new ReadableStream(
      {
        start(c) {
          controller = c;
        },
      },
      new CountQueuingStrategy({ highWaterMark: 2 }),
    );
    for (const chunk of ["a", "b", "c"]) {
      controller.enqueue(chunk);
      log.push(`enqueued ${chunk} desired ${controller.desiredSize}`);
    }
    const reader = rs.getReader();
    log.push(readResult(await reader.read()));
    log.push(`desired ${controller.desiredSize}`);
    controller.close();
    log.push(`after close desired ${controller.desiredSize}`);
    log.push(readResult(await reader.read()));
    log.push(readResult(await reader.read()));
    log.push(readResult(await reader.read()));
    log.push(`closed desired ${controller.desiredSize}`);
    try {
      controller.enqueue("late");
    } catch (err) {
      log.push(`enqueue after close ${describe(err)}`);
    }
  });
  assert.deepEqual(log.slice(0, 3), ["enqueued a desired 1", "enqueued b desired 0", "enqueued c desired -1"]);
  assert.equal(log.at(-1), "enqueue after close TypeError");
});

test("backpressure: pull waits for a slow pull to finish and for room in the queue; sizes count", async () => {
  await same("backpressure", async ({ ReadableStream, ByteLengthQueuingStrategy }, log) => {
    let n = 0;
    const rs = new ReadableStream(
      {
        async pull(c) {
          n++;
          log.push(`pull ${n} desired ${c.desiredSize}`);
          await tick();
          c.enqueue(new Uint8Array(n * 2));
          log.push(`enqueued ${n * 2} bytes desired ${c.desiredSize}`);
        },
      },
      new ByteLengthQueuingStrategy({ highWaterMark: 5 }),
    );
    await settle();
    log.push(`settled after ${n} pulls`);
    const reader = rs.getReader();
    const r = await reader.read();
    log.push(`read ${r.value.byteLength} bytes`);
    await settle();
    log.push(`settled after ${n} pulls`);
    await reader.cancel("enough");
  });
});

test("start's promise delays the first pull; a rejected start errors the stream", async () => {
  await same("start", async ({ ReadableStream }, log) => {
    let release;
    const rs = new ReadableStream({
      start() {
        log.push("start");
        return new Promise((resolve) => (release = resolve));
      },
      pull(c) {
        log.push("pull");
        c.enqueue("x");
      },
    });
    await tick();
    log.push("released");
    release();
    const reader = rs.getReader();
    log.push(readResult(await reader.read()));
    const bad = new ReadableStream({
      start() {
        return Promise.reject(new Error("boom start"));
      },
    });
    await outcome(log, "read", bad.getReader().read());
  });
});

test("cancel reaches the source with the reason; reads then report done", async () => {
  await same("cancel", async ({ ReadableStream }, log) => {
    const rs = new ReadableStream({
      start(c) {
        c.enqueue("queued");
      },
      cancel(reason) {
        log.push(`source cancel ${describe(reason)}`);
        return new Promise((resolve) => setTimeout(resolve, 5)).then(() => log.push("source cancel done"));
      },
    });
    const reader = rs.getReader();
    const closed = outcome(log, "closed", reader.closed);
    await outcome(log, "cancel", reader.cancel("stop now"));
    await closed;
    log.push(readResult(await reader.read()));
    log.push(`locked ${rs.locked}`);
    reader.releaseLock();
    log.push(`locked ${rs.locked}`);
    await outcome(log, "cancel again", rs.cancel("again"));
  });
});

test("errors: controller.error rejects the pending and later reads and closed; a locked stream refuses", async () => {
  await same("errors", async ({ ReadableStream, WritableStream }, log) => {
    let controller;
    const rs = new ReadableStream({
      start(c) {
        controller = c;
      },
    });
    const reader = rs.getReader();
    try {
      rs.getReader();
    } catch (err) {
      log.push(`second reader ${describe(err)}`);
    }
    await outcome(log, "pipeTo locked", rs.pipeTo(new WritableStream()));
    await outcome(log, "cancel locked", rs.cancel());
    const pending = outcome(log, "pending read", reader.read());
    controller.error(new Error("boom source"));
    log.push(`desired ${controller.desiredSize}`);
    await pending;
    await outcome(log, "later read", reader.read());
    await outcome(log, "closed", reader.closed);
    reader.releaseLock();
    await outcome(log, "closed after release", reader.closed);
    await outcome(log, "read after release", reader.read());
    const other = new ReadableStream({
      pull() {
        throw new Error("boom pull");
      },
    });
    await outcome(log, "pull threw", other.getReader().read());
    const r2 = new ReadableStream({ start() {} }).getReader();
    const waiting = outcome(log, "read during release", r2.read());
    r2.releaseLock();
    await waiting;
  });
});

test("pipeThrough a TransformStream: transform, flush and the readable side's chunks in order", async () => {
  const log = await same("pipeThrough", async ({ ReadableStream, TransformStream }, log) => {
    const words = ["alpha beta", "gamma", ""];
    const source = new ReadableStream({
      pull(c) {
        if (words.length) c.enqueue(words.shift());
        else c.close();
      },
    });
    const upper = new TransformStream({
      start() {
        log.push("transform start");
      },
      transform(chunk, c) {
        log.push(`transform ${chunk}`);
        for (const word of chunk.split(" ")) if (word) c.enqueue(word.toUpperCase());
      },
      flush(c) {
        log.push("flush");
        c.enqueue("END");
      },
    });
    const out = [];
    for await (const word of source.pipeThrough(upper)) out.push(word);
    log.push(out.join(","));
  });
  assert.equal(log.at(-1), "ALPHA,BETA,GAMMA,END");
});

test("pipeTo: the sink sees every chunk, then close; preventClose leaves the sink open", async () => {
  await same("pipeTo", async ({ ReadableStream, WritableStream }, log) => {
    const sink = (label) =>
      new WritableStream({
        write(chunk) {
          log.push(`${label} write ${chunk}`);
          return new Promise((resolve) => setTimeout(resolve, 2));
        },
        close() {
          log.push(`${label} close`);
        },
        abort(reason) {
          log.push(`${label} abort ${describe(reason)}`);
        },
      });
    await outcome(log, "pipe", ReadableStream.from(["1", "2", "3"]).pipeTo(sink("a")));
    const open = sink("b");
    await outcome(log, "pipe preventClose", ReadableStream.from(["4"]).pipeTo(open, { preventClose: true }));
    log.push(`b locked ${open.locked}`);
    const writer = open.getWriter();
    await writer.write("5");
    await writer.close();
  });
});

test("pipeTo: a source error aborts the sink, a sink error cancels the source, a signal does both", async () => {
  await same("pipe errors", async ({ ReadableStream, WritableStream }, log) => {
    const erroring = new ReadableStream({
      start(c) {
        c.enqueue("first");
        setTimeout(() => c.error(new Error("boom upstream")), 5);
      },
    });
    const sink = new WritableStream({
      write(chunk) {
        log.push(`write ${chunk}`);
      },
      abort(reason) {
        log.push(`sink abort ${describe(reason)}`);
      },
    });
    await outcome(log, "forward", erroring.pipeTo(sink));

    const endless = new ReadableStream({
      pull(c) {
        c.enqueue("tick");
      },
      cancel(reason) {
        log.push(`source cancel ${describe(reason)}`);
      },
    });
    let writes = 0;
    const failing = new WritableStream({
      write() {
        writes++;
        if (writes === 2) throw new Error("boom downstream");
      },
    });
    await outcome(log, "backward", endless.pipeTo(failing));
    log.push(`writes ${writes}`);

    const controller = new AbortController();
    const slow = new ReadableStream({
      cancel(reason) {
        log.push(`slow cancel ${describe(reason)}`);
      },
    });
    const target = new WritableStream({
      abort(reason) {
        log.push(`target abort ${describe(reason)}`);
      },
    });
    const piping = outcome(log, "signal", slow.pipeTo(target, { signal: controller.signal }));
    controller.abort(new Error("boom signal"));
    await piping;
    log.push(`locked ${slow.locked} ${target.locked}`);
    await outcome(log, "preventCancel", new ReadableStream().pipeTo(failing, { preventCancel: true }));
  });
});

test("tee: both branches get every chunk; the source is cancelled when both are, with both reasons", async () => {
  await same("tee", async ({ ReadableStream }, log) => {
    const rs = new ReadableStream({
      start(c) {
        c.enqueue("x");
        c.enqueue("y");
        c.close();
      },
    });
    const [a, b] = rs.tee();
    log.push(`source locked ${rs.locked}`);
    const ra = a.getReader();
    const rb = b.getReader();
    log.push(`a ${readResult(await ra.read())}`, `a ${readResult(await ra.read())}`, `a ${readResult(await ra.read())}`);
    log.push(`b ${readResult(await rb.read())}`, `b ${readResult(await rb.read())}`, `b ${readResult(await rb.read())}`);

    const endless = new ReadableStream({
      pull(c) {
        c.enqueue("z");
      },
      cancel(reason) {
        log.push(`source cancel ${describe(reason)}`);
      },
    });
    const [c1, c2] = endless.tee();
    const first = outcome(log, "cancel 1", c1.cancel("one"));
    await tick();
    log.push("only one cancelled so far");
    await Promise.all([first, outcome(log, "cancel 2", c2.cancel("two"))]);
  });
});

test("async iteration: a break cancels the stream, preventCancel does not; errors reach the loop", async () => {
  await same("iteration", async ({ ReadableStream }, log) => {
    const counting = () => {
      let n = 0;
      return new ReadableStream({
        pull(c) {
          c.enqueue(++n);
        },
        cancel(reason) {
          log.push(`cancel ${describe(reason)}`);
        },
      });
    };
    const rs = counting();
    for await (const n of rs) {
      log.push(`got ${n}`);
      if (n === 3) break;
    }
    log.push(`locked ${rs.locked}`);
    await outcome(log, "read after break", rs.getReader().read().then(readResult));

    const kept = counting();
    for await (const n of kept.values({ preventCancel: true })) {
      log.push(`kept ${n}`);
      if (n === 2) break;
    }
    log.push(`kept locked ${kept.locked}`);
    await outcome(log, "kept read", kept.getReader().read().then(readResult));

    const failing = new ReadableStream({
      start(c) {
        c.enqueue("before");
        c.error(new Error("boom iterate"));
      },
    });
    try {
      for await (const chunk of failing) log.push(`chunk ${chunk}`);
    } catch (err) {
      log.push(`loop threw ${describe(err)}`);
    }
    const it = ReadableStream.from(["p", "q"])[Symbol.asyncIterator]();
    const all = await Promise.all([it.next(), it.next(), it.next(), it.return("r")]);
    log.push(all.map((r) => `${r.done}:${r.value}`).join(" "));
  });
});

test("ReadableStream.from: arrays, sync and async generators; cancel returns the generator", async () => {
  await same("from", async ({ ReadableStream }, log) => {
    const read = async (rs) => {
      const out = [];
      for await (const chunk of rs) out.push(text(chunk));
      return out.join(",");
    };
    log.push(await read(ReadableStream.from(["a", Promise.resolve("b")])));
    log.push(await read(ReadableStream.from(new Set([1, 2]))));
    async function* gen() {
      try {
        yield "g1";
        yield "g2";
        yield "g3";
      } finally {
        log.push("generator finally");
      }
    }
    const rs = ReadableStream.from(gen());
    const reader = rs.getReader();
    log.push(readResult(await reader.read()));
    await outcome(log, "cancel", reader.cancel("no more"));
    try {
      ReadableStream.from(42);
    } catch (err) {
      log.push(`from(42) ${describe(err)}`);
    }
  });
});

test("a WritableStream: ready and desiredSize follow the queue; writes run one at a time, then close", async () => {
  await same("writable", async ({ WritableStream }, log) => {
    const ws = new WritableStream(
      {
        start() {
          log.push("sink start");
        },
        write(chunk, c) {
          log.push(`sink write ${chunk} aborted ${c.signal.aborted}`);
          return new Promise((resolve) => setTimeout(resolve, 3));
        },
        close() {
          log.push("sink close");
        },
      },
      { highWaterMark: 2 },
    );
    const writer = ws.getWriter();
    log.push(`desired ${writer.desiredSize}`);
    const writes = ["w1", "w2", "w3"].map((chunk) => outcome(log, `write ${chunk}`, writer.write(chunk)));
    log.push(`desired ${writer.desiredSize}`);
    let ready = false;
    writer.ready.then(() => (ready = true));
    await tick();
    log.push(`ready ${ready}`);
    // close() queues behind the writes; a write after it is refused. (With nothing queued,
    // Node 20 fails an internal assertion on that write instead: its bug, not tested.)
    const closing = outcome(log, "close", writer.close());
    await outcome(log, "write while closing", writer.write("late"));
    await Promise.all(writes);
    log.push(`desired ${writer.desiredSize} ready ${ready}`);
    await closing;
    await outcome(log, "closed", writer.closed);
    log.push(`desired ${writer.desiredSize}`);
    try {
      ws.getWriter();
    } catch (err) {
      log.push(`second writer ${describe(err)}`);
    }
    writer.releaseLock();
    await outcome(log, "closed after release", writer.closed);
    try {
      log.push(`${writer.desiredSize}`);
    } catch (err) {
      log.push(`desiredSize after release ${describe(err)}`);
    }
  });
});

test("a WritableStream aborted mid-write: the signal fires, queued writes fail, abort() waits for the sink", async () => {
  await same("abort", async ({ WritableStream }, log) => {
    let signal;
    const ws = new WritableStream({
      write(chunk, c) {
        signal = c.signal;
        log.push(`sink write ${chunk}`);
        signal.addEventListener("abort", () => log.push(`signal ${describe(signal.reason)}`));
        return new Promise((resolve) => setTimeout(resolve, 5));
      },
      abort(reason) {
        log.push(`sink abort ${describe(reason)}`);
      },
    });
    const writer = ws.getWriter();
    const first = outcome(log, "write 1", writer.write("1"));
    const second = outcome(log, "write 2", writer.write("2"));
    await tick();
    const aborting = outcome(log, "abort", writer.abort(new Error("boom abort")));
    log.push(`desired ${writer.desiredSize}`);
    await Promise.all([first, second, aborting]);
    await outcome(log, "closed", writer.closed);
    await outcome(log, "ready", writer.ready);
    await outcome(log, "write after", writer.write("3"));
    const failing = new WritableStream({
      write() {
        throw new Error("boom sink");
      },
    }).getWriter();
    await outcome(log, "failing write", failing.write("x"));
    await outcome(log, "failing close", failing.close());
  });
});

test("TransformStream: backpressure holds writes until read; terminate, error and a throwing transform", async () => {
  await same("transform", async ({ TransformStream }, log) => {
    const ts = new TransformStream({
      transform(chunk, c) {
        log.push(`transform ${chunk} desired ${c.desiredSize}`);
        c.enqueue(chunk * 10);
      },
    });
    const writer = ts.writable.getWriter();
    const reader = ts.readable.getReader();
    log.push(`writer desired ${writer.desiredSize}`);
    const w1 = outcome(log, "write 1", writer.write(1));
    const w2 = outcome(log, "write 2", writer.write(2));
    await tick();
    log.push("nothing read yet");
    log.push(readResult(await reader.read()));
    log.push(readResult(await reader.read()));
    await Promise.all([w1, w2]);

    const terminating = new TransformStream({
      transform(chunk, c) {
        c.enqueue(chunk);
        c.terminate();
      },
    });
    const tw = terminating.writable.getWriter();
    const tr = terminating.readable.getReader();
    const tws = outcome(log, "terminate write", tw.write("last"));
    log.push(`terminated ${readResult(await tr.read())} then ${readResult(await tr.read())}`);
    await tws;
    await outcome(log, "write after terminate", tw.write("more"));

    const throwing = new TransformStream({
      transform() {
        throw new Error("boom transform");
      },
    });
    const xw = throwing.writable.getWriter();
    const xr = throwing.readable.getReader();
    // The write waits for a read: the readable side's highWaterMark is 0.
    const throwingRead = outcome(log, "throwing read", xr.read());
    await outcome(log, "throwing write", xw.write("x"));
    await throwingRead;
    await outcome(log, "throwing closed", xw.closed);

    const identity = new TransformStream();
    const iw = identity.writable.getWriter();
    iw.write("same");
    iw.close();
    const ir = identity.readable.getReader();
    log.push(`identity ${readResult(await ir.read())} ${readResult(await ir.read())}`);
  });
});

test("a TransformStream subclass like eventsource-parser's: lines split across chunks, decoded from bytes", async () => {
  const log = await same("subclass", async ({ ReadableStream, TransformStream, TextDecoderStream }, log) => {
    class LineSplitStream extends TransformStream {
      constructor(prefix) {
        let buffer = "";
        super({
          transform(chunk, controller) {
            buffer += chunk;
            const lines = buffer.split("\n");
            buffer = lines.pop();
            for (const line of lines) if (line) controller.enqueue(`${prefix}${line}`);
          },
          flush(controller) {
            if (buffer) controller.enqueue(`${prefix}${buffer}`);
          },
        });
        this.prefix = prefix;
      }
      get label() {
        return `split:${this.prefix}`;
      }
    }
    const splitter = new LineSplitStream("> ");
    log.push(`${splitter instanceof TransformStream} ${splitter.label} ${typeof splitter.readable.getReader}`);
    const bytes = new TextEncoder().encode("data: héllo\ndata: wörld €\n\ndata: tail");
    // Cut inside "é", "ö" and "€".
    const cuts = [8, 17, 24, 27, bytes.length];
    const source = new ReadableStream({
      start(c) {
        let from = 0;
        for (const to of cuts) {
          c.enqueue(bytes.subarray(from, to));
          from = to;
        }
        c.close();
      },
    });
    for await (const line of source.pipeThrough(new TextDecoderStream()).pipeThrough(splitter)) log.push(line);
  });
  assert.deepEqual(log.slice(1), ["> data: héllo", "> data: wörld €", "> data: tail"]);
});

test("TextDecoderStream keeps a character split across chunks whole; TextEncoderStream a split surrogate pair", async () => {
  const log = await same("text streams", async ({ TextDecoderStream, TextEncoderStream }, log) => {
    const decode = async (chunks, options) => {
      const ds = new TextDecoderStream("utf-8", options);
      const writer = ds.writable.getWriter();
      for (const chunk of chunks) writer.write(new Uint8Array(chunk)).catch(() => {});
      writer.close().catch(() => {});
      const out = [];
      try {
        for await (const piece of ds.readable) out.push(piece);
      } catch (err) {
        out.push(`error ${describe(err)}`);
      }
      return out.join("|");
    };
    // 😀 = f0 9f 98 80, € = e2 82 ac, BOM = ef bb bf
    log.push(await decode([[0xf0], [0x9f, 0x98], [0x80, 0x21]]));
    log.push(await decode([[0x61, 0xe2, 0x82], [0xac, 0x62]]));
    log.push(await decode([[0xef, 0xbb], [0xbf, 0x78]]));
    log.push(await decode([[0xef, 0xbb, 0xbf, 0x78]], { ignoreBOM: true }));
    log.push(await decode([[0x61, 0xe2, 0x82]]));
    log.push(await decode([[0x61, 0xff, 0x62]]));
    log.push(await decode([[0x61], [0xe2, 0x82]], { fatal: true }));
    const ds = new TextDecoderStream();
    log.push(`${ds.encoding} ${ds.fatal} ${ds.ignoreBOM}`);

    const es = new TextEncoderStream();
    const writer = es.writable.getWriter();
    const smile = "😀";
    for (const chunk of ["a", smile[0], `${smile[1]}b`, "\ud800"]) writer.write(chunk);
    writer.close();
    const bytes = [];
    for await (const chunk of es.readable) bytes.push(text(chunk));
    log.push(`${es.encoding} ${bytes.join(" ")}`);
  });
  assert.equal(log[0], "😀!");
  assert.equal(log[1], "a|€b");
});

test("queuing strategies: highWaterMark and size as Node has them; invalid ones are refused", async () => {
  await same("strategies", async ({ ByteLengthQueuingStrategy, CountQueuingStrategy, ReadableStream, WritableStream }, log) => {
    const bl = new ByteLengthQueuingStrategy({ highWaterMark: 16 });
    const count = new CountQueuingStrategy({ highWaterMark: 3 });
    log.push(`${bl.highWaterMark} ${bl.size(new Uint8Array(5))} ${count.highWaterMark} ${count.size("anything")}`);
    log.push(`${bl.size === new ByteLengthQueuingStrategy({ highWaterMark: 1 }).size} ${typeof count.size}`);
    for (const make of [
      () => new ByteLengthQueuingStrategy(),
      () => new ReadableStream({}, { highWaterMark: -1 }),
      () => new ReadableStream({}, { size: 5 }),
      () => new ReadableStream({ type: "other" }),
      () => new WritableStream({}, { highWaterMark: Number.NaN }),
      () => new ReadableStream({ start: 3 }),
    ]) {
      try {
        make();
        log.push("made");
      } catch (err) {
        log.push(describe(err));
      }
    }
    // A size function that throws errors the stream.
    let controller;
    const rs = new ReadableStream(
      {
        start(c) {
          controller = c;
        },
      },
      {
        size() {
          throw new Error("boom size");
        },
      },
    );
    try {
      controller.enqueue("x");
    } catch (err) {
      log.push(`enqueue ${describe(err)}`);
    }
    await outcome(log, "read", rs.getReader().read());
  });
});

test("a bytes stream is read with a default reader as Uint8Array chunks", async () => {
  await same("bytes", async ({ ReadableStream }, log) => {
    const rs = new ReadableStream({
      type: "bytes",
      start(c) {
        log.push(`desired ${c.desiredSize}`);
        c.enqueue(new Uint8Array([1, 2, 3]));
        c.close();
      },
    });
    const reader = rs.getReader();
    const r = await reader.read();
    log.push(`${r.value instanceof Uint8Array} ${text(r.value)}`);
    log.push(readResult(await reader.read()));
  });
});

test("Readable.toWeb and Readable.fromWeb carry chunks, end and errors both ways", async () => {
  const log = await same("readable bridges", async (web, log, { Readable }) => {
    const node = Readable.from(["one", "two", "three"], { objectMode: false });
    const webStream = Readable.toWeb(node);
    log.push(`is web ${typeof webStream.getReader}`);
    const chunks = [];
    for await (const chunk of webStream) chunks.push(`${chunk instanceof Uint8Array} ${Buffer.from(chunk).toString()}`);
    log.push(chunks.join(","));

    const back = Readable.fromWeb(web.ReadableStream.from(["x", "y"]), { encoding: "utf8" });
    back.on("end", () => log.push("back end"));
    back.on("close", () => log.push("back close"));
    const texts = [];
    for await (const chunk of back) texts.push(chunk);
    log.push(texts.join("+"));

    // Round trip: node -> web -> node.
    const round = Readable.fromWeb(Readable.toWeb(Readable.from(["r1", "r2"], { objectMode: true })), { objectMode: true });
    log.push((await round.toArray()).join(" "));

    const failing = Readable.fromWeb(
      new web.ReadableStream({
        start(c) {
          c.enqueue("ok");
          c.error(new Error("boom web"));
        },
      }),
      { objectMode: true },
    );
    failing.on("error", (err) => log.push(`node error ${describe(err)}`));
    failing.on("close", () => log.push("node close"));
    failing.resume();

    const cancelled = new web.ReadableStream({
      pull(c) {
        c.enqueue("more");
      },
      cancel(reason) {
        log.push(`web cancel ${describe(reason)}`);
      },
    });
    const destroying = Readable.fromWeb(cancelled, { objectMode: true });
    destroying.on("error", (err) => log.push(`destroyed ${describe(err)}`));
    destroying.destroy(new Error("boom destroy"));

    const erroring = new Readable({ read() {} });
    const errWeb = Readable.toWeb(erroring);
    erroring.destroy(new Error("boom node"));
    await outcome(log, "web read", errWeb.getReader().read());
  });
  assert.ok(log.includes("x+y"));
});

test("Writable.toWeb and Writable.fromWeb: writes, close and abort reach the other side", async () => {
  await same("writable bridges", async (web, log, { Writable }) => {
    const node = new Writable({
      highWaterMark: 4,
      write(chunk, encoding, cb) {
        log.push(`node write ${chunk.toString()}`);
        setTimeout(cb, 1);
      },
      final(cb) {
        log.push("node final");
        cb();
      },
    });
    node.on("finish", () => log.push("node finish"));
    const ws = Writable.toWeb(node);
    const writer = ws.getWriter();
    await writer.write("abc");
    await writer.write(new Uint8Array([100, 101]));
    await outcome(log, "web close", writer.close());

    const aborted = new Writable({
      write(chunk, encoding, cb) {
        cb();
      },
    });
    const abortedClosed = new Promise((resolve) => aborted.on("close", resolve)).then(() => log.push(`aborted close destroyed ${aborted.destroyed}`));
    await outcome(log, "web abort", Writable.toWeb(aborted).getWriter().abort(new Error("boom abort")));
    await abortedClosed;

    const got = [];
    const target = new web.WritableStream({
      write(chunk) {
        got.push(Buffer.from(chunk).toString());
      },
      close() {
        log.push(`web sink close ${got.join("")}`);
      },
    });
    const w = Writable.fromWeb(target);
    w.on("finish", () => log.push("from finish"));
    w.on("close", () => log.push("from close"));
    w.write("he");
    w.write(Buffer.from("llo"));
    await new Promise((resolve) => w.end("!", resolve));

    const failing = Writable.fromWeb(
      new web.WritableStream({
        write() {
          throw new Error("boom web sink");
        },
      }),
    );
    failing.on("error", (err) => log.push(`from error ${describe(err)}`));
    failing.write("x");
  });
});

test("node:stream/web and stream/web name the module; the prelude installs the globals lazily", async () => {
  const { readFileSync } = await import("node:fs");
  const table = JSON.parse(readFileSync(new URL("../../guest-shim/js/virtual-modules.json", import.meta.url), "utf8"));
  assert.equal(table.aliases["node:stream/web"], "pichamber:web-streams");
  assert.equal(table.aliases["stream/web"], "pichamber:web-streams");
  const prelude = readFileSync(new URL("../../guest-shim/js/prelude.js", import.meta.url), "utf8");
  for (const name of ["ReadableStream", "WritableStream", "TransformStream", "TextDecoderStream", "TextEncoderStream", "CountQueuingStrategy"]) {
    assert.ok(prelude.includes(`"${name}"`), `prelude installs ${name}`);
    assert.equal(typeof oursWeb[name], "function");
  }
});
