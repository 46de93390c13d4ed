// Real pi's branch summarisation as an oracle for host/session/src/branch_summary.rs (its
// `oracle_*` tests).
//
//   node branch-summary.mjs < request.json
//
// request: {file, cases: [{oldLeafId, targetId, budgets}],
//           summaries: [{oldLeafId, targetId, model, apiKey, customInstructions,
//                        replaceInstructions, reserveTokens}]}
// pi's SessionManager opens `file` (a session file pichamber wrote). Prints one JSON line: per
// case, what collectEntriesForBranchSummary collected and what prepareBranchEntries made of
// it for each budget (fileOps' Sets as arrays); per summary, what generateBranchSummary
// returned (or threw) after calling `model` (a pi-ai Model, e.g. pointing at pichamber's mock
// server), with the file lists defaulted as navigateTree defaults them.
import {
  collectEntriesForBranchSummary,
  generateBranchSummary,
  prepareBranchEntries,
  SessionManager,
} from "@mariozechner/pi-coding-agent";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const request = JSON.parse(input);
const session = SessionManager.open(request.file);

const cases = (request.cases ?? []).map(({ oldLeafId, targetId, budgets }) => {
  const { entries, commonAncestorId } = collectEntriesForBranchSummary(session, oldLeafId, targetId);
  const prepared = budgets.map((budget) => {
    const { messages, fileOps, totalTokens } = prepareBranchEntries(entries, budget);
    return {
      messages,
      fileOps: { read: [...fileOps.read], written: [...fileOps.written], edited: [...fileOps.edited] },
      totalTokens,
    };
  });
  return { entries, commonAncestorId, prepared };
});

const summaries = [];
for (const s of request.summaries ?? []) {
  const { entries } = collectEntriesForBranchSummary(session, s.oldLeafId, s.targetId);
  try {
    const result = await generateBranchSummary(entries, {
      model: s.model,
      apiKey: s.apiKey,
      customInstructions: s.customInstructions ?? undefined,
      replaceInstructions: s.replaceInstructions ?? undefined,
      reserveTokens: s.reserveTokens ?? undefined,
    });
    summaries.push({
      ...result,
      readFiles: result.readFiles ?? [],
      modifiedFiles: result.modifiedFiles ?? [],
    });
  } catch (err) {
    summaries.push({ error: err instanceof Error ? err.message : String(err) });
  }
}
console.log(JSON.stringify({ cases, summaries }));
