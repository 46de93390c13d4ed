// @mariozechner/pi-agent-core for pichamber. pi-agent-core 0.73.1 exports only the agent loop
// (Agent, agentLoop, agentLoopContinue, runAgentLoop, runAgentLoopContinue) and streamProxy; all
// of them drive LLM calls (through pi-ai providers or fetch) and TypeBox argument validation,
// which live in the pi host. Inside an extension they exist so imports link, and throw a clear
// Error when used. Its types (AgentMessage, AgentTool...) are type-only.

const DETAIL = "the agent loop runs in the pi host; use the ExtensionAPI (pi.sendUserMessage, ctx) instead";

function unavailable(name) {
  return new Error(`${name} is not available inside a pichamber extension (${DETAIL})`);
}

export class Agent {
  constructor(_options) {
    throw unavailable("Agent");
  }
}

export function agentLoop(_prompts, _context, _config, _signal, _streamFn) {
  throw unavailable("agentLoop()");
}

export function agentLoopContinue(_context, _config, _signal, _streamFn) {
  throw unavailable("agentLoopContinue()");
}

export async function runAgentLoop(_prompts, _context, _config, _emit, _signal, _streamFn) {
  throw unavailable("runAgentLoop()");
}

export async function runAgentLoopContinue(_context, _config, _emit, _signal, _streamFn) {
  throw unavailable("runAgentLoopContinue()");
}

export function streamProxy(_model, _context, _options) {
  throw new Error(
    "streamProxy() is not available inside a pichamber extension (it needs fetch; network access belongs to the pi host)",
  );
}
