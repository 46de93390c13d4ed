/**
 * hello-tool: the smallest useful pi extension — one tool with parameters, a streamed
 * progress update (onUpdate) and a result with both `content` (what the model reads) and
 * `details` (structured data for renderers and session state).
 */
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

interface GreetParams {
	name: string;
	greeting?: string;
}

export default function (pi: ExtensionAPI) {
	pi.registerTool({
		name: "greet",
		label: "Greet",
		description: "Greet someone by name, optionally with a custom greeting",
		// Plain JSON Schema works as well as typebox's Type.Object(...).
		parameters: {
			type: "object",
			properties: {
				name: { type: "string", description: "Who to greet" },
				greeting: { type: "string", description: 'The greeting word (default "Hello")' },
			},
			required: ["name"],
		} as never,

		async execute(_toolCallId, params: GreetParams, _signal, onUpdate) {
			const name = String(params.name ?? "").trim();
			if (!name) throw new Error("greet: name must not be empty");
			const greeting = params.greeting?.trim() || "Hello";

			// Stream a partial result while "working"; PiChamber forwards it as tool_execution_update.
			onUpdate?.({
				content: [{ type: "text", text: `Thinking of a greeting for ${name}...` }],
				details: { stage: "composing" },
			});

			const message = `${greeting}, ${name}!`;
			return {
				content: [{ type: "text", text: message }],
				details: { name, greeting, message, length: message.length },
			};
		},
	});
}
