// node:console for pichamber: the global console, and Console writing to given streams.

import { formatWithOptions } from "pichamber:node/util";

export class Console {
  #out;
  #err;
  #counts = new Map();
  #timers = new Map();
  #indent = "";
  constructor(stdout, stderr) {
    const options = stdout && typeof stdout.write !== "function" ? stdout : { stdout, stderr };
    this.#out = options.stdout;
    this.#err = options.stderr ?? options.stdout;
    for (const name of Object.getOwnPropertyNames(Console.prototype)) {
      if (name !== "constructor" && typeof this[name] === "function") this[name] = this[name].bind(this);
    }
  }
  #write(stream, args) {
    const text = formatWithOptions({}, ...args);
    stream?.write(`${this.#indent}${text.replaceAll("\n", `\n${this.#indent}`)}\n`);
  }
  log(...args) {
    this.#write(this.#out, args);
  }
  info(...args) {
    this.#write(this.#out, args);
  }
  debug(...args) {
    this.#write(this.#out, args);
  }
  warn(...args) {
    this.#write(this.#err, args);
  }
  error(...args) {
    this.#write(this.#err, args);
  }
  trace(...args) {
    this.#write(this.#err, ["Trace:", ...args]);
  }
  dir(value) {
    this.#write(this.#out, [value]);
  }
  table(value) {
    this.#write(this.#out, [value]);
  }
  assert(value, ...args) {
    if (!value) this.#write(this.#err, ["Assertion failed", ...args]);
  }
  count(label = "default") {
    const n = (this.#counts.get(label) ?? 0) + 1;
    this.#counts.set(label, n);
    this.#write(this.#out, [`${label}: ${n}`]);
  }
  countReset(label = "default") {
    this.#counts.delete(label);
  }
  group(...args) {
    if (args.length) this.log(...args);
    this.#indent += "  ";
  }
  groupEnd() {
    this.#indent = this.#indent.slice(2);
  }
  time(label = "default") {
    this.#timers.set(label, Date.now());
  }
  timeEnd(label = "default") {
    this.timeLog(label);
    this.#timers.delete(label);
  }
  timeLog(label = "default", ...args) {
    const start = this.#timers.get(label);
    if (start !== undefined) this.#write(this.#out, [`${label}: ${Date.now() - start}ms`, ...args]);
  }
}
Console.prototype.groupCollapsed = Console.prototype.group;
Console.prototype.dirxml = Console.prototype.log;

const global = globalThis.console;
if (global && !global.Console) global.Console = Console;
export default global;
export const log = (...a) => global.log(...a);
export const info = (...a) => global.info(...a);
export const warn = (...a) => global.warn(...a);
export const error = (...a) => global.error(...a);
export const debug = (...a) => global.debug(...a);
