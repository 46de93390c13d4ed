// node:perf_hooks for pichamber: the global `performance` (now, marks and measures) and
// monitorEventLoopDelay's shape; observers are never called (the guest records no entries
// of its own).

const entries = [];
// Milliseconds since the instance loaded (Node's: since the process started), from
// process.hrtime where there is one. Taken at load, not when this module is evaluated: that
// may be ahead of any instance, in the extension's snapshot.
const hrtime = globalThis.process?.hrtime?.bigint;
let originNs = 0n;
let origin;
const start = () => {
  originNs = hrtime ? hrtime() : 0n;
  origin = Date.now();
};
if (globalThis.__pichamber_internal?.whenLoaded) globalThis.__pichamber_internal.whenLoaded(start);
else start();
const now = () => (hrtime ? Number(hrtime() - originNs) / 1e6 : Date.now() - origin);

function entry(name, entryType, startTime, duration, detail) {
  return { name, entryType, startTime, duration, detail: detail ?? null, toJSON() { return { name, entryType, startTime, duration, detail: detail ?? null }; } };
}

export const performance = {
  now,
  get timeOrigin() {
    if (origin === undefined) globalThis.__pichamber_internal?.touchedAhead?.("performance.timeOrigin");
    return origin ?? 0;
  },
  mark(name, options) {
    const mark = entry(name, "mark", options?.startTime ?? now(), 0, options?.detail);
    entries.push(mark);
    return mark;
  },
  measure(name, start, end) {
    const time = (x) => (typeof x === "string" ? entries.findLast((e) => e.name === x)?.startTime ?? 0 : x);
    const options = typeof start === "object" && start !== null ? start : { start, end };
    const from = options.start === undefined ? 0 : time(options.start);
    const to = options.end === undefined ? now() : time(options.end);
    const measure = entry(name, "measure", from, to - from, options.detail);
    entries.push(measure);
    return measure;
  },
  getEntries: () => [...entries],
  getEntriesByName: (name, type) => entries.filter((e) => e.name === name && (!type || e.entryType === type)),
  getEntriesByType: (type) => entries.filter((e) => e.entryType === type),
  clearMarks(name) {
    for (let i = entries.length - 1; i >= 0; i--) if (entries[i].entryType === "mark" && (!name || entries[i].name === name)) entries.splice(i, 1);
  },
  clearMeasures(name) {
    for (let i = entries.length - 1; i >= 0; i--) if (entries[i].entryType === "measure" && (!name || entries[i].name === name)) entries.splice(i, 1);
  },
  toJSON() {
    return { timeOrigin: this.timeOrigin };
  },
};

export class PerformanceObserver {
  static supportedEntryTypes = ["mark", "measure"];
  constructor(callback) {
    this.callback = callback;
  }
  observe() {}
  disconnect() {}
  takeRecords() {
    return [];
  }
}

export function monitorEventLoopDelay() {
  return { enable() {}, disable() {}, reset() {}, percentile: () => 0, min: 0, max: 0, mean: 0, stddev: 0, count: 0, percentiles: new Map(), exceeds: 0 };
}

export function createHistogram() {
  return monitorEventLoopDelay();
}

export const constants = {};

export default { performance, PerformanceObserver, monitorEventLoopDelay, createHistogram, constants };
