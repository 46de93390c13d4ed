// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-stream.js and node-string-decoder.js against Node's own stream and string_decoder: the
// same scenario on both, the same events in the same order and the same data.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as nodeStream from "node:stream";
import * as nodeStreamPromises from "node:stream/promises";
import { StringDecoder as NodeDecoder } from "node:string_decoder";
import * as ours from "pichamber:node/stream";
import oursDefault from "pichamber:node/stream";
import * as oursPromises from "pichamber:node/stream-promises";
import { StringDecoder } from "pichamber:node/string_decoder";

const settle = () => new Promise((resolve) => setTimeout(resolve, 20));
const show = (chunk) => (typeof chunk === "string" ? `s:${chunk}` : chunk instanceof Uint8Array ? `b:${Buffer.from(chunk).toString()}` : JSON.stringify(chunk));

/** Runs `scenario(streamModule, log)` on Node's module and ours; both logs must be equal. */
async function same(name, scenario, { promises = false } = {}) {
  const run = async (mod, promisesMod) => {
    const log = [];
    try {
      await scenario(mod, log, promisesMod);
    } catch (err) {
      log.push(`threw ${err.code ?? err.message}`);
    }
    await settle();
    return log;
  };
  const expected = await run(nodeStream, promises ? nodeStreamPromises : null);
  const actual = await run(ours, promises ? oursPromises : null);
  assert.deepEqual(actual, expected, `${name}\n node: ${expected.join(" | ")}\n ours: ${actual.join(" | ")}`);
  return actual;
}

function watch(stream, log, prefix = "") {
  for (const event of ["end", "finish", "close", "pause", "resume"]) stream.on(event, () => log.push(`${prefix}${event}`));
  stream.on("error", (err) => log.push(`${prefix}error ${err.code ?? err.message}`));
}

test("a Readable in flowing mode delivers its chunks in order, then end and close", async () => {
  const log = await same("flowing", async ({ Readable }, log) => {
    const chunks = ["a", "b", "c"];
    const r = new Readable({
      read() {
        this.push(chunks.length ? chunks.shift() : null);
      },
    });
    watch(r, log);
    r.on("data", (c) => log.push(show(c)));
  });
  assert.deepEqual(log.filter((l) => l.startsWith("b:")), ["b:a", "b:b", "b:c"]);
});

test("paused mode: 'readable' and read() see everything, then end", async () => {
  await same("paused", async ({ Readable }, log) => {
    const r = new Readable({ read() {} });
    watch(r, log);
    r.push("one");
    r.push("two");
    r.push(null);
    r.on("readable", () => {
      let chunk;
      while ((chunk = r.read()) !== null) log.push(show(chunk));
    });
  });
});

test("objectMode, setEncoding across a split character, read(n) and unshift", async () => {
  await same("objects", async ({ Readable }, log) => {
    const r = new Readable({ objectMode: true, read() {} });
    r.push({ n: 1 });
    r.push({ n: 2 });
    r.push(null);
    r.on("data", (o) => log.push(show(o)));
    watch(r, log);
  });
  await same("encoding", async ({ Readable }, log) => {
    const r = new Readable({ read() {} });
    r.setEncoding("utf8");
    const euro = Buffer.from("€");
    r.push(euro.subarray(0, 1));
    r.push(euro.subarray(1));
    r.push(Buffer.from("!"));
    r.push(null);
    r.on("data", (c) => log.push(show(c)));
    watch(r, log);
  });
  await same("read(n)", async ({ Readable }, log) => {
    const r = new Readable({ read() {} });
    r.push("abcdef");
    log.push(show(r.read(2)));
    r.unshift(Buffer.from("XY"));
    log.push(show(r.read(3)), String(r.readableLength));
  });
});

test("a Writable calls back each write, drains past its highWaterMark, then finish and close", async () => {
  await same("writable", async ({ Writable }, log) => {
    const w = new Writable({
      highWaterMark: 4,
      write(chunk, encoding, cb) {
        log.push(`write ${show(chunk)} ${encoding}`);
        setTimeout(cb, 1);
      },
      final(cb) {
        log.push("final");
        cb();
      },
    });
    watch(w, log);
    w.on("drain", () => log.push("drain"));
    log.push(`ok ${w.write("ab", () => log.push("cb ab"))}`);
    log.push(`ok ${w.write("cdef", () => log.push("cb cdef"))}`);
    await new Promise((resolve) => w.once("drain", resolve));
    w.end("z", () => log.push("end cb"));
    log.push(`ended ${w.writableEnded} finished ${w.writableFinished}`);
  });
});

test("errors: write after end, a failing _write, destroy before the end", async () => {
  await same("write after end", async ({ Writable }, log) => {
    const w = new Writable({ write: (_c, _e, cb) => cb() });
    watch(w, log);
    w.end();
    w.write("late", (err) => log.push(`cb ${err?.code}`));
  });
  await same("failing write", async ({ Writable }, log) => {
    const w = new Writable({ write: (_c, _e, cb) => cb(new Error("disk full")) });
    watch(w, log);
    w.write("x", (err) => log.push(`cb ${err?.message}`));
    await settle();
    log.push(`destroyed ${w.destroyed} errored ${w.errored?.message}`);
  });
  await same("premature close", async ({ Readable, finished }, log) => {
    const r = new Readable({ read() {} });
    finished(r, (err) => log.push(`finished ${err?.code}`));
    r.push("x");
    r.destroy();
  });
});

test("Transform, PassThrough and pipe carry data through with flush", async () => {
  await same("transform", async ({ Readable, Transform, PassThrough, Writable }, log) => {
    const upper = new Transform({
      transform(chunk, _enc, cb) {
        cb(null, chunk.toString().toUpperCase());
      },
      flush(cb) {
        this.push("!");
        cb();
      },
    });
    const got = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        got.push(chunk.toString());
        cb();
      },
    });
    sink.on("finish", () => log.push(`sink ${got.join("")}`));
    Readable.from(["a", "b", "c"], { objectMode: false }).pipe(upper).pipe(new PassThrough()).pipe(sink);
    await new Promise((resolve) => sink.on("close", resolve));
    log.push(`duplex is writable: ${upper instanceof Writable}`);
  });
});

test("pipeline and stream/promises: iterables, generator stages, errors destroy every stream", async () => {
  await same(
    "pipeline",
    async ({ Readable, Writable, pipeline }, log, promises) => {
      const got = [];
      const sink = () =>
        new Writable({
          objectMode: true,
          write(chunk, _enc, cb) {
            got.push(chunk);
            cb();
          },
        });
      await new Promise((resolve) =>
        pipeline(Readable.from([1, 2, 3]), sink(), (err) => {
          log.push(`cb ${err?.message} ${got.join(",")}`);
          resolve();
        }),
      );
      got.length = 0;
      await promises.pipeline(
        [4, 5, 6],
        async function* (source) {
          for await (const n of source) yield n * 10;
        },
        sink(),
      );
      log.push(`generator stage ${got.join(",")}`);
      const source = new Readable({ objectMode: true, read() {} });
      const failing = new Writable({ objectMode: true, write: (_c, _e, cb) => cb(new Error("boom")) });
      source.push(1);
      try {
        await promises.pipeline(source, failing);
      } catch (err) {
        log.push(`rejected ${err.message}`);
      }
      await settle();
      log.push(`source destroyed ${source.destroyed}`);
    },
    { promises: true },
  );
});

test("async iteration and Readable.from; breaking out destroys the stream", async () => {
  await same("iteration", async ({ Readable }, log) => {
    for await (const chunk of Readable.from(["x", "y"])) log.push(show(chunk));
    const r = Readable.from([1, 2, 3]);
    for await (const n of r) {
      log.push(`n ${n}`);
      break;
    }
    await settle();
    log.push(`destroyed ${r.destroyed}`);
    log.push(`toArray ${JSON.stringify(await Readable.from([7, 8]).toArray())}`);
  });
});

test("the default export is the Stream class with the others on it", () => {
  for (const name of ["Readable", "Writable", "Duplex", "Transform", "PassThrough", "pipeline", "finished", "Stream"]) {
    assert.equal(typeof oursDefault[name], "function", name);
  }
  assert.equal(typeof oursDefault.promises.pipeline, "function");
  assert.ok(new ours.PassThrough() instanceof oursDefault);
});

test("StringDecoder holds back a cut character as Node's does, in every encoding", () => {
  const text = "a€𝄞é\u{1F600}z";
  for (const encoding of ["utf8", "utf16le", "base64", "base64url", "hex", "latin1"]) {
    const bytes = Buffer.from(encoding === "latin1" ? "abcé" : text, encoding === "latin1" ? "latin1" : encoding === "utf16le" ? "utf16le" : "utf8");
    for (let size = 1; size <= 5; size++) {
      const ourDecoder = new StringDecoder(encoding);
      const nodeDecoder = new NodeDecoder(encoding);
      const mine = [];
      const theirs = [];
      for (let i = 0; i < bytes.length; i += size) {
        mine.push(ourDecoder.write(bytes.subarray(i, i + size)));
        theirs.push(nodeDecoder.write(bytes.subarray(i, i + size)));
      }
      mine.push(ourDecoder.end());
      theirs.push(nodeDecoder.end());
      assert.deepEqual(mine, theirs, `${encoding}, chunks of ${size}`);
    }
  }
  // A sequence cut at the end is U+FFFD, as in Node.
  const cut = Buffer.from("€").subarray(0, 2);
  assert.equal(new StringDecoder("utf8").end(cut), new NodeDecoder("utf8").end(cut));
  assert.throws(() => new StringDecoder("klingon"), { code: "ERR_UNKNOWN_ENCODING" });
});

test("backpressure: push's answer, pipe pausing for a slow sink, subclasses old and new", async () => {
  await same("push answers", async ({ Readable }, log) => {
    const r = new Readable({ highWaterMark: 4, read() {} });
    log.push(`push ${r.push("ab")} ${r.push("cd")} ${r.push("ef")} length ${r.readableLength}`);
  });
  const slow = await same("slow sink", async ({ Readable, Writable }, log) => {
    let n = 0;
    const source = new Readable({
      highWaterMark: 2,
      read() {
        n++;
        this.push(n <= 6 ? `c${n}` : null);
      },
    });
    const sink = new Writable({
      highWaterMark: 2,
      write(chunk, _enc, cb) {
        log.push(`got ${chunk}`);
        setTimeout(cb, 2);
      },
    });
    source.on("pause", () => log.push("pause"));
    source.pipe(sink);
    await new Promise((resolve) => sink.on("finish", resolve));
    log.push(`reads ${n}`);
  });
  assert.ok(slow.includes("pause") && slow.filter((l) => l.startsWith("got ")).length === 6, slow.join(" | "));
  const halves = await same("subclasses", async ({ Readable, Duplex }, log) => {
    class Counter extends Readable {
      constructor() {
        super({ objectMode: true });
        this.n = 0;
      }
      _read() {
        this.push(this.n < 3 ? this.n++ : null);
      }
    }
    log.push(`class ${JSON.stringify(await new Counter().toArray())}`);
    function Old(options) {
      Readable.call(this, options);
      this.left = 2;
    }
    Object.setPrototypeOf(Old.prototype, Readable.prototype);
    Old.prototype._read = function () {
      this.push(this.left-- > 0 ? "x" : null);
    };
    const chunks = [];
    for await (const c of new Old()) chunks.push(String(c));
    log.push(`old style ${chunks.join("")}`);
    const echo = new Duplex({
      allowHalfOpen: false,
      read() {},
      write(chunk, _enc, cb) {
        this.push(chunk);
        cb();
      },
    });
    watch(echo, log, "duplex ");
    echo.on("data", (c) => log.push(`duplex data ${c}`));
    echo.write("hi");
    await settle();
    echo.push(null);
  });
  assert.ok(halves.includes("duplex data hi") && halves.includes("duplex finish"), halves.join(" | "));
});

test("readline reads lines from a PassThrough written in pieces", async () => {
  const readline = await import("pichamber:node/readline");
  const input = new ours.PassThrough();
  const rl = readline.createInterface({ input });
  const lines = [];
  rl.on("line", (l) => lines.push(l));
  const closed = new Promise((resolve) => rl.on("close", resolve));
  input.write("first li");
  input.write("ne\nsecond\r\nthi");
  input.end("rd");
  await closed;
  assert.deepEqual(lines, ["first line", "second", "third"]);
});

test("pipeline resolves when its last stream finishes, not its first", async () => {
  const log = await same(
    "pipeline end",
    async ({ Readable, Transform, Writable }, log, promises) => {
      const upper = new Transform({
        transform(chunk, _enc, cb) {
          cb(null, chunk.toString().toUpperCase());
        },
        flush(cb) {
          cb(null, "!");
        },
      });
      const sink = new Writable({
        highWaterMark: 2,
        write(chunk, _enc, cb) {
          log.push(`got ${chunk}`);
          setTimeout(cb, 1);
        },
      });
      await promises.pipeline(
        Readable.from(["a", "b", "c"]),
        async function* (source) {
          for await (const s of source) yield s + s;
        },
        upper,
        sink,
      );
      log.push("resolved");
    },
    { promises: true },
  );
  assert.deepEqual(log, ["got AA", "got BB", "got CC", "got !", "resolved"]);
});
