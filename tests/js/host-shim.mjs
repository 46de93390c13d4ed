// Test stand-in for the guest's host bridge: `globalThis.__host(name, args)` implemented
// over node:fs (same argument shapes, results and error texts as guest-shim/src/fs.rs), plus a
// scriptable `globalThis.__pichamber_internal.exec` stub for child_process tests.
import * as fs from "node:fs";
import { randomBytes } from "node:crypto";
import * as nodeZlib from "node:zlib";

function nodeError(e, op, path) {
  const table = {
    ENOENT: "no such file or directory",
    EACCES: "permission denied",
    EEXIST: "file already exists",
    ENOTDIR: "not a directory",
    EISDIR: "illegal operation on a directory",
    ENOTEMPTY: "directory not empty",
    EROFS: "read-only file system",
  };
  const code = table[e.code] ? e.code : "EIO";
  const syscall = op === "readFile" || op === "writeFile" ? "open" : op === "readdir" ? "scandir" : op;
  return new Error(`${code}: ${table[code] ?? "i/o error"}, ${syscall} '${path}' (${e.message})`);
}

function fsCall(op, a) {
  const path = a[0];
  try {
    switch (op) {
      case "readFile": {
        const bytes = fs.readFileSync(path);
        return a[1] === "bytes" ? Array.from(bytes) : bytes.toString("utf8");
      }
      case "writeFile": {
        const data = Array.isArray(a[1]) ? Buffer.from(a[1]) : Buffer.from(String(a[1] ?? ""), "utf8");
        if (a[2]) fs.appendFileSync(path, data);
        else fs.writeFileSync(path, data);
        return null;
      }
      case "stat": {
        const st = a[1] ? fs.statSync(path) : fs.lstatSync(path);
        return {
          size: st.size,
          isFile: st.isFile(),
          isDirectory: st.isDirectory(),
          isSymbolicLink: st.isSymbolicLink(),
          mtimeMs: st.mtimeMs,
          atimeMs: st.atimeMs,
          birthtimeMs: st.birthtimeMs,
          mode: st.isDirectory() ? 0o40755 : (st.mode & 0o222) === 0 ? 0o100444 : 0o100644,
        };
      }
      case "exists":
        try {
          fs.lstatSync(path);
          return true;
        } catch {
          return false;
        }
      case "readdir":
        return fs
          .readdirSync(path, { withFileTypes: true })
          .map((d) => ({
            name: d.name,
            isFile: d.isFile(),
            isDirectory: d.isDirectory(),
            isSymbolicLink: d.isSymbolicLink(),
          }))
          .sort((x, y) => (x.name < y.name ? -1 : x.name > y.name ? 1 : 0));
      case "mkdir":
        fs.mkdirSync(path, { recursive: !!a[1] });
        return null;
      case "rm": {
        const st = fs.lstatSync(path, { throwIfNoEntry: false });
        if (!st) {
          if (a[2]) return null;
          fs.lstatSync(path);
        }
        if (st.isDirectory()) {
          if (a[1]) fs.rmSync(path, { recursive: true });
          else fs.rmdirSync(path);
        } else fs.unlinkSync(path);
        return null;
      }
      case "unlink":
        fs.unlinkSync(path);
        return null;
      case "rmdir":
        fs.rmdirSync(path);
        return null;
      case "rename":
        fs.renameSync(path, a[1]);
        return null;
      case "copyFile":
        fs.copyFileSync(path, a[1]);
        return null;
      case "realpath":
        return fs.realpathSync(path);
      default:
        throw Object.assign(new Error(`ENOSYS: fs.${op} is not supported`), { passthrough: true });
    }
  } catch (e) {
    if (e.passthrough) throw e;
    throw nodeError(e, op, path);
  }
}

export const hostLog = [];

globalThis.__host = (name, values) => {
  // The guest's bridge reads the values as JSON.stringify writes them.
  const args = JSON.parse(JSON.stringify(values));
  hostLog.push([name, args]);
  if (name.startsWith("fs.")) {
    const result = fsCall(name.slice(3), args);
    return JSON.stringify(result ?? null);
  }
  if (name === "randomBytes") {
    const n = Math.min(Number(args[0]) || 0, 65536);
    return JSON.stringify(Array.from(randomBytes(n)));
  }
  if (name === "zlib") {
    // guest-shim/src/zlib.rs's contract, over Node's zlib: base64 in and out, errors "CODE: message".
    const [op, b64, options] = args;
    try {
      const out = nodeZlib[`${op}Sync`](Buffer.from(b64, "base64"), { level: options?.level, maxOutputLength: options?.maxOutputLength });
      return JSON.stringify(out.toString("base64"));
    } catch (e) {
      throw new Error(`${e.code}: ${e.message}`);
    }
  }
  throw new Error(`unknown host call '${name}'`);
};

// What the host says of its built-in tools (`get-builtin-tools`); a test may put
// other specs in `__pichamber_internal.specs` before the first tool is made.
export const BUILTIN_SPECS_STUB = ["read", "bash", "edit", "write", "grep", "find", "ls"].map((name) => ({
  name,
  description: `the ${name} tool`,
  promptSnippet: `${name} things`,
  promptGuidelines: [],
  parameters: { type: "object", properties: { path: { type: "string" } } },
}));

// exec stub: tests set `globalThis.__pichamber_internal.handler = (cmd, args, opts) => result`.
export const execCalls = [];
globalThis.__pichamber_internal = {
  // These tests compare with pi 0.73.1 (the oracle in tests/oracle).
  piVersion: "0.73.1",
  handler: null,
  specs: null,
  builtinTools: () => globalThis.__pichamber_internal.specs ?? BUILTIN_SPECS_STUB,
  exec(command, args, options) {
    execCalls.push({ command, args, options });
    const h = globalThis.__pichamber_internal.handler;
    if (!h) return Promise.reject(new Error("no exec handler installed"));
    return Promise.resolve().then(() => h(command, args, options));
  },
  execBlocking(command, args, options) {
    execCalls.push({ command, args, options, blocking: true });
    const h = globalThis.__pichamber_internal.handler;
    if (!h) throw new Error("no exec handler installed");
    return h(command, args, options);
  },
  // The host's built-in tools and fetch: tests set `toolHandler(tool, params, updateCallId,
  // { cwd })` (the tool's result, or a throw) and `fetchHandler(request)` (the answer, or a
  // throw), as the prelude's operations resolve them.
  toolHandler: null,
  fetchHandler: null,
  runBuiltinTool(tool, params, updateCallId, options = {}) {
    const h = globalThis.__pichamber_internal.toolHandler;
    if (!h) return Promise.reject(new Error("no built-in tool handler installed"));
    return Promise.resolve().then(() => h(tool, params, updateCallId, { cwd: options.cwd }));
  },
  // dns.lookup's host operation: tests set `dnsHandler(hostname)` (the addresses, or a throw
  // whose message is the host's error).
  dnsHandler: null,
  dnsLookup(hostname) {
    const h = globalThis.__pichamber_internal.dnsHandler;
    if (!h) return Promise.resolve({ error: `dns lookup of ${hostname} denied: the network capability is not granted for ${hostname} (grant it with --allow-net=${hostname})` });
    return Promise.resolve()
      .then(() => h(hostname))
      .then((ok) => ({ ok }), (e) => ({ error: e.message }));
  },
  fetchOperation(request, signal) {
    if (signal?.aborted) return Promise.resolve({ cancelled: true });
    const h = globalThis.__pichamber_internal.fetchHandler;
    if (!h) return Promise.resolve({ error: "no fetch handler installed" });
    return Promise.resolve()
      .then(() => h(request))
      .then((ok) => ({ ok }), (e) => ({ error: e.message }));
  },
};
