// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-tty.js against Node's node:tty on descriptors that are not terminals (a file, a pipe,
// none), which is every descriptor an extension has in pichamber.
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import * as nodeTty from "node:tty";
import tty, * as named from "pichamber:node/tty";

test("it exports what Node's node:tty does", () => {
  for (const name of Object.keys(nodeTty)) {
    if (name === "default") continue;
    assert.ok(name in named, `node:tty exports ${name}`);
    assert.equal(typeof named[name], typeof nodeTty[name], name);
    assert.equal(tty[name], named[name], `default.${name}`);
  }
});

test("no descriptor that is not a terminal is a TTY", () => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "tty-")), "f");
  const fd = fs.openSync(file, "w");
  try {
    for (const value of [fd, undefined, null, -1, 1e6, "1"]) {
      assert.equal(tty.isatty(value), nodeTty.isatty(value), String(value));
    }
  } finally {
    fs.closeSync(fd);
  }
});

test("a TTY stream on a file fails as in Node", () => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "tty-")), "f");
  const fd = fs.openSync(file, "w");
  try {
    for (const Stream of ["ReadStream", "WriteStream"]) {
      const caught = (make) => {
        try {
          make();
        } catch (err) {
          return { code: err.code, message: err.message, name: err.name };
        }
        return null;
      };
      const theirs = caught(() => new nodeTty[Stream](fd));
      const ours = caught(() => new tty[Stream](fd));
      assert.ok(theirs, `Node's ${Stream} threw`);
      assert.deepEqual(ours, theirs, Stream);
    }
  } finally {
    fs.closeSync(fd);
  }
});
