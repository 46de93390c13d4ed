// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// pi-agent-core.js: every runtime export of @mariozechner/pi-agent-core exists and fails clearly.
import { test } from "node:test";
import assert from "node:assert/strict";
import * as mine from "pichamber:pi-agent-core";
import { importOracle, oracleSkip } from "./oracle.mjs";

const real = await importOracle("@mariozechner/pi-agent-core/dist/index.js");

test("exports match pi-agent-core and throw a clear error", async (t) => {
  assert.throws(() => new mine.Agent({}), /Agent is not available inside a pichamber extension/);
  assert.throws(() => mine.agentLoop([], {}, {}), /agentLoop\(\) is not available/);
  assert.throws(() => mine.agentLoopContinue({}, {}), /not available/);
  await assert.rejects(
    mine.runAgentLoop([], {}, {}, () => {}),
    /not available/,
  );
  await assert.rejects(
    mine.runAgentLoopContinue({}, {}, () => {}),
    /not available/,
  );
  assert.throws(() => mine.streamProxy({}, {}, {}), /needs fetch/);
  if (!real) return t.skip(oracleSkip("@mariozechner/pi-agent-core"));
  assert.deepEqual(Object.keys(mine).sort(), Object.keys(real).sort());
  for (const k of Object.keys(real)) assert.equal(typeof mine[k], typeof real[k], k);
});
