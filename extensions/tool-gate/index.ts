/**
 * tool-gate: a `tool_call` handler that guards the agent's bash tool.
 *
 * - blocks dangerous commands (`rm -rf`, `sudo`) outright, with a reason the model reads;
 * - asks before `git push` (ctx.ui.confirm) and blocks unless the user confirms — and
 *   blocks when there is no UI to ask;
 * - patches the call in place for `npm install`: mutating `event.input` changes what the
 *   tool actually runs (here: adds `--no-audit --no-fund` and a default timeout).
 */
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

const DANGEROUS: { pattern: RegExp; why: string }[] = [
	{ pattern: /\brm\s+(-[a-zA-Z]*r[a-zA-Z]*f|-[a-zA-Z]*f[a-zA-Z]*r)\b/, why: "recursive forced delete (rm -rf)" },
	{ pattern: /\bsudo\b/, why: "privilege escalation (sudo)" },
];

const NPM_INSTALL = /^\s*npm\s+(install|i|ci)\b/;

export default function (pi: ExtensionAPI) {
	let blocked = 0;

	pi.on("tool_call", async (event, ctx) => {
		if (event.toolName !== "bash") return undefined;
		const input = event.input as { command?: unknown; timeout?: number };
		const command = typeof input.command === "string" ? input.command : "";

		for (const { pattern, why } of DANGEROUS) {
			if (pattern.test(command)) {
				blocked++;
				return { block: true, reason: `tool-gate: blocked ${why}: ${command}` };
			}
		}

		if (/\bgit\s+push\b/.test(command)) {
			if (!ctx.hasUI) {
				blocked++;
				return { block: true, reason: "tool-gate: git push needs confirmation, and there is no UI to ask" };
			}
			const ok = await ctx.ui.confirm("Allow git push?", `The agent wants to run:\n\n  ${command}`);
			if (!ok) {
				blocked++;
				return { block: true, reason: "tool-gate: git push was not confirmed by the user" };
			}
			ctx.ui.notify(`git push allowed: ${command}`, "info");
			return undefined;
		}

		if (NPM_INSTALL.test(command)) {
			// Mutate in place: pi (and PiChamber) run the tool with the patched input.
			if (!/--no-audit\b/.test(command)) input.command = `${command} --no-audit --no-fund`;
			if (input.timeout === undefined) input.timeout = 300;
		}
		return undefined;
	});

	pi.registerCommand("gate-stats", {
		description: "How many tool calls tool-gate has blocked",
		handler: async (_args, ctx) => {
			ctx.ui.notify(`tool-gate blocked ${blocked} call${blocked === 1 ? "" : "s"}`, "info");
		},
	});
}
