// An ACP client for tests/pi_acp.rs: drives pi-acp (which spawns `pi --mode rpc` from PATH) the
// way an editor does and prints everything it got back as one JSON document.
//
// Usage: node drive.mjs WORKSPACE
//   PATH must lead to the `pi` under test first; HOME and PI_CODING_AGENT_DIR name the agent
//   folder (models.json / settings.json there point at the mock model).
// Steps: initialize, session/new, a prompt the model answers with a tool call, /export,
// session/list, then a second pi-acp process: initialize, session/load of the first session.
// Output: { "steps": [ { "label", "messages": [...] } ] }: the responses and notifications of
// each step, in order (requests the agent sends the client are answered with an error and
// recorded too).

import { spawn } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const adapter = join(here, "node_modules/pi-acp/dist/index.js");
const workspace = process.argv[2];
if (!workspace) {
	console.error("usage: node drive.mjs WORKSPACE");
	process.exit(2);
}

function start() {
	const child = spawn(process.execPath, [adapter], { cwd: workspace, stdio: ["pipe", "pipe", "inherit"] });
	const waiting = new Map();
	let seen = [];
	let buffer = "";
	let nextId = 1;
	child.stdout.on("data", (chunk) => {
		buffer += chunk.toString("utf8");
		let at;
		while ((at = buffer.indexOf("\n")) >= 0) {
			const line = buffer.slice(0, at).replace(/\r$/, "");
			buffer = buffer.slice(at + 1);
			if (!line.trim()) continue;
			const message = JSON.parse(line);
			seen.push(message);
			if (message.id !== undefined && message.method === undefined) {
				waiting.get(message.id)?.(message);
				waiting.delete(message.id);
			} else if (message.id !== undefined) {
				// A request of the agent's: this client offers no capability.
				child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "not offered" } })}\n`);
			}
		}
	});
	const exited = new Promise((resolve) => child.on("exit", resolve));
	return {
		request(method, params, timeoutMs = 60000) {
			const id = nextId++;
			child.stdin.write(`${JSON.stringify({ jsonrpc: "2.0", id, method, params })}\n`);
			return new Promise((resolve, reject) => {
				const timer = setTimeout(() => reject(new Error(`${method}: no answer in ${timeoutMs} ms`)), timeoutMs);
				waiting.set(id, (m) => {
					clearTimeout(timer);
					resolve(m);
				});
			});
		},
		take() {
			const out = seen;
			seen = [];
			return out;
		},
		async stop() {
			child.stdin.end();
			const timer = setTimeout(() => child.kill("SIGTERM"), 5000);
			await exited;
			clearTimeout(timer);
		},
	};
}

const settle = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const steps = [];
async function step(agent, label, method, params) {
	const answer = await agent.request(method, params);
	// Notifications sent right after the answer (pi-acp posts some with setTimeout) belong to
	// the step too.
	await settle(1500);
	steps.push({ label, messages: agent.take() });
	return answer;
}

const first = start();
await step(first, "initialize", "initialize", { protocolVersion: 1, clientCapabilities: {} });
const created = await step(first, "session/new", "session/new", { cwd: workspace, mcpServers: [] });
const sessionId = created.result?.sessionId;
if (sessionId) {
	await step(first, "prompt (tool call)", "session/prompt", {
		sessionId,
		prompt: [{ type: "text", text: "Read notes.txt" }],
	});
	await step(first, "/export", "session/prompt", { sessionId, prompt: [{ type: "text", text: "/export" }] });
	await step(first, "session/list", "session/list", { cwd: workspace });
}
await first.stop();

if (sessionId) {
	const second = start();
	await step(second, "initialize again", "initialize", { protocolVersion: 1, clientCapabilities: {} });
	await step(second, "session/load", "session/load", { sessionId, cwd: workspace, mcpServers: [] });
	await second.stop();
}
process.stdout.write(JSON.stringify({ steps }));
