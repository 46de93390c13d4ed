/**
 * gui-fixture: what the browser tests need beyond extensions/card-demo and extensions/dialogs.
 *
 * - `/panel N`: a live panel (stable id "build") whose progress is N; each call replaces it in
 *   the dock. Its "Reset" action asks for confirmation and runs `/panel 0`.
 * - `/panel-remove`: unregisters the panel (`{ id, removed: true }`).
 * - `/app-show`: an app surface whose script probes what the sandbox lets it read (cookies,
 *   storage, the parent page) and puts the findings in the args of its command button.
 * - `/app-next ARGS`: the app's command; answers with a card that shows what it received.
 * - `/later MS`: a card that arrives MS milliseconds after the command returned (output the
 *   reader did not just ask for).
 * - the tool `fixture_lookup`: answers "found: TERM", and fails for the term "fail" (the
 *   scripted model in ../../model-turns.json calls it both ways).
 */
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";

const PROTOCOL = { protocol: "pichamber-extension-ui", version: 1 } as const;

const APP_HTML = `<!doctype html><html><body>
<p id="state">probing</p>
<button id="next" data-pichamber-command="app-next" data-pichamber-args="unprobed">Next</button>
<script>
  const findings = [];
  const probe = (name, read) => { try { findings.push(name + "=" + String(read())); } catch (e) { findings.push(name + "=blocked"); } };
  probe("cookie", () => document.cookie);
  probe("localStorage", () => localStorage.getItem("secret"));
  probe("sessionStorage", () => sessionStorage.getItem("secret"));
  probe("parentCookie", () => parent.document.cookie);
  probe("parentStorage", () => parent.localStorage.getItem("secret"));
  document.getElementById("next").setAttribute("data-pichamber-args", findings.join(","));
  document.getElementById("state").textContent = "probed";
</script>
</body></html>`;

export default function (pi: ExtensionAPI) {
	const panel = (value: number) =>
		pi.appendEntry("pichamber.ui", {
			...PROTOCOL,
			id: "build",
			title: "Build",
			component: "progress",
			props: { label: "Building", value, max: 100 },
			actions: [{ label: "Reset", command: "panel", args: "0", confirm: true, variant: "danger" }],
		});

	pi.registerCommand("panel", {
		description: "Set the live build panel to N percent",
		getArgumentCompletions: (prefix: string) =>
			["0", "25", "50", "75", "100"].filter((v) => v.startsWith(prefix)).map((v) => ({ value: v, label: `${v}%` })),
		handler: async (args) => {
			panel(Math.max(0, Math.min(100, Number(args.trim()) || 0)));
		},
	});

	pi.registerCommand("panel-remove", {
		description: "Remove the live build panel",
		handler: async () => {
			pi.appendEntry("pichamber.ui", { ...PROTOCOL, id: "build", removed: true });
		},
	});

	pi.registerCommand("app-show", {
		description: "Mount the probe app surface",
		handler: async () => {
			pi.appendEntry("pichamber.app", { ...PROTOCOL, appId: "board", title: "Board", html: APP_HTML });
		},
	});

	pi.registerCommand("later", {
		description: "A card that arrives after MS milliseconds",
		handler: async (args) => {
			const ms = Math.max(0, Number(args.trim()) || 0);
			setTimeout(() => {
				pi.appendEntry("pichamber.ui", { ...PROTOCOL, title: "Later", component: "markdown", props: { body: `Arrived after ${ms} ms` } });
			}, ms);
		},
	});

	pi.registerTool({
		name: "fixture_lookup",
		label: "Lookup",
		description: "Look a term up",
		parameters: { type: "object", properties: { term: { type: "string" } }, required: ["term"] } as never,
		async execute(_toolCallId, params: { term: string }) {
			if (params.term === "fail") throw new Error(`no entry for ${params.term}`);
			return { content: [{ type: "text", text: `found: ${params.term}` }], details: {} };
		},
	});

	pi.registerCommand("app-next", {
		description: "The app surface's command",
		handler: async (args) => {
			pi.appendEntry("pichamber.ui", {
				...PROTOCOL,
				title: "App command",
				component: "kv",
				props: { rows: [{ label: "received", value: `app-next received: ${args}` }] },
			});
		},
	});
}
