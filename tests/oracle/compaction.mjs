// Real pi's compaction functions as an oracle for host/session/src/compaction.rs (its
// `oracle_*` tests). No model is involved.
//
//   node compaction.mjs < request.json
//
// request: {cases: [{branch, settings}], overflow: [{message, contextWindow}],
//           thresholds: [{contextTokens, contextWindow, settings}],
//           compact?: {branch, settings, model, apiKey, customInstructions, thinkingLevel}}
// Prints one JSON line: per case, pi's preparation (fileOps' Sets as arrays, null when pi
// has none), the summarised messages serialised as pi sends them, and pi's token estimate
// of every message on the branch; per overflow item, isContextOverflow; per threshold item,
// shouldCompact; for `compact`, what pi's compact() returned (or its error) after calling
// `model` (a pi-ai Model, e.g. pointing at pichamber's mock server).
import { compact, convertToLlm, estimateTokens, serializeConversation, shouldCompact } from "@mariozechner/pi-coding-agent";
import { isContextOverflow } from "@mariozechner/pi-ai";
// prepareCompaction is not among the package's exports: import its module by path.
import { prepareCompaction } from "./node_modules/@mariozechner/pi-coding-agent/dist/core/compaction/compaction.js";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const request = JSON.parse(input);

const cases = (request.cases ?? []).map(({ branch, settings }) => {
  const prep = prepareCompaction(branch, settings);
  const estimates = branch.filter((e) => e.type === "message").map((e) => estimateTokens(e.message));
  if (!prep) return { preparation: null, estimates };
  const preparation = {
    ...prep,
    fileOps: { read: [...prep.fileOps.read], written: [...prep.fileOps.written], edited: [...prep.fileOps.edited] },
  };
  return {
    preparation,
    serialized: serializeConversation(convertToLlm(prep.messagesToSummarize)),
    serializedPrefix: serializeConversation(convertToLlm(prep.turnPrefixMessages)),
    estimates,
  };
});
const overflow = (request.overflow ?? []).map(({ message, contextWindow }) => isContextOverflow(message, contextWindow));
const thresholds = (request.thresholds ?? []).map(({ contextTokens, contextWindow, settings }) =>
  shouldCompact(contextTokens, contextWindow, settings),
);
let compacted;
if (request.compact) {
  const { branch, settings, model, apiKey, customInstructions, thinkingLevel } = request.compact;
  try {
    const prep = prepareCompaction(branch, settings);
    compacted = { result: await compact(prep, model, apiKey, undefined, customInstructions, undefined, thinkingLevel) };
  } catch (err) {
    compacted = { error: err instanceof Error ? err.message : String(err) };
  }
}
console.log(JSON.stringify({ cases, overflow, thresholds, compacted }));
