// Drives an agent in RPC mode with pi 0.73.1's own RpcClient (modes/rpc/rpc-client.js) and
// prints what each call returned, for tests/rpc.rs: the same script drives real pi and
// pichamber (through pichamber-as-pi.mjs), and the test asserts the same of both.
//
// Usage: node rpc-client-drive.mjs
//   RPC_DRIVE_CLI   the JavaScript file RpcClient runs with node (pi's dist/cli.js, or
//                   pichamber-as-pi.mjs with PICHAMBER_BIN set)
//   RPC_DRIVE_ARGS  JSON array of further arguments (model, extensions, ...)
//   RPC_DRIVE_CWD   the agent's working directory
// The model must answer, in order: "Hi there." (one turn); a slow turn (streamed in several
// delayed chunks) during which the script steers and queues a follow-up; one turn for the
// steer and one for the follow-up; then a slow turn the script aborts.
// Output (stdout): one JSON document with a field per call, in call order.

import { RpcClient } from "@mariozechner/pi-coding-agent";

const cliPath = process.env.RPC_DRIVE_CLI;
const args = JSON.parse(process.env.RPC_DRIVE_ARGS ?? "[]");
const client = new RpcClient({ cliPath, args, cwd: process.env.RPC_DRIVE_CWD });

/** Resolves with the first event that matches. */
function nextEvent(matches) {
	return new Promise((resolve) => {
		const stop = client.onEvent((event) => {
			if (matches(event)) {
				stop();
				resolve(event);
			}
		});
	});
}

const isTextDelta = (e) => e.type === "message_update" && e.assistantMessageEvent?.type === "text_delta";
const userTexts = (messages) =>
	messages
		.filter((m) => m.role === "user")
		.map((m) => (typeof m.content === "string" ? m.content : m.content.map((b) => b.text ?? "").join("")));

const out = {};
const uiRequests = [];
client.onEvent((e) => {
	if (e.type === "extension_ui_request") uiRequests.push(e);
});
try {
	await client.start();
	out.stateAtStart = await client.getState();

	const events = await client.promptAndWait("Say hi");
	out.promptEventTypes = events.map((e) => e.type);
	out.lastText = await client.getLastAssistantText();
	out.messages = await client.getMessages();

	// Steer and queue a follow-up while a slow turn streams.
	let idle = client.waitForIdle();
	let streaming = nextEvent(isTextDelta);
	await client.prompt("Take your time");
	await streaming;
	await client.steer("Steer now");
	await client.followUp("Then this");
	await idle;
	const afterSteer = await client.getMessages();
	out.userTextsAfterSteer = userTexts(afterSteer);
	out.assistantTextsAfterSteer = afterSteer
		.filter((m) => m.role === "assistant")
		.map((m) => m.content.filter((b) => b.type === "text").map((b) => b.text).join(""));

	await client.setThinkingLevel("high");
	out.thinkingLevel = (await client.getState()).thinkingLevel;
	out.stats = await client.getSessionStats();
	out.commands = await client.getCommands();
	out.bash = await client.bash("echo driven");

	// Abort a slow turn once it streams.
	idle = client.waitForIdle();
	streaming = nextEvent(isTextDelta);
	await client.prompt("Slow again");
	await streaming;
	await client.abort();
	await idle;
	const afterAbort = await client.getMessages();
	const last = afterAbort[afterAbort.length - 1];
	out.abortedMessage = { role: last.role, stopReason: last.stopReason };
	out.stateAfterAbort = await client.getState();

	const before = out.stateAfterAbort.sessionId;
	out.newSession = await client.newSession();
	const after = await client.getState();
	out.newSessionChangedId = after.sessionId !== before;
	out.messageCountAfterNew = after.messageCount;
	out.lastTextAfterNew = (await client.getLastAssistantText()) ?? null;
	out.uiRequests = uiRequests.map(({ id, ...rest }) => ({ idIsString: typeof id === "string", ...rest }));
} catch (error) {
	out.error = String(error?.stack ?? error);
	out.stderr = client.getStderr();
} finally {
	await client.stop();
}
process.stdout.write(`${JSON.stringify(out)}\n`);
