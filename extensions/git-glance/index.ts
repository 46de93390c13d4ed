/**
 * git-glance: `/glance` shows a card with what is in the working directory and what git says
 * about it. It needs to read the folder and to run git, and says so in the one comment line
 * below: `pichamber build` records the request, `pichamber inspect` shows it, and the GUI
 * offers it for approval (allow once, always, or deny). Until then, or when denied, each
 * part of the card shows the error the sandbox raised, which names the flag that grants it.
 *
 * In plain pi the comment is only a comment: the extension runs with pi's full access.
 */
// pichamber.capabilities: {"read": ["."], "run": ["git"], "reason": "to show the folder's files and its git status"}
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { readdirSync } from "node:fs";

const PROTOCOL = { protocol: "pichamber-extension-ui", version: 1 } as const;

type Row = { label: string; value: string; tone?: "info" | "success" | "warning" | "error" };

const firstLine = (text: string) => text.split("\n").find((l) => l.trim() !== "")?.trim() ?? "";
const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

export default function (pi: ExtensionAPI) {
	pi.registerCommand("glance", {
		description: "Show the working directory's files and git status in a card",
		handler: async (_args, ctx) => {
			const rows: Row[] = [];
			try {
				const names = readdirSync(ctx.cwd).filter((n) => n !== ".git").sort();
				rows.push({ label: "Files", value: String(names.length), tone: "info" });
				if (names.length > 0) rows.push({ label: "First", value: names.slice(0, 5).join(", ") });
			} catch (e) {
				rows.push({ label: "Files", value: message(e), tone: "error" });
			}
			try {
				const git = await pi.exec("git", ["status", "--porcelain=v1", "--branch"], { cwd: ctx.cwd });
				if (git.code === 0) {
					const [head, ...changes] = git.stdout.split("\n").filter((l) => l !== "");
					rows.push({ label: "Branch", value: (head ?? "").replace(/^## /, "").replace(/\.\.\..*$/, "") });
					rows.push({ label: "Changed", value: String(changes.length), tone: changes.length ? "warning" : "success" });
				} else {
					rows.push({ label: "Git", value: firstLine(git.stderr) || `exit ${git.code}`, tone: "warning" });
				}
			} catch (e) {
				rows.push({ label: "Git", value: message(e), tone: "error" });
			}
			pi.appendEntry("pichamber.ui", { ...PROTOCOL, title: "Workspace", component: "kv", props: { rows } });
		},
	});
}
