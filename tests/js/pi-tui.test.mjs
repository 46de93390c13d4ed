// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// pi-tui.js against @mariozechner/pi-tui 0.73.1 from the oracle ($PI_ORACLE_DIR).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as mine from "pichamber:pi-tui";
import { importOracle, oracleSkip } from "./oracle.mjs";

const real = await importOracle("@mariozechner/pi-tui/dist/index.js");

const red = (s) => `\x1b[31m${s}\x1b[39m`;
const TEXTS = [
  "",
  "a",
  "hello world",
  "hello world, this is a longer line that will need wrapping at some point",
  "tab\there",
  `${red("red text")} and plain`,
  `\x1b[1mbold ${red("nested")} still bold\x1b[22m end`,
  "\x1b[4munderlined words across wrap boundary\x1b[24m",
  "日本語のテキスト",
  "mixed 日本 and ascii",
  "emoji 😀 here",
  "flags 🇩🇪🇫🇷",
  "family 👨‍👩‍👧 zwj",
  "thumbs 👍🏽",
  "e\u0301 combining",
  "supercalifragilisticexpialidocious-superlongword",
  "  leading and trailing  ",
  "multi\nline\ntext",
  "\x1b]8;;https://x.dev\x07link\x1b]8;;\x07 after",
  "fullwidth ＡＢＣ",
  "ascii ~!@#$%^&*()",
  "x".repeat(200),
  `${"word ".repeat(30)}`,
  "ctrl \x07 char",
  "✅ done ❌ failed ⭐",
  "☺️ smile ⚠️ warn",
  "zero\u200bwidth",
  "한국어 텍스트 wraps",
  `${red("styled")}\t${red("tab")}`,
];
const WIDTHS = [1, 2, 3, 5, 8, 10, 20, 40, 80];

const strip = (s) => s.replace(/\x1b\[[0-9;]*m|\x1b\][^\x07]*\x07/g, "");

test("visibleWidth and truncateToWidth match pi-tui (ASCII, ANSI, CJK, emoji, flags, ZWJ, marks)", (t) => {
  assert.equal(mine.visibleWidth("\x1b[31mab\x1b[39m\t日😀🇩🇪👨‍👩‍👧e\u0301"), 2 + 3 + 2 + 2 + 2 + 2 + 1);
  assert.equal(mine.truncateToWidth("hello world", 8), "hello\x1b[0m...\x1b[0m");
  assert.equal(mine.truncateToWidth("hi", 5, "…", true), "hi   ");
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-tui"));
  for (const text of TEXTS) {
    assert.equal(mine.visibleWidth(text), real.visibleWidth(text), `visibleWidth(${JSON.stringify(text)})`);
    for (const w of WIDTHS) {
      for (const args of [[text, w], [text, w, "…", true], [text, w, ""]]) {
        assert.equal(mine.truncateToWidth(...args), real.truncateToWidth(...args), `truncateToWidth${JSON.stringify(args)}`);
      }
    }
  }
});

test("wrapTextWithAnsi matches pi-tui on plain text; keeps ANSI text and styles across lines", (t) => {
  const red = mine.wrapTextWithAnsi("\x1b[31mred text here\x1b[39m done", 5);
  assert.deepEqual(red, ["\x1b[31mred", "\x1b[31mtext", "\x1b[31mhere\x1b[39m", "done"]);
  assert.deepEqual(mine.wrapTextWithAnsi("\x1b[1mbold\nnext\x1b[0m x", 20), ["\x1b[1mbold", "\x1b[1mnext\x1b[0m x"]);
  assert.deepEqual(mine.wrapTextWithAnsi("", 5), [""]);
  assert.deepEqual(mine.wrapTextWithAnsi("a\n\nb", 5), ["a", "", "b"]);
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-tui"));
  for (const text of TEXTS) {
    for (const w of WIDTHS) {
      const a = mine.wrapTextWithAnsi(text, w);
      const b = real.wrapTextWithAnsi(text, w);
      const label = `wrapTextWithAnsi(${JSON.stringify(text)}, ${w})`;
      if (!text.includes("\x1b")) {
        assert.deepEqual(a, b, label);
        continue;
      }
      // pi-tui re-emits styles and links differently (and may leave style-only lines): compare the text.
      for (const line of a) assert.ok(mine.visibleWidth(line) <= Math.max(w, 3), label); // a tab is 3 wide
      const visible = (lines) => lines.map((l) => strip(l).trim()).filter((l) => l !== "");
      assert.deepEqual(visible(a), visible(b), label);
    }
  }
});

const KEY_DATA = [
  "\x1b",
  "\r",
  "\n",
  "\t",
  "\x1b[Z",
  " ",
  "\x7f",
  "\x08",
  "\x03",
  "\x01",
  "\x1a",
  "a",
  "A",
  "Z",
  "1",
  "/",
  "?",
  "\x1b[A",
  "\x1b[B",
  "\x1b[C",
  "\x1b[D",
  "\x1bOA",
  "\x1b[H",
  "\x1b[F",
  "\x1b[3~",
  "\x1b[5~",
  "\x1b[6~",
  "\x1b[1;5D",
  "\x1b[1;3C",
  "\x1bb",
  "\x1bf",
  "\x1b\r",
  "\x1b\x7f",
  "\x1bx",
  "\x1b[97;5u",
  "\x1b[13;2u",
  "\x1b[27u",
  "\x1b[99;5u",
  "\x1b[99;5:3u",
  "\x1b[65;2u",
  "\x1b[27;5;99~",
  "\x1b[1;2A",
  "\x1bOP",
  "\x1b[15~",
  "\x1b[200~pasted\x1b[201~",
  "\x00",
  "\x1c",
  "\x1f",
  "é",
  "\x1b[57399u",
];
const KEY_IDS = [
  "escape",
  "enter",
  "shift+enter",
  "alt+enter",
  "tab",
  "shift+tab",
  "space",
  "backspace",
  "alt+backspace",
  "ctrl+c",
  "ctrl+a",
  "ctrl+z",
  "a",
  "shift+a",
  "1",
  "/",
  "?",
  "up",
  "down",
  "left",
  "right",
  "ctrl+left",
  "alt+right",
  "alt+left",
  "home",
  "end",
  "delete",
  "pageUp",
  "pageDown",
  "ctrl+shift+p",
  "shift+up",
  "f1",
  "f5",
  "alt+x",
  "ctrl+space",
  "ctrl+\\",
  "ctrl+-",
  "super+k",
  "ctrl+alt+x",
];

test("matchesKey, parseKey, isKeyRelease/Repeat, decodeKittyPrintable, Key match pi-tui", (t) => {
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-tui"));
  for (const data of KEY_DATA) {
    // pi-tui leaves these unnamed in parseKey (matchesKey still knows \x1b[1~ as home); pichamber names them.
    if (!["\x1b[1~", "\x1b[4~", "\x1b[1;5P"].includes(data))
      assert.equal(mine.parseKey(data), real.parseKey(data), `parseKey(${JSON.stringify(data)})`);
    assert.equal(mine.isKeyRelease(data), real.isKeyRelease(data));
    assert.equal(mine.isKeyRepeat(data), real.isKeyRepeat(data));
    assert.equal(mine.decodeKittyPrintable(data), real.decodeKittyPrintable(data));
    for (const id of KEY_IDS)
      assert.equal(mine.matchesKey(data, id), real.matchesKey(data, id), `matchesKey(${JSON.stringify(data)}, ${id})`);
  }
  for (const [k, v] of Object.entries(real.Key)) {
    if (typeof v === "function") assert.equal(mine.Key[k]("x"), v("x"), `Key.${k}`);
    else assert.equal(mine.Key[k], v, `Key.${k}`);
  }
  assert.deepEqual(Object.keys(mine.Key), Object.keys(real.Key));
  const defaults = (table) => Object.fromEntries(Object.entries(table).map(([id, d]) => [id, d.defaultKeys]));
  assert.deepEqual(defaults(mine.TUI_KEYBINDINGS), defaults(real.TUI_KEYBINDINGS));
  const kb = new mine.KeybindingsManager(mine.TUI_KEYBINDINGS, { "tui.select.up": ["k", "up"] });
  const rkb = new real.KeybindingsManager(real.TUI_KEYBINDINGS, { "tui.select.up": ["k", "up"] });
  for (const id of Object.keys(real.TUI_KEYBINDINGS)) assert.deepEqual(kb.getKeys(id), rkb.getKeys(id), id);
  assert.equal(kb.matches("k", "tui.select.up"), true);
  assert.equal(kb.matches("\x1b[A", "tui.select.up"), true);
  assert.equal(kb.matches("j", "tui.select.up"), false);
  assert.deepEqual(
    mine.getKeybindings().getKeys("tui.select.cancel"),
    real.getKeybindings().getKeys("tui.select.cancel"),
  );
});

test("fuzzyFilter selects and orders like pi-tui; fuzzyMatch ranks tight matches first", (t) => {
  const score = (q, text) => mine.fuzzyMatch(q, text).score;
  assert.deepEqual(mine.fuzzyMatch("xyz", "abc"), { matches: false, score: 0 });
  assert.equal(mine.fuzzyMatch("", "abc").matches, true);
  assert.ok(score("abc", "abc") < score("abc", "abcd"));
  assert.ok(score("abc", "abcd") < score("abc", "xaxbxc"));
  assert.ok(score("ed", "src/editor.ts") < score("ed", "speedy"));
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-tui"));
  const items = [
    "model-select",
    "settings",
    "session/new",
    "src/components/editor.ts",
    "README.md",
    "gpt4",
    "4gpt",
    "claude-opus-4",
    "Clear",
  ];
  // (pi-tui also tries "gpt4" as "4gpt" and back; pichamber does not.)
  for (const q of ["", "se", "sn", "edit ts", "md", "co", "CLEAR", "zzz", "c o", "set", "ses", "cl"]) {
    assert.deepEqual(
      mine.fuzzyFilter(items, q, (x) => x),
      real.fuzzyFilter(items, q, (x) => x),
      `fuzzyFilter(${q})`,
    );
    for (const item of items) assert.equal(mine.fuzzyMatch(q, item).matches, real.fuzzyMatch(q, item).matches);
  }
});

test("Text, Box, Spacer, TruncatedText and Container render like pi-tui", (t) => {
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-tui"));
  const build = (L) => {
    const out = {};
    out.text = [
      new L.Text("Hello world, wrapped text here", 1, 1).render(12),
      new L.Text("", 1, 1).render(10),
      new L.Text("  ", 0, 0).render(10),
      new L.Text("tab\tand 日本語 text", 2, 0).render(9),
      new L.Text("colored", 0, 1, (s) => `<${s}>`).render(10),
    ];
    const box = new L.Box(2, 1, (s) => `[${s}]`);
    box.addChild(new L.Text("in a box", 0, 0));
    box.addChild(new L.Spacer(2));
    out.box = [box.render(20), new L.Box().render(10)];
    out.trunc = [
      new L.TruncatedText("a long line that must be truncated\nsecond", 1, 1).render(15),
      new L.TruncatedText("short").render(8),
    ];
    const c = new L.Container();
    c.addChild(new L.Text("one", 0, 0));
    c.addChild(new L.TruncatedText("two"));
    out.container = c.render(10);
    return out;
  };
  assert.deepEqual(build(mine), build(real));
});

test("SelectList, SettingsList and Input are simple working stand-ins", () => {
  const theme = {
    selectedPrefix: (s) => s,
    selectedText: (s) => `*${s}`,
    description: (s) => s,
    scrollInfo: (s) => s,
    noMatch: (s) => `!${s}`,
  };
  const items = [{ value: "a", description: "first" }, { value: "b", label: "Bee" }, { value: "c" }];
  const sl = new mine.SelectList(items, 2, theme);
  const events = [];
  sl.onSelect = (item) => events.push(item.value);
  sl.onSelectionChange = (item) => events.push(`~${item.value}`);
  sl.onCancel = () => events.push("cancel");
  assert.deepEqual(sl.render(40), ["*→ a  first", "  Bee"]);
  sl.handleInput("\x1b[B");
  sl.handleInput("\x1b[B");
  assert.deepEqual(sl.render(40), ["  Bee", "*→ c"]);
  sl.handleInput("\r");
  sl.handleInput("\x1b");
  assert.deepEqual(events, ["~b", "~c", "c", "cancel"]);
  sl.setFilter("z");
  assert.deepEqual(sl.render(40), ["!  No matching commands"]);
  assert.equal(sl.getSelectedItem(), null);

  const changes = [];
  const settings = new mine.SettingsList(
    [
      { id: "a", label: "Alpha", currentValue: "on", values: ["on", "off"] },
      { id: "b", label: "Beta", currentValue: "1" },
    ],
    5,
    {},
    (id, v) => changes.push([id, v]),
    () => changes.push("cancel"),
  );
  settings.handleInput(" ");
  settings.handleInput("\x1b[B");
  settings.handleInput("\r");
  settings.handleInput("\x1b");
  assert.deepEqual(changes, [["a", "off"], "cancel"]);
  assert.deepEqual(settings.render(20), ["  Alpha  off", "→ Beta  1"]);

  const input = new mine.Input();
  const submitted = [];
  input.onSubmit = (v) => submitted.push(v);
  for (const k of ["h", "e", "l", "l", "o", "\x7f", "\x1b[D", "X", "\x1b[C", "!", "\r"]) input.handleInput(k);
  assert.equal(input.getValue(), "helXl!");
  assert.deepEqual(submitted, ["helXl!"]);
  assert.deepEqual(input.render(5), ["> hel\x1b[0m"]);
});

test("loaders render like pi-tui and CancellableLoader aborts on escape", (t) => {
  const tui = { requestRender() {} };
  const loader = new mine.CancellableLoader(
    tui,
    (s) => `<${s}>`,
    (s) => `[${s}]`,
    "Working...",
  );
  loader.stop();
  let aborted = false;
  loader.onAbort = () => (aborted = true);
  loader.handleInput("\x1b");
  assert.equal(aborted, true);
  assert.equal(loader.signal.aborted, true);
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-tui"));
  const rl = new real.Loader(
    tui,
    (s) => `<${s}>`,
    (s) => `[${s}]`,
    "Loading stuff",
  );
  rl.stop();
  const ml = new mine.Loader(
    tui,
    (s) => `<${s}>`,
    (s) => `[${s}]`,
    "Loading stuff",
  );
  ml.stop();
  assert.deepEqual(ml.render(30), rl.render(30));
  ml.setMessage("Next");
  rl.setMessage("Next");
  assert.deepEqual(ml.render(30), rl.render(30));
});

test("terminal helpers: hyperlink and imageFallback match pi-tui; image encoders throw", (t) => {
  assert.throws(() => mine.encodeKitty("abc", {}), /encodeKitty\(\) is not available inside a pichamber extension/);
  assert.throws(() => new mine.StdinBuffer(), /StdinBuffer is not available/);
  assert.equal(mine.isFocusable(new mine.Input()), true);
  assert.equal(mine.isFocusable(new mine.Text("x")), false);
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-tui"));
  assert.equal(mine.hyperlink("text", "https://x.dev"), real.hyperlink("text", "https://x.dev"));
  for (const args of [["image/png", { widthPx: 1, heightPx: 2 }, "x.png"], ["image/jpeg"], ["image/gif", undefined, "g.gif"]])
    assert.equal(mine.imageFallback(...args), real.imageFallback(...args));
});

test("Editor (simplified) edits, submits and renders within its borders; inert TUI", () => {
  const tui = new mine.TUI();
  const editor = new mine.Editor(tui, { borderColor: (s) => s, selectList: {} });
  const submitted = [];
  editor.onSubmit = (text) => submitted.push(text);
  for (const k of ["h", "i", "\x1b[13;2u", "t", "h", "e", "r", "e", "\x7f"]) editor.handleInput(k);
  assert.equal(editor.getText(), "hi\nther");
  editor.insertTextAtCursor("e!");
  assert.deepEqual(editor.getCursor(), { line: 1, col: 6 });
  const lines = editor.render(20);
  assert.equal(lines[0], "─".repeat(20));
  assert.equal(lines.at(-1), "─".repeat(20));
  assert.equal(lines.length, 4);
  for (const line of lines) assert.equal(mine.visibleWidth(line), 20);
  editor.handleInput("\r");
  assert.deepEqual(submitted, ["hi\nthere!"]);
  assert.equal(editor.getText(), "");
  editor.setText("abc");
  assert.equal(editor.getText(), "abc");
  class Custom extends mine.Editor {
    handleInput(data) {
      if (data === "x") return;
      super.handleInput(data);
    }
  }
  const c = new Custom(tui, { borderColor: (s) => s });
  c.handleInput("x");
  c.handleInput("y");
  assert.equal(c.getText(), "y");
  tui.setFocus(c);
  assert.equal(c.focused, true);
  assert.ok(c.render(10).some((l) => l.includes(mine.CURSOR_MARKER)));
  const md = new mine.Markdown("# Title\n\nSome **markdown** text that wraps around", 1, 0, {});
  assert.ok(md.render(20).length >= 3);
  assert.deepEqual(
    new mine.Image(
      "",
      "image/png",
      { fallbackColor: (s) => s },
      { filename: "a.png" },
      { widthPx: 2, heightPx: 3 },
    ).render(40),
    ["[Image: a.png [image/png] 2x3]"],
  );
});

test("every runtime export of pi-tui exists", (t) => {
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-tui"));
  assert.deepEqual(
    Object.keys(real).filter((k) => !(k in mine)),
    [],
  );
  assert.equal(mine.CURSOR_MARKER, real.CURSOR_MARKER);
});

test("renderFakeCursor marks text as pi-tui 1.6.0 does", () => {
  // pi-tui 1.6.0's renderFakeCursor("ab"), printed by pi-tui itself.
  assert.equal(mine.renderFakeCursor("ab"), "\u001b_pi:fc\u0007ab\u001b_pi:/fc\u0007");
});
