/**
 * todo-store: a stateful tool. The list lives in the extension instance, so it survives
 * across tool calls in one session; every change is also recorded with pi.appendEntry so a
 * restarted session could rebuild it, and every result carries the full list in `details`.
 *
 * Parameters are built with typebox (`Type.Object`) and pi-ai's `StringEnum`, exactly as
 * pi's own examples do.
 */
import { StringEnum } from "@mariozechner/pi-ai";
import type { ExtensionAPI, ExtensionContext } from "@mariozechner/pi-coding-agent";
import { Type } from "typebox";

interface Todo {
	id: number;
	text: string;
	done: boolean;
}

interface TodoDetails {
	action: "add" | "list" | "toggle" | "clear";
	todos: Todo[];
	nextId: number;
}

const TodoParams = Type.Object({
	action: StringEnum(["add", "list", "toggle", "clear"] as const, { description: "What to do" }),
	text: Type.Optional(Type.String({ description: "Todo text (for add)" })),
	id: Type.Optional(Type.Number({ description: "Todo id (for toggle)" })),
});

const render = (todos: Todo[]): string =>
	todos.length === 0 ? "No todos." : todos.map((t) => `${t.done ? "[x]" : "[ ]"} #${t.id} ${t.text}`).join("\n");

export default function (pi: ExtensionAPI) {
	let todos: Todo[] = [];
	let nextId = 1;

	/** Rebuilds the list from the latest todo-state entry of the session, if any. */
	const restore = (ctx: ExtensionContext) => {
		const entries = ctx.sessionManager.getEntries() as Array<{ type: string; customType?: string; data?: unknown }>;
		const last = entries.filter((e) => e.type === "custom" && e.customType === "todo-state").pop();
		const data = last?.data as { todos?: Todo[]; nextId?: number } | undefined;
		if (data?.todos) {
			todos = data.todos.map((t) => ({ ...t }));
			nextId = data.nextId ?? todos.reduce((m, t) => Math.max(m, t.id + 1), 1);
		}
	};

	pi.on("session_start", async (_event, ctx) => restore(ctx));

	const save = (action: TodoDetails["action"]) =>
		pi.appendEntry("todo-state", { action, todos: todos.map((t) => ({ ...t })), nextId });

	pi.registerTool({
		name: "todo",
		label: "Todo",
		description: "Manage a todo list: add (text), list, toggle (id), clear",
		parameters: TodoParams,

		async execute(_toolCallId, params) {
			const details = (action: TodoDetails["action"]): TodoDetails => ({
				action,
				todos: todos.map((t) => ({ ...t })),
				nextId,
			});
			switch (params.action) {
				case "add": {
					const text = params.text?.trim();
					if (!text) throw new Error("todo add: text is required");
					const todo = { id: nextId++, text, done: false };
					todos.push(todo);
					save("add");
					return { content: [{ type: "text", text: `Added #${todo.id}: ${todo.text}` }], details: details("add") };
				}
				case "toggle": {
					const todo = todos.find((t) => t.id === params.id);
					if (!todo) throw new Error(`todo toggle: no todo #${params.id}`);
					todo.done = !todo.done;
					save("toggle");
					return {
						content: [{ type: "text", text: `#${todo.id} is now ${todo.done ? "done" : "open"}` }],
						details: details("toggle"),
					};
				}
				case "clear": {
					const count = todos.length;
					todos = [];
					nextId = 1;
					save("clear");
					return { content: [{ type: "text", text: `Cleared ${count} todos` }], details: details("clear") };
				}
				case "list":
					return { content: [{ type: "text", text: render(todos) }], details: details("list") };
				default:
					throw new Error(`todo: unknown action ${JSON.stringify(params.action)}`);
			}
		},
	});

	pi.registerCommand("todos", {
		description: "Show the todo list in the transcript",
		handler: async () => {
			const done = todos.filter((t) => t.done).length;
			// A custom message shows in the transcript whether or not there is an interactive UI.
			pi.sendMessage({
				customType: "todo-list",
				content: `${done}/${todos.length} done\n${render(todos)}`,
				display: true,
				details: { todos: todos.map((t) => ({ ...t })) },
			});
		},
	});
}
