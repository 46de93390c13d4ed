// node:process for pichamber: the prelude defines globalThis.process before any module runs;
// this module re-exports it (live object) with Node's named exports.

const proc = globalThis.process ?? { env: {}, argv: [], platform: "linux", cwd: () => "/" };

function bound(name) {
  return (...args) => {
    const fn = proc[name];
    if (typeof fn !== "function") throw new Error(`process.${name} is not available inside a pichamber extension`);
    return fn.apply(proc, args);
  };
}

export const env = proc.env;
export const argv = proc.argv ?? [];
export const argv0 = proc.argv0 ?? "node";
export const execArgv = proc.execArgv ?? [];
export const execPath = proc.execPath ?? "/usr/bin/node";
export const platform = proc.platform ?? "linux";
export const arch = proc.arch ?? "x64";
export const version = proc.version ?? "v20.0.0";
export const versions = proc.versions ?? {};
export const pid = proc.pid ?? 1;
export const ppid = proc.ppid ?? 0;
export const title = proc.title ?? "pichamber";
export const release = proc.release ?? { name: "node" };
export const config = proc.config ?? {};
export const features = proc.features ?? {};
export const stdout = proc.stdout;
export const stderr = proc.stderr;
export const stdin = proc.stdin;
export const exitCode = proc.exitCode;
export const cwd = bound("cwd");
export const chdir = bound("chdir");
export const exit = bound("exit");
export const abort = bound("abort");
export const nextTick = (fn, ...args) => {
  if (typeof proc.nextTick === "function") return proc.nextTick(fn, ...args);
  queueMicrotask(() => fn(...args));
};
export const hrtime = proc.hrtime ?? Object.assign(() => [0, 0], { bigint: () => 0n });
export const memoryUsage =
  proc.memoryUsage ??
  Object.assign(() => ({ rss: 0, heapTotal: 0, heapUsed: 0, external: 0, arrayBuffers: 0 }), { rss: () => 0 });
export const uptime = proc.uptime ?? (() => 0);
export const cpuUsage = proc.cpuUsage ?? (() => ({ user: 0, system: 0 }));
export const resourceUsage = proc.resourceUsage ?? (() => ({}));
export const umask = proc.umask ?? (() => 0o22);
export const getuid = proc.getuid ?? (() => 1000);
export const getgid = proc.getgid ?? (() => 1000);
export const geteuid = proc.geteuid ?? (() => 1000);
export const getegid = proc.getegid ?? (() => 1000);
export const kill = bound("kill");
export const emitWarning = (warning, ...rest) => {
  if (typeof proc.emitWarning === "function") return proc.emitWarning(warning, ...rest);
  const type = typeof rest[0] === "string" ? rest[0] : (rest[0]?.type ?? "Warning");
  console.warn(`(pichamber) ${type}: ${warning instanceof Error ? warning.message : warning}`);
};
const noop = () => proc;
export const on = proc.on?.bind(proc) ?? noop;
export const once = proc.once?.bind(proc) ?? noop;
export const off = proc.off?.bind(proc) ?? noop;
export const addListener = proc.addListener?.bind(proc) ?? on;
export const removeListener = proc.removeListener?.bind(proc) ?? off;
export const removeAllListeners = proc.removeAllListeners?.bind(proc) ?? noop;
export const emit = proc.emit?.bind(proc) ?? (() => false);
export const listeners = proc.listeners?.bind(proc) ?? (() => []);
export const listenerCount = proc.listenerCount?.bind(proc) ?? (() => 0);

export default proc;
