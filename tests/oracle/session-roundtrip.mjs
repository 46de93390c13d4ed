// Real pi's SessionManager as an oracle for pichamber's session store (tests/session_store.rs).
// No model is involved: sessions are built with the SessionManager API directly.
//
//   node session-roundtrip.mjs write <dir> <cwd>   pi writes a session with every entry kind
//   node session-roundtrip.mjs read <file>         pi opens a session file
//   node session-roundtrip.mjs fork <file> <id>    pi opens a file and forks it at entry <id>
//
// Each prints one JSON line: what pi's SessionManager reports about the session it holds.
import { SessionManager } from "@mariozechner/pi-coding-agent";

function snapshot(sm) {
  const entries = sm.getEntries();
  const labels = {};
  for (const e of entries) labels[e.id] = sm.getLabel(e.id) ?? null;
  // The context with the leaf on each entry in turn: every path through the tree.
  const leaf = sm.getLeafId();
  const contextAt = {};
  for (const e of entries) {
    sm.branch(e.id);
    contextAt[e.id] = sm.buildSessionContext();
  }
  if (leaf === null) sm.resetLeaf();
  else sm.branch(leaf);
  return {
    file: sm.getSessionFile() ?? null,
    sessionId: sm.getSessionId(),
    header: sm.getHeader(),
    entries,
    leafId: sm.getLeafId(),
    leafEntry: sm.getLeafEntry() ?? null,
    branch: sm.getBranch(),
    labels,
    name: sm.getSessionName() ?? null,
    tree: sm.getTree(),
    context: sm.buildSessionContext(),
    contextAt,
  };
}

const usage = {
  input: 10,
  output: 5,
  cacheRead: 0,
  cacheWrite: 0,
  totalTokens: 15,
  cost: { input: 0.003, output: 0.0075, cacheRead: 0, cacheWrite: 0, total: 0.0105 },
};
const assistant = (text, model, timestamp) => ({
  role: "assistant",
  content: [
    { type: "thinking", thinking: "hmm" },
    { type: "text", text },
  ],
  api: "anthropic-messages",
  provider: "anthropic",
  model,
  usage,
  stopReason: "stop",
  timestamp,
});

function write(dir, cwd) {
  const sm = SessionManager.create(cwd, dir);
  sm.appendThinkingLevelChange("medium");
  sm.appendModelChange("anthropic", "claude-a");
  const u1 = sm.appendMessage({ role: "user", content: "héllo ✓\nline two \u0001", timestamp: 1000 });
  const a1 = sm.appendMessage(assistant("hi there", "claude-a", 1001));
  sm.appendMessage({
    role: "assistant",
    content: [{ type: "toolCall", id: "call_1", name: "bash", arguments: { command: "ls" } }],
    api: "anthropic-messages",
    provider: "anthropic",
    model: "claude-a",
    usage,
    stopReason: "toolUse",
    timestamp: 1002,
  });
  sm.appendMessage({
    role: "toolResult",
    toolCallId: "call_1",
    toolName: "bash",
    content: [{ type: "text", text: "a\nb" }],
    details: { exitCode: 0 },
    isError: false,
    timestamp: 1003,
  });
  sm.appendCustomEntry("my-ext", { count: 42 });
  sm.appendCustomEntry("no-data");
  sm.appendCustomMessageEntry("my-ext", "injected", true, { why: "test" });
  sm.appendCustomMessageEntry("my-ext", [{ type: "text", text: "hidden" }], false);
  sm.appendLabelChange(u1, "start");
  sm.appendLabelChange(a1, "temp");
  sm.appendLabelChange(a1, undefined);
  sm.appendSessionInfo("  First name  ");
  const u2 = sm.appendMessage({ role: "user", content: [{ type: "text", text: "go on" }], timestamp: 1004 });
  sm.appendMessage(assistant("going", "claude-b", 1005));
  // Leave that branch with a summary, continue from a1.
  sm.branchWithSummary(a1, "Tried going on; abandoned.", { readFiles: ["x"], modifiedFiles: [] });
  sm.appendThinkingLevelChange("high");
  const u3 = sm.appendMessage({ role: "user", content: "other way", timestamp: 1006 });
  sm.appendMessage(assistant("ok", "claude-c", 1007));
  sm.appendCompaction("Summary of everything so far.", u3, 12345, { readFiles: [], modifiedFiles: ["y"] });
  sm.appendMessage({ role: "user", content: "after compaction", timestamp: 1008 });
  sm.appendMessage(assistant("done", "claude-c", 1009));
  sm.appendLabelChange(u3, "alt");
  sm.appendSessionInfo("Second name");
  // A plain branch back to u2's branch tip is not the leaf at the end: move there and back.
  sm.branch(u2);
  sm.branch(sm.getEntries()[sm.getEntries().length - 1].id);
  return sm;
}

const [mode, ...args] = process.argv.slice(2);
let sm;
switch (mode) {
  case "write":
    sm = write(args[0], args[1]);
    break;
  case "read":
    sm = SessionManager.open(args[0]);
    break;
  case "fork":
    sm = SessionManager.open(args[0]);
    sm.createBranchedSession(args[1]);
    break;
  default:
    console.error(`usage: session-roundtrip.mjs write <dir> <cwd> | read <file> | fork <file> <id>`);
    process.exit(2);
}
process.stdout.write(`${JSON.stringify(snapshot(sm))}\n`);
