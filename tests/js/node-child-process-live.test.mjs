// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// child_process.spawn with live stdio against Node's own: the same program and the same
// scenario on both, the same events in the same order and the same data. The host side
// (`__pichamber_internal.spawnProgram`) is emulated here with a real program, keeping the
// host's contract: output as it arrives, "exit" when the program exits, "closed" after all of
// its output; a refusal throws.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as realCp from "node:child_process";
import * as realReadline from "node:readline";
import { spawn } from "pichamber:node/child_process";
import { createInterface } from "pichamber:node/readline";

globalThis.__pichamber_internal.spawnProgram = (command, args, { cwd, env } = {}, onOutput) => {
  if (realCp.spawnSync("sh", ["-c", 'command -v "$0"', command]).status !== 0) {
    throw new Error(`spawn ${command}: No such file or directory (os error 2)`);
  }
  const child = realCp.spawn(command, args, { cwd, env: { ...process.env, ...env } });
  child.stdout.on("data", (data) => onOutput("stdout", new Uint8Array(data)));
  child.stderr.on("data", (data) => onOutput("stderr", new Uint8Array(data)));
  child.stdin.on("error", () => {});
  child.on("exit", (code, signal) => onOutput("exit", { code, signal }));
  child.on("close", () => onOutput("closed"));
  return {
    write: (bytes) => void child.stdin.write(Buffer.from(bytes)),
    closeStdin: () => child.stdin.end(),
    kill: (signal) => child.kill(signal),
  };
};

/** Runs `scenario(spawn, readline, log)` with Node's and with ours; both logs must be equal. */
async function same(name, scenario) {
  const run = async (spawnFn, readline) => {
    const log = [];
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`${name}: timed out; log: ${log.join(" | ")}`)), 5000);
      scenario(spawnFn, readline, log, () => {
        clearTimeout(timer);
        resolve();
      });
    });
    return log;
  };
  const expected = await run(realCp.spawn, realReadline);
  const actual = await run(spawn, { createInterface });
  assert.deepEqual(actual, expected, `${name}\n node: ${expected.join(" | ")}\n ours: ${actual.join(" | ")}`);
  return actual;
}

const text = (chunk) => (typeof chunk === "string" ? chunk : Buffer.from(chunk).toString());

test("a program's output, its exit code and the order of spawn, exit and close", async () => {
  const log = await same("exit order", (spawn, _rl, log, done) => {
    const child = spawn("sh", ["-c", "echo out; echo err >&2; exit 3"]);
    let out = "";
    let err = "";
    child.on("spawn", () => log.push("spawn"));
    child.stdout.on("data", (d) => (out += text(d)));
    child.stderr.on("data", (d) => (err += text(d)));
    child.on("exit", (code, signal) => log.push(`exit ${code} ${signal}`));
    child.on("close", (code, signal) => {
      log.push(`close ${code} ${signal} out=${JSON.stringify(out)} err=${JSON.stringify(err)}`);
      done();
    });
  });
  assert.equal(log.at(-1), 'close 3 null out="out\\n" err="err\\n"');
});

test("stdin is live: each line written is answered before the next is sent", async () => {
  const log = await same("echo server", (spawn, _rl, log, done) => {
    const child = spawn("cat");
    const lines = ["first", "second", "third"];
    const send = () => child.stdin.write(`${lines.shift()}\n`);
    child.stdout.setEncoding("utf8");
    child.stdout.on("data", (d) => {
      log.push(`got ${JSON.stringify(d)}`);
      if (lines.length) send();
      else child.stdin.end();
    });
    child.on("close", (code) => {
      log.push(`close ${code}`);
      done();
    });
    send();
  });
  assert.deepEqual(log, ['got "first\\n"', 'got "second\\n"', 'got "third\\n"', "close 0"]);
});

test("readline reads a child's stdout line by line while it runs", async () => {
  const log = await same("readline", (spawn, readline, log, done) => {
    const child = spawn("sh", ["-c", "for i in 1 2 3; do echo line$i; sleep 0.05; done; printf tail"]);
    const lines = readline.createInterface({ input: child.stdout });
    lines.on("line", (line) => log.push(`line ${line}`));
    lines.on("close", () => log.push("lines closed"));
    child.on("close", (code) => {
      log.push(`close ${code}`);
      setTimeout(done, 20);
    });
  });
  assert.deepEqual(log.slice(0, 4), ["line line1", "line line2", "line line3", "line tail"]);
});

test("kill sends the signal: the program ends by it and killed is set", async () => {
  const log = await same("kill", (spawn, _rl, log, done) => {
    const child = spawn("sleep", ["10"]);
    child.on("spawn", () => log.push(`kill returned ${child.kill()}`));
    child.on("exit", (code, signal) => log.push(`exit ${code} ${signal} killed=${child.killed}`));
    child.on("close", () => {
      log.push(`kill after exit returned ${child.kill()}`);
      done();
    });
  });
  assert.deepEqual(log, ["kill returned true", "exit null SIGTERM killed=true", "kill after exit returned false"]);
});

test("a program that ignores SIGTERM is ended with SIGKILL", async () => {
  await same("SIGKILL", (spawn, _rl, log, done) => {
    const child = spawn("sh", ["-c", "trap '' TERM; echo ready; sleep 10"]);
    child.stdout.once("data", () => {
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), 100);
    });
    child.on("exit", (code, signal) => {
      log.push(`exit ${code} ${signal}`);
      done();
    });
  });
});

test("'close' comes though nobody reads the output; ignored streams are null", async () => {
  const log = await same("unread", (spawn, _rl, log, done) => {
    const child = spawn("sh", ["-c", "echo unread; echo gone >&2"], { stdio: ["ignore", "pipe", "ignore"] });
    log.push(`stdin ${child.stdin} stderr ${child.stderr} stdout ${child.stdout === null ? "null" : "stream"}`);
    child.on("close", (code) => {
      log.push(`close ${code}`);
      done();
    });
  });
  assert.deepEqual(log, ["stdin null stderr null stdout stream", "close 0"]);
});

test("env given to spawn reaches the program; cwd is where it starts", async () => {
  const log = await same("env and cwd", (spawn, _rl, log, done) => {
    const child = spawn("sh", ["-c", 'echo "$GREETING from $(pwd)"'], { env: { GREETING: "hello" }, cwd: "/tmp" });
    child.stdout.on("data", (d) => log.push(text(d).trim()));
    child.on("close", () => done());
  });
  assert.deepEqual(log, ["hello from /tmp"]);
});

test("a program that cannot start: 'error' with ENOENT, then 'close'", async () => {
  const log = await same("ENOENT", (spawn, _rl, log, done) => {
    const child = spawn("no-such-program-pichamber");
    child.on("spawn", () => log.push("spawn"));
    child.on("error", (err) => log.push(`error ${err.code} ${err.syscall} ${err.path}`));
    child.on("close", (code, signal) => {
      log.push(`close ${code} ${signal}`);
      done();
    });
  });
  assert.deepEqual(log, ["error ENOENT spawn no-such-program-pichamber no-such-program-pichamber", "close -2 null"]);
});

test("large output arrives whole and in order; large input is written whole", async () => {
  const log = await same("volume", (spawn, _rl, log, done) => {
    const child = spawn("wc", ["-c"]);
    const chunk = "x".repeat(64 * 1024);
    let writes = 0;
    const pump = () => {
      while (writes < 40) {
        writes++;
        if (!child.stdin.write(chunk)) return child.stdin.once("drain", pump);
      }
      child.stdin.end();
    };
    child.stdout.on("data", (d) => log.push(text(d).trim()));
    child.on("close", (code) => {
      log.push(`close ${code}`);
      done();
    });
    pump();
  });
  assert.deepEqual(log, [String(40 * 64 * 1024), "close 0"]);
});
