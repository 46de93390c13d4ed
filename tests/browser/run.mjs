// Browser tests of PiChamber's web GUI: the real `pichamber` server, the real page, Debian's
// chromium driven by playwright-core. Run by tests/browser.rs (cargo test), or directly:
//   PICHAMBER_BIN=target/debug/pichamber node tests/browser/run.mjs [case-name-filter]
// Screenshots go to $BROWSER_ARTIFACTS (default: <target>/browser-artifacts).
import { spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "../..");
const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";
const BIN = process.env.PICHAMBER_BIN || path.join(process.env.CARGO_TARGET_DIR || path.join(root, "target"), "debug/pichamber");
const ARTIFACTS = process.env.BROWSER_ARTIFACTS || path.join(process.env.CARGO_TARGET_DIR || path.join(root, "target"), "browser-artifacts");
const FILTER = process.argv[2] || "";
const STEP = 20_000; // ms a single expectation may take (extensions build on first load)

if (!fs.existsSync(CHROMIUM)) {
	console.log(`browser tests skipped: ${CHROMIUM} is missing (apt-get install chromium)`);
	process.exit(0);
}
let chromium;
try {
	({ chromium } = await import("playwright-core"));
} catch {
	console.error("tests/browser: playwright-core is not installed: run `npm ci --prefix tests/browser`");
	process.exit(1);
}
if (!fs.existsSync(BIN)) {
	console.error(`tests/browser: no pichamber binary at ${BIN} (cargo build -p pichamber, or set PICHAMBER_BIN)`);
	process.exit(1);
}
fs.mkdirSync(ARTIFACTS, { recursive: true });

const EXT = {
	cards: path.join(root, "extensions/card-demo"),
	dialogs: path.join(root, "extensions/dialogs"),
	fixture: path.join(here, "extensions/gui-fixture"),
	glance: path.join(root, "extensions/git-glance"),
	// pi 0.73.1's own example: `/todos` draws a terminal component with ctx.ui.custom.
	todo: path.join(root, "tests/oracle/node_modules/@mariozechner/pi-coding-agent/examples/extensions/todo.ts"),
};

// ---------------------------------------------------------------------------------------------
// Servers

const children = new Set();
process.on("exit", () => {
	for (const child of children) child.kill("SIGKILL");
});

/** Starts `pichamber ARGS` and waits for the `http://127.0.0.1:PORT/...` line it prints. */
function startServer(args, { cwd = root, env = {}, pattern = /(http:\/\/127\.0\.0\.1:\d+\/\S*)/ } = {}) {
	return new Promise((resolve, reject) => {
		const child = spawn(BIN, args, { cwd, stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, NO_COLOR: "1", ...env } });
		children.add(child);
		let out = "";
		const timer = setTimeout(() => reject(new Error(`pichamber ${args.join(" ")}: no URL within 120 s; output:\n${out}`)), 120_000);
		const onData = (chunk) => {
			out += chunk;
			const match = out.match(pattern);
			if (match) {
				clearTimeout(timer);
				resolve({ url: match[1], child, output: () => out, stop: () => stopServer(child) });
			}
		};
		child.stdout.on("data", onData);
		child.stderr.on("data", onData);
		child.on("exit", (code) => {
			clearTimeout(timer);
			children.delete(child);
			reject(new Error(`pichamber ${args.join(" ")} exited (${code}) before printing a URL:\n${out}`));
		});
	});
}

async function stopServer(child) {
	if (child.exitCode !== null) return;
	child.kill("SIGTERM");
	await Promise.race([new Promise((r) => child.once("exit", r)), new Promise((r) => setTimeout(r, 5000))]);
	if (child.exitCode === null) child.kill("SIGKILL");
	children.delete(child);
}

// ---------------------------------------------------------------------------------------------
// Helpers

class Failure extends Error {}
function assert(condition, message) {
	if (!condition) throw new Failure(message);
}

async function waitFor(locator, message, options = {}) {
	try {
		await locator.first().waitFor({ timeout: STEP, ...options });
	} catch {
		throw new Failure(`${message} (waited ${STEP / 1000} s)`);
	}
}

async function newPage(context) {
	const page = await context.newPage();
	page.errors = [];
	page.on("pageerror", (error) => page.errors.push(error.message));
	return page;
}

async function openApp(page, url) {
	await page.goto(url);
	await waitFor(page.locator("body[data-ready=true]"), "the page starts");
	await waitFor(page.locator("#conn-status", { hasText: "Connected" }), "the event stream connects");
}

async function newSession(page) {
	const before = await page.locator("#session-list .session-item").count();
	await page.getByRole("button", { name: "New session", exact: true }).click();
	await waitFor(page.locator("#session-view:not([hidden])"), "a new session opens");
	await page.waitForFunction((n) => document.querySelectorAll("#session-list .session-item").length > n, before, { timeout: STEP });
	// The commands of the session are loaded (slash completion needs them).
	return new URLSearchParams((await page.evaluate(() => location.hash)).slice(1)).get("session");
}

async function send(page, text) {
	const input = page.getByLabel("Message or /command");
	await input.fill(text);
	await page.getByRole("button", { name: "Send", exact: true }).click();
	await page.waitForFunction(() => document.getElementById("prompt-input").value === "", null, { timeout: STEP });
}

const transcript = (page) => page.locator("#transcript");
const dock = (page) => page.locator("#dock");
const openDialog = (page) => page.locator("dialog#ui-dialog[open]");

const AXE = path.join(here, "node_modules/axe-core/axe.min.js");

/**
 * axe-core's WCAG 2.1 A and AA rules on the page as it is now: serious and critical findings
 * fail the case, with the rule and the elements. The page's CSP forbids injected scripts, so
 * audited pages come from a context with `bypassCSP`.
 */
async function audit(page, view) {
	await page.addScriptTag({ path: AXE });
	const { violations } = await page.evaluate(() =>
		globalThis.axe.run(document, { runOnly: { type: "tag", values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"] }, resultTypes: ["violations"] }),
	);
	const found = violations.filter((v) => v.impact === "serious" || v.impact === "critical");
	const where = (v) => v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ");
	const said = (list) => list.map((v) => `${v.id} (${v.impact}: ${v.help}) at ${where(v)}`).join("; ");
	assert(!found.length, `${view}: ${said(found)}`);
	const minor = violations.filter((v) => !found.includes(v));
	if (minor.length) console.log(`     ${view}: minor accessibility findings: ${said(minor)}`);
}

async function shot(page, name) {
	await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

// ---------------------------------------------------------------------------------------------
// Cases

const cases = [];
const test = (name, fn) => cases.push({ name, fn });

test("card appears and live panel updates in place", async ({ browser, run }) => {
	const page = await newPage(await browser.newContext());
	await openApp(page, run.url);
	await newSession(page);
	await send(page, "/cards");
	for (const component of ["markdown", "kv", "list", "table", "progress", "badges", "code"]) {
		await waitFor(transcript(page).locator(`article.card-${component}`), `a ${component} card appears in the transcript`, { state: "attached" });
	}
	await waitFor(transcript(page).locator(".card-markdown strong", { hasText: "PiChamber" }), "markdown is rendered from the server's html");
	await waitFor(transcript(page).locator(".card-table td", { hasText: "b.ts" }), "the table's rows are shown");
	// card-demo updates its "cards-build" panel twice and removes it: the dock ends empty.
	await page.waitForFunction(() => !document.querySelector('#dock [data-panel-id$="/cards-build"]'), null, { timeout: STEP });
	await waitFor(transcript(page).locator("li.note", { hasText: "Build: panel removed" }), "the removal reads as a note naming the panel");
	assert((await transcript(page).locator('[data-custom-type="pichamber.ui"] details.card-generic').count()) === 0, "no removal shows as raw JSON");
	// History: all three states stay; the two superseded ones are collapsed; none has live actions.
	const history = transcript(page).locator("li.panel-history");
	assert((await history.locator("article.card-progress").count()) === 3, "the transcript keeps all three progress cards as history");
	assert((await transcript(page).locator("li.panel-history.superseded details.history:not([open])").count()) === 2, "superseded panel cards are collapsed");
	assert((await history.locator("button").count()) === 0, "panel history carries no action buttons (the dock has them)");
	assert(await history.last().locator("article.card-progress").isVisible(), "the newest state is shown");

	await send(page, "/panel 10");
	const slot = dock(page).locator('[data-panel-id$="/build"]');
	await waitFor(slot.locator(".progress-value", { hasText: "10 / 100" }), "the live panel appears in the dock");
	const handle = await slot.elementHandle();
	await send(page, "/panel 60");
	await waitFor(slot.locator(".progress-value", { hasText: "60 / 100" }), "the live panel shows the update");
	assert(await handle.evaluate((el) => el.isConnected), "the panel was updated in place (same dock slot)");
	assert((await dock(page).locator(".panel-slot").count()) === 1, "one panel in the dock, not two");
	assert((await dock(page).locator(".progress-value", { hasText: "10 / 100" }).count()) === 0, "the old value is gone from the dock");
	await shot(page, "live-panel");
	await send(page, "/panel-remove");
	await page.waitForFunction(() => !document.querySelector('#dock [data-panel-id$="/build"]'), null, { timeout: STEP });
	assert(page.errors.length === 0, `no page errors: ${page.errors.join("; ")}`);
});

test("action buttons run their commands", async ({ browser, run }) => {
	const page = await newPage(await browser.newContext());
	await openApp(page, run.url);
	await newSession(page);
	await send(page, "/cards");
	await waitFor(transcript(page).getByRole("button", { name: "Open a.ts" }), "the table card's action button");
	await transcript(page).getByRole("button", { name: "Open a.ts" }).click();
	await waitFor(transcript(page).locator("article.card-markdown", { hasText: "Opened a.ts" }), "the handler's card (Opened a.ts) shows");
	await waitFor(page.locator("#toasts", { hasText: "Opened a.ts" }), "the handler's notification shows");

	// promptForArgs: an inline input collects the argument string.
	await transcript(page).getByRole("button", { name: "Open folder…" }).click();
	const folder = transcript(page).getByLabel("Folder");
	await waitFor(folder, "promptForArgs asks for the argument");
	await folder.fill("docs/");
	await transcript(page).getByRole("button", { name: "Run", exact: true }).click();
	await waitFor(transcript(page).locator("article.card-markdown", { hasText: "Opened docs/" }), "the prompted argument reaches the handler");

	// disabled and loading actions cannot be clicked.
	assert(await transcript(page).getByRole("button", { name: "Re-run" }).isDisabled(), "a disabled action is disabled");
	assert(await transcript(page).getByRole("button", { name: "Open source" }).isDisabled(), "a loading action is disabled");

	// confirm: nothing runs until the user confirms.
	await send(page, "/panel 40");
	await waitFor(dock(page).locator(".progress-value", { hasText: "40 / 100" }), "the panel shows 40");
	await dock(page).getByRole("button", { name: "Reset" }).click();
	await waitFor(dock(page).getByRole("button", { name: "Yes, Reset" }), "a confirming action asks first");
	await page.waitForTimeout(300);
	assert((await dock(page).locator(".progress-value", { hasText: "40 / 100" }).count()) === 1, "nothing ran before confirming");
	await dock(page).getByRole("button", { name: "Yes, Reset" }).click();
	await waitFor(dock(page).locator(".progress-value", { hasText: "0 / 100" }), "the confirmed action ran /panel 0");
	await shot(page, "actions");
});

test("dialogs and a form are answered and the extension gets the values", async ({ browser, run }) => {
	const page = await newPage(await browser.newContext());
	await openApp(page, run.url);
	await newSession(page);
	await send(page, "/survey");
	const dialog = openDialog(page);
	await waitFor(dialog.getByRole("heading", { name: "Favourite language?" }), "the select dialog opens");
	await dialog.getByRole("button", { name: "TypeScript" }).click();
	await waitFor(dialog.getByRole("heading", { name: "Newsletter" }), "the confirm dialog opens");
	await shot(page, "confirm-dialog");
	await dialog.getByRole("button", { name: "Yes" }).click();
	await waitFor(dialog.getByRole("heading", { name: "Your name?" }), "the input dialog opens");
	await dialog.getByRole("textbox").fill("Ada");
	await dialog.getByRole("button", { name: "OK" }).click();
	await waitFor(dialog.getByRole("heading", { name: "Any comments?" }), "the editor dialog opens");
	const editor = dialog.getByRole("textbox");
	assert((await editor.inputValue()).startsWith("Dear Ada, about TypeScript"), "the editor is prefilled from earlier answers");
	await editor.fill("Great tool");
	await dialog.getByRole("button", { name: "Submit" }).click();

	await waitFor(dialog.getByRole("heading", { name: "A few details" }), "the form dialog opens");
	await dialog.getByRole("button", { name: "Submit" }).click();
	await waitFor(dialog.locator(".field-error", { hasText: /required/i }), "an empty required field is refused");
	await dialog.getByLabel("Team").fill("core");
	assert((await dialog.locator(".field-error", { hasText: /required/i }).count()) === 0, "the error clears once the field is filled");
	await dialog.getByLabel("Years of experience").fill("3");
	await dialog.getByLabel("Editor").selectOption("emacs");
	await dialog.getByLabel("Works remotely").check();
	await shot(page, "form-dialog");
	await dialog.getByRole("button", { name: "Submit" }).click();

	await waitFor(dialog.getByRole("heading", { name: "Rate this survey" }), "the timed select opens");
	await waitFor(dialog.locator(".countdown", { hasText: /Closes in [1-5] s/ }), "a dialog with a deadline counts down");
	await dialog.getByRole("button", { name: "4", exact: true }).click();
	await waitFor(dialog.getByRole("heading", { name: "Send the survey?" }), "the last confirm opens");
	await dialog.getByRole("button", { name: "Yes" }).click();

	const widget = page.locator("#widgets-below .widget");
	await waitFor(widget.filter({ hasText: "team: core" }), "the extension's summary widget shows the form values");
	const text = await widget.textContent();
	for (const line of ["language: TypeScript", "newsletter: yes", "name: Ada", "comments: Great tool", "team: core", "years: 3", "editor: emacs", "remote: true", "rating: 4"]) {
		assert(text.includes(line), `the extension received "${line}" (widget: ${text})`);
	}
	assert(!(await openDialog(page).count()), "no dialog is left open");
	assert((await page.getByLabel("Message or /command").inputValue()) === "Thanks Ada! Tell me more about TypeScript.", "setEditorText fills the composer");
	await shot(page, "survey-done");
});

test("app surface fires its command and cannot read the parent's cookies or storage", async ({ browser, run }) => {
	const page = await newPage(await browser.newContext());
	await openApp(page, run.url);
	// Something worth stealing in the parent page.
	await page.evaluate(() => {
		document.cookie = "secret=parent-cookie; path=/";
		localStorage.setItem("secret", "parent-storage");
		sessionStorage.setItem("secret", "parent-session");
	});
	const sessionId = await newSession(page);
	await send(page, "/app-show");
	const iframe = page.locator('#apps iframe[title="App: Board"]');
	await waitFor(iframe, "the app surface mounts");
	assert((await iframe.getAttribute("sandbox")) === "allow-scripts", "the iframe is sandboxed with scripts only");
	const frame = page.frameLocator('#apps iframe[title="App: Board"]');
	await waitFor(frame.locator("#state", { hasText: "probed" }), "the app's script ran");
	// The page's look reaches the app (its own styles would win): sans-serif text on the page's panel colour.
	const appFont = await frame.locator("body").evaluate((b) => getComputedStyle(b).fontFamily);
	assert(!/(^|,)\s*serif/.test(appFont) && !/Times/.test(appFont), `the app's text is not the browser's serif default (${appFont})`);
	const [appBg, panelBg] = [await frame.locator("body").evaluate((b) => getComputedStyle(b).backgroundColor), await page.locator(".app-surface").first().evaluate((el) => getComputedStyle(el).backgroundColor)];
	assert(appBg === panelBg, `the app's background follows the page's theme (${appBg} vs ${panelBg})`);

	// The mount token stays with the parent: not in the iframe's document.
	const mountToken = await page.evaluate(async (id) => {
		const token = new URLSearchParams(location.hash.slice(1)).get("token");
		const response = await fetch(`/api/pi/sessions/${id}`, { headers: { Authorization: `Bearer ${token}` } });
		const apps = (await response.json()).snapshot.apps;
		return Object.entries(apps).find(([key]) => key.endsWith("/board"))?.[1].token;
	}, sessionId);
	assert(typeof mountToken === "string" && mountToken.length >= 16, "the snapshot carries a mount token");
	assert(!(await iframe.getAttribute("srcdoc")).includes(mountToken), "the mount token is not given to the iframe");

	// A message that does not come from the iframe is ignored.
	await page.evaluate(() => window.postMessage({ pichamber: "command", command: "app-next", args: "forged" }, "*"));
	await frame.getByRole("button", { name: "Next" }).click();
	const received = transcript(page).locator("article.card-kv", { hasText: "app-next received:" });
	await waitFor(received, "the app's button fired its command");
	const text = await received.first().textContent();
	for (const probe of ["cookie=blocked", "localStorage=blocked", "sessionStorage=blocked", "parentCookie=blocked", "parentStorage=blocked"]) {
		assert(text.includes(probe), `inside the sandbox ${probe} (got: ${text})`);
	}
	assert(!/parent-(cookie|storage|session)/.test(text), "no parent secret reached the app");
	await page.waitForTimeout(500);
	assert((await transcript(page).locator("article.card-kv", { hasText: "forged" }).count()) === 0, "a postMessage from outside the iframe fired nothing");
	await shot(page, "app-surface");
});

test("reload restores the dock, the app and a pending dialog", async ({ browser, run }) => {
	const page = await newPage(await browser.newContext());
	await openApp(page, run.url);
	await newSession(page);
	await send(page, "/panel 70");
	await waitFor(dock(page).locator(".progress-value", { hasText: "70 / 100" }), "the panel shows 70");
	await send(page, "/app-show");
	await waitFor(page.locator('#apps iframe[title="App: Board"]'), "the app mounts");
	await send(page, "/survey");
	await waitFor(openDialog(page).getByRole("heading", { name: "Favourite language?" }), "a dialog is pending");
	await page.reload();
	await waitFor(page.locator("body[data-ready=true]"), "the page starts again");
	await waitFor(dock(page).locator('[data-panel-id$="/build"] .progress-value', { hasText: "70 / 100" }), "the dock is restored after a reload");
	await waitFor(page.locator('#apps iframe[title="App: Board"]'), "the app surface is restored after a reload");
	await waitFor(openDialog(page).getByRole("heading", { name: "Favourite language?" }), "the pending dialog is restored after a reload");
	await waitFor(transcript(page).locator("article.card-progress"), "the transcript is restored after a reload");
	await shot(page, "after-reload");
	await openDialog(page).getByRole("button", { name: "Cancel" }).click();
	await waitFor(page.locator("#toasts", { hasText: "Survey cancelled" }), "cancelling the restored dialog reaches the extension");
});

test("slash completion and command triggers", async ({ browser, run }) => {
	const page = await newPage(await browser.newContext());
	await openApp(page, run.url);
	await newSession(page);
	const input = page.getByLabel("Message or /command");
	await input.fill("/pan");
	const options = page.locator("#completions [role=option]");
	await waitFor(options.filter({ hasText: "/panel" }), "commands complete from the session's commands");
	await input.press("Tab");
	await page.waitForFunction(() => document.getElementById("prompt-input").value.startsWith("/panel"), null, { timeout: STEP });
	await input.fill("/panel 2");
	await waitFor(options.filter({ hasText: "25%" }), "argument completions come from the command");
	await input.press("Enter");
	assert((await input.inputValue()) === "/panel 25", `accepting an argument completion fills it in (got ${await input.inputValue()})`);
	await input.press("Enter");
	await waitFor(dock(page).locator(".progress-value", { hasText: "25 / 100" }), "the completed command ran");

	// A trigger: pinned button plus a key binding; Escape and ctrl+c are refused.
	await page.getByRole("button", { name: "Command triggers" }).click();
	const settings = page.locator("dialog#settings-dialog[open]");
	await settings.getByLabel("Command", { exact: true }).fill("panel");
	await settings.getByLabel("Arguments").fill("90");
	await settings.getByLabel("Button label").fill("Ninety");
	await settings.getByLabel("Key binding").fill("ctrl+c");
	await settings.getByRole("button", { name: "Add trigger" }).click();
	await waitFor(settings.locator(".dialog-errors", { hasText: "built-in" }), "a built-in shortcut cannot be bound");
	await settings.getByLabel("Key binding").fill("alt+9");
	await settings.getByRole("button", { name: "Add trigger" }).click();
	await settings.getByRole("button", { name: "Save" }).click();
	const pinned = page.locator("#triggers").getByRole("button", { name: /Ninety/ });
	await waitFor(pinned, "the pinned trigger button appears");
	await pinned.click();
	await waitFor(dock(page).locator(".progress-value", { hasText: "90 / 100" }), "the pinned trigger ran its command");
	await send(page, "/panel 5");
	await waitFor(dock(page).locator(".progress-value", { hasText: "5 / 100" }), "back to 5");
	await page.locator("#transcript").click();
	await page.keyboard.press("Alt+9");
	await waitFor(dock(page).locator(".progress-value", { hasText: "90 / 100" }), "the key binding ran its command");
	// Stored server-side: a fresh page of the same user sees the trigger.
	const other = await newPage(await browser.newContext());
	await openApp(other, run.url);
	await waitFor(other.locator("#triggers").getByRole("button", { name: /Ninety/ }).or(other.locator("#no-session:not([hidden])")), "the page loads");
	const stored = await other.evaluate(async () => {
		const token = new URLSearchParams(location.hash.slice(1)).get("token");
		return (await (await fetch("/api/pi/ui-settings", { headers: { Authorization: `Bearer ${token}` } })).json()).triggers;
	});
	assert(stored.some((t) => t.command === "panel" && t.args === "90" && t.key === "alt+9"), `the trigger is stored in ui-settings (${JSON.stringify(stored)})`);
	// Clean up for other runs of the same server.
	await other.evaluate(async () => {
		const token = new URLSearchParams(location.hash.slice(1)).get("token");
		await fetch("/api/pi/ui-settings", { method: "PUT", headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" }, body: JSON.stringify({ triggers: [] }) });
	});
	await shot(page, "triggers");
});

test("the model's answer reads as markdown and each tool call is one row with its result", async ({ browser, run }) => {
	const context = await browser.newContext();
	await context.grantPermissions(["clipboard-read", "clipboard-write"]);
	const page = await newPage(context);
	await openApp(page, run.url);
	const id = await newSession(page);
	await send(page, "Look up sandbox please\nand say what you found");
	await waitFor(page.locator("#composer").getByRole("button", { name: "Stop" }), "while the model answers, Stop sits beside Send");
	const answer = transcript(page).locator("li.msg-assistant:not(.live)");
	await waitFor(answer.locator(".markdown h2", { hasText: "Plan" }), "the streamed answer's markdown is rendered (a heading)");
	await waitFor(answer.locator(".markdown table td", { hasText: "sandbox" }), "a markdown table is rendered");
	await waitFor(transcript(page).locator('.tool-row[data-tool-call-id="call_a"][data-status="done"]'), "the first call ends done");
	await waitFor(transcript(page).locator('.tool-row[data-tool-call-id="call_b"][data-status="error"].is-error'), "the failing call ends failed, tinted");
	const check = async (when) => {
		for (const call of ["call_a", "call_b"]) {
			assert((await transcript(page).locator(`.tool-row[data-tool-call-id="${call}"]`).count()) === 1, `${when}: ${call} is one row (its result sits in its call's row)`);
		}
		assert((await page.evaluate(() => document.querySelectorAll("#transcript .markdown script").length)) === 0, `${when}: no script element from the model's text`);
		assert(await page.evaluate(() => window.injected === undefined), `${when}: the model's script did not run`);
		await waitFor(answer.locator(".markdown", { hasText: "<script>window.injected = true</script>" }), `${when}: raw HTML in the answer shows as text`);
		const row = transcript(page).locator('.tool-row[data-tool-call-id="call_a"]');
		await row.locator("summary").click();
		await waitFor(row.locator(".tool-output", { hasText: "found: sandbox" }), `${when}: an opened row shows the result`);
		await waitFor(row.locator(".tool-args", { hasText: '"term": "sandbox"' }), `${when}: and the arguments`);
		const failed = transcript(page).locator('.tool-row[data-tool-call-id="call_b"]');
		await failed.locator("summary").click();
		await waitFor(failed.locator(".tool-output", { hasText: "no entry for fail" }), `${when}: a failed call shows its error`);
	};
	await page.waitForFunction(() => document.getElementById("abort-run").hidden, null, { timeout: STEP });
	await check("live");
	await waitFor(answer.locator(".code-block pre code span[class^=hl-]"), "the code block is highlighted");
	await page.evaluate(() => {
		const t = document.getElementById("transcript");
		t.scrollTop = t.scrollHeight;
	});
	await shot(page, "answer-markdown-tools");
	await page.emulateMedia({ colorScheme: "dark" });
	await shot(page, "answer-markdown-tools-dark");
	await page.emulateMedia({ colorScheme: "light" });
	await answer.locator(".code-block .copy-code").first().click();
	await waitFor(answer.locator(".copy-code", { hasText: "Copied" }), "the copy button says it copied");
	await waitFor(page.locator("#toasts [role=status]", { hasText: "Copied" }), "and a live region says it to a screen reader");
	const copied = await page.evaluate(() => navigator.clipboard.readText());
	assert(copied === 'const found: string = "sandbox"; // looked up\n', `the code block's text is copied (got ${JSON.stringify(copied)})`);
	// The session is named by its first prompt's first line.
	await waitFor(page.locator("#session-list .session-name", { hasText: "Look up sandbox please" }), "the session list names the session by its first prompt");
	assert((await page.locator("#session-title").textContent()) === "Look up sandbox please", "so does the header");
	// After a reload the same from the saved entries.
	await page.reload();
	await waitFor(page.locator("body[data-ready=true]"), "the page starts again");
	await openApp(page, `${run.url}&session=${id}`);
	await waitFor(answer.locator(".markdown h2", { hasText: "Plan" }), "after a reload the answer is markdown");
	await check("reloaded");
	await waitFor(page.locator("#session-list .session-name", { hasText: "Look up sandbox please" }), "the title comes from the server after a reload");
	assert(page.errors.length === 0, `no page errors: ${page.errors.join("; ")}`);
});

test("new output follows a reader at the end and waits behind Jump to latest otherwise", async ({ browser, run }) => {
	const page = await newPage(await browser.newContext({ viewport: { width: 1280, height: 700 } }));
	await openApp(page, run.url);
	await newSession(page);
	await waitFor(page.locator("#session-empty .chip", { hasText: "/cards" }), "an empty session shows its extensions' commands");
	await waitFor(page.locator("#session-empty", { hasText: "Model: scripted/scripted" }), "and its model");
	await page.locator("#session-empty .chip").getByText("/cards", { exact: true }).click();
	assert((await page.getByLabel("Message or /command").inputValue()) === "/cards ", "a command chip fills the message box");
	await send(page, "/cards");
	await waitFor(transcript(page).locator("li.note", { hasText: "Build: panel removed" }), "the cards arrive");
	assert(await page.locator("#session-empty").isHidden(), "the empty state leaves once there is output");
	await waitFor(transcript(page).locator("li.msg-command", { hasText: "/cards" }), "the command is echoed in the transcript");
	const distance = () => page.evaluate(() => {
		const t = document.getElementById("transcript");
		return t.scrollHeight - t.scrollTop - t.clientHeight;
	});
	// Following may scroll smoothly: wait for the end to be reached, not for one frame.
	const reachesTheEnd = async (what) => {
		const reached = await page
			.waitForFunction(() => {
				const t = document.getElementById("transcript");
				return t.scrollHeight - t.scrollTop - t.clientHeight < 50;
			}, null, { timeout: 5000 })
			.then(() => true, () => false);
		assert(reached, `${what} (${await distance()} px left)`);
	};
	await reachesTheEnd("the transcript followed the output to its end");
	await send(page, "/later 1500");
	// The server echoes the command; the reader scrolls up after that.
	await waitFor(transcript(page).locator("li.msg-command", { hasText: "/later 1500" }), "the command is echoed");
	await page.evaluate(() => {
		document.getElementById("transcript").scrollTop = 0;
	});
	await waitFor(transcript(page).locator("article.card-markdown", { hasText: "Arrived after 1500 ms" }), "the late card arrives", { state: "attached" });
	await waitFor(page.getByRole("button", { name: "Jump to latest ↓" }), "a reader who scrolled up gets Jump to latest");
	assert((await page.evaluate(() => document.getElementById("transcript").scrollTop)) < 50, "and stays where they were");
	await shot(page, "jump-to-latest");
	await page.getByRole("button", { name: "Jump to latest ↓" }).click();
	await reachesTheEnd("Jump to latest goes to the end");
	assert(await page.getByRole("button", { name: "Jump to latest ↓" }).isHidden(), "and the button leaves");
	// An action's result lands in view: firing it follows the output again.
	await page.evaluate(() => {
		document.getElementById("transcript").scrollTop = 0;
	});
	await transcript(page).getByRole("button", { name: "Open a.ts" }).first().click();
	await waitFor(transcript(page).locator("article.card-markdown", { hasText: "Opened a.ts" }), "the action's card shows");
	await page.waitForFunction(() => {
		const t = document.getElementById("transcript");
		return t.scrollHeight - t.scrollTop - t.clientHeight < 50;
	}, null, { timeout: STEP });
	assert(page.errors.length === 0, `no page errors: ${page.errors.join("; ")}`);
});

test("closing a session can be undone for a few seconds, then it is closed on the server", async ({ browser, run }) => {
	const page = await newPage(await browser.newContext());
	await openApp(page, run.url);
	const id = await newSession(page);
	const item = page.locator(`#session-list .session-item[data-session-id="${id}"]`);
	await page.getByRole("button", { name: "Close session" }).click();
	await waitFor(page.locator("#no-session:not([hidden])"), "the view closes at once");
	assert((await item.count()) === 0, "the session leaves the list at once");
	await page.locator("#toasts").getByRole("button", { name: "Undo" }).click();
	await waitFor(item, "Undo brings it back");
	await waitFor(page.locator("#session-view:not([hidden])"), "and opens it");
	await item.getByRole("button", { name: /^Close / }).click();
	assert((await item.count()) === 0, "closed from the list");
	const token = new URLSearchParams(new URL(run.url).hash.slice(1)).get("token");
	const listed = () => page.evaluate(async ([token, id]) => {
		const r = await fetch("/api/pi/sessions", { headers: { Authorization: `Bearer ${token}` } });
		return (await r.json()).sessions.some((s) => s.id === id);
	}, [token, id]);
	assert(await listed(), "the server still has it while Undo is offered");
	await page.waitForTimeout(6500);
	assert(!(await listed()), "after the Undo time the server closed it");
	assert(page.errors.length === 0, `no page errors: ${page.errors.join("; ")}`);
});

for (const colorScheme of ["light", "dark"]) {
	test(`a phone (375 px, ${colorScheme}) keeps the message box on screen and the sessions in a drawer`, async ({ browser, run }) => {
		const page = await newPage(await browser.newContext({ viewport: { width: 375, height: 740 }, colorScheme, isMobile: true, hasTouch: true }));
		await openApp(page, run.url);
		assert(!(await page.locator("#sidebar").evaluate((el) => el.getBoundingClientRect().right > 0)), "the session list is off screen");
		await page.getByRole("button", { name: "Start a new session" }).click();
		await waitFor(page.locator("#session-view:not([hidden])"), "the top bar's + opens a new session");
		await send(page, "/cards");
		await waitFor(transcript(page).locator("li.note", { hasText: "Build: panel removed" }), "the cards arrive");
		const box = await page.locator("#prompt-input").boundingBox();
		assert(box && box.y + box.height <= 740, `the message box is on screen (bottom at ${box && box.y + box.height})`);
		const height = await transcript(page).evaluate((el) => el.clientHeight);
		assert(height >= 300, `the transcript gets most of the screen (${height} px)`);
		await shot(page, `phone-${colorScheme}`);
		await page.getByRole("button", { name: "Sessions" }).click();
		await waitFor(page.locator("#sidebar.open"), "Sessions opens the drawer");
		await page.waitForFunction(() => document.getElementById("sidebar").getBoundingClientRect().left >= 0, null, { timeout: STEP });
		await shot(page, `phone-${colorScheme}-drawer`);
		await page.locator("#session-list .session-open").first().click();
		await page.waitForFunction(() => !document.getElementById("sidebar").classList.contains("open"), null, { timeout: STEP });
		assert(page.errors.length === 0, `no page errors: ${page.errors.join("; ")}`);
	});
}

test("a terminal-only command, a refused prompt and a command echo are explained and survive a reload", async ({ browser }) => {
	if (!fs.existsSync(EXT.todo)) throw new Failure(`${EXT.todo} is missing: run tests/setup.sh (it installs pi 0.73.1)`);
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pichamber-notes-"));
	// No --script and no --model: a message for a model is refused by the host.
	const server = await startServer(["run", EXT.todo, "--cwd", dir]);
	try {
		const page = await newPage(await browser.newContext());
		await openApp(page, server.url);
		await waitFor(page.locator("#session-view:not([hidden])"), "the one session opens");
		await send(page, "/todos");
		await waitFor(transcript(page).locator("li.msg-command", { hasText: "/todos" }), "the command is echoed");
		const notice = transcript(page).locator("li.console-note", { hasText: "ctx.ui.custom() asks for a terminal component" });
		await waitFor(notice, "ctx.ui.custom says why nothing was drawn");
		assert((await notice.textContent()).startsWith("todo"), "the notice names the extension");
		// Not `send`: the box empties and gets the refused message back faster than it can watch.
		await page.getByLabel("Message or /command").fill("hello");
		await page.getByRole("button", { name: "Send", exact: true }).click();
		const refused = transcript(page).locator("li.note.tone-warning", { hasText: /model/i });
		await waitFor(refused, "a prompt without a model is refused, as a warning");
		await page.waitForFunction(() => document.getElementById("prompt-input").value === "hello", null, { timeout: STEP }).catch(() => {
			throw new Failure("the refused message goes back into the message box");
		});
		assert((await notice.locator("details").count()) === 0, "a one-line console message reads as a plain note");
		const order = () => page.evaluate(() => [...document.querySelectorAll("#transcript > li")].map((li) => (li.classList.contains("msg-command") ? "command" : li.classList.contains("console-note") ? "console" : li.classList.contains("msg-user") ? "user" : li.classList.contains("note") ? "note" : "other")));
		const before = await order();
		await page.reload();
		await waitFor(page.locator("body[data-ready=true]"), "the page starts again");
		await waitFor(transcript(page).locator("li.msg-command", { hasText: "/todos" }), "after a reload the echo is still there");
		await waitFor(transcript(page).locator("li.console-note", { hasText: "ctx.ui.custom()" }), "and the notice");
		await waitFor(refused, "and the refusal");
		await shot(page, "notes-after-reload");
		const after = await order();
		assert(JSON.stringify(after) === JSON.stringify(before), `the same transcript in the same order: ${before} then ${after}`);
		assert(after.indexOf("command") < after.indexOf("console") && after.indexOf("console") < after.lastIndexOf("note"), `echo, notice, then the refusal: ${after}`);
		assert(page.errors.length === 0, `no page errors: ${page.errors.join("; ")}`);
	} finally {
		await server.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

for (const colorScheme of ["light", "dark"]) {
	test(`the main views pass axe-core's WCAG 2.1 AA checks (${colorScheme})`, async ({ browser }) => {
		// A server of its own: its scripted model answers from the first turn.
		const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pichamber-audit-"));
		const run = await startServer(["run", EXT.cards, EXT.dialogs, EXT.fixture, "--cwd", dir, "--script", path.join(here, "model-turns.json")]);
		try {
			await auditViews(browser, run, colorScheme);
		} finally {
			await run.stop();
			fs.rmSync(dir, { recursive: true, force: true });
		}
	});
}

async function auditViews(browser, run, colorScheme) {
	const desktop = await newPage(await browser.newContext({ colorScheme, bypassCSP: true }));
	await openApp(desktop, run.url);
	await audit(desktop, "the start page");
	await newSession(desktop);
	await waitFor(desktop.locator("#session-empty .chip"), "the empty session shows its commands");
	await audit(desktop, "an empty session");
	await send(desktop, "/cards");
	await waitFor(transcript(desktop).locator("li.note", { hasText: "Build: panel removed" }), "the cards arrive");
	await send(desktop, "/panel 40");
	await waitFor(dock(desktop).locator(".progress-value", { hasText: "40 / 100" }), "a live panel in the dock");
	await send(desktop, "Use the lookup tool");
	await waitFor(transcript(desktop).locator(".tool-row"), "a tool call row", { state: "attached" });
	await audit(desktop, "a transcript with cards, a panel, markdown and tool rows");
	await desktop.getByRole("button", { name: "Extensions", exact: true }).click();
	await waitFor(desktop.locator("dialog[open] .extensions-panel"), "the Extensions panel opens");
	await audit(desktop, "the Extensions panel");
	await desktop.keyboard.press("Escape");
	await send(desktop, "/survey");
	await waitFor(openDialog(desktop), "a dialog opens");
	await audit(desktop, "a select dialog");
	await openDialog(desktop).getByRole("button", { name: "Cancel" }).click();
	const phone = await newPage(await browser.newContext({ viewport: { width: 375, height: 740 }, colorScheme, isMobile: true, hasTouch: true, bypassCSP: true }));
	await openApp(phone, run.url);
	await audit(phone, "the phone layout");
	await phone.getByRole("button", { name: "Sessions" }).click();
	await audit(phone, "the phone's session drawer");
	assert(desktop.errors.length + phone.errors.length === 0, `no page errors: ${[...desktop.errors, ...phone.errors].join("; ")}`);
}

test("a wrong token sees nothing", async ({ browser, run }) => {
	const page = await newPage(await browser.newContext());
	const wrong = run.url.replace(/token=[^&]+/, "token=not-the-token");
	await page.goto(wrong);
	await waitFor(page.locator("#login:not([hidden])"), "a wrong token gets the token form");
	assert(await page.locator("#app").isHidden(), "no session list is shown");
	const status = await page.evaluate(async () => (await fetch("/api/pi/sessions")).status);
	assert(status === 401, `the API without a token answers 401 (got ${status})`);
	await shot(page, "wrong-token");
});

test("another user's token cannot see the first user's session", async ({ browser }) => {
	// `pichamber serve --config`: two users, each with a token of their own.
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pichamber-serve-"));
	const token = () => crypto.randomUUID().replaceAll("-", "");
	const alice = token();
	const bob = token();
	const config = path.join(dir, "server.json");
	fs.writeFileSync(config, JSON.stringify({ listen: "127.0.0.1:0", cwd: dir, extensions: [EXT.fixture], users: [{ name: "alice", token: alice }, { name: "bob", token: bob }] }));
	const server = await startServer(["serve", "--config", config]);
	try {
		const base = server.url.replace(/#.*$/, "").replace(/\/?$/, "/");
		const a = await newPage(await browser.newContext());
		await openApp(a, `${base}#token=${alice}`);
		const sessionId = await newSession(a);
		await send(a, "/panel 33");
		await waitFor(dock(a).locator(".progress-value", { hasText: "33 / 100" }), "alice's panel shows");

		const b = await newPage(await browser.newContext());
		await openApp(b, `${base}#token=${bob}&session=${sessionId}`);
		await b.waitForTimeout(500);
		assert((await b.locator(`#session-list [data-session-id="${sessionId}"]`).count()) === 0, "bob's session list does not show alice's session");
		assert(await b.locator("#session-view").isHidden(), "bob cannot open alice's session from the URL");
		assert((await b.locator("#dock .panel-slot").count()) === 0, "no panel of alice's reaches bob's dock");
		const answers = await b.evaluate(async (id) => {
			const token = new URLSearchParams(location.hash.slice(1)).get("token");
			const auth = { Authorization: `Bearer ${token}`, "Content-Type": "application/json" };
			const get = await fetch(`/api/pi/sessions/${id}`, { headers: auth });
			const prompt = await fetch(`/api/pi/sessions/${id}/prompt`, { method: "POST", headers: auth, body: JSON.stringify({ text: "/panel 99" }) });
			const list = await (await fetch("/api/pi/sessions", { headers: auth })).json();
			return { get: get.status, prompt: prompt.status, ids: list.sessions.map((s) => s.id) };
		}, sessionId);
		assert(answers.get === 404, `GET of another user's session answers 404 (got ${answers.get})`);
		assert(answers.prompt === 404, `a prompt to another user's session answers 404 (got ${answers.prompt})`);
		assert(!answers.ids.includes(sessionId), "the API's session list of bob lacks alice's session");
		// Bob's own session is his alone, and alice's panel stayed as it was.
		await newSession(b);
		await send(b, "/panel 77");
		await waitFor(dock(b).locator(".progress-value", { hasText: "77 / 100" }), "bob's own panel shows");
		await a.waitForTimeout(500);
		assert((await dock(a).locator(".progress-value", { hasText: "33 / 100" }).count()) === 1, "alice's dock still shows 33");
		assert((await a.locator("#session-list .session-item").count()) === 1, "alice does not see bob's session");
		await shot(a, "two-users-alice");
		await shot(b, "two-users-bob");
	} finally {
		await server.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

test("an extension's capability request is approved once, always, or denied", async ({ browser }) => {
	// `pichamber run EXT`: the person at the terminal may approve whatever git-glance requests
	// (read ".", run git); "always" is remembered under XDG_DATA_HOME, here a fresh folder.
	const dir = fs.mkdtempSync(path.join(os.tmpdir(), "pichamber-approval-"));
	const repo = path.join(dir, "repo");
	fs.mkdirSync(repo);
	fs.writeFileSync(path.join(repo, "readme.md"), "# hi\n");
	const git = spawn("git", ["init", "-q", "-b", "trunk"], { cwd: repo });
	await new Promise((resolve) => git.once("exit", resolve));
	const data = path.join(dir, "data");
	const server = await startServer(["run", EXT.glance, "--cwd", repo], { env: { XDG_DATA_HOME: data } });
	try {
		const page = await newPage(await browser.newContext());
		await openApp(page, server.url);
		await waitFor(page.locator("#session-view:not([hidden])"), "the one session opens");
		const request = page.getByRole("region", { name: "Capability request from git-glance" });
		await waitFor(request, "the approval request shows");
		await waitFor(page.locator("#session-empty", { hasText: "No model is set for this session" }), "the empty state says there is no model");
		await waitFor(page.locator("#session-empty", { hasText: "Asks to: read files in the working directory; run the program git" }), "and what the extension asks for");
		for (const text of ["run the program git", "read files in the working directory", "Why: to show the folder's files and its git status"]) {
			await waitFor(request.getByText(text), `the request says "${text}"`);
		}
		await shot(page, "approval-request");
		const kvCards = transcript(page).locator("article.card-kv");

		// Before an answer it runs with no grant: each row shows the sandbox's error.
		await send(page, "/glance");
		await waitFor(kvCards.nth(0).getByText(/--allow-run=git/), "without approval git is denied, naming the flag");
		await request.getByRole("button", { name: "Allow once" }).click();
		await page.waitForFunction(() => !document.querySelector("#approvals section"), null, { timeout: STEP });
		await send(page, "/glance");
		await waitFor(kvCards.nth(1).getByText("No commits yet on trunk"), "allowed once, git runs");
		await waitFor(kvCards.nth(1).getByText("readme.md"), "allowed once, the folder is read");

		// A new session asks again; "always" is remembered for this build of the extension.
		await newSession(page);
		await waitFor(request, "a new session asks again after allow-once");
		await request.getByRole("button", { name: "Always allow" }).click();
		await page.waitForFunction(() => !document.querySelector("#approvals section"), null, { timeout: STEP });
		const saved = JSON.parse(fs.readFileSync(path.join(data, "pichamber/approvals.json"), "utf8"));
		assert(JSON.stringify(saved).includes('"git"'), `the approval is saved (${JSON.stringify(saved)})`);
		await newSession(page);
		await send(page, "/glance");
		await waitFor(kvCards.nth(0).getByText("No commits yet on trunk"), "always allowed: the next session has the grants");
		assert((await page.locator("#approvals section").count()) === 0, "and asks nothing");

		// Forgotten, it asks again; denied, the extension goes on without and says why.
		const forgot = await page.evaluate(async () => {
			const token = new URLSearchParams(location.hash.slice(1)).get("token");
			const list = await (await fetch("/api/pi/extensions", { headers: { Authorization: `Bearer ${token}` } })).json();
			const id = list.extensions[0].id;
			return (await fetch(`/api/pi/extensions/${id}/approvals`, { method: "DELETE", headers: { Authorization: `Bearer ${token}` } })).json();
		});
		assert(forgot.forgot === true, `the approval is forgotten (${JSON.stringify(forgot)})`);
		await newSession(page);
		await waitFor(request, "after forgetting, a new session asks again");
		await request.getByRole("button", { name: "Deny" }).click();
		await page.waitForFunction(() => !document.querySelector("#approvals section"), null, { timeout: STEP });
		await send(page, "/glance");
		await waitFor(kvCards.nth(0).getByText(/--allow-run=git/), "denied: git is refused, naming the flag");
		await waitFor(kvCards.nth(0).getByText(/--allow-read=/), "denied: the folder is refused, naming the flag");
		await shot(page, "approval-denied");

		// The Extensions panel: what was denied can be asked again, what was approved revoked.
		const panel = page.locator("dialog#extensions-dialog[open]");
		const glance = panel.getByRole("region", { name: "git-glance" });
		await page.getByRole("button", { name: "Extensions", exact: true }).click();
		await waitFor(glance.getByText("Denied in this session"), "the panel lists what was denied");
		await waitFor(glance.getByText("run the program git"), "item by item");
		await shot(page, "extensions-panel");
		await glance.getByRole("button", { name: "Ask me again" }).click();
		await waitFor(glance.getByText("Asks for (answer above the transcript)"), "asked again, the panel shows the open question");
		await panel.getByRole("button", { name: "Close" }).click();
		await waitFor(request, "the request shows above the transcript again");
		await request.getByRole("button", { name: "Allow once" }).click();
		await page.waitForFunction(() => !document.querySelector("#approvals section"), null, { timeout: STEP });
		await send(page, "/glance");
		await waitFor(kvCards.nth(1).getByText("No commits yet on trunk"), "allowed when asked again, git runs");
		await page.getByRole("button", { name: "Extensions", exact: true }).click();
		await waitFor(glance.getByText("May, approved by you"), "the panel lists what the user approved");
		await glance.getByRole("button", { name: "Revoke" }).click();
		await waitFor(glance.getByText("Denied in this session"), "revoked, the items count as denied again");
		await panel.getByRole("button", { name: "Close" }).click();
		await send(page, "/glance");
		await waitFor(kvCards.nth(2).getByText(/--allow-run=git/), "revoked: git is refused again");
		assert(page.errors.length === 0, `no page errors: ${page.errors.join("; ")}`);
	} finally {
		await server.stop();
		fs.rmSync(dir, { recursive: true, force: true });
	}
});

// ---------------------------------------------------------------------------------------------
// Runner

const launchArgs = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"];

async function main() {
	const selected = cases.filter((c) => c.name.includes(FILTER));
	const workdir = fs.mkdtempSync(path.join(os.tmpdir(), "pichamber-browser-"));
	// playwright gives each launch a fresh, empty --user-data-dir of its own.
	const browser = await chromium.launch({ executablePath: CHROMIUM, args: launchArgs, timeout: 60_000 });
	const run = await startServer(["run", EXT.cards, EXT.dialogs, EXT.fixture, "--cwd", workdir, "--script", path.join(here, "model-turns.json")]);
	console.log(`server: ${run.url.replace(/token=[^&]+/, "token=…")}`);
	let passed = 0;
	let failed = 0;
	for (const c of selected) {
		const started = Date.now();
		try {
			await c.fn({ browser, run });
			passed++;
			console.log(`ok   ${c.name} (${Date.now() - started} ms)`);
		} catch (error) {
			failed++;
			console.log(`FAIL ${c.name}: ${error instanceof Failure ? error.message : error.stack}`);
			for (const context of browser.contexts()) {
				for (const [i, page] of context.pages().entries()) {
					await page.screenshot({ path: path.join(ARTIFACTS, `FAIL-${c.name.replace(/\W+/g, "-")}-${i}.png`), fullPage: true }).catch(() => {});
				}
			}
		}
		for (const context of browser.contexts()) await context.close();
	}
	await run.stop();
	await browser.close();
	fs.rmSync(workdir, { recursive: true, force: true });
	console.log(`screenshots: ${ARTIFACTS}`);
	console.log(`${passed} passed, ${failed} failed`);
	process.exit(failed ? 1 : 0);
}

main().catch((error) => {
	console.error(error);
	process.exit(1);
});
