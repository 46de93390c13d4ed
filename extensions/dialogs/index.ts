/**
 * dialogs: every ctx.ui method an extension can use outside the TUI, in one `/survey`
 * command. Each answer feeds the next question, and the final notification sums them up.
 *
 * - blocking dialogs: select, confirm, input, editor (submit and cancel both handled)
 * - PiChamber's structured form (`ctx.ui.form`), used only when PiChamber is detected
 * - a dialog with `{ timeout }` and one dismissed through an AbortSignal
 * - fire-and-forget UI: notify, setStatus, setWidget, setTitle, setEditorText
 */
import type { ExtensionAPI, ExtensionCommandContext } from "@mariozechner/pi-coding-agent";

/** PiChamber detection, as PiChamber's docs recommend: no hard dependency on it. */
const isPiChamber = (ctx: { mode: string; hasUI: boolean }): boolean => {
	const marker = (globalThis as Record<string, unknown>).__PICHAMBER__ as { version?: number } | undefined;
	if (marker?.version) return true;
	try {
		if (typeof process !== "undefined" && process.env.PICHAMBER === "1") return true;
	} catch {}
	return ctx.mode === "rpc" && ctx.hasUI === true;
};

type FormField = {
	id: string;
	label: string;
	type: "text" | "textarea" | "number" | "select" | "checkbox";
	required?: boolean;
	options?: string[];
	initial?: string;
};

/** PiChamber's form dialog, or sequential inputs in plain pi (which has no form method). */
async function askDetails(ctx: ExtensionCommandContext): Promise<Record<string, string> | undefined> {
	const form = (ctx.ui as unknown as { form?: (title: string, fields: FormField[]) => Promise<Record<string, string> | undefined> })
		.form;
	if (isPiChamber(ctx) && typeof form === "function") {
		return form.call(ctx.ui, "A few details", [
			{ id: "team", label: "Team", type: "text", required: true },
			{ id: "years", label: "Years of experience", type: "number" },
			{ id: "editor", label: "Editor", type: "select", options: ["vim", "emacs", "vscode"], initial: "vim" },
			{ id: "remote", label: "Works remotely", type: "checkbox", initial: "false" },
		]);
	}
	const team = await ctx.ui.input("Team", "e.g. core");
	return team === undefined ? undefined : { team };
}

export default function (pi: ExtensionAPI) {
	pi.registerCommand("survey", {
		description: "A short survey that uses every dialog",
		handler: async (_args, ctx) => {
			if (!ctx.hasUI) {
				// No UI (print mode, --no-ui): dialogs would all resolve to their defaults.
				console.log("survey: no UI available, nothing to ask");
				return;
			}
			ctx.ui.setTitle("pi — survey");
			ctx.ui.setStatus("survey", "question 1 of 7");

			const language = await ctx.ui.select("Favourite language?", ["Rust", "TypeScript", "Go"]);
			if (language === undefined) {
				ctx.ui.setStatus("survey", undefined);
				ctx.ui.notify("Survey cancelled", "warning");
				return;
			}

			ctx.ui.setStatus("survey", "question 2 of 7");
			const subscribe = await ctx.ui.confirm("Newsletter", `Subscribe to the ${language} newsletter?`);

			ctx.ui.setStatus("survey", "question 3 of 7");
			const name = (await ctx.ui.input("Your name?", "Ada Lovelace")) ?? "anonymous";

			ctx.ui.setStatus("survey", "question 4 of 7");
			const comments = await ctx.ui.editor("Any comments?", `Dear ${name}, about ${language}: `);
			// Submit returns the text (possibly empty); cancel returns undefined.
			const commentText = comments === undefined ? "(skipped)" : comments.trim() || "(empty)";

			ctx.ui.setStatus("survey", "question 5 of 7");
			const details = await askDetails(ctx);
			const team = details?.team ?? "(none)";

			ctx.ui.setStatus("survey", "question 6 of 7");
			// Dismissed automatically after 5 s; a timeout resolves like a cancel (undefined).
			const rating = (await ctx.ui.select("Rate this survey", ["1", "2", "3", "4", "5"], { timeout: 5000 })) ?? "no rating";

			ctx.ui.setStatus("survey", "question 7 of 7");
			// Manual dismissal: abort the dialog ourselves after 30 s, and tell that apart from "no".
			const controller = new AbortController();
			const timer = setTimeout(() => controller.abort(), 30_000);
			const send = await ctx.ui.confirm("Send the survey?", `${name} (${team}) likes ${language}`, {
				signal: controller.signal,
			});
			clearTimeout(timer);

			ctx.ui.setStatus("survey", undefined);
			if (!send) {
				ctx.ui.notify(controller.signal.aborted ? "Survey timed out" : "Survey discarded", "warning");
				return;
			}

			const summary = [
				`language: ${language}`,
				`newsletter: ${subscribe ? "yes" : "no"}`,
				`name: ${name}`,
				`comments: ${commentText}`,
				`team: ${team}`,
				...(details?.years !== undefined ? [`years: ${details.years}`] : []),
				...(details?.editor !== undefined ? [`editor: ${details.editor}`] : []),
				...(details?.remote !== undefined ? [`remote: ${details.remote}`] : []),
				`rating: ${rating}`,
			];
			ctx.ui.setWidget("survey", summary, { placement: "belowEditor" });
			ctx.ui.setEditorText(`Thanks ${name}! Tell me more about ${language}.`);
			ctx.ui.notify(`Survey sent: ${summary.join("; ")}`, "info");
		},
	});

	pi.registerCommand("survey-clear", {
		description: "Remove the survey widget and title",
		handler: async (_args, ctx) => {
			ctx.ui.setWidget("survey", undefined);
			ctx.ui.setTitle("pi");
		},
	});
}
