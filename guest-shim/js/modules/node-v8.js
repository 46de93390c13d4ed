// node:v8 for pichamber, as far as extensions and their packages use it (measured on the
// third-party packages' trees: heap statistics, setFlagsFromString, cachedDataVersionTag,
// startupSnapshot's checks). The heap is QuickJS's, so the figures are the guest engine's own
// (what it has allocated, under the extension's memory limit); V8-only facilities (heap
// snapshots, profiles, its serialisation format) throw ERR_METHOD_NOT_IMPLEMENTED.

const usage = () => globalThis.__pichamber_internal?.memoryUsage?.() ?? { used: 0, limit: 0, linear: 0 };

export function getHeapStatistics() {
  const { used, limit, linear } = usage();
  return {
    total_heap_size: linear,
    total_heap_size_executable: 0,
    total_physical_size: linear,
    total_available_size: Math.max(limit - used, 0),
    used_heap_size: used,
    heap_size_limit: limit,
    malloced_memory: used,
    peak_malloced_memory: used,
    does_zap_garbage: 0,
    number_of_native_contexts: 1,
    number_of_detached_contexts: 0,
    total_global_handles_size: 0,
    used_global_handles_size: 0,
    external_memory: 0,
  };
}

/** One space, the engine's heap: QuickJS does not divide it as V8 does. */
export function getHeapSpaceStatistics() {
  const { used, limit, linear } = usage();
  return [
    {
      space_name: "old_space",
      space_size: linear,
      space_used_size: used,
      space_available_size: Math.max(limit - used, 0),
      physical_space_size: linear,
    },
  ];
}

export function getHeapCodeStatistics() {
  return { code_and_metadata_size: 0, bytecode_and_metadata_size: 0, external_script_source_size: 0, cpu_profiler_metadata_size: 0 };
}

export function setFlagsFromString(flags) {
  if (typeof flags !== "string") {
    const err = new TypeError(`The "flags" argument must be of type string. Received ${flags === null ? "null" : typeof flags}`);
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  // There is no V8 to give flags to.
}

/** A fixed tag: pichamber's engine makes no V8 code cache for it to version. */
export function cachedDataVersionTag() {
  return 0x70696368; // "pich"
}

export function isStringOneByteRepresentation(content) {
  if (typeof content !== "string") {
    const err = new TypeError(`The "content" argument must be of type string. Received ${typeof content}`);
    err.code = "ERR_INVALID_ARG_TYPE";
    throw err;
  }
  for (let i = 0; i < content.length; i++) if (content.charCodeAt(i) > 0xff) return false;
  return true;
}

function notBuilding() {
  const err = new Error("Operation cannot be invoked when not building startup snapshot");
  err.code = "ERR_NOT_BUILDING_SNAPSHOT";
  throw err;
}

export const startupSnapshot = {
  addDeserializeCallback: notBuilding,
  addSerializeCallback: notBuilding,
  setDeserializeMainFunction: notBuilding,
  // Node answers with a number (its flag's value), not the boolean its documentation says.
  isBuildingSnapshot: () => 0,
};

// Coverage is collected only under NODE_V8_COVERAGE, which no extension runs with.
export function takeCoverage() {}
export function stopCoverage() {}

const unavailable = (name) =>
  function () {
    const err = new Error(`v8.${name} is not available in pichamber: its JavaScript engine is not V8`);
    err.code = "ERR_METHOD_NOT_IMPLEMENTED";
    throw err;
  };

export const getHeapSnapshot = unavailable("getHeapSnapshot");
export const writeHeapSnapshot = unavailable("writeHeapSnapshot");
export const setHeapSnapshotNearHeapLimit = unavailable("setHeapSnapshotNearHeapLimit");
export const queryObjects = unavailable("queryObjects");
export const serialize = unavailable("serialize");
export const deserialize = unavailable("deserialize");

class Unavailable {
  constructor() {
    unavailable(`${new.target.name}`)();
  }
}
export class Serializer extends Unavailable {}
export class Deserializer extends Unavailable {}
export class DefaultSerializer extends Serializer {}
export class DefaultDeserializer extends Deserializer {}
export class GCProfiler extends Unavailable {}

export const promiseHooks = {
  onInit: unavailable("promiseHooks.onInit"),
  onSettled: unavailable("promiseHooks.onSettled"),
  onBefore: unavailable("promiseHooks.onBefore"),
  onAfter: unavailable("promiseHooks.onAfter"),
  createHook: unavailable("promiseHooks.createHook"),
};

export default {
  getHeapStatistics,
  getHeapSpaceStatistics,
  getHeapCodeStatistics,
  setFlagsFromString,
  cachedDataVersionTag,
  isStringOneByteRepresentation,
  startupSnapshot,
  takeCoverage,
  stopCoverage,
  getHeapSnapshot,
  writeHeapSnapshot,
  setHeapSnapshotNearHeapLimit,
  queryObjects,
  serialize,
  deserialize,
  Serializer,
  Deserializer,
  DefaultSerializer,
  DefaultDeserializer,
  GCProfiler,
  promiseHooks,
};
