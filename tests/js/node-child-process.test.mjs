// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-child-process.js over the stubbed __pichamber_internal.exec (see host-shim.mjs).
import { test, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { promisify } from "pichamber:node/util";
import cp, { exec, execFile, spawn, execSync, spawnSync, execFileSync } from "pichamber:node/child_process";
import * as realCp from "node:child_process";
import { execCalls } from "./host-shim.mjs";

const internal = globalThis.__pichamber_internal;
beforeEach(() => {
  execCalls.length = 0;
  internal.handler = (command, args) => {
    if (command === "fail") return { stdout: "partial", stderr: "bad thing\n", code: 3, killed: false };
    if (command === "slow") return { stdout: "", stderr: "", code: null, killed: true };
    return { stdout: `ran ${command} ${args.join(" ")}\n`, stderr: "warn\n", code: 0, killed: false };
  };
});

test("execFile passes command, args, cwd and timeout; callback gets strings", async () => {
  const result = await new Promise((resolve) =>
    execFile("git", ["status", "--short"], { cwd: "/repo", timeout: 500 }, (err, stdout, stderr) =>
      resolve({ err, stdout, stderr }),
    ),
  );
  assert.equal(result.err, null);
  assert.equal(result.stdout, "ran git status --short\n");
  assert.equal(result.stderr, "warn\n");
  assert.equal(execCalls.length, 1);
  assert.equal(execCalls[0].command, "git");
  assert.deepEqual(execCalls[0].args, ["status", "--short"]);
  assert.equal(execCalls[0].options.cwd, "/repo");
  assert.equal(execCalls[0].options.timeout, 500);
});

test("exec runs through sh -c; failures produce Node-shaped errors", async () => {
  await new Promise((resolve) =>
    exec("ls -la | wc -l", (err, stdout) => {
      assert.equal(err, null);
      assert.equal(stdout, "ran sh -c ls -la | wc -l\n");
      resolve();
    }),
  );
  assert.equal(execCalls[0].command, "sh");
  assert.deepEqual(execCalls[0].args, ["-c", "ls -la | wc -l"]);
  internal.handler = () => ({ stdout: "out", stderr: "oops\n", code: 2, killed: false });
  const err = await new Promise((resolve) => exec("false", (e) => resolve(e)));
  assert.equal(err.code, 2);
  assert.equal(err.killed, false);
  assert.equal(err.signal, null);
  assert.equal(err.cmd, "false");
  assert.equal(err.message, "Command failed: false\noops\n");
  assert.equal(err.stdout, "out");
});

test("promisified exec/execFile resolve {stdout, stderr} and reject with output attached", async () => {
  const pexec = promisify(exec);
  const r = await pexec("echo hi");
  assert.deepEqual(r, { stdout: "ran sh -c echo hi\n", stderr: "warn\n" });
  const pfile = promisify(execFile);
  await assert.rejects(
    pfile("fail", ["x"]),
    (e) => e.code === 3 && e.stdout === "partial" && e.stderr === "bad thing\n",
  );
  const killed = await pfile("slow", []).catch((e) => e);
  assert.equal(killed.killed, true);
  assert.equal(killed.signal, "SIGTERM");
  assert.equal(killed.code, null);
  const buf = await promisify(execFile)("echo", ["b"], { encoding: "buffer" });
  assert.ok(buf.stdout instanceof Uint8Array);
  assert.equal(buf.stdout.toString(), "ran echo b\n");
});

test("spawn emits spawn, stdout/stderr data once, exit and close with the code", async () => {
  const child = spawn("node", ["-v"], { cwd: "/w" });
  const events = [];
  child.on("spawn", () => events.push("spawn"));
  child.stdout.on("data", (d) => events.push(`out:${d.toString()}`));
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d) => events.push(`err:${typeof d}:${d}`));
  child.on("exit", (code, signal) => events.push(`exit:${code}:${signal}`));
  const [code] = await new Promise((resolve) => child.on("close", (...a) => resolve(a)));
  assert.equal(code, 0);
  assert.deepEqual(events, ["spawn", "out:ran node -v\n", "err:string:warn\n", "exit:0:null"]);
  assert.equal(child.exitCode, 0);
  const shell = spawn("echo", ["$HOME"], { shell: true });
  await new Promise((resolve) => shell.on("close", resolve));
  assert.deepEqual(execCalls.at(-1).args, ["-c", "echo $HOME"]);
});

test("spawn reports host errors through 'error' and kill() aborts via signal", async () => {
  internal.handler = () => {
    throw Object.assign(new Error("spawn nope ENOENT"), { code: "ENOENT", errno: -2 });
  };
  const child = spawn("nope");
  const err = await new Promise((resolve) => child.on("error", resolve));
  assert.equal(err.code, "ENOENT");
  internal.handler = (_c, _a, opts) =>
    new Promise((resolve) => {
      const done = () => resolve({ stdout: "", stderr: "", code: null, killed: true });
      if (opts.signal.aborted) done();
      else opts.signal.addEventListener("abort", done);
    });
  const long = spawn("sleep", ["100"]);
  const closed = new Promise((resolve) => long.on("close", (code, signal) => resolve([code, signal])));
  assert.equal(long.kill(), true);
  assert.deepEqual(await closed, [null, "SIGTERM"]);
  assert.equal(long.killed, true);
});

// The synchronous variants over a handler that really runs the program, compared with Node's.
test("execSync, execFileSync and spawnSync behave as Node's", () => {
  internal.handler = (command, args, options) => {
    const r = realCp.spawnSync(command, args, { cwd: options.cwd, encoding: "utf8" });
    if (r.error) throw new Error(`spawn ${command} ${r.error.code}`);
    return { stdout: r.stdout, stderr: r.stderr, code: r.status, killed: r.signal !== null };
  };
  const shape = (fn) => {
    try {
      const out = fn();
      return { out: out instanceof Uint8Array ? ["bytes", new TextDecoder().decode(out)] : out };
    } catch (e) {
      return { message: e.message, status: e.status, stdout: String(e.stdout), stderr: String(e.stderr) };
    }
  };
  const cases = [
    (m) => m.execSync("echo hi; echo warn >&2", { encoding: "utf8", stdio: "pipe" }),
    (m) => m.execSync("printf raw"),
    (m) => m.execSync("echo out; echo oops >&2; exit 3", { encoding: "utf8", stdio: "pipe" }),
    (m) => m.execSync("exit 1", { encoding: "utf-8", stdio: "pipe" }),
    (m) => m.execFileSync("sh", ["-c", "echo file; exit 0"], { encoding: "utf8" }),
    (m) => m.execFileSync("sh", ["-c", "exit 4"], { encoding: "utf8", stdio: "pipe" }),
    (m) => m.execFileSync("echo", ["a", "b"], { shell: true, encoding: "utf8" }),
  ];
  for (const run of cases) assert.deepEqual(shape(() => run(cp)), shape(() => run(realCp)), run.toString());
  const spawnShape = (r) => ({ status: r.status, signal: r.signal, stdout: String(r.stdout), stderr: String(r.stderr) });
  assert.deepEqual(
    spawnShape(spawnSync("sh", ["-c", "echo a; echo b >&2; exit 2"], { encoding: "utf8" })),
    spawnShape(realCp.spawnSync("sh", ["-c", "echo a; echo b >&2; exit 2"], { encoding: "utf8" })),
  );
  assert.ok(execCalls.every((c) => c.blocking));

  // A program the host refuses: an error result from spawnSync, thrown by the others.
  internal.handler = () => {
    throw new Error("running 'rg' is not allowed — grant it with --allow-run=rg");
  };
  assert.match(spawnSync("rg", ["x"]).error.message, /--allow-run=rg/);
  assert.throws(() => execFileSync("rg", ["x"]), /--allow-run=rg/);
  // stdin cannot be fed.
  assert.throws(() => execSync("cat", { input: "data" }), /options.input\) is not supported/);
  assert.equal(cp.spawn, spawn);
});
