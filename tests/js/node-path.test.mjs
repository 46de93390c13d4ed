// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-path.js against node:path.posix.
import { test } from "node:test";
import assert from "node:assert/strict";
import nodePath from "node:path";
import path, * as named from "pichamber:node/path";

const P = nodePath.posix;
const samples = [
  "",
  ".",
  "..",
  "/",
  "//",
  "///",
  "a",
  "a/",
  "/a",
  "/a/",
  "a/b",
  "a//b",
  "a/./b",
  "a/../b",
  "../a",
  "../../a/b",
  "/a/b/../../..",
  "/a/b/c/../../d",
  "a/b/c/../../../..",
  "./a/./b/.",
  "foo.txt",
  ".bashrc",
  "a/.bashrc",
  "a.b.c",
  "dir/file.tar.gz",
  "dir.d/file",
  "file.",
  "..file",
  "/foo/bar/baz/asdf/quux/..",
  "/a/b/",
  "a/b//",
  "//a",
  "/.",
  "/..",
  "./",
  "../",
  "a/b/.ext",
  "/home/user/.pi/agent",
  "~/x",
  "a b/c d.txt",
  "ünï/cödé.ts",
  "/../",
  "//..",
  "/...",
  "a..",
  "...",
  "x/.txt/",
];

test("normalize, dirname, basename, extname, isAbsolute, parse match node:path.posix", () => {
  for (const s of samples) {
    assert.equal(path.normalize(s), P.normalize(s), `normalize(${JSON.stringify(s)})`);
    assert.equal(path.dirname(s), P.dirname(s), `dirname(${JSON.stringify(s)})`);
    assert.equal(path.basename(s), P.basename(s), `basename(${JSON.stringify(s)})`);
    assert.equal(path.extname(s), P.extname(s), `extname(${JSON.stringify(s)})`);
    assert.equal(path.isAbsolute(s), P.isAbsolute(s), `isAbsolute(${JSON.stringify(s)})`);
    assert.deepEqual(path.parse(s), P.parse(s), `parse(${JSON.stringify(s)})`);
    assert.equal(path.format(path.parse(s)), P.format(P.parse(s)), `format(parse(${JSON.stringify(s)}))`);
    for (const ext of [".txt", "txt", ".gz", "c", "", "/", "b/", s]) {
      assert.equal(path.basename(s, ext), P.basename(s, ext), `basename(${JSON.stringify(s)}, ${JSON.stringify(ext)})`);
    }
  }
});

test("join, resolve, relative match node:path.posix (pairwise)", () => {
  for (const a of samples) {
    for (const b of samples) {
      assert.equal(path.join(a, b), P.join(a, b), `join(${JSON.stringify(a)}, ${JSON.stringify(b)})`);
      assert.equal(path.resolve(a, b), P.resolve(a, b), `resolve(${JSON.stringify(a)}, ${JSON.stringify(b)})`);
      assert.equal(path.relative(a, b), P.relative(a, b), `relative(${JSON.stringify(a)}, ${JSON.stringify(b)})`);
    }
  }
  assert.equal(path.join(), P.join());
  assert.equal(path.resolve(), P.resolve());
  assert.equal(path.join("a", "b", "../c", "./d"), P.join("a", "b", "../c", "./d"));
  assert.equal(path.resolve("/x", "y", "/z", "w"), P.resolve("/x", "y", "/z", "w"));
});

test("format with partial objects", () => {
  const objs = [
    { root: "/", dir: "/home/u", base: "f.txt" },
    { root: "/", base: "f.txt" },
    { name: "f", ext: ".txt" },
    { name: "f", ext: "txt" },
    { dir: "d", name: "f", ext: ".e" },
    { root: "/", name: "x" },
    {},
  ];
  for (const o of objs) assert.equal(path.format(o), P.format(o), JSON.stringify(o));
});

test("constants, posix/default export shape, argument validation", () => {
  assert.equal(named.sep, "/");
  assert.equal(named.delimiter, ":");
  assert.equal(path.posix, path);
  assert.equal(named.posix, path);
  assert.equal(path.join, named.join);
  assert.throws(() => path.join("a", 1), { code: "ERR_INVALID_ARG_TYPE", name: "TypeError" });
  assert.throws(() => path.basename(null), { code: "ERR_INVALID_ARG_TYPE" });
  assert.equal(path.toNamespacedPath("/a"), "/a");
  assert.equal(path.win32, path);
  assert.equal(named.default, path);
});
