// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-fs.js / node-fs-promises.js over the __host fs primitives (host-shim.mjs implements them
// with node:fs), compared with node:fs on the same temp directory.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import * as realFs from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fs, * as named from "pichamber:node/fs";
import fsp, * as namedP from "pichamber:node/fs-promises";
import { Buffer } from "pichamber:node/buffer";

let dir;
before(() => {
  dir = realFs.mkdtempSync(join(tmpdir(), "pichamber-fs-"));
});
after(() => {
  realFs.rmSync(dir, { recursive: true, force: true });
});

test("write/read round trips: strings, encodings, binary, append", () => {
  const f = join(dir, "a.txt");
  fs.writeFileSync(f, "héllo\n");
  assert.equal(realFs.readFileSync(f, "utf8"), "héllo\n");
  assert.equal(fs.readFileSync(f, "utf8"), "héllo\n");
  assert.equal(fs.readFileSync(f, { encoding: "utf-8" }), "héllo\n");
  const buf = fs.readFileSync(f);
  assert.ok(Buffer.isBuffer(buf));
  assert.deepEqual(Array.from(buf), Array.from(realFs.readFileSync(f)));
  assert.equal(fs.readFileSync(f, "base64"), realFs.readFileSync(f, "base64"));
  assert.equal(fs.readFileSync(f, "latin1"), realFs.readFileSync(f, "latin1"));
  fs.appendFileSync(f, "more");
  fs.writeFileSync(f, "!", { flag: "a" });
  assert.equal(realFs.readFileSync(f, "utf8"), "héllo\nmore!");
  const bin = join(dir, "bin");
  const bytes = new Uint8Array(300).map((_, i) => (i * 7) & 0xff);
  fs.writeFileSync(bin, bytes);
  assert.deepEqual(Array.from(realFs.readFileSync(bin)), Array.from(bytes));
  fs.writeFileSync(bin, "ff00", "hex");
  assert.deepEqual(Array.from(realFs.readFileSync(bin)), [0xff, 0]);
  assert.throws(() => fs.writeFileSync(join(dir, "bad"), 123), { code: "ERR_INVALID_ARG_TYPE" });
  assert.throws(() => fs.writeFileSync(f, "x", { flag: "wx" }), { code: "EEXIST" });
});

test("errors carry Node's code, syscall, path and message", () => {
  const missing = join(dir, "missing.txt");
  const mine = captureError(() => fs.readFileSync(missing, "utf8"));
  const real = captureError(() => realFs.readFileSync(missing, "utf8"));
  for (const k of ["code", "errno", "syscall", "path", "message"]) assert.equal(mine[k], real[k], k);
  const ms = captureError(() => fs.statSync(missing));
  const rs = captureError(() => realFs.statSync(missing));
  for (const k of ["code", "syscall", "path", "message"]) assert.equal(ms[k], rs[k], `stat ${k}`);
  assert.equal(fs.statSync(missing, { throwIfNoEntry: false }), undefined);
  const md = captureError(() => fs.readdirSync(missing));
  const rd = captureError(() => realFs.readdirSync(missing));
  for (const k of ["code", "syscall", "message"]) assert.equal(md[k], rd[k], `readdir ${k}`);
  const cwd = process.cwd();
  process.chdir(dir);
  try {
    const rel = captureError(() => fs.readFileSync("nope.txt"));
    const rrel = captureError(() => realFs.readFileSync("nope.txt"));
    assert.equal(rel.message, rrel.message, "relative paths are reported as given");
    assert.equal(rel.path, rrel.path);
    fs.writeFileSync("rel.txt", "relative");
    assert.equal(realFs.readFileSync(join(dir, "rel.txt"), "utf8"), "relative");
  } finally {
    process.chdir(cwd);
  }
  assert.ok(mine instanceof Error);
});

function captureError(fn) {
  try {
    fn();
  } catch (e) {
    return e;
  }
  assert.fail("expected an error");
}

test("stat, lstat, exists, readdir (names, Dirents, recursive), realpath, access", () => {
  const sub = join(dir, "tree");
  assert.equal(
    fs.mkdirSync(join(sub, "x", "y"), { recursive: true }),
    realFs.realpathSync(dir) === dir ? sub : fs.mkdirSync(join(sub, "x", "y"), { recursive: true }),
  );
  assert.equal(fs.mkdirSync(join(sub, "x"), { recursive: true }), undefined);
  fs.writeFileSync(join(sub, "f1.txt"), "12345");
  fs.writeFileSync(join(sub, "x", "f2.txt"), "");
  realFs.symlinkSync(join(sub, "f1.txt"), join(sub, "link"));
  const st = fs.statSync(join(sub, "f1.txt"));
  const rst = realFs.statSync(join(sub, "f1.txt"));
  assert.equal(st.size, 5);
  assert.equal(st.isFile(), true);
  assert.equal(st.isDirectory(), false);
  assert.ok(Math.abs(st.mtimeMs - rst.mtimeMs) < 1);
  assert.ok(st.mtime instanceof Date);
  assert.equal(fs.statSync(sub).isDirectory(), true);
  assert.equal(fs.lstatSync(join(sub, "link")).isSymbolicLink(), true);
  assert.equal(fs.statSync(join(sub, "link")).isFile(), true);
  assert.equal(fs.existsSync(join(sub, "f1.txt")), true);
  assert.equal(fs.existsSync(join(sub, "nope")), false);
  assert.equal(fs.existsSync(42), false);
  assert.deepEqual(fs.readdirSync(sub).sort(), realFs.readdirSync(sub).sort());
  const dirents = fs.readdirSync(sub, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name));
  const real = realFs.readdirSync(sub, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name));
  assert.deepEqual(
    dirents.map((d) => [d.name, d.isFile(), d.isDirectory(), d.isSymbolicLink(), d.parentPath]),
    real.map((d) => [d.name, d.isFile(), d.isDirectory(), d.isSymbolicLink(), d.parentPath]),
  );
  assert.deepEqual(
    fs.readdirSync(sub, { recursive: true }).sort(),
    realFs.readdirSync(sub, { recursive: true }).sort(),
  );
  assert.equal(fs.realpathSync(join(sub, "link")), realFs.realpathSync(join(sub, "link")));
  assert.equal(fs.realpathSync.native(join(sub, "x", "..")), realFs.realpathSync(sub));
  fs.accessSync(join(sub, "f1.txt"), fs.constants.R_OK);
  assert.throws(() => fs.accessSync(join(sub, "zz")), { code: "ENOENT", syscall: "access" });
});

test("mkdir, rename, copyFile, unlink, rm, rmdir, mkdtemp, truncate, cp", () => {
  const d = join(dir, "ops");
  fs.mkdirSync(d);
  assert.throws(() => fs.mkdirSync(d), { code: "EEXIST" });
  fs.writeFileSync(join(d, "a"), "A");
  fs.renameSync(join(d, "a"), join(d, "b"));
  assert.equal(realFs.existsSync(join(d, "a")), false);
  fs.copyFileSync(join(d, "b"), join(d, "c"));
  assert.equal(realFs.readFileSync(join(d, "c"), "utf8"), "A");
  assert.throws(() => fs.copyFileSync(join(d, "b"), join(d, "c"), fs.constants.COPYFILE_EXCL), { code: "EEXIST" });
  fs.unlinkSync(join(d, "c"));
  assert.equal(realFs.existsSync(join(d, "c")), false);
  fs.writeFileSync(join(d, "t"), "abcdef");
  fs.truncateSync(join(d, "t"), 3);
  assert.equal(realFs.readFileSync(join(d, "t"), "utf8"), "abc");
  fs.cpSync(d, join(dir, "ops-copy"), { recursive: true });
  assert.deepEqual(realFs.readdirSync(join(dir, "ops-copy")).sort(), ["b", "t"]);
  assert.throws(() => fs.rmSync(d), { code: "ERR_FS_EISDIR" });
  assert.throws(() => fs.rmdirSync(d), { code: "ENOTEMPTY" });
  fs.rmSync(d, { recursive: true });
  assert.equal(realFs.existsSync(d), false);
  fs.rmSync(d, { recursive: true, force: true });
  assert.throws(() => fs.rmSync(d), { code: "ENOENT" });
  const t = fs.mkdtempSync(join(dir, "tmp-"));
  assert.match(t, /tmp-[A-Za-z0-9]{6}$/);
  assert.ok(realFs.statSync(t).isDirectory());
  fs.rmdirSync(t);
  assert.equal(realFs.existsSync(t), false);
});

test("emulated file descriptors", () => {
  const f = join(dir, "fd.txt");
  const fd = fs.openSync(f, "w");
  fs.writeSync(fd, "hello ");
  fs.writeSync(fd, Buffer.from("world"));
  fs.closeSync(fd);
  assert.equal(realFs.readFileSync(f, "utf8"), "hello world");
  const r = fs.openSync(f, "r");
  const buf = Buffer.alloc(5);
  assert.equal(fs.readSync(r, buf, 0, 5, null), 5);
  assert.equal(buf.toString(), "hello");
  assert.equal(fs.readSync(r, buf, 0, 5, null), 5);
  assert.equal(buf.toString(), " worl");
  assert.equal(fs.fstatSync(r).size, 11);
  // Modes, owners and times stay as the host made them; the descriptor must be open.
  fs.fchmodSync(r, 0o600);
  fs.fchownSync(r, 0, 0);
  fs.futimesSync(r, 0, 0);
  fs.closeSync(r);
  assert.throws(() => fs.closeSync(r), { code: "EBADF" });
  assert.throws(() => fs.fchmodSync(r, 0o600), { code: "EBADF", syscall: "fchmod" });
  const a = fs.openSync(f, "a");
  fs.writeSync(a, "!");
  fs.closeSync(a);
  assert.equal(realFs.readFileSync(f, "utf8"), "hello world!");
  assert.throws(() => fs.openSync(join(dir, "none"), "r"), { code: "ENOENT" });
});

test("callback API", async () => {
  const f = join(dir, "cb.txt");
  await new Promise((resolve, reject) => fs.writeFile(f, "cb", (err) => (err ? reject(err) : resolve())));
  const text = await new Promise((resolve, reject) =>
    fs.readFile(f, "utf8", (err, t) => (err ? reject(err) : resolve(t))),
  );
  assert.equal(text, "cb");
  const err = await new Promise((resolve) => fs.readFile(join(dir, "nope"), (e) => resolve(e)));
  assert.equal(err.code, "ENOENT");
  assert.equal(await new Promise((resolve) => fs.exists(f, resolve)), true);
  const names = await new Promise((resolve, reject) => fs.readdir(dir, (e, n) => (e ? reject(e) : resolve(n))));
  assert.ok(names.includes("cb.txt"));
});

test("fs/promises and fs.promises", async () => {
  assert.equal(fs.promises, fsp);
  assert.equal(named.promises.readFile, namedP.readFile);
  const d = await fsp.mkdtemp(join(dir, "p-"));
  const f = join(d, "x.json");
  await namedP.writeFile(f, JSON.stringify({ a: 1 }));
  assert.deepEqual(JSON.parse(await namedP.readFile(f, "utf8")), { a: 1 });
  await namedP.appendFile(f, "\n");
  assert.equal((await namedP.stat(f)).size, 8);
  await namedP.access(f);
  await assert.rejects(namedP.access(join(d, "nope")), { code: "ENOENT" });
  await assert.rejects(namedP.readFile(join(d, "nope")), { code: "ENOENT", syscall: "open" });
  assert.deepEqual(await namedP.readdir(d), ["x.json"]);
  await namedP.rename(f, join(d, "y.json"));
  await namedP.copyFile(join(d, "y.json"), join(d, "z.json"));
  await namedP.unlink(join(d, "y.json"));
  assert.deepEqual(await namedP.readdir(d), ["z.json"]);
  const fh = await namedP.open(join(d, "h.txt"), "w+");
  await fh.writeFile("handle");
  assert.equal(await fh.readFile("utf8"), "handle");
  await fh.close();
  await namedP.rm(d, { recursive: true, force: true });
  assert.equal(realFs.existsSync(d), false);
  assert.equal(namedP.constants.R_OK, realFs.constants.R_OK);
});

test("streams write and read whole files", async () => {
  const f = join(dir, "stream.txt");
  const ws = fs.createWriteStream(f);
  ws.write("line1\n");
  ws.write(Buffer.from("line2\n"));
  await new Promise((resolve) => ws.end("end", resolve));
  assert.equal(realFs.readFileSync(f, "utf8"), "line1\nline2\nend");
  const rs = fs.createReadStream(f, { encoding: "utf8" });
  let got = "";
  rs.on("data", (c) => (got += c));
  await new Promise((resolve) => rs.on("end", resolve));
  assert.equal(got, "line1\nline2\nend");
  let iter = "";
  for await (const chunk of fs.createReadStream(f)) iter += chunk.toString();
  assert.equal(iter, got);
  const bad = fs.createReadStream(join(dir, "nope"));
  const err = await new Promise((resolve) => bad.on("error", resolve));
  assert.equal(err.code, "ENOENT");
});

test("constants and default export", () => {
  for (const k of [
    "F_OK",
    "R_OK",
    "W_OK",
    "X_OK",
    "COPYFILE_EXCL",
    "O_CREAT",
    "O_APPEND",
    "S_IFDIR",
    "S_IFREG",
    "S_IFMT",
  ]) {
    assert.equal(fs.constants[k], realFs.constants[k], k);
  }
  assert.equal(fs.readFileSync, named.readFileSync);
});

test("watch refuses a missing path as Node does", () => {
  const missing = join(dir, "missing.txt");
  const expected = (() => {
    try {
      realFs.watch(missing);
    } catch (e) {
      return { message: e.message, code: e.code, syscall: e.syscall };
    }
  })();
  assert.throws(() => fs.watch(missing, () => {}), (e) => {
    assert.deepEqual({ message: e.message, code: e.code, syscall: e.syscall }, expected);
    return true;
  });
});

test("watch reports changes to a file and to a folder's entries; close stops it", async () => {
  const sub = join(dir, "watched");
  realFs.mkdirSync(sub);
  const file = join(sub, "a.txt");
  realFs.writeFileSync(file, "1");
  const seen = [];
  const onFile = fs.watch(file, (type, name) => seen.push(["file", type, name]));
  const onDir = fs.watch(sub, (type, name) => seen.push(["dir", type, name]));
  const closed = new Promise((resolve) => onFile.on("close", resolve));
  const tick = () => new Promise((resolve) => setTimeout(resolve, 400));
  await tick();
  realFs.writeFileSync(file, "changed");
  await tick();
  realFs.writeFileSync(join(sub, "b.txt"), "new");
  await tick();
  onFile.close();
  onDir.close();
  await closed;
  realFs.writeFileSync(file, "after close");
  await tick();
  assert.deepEqual(seen, [
    ["file", "change", "a.txt"],
    ["dir", "change", "a.txt"],
    ["dir", "rename", "b.txt"],
  ]);

  const iterator = fsp.watch(file)[Symbol.asyncIterator]();
  setTimeout(() => realFs.writeFileSync(file, "via promises"), 300);
  assert.deepEqual((await iterator.next()).value, { eventType: "change", filename: "a.txt" });
  assert.deepEqual(await iterator.return(), { value: undefined, done: true });
});
