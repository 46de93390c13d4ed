// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// Loads every guest module inside QuickJS-ng (the engine the guest runs on, via the
// quickjs-emscripten wasm build) and checks the results equal Node's. This catches syntax and
// built-ins QuickJS lacks (no Intl.Segmenter, partial regex `v` flag...). Needs the npm packages
// quickjs-emscripten-core and @jitl/quickjs-ng-wasmfile-release-sync under
// $PICHAMBER_QJSNG_DIR/node_modules (else tests/oracle/node_modules, where tests/run.sh installs
// them); skipped when they are absent.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createRequire } from "node:module";
import { BUILTIN_SPECS_STUB } from "./host-shim.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const repoOracle = join(here, "..", "oracle");
const QJS_DIR =
  process.env.PICHAMBER_QJSNG_DIR ||
  repoOracle;
const jsDir = join(here, "..", "..", "guest-shim", "js");
const table = JSON.parse(readFileSync(join(jsDir, "virtual-modules.json"), "utf8")).modules;

function loadQuickJS() {
  if (!existsSync(join(QJS_DIR, "node_modules", "quickjs-emscripten-core"))) return null;
  const require = createRequire(join(QJS_DIR, "package.json"));
  return { core: require("quickjs-emscripten-core"), variant: require("@jitl/quickjs-ng-wasmfile-release-sync") };
}

// The guest has TextEncoder/TextDecoder (javy); quickjs-emscripten does not, so define them.
const GUEST_GLOBALS = `
globalThis.console = { log: (...a) => __log(a.map(String).join(" ")), error: (...a) => __log(a.map(String).join(" ")), warn: (...a) => __log(a.map(String).join(" ")) };
globalThis.process = { env: { HOME: "/home/user", TERM: "xterm-256color", COLORTERM: "truecolor" }, cwd: () => "/work", platform: "linux", arch: "x64", version: "v20.0.0", versions: {}, argv: [], nextTick: (f, ...a) => queueMicrotask(() => f(...a)) };
globalThis.__pichamber_internal = { exec: () => Promise.reject(new Error("no exec in smoke test")), execBlocking: () => { throw new Error("no exec handler installed"); }, builtinTools: () => ${JSON.stringify(BUILTIN_SPECS_STUB)} };
if (typeof queueMicrotask === "undefined") globalThis.queueMicrotask = (f) => Promise.resolve().then(f);
if (typeof TextEncoder === "undefined") globalThis.TextEncoder = class TextEncoder {
  encode(s) {
    s = String(s);
    const out = [];
    for (let i = 0; i < s.length; i++) {
      let c = s.charCodeAt(i);
      if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) { c = 0x10000 + ((c - 0xd800) << 10) + (s.charCodeAt(++i) - 0xdc00); }
      else if (c >= 0xd800 && c <= 0xdfff) c = 0xfffd;
      if (c < 0x80) out.push(c);
      else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63));
      else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
      else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63));
    }
    return new Uint8Array(out);
  }
};
if (typeof TextDecoder === "undefined") globalThis.TextDecoder = class TextDecoder {
  decode(bytes) {
    bytes = bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes ?? []);
    let s = "";
    for (let i = 0; i < bytes.length; ) {
      const b = bytes[i];
      const need = b < 0x80 ? 0 : b >= 0xf0 && b <= 0xf4 ? 3 : b >= 0xe0 ? 2 : b >= 0xc2 && b < 0xe0 ? 1 : -1;
      if (need < 0) { s += "\ufffd"; i++; continue; }
      let cp = need === 0 ? b : b & (0x3f >> need);
      let j = 1;
      for (; j <= need; j++) { const c = bytes[i + j]; if (c === undefined || (c & 0xc0) !== 0x80) break; cp = (cp << 6) | (c & 0x3f); }
      if (j <= need) { s += "\ufffd"; i += j; continue; }
      s += String.fromCodePoint(cp);
      i += need + 1;
    }
    return s;
  }
};
`;

function runInQuickJS(qjs, scriptPath, fixture) {
  const { core, variant } = qjs;
  return core.newQuickJSWASMModuleFromVariant(variant).then((QuickJS) => {
    const rt = QuickJS.newRuntime();
    rt.setMemoryLimit(512 * 1024 * 1024);
    rt.setMaxStackSize(4 * 1024 * 1024);
    rt.setModuleLoader(
      (name) => {
        if (name.startsWith("pichamber:")) return readFileSync(join(jsDir, table[name]), "utf8");
        throw new Error(`no module ${name}`);
      },
      (_base, requested) => requested,
    );
    const ctx = rt.newContext();
    let report = null;
    const logs = [];
    const fn = (name, impl) => {
      const h = ctx.newFunction(name, impl);
      ctx.setProp(ctx.global, name, h);
      h.dispose();
    };
    fn("__log", (...args) => void logs.push(args.map((a) => ctx.dump(a)).join(" ")));
    fn("__report", (h) => void (report = ctx.getString(h)));
    fn("__host", (nameH, argsH) => {
      const result = globalThis.__host(ctx.getString(nameH), ctx.dump(argsH));
      return ctx.newString(result);
    });
    const wrapHost = ctx.evalCode(
      `{ const raw = globalThis.__host; globalThis.__host = (n, a) => { const r = raw(n, a); if (r && r.startsWith("\\u0001ERR")) throw new Error(r.slice(4)); return r; }; }`,
    );
    wrapHost.value?.dispose();
    const g = ctx.evalCode(GUEST_GLOBALS, "globals.js");
    if (g.error) throw new Error(`globals: ${JSON.stringify(ctx.dump(g.error))}`);
    g.value.dispose();
    const source = `const FIXTURE = ${JSON.stringify(fixture)};\n${readFileSync(scriptPath, "utf8")}`;
    const res = ctx.evalCode(source, "smoke.mjs", { type: "module" });
    if (res.error) throw new Error(`eval: ${JSON.stringify(ctx.dump(res.error))}`);
    for (let i = 0; i < 100000 && rt.hasPendingJob(); i++) {
      const r = rt.executePendingJobs();
      if (r.error) {
        const e = ctx.dump(r.error);
        r.error.dispose();
        throw new Error(`job: ${JSON.stringify(e)}`);
      }
    }
    const state = ctx.getPromiseState(res.value);
    if (state.type === "rejected") throw new Error(`module rejected: ${JSON.stringify(ctx.dump(state.error))}`);
    res.value.dispose();
    return { report, logs };
  });
}

test("all guest modules load in QuickJS-ng and agree with Node", async (t) => {
  const qjs = loadQuickJS();
  if (!qjs)
    return t.skip(
      `quickjs-ng wasm packages not found under ${QJS_DIR}/node_modules (set PICHAMBER_QJSNG_DIR); QuickJS smoke test skipped`,
    );
  const dir = mkdtempSync(join(tmpdir(), "pichamber-qjs-"));
  try {
    const fixture = join(dir, "fixture.txt");
    writeFileSync(fixture, "fixture contents ✓\n");
    // Host errors must cross the wasm boundary as exceptions: signal them with a prefix (not NUL:
    // strings pass through C).
    const realHost = globalThis.__host;
    globalThis.__host = (name, args) => {
      try {
        return realHost(name, args);
      } catch (e) {
        return `\u0001ERR${e.message}`;
      }
    };
    let quick;
    try {
      quick = await runInQuickJS(qjs, join(here, "quickjs-smoke.script.mjs"), fixture);
    } finally {
      globalThis.__host = realHost;
    }
    assert.ok(quick.report, `QuickJS produced no report; logs: ${quick.logs.join("\n")}`);
    const scriptCopy = join(dir, "smoke.mjs");
    writeFileSync(
      scriptCopy,
      `const FIXTURE = ${JSON.stringify(fixture)};\n${readFileSync(join(here, "quickjs-smoke.script.mjs"), "utf8")}`,
    );
    let nodeReport = null;
    globalThis.__report = (r) => (nodeReport = r);
    const savedEnv = { ...process.env };
    const savedCwd = process.cwd;
    try {
      for (const k of Object.keys(process.env)) delete process.env[k];
      Object.assign(process.env, { HOME: "/home/user", TERM: "xterm-256color", COLORTERM: "truecolor" });
      process.cwd = () => "/work";
      await import(pathToFileURL(scriptCopy).href);
    } finally {
      process.cwd = savedCwd;
      for (const k of Object.keys(process.env)) delete process.env[k];
      Object.assign(process.env, savedEnv);
      delete globalThis.__report;
    }
    const q = JSON.parse(quick.report);
    const n = JSON.parse(nodeReport);
    for (const key of Object.keys(n)) assert.deepEqual(q[key], n[key], `QuickJS vs Node: ${key}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
