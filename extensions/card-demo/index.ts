/**
 * card-demo: PiChamber's declarative GUI protocol. `/cards` appends one `pichamber.ui` card
 * for each of the seven components (markdown, kv, list, table, progress, badges, code), each
 * with action buttons. The progress card has a stable id: it is updated twice in place and
 * then removed from the live dock with `{ id, removed: true }`.
 *
 * Action buttons run registered commands (`/cards-open <args>`, `/cards-cancel`) through the
 * normal prompt path, so those commands are registered here too.
 *
 * The cards are plain custom entries: in plain pi they are ordinary session entries, so the
 * extension needs no PiChamber-specific code path.
 */
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

type Tone = "info" | "success" | "warning" | "error" | "neutral";

interface CardAction {
	label: string;
	command: string;
	args?: string;
	variant?: "primary" | "secondary" | "danger";
	icon?: string;
	disabled?: boolean;
	loading?: boolean;
	confirm?: boolean;
	promptForArgs?: { label?: string; placeholder?: string };
}

type Card =
	| { component: "markdown"; props: { body: string } }
	| { component: "kv"; props: { rows: { label: string; value: string; tone?: Tone }[] } }
	| { component: "list"; props: { items: { label: string; value?: string }[] } }
	| { component: "table"; props: { columns: string[]; rows: string[][] } }
	| { component: "progress"; props: { label: string; value: number; max: number } }
	| { component: "badges"; props: { items: ({ label: string; tone?: Tone } | string)[] } }
	| { component: "code"; props: { language: string; code: string } };

const PROTOCOL = { protocol: "pichamber-extension-ui", version: 1 } as const;

export default function (pi: ExtensionAPI) {
	const card = (title: string, body: Card, actions: CardAction[] = [], id?: string) =>
		pi.appendEntry("pichamber.ui", { ...PROTOCOL, ...(id ? { id } : {}), title, ...body, actions });

	const progress = (value: number, label: string) =>
		card(
			"Build",
			{ component: "progress", props: { label, value, max: 100 } },
			[{ label: "Cancel", command: "cards-cancel", variant: "danger", confirm: true }],
			"cards-build",
		);

	pi.registerCommand("cards", {
		description: "Show one PiChamber card of every kind",
		handler: async () => {
			card("About", { component: "markdown", props: { body: "**PiChamber** renders these cards from plain JSON." } }, [
				{ label: "Open README", command: "cards-open", args: "README.md", icon: "file" },
			]);
			card(
				"Summary",
				{
					component: "kv",
					props: {
						rows: [
							{ label: "Files", value: "12", tone: "info" },
							{ label: "Errors", value: "0", tone: "success" },
							{ label: "Warnings", value: "2", tone: "warning" },
						],
					},
				},
				[{ label: "Refresh", command: "cards", variant: "secondary", icon: "refresh" }],
			);
			card(
				"Folders",
				{ component: "list", props: { items: [{ label: "src/", value: "42 files" }, { label: "tests/", value: "7 files" }] } },
				[{ label: "Open folder…", command: "cards-open", promptForArgs: { label: "Folder", placeholder: "src/" } }],
			);
			card(
				"Files",
				{
					component: "table",
					props: {
						columns: ["File", "Status"],
						rows: [
							["a.ts", "done"],
							["b.ts", "running"],
						],
					},
				},
				[{ label: "Open a.ts", command: "cards-open", args: "a.ts", variant: "primary" }],
			);

			// A live panel: same id, updated in place twice, then removed from the dock.
			progress(10, "Compiling");
			progress(60, "Linking");
			progress(100, "Done");

			card(
				"Checks",
				{ component: "badges", props: { items: [{ label: "passing", tone: "success" }, "3 skipped", { label: "1 flaky", tone: "warning" }] } },
				[{ label: "Re-run", command: "cards-open", args: "checks", disabled: true }],
			);
			card(
				"Snippet",
				{ component: "code", props: { language: "ts", code: 'pi.appendEntry("pichamber.ui", { component: "code" });' } },
				[{ label: "Open source", command: "cards-open", args: "index.ts", loading: true }],
			);

			pi.appendEntry("pichamber.ui", { ...PROTOCOL, id: "cards-build", removed: true });
		},
	});

	pi.registerCommand("cards-open", {
		description: "Open a file or folder (invoked by card actions)",
		handler: async (args, ctx) => {
			const target = args.trim() || ".";
			card("Opened", { component: "markdown", props: { body: `Opened \`${target}\`` } });
			if (ctx.hasUI) ctx.ui.notify(`Opened ${target}`, "info");
		},
	});

	pi.registerCommand("cards-cancel", {
		description: "Cancel the build (invoked by the progress card)",
		handler: async () => {
			progress(0, "Cancelled");
			pi.appendEntry("pichamber.ui", { ...PROTOCOL, id: "cards-build", removed: true });
		},
	});
}
