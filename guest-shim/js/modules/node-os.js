// node:os for pichamber: a fixed, plausible Linux host. Nothing here reaches the real machine.

const env = () => globalThis.process?.env ?? {};

export const EOL = "\n";
export const devNull = "/dev/null";

export function homedir() {
  return env().HOME || "/";
}

export function tmpdir() {
  let path = env().TMPDIR || env().TMP || env().TEMP || "/tmp";
  if (path.length > 1 && path.endsWith("/")) path = path.slice(0, -1);
  return path;
}

export function hostname() {
  return "pichamber";
}

export function platform() {
  return globalThis.process?.platform ?? "linux";
}

export function type() {
  return "Linux";
}

export function arch() {
  return globalThis.process?.arch ?? "x64";
}

export function machine() {
  const a = arch();
  return a === "x64" ? "x86_64" : a === "arm64" ? "aarch64" : a;
}

export function release() {
  return "6.0.0-pichamber";
}

export function version() {
  return "#1 SMP pichamber";
}

export function endianness() {
  return "LE";
}

export function uptime() {
  return 0;
}

export function loadavg() {
  return [0, 0, 0];
}

export function totalmem() {
  return 4 * 1024 * 1024 * 1024;
}

export function freemem() {
  return 2 * 1024 * 1024 * 1024;
}

export function availableParallelism() {
  return 1;
}

export function cpus() {
  return [];
}

export function networkInterfaces() {
  return {};
}

export function userInfo(options) {
  const username = env().USER || env().LOGNAME || "user";
  const info = { uid: 1000, gid: 1000, username, homedir: homedir(), shell: env().SHELL || "/bin/sh" };
  if (options?.encoding === "buffer") {
    const enc = new TextEncoder();
    return {
      ...info,
      username: enc.encode(info.username),
      homedir: enc.encode(info.homedir),
      shell: enc.encode(info.shell),
    };
  }
  return info;
}

export function getPriority() {
  return 0;
}

export function setPriority() {}

export const constants = Object.freeze({
  UV_UDP_REUSEADDR: 4,
  dlopen: Object.freeze({ RTLD_LAZY: 1, RTLD_NOW: 2, RTLD_GLOBAL: 256, RTLD_LOCAL: 0 }),
  errno: Object.freeze({ ENOENT: 2, EACCES: 13, EEXIST: 17, ENOTDIR: 20, EISDIR: 21, EINVAL: 22, ENOTEMPTY: 39 }),
  signals: Object.freeze({
    SIGHUP: 1,
    SIGINT: 2,
    SIGQUIT: 3,
    SIGKILL: 9,
    SIGUSR1: 10,
    SIGUSR2: 12,
    SIGPIPE: 13,
    SIGALRM: 14,
    SIGTERM: 15,
  }),
  priority: Object.freeze({
    PRIORITY_LOW: 19,
    PRIORITY_BELOW_NORMAL: 10,
    PRIORITY_NORMAL: 0,
    PRIORITY_ABOVE_NORMAL: -7,
    PRIORITY_HIGH: -14,
    PRIORITY_HIGHEST: -20,
  }),
});

export default {
  EOL,
  devNull,
  homedir,
  tmpdir,
  hostname,
  platform,
  type,
  arch,
  machine,
  release,
  version,
  endianness,
  uptime,
  loadavg,
  totalmem,
  freemem,
  availableParallelism,
  cpus,
  networkInterfaces,
  userInfo,
  getPriority,
  setPriority,
  constants,
};
