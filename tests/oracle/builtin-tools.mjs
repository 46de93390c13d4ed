// Oracle for pichamber's built-in tools: runs pi 0.73.1's own tool definitions (read, bash,
// edit, write, grep, find, ls) on cases given as JSON and prints what each returned or threw.
// PI_PACKAGE_DIR names another installed pi-coding-agent package to ask instead (pi 1.6.0's,
// run with a node it supports).
//
// Usage: node builtin-tools.mjs --specs
//   prints the seven tool definitions as the model sees them: [{ name, label, description,
//   parameters, promptSnippet, promptGuidelines }] in pi's order.
// Usage: node builtin-tools.mjs CASES.json
//   CASES.json: [{ "tool": "read", "args": {...}, "cwd": "/abs/dir" }, ...]
//   The token <ROOT> in string arguments is replaced by the case's cwd.
// Output (stdout, one JSON document):
//   { "tools": { "rg": bool, "fd": bool },
//     "results": [ { "ok": { "content": [...], "details": ..., ["isError": true], ["structuredContent": ...] }, "updates": [first, last] }
//                  | { "error": "...", "updates": [first, last] } | { "skipped": "why" } ] }
//
// grep and find shell out to ripgrep (>= 14: older releases word errors differently from the
// one pi downloads) and fd (>= 9, for --no-require-git); without them on PATH those cases are
// reported as skipped. PI_OFFLINE keeps pi from downloading them.

import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

process.env.PI_OFFLINE = "1";
process.env.PI_CODING_AGENT_DIR = mkdtempSync(join(tmpdir(), "pi-oracle-agent-"));

const pi = await import(
	process.env.PI_PACKAGE_DIR
		? pathToFileURL(join(process.env.PI_PACKAGE_DIR, "dist/index.js")).href
		: "@mariozechner/pi-coding-agent"
);

const factories = {
	read: pi.createReadToolDefinition,
	bash: pi.createBashToolDefinition,
	edit: pi.createEditToolDefinition,
	write: pi.createWriteToolDefinition,
	grep: pi.createGrepToolDefinition,
	find: pi.createFindToolDefinition,
	ls: pi.createLsToolDefinition,
};

function runs(cmd, args) {
	const r = spawnSync(cmd, args, { stdio: "pipe" });
	return !r.error && r.status === 0;
}

function majorVersion(cmd) {
	const r = spawnSync(cmd, ["--version"], { stdio: "pipe", encoding: "utf-8" });
	const m = !r.error && r.status === 0 ? /(\d+)\.\d+/.exec(r.stdout) : null;
	return m ? Number(m[1]) : 0;
}

// pi looks for `fd`, then `fdfind`, and uses the first that runs.
const fdName = ["fd", "fdfind"].find((name) => runs(name, ["--version"]));
const tools = {
	rg: majorVersion("rg") >= 14,
	fd: fdName !== undefined && runs(fdName, ["--no-require-git", "--version"]),
};

function withRoot(value, root) {
	if (typeof value === "string") return value.split("<ROOT>").join(root);
	if (Array.isArray(value)) return value.map((v) => withRoot(v, root));
	if (value && typeof value === "object") {
		return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withRoot(v, root)]));
	}
	return value;
}

if (process.argv[2] === "--specs") {
	const specs = Object.values(factories).map((factory) => {
		const d = factory(process.cwd());
		return {
			name: d.name,
			label: d.label,
			description: d.description,
			parameters: d.parameters,
			promptSnippet: d.promptSnippet ?? null,
			promptGuidelines: d.promptGuidelines ?? [],
		};
	});
	process.stdout.write(JSON.stringify(specs));
	process.exit(0);
}

const cases = JSON.parse(readFileSync(process.argv[2], "utf-8"));
const results = [];
for (const c of cases) {
	if ((c.tool === "grep" && !tools.rg) || (c.tool === "find" && !tools.fd)) {
		results.push({ skipped: `${c.tool === "grep" ? "rg >= 14" : "fd >= 9"} not on PATH` });
		continue;
	}
	// rg resolves --glob against the process's cwd, which in pi is the session's cwd.
	process.chdir(c.cwd);
	const def = factories[c.tool](c.cwd);
	let args = withRoot(c.args, c.cwd);
	if (def.prepareArguments) args = def.prepareArguments(args);
	// Partial results (bash): the first and the last, as JSON would carry them.
	const updates = [];
	const onUpdate = (partial) => updates.push(JSON.parse(JSON.stringify(partial)));
	const ends = () => (updates.length ? [updates[0], updates[updates.length - 1]] : []);
	try {
		const result = await def.execute("call-1", args, undefined, onUpdate, undefined);
		const ok = { content: result.content, details: result.details ?? null };
		// pi 1.6.0: an error result that is not thrown, and the result for programmatic callers.
		if (result.isError) ok.isError = true;
		if (result.structuredContent !== undefined) ok.structuredContent = result.structuredContent;
		results.push({ ok, updates: ends() });
	} catch (error) {
		results.push({ error: error instanceof Error ? error.message : String(error), updates: ends() });
	}
}
process.stdout.write(JSON.stringify({ tools, results }));
