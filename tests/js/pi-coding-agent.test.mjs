// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// pi-coding-agent.js against @mariozechner/pi-coding-agent 0.73.1 from the oracle ($PI_ORACLE_DIR).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { importOracle, oracleSkip } from "./oracle.mjs";

process.env.FORCE_COLOR = "1"; // make the oracle's chalk emit styles, as it does in a terminal
const mine = await import("pichamber:pi-coding-agent");
const real = await importOracle("@mariozechner/pi-coding-agent/dist/index.js");
const realConfig = await importOracle("@mariozechner/pi-coding-agent/dist/config.js");
const realKeybindings = await importOracle("@mariozechner/pi-coding-agent/dist/core/keybindings.js");
const realTheme = await importOracle("@mariozechner/pi-coding-agent/dist/modes/interactive/theme/theme.js");
const realPiTui = await importOracle("@mariozechner/pi-tui/dist/index.js");
if (real) {
  real.initTheme("dark");
  realPiTui.setKeybindings(new realPiTui.KeybindingsManager(realKeybindings.KEYBINDINGS));
}
const SKIP = oracleSkip("@mariozechner/pi-coding-agent");
// The tools' wording and schemas are the host's (tests/builtin_tools.rs checks them against pi
// itself); here the host says what pi says, and the guest must pass it on unchanged.
if (real) {
  globalThis.__pichamber_internal.specs = ["Read", "Bash", "Edit", "Write", "Grep", "Find", "Ls"].map((n) => {
    const d = real[`create${n}ToolDefinition`]("/tmp");
    return {
      name: d.name,
      description: d.description,
      promptSnippet: d.promptSnippet,
      promptGuidelines: d.promptGuidelines ?? [],
      parameters: JSON.parse(JSON.stringify(d.parameters)),
    };
  });
}

function describe(value) {
  if (typeof value === "function") return "<function>";
  if (typeof value !== "object" || value === null) return value;
  if (Array.isArray(value)) return value.map(describe);
  const out = {};
  for (const key of Reflect.ownKeys(value)) {
    const d = Object.getOwnPropertyDescriptor(value, key);
    out[`${d.enumerable ? "" : "(hidden)"}${String(key)}`] = describe(d.value);
  }
  return out;
}

const CONTENTS = [
  "",
  "one line",
  "a\nb\nc",
  "\n\n\n",
  "x".repeat(100),
  "héllo wörld\n".repeat(50),
  "日本語\n".repeat(30),
  "😀".repeat(40),
  Array.from({ length: 3000 }, (_, i) => `line ${i}`).join("\n"),
  "long first line ".repeat(5000) + "\nshort",
  "short\n" + "long last line ".repeat(5000),
  `${"a".repeat(60000)}\n${"b".repeat(10)}`,
  "mixed €uro ".repeat(9000),
  "trailing newline\n",
  "a\ud800b\n\udc00",
];
const OPTIONS = [
  undefined,
  {},
  { maxLines: 1 },
  { maxLines: 3 },
  { maxBytes: 10 },
  { maxBytes: 5, maxLines: 2 },
  { maxBytes: 100 },
  { maxLines: 0 },
  { maxBytes: 0 },
  { maxBytes: 7 },
];

test("truncateHead, truncateTail, truncateLine, formatSize and constants match pi", (t) => {
  if (!real) return t.skip(SKIP);
  for (const c of CONTENTS) {
    for (const o of OPTIONS) {
      assert.deepEqual(
        mine.truncateHead(c, o),
        real.truncateHead(c, o),
        `truncateHead(${JSON.stringify(c.slice(0, 30))}, ${JSON.stringify(o)})`,
      );
      assert.deepEqual(
        mine.truncateTail(c, o),
        real.truncateTail(c, o),
        `truncateTail(${JSON.stringify(c.slice(0, 30))}, ${JSON.stringify(o)})`,
      );
    }
    for (const n of [undefined, 0, 1, 5, 500]) assert.deepEqual(mine.truncateLine(c, n), real.truncateLine(c, n));
  }
  for (const n of [0, 1, 1023, 1024, 1025, 1536, 51200, 1048575, 1048576, 5.5 * 1024 * 1024, 1e12])
    assert.equal(mine.formatSize(n), real.formatSize(n), `formatSize(${n})`);
  assert.equal(mine.DEFAULT_MAX_BYTES, real.DEFAULT_MAX_BYTES);
  assert.equal(mine.DEFAULT_MAX_LINES, real.DEFAULT_MAX_LINES);
});

test("config: VERSION, CONFIG_DIR_NAME, getAgentDir (incl. env override) match pi", (t) => {
  if (!real) return t.skip(SKIP);
  assert.equal(mine.VERSION, real.VERSION);
  assert.equal(mine.CONFIG_DIR_NAME, realConfig.CONFIG_DIR_NAME);
  const saved = process.env.PI_CODING_AGENT_DIR;
  try {
    delete process.env.PI_CODING_AGENT_DIR;
    assert.equal(mine.getAgentDir(), real.getAgentDir());
    for (const v of ["/custom/dir", "~/x/y", "~"]) {
      process.env.PI_CODING_AGENT_DIR = v;
      assert.equal(mine.getAgentDir(), real.getAgentDir(), v);
    }
  } finally {
    if (saved === undefined) delete process.env.PI_CODING_AGENT_DIR;
    else process.env.PI_CODING_AGENT_DIR = saved;
  }
});

test("tool-result guards, isToolCallEventType and defineTool", () => {
  const guards = {
    bash: mine.isBashToolResult,
    read: mine.isReadToolResult,
    edit: mine.isEditToolResult,
    write: mine.isWriteToolResult,
    grep: mine.isGrepToolResult,
    find: mine.isFindToolResult,
    ls: mine.isLsToolResult,
  };
  for (const [name, guard] of Object.entries(guards)) {
    assert.equal(guard({ toolName: name }), true);
    assert.equal(guard({ toolName: "other" }), false);
    assert.equal(mine.isToolCallEventType(name, { toolName: name }), true);
  }
  const tool = { name: "x" };
  assert.equal(mine.defineTool(tool), tool);
});

test("built-in tool factories expose pi's names, descriptions and schemas; execute asks the host", async (t) => {
  const tools = ["Read", "Bash", "Edit", "Write", "Grep", "Find", "Ls"];
  const internal = globalThis.__pichamber_internal;
  const calls = [];
  internal.toolHandler = (tool, params, updateCallId, { cwd }) => {
    calls.push({ tool, params, updateCallId, cwd });
    return { content: [{ type: "text", text: `ran ${tool}` }] };
  };
  for (const n of tools) {
    const tool = mine[`create${n}Tool`]("/work");
    const onUpdate = () => {};
    assert.deepEqual(await tool.execute("call-1", { path: "a" }, undefined, onUpdate), {
      content: [{ type: "text", text: `ran ${n.toLowerCase()}` }],
    });
  }
  assert.deepEqual(calls[0], { tool: "read", params: { path: "a" }, updateCallId: "call-1", cwd: "/work" });
  // Without onUpdate no partial results are asked for.
  await mine.createLsTool("/work").execute("call-2", {});
  assert.deepEqual(calls.at(-1).updateCallId, "");
  // A refusal from the host is the tool's error.
  internal.toolHandler = () => Promise.reject(new Error("the built-in read tool is not allowed in /work"));
  await assert.rejects(mine.createReadTool("/work").execute("id", { path: "a" }), /not allowed in \/work/);
  // Custom operations (ssh.ts's remote reads) would need pi's tool code in the guest.
  await assert.rejects(
    mine.createReadTool("/work", { operations: {} }).execute("id", { path: "a" }),
    /with custom operations is not available inside a pichamber extension/,
  );
  internal.toolHandler = null;
  if (!real) return t.skip(SKIP);
  for (const n of tools) {
    const a = mine[`create${n}ToolDefinition`]("/tmp");
    const b = real[`create${n}ToolDefinition`]("/tmp");
    for (const k of ["name", "label", "description", "promptSnippet", "promptGuidelines"])
      assert.deepEqual(a[k], b[k], `${n} definition ${k}`);
    assert.equal(JSON.stringify(a.parameters), JSON.stringify(b.parameters), `${n} parameters JSON`);
    const ta = mine[`create${n}Tool`]("/tmp");
    const tb = real[`create${n}Tool`]("/tmp");
    assert.deepEqual(Object.keys(ta), Object.keys(tb), `${n} tool keys`);
    assert.equal(typeof ta.prepareArguments, typeof tb.prepareArguments);
  }
  const legacy = { path: "a", oldText: "x", newText: "y" };
  assert.deepEqual(
    mine.createEditTool("/").prepareArguments({ ...legacy }),
    real.createEditTool("/").prepareArguments({ ...legacy }),
  );
  assert.deepEqual(
    mine.createEditTool("/").prepareArguments({ path: "a", edits: '[{"oldText":"1","newText":"2"}]' }),
    real.createEditTool("/").prepareArguments({ path: "a", edits: '[{"oldText":"1","newText":"2"}]' }),
  );
  assert.deepEqual(
    mine.createCodingTools("/").map((x) => x.name),
    real.createCodingTools("/").map((x) => x.name),
  );
  assert.deepEqual(
    mine.createReadOnlyTools("/").map((x) => x.name),
    real.createReadOnlyTools("/").map((x) => x.name),
  );
});

const MESSAGES = [
  { role: "user", content: "Hello there", timestamp: 1 },
  {
    role: "user",
    content: [
      { type: "text", text: "with " },
      { type: "image", data: "x", mimeType: "image/png" },
      { type: "text", text: "blocks" },
    ],
    timestamp: 2,
  },
  {
    role: "assistant",
    content: [
      { type: "thinking", thinking: "hmm" },
      { type: "text", text: "Sure." },
      { type: "toolCall", id: "t1", name: "read", arguments: { path: "src/a.ts", offset: 3 } },
      { type: "toolCall", id: "t2", name: "edit", arguments: { path: "b.ts" } },
      { type: "toolCall", id: "t3", name: "write", arguments: { path: "c.ts" } },
    ],
    usage: { input: 100, output: 20, cacheRead: 5, cacheWrite: 1, totalTokens: 0 },
    stopReason: "toolUse",
    timestamp: 3,
  },
  {
    role: "toolResult",
    toolCallId: "t1",
    toolName: "read",
    content: [{ type: "text", text: "x".repeat(2500) }],
    isError: false,
    timestamp: 4,
  },
  {
    role: "bashExecution",
    command: "ls",
    output: "a\nb",
    exitCode: 1,
    cancelled: false,
    truncated: true,
    fullOutputPath: "/tmp/out",
    timestamp: 5,
  },
  { role: "bashExecution", command: "secret", output: "", exitCode: 0, excludeFromContext: true, timestamp: 6 },
  { role: "custom", customType: "note", content: "custom text", display: true, timestamp: 7 },
  { role: "branchSummary", summary: "branch sum", fromId: "abc", timestamp: 8 },
  { role: "compactionSummary", summary: "compacted", tokensBefore: 1000, timestamp: 9 },
  {
    role: "assistant",
    content: [{ type: "text", text: "aborted" }],
    usage: { input: 1, output: 1, cacheRead: 0, cacheWrite: 0, totalTokens: 2 },
    stopReason: "aborted",
    timestamp: 10,
  },
];

test("convertToLlm and serializeConversation match pi for user, assistant, tool and custom messages", (t) => {
  const summary = mine.convertToLlm([MESSAGES[7], MESSAGES[8], MESSAGES[4], MESSAGES[5]]);
  assert.deepEqual(summary.map((m) => [m.role, m.timestamp]), [["user", 8], ["user", 9], ["user", 5]]);
  assert.ok(summary[0].content[0].text.includes("branch sum"));
  assert.ok(summary[2].content[0].text.includes("Ran `ls`") && summary[2].content[0].text.includes("a\nb"));
  assert.equal(mine.createSyntheticSourceInfo("/p", { source: "sdk" }).scope, "temporary");
  if (!real) return t.skip(SKIP);
  const common = MESSAGES.filter((m) => ["user", "assistant", "toolResult", "custom"].includes(m.role));
  assert.deepEqual(mine.convertToLlm(common), real.convertToLlm(common));
  const long = { ...MESSAGES[3], content: [{ type: "text", text: "y".repeat(1999) }] };
  const llm = [...real.convertToLlm(MESSAGES), long];
  assert.equal(mine.serializeConversation(llm), real.serializeConversation(llm));
  assert.deepEqual(
    mine.createSyntheticSourceInfo("/p", { source: "ext", baseDir: "/b" }),
    real.createSyntheticSourceInfo("/p", { source: "ext", baseDir: "/b" }),
  );
});

test("event bus delivers, isolates handler errors, unsubscribes", async () => {
  const bus = mine.createEventBus();
  const got = [];
  const off = bus.on("ch", (d) => got.push(d));
  const origError = console.error;
  const logged = [];
  console.error = (...args) => logged.push(args[0]);
  try {
    const offThrower = bus.on("ch", () => {
      throw new Error("handler failure is logged, not thrown");
    });
    bus.emit("ch", 1);
    await new Promise((r) => setTimeout(r, 1));
    offThrower();
  } finally {
    console.error = origError;
  }
  off();
  bus.emit("ch", 2);
  bus.clear();
  assert.deepEqual(got, [1]);
  assert.deepEqual(logged, ["Event handler error (ch):"]);
});

const FRONTMATTERS = [
  "no frontmatter here",
  "---\nname: my-skill\ndescription: Does useful things\n---\nBody text\n",
  "---\r\nname: crlf\r\n---\r\nbody",
  "---\nname: \"quoted: colon\"\nother: 'it''s'\nesc: \"tab\\tnew\\nline \\u00e9\"\n---\n",
  '---\nlist:\n  - one\n  - two\n  - 3\nflow: [a, b, "c, d", 4.5]\nmap: {x: 1, y: two}\n---\nbody',
  "---\nnested:\n  key: value\n  deeper:\n    n: 42\n    f: 1.5\n    b: true\n    z: null\n    e:\n  after: x\ntop: y\n---",
  "---\nmulti: |\n  line1\n  line2\n\n  line4\nfolded: >\n  a\n  b\n\n  c\nstrip: |-\n  s\nkeep: |+\n  k\n\nend: 1\n---",
  "---\n# comment line\nkey: value # trailing comment\nurl: http://x.dev/#frag\nhash: a#b\n---",
  "---\nitems:\n  - name: a\n    value: 1\n  - name: b\n    value: 2\n- wrong\n---",
  "---\nitems:\n  - name: a\n    value: 1\n  - name: b\n    tags: [x, y]\n---",
  "---\nempty:\nbools: [true, false, True, FALSE]\nnums: [0, -7, +3, 0x1F, 0o17, 1e3, .5, .inf, -.inf]\nstrs: [yes, no, on, off, ~, 1.2.3]\n---",
  "---\nplain: this is a\n  continued plain scalar\nnext: ok\n---",
  "---\n---\nempty frontmatter",
  "---\nname: x\nunterminated",
  "---\ndescription: >-\n  Long description that\n  spans lines.\nallowed-tools: Read, Grep\n---\n# Title",
  "---\nkey: [unclosed\n---",
  "---\n- top\n- level\n- list\n---",
  "---\njust a scalar\n---",
  "---\n\"quoted key\": 1\n'single': 2\n---",
  "---\nseq:\n- a\n- b\nother: 1\n---\nbody",
  "---\ntools: read, grep\nnum: 007\nver: 1.0\nneg: -0.5\ntime: 12:30\n---",
  "---\nempty_list: []\nempty_map: {}\nnested: [[1, 2], {a: [b]}]\n---",
  "---\nname: x\n  bad: indent\n---",
  "---\nq: \"unterminated\n---",
];

test("parseFrontmatter/stripFrontmatter match pi (yaml package) on typical frontmatter", (t) => {
  if (!real) return t.skip(SKIP);
  for (const input of FRONTMATTERS) {
    let expected;
    let actual;
    try {
      expected = { ok: real.parseFrontmatter(input) };
    } catch (e) {
      expected = { error: true };
    }
    try {
      actual = { ok: mine.parseFrontmatter(input) };
    } catch (e) {
      actual = { error: true, message: e.message };
    }
    if (expected.error) assert.equal(actual.error, true, `should reject: ${JSON.stringify(input)}`);
    else assert.deepEqual(actual, expected, JSON.stringify(input));
    if (!expected.error) assert.equal(mine.stripFrontmatter(input), real.stripFrontmatter(input));
  }
});

test("key hints, themes, DynamicBorder, BorderedLoader match pi's text (without colors)", (t) => {
  const strip = (s) => s.replace(/\x1b\[[0-9;]*m/g, "");
  assert.equal(mine.keyHint("tui.select.cancel", "cancel"), "escape/ctrl+c cancel");
  assert.deepEqual(new mine.DynamicBorder().render(3), ["───"]);
  // pi's Theme renders colour values as escapes; bold and friends stay plain (chalk writes
  // no styles when stdout is not a terminal, as in RPC mode).
  const th = new mine.Theme({ accent: "#8abeb7", muted: 244, text: "" }, { selectedBg: "#3a3a4a" }, "truecolor");
  assert.equal(th.fg("accent", th.bold("x")), "\x1b[38;2;138;190;183mx\x1b[39m");
  assert.equal(th.fg("muted", "m"), "\x1b[38;5;244mm\x1b[39m");
  assert.equal(th.bg("selectedBg", "b"), "\x1b[48;2;58;58;74mb\x1b[49m");
  assert.throws(() => th.fg("nope", "x"), /Unknown theme color: nope/);
  if (real) {
    const theirs = new realTheme.Theme({ accent: "#8abeb7", muted: 244, text: "" }, { selectedBg: "#3a3a4a" }, "256color");
    const ours = new mine.Theme({ accent: "#8abeb7", muted: 244, text: "" }, { selectedBg: "#3a3a4a" }, "256color");
    for (const c of ["accent", "muted", "text"]) assert.equal(ours.fg(c, "x"), theirs.fg(c, "x"), c);
    assert.equal(ours.bg("selectedBg", "x"), theirs.bg("selectedBg", "x"));
  }
  assert.deepEqual(mine.highlightCode("a\nb", "ts"), ["a", "b"]);
  if (!real) return t.skip(SKIP);
  const ids = ["tui.select.cancel", "app.interrupt", "app.tools.expand", "tui.input.submit", "app.message.followUp"];
  for (const kb of [...ids, "app.session.new", "nope"]) {
    assert.equal(mine.keyText(kb), real.keyText(kb), kb);
    assert.equal(mine.keyHint(kb, "do it"), strip(real.keyHint(kb, "do it")), kb);
  }
  assert.equal(mine.rawKeyHint("ctrl+x", "cut"), strip(real.rawKeyHint("ctrl+x", "cut")));
  assert.deepEqual(Object.keys(mine.getMarkdownTheme()), Object.keys(real.getMarkdownTheme()));
  assert.deepEqual(Object.keys(mine.getSelectListTheme()), Object.keys(real.getSelectListTheme()));
  assert.deepEqual(Object.keys(mine.getSettingsListTheme()), Object.keys(real.getSettingsListTheme()));
  assert.equal(mine.getSettingsListTheme().cursor, strip(real.getSettingsListTheme().cursor));
  for (const f of ["a.ts", "b.PY", "x.unknown", "noext", "dir.d/f.rs", "/p/config.yml", "m.mjs", "s.sh"])
    assert.equal(mine.getLanguageFromPath(f), real.getLanguageFromPath(f), f);
  for (const w of [0, 10]) {
    assert.deepEqual(new mine.DynamicBorder((s) => `<${s}>`).render(w), new real.DynamicBorder((s) => `<${s}>`).render(w));
    assert.deepEqual(new mine.DynamicBorder().render(w), new real.DynamicBorder().render(w).map(strip));
  }
  const tui = { requestRender() {}, terminal: { rows: 24, columns: 80 } };
  for (const options of [undefined, { cancellable: false }]) {
    const ml = new mine.BorderedLoader(tui, realTheme.theme, "Working...", options);
    const rl = new real.BorderedLoader(tui, realTheme.theme, "Working...", options);
    ml.dispose();
    rl.dispose();
    assert.deepEqual(ml.render(40), rl.render(40).map(strip));
    assert.equal(ml.signal.aborted, false);
  }
  const cancellable = new mine.BorderedLoader(tui, realTheme.theme, "x");
  let aborted = false;
  cancellable.onAbort = () => (aborted = true);
  cancellable.handleInput("\x1b");
  assert.equal(aborted, true);
  assert.equal(cancellable.signal.aborted, true);
});

test("CustomEditor routes app keybindings before editing", () => {
  const tui = { requestRender() {}, terminal: { rows: 24, columns: 80 } };
  const editor = new mine.CustomEditor(tui, { borderColor: (s) => s }, undefined);
  const calls = [];
  editor.onEscape = () => calls.push("escape");
  editor.onAction("app.tools.expand", () => calls.push("expand"));
  editor.onCtrlD = () => calls.push("ctrl+d");
  editor.handleInput("\x1b");
  editor.handleInput("\x0f");
  editor.handleInput("\x04");
  editor.handleInput("a");
  editor.handleInput("\x04");
  assert.deepEqual(calls, ["escape", "expand", "ctrl+d"]);
  assert.equal(editor.getText(), "a");
  class Modal extends mine.CustomEditor {
    handleInput(data) {
      if (data === "i") return;
      super.handleInput(data);
    }
  }
  const modal = new Modal(tui, { borderColor: (s) => s });
  modal.handleInput("i");
  modal.handleInput("j");
  assert.equal(modal.getText(), "j");
});

test("withFileMutationQueue serializes per file and runs different files in parallel", async () => {
  const dir = mkdtempSync(join(tmpdir(), "pichamber-queue-"));
  try {
    const file = join(dir, "f.txt");
    writeFileSync(file, "");
    const order = [];
    const slow = (tag, ms) => () =>
      new Promise((r) =>
        setTimeout(() => {
          order.push(tag);
          r(tag);
        }, ms),
      );
    const results = await Promise.all([
      mine.withFileMutationQueue(file, slow("a1", 20)),
      mine.withFileMutationQueue(join(dir, ".", "f.txt"), slow("a2", 1)),
      mine.withFileMutationQueue(join(dir, "other.txt"), slow("b", 5)),
    ]);
    assert.deepEqual(results, ["a1", "a2", "b"]);
    assert.deepEqual(order, ["b", "a1", "a2"]);
    await assert.rejects(
      mine.withFileMutationQueue(file, async () => {
        throw new Error("inner");
      }),
      /inner/,
    );
    assert.equal(await mine.withFileMutationQueue(file, async () => readFileSync(file, "utf8")), "");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("host-only APIs throw clearly; every runtime export of pi-coding-agent exists", (t) => {
  assert.throws(() => new mine.SessionManager(), /SessionManager is not available inside a pichamber extension/);
  assert.throws(() => mine.SessionManager.inMemory(), /SessionManager.inMemory\(\) is not available/);
  assert.throws(() => mine.createAgentSession(), /not available inside a pichamber extension/);
  assert.throws(() => mine.compact(), /not available inside a pichamber extension/);
  assert.throws(() => mine.renderDiff("+1 a"), /renderDiff\(\) is not available/);
  assert.throws(() => new mine.InMemoryAuthStorageBackend(), /InMemoryAuthStorageBackend is not available/);
  const inert = new mine.ToolExecutionComponent("x", {});
  assert.deepEqual(inert.render(10), []);
  assert.equal(mine.ToolExecutionComponent.name, "ToolExecutionComponent");
  if (!real) return t.skip(SKIP);
  assert.deepEqual(
    Object.keys(real).filter((k) => !(k in mine)),
    [],
  );
});

test("formatReadLineRange formats read ranges as pi 1.6.0 does", () => {
  // Values printed by pi 1.6.0's own formatReadLineRange (core/tools/render-utils.js).
  const cases = [
    [undefined, undefined, ""],
    [null, null, ""],
    [5, undefined, ":5"],
    [undefined, 10, ":1-10"],
    [3, 4, ":3-6"],
    ["7", "2", ":7-8"],
    ["x", 2, ""],
    [2, "y", ""],
    [1, 0, ":1"],
    [0, 1, ":0"],
    [" ", 3, ""],
    [Infinity, 1, ""],
  ];
  for (const [offset, limit, expected] of cases)
    assert.equal(mine.formatReadLineRange(offset, limit), expected, `${offset}, ${limit}`);
});

// pi 1.6.0 runs on Node >= 22.19, which tests/setup.sh exports as PICHAMBER_PI_NODE; its
// package is tests/oracle-1.6.
test("ctx.ui.theme under pi 1.6.0 is its system theme as RPC mode builds it, token by token", async (t) => {
  const { builtinTheme } = await import("pichamber:theme");
  const ours = builtinTheme("system", "truecolor");
  // Palette indices, the terminal's default, faint neutrals (SGR 2 closed by 22).
  assert.equal(ours.fg("warning", "x"), "\x1b[38;5;3mx\x1b[39m");
  assert.equal(ours.fg("dim", "x"), "\x1b[39m\x1b[2mx\x1b[22;39m");
  assert.equal(ours.fg("text", "x"), "\x1b[39mx\x1b[39m");
  assert.equal(ours.bg("selectedBg", "x"), "\x1b[49mx\x1b[49m");
  const node = process.env.PICHAMBER_PI_NODE;
  const dist = new URL("../oracle-1.6/node_modules/@earendil-works/pi-coding-agent/dist/", import.meta.url);
  const { existsSync } = await import("node:fs");
  if (!node || !existsSync(dist)) return t.skip("pi 1.6.0 (tests/oracle-1.6) or its node (PICHAMBER_PI_NODE) is missing");
  const script = `
    const { initTheme, theme } = await import(${JSON.stringify(new URL("modes/interactive/theme/theme.js", dist).href)});
    const { THEME_TOKENS } = await import(${JSON.stringify(new URL("modes/interactive/theme/theme-tokens.js", dist).href)});
    initTheme(undefined);
    const out = {};
    for (const [token, { slot }] of Object.entries(THEME_TOKENS)) {
      out[token] = slot === "foreground" ? theme.fg(token, "x") : theme.bg(token, "x");
    }
    console.log(JSON.stringify(out));`;
  const { execFileSync } = await import("node:child_process");
  const real = JSON.parse(execFileSync(node, ["--input-type=module", "-e", script], { encoding: "utf8" }));
  const mine = Object.fromEntries(
    Object.keys(real).map((token) => [token, ours.bgColors.has(token) ? ours.bg(token, "x") : ours.fg(token, "x")]),
  );
  assert.deepEqual(mine, real);
});
