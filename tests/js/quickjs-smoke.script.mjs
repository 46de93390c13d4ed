// Shared by quickjs-smoke.test.mjs: exercises every guest module and reports a JSON summary.
// It runs once under Node (through the pichamber: loader) and once inside QuickJS-ng, and the
// two summaries must be identical.
import path from "pichamber:node/path";
import { Buffer } from "pichamber:node/buffer";
import * as fs from "pichamber:node/fs";
import fsp from "pichamber:node/fs-promises";
import util from "pichamber:node/util";
import { EventEmitter } from "pichamber:node/events";
import * as url from "pichamber:node/url";
import os from "pichamber:node/os";
import crypto from "pichamber:node/crypto";
import * as cp from "pichamber:node/child_process";
import proc from "pichamber:node/process";
import { Type } from "pichamber:typebox";
import * as ai from "pichamber:pi-ai";
import * as tui from "pichamber:pi-tui";
import * as agent from "pichamber:pi-coding-agent";
import * as core from "pichamber:pi-agent-core";

const out = {};
out.path = [
  path.join("a", "../b/c"),
  path.resolve("/x", "y/../z"),
  path.relative("/a/b/c", "/a/d"),
  path.parse("/home/u/f.tar.gz"),
  path.extname(".bashrc"),
];
const b = Buffer.from("héllo wörld 😀", "utf8");
out.buffer = [
  b.toString("hex"),
  b.toString("base64"),
  b.toString("latin1"),
  Buffer.from("aGk=", "base64").toString(),
  Buffer.byteLength("日本"),
];
out.crypto = ["md5", "sha1", "sha256", "sha512"].map((a) => crypto.createHash(a).update("abc").update(b).digest("hex"));
out.hmac = crypto.createHmac("sha256", "key").update("data").digest("base64");
out.util = [
  util.format("%s=%d %j %o", "a", 42, { x: [1] }, [1]),
  util.inspect({ a: [1, 2, { b: new Map([["k", 1]]) }], s: "str", n: null, u: undefined }),
  util.isDeepStrictEqual({ a: [1] }, { a: [1] }),
];
out.url = [
  url.pathToFileURL("/a b/c#d").href,
  url.fileURLToPath("file:///x%20y"),
  new url.URLPolyfill("../z?q=1#h", "https://h.com/a/b").href,
];
out.os = [os.EOL, os.platform(), os.tmpdir()];
const ee = new EventEmitter();
const seen = [];
ee.on("e", (v) => seen.push(v));
ee.once("e", (v) => seen.push(`once:${v}`));
ee.emit("e", 1);
ee.emit("e", 2);
out.events = seen;
out.fs = [
  fs.existsSync(FIXTURE),
  fs.readFileSync(FIXTURE, "utf8"),
  fs.statSync(FIXTURE).size,
  fs.readFileSync(FIXTURE).length,
];
try {
  fs.readFileSync(`${FIXTURE}.missing`);
} catch (e) {
  out.fsError = [e.code, e.syscall, e.message.split(" (")[0]];
}
out.fsp = await fsp.readFile(FIXTURE, "utf8");
out.cp = [
  typeof cp.spawn,
  (() => {
    try {
      cp.execSync("ls");
    } catch (e) {
      return e.message;
    }
  })(),
];
out.process = [typeof proc.cwd, typeof proc.env];
out.typebox = JSON.stringify([
  Type.Object({ a: Type.String({ description: "d" }), b: Type.Optional(Type.Number()) }),
  Type.Partial(Type.Object({ a: Type.String() })),
  Type.Record(Type.Union([Type.Literal("x"), Type.Literal("y")]), Type.Boolean()),
  Type.Intersect([Type.Object({ a: Type.String() }), Type.Object({ b: Type.Null() })]),
  Type.Pick(Type.Object({ k: Type.Any(), n: Type.Optional(Type.Integer()) }), ["n"]),
  Type.Array(Type.Union([Type.Literal(1), Type.Enum(["x"])]), { minItems: 1 }),
]);
out.typeboxGuards = [Type.IsOptional(Type.Optional(Type.String())), Type.IsObject(Type.Object({}))];
out.ai = [
  JSON.stringify(ai.StringEnum(["a", "b"], { description: "e" })),
  ai.calculateCost(
    { cost: { input: 3, output: 15, cacheRead: 0, cacheWrite: 0 } },
    { input: 10, output: 2, cacheRead: 0, cacheWrite: 0, cost: {} },
  ),
  (() => {
    try {
      ai.complete({}, {});
    } catch (e) {
      return e.message;
    }
  })(),
];
const stream = ai.createAssistantMessageEventStream();
const streamed = [];
const reader = (async () => {
  for await (const ev of stream) streamed.push(ev.type);
})();
stream.push({ type: "start" });
stream.push({ type: "done", message: { content: "faux reply" } });
await reader;
out.stream = [streamed, await stream.result()];
const texts = [
  "hello world",
  "日本語 text",
  "emoji 😀👍🏽 flags 🇩🇪",
  "\x1b[31mred\x1b[39m plain",
  "e\u0301 tab\tx",
  "family 👨‍👩‍👧",
];
out.tui = texts.map((t) => [tui.visibleWidth(t), tui.truncateToWidth(t, 8), tui.wrapTextWithAnsi(t, 6)]);
out.keys = ["\x03", "\x1b[A", "\x1b[1;5D", "\x1b[97;5u", "a", "\r"].map((d) => [
  tui.parseKey(d),
  tui.matchesKey(d, "ctrl+c"),
  tui.matchesKey(d, "up"),
]);
out.components = [
  new tui.Text("some wrapped text here", 1, 1).render(12),
  new tui.TruncatedText("truncate me please", 0, 0).render(10),
];
const sl = new tui.SelectList([{ value: "a", description: "first" }, { value: "b" }], 5, {
  selectedPrefix: (s) => s,
  selectedText: (s) => `*${s}`,
  description: (s) => s,
  scrollInfo: (s) => s,
  noMatch: (s) => s,
});
sl.handleInput("\x1b[B");
out.select = sl.render(50);
out.agent = [
  agent.truncateHead("a\nb\nc\nd", { maxLines: 2 }),
  agent.truncateTail("x".repeat(100), { maxBytes: 10 }),
  agent.formatSize(123456),
  agent.keyHint("tui.select.cancel", "cancel"),
  agent.parseFrontmatter("---\nname: x\nlist: [a, b]\nblock: |\n  l1\n  l2\n---\nbody"),
  agent.parseFrontmatter("---\nmap:\n  - {a: 1}\n  - 'q'\nfold: >-\n  x\n  y\n---"),
  agent.serializeConversation(
    agent.convertToLlm([
      { role: "user", content: "hi", timestamp: 1 },
      { role: "custom", customType: "c", content: "note", display: true, timestamp: 2 },
    ]),
  ),
  agent.keyText("tui.select.cancel"),
  agent.createEditTool("/").prepareArguments({ path: "a", oldText: "x", newText: "y" }),
  agent.getAgentDir(),
  new agent.DynamicBorder((s) => s).render(5),
  JSON.stringify(agent.createBashTool("/").parameters),
];
out.core = (() => {
  try {
    new core.Agent({});
  } catch (e) {
    return e.message;
  }
})();
globalThis.__report(JSON.stringify(out));
