// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// node-v8.js: the parts of node:v8 extensions' packages use, shaped as Node's own; what only V8
// can do fails with a code saying so.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as nodeV8 from "node:v8";
import v8, * as named from "pichamber:node/v8";

test("it exports what Node's node:v8 does", () => {
  for (const name of Object.keys(nodeV8)) {
    if (name === "default") continue;
    assert.ok(name in named, `node:v8 exports ${name}`);
    assert.equal(typeof named[name], typeof nodeV8[name], name);
    assert.equal(v8[name], named[name], `default.${name}`);
  }
});

test("heap statistics have Node's fields and types", () => {
  const keys = (o) => Object.keys(o).sort();
  const types = (o) => Object.fromEntries(Object.entries(o).map(([k, v]) => [k, typeof v]));
  assert.deepEqual(keys(v8.getHeapStatistics()), keys(nodeV8.getHeapStatistics()));
  assert.deepEqual(types(v8.getHeapStatistics()), types(nodeV8.getHeapStatistics()));
  assert.deepEqual(keys(v8.getHeapCodeStatistics()), keys(nodeV8.getHeapCodeStatistics()));
  const [space] = v8.getHeapSpaceStatistics();
  assert.deepEqual(keys(space), keys(nodeV8.getHeapSpaceStatistics()[0]));
  assert.ok(nodeV8.getHeapSpaceStatistics().some((s) => s.space_name === space.space_name));
});

test("flags, tags and startup snapshots behave as outside a snapshot build", () => {
  assert.equal(v8.setFlagsFromString("--no-lazy"), undefined);
  assert.throws(() => v8.setFlagsFromString(1), { code: "ERR_INVALID_ARG_TYPE" });
  assert.equal(typeof v8.cachedDataVersionTag(), "number");
  assert.equal(v8.cachedDataVersionTag(), v8.cachedDataVersionTag());
  assert.equal(v8.startupSnapshot.isBuildingSnapshot(), nodeV8.startupSnapshot.isBuildingSnapshot());
  for (const name of ["addSerializeCallback", "addDeserializeCallback", "setDeserializeMainFunction"]) {
    const ours = (() => { try { v8.startupSnapshot[name](() => {}); } catch (e) { return [e.code, e.message]; } })();
    const node = (() => { try { nodeV8.startupSnapshot[name](() => {}); } catch (e) { return [e.code, e.message]; } })();
    assert.deepEqual(ours, node, name);
  }
  assert.equal(v8.isStringOneByteRepresentation("café"), true);
  assert.equal(v8.isStringOneByteRepresentation("€"), false);
  assert.equal(v8.takeCoverage(), undefined);
});

test("what only V8 can do says so", () => {
  for (const call of [() => v8.serialize({}), () => v8.getHeapSnapshot(), () => new v8.Serializer(), () => v8.writeHeapSnapshot()]) {
    assert.throws(call, { code: "ERR_METHOD_NOT_IMPLEMENTED", message: /not available in pichamber/ });
  }
});
