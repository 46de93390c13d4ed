// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-module.js and intl.js against Node (its node:module and ICU's Intl.Segmenter).
import { test } from "node:test";
import assert from "node:assert/strict";
import * as realModule from "node:module";
import * as realFs from "node:fs";
import moduleDefault, { createRequire, isBuiltin, builtinModules } from "pichamber:node/module";
import * as fs from "pichamber:node/fs";
import * as path from "pichamber:node/path";
import { Intl as ShimIntl, Segmenter } from "pichamber:intl";

test("createRequire's require returns the built-in modules pichamber provides", () => {
  for (const from of [import.meta.url, "/ext/index.ts", new URL("file:///ext/a.js")]) {
    const require = createRequire(from);
    assert.equal(require("node:fs"), fs);
    assert.equal(require("fs"), fs);
    assert.equal(require("node:path"), path);
    assert.equal(require("module"), moduleDefault);
    assert.equal(require.resolve("node:fs"), "node:fs");
    assert.equal(require.resolve("path"), "path");
  }
  // Every name listed is one Node has too.
  for (const name of builtinModules) assert.ok(realModule.builtinModules.includes(name), name);
  assert.ok(isBuiltin("node:fs") && isBuiltin("fs/promises") && !isBuiltin("recheck"));
  assert.equal(realModule.isBuiltin("node:fs"), isBuiltin("node:fs"));
});

test("a module that is not there fails as in Node: MODULE_NOT_FOUND", () => {
  const ours = createRequire("/ext/index.ts");
  const real = createRequire.call(null, "/ext/index.ts") && realModule.createRequire("/nonexistent/index.js");
  for (const id of ["glimpseui", "recheck", "./local.js"]) {
    let theirs;
    try {
      real(id);
    } catch (e) {
      theirs = e;
    }
    assert.throws(() => ours(id), (e) => e.code === theirs.code && e.message.startsWith(`Cannot find module '${id}'`));
    assert.throws(() => ours.resolve(id), (e) => e.code === "MODULE_NOT_FOUND");
  }
  // Optional-dependency probing, as extensions write it.
  let found = "unset";
  try {
    found = ours.resolve("glimpseui");
  } catch {
    found = null;
  }
  assert.equal(found, null);
});

test("createRequire rejects what Node rejects", () => {
  for (const bad of ["relative/path.js", "", "http://example.com/a.js"]) {
    let theirs;
    try {
      realModule.createRequire(bad);
    } catch (e) {
      theirs = e;
    }
    assert.ok(theirs, `Node accepts ${bad}`);
    assert.throws(() => createRequire(bad), (e) => e.code === theirs.code && e.message === theirs.message);
  }
  const require = createRequire("/ext/a.js");
  for (const bad of [42, ""]) {
    let theirs;
    try {
      realModule.createRequire("/ext/a.js")(bad);
    } catch (e) {
      theirs = e;
    }
    assert.throws(() => require(bad), (e) => e.code === theirs.code);
  }
  assert.ok(realFs.existsSync); // the real fs is untouched
});

const samples = [
  "",
  "hello",
  "héllo wörld",
  "e\u0301\u0301x", // stacked combining marks
  "a\r\nb\n\rc",
  "👍🏽 ok",
  "👨‍👩‍👧‍👦 family",
  "🏳️‍🌈 flag",
  "🇫🇷🇩🇪🇺",
  "🇫",
  "日本語のテキスト",
  "한국어 \u1100\u1161\u11a8 \uac00\u11a8",
  "\u0915\u094d\u0937\u093f", // Devanagari conjunct
  "tab\there\u200bzero",
  "\ud83d", // a lone surrogate
  "keycap 1\ufe0f\u20e3",
  "a\u200db x\u200d👍 👍\u200d👍", // ZWJ joins pictographs only
  "\u0915\u094d\u200d\u0937",
];

const segments = (segmenter, text) => [...segmenter.segment(text)].map((s) => ({ ...s }));

test("Intl.Segmenter splits graphemes as ICU does", () => {
  const real = new Intl.Segmenter(undefined, { granularity: "grapheme" });
  const ours = new Segmenter(undefined, { granularity: "grapheme" });
  for (const text of samples) assert.deepEqual(segments(ours, text), segments(real, text), JSON.stringify(text));
  // The default granularity is grapheme.
  assert.deepEqual(segments(new Segmenter(), "ab"), segments(real, "ab"));
  assert.deepEqual(new Segmenter("en").resolvedOptions().granularity, "grapheme");
});

test("Intl.Segmenter's containing() and words", () => {
  const real = new Intl.Segmenter("en", { granularity: "grapheme" }).segment("a👍🏽b");
  const ours = new Segmenter("en", { granularity: "grapheme" }).segment("a👍🏽b");
  for (const i of [0, 1, 2, 3, 4, 5, 6, -1]) assert.deepEqual(ours.containing(i), real.containing(i), `index ${i}`);
  const words = new Intl.Segmenter("en", { granularity: "word" });
  const ourWords = new Segmenter("en", { granularity: "word" });
  for (const text of ["Hello, world!", "two  spaces", "don't stop", "a-b c_d", "日本 語", "", "1.5 3,000 dogs' x", "e.g. U.S.A.", "v1.2.3"]) {
    assert.deepEqual(segments(ourWords, text), segments(words, text), JSON.stringify(text));
  }
  const sentences = new Intl.Segmenter("en", { granularity: "sentence" });
  const ourSentences = new Segmenter("en", { granularity: "sentence" });
  for (const text of ["Hello there. How are you? Fine!", "One sentence", "Wait... what?! Yes.", "Pi is 3.14. The U.S.A. is big.", "(Quoted.) Next one."]) {
    assert.deepEqual(segments(ourSentences, text), segments(sentences, text), JSON.stringify(text));
  }
  assert.throws(() => new Segmenter("en", { granularity: "line" }), RangeError);
  assert.equal(Object.prototype.toString.call(ShimIntl), "[object Intl]");
});
