// PiChamber web GUI: renders the PiChamber GUI protocol (docs/GUI-API.md) for one user.
//
// Security rules this file keeps:
// - the token comes from the URL fragment and stays in memory (never cookies or storage);
// - extension text is only ever set through textContent / attributes built with DOM APIs;
//   the one exception is a markdown card's `html`, which the server renders and sanitises;
// - app surfaces run in <iframe sandbox="allow-scripts" srcdoc>; the page injects a small
//   bridge that posts clicks on [data-pichamber-command] to us, and we forward them with that
//   mount's token, after checking the message came from that iframe's window.

const API = "/api/pi";
const COMMAND_NAME = /^[A-Za-z0-9][A-Za-z0-9:_-]{0,127}$/;
const TONES = new Set(["info", "success", "warning", "error", "neutral"]);
const VARIANTS = new Set(["primary", "secondary", "danger"]);

// ---------------------------------------------------------------------------------------------
// State

const state = {
	token: null,
	sessions: new Map(), // id -> SessionSummary
	live: new Map(), // id -> { snapshot, busy }
	current: null, // open session id
	lastSent: null, // { sessionId, text } of the last message sent: put back if the host refuses it
	rendered: new Set(), // entry ids rendered in the open transcript
	commands: [], // commands of the open session
	settings: { triggers: [] },
	lastEventId: null,
	connected: false,
	stream: null, // AbortController of the event stream
	mounts: new Map(), // appId -> { iframe, token, html, sessionId }
	pendingLoading: new Set(), // buttons showing a spinner until the next card
	follow: true, // new output scrolls the transcript while the reader is at its end
	tools: new Map(), // toolCallId -> { name, args, status, output } of the open session
	panelEntries: new Map(), // panel id -> its newest transcript item (older ones are history)
	extensions: new Map(), // extension id -> { name, version?, tools, commands }
	access: new Map(), // extension id -> where its requests stand in the open session
	pendingCloses: new Map(), // session id -> timer: closed on the server unless undone
	errors: new Map(), // session id -> extension errors seen by this page [{ extension, event, error }]
};

function emptySnapshot() {
	return { status: {}, widgets: {}, title: null, dialogs: [], panels: {}, apps: {}, approvals: [], busy: false };
}

function liveOf(sessionId) {
	let live = state.live.get(sessionId);
	if (!live) {
		live = { snapshot: emptySnapshot() };
		state.live.set(sessionId, live);
	}
	return live;
}

// ---------------------------------------------------------------------------------------------
// Small DOM helpers (no innerHTML)

const $ = (id) => document.getElementById(id);

function h(tag, attrs, ...children) {
	const el = document.createElement(tag);
	if (attrs) {
		for (const [key, value] of Object.entries(attrs)) {
			if (value === undefined || value === null || value === false) continue;
			if (key === "class") el.className = value;
			else if (key === "text") el.textContent = String(value);
			else if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
			else if (key === "dataset") Object.assign(el.dataset, value);
			else el.setAttribute(key, value === true ? "" : String(value));
		}
	}
	for (const child of children.flat()) {
		if (child === undefined || child === null || child === false) continue;
		el.append(child instanceof Node ? child : document.createTextNode(String(child)));
	}
	return el;
}

const str = (value, max = 50_000) => {
	if (value === undefined || value === null) return "";
	const text = typeof value === "string" ? value : typeof value === "object" ? JSON.stringify(value) : String(value);
	return text.length > max ? `${text.slice(0, max)}…` : text;
};

const toneClass = (tone) => (TONES.has(tone) ? `tone-${tone}` : "");

// A few icons for action buttons, drawn as SVG paths; unknown names are ignored.
const ICONS = {
	file: "M6 2h8l4 4v16H6z M14 2v4h4",
	folder: "M3 6h6l2 2h10v12H3z",
	refresh: "M20 12a8 8 0 1 1-2.3-5.7 M20 4v5h-5",
	play: "M7 4l13 8-13 8z",
	stop: "M6 6h12v12H6z",
	check: "M4 12l5 5L20 6",
	x: "M6 6l12 12 M18 6L6 18",
	close: "M6 6l12 12 M18 6L6 18",
	trash: "M4 7h16 M9 7V4h6v3 M6 7l1 13h10l1-13",
	plus: "M12 5v14 M5 12h14",
	search: "M10 17a7 7 0 1 1 0-14 7 7 0 0 1 0 14z M15 15l6 6",
	external: "M14 4h6v6 M20 4l-9 9 M18 14v6H4V6h6",
	settings: "M12 15a3 3 0 1 0 0-6 3 3 0 0 0 0 6z M12 2v3 M12 19v3 M2 12h3 M19 12h3",
	info: "M12 8h.01 M11 12h1v5h1 M12 22a10 10 0 1 1 0-20 10 10 0 0 1 0 20z",
	warning: "M12 3l10 18H2z M12 10v4 M12 17h.01",
	dot: "M12 9a3 3 0 1 0 0 6 3 3 0 0 0 0-6z",
};

function icon(name) {
	const d = typeof name === "string" && Object.hasOwn(ICONS, name) ? ICONS[name] : null;
	if (!d) return null;
	const ns = "http://www.w3.org/2000/svg";
	const svg = document.createElementNS(ns, "svg");
	svg.setAttribute("viewBox", "0 0 24 24");
	svg.setAttribute("class", "icon");
	svg.setAttribute("aria-hidden", "true");
	const path = document.createElementNS(ns, "path");
	path.setAttribute("d", d);
	svg.append(path);
	return svg;
}

/** A passing message; `action` ({ label, run }) adds a button to it (Undo). */
function toast(message, type = "info", action = null, ms = type === "error" ? 9000 : 5000) {
	const el = h("div", { class: `toast ${toneClass(type === "warning" || type === "error" ? type : "info")}`, role: type === "error" ? "alert" : "status" }, h("span", { text: str(message, 2000) }));
	if (action) {
		el.append(
			h("button", {
				type: "button",
				class: "btn secondary toast-action",
				text: action.label,
				onclick: () => {
					el.remove();
					action.run();
				},
			}),
		);
	}
	$("toasts").append(el);
	setTimeout(() => el.remove(), ms);
}

// ---------------------------------------------------------------------------------------------
// HTTP

class ApiError extends Error {
	constructor(status, body) {
		super(body?.error || `HTTP ${status}`);
		this.status = status;
		this.body = body;
	}
}

async function api(method, path, body) {
	const headers = { Authorization: `Bearer ${state.token}` };
	if (body !== undefined) headers["Content-Type"] = "application/json";
	const response = await fetch(API + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), cache: "no-store" });
	if (response.status === 401) {
		showLogin("The server did not accept this token.");
		throw new ApiError(401, { error: "unauthorized" });
	}
	const text = await response.text();
	let data = null;
	if (text) {
		try {
			data = JSON.parse(text);
		} catch {
			data = { error: text };
		}
	}
	if (!response.ok) throw new ApiError(response.status, data);
	return data;
}

/** Sends `/command args` (or plain text) through the prompt route, queueing it when busy. */
async function sendPrompt(sessionId, text) {
	try {
		await api("POST", `/sessions/${encodeURIComponent(sessionId)}/prompt`, { text });
	} catch (error) {
		if (error.status === 409) {
			await api("POST", `/sessions/${encodeURIComponent(sessionId)}/prompt`, { text, streamingBehavior: "followUp" });
			toast("Queued: the session is busy", "info");
			return;
		}
		throw error;
	}
}

/** Runs an extension's command (an action, an app, a trigger); the server echoes it. */
const runCommand = (command, args) => {
	if (!state.current) return Promise.resolve();
	const text = args ? `/${command} ${args}` : `/${command}`;
	scrollToEnd({ force: true });
	return sendPrompt(state.current, text).catch((error) => toast(`/${command}: ${error.message}`, "error"));
};

// ---------------------------------------------------------------------------------------------
// Event stream: fetch-based SSE reader with the bearer header and Last-Event-ID

async function connectStream() {
	let delay = 300;
	let first = true;
	for (;;) {
		const controller = new AbortController();
		state.stream = controller;
		try {
			const headers = { Authorization: `Bearer ${state.token}`, Accept: "text/event-stream" };
			if (state.lastEventId !== null) headers["Last-Event-ID"] = state.lastEventId;
			const response = await fetch(`${API}/events`, { headers, signal: controller.signal, cache: "no-store" });
			if (response.status === 401) {
				showLogin("The server did not accept this token.");
				return;
			}
			if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}`);
			setConnected(true);
			delay = 300;
			if (!first) await resync();
			first = false;
			await readEvents(response.body);
			throw new Error("stream ended");
		} catch (error) {
			setConnected(false, error);
			await new Promise((resolve) => setTimeout(resolve, delay));
			delay = Math.min(delay * 2, 5000);
		}
	}
}

async function readEvents(body) {
	const reader = body.pipeThrough(new TextDecoderStream()).getReader();
	let buffer = "";
	for (;;) {
		const { value, done } = await reader.read();
		if (done) return;
		buffer += value;
		buffer = buffer.replace(/\r\n?/g, "\n");
		let cut;
		while ((cut = buffer.indexOf("\n\n")) >= 0) {
			const block = buffer.slice(0, cut);
			buffer = buffer.slice(cut + 2);
			const event = { id: null, name: "message", data: [] };
			for (const line of block.split("\n")) {
				if (!line || line.startsWith(":")) continue;
				const colon = line.indexOf(":");
				const field = colon < 0 ? line : line.slice(0, colon);
				let val = colon < 0 ? "" : line.slice(colon + 1);
				if (val.startsWith(" ")) val = val.slice(1);
				if (field === "id") event.id = val;
				else if (field === "event") event.name = val;
				else if (field === "data") event.data.push(val);
			}
			if (event.id !== null) state.lastEventId = event.id;
			if (!event.data.length) continue;
			let data;
			try {
				data = JSON.parse(event.data.join("\n"));
			} catch {
				continue;
			}
			try {
				handleEvent(event.name, data);
			} catch (error) {
				console.error("pichamber: event", event.name, error);
			}
		}
	}
}

function setConnected(connected, error) {
	state.connected = connected;
	const el = $("conn-status");
	el.textContent = connected ? "Connected" : `Reconnecting…${error ? "" : ""}`;
	el.classList.toggle("offline", !connected);
	document.body.dataset.connected = connected ? "true" : "false";
}

/** After a reconnect: agent events and entries are not replayed, so reload what we show. */
async function resync() {
	await loadSessions();
	if (state.current) await openSession(state.current, { keepScroll: true });
}

function handleEvent(name, data) {
	const sessionId = data?.sessionId;
	switch (name) {
		case "session.snapshot": {
			const live = liveOf(sessionId);
			live.snapshot = { ...emptySnapshot(), ...(data.snapshot || {}) };
			updateSessionBusy(sessionId, !!live.snapshot.busy);
			if (sessionId === state.current) renderLive();
			break;
		}
		case "session.created":
			if (data.session) state.sessions.set(sessionId, data.session);
			renderSessionList();
			break;
		case "session.closed":
			state.sessions.delete(sessionId);
			state.live.delete(sessionId);
			if (state.current === sessionId) closeView();
			renderSessionList();
			break;
		case "session.entry":
			if (sessionId === state.current && data.entry) appendEntry(data.entry);
			break;
		case "agent":
			handleAgentEvent(sessionId, data.event || {});
			break;
		case "extension.ui":
			handleUiEvent(sessionId, data);
			break;
		case "extension.error": {
			// "<runtime>": the host's own refusal (a prompt without a model), not an extension's fault.
			const note = { kind: data.extension === "<runtime>" ? "host" : "error", text: data.error, extension: data.extension, event: data.event };
			if (note.kind === "error") {
				const list = state.errors.get(sessionId) || [];
				list.push(errorOf(note));
				state.errors.set(sessionId, list.slice(-50));
			}
			if (sessionId === state.current) appendTranscriptNote(note);
			// A message the host refused (no model) goes back into an empty box: nothing typed is lost.
			const input = $("prompt-input");
			if (note.kind === "host" && data.event === "prompt" && state.lastSent?.sessionId === sessionId && sessionId === state.current && !input.value) {
				input.value = state.lastSent.text;
				fitComposer();
				state.lastSent = null;
			}
			if (state.extensionsOpen) refreshExtensions();
			break;
		}
		case "session.note":
			// The notes of other sessions are read with their transcript when one is opened.
			if (sessionId === state.current && data.note) appendTranscriptNote(data.note);
			break;
		default:
			break;
	}
}

function handleUiEvent(sessionId, data) {
	const snap = liveOf(sessionId).snapshot;
	const isCurrent = sessionId === state.current;
	switch (data.kind) {
		case "status":
			if (data.text === undefined || data.text === null) delete snap.status[data.key];
			else snap.status[data.key] = data.text;
			if (isCurrent) renderStatus();
			break;
		case "widget":
			if (!data.lines) delete snap.widgets[data.key];
			else snap.widgets[data.key] = { lines: data.lines, placement: data.placement || "aboveEditor" };
			if (isCurrent) renderWidgets();
			break;
		case "title":
			snap.title = data.title;
			if (isCurrent) renderTitle();
			break;
		case "notify":
			if (isCurrent) toast(data.message, data.notifyType || "info");
			break;
		case "editorText":
			if (isCurrent) {
				$("prompt-input").value = data.text ?? "";
			}
			break;
		case "dialog":
			if (data.dialog) {
				snap.dialogs = snap.dialogs.filter((d) => d.id !== data.dialog.id);
				snap.dialogs.push(data.dialog);
			}
			if (isCurrent) renderDialogs();
			break;
		case "dialog.closed":
			snap.dialogs = snap.dialogs.filter((d) => d.id !== data.dialogId);
			if (isCurrent) renderDialogs();
			break;
		case "panel":
			if (data.removed) delete snap.panels[data.id];
			else if (data.card?.id !== undefined) snap.panels[data.card.id] = data.card;
			if (isCurrent) renderDock();
			break;
		case "approval":
			if (data.approval?.extension !== undefined) {
				snap.approvals = (snap.approvals || []).filter((a) => a.extension !== data.approval.extension);
				snap.approvals.push(data.approval);
			}
			if (isCurrent) renderApprovals();
			break;
		case "approval.closed":
			snap.approvals = (snap.approvals || []).filter((a) => a.extension !== data.extension);
			if (isCurrent) renderApprovals();
			if (isCurrent && state.extensionsOpen) refreshExtensions();
			break;
		case "access":
			if (isCurrent && state.extensionsOpen) refreshExtensions();
			break;
		case "app":
			if (data.removed) delete snap.apps[data.appId];
			else if (data.app?.appId !== undefined) snap.apps[data.app.appId] = data.app;
			if (isCurrent) renderApps();
			break;
		default:
			break;
	}
}

// ---------------------------------------------------------------------------------------------
// Sessions

async function loadSessions() {
	const data = await api("GET", "/sessions");
	state.sessions = new Map((data?.sessions || []).map((s) => [s.id, s]));
	renderSessionList();
}

/** A session's name: what an extension named it, else its first prompt. */
function sessionLabel(summary) {
	return summary.name || summary.title || "Untitled session";
}

/** "Today", "Yesterday" or the date a session was opened. */
function dayLabel(value) {
	const date = new Date(typeof value === "number" ? value : String(value));
	if (Number.isNaN(date.getTime())) return "Earlier";
	const day = (d) => new Date(d.getFullYear(), d.getMonth(), d.getDate()).getTime();
	const days = Math.round((day(new Date()) - day(date)) / 86_400_000);
	if (days === 0) return "Today";
	if (days === 1) return "Yesterday";
	return date.toLocaleDateString([], { weekday: days < 7 ? "long" : undefined, day: "numeric", month: "long", year: days > 300 ? "numeric" : undefined });
}

function renderSessionList() {
	const list = $("session-list");
	list.replaceChildren();
	// Newest first, grouped by the day they were opened; ones being closed are already gone.
	const sessions = [...state.sessions.values()].filter((s) => !state.pendingCloses.has(s.id)).sort((a, b) => String(b.createdAt).localeCompare(String(a.createdAt)));
	if (!sessions.length) list.append(h("li", { class: "muted" }, "No sessions yet."));
	let group = null;
	for (const session of sessions) {
		const day = dayLabel(session.createdAt);
		if (day !== group) {
			group = day;
			list.append(h("li", { class: "session-day", text: day }));
		}
		const label = sessionLabel(session);
		const open = h(
			"button",
			{
				type: "button",
				class: "session-open",
				"aria-current": session.id === state.current ? "true" : undefined,
				onclick: () => openSession(session.id),
			},
			h("span", { class: "session-name", text: label }),
			session.busy ? h("span", { class: "dot", title: "working", "aria-label": "working" }) : null,
			h("span", { class: "session-time", text: formatTime(session.createdAt) }),
		);
		const close = h("button", { type: "button", class: "ghost session-close", "aria-label": `Close ${label}`, title: "Close session", onclick: () => closeSession(session.id) }, "×");
		list.append(h("li", { class: "session-item", dataset: { sessionId: session.id } }, open, close));
	}
}

function formatTime(value) {
	if (!value) return "";
	const date = new Date(typeof value === "number" ? value : String(value));
	return Number.isNaN(date.getTime()) ? "" : date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function updateSessionBusy(sessionId, busy) {
	const summary = state.sessions.get(sessionId);
	if (summary && summary.busy !== busy) {
		summary.busy = busy;
		renderSessionList();
	}
	if (sessionId === state.current) renderBusy();
}

async function createSession() {
	try {
		const summary = await api("POST", "/sessions", {});
		state.sessions.set(summary.id, summary);
		renderSessionList();
		await openSession(summary.id);
	} catch (error) {
		toast(`Could not create a session: ${error.message}`, "error");
	}
}

// Closing ends the session's extensions for good, so it waits a few seconds behind an Undo.
const CLOSE_UNDO_MS = 6000;

function closeSession(sessionId) {
	const summary = state.sessions.get(sessionId);
	if (!summary || state.pendingCloses.has(sessionId)) return;
	state.pendingCloses.set(
		sessionId,
		setTimeout(() => finishClose(sessionId), CLOSE_UNDO_MS),
	);
	if (state.current === sessionId) closeView();
	renderSessionList();
	toast(`Closed “${str(sessionLabel(summary), 80)}”`, "info", { label: "Undo", run: () => undoClose(sessionId) }, CLOSE_UNDO_MS);
}

function undoClose(sessionId) {
	clearTimeout(state.pendingCloses.get(sessionId));
	if (!state.pendingCloses.delete(sessionId)) return;
	renderSessionList();
	openSession(sessionId);
}

async function finishClose(sessionId) {
	if (!state.pendingCloses.has(sessionId)) return;
	try {
		await api("DELETE", `/sessions/${encodeURIComponent(sessionId)}`);
	} catch (error) {
		if (error.status !== 404) {
			state.pendingCloses.delete(sessionId);
			renderSessionList();
			toast(`Could not close the session: ${error.message}`, "error");
			return;
		}
	}
	state.pendingCloses.delete(sessionId);
	state.sessions.delete(sessionId);
	state.live.delete(sessionId);
	renderSessionList();
}

// Leaving the page does not cancel a close the user asked for.
window.addEventListener("pagehide", () => {
	for (const [sessionId, timer] of state.pendingCloses) {
		clearTimeout(timer);
		fetch(`${API}/sessions/${encodeURIComponent(sessionId)}`, { method: "DELETE", headers: { Authorization: `Bearer ${state.token}` }, keepalive: true }).catch(() => {});
	}
});

function closeView() {
	state.current = null;
	unmountAllApps();
	$("session-view").hidden = true;
	$("no-session").hidden = false;
	setFragment();
	closeUiDialog();
	document.title = "PiChamber";
}

async function openSession(sessionId, { keepScroll = false } = {}) {
	let data;
	try {
		data = await api("GET", `/sessions/${encodeURIComponent(sessionId)}`);
	} catch (error) {
		if (error.status === 404) {
			toast("No such session", "warning");
			state.sessions.delete(sessionId);
			renderSessionList();
			if (state.current === sessionId) closeView();
		} else if (error.status !== 401) toast(`Could not open the session: ${error.message}`, "error");
		return;
	}
	const switching = state.current !== sessionId;
	if (switching) unmountAllApps();
	state.current = sessionId;
	if (data.session) state.sessions.set(sessionId, data.session);
	liveOf(sessionId).snapshot = { ...emptySnapshot(), ...(data.snapshot || {}) };
	const transcript = $("transcript");
	const scroll = transcript.scrollTop;
	transcript.replaceChildren();
	state.rendered.clear();
	state.tools.clear();
	state.panelEntries.clear();
	liveElements.length = 0;
	// Notes go after the entry they followed; those after an entry of another branch are not shown.
	const notes = Array.isArray(data.notes) ? data.notes.filter((n) => n && typeof n === "object") : [];
	const notesAfter = new Map();
	for (const note of notes) {
		const key = typeof note.after === "string" ? note.after : null;
		notesAfter.set(key, [...(notesAfter.get(key) || []), note]);
	}
	const placeNotes = (key) => (notesAfter.get(key) || []).forEach((note) => appendTranscriptNote(note, { scroll: false }));
	placeNotes(null);
	for (const entry of data.transcript || []) {
		appendEntry(entry, { scroll: false });
		if (typeof entry?.id === "string") placeNotes(entry.id);
	}
	state.errors.set(sessionId, notes.filter((n) => n.kind === "error").map(errorOf).slice(-50));
	$("no-session").hidden = true;
	$("session-view").hidden = false;
	setDrawer(false);
	renderSessionList();
	renderLive();
	renderSessionEmpty();
	setFragment();
	if (keepScroll && !switching) {
		transcript.scrollTop = scroll;
		state.follow = atBottom(transcript);
	} else scrollToEnd({ force: true });
	loadCommands(sessionId);
	loadAccess(sessionId);
	if (switching) $("prompt-input").focus();
}

/** What the open session's extensions may do (the empty state says it). */
async function loadAccess(sessionId) {
	try {
		const data = await api("GET", `/sessions/${encodeURIComponent(sessionId)}/extensions`);
		if (state.current !== sessionId) return;
		state.access = new Map((data?.extensions || []).map((e) => [e.extension, e]));
	} catch {
		state.access = new Map();
	}
	renderSessionEmpty();
}

async function loadCommands(sessionId) {
	try {
		const data = await api("GET", `/sessions/${encodeURIComponent(sessionId)}/commands`);
		if (state.current === sessionId) state.commands = Array.isArray(data?.commands) ? data.commands : [];
	} catch {
		state.commands = [];
	}
}

function setFragment() {
	const params = new URLSearchParams();
	params.set("token", state.token);
	if (state.current) params.set("session", state.current);
	history.replaceState(null, "", `#${params.toString()}`);
}

// ---------------------------------------------------------------------------------------------
// Transcript

function contentText(content) {
	if (typeof content === "string") return content;
	if (!Array.isArray(content)) return str(content);
	return content
		.map((block) => {
			if (block?.type === "text") return block.text ?? "";
			if (block?.type === "image") return "[image]";
			return "";
		})
		.join("");
}

function messageItem(role, label, ...children) {
	return h("li", { class: `msg msg-${role}` }, h("div", { class: "msg-role", text: label }), ...children);
}

function renderAssistantContent(content) {
	const parts = [];
	const blocks = Array.isArray(content) ? content : [{ type: "text", text: str(content) }];
	for (const block of blocks) {
		if (block?.type === "text") parts.push(markdownBlock(block));
		else if (block?.type === "thinking") parts.push(h("details", { class: "thinking" }, h("summary", { text: "Thinking" }), h("div", { class: "msg-text", text: block.thinking ?? "" })));
		else if (block?.type === "toolCall") parts.push(toolRow(str(block.id, 200), block.name, block.arguments));
	}
	return parts;
}

/** An assistant's text block: the server's sanitised rendering of its markdown, when it sent one. */
function markdownBlock(block) {
	const div = h("div", { class: "markdown" });
	setMarkdown(div, block);
	return div;
}

function setMarkdown(div, block) {
	if (typeof block?.html === "string") {
		// `html` is rendered and sanitised by the server (docs/GUI-API.md).
		div.innerHTML = block.html;
		div.classList.remove("plain");
		addCopyButtons(div);
	} else {
		div.textContent = block?.text ?? "";
		div.classList.add("plain");
	}
}

/** Each code block of rendered markdown gets a Copy button. */
function addCopyButtons(root) {
	for (const pre of root.querySelectorAll("pre")) {
		if (pre.parentElement?.classList.contains("code-block")) continue;
		const button = h("button", { type: "button", class: "copy-code", text: "Copy", title: "Copy the code" });
		button.addEventListener("click", async () => {
			const text = pre.textContent;
			let said;
			try {
				await navigator.clipboard.writeText(text);
				said = "Copied";
			} catch {
				said = "Copy failed";
			}
			// Also said in the toasts' live region, so a screen reader hears it.
			button.textContent = said;
			$("toasts").append(h("span", { class: "sr-only", role: "status", text: said }));
			setTimeout(() => {
				button.textContent = "Copy";
				for (const el of $("toasts").querySelectorAll(".sr-only")) el.remove();
			}, 1500);
		});
		const wrap = h("div", { class: "code-block" });
		pre.replaceWith(wrap);
		wrap.append(pre, button);
	}
}

// Tool calls: one row per call, holding its arguments and (once it ran) its result. Rows read
// their state from state.tools, so a call shown while streaming and again from its saved entry
// shows the same thing.
const TOOL_STATUS = { pending: "not run yet", running: "running", done: "done", error: "failed" };

function toolRow(id, name, args) {
	const known = state.tools.get(id);
	if (!known) state.tools.set(id, { name, args, status: "pending" });
	const brief = str(args ?? {}, 160);
	const row = h(
		"details",
		{ class: "tool-row", dataset: { toolCallId: id } },
		h("summary", {}, h("span", { class: "tool-status" }), h("span", { class: "tool-name", text: str(name, 200) }), h("code", { class: "tool-brief", text: brief })),
		h("div", { class: "tool-body" }, h("div", { class: "tool-label", text: "Arguments" }), h("pre", { class: "tool-args", text: JSON.stringify(args ?? {}, null, 2) }), h("div", { class: "tool-label tool-result-label", text: "Result" }), h("pre", { class: "tool-output" })),
	);
	paintToolRow(row);
	return row;
}

function paintToolRow(row) {
	const tool = state.tools.get(row.dataset.toolCallId) || { status: "pending" };
	const status = Object.hasOwn(TOOL_STATUS, tool.status) ? tool.status : "pending";
	row.dataset.status = status;
	row.classList.toggle("is-error", status === "error");
	const mark = row.querySelector(".tool-status");
	mark.replaceChildren(status === "running" ? h("span", { class: "spinner", "aria-hidden": "true" }) : icon(status === "done" ? "check" : status === "error" ? "x" : "dot"));
	mark.title = TOOL_STATUS[status];
	mark.setAttribute("aria-label", TOOL_STATUS[status]);
	const output = tool.output ?? "";
	row.querySelector(".tool-output").textContent = output;
	row.querySelector(".tool-output").hidden = !output;
	row.querySelector(".tool-result-label").hidden = !output;
}

function setTool(id, patch) {
	state.tools.set(id, { ...(state.tools.get(id) || { status: "pending" }), ...patch });
	for (const row of toolRows(id)) paintToolRow(row);
}

const toolRows = (id) => $("transcript").querySelectorAll(`.tool-row[data-tool-call-id="${CSS.escape(id)}"]`);

function renderMessage(message) {
	const role = message?.role;
	if (role === "user") return messageItem("user", "You", h("div", { class: "msg-text", text: contentText(message.content) }));
	if (role === "assistant") {
		const item = messageItem("assistant", "Assistant", ...renderAssistantContent(message.content));
		if (message.stopReason === "error" && message.errorMessage) item.append(h("div", { class: "msg-error", text: str(message.errorMessage, 4000) }));
		return item;
	}
	if (role === "toolResult") {
		const id = str(message.toolCallId, 200);
		setTool(id, { status: message.isError ? "error" : "done", output: contentText(message.content) });
		// Shown in its call's row; a result whose call is not on the page gets a row of its own.
		if (toolRows(id).length) return null;
		return h("li", { class: "msg msg-tool" }, toolRow(id, message.toolName, state.tools.get(id)?.args));
	}
	if (role === "bashExecution") {
		return messageItem("tool", "Shell", h("code", { text: `$ ${str(message.command, 4000)}` }), h("pre", { class: "tool-output", text: str(message.output) }));
	}
	if (role === "custom") return genericItem(message.customType || "message", { content: message.content, details: message.details });
	// pi 1.6.0's system messages hold the prompt and the tools the model is given: a line says
	// what changed, not the whole prompt.
	if (role === "system") return h("li", { class: "note", text: systemNote(message) });
	return genericItem(role || "message", message);
}

function systemNote(message) {
	const count = (list) => (Array.isArray(list) ? list.length : 0);
	const added = count(message.toolsAdded);
	const removed = count(message.toolsRemoved);
	const parts = [];
	if (message.sections && typeof message.sections === "object") parts.push("system prompt");
	if (added) parts.push(`${added} tool${added === 1 ? "" : "s"} declared`);
	if (removed) parts.push(`${removed} tool${removed === 1 ? "" : "s"} withdrawn`);
	return parts.length ? `Model given: ${parts.join(", ")}` : "System prompt updated";
}

function genericItem(label, json) {
	return h("li", { class: "msg msg-card" }, genericCard(label, json));
}

function genericCard(label, json) {
	return h(
		"details",
		{ class: "card card-generic" },
		h("summary", { text: str(label, 256) }),
		h("pre", { class: "generic-json", text: str(JSON.stringify(json ?? null, null, 2)) }),
	);
}

function entryElement(entry) {
	switch (entry.type) {
		case "message":
			return renderMessage(entry.message || {});
		case "custom":
		case "custom_message": {
			if (entry.card) {
				if (entry.card.removed) return h("li", { class: "note panel-removed" });
				const item = h("li", { class: "msg msg-card" }, renderCard(entry.card));
				if (entry.card.id !== undefined && entry.card.id !== null) {
					// The dock carries a panel's live state and actions; the transcript its history.
					item.classList.add("panel-history");
					item.dataset.panelTitle = str(entry.card.title, 256);
					disableActions(item);
				}
				return item;
			}
			if (entry.customType === "pichamber.app") {
				const title = entry.data?.title || entry.data?.appId || "app";
				return h("li", { class: "note", text: entry.data?.removed ? `App ${str(entry.data?.appId, 128)} removed` : `App surface: ${str(title, 256)}` });
			}
			if (entry.type === "custom_message") return genericItem(entry.customType || "message", entry.content);
			return genericItem(entry.customType || "entry", entry.data);
		}
		case "compaction":
			return h("li", { class: "note" }, h("details", {}, h("summary", { text: "Context compacted" }), h("div", { class: "msg-text", text: str(entry.summary) })));
		case "branch_summary":
			return h("li", { class: "note" }, h("details", {}, h("summary", { text: "Branch summary" }), h("div", { class: "msg-text", text: str(entry.summary) })));
		case "model_change":
			return h("li", { class: "note", text: `Model: ${str(entry.provider, 200)}/${str(entry.modelId, 200)}` });
		case "thinking_level_change":
			return h("li", { class: "note", text: `Thinking level: ${str(entry.thinkingLevel, 50)}` });
		case "session_info":
			return h("li", { class: "note", text: entry.name ? `Session named “${str(entry.name, 256)}”` : "Session name cleared" });
		default:
			return null;
	}
}

function disableActions(root) {
	for (const actions of root.querySelectorAll(".card-actions")) actions.remove();
}

/** A panel's earlier state: collapsed under its title. */
function supersede(item) {
	if (item.classList.contains("superseded")) return;
	item.classList.add("superseded");
	const title = item.dataset.panelTitle || "Panel";
	item.replaceChildren(h("details", { class: "history" }, h("summary", { text: `${title} — earlier state` }), ...item.childNodes));
}

function appendEntry(entry, { scroll = true } = {}) {
	if (entry?.id !== undefined && entry.id !== null) {
		if (state.rendered.has(entry.id)) return;
		state.rendered.add(entry.id);
	}
	if (entry.type === "message") settleLive(entry.message || {});
	if (entry.type === "session_info") nameSession(state.current, entry.name);
	const el = entryElement(entry);
	if (!el) return;
	const panelId = entry.card?.id === undefined || entry.card?.id === null ? null : String(entry.card.id);
	if (panelId !== null) {
		// A new state makes the previous one history; a removal leaves the last state shown.
		const previous = state.panelEntries.get(panelId);
		if (previous && !entry.card.removed) supersede(previous);
		if (entry.card.removed) {
			const title = previous?.dataset.panelTitle;
			el.textContent = title ? `${title}: panel removed` : "Panel removed";
			state.panelEntries.delete(panelId);
		} else state.panelEntries.set(panelId, el);
	}
	el.dataset.entryType = entry.type;
	if (entry.customType) el.dataset.customType = entry.customType;
	const transcript = $("transcript");
	const live = transcript.querySelector(".live");
	transcript.insertBefore(el, live);
	renderSessionEmpty();
	if (entry.card) clearLoading();
	if (scroll) scrollToEnd();
}

function appendNote(text, tone, { scroll = true } = {}) {
	const el = h("li", { class: `note ${toneClass(tone)}`, text });
	$("transcript").append(el);
	renderSessionEmpty();
	if (scroll) scrollToEnd();
	return el;
}

const errorOf = (note) => ({ extension: str(note.extension, 200), event: str(note.event, 200), error: str(note.text, 2000) });

/** A note of the transcript (GUI-API.md `Note`): what it shows that is not an entry. */
function appendTranscriptNote(note, { scroll = true } = {}) {
	const text = str(note.text, 2000);
	const extension = str(note.extension, 200);
	switch (note.kind) {
		case "command":
			// What the user ran, where its output lands (pi keeps no entry for a command).
			$("transcript").append(h("li", { class: "msg msg-user msg-command" }, h("code", { text })));
			renderSessionEmpty();
			if (scroll) scrollToEnd();
			break;
		case "host":
			appendNote(text, "warning", { scroll });
			break;
		case "error": {
			const el = appendNote(`Extension error in ${extension} (${str(note.event, 200)}): ${text}`, "error", { scroll });
			// A denial names a command-line flag; here the user decides in the Extensions panel.
			if (/--allow-|not granted|denied/i.test(text)) {
				el.append(" ", h("button", { type: "button", class: "btn secondary note-action", text: "What it may do…", onclick: openExtensions }));
			}
			break;
		}
		case "console":
			appendConsole(extension, note.level === "error" ? "error" : "warn", text, { scroll });
			break;
		default:
			break;
	}
}

/** An extension's console warnings and errors: one note per run of them, folded once there is more than a line. */
function appendConsole(extension, level, text, { scroll = true } = {}) {
	const transcript = $("transcript");
	let note = transcript.lastElementChild;
	if (!note?.classList.contains("console-note") || note.dataset.extension !== extension) {
		note = h("li", { class: "note console-note tone-warning", dataset: { extension } });
		note.consoleLines = [];
		transcript.append(note);
	}
	note.consoleLines = [...note.consoleLines.slice(-199), { level, text }];
	if (level === "error") note.classList.replace("tone-warning", "tone-error");
	const lines = note.consoleLines;
	const first = text.split("\n", 1)[0].slice(0, 200);
	if (lines.length === 1 && first === text) note.replaceChildren(`${extension}: ${text}`);
	else {
		const open = !!note.querySelector("details")?.open;
		const summary = lines.length === 1 ? `${extension}: ${first}` : `${extension}: ${lines.length} console messages, the last: ${first}`;
		const body = h("pre", { class: "console-lines" }, ...lines.map((l) => h("span", { class: `console-line ${l.level}`, text: `${l.text}\n` })));
		note.replaceChildren(h("details", { open }, h("summary", { text: summary }), body));
	}
	renderSessionEmpty();
	if (scroll) scrollToEnd();
}

// Following new output: while the reader is at the end of the transcript, new output keeps
// them there; once they scroll up it waits behind "Jump to latest".
const FOLLOW_SLACK = 48; // px from the end that still count as "at the end"

const atBottom = (el) => el.scrollHeight - el.scrollTop - el.clientHeight <= FOLLOW_SLACK;
// Where following last put the transcript. Its own scroll event may arrive after more output
// did (a busy machine renders in bursts): that is not the reader leaving the end.
let followedTo = 0;

function scrollToEnd({ force = false } = {}) {
	const transcript = $("transcript");
	if (force) state.follow = true;
	if (state.follow) {
		transcript.scrollTop = transcript.scrollHeight;
		followedTo = transcript.scrollTop;
		$("jump-latest").hidden = true;
	} else if (transcript.scrollHeight > transcript.clientHeight) $("jump-latest").hidden = false;
}

function setupFollow() {
	const transcript = $("transcript");
	transcript.addEventListener("scroll", () => {
		if (state.follow && transcript.scrollTop >= followedTo - FOLLOW_SLACK) return;
		state.follow = atBottom(transcript);
		if (state.follow) $("jump-latest").hidden = true;
	});
	// Whatever changes the transcript while the reader follows it (an entry added, a card or a
	// live message growing) keeps them at its end, whichever code path made the change.
	new MutationObserver(() => {
		if (state.follow) scrollToEnd();
	}).observe(transcript, { childList: true, subtree: true, characterData: true });
	$("jump-latest").addEventListener("click", () => {
		scrollToEnd({ force: true });
		$("prompt-input").focus();
	});
}

// Live (streaming) messages from `agent` events. They are dropped once the persisted entry
// arrives: a message entry settles the oldest live element of its role (tool results by id).
const liveElements = [];

function liveElement(role, label, key) {
	const el = h("li", { class: `msg msg-${role} live`, "aria-busy": "true" }, h("div", { class: "msg-role", text: label }));
	el.dataset.liveRole = role;
	if (key) el.dataset.liveKey = key;
	liveElements.push(el);
	$("transcript").append(el);
	renderSessionEmpty();
	scrollToEnd();
	return el;
}

function settleLive(message) {
	const role = message.role === "toolResult" ? "tool" : message.role;
	const index = liveElements.findIndex((el) => el.dataset.liveRole === role && (role !== "tool" || el.dataset.liveKey === String(message.toolCallId)));
	if (index >= 0) {
		liveElements[index].remove();
		liveElements.splice(index, 1);
	}
}

function currentAssistant() {
	for (let i = liveElements.length - 1; i >= 0; i--) {
		const el = liveElements[i];
		if (el.dataset.liveRole === "assistant" && el.dataset.streaming === "true") return el;
	}
	return null;
}

function handleAgentEvent(sessionId, event) {
	if (event.type === "agent_start" || event.type === "agent_end") {
		liveOf(sessionId).snapshot.busy = event.type === "agent_start";
		updateSessionBusy(sessionId, event.type === "agent_start");
	}
	if (sessionId !== state.current) return;
	switch (event.type) {
		case "message_start": {
			const role = event.message?.role;
			if (role === "assistant") {
				const el = liveElement("assistant", "Assistant");
				el.dataset.streaming = "true";
			} else if (role === "user") {
				const el = liveElement("user", "You");
				el.append(h("div", { class: "msg-text", text: contentText(event.message.content) }));
			}
			break;
		}
		case "message_update": {
			const el = currentAssistant();
			const delta = event.assistantMessageEvent || {};
			if (!el) break;
			const index = String(delta.contentIndex ?? 0);
			const blockFor = (kind) => {
				let block = el.querySelector(`[data-block="${index}"]`);
				if (!block) {
					if (kind === "thinking") {
						block = h("details", { class: "thinking" }, h("summary", { text: "Thinking" }), h("div", { class: "msg-text" }));
					} else block = h("div", { class: "markdown plain" });
					block.dataset.block = index;
					el.append(block);
				}
				return kind === "thinking" ? block.querySelector(".msg-text") : block;
			};
			const current = Array.isArray(event.message?.content) ? event.message.content[delta.contentIndex ?? 0] : null;
			if (delta.type === "text_delta") {
				const block = blockFor("text");
				if (typeof current?.html === "string") setMarkdown(block, current);
				else block.append(delta.delta ?? "");
			} else if (delta.type === "thinking_delta") blockFor("thinking").append(delta.delta ?? "");
			else if (delta.type === "toolcall_end" && delta.toolCall) el.append(toolRow(str(delta.toolCall.id, 200), delta.toolCall.name, delta.toolCall.arguments));
			else if (delta.type === "error" && delta.error?.errorMessage) el.append(h("div", { class: "msg-error", text: str(delta.error.errorMessage, 4000) }));
			scrollToEnd();
			break;
		}
		case "message_end": {
			const el = currentAssistant();
			if (el && event.message?.role === "assistant") {
				el.dataset.streaming = "false";
				el.removeAttribute("aria-busy");
				// Replace the streamed text with the final message (same content, settled).
				el.replaceChildren(h("div", { class: "msg-role", text: "Assistant" }), ...renderAssistantContent(event.message.content));
			}
			break;
		}
		case "tool_execution_start": {
			const id = str(event.toolCallId, 200);
			setTool(id, { status: "running", name: event.toolName, args: event.args });
			if (!toolRows(id).length) liveElement("tool", `Tool ${str(event.toolName, 200)}`, id).append(toolRow(id, event.toolName, event.args));
			scrollToEnd();
			break;
		}
		case "tool_execution_update":
		case "tool_execution_end": {
			const result = event.type === "tool_execution_end" ? event.result : event.partialResult;
			const patch = { output: contentText(result?.content) };
			if (event.type === "tool_execution_end") patch.status = event.isError ? "error" : "done";
			setTool(str(event.toolCallId, 200), patch);
			scrollToEnd();
			break;
		}
		default:
			break;
	}
}

// ---------------------------------------------------------------------------------------------
// Cards

function renderCard(card, { live = false } = {}) {
	const root = h("article", { class: `card card-${card.component || "generic"}` });
	if (card.id !== undefined && card.id !== null) root.dataset.cardId = str(card.id, 128);
	if (card.component === "generic" || !card.component) {
		const label = card.title || "Extension entry";
		return genericCard(label, card.props?.json ?? card.props ?? card);
	}
	if (card.title) root.append(h("h3", { class: "card-title", text: str(card.title, 256) }));
	root.append(cardBody(card));
	const actions = Array.isArray(card.actions) ? card.actions.slice(0, 8) : [];
	if (actions.length) root.append(h("div", { class: "card-actions" }, actions.map((action) => actionButton(action))));
	if (live) root.classList.add("card-live");
	return root;
}

function cardBody(card) {
	const props = card.props || {};
	switch (card.component) {
		case "markdown": {
			const body = h("div", { class: "markdown" });
			// `html` is rendered and sanitised by the server (the contract's one HTML field).
			if (typeof card.html === "string") body.innerHTML = card.html;
			else body.textContent = str(props.body);
			return body;
		}
		case "kv": {
			const dl = h("dl", { class: "kv" });
			for (const row of Array.isArray(props.rows) ? props.rows : []) {
				dl.append(h("div", { class: `kv-row ${toneClass(row?.tone)}` }, h("dt", { text: str(row?.label, 256) }), h("dd", { text: str(row?.value, 4000) })));
			}
			return dl;
		}
		case "list": {
			const ul = h("ul", { class: "list" });
			for (const item of Array.isArray(props.items) ? props.items : []) {
				if (typeof item === "string") ul.append(h("li", { text: item }));
				else ul.append(h("li", { class: toneClass(item?.tone) }, h("span", { class: "list-label", text: str(item?.label, 256) }), item?.value !== undefined ? h("span", { class: "list-value", text: str(item.value, 4000) }) : null));
			}
			return ul;
		}
		case "table": {
			const columns = Array.isArray(props.columns) ? props.columns : [];
			const table = h("table", { class: "table" });
			if (columns.length) table.append(h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", text: str(c, 256) })))));
			const tbody = h("tbody");
			for (const row of Array.isArray(props.rows) ? props.rows : []) {
				tbody.append(h("tr", {}, (Array.isArray(row) ? row : [row]).map((cell) => h("td", { text: str(cell, 4000) }))));
			}
			table.append(tbody);
			return h("div", { class: "table-wrap" }, table);
		}
		case "progress": {
			const max = Number(props.max) > 0 ? Number(props.max) : 100;
			const value = Math.max(0, Math.min(Number(props.value) || 0, max));
			const label = str(props.label, 256);
			return h(
				"div",
				{ class: "progress" },
				h("div", { class: "progress-label" }, h("span", { text: label }), h("span", { class: "progress-value", text: `${value} / ${max}` })),
				h("progress", { value, max, "aria-label": label || "Progress" }),
			);
		}
		case "badges": {
			const div = h("div", { class: "badges" });
			for (const item of Array.isArray(props.items) ? props.items.slice(0, 24) : []) {
				const label = typeof item === "string" ? item : str(item?.label, 256);
				div.append(h("span", { class: `badge ${typeof item === "string" ? "" : toneClass(item?.tone)}`, text: label }));
			}
			return div;
		}
		case "code": {
			const code = h("code", { text: str(props.code) });
			if (props.language) code.dataset.language = str(props.language, 64);
			return h("pre", { class: "code" }, code);
		}
		default:
			return h("pre", { class: "generic-json", text: str(JSON.stringify(props, null, 2)) });
	}
}

function clearLoading() {
	for (const button of state.pendingLoading) {
		if (button.isConnected) setButtonLoading(button, false);
	}
	state.pendingLoading.clear();
}

function setButtonLoading(button, loading) {
	button.disabled = loading || button.dataset.disabled === "true";
	button.toggleAttribute("aria-busy", loading);
	button.querySelector(".spinner")?.remove();
	if (loading) button.prepend(h("span", { class: "spinner", "aria-hidden": "true" }));
}

function actionButton(action) {
	const command = str(action?.command, 128);
	const label = str(action?.label, 256) || command;
	const variant = VARIANTS.has(action?.variant) ? action.variant : "secondary";
	const wrap = h("span", { class: "action" });
	const button = h("button", { type: "button", class: `btn ${variant}`, dataset: { command } }, icon(action?.icon), h("span", { text: label }));
	const valid = COMMAND_NAME.test(command);
	if (action?.disabled || !valid) {
		button.disabled = true;
		button.dataset.disabled = "true";
		button.setAttribute("aria-disabled", "true");
	}
	if (action?.loading) setButtonLoading(button, true);
	const fire = async (args) => {
		setButtonLoading(button, true);
		state.pendingLoading.add(button);
		await runCommand(command, args);
		// Release if no card arrives soon (a command need not answer with a card).
		setTimeout(() => {
			if (state.pendingLoading.has(button) && !action?.loading) {
				state.pendingLoading.delete(button);
				setButtonLoading(button, false);
			}
		}, 1500);
	};
	const argsOf = () => (action?.args === undefined ? "" : str(action.args, 50_000));

	button.addEventListener("click", () => {
		if (button.disabled) return;
		if (action?.promptForArgs) return showArgsPrompt(wrap, button, action, fire);
		if (action?.confirm) return showInlineConfirm(wrap, button, label, () => fire(argsOf()));
		fire(argsOf());
	});
	wrap.append(button);
	return wrap;
}

function showInlineConfirm(wrap, button, label, onYes) {
	button.hidden = true;
	const box = h("span", { class: "inline-confirm", role: "group", "aria-label": `Confirm ${label}` });
	const done = () => {
		box.remove();
		button.hidden = false;
		button.focus();
	};
	const yes = h("button", { type: "button", class: "btn danger", onclick: () => (done(), onYes()) }, `Yes, ${label}`);
	const no = h("button", { type: "button", class: "btn secondary", onclick: done }, "Cancel");
	box.append(h("span", { class: "confirm-q", text: `${label}?` }), yes, no);
	box.addEventListener("keydown", (e) => {
		if (e.key === "Escape") {
			e.preventDefault();
			done();
		}
	});
	wrap.append(box);
	yes.focus();
}

function showArgsPrompt(wrap, button, action, fire) {
	button.hidden = true;
	const id = `args-${Math.random().toString(36).slice(2)}`;
	const spec = action.promptForArgs || {};
	const input = h("input", { id, type: "text", placeholder: str(spec.placeholder, 256) || undefined, value: action.args === undefined ? "" : str(action.args) });
	const form = h("form", { class: "inline-args" }, h("label", { for: id, text: str(spec.label, 256) || "Arguments" }), input, h("button", { type: "submit", class: "btn primary" }, "Run"), h("button", { type: "button", class: "btn secondary", onclick: () => done() }, "Cancel"));
	const done = () => {
		form.remove();
		button.hidden = false;
		button.focus();
	};
	form.addEventListener("submit", (e) => {
		e.preventDefault();
		const args = input.value;
		done();
		if (action.confirm) showInlineConfirm(wrap, button, str(action.label, 256) || action.command, () => fire(args));
		else fire(args);
	});
	form.addEventListener("keydown", (e) => {
		if (e.key === "Escape") {
			e.preventDefault();
			done();
		}
	});
	wrap.append(form);
	input.focus();
}

// ---------------------------------------------------------------------------------------------
// Live state: status, widgets, title, dock, apps, dialogs

function renderLive() {
	renderApprovals();
	renderTitle();
	renderStatus();
	renderWidgets();
	renderDock();
	renderApps();
	renderDialogs();
	renderBusy();
	renderTriggers();
}

function snapshot() {
	return state.current ? liveOf(state.current).snapshot : emptySnapshot();
}

// Approvals: what an extension requested beyond its grants, for the user to allow or not.

const CAPABILITY_WORDS = {
	read: (v) => ["read files in", v],
	write: (v) => ["read and write files in", v],
	run: (v) => ["run the program", v],
	env: (v) => ["see the environment variable", v],
	net: (v) => ["connect to", v],
};

/** An item in words: ["run the program", "git", false], or [verb, "the working directory", true]. */
function capabilityWords(item) {
	const words = CAPABILITY_WORDS[item?.kind] || ((v) => [str(item?.kind, 16), v]);
	const [verb, value] = words(str(item?.value, 1024));
	const cwd = (item?.kind === "read" || item?.kind === "write") && value === ".";
	return [verb, cwd ? "the working directory" : value, cwd];
}

/** "run the program git", as one line of text. */
const capabilityText = (item) => capabilityWords(item).slice(0, 2).join(" ");

function capabilityItem(item, why) {
	const [verb, value, cwd] = capabilityWords(item);
	const li = h("li", { dataset: { kind: str(item?.kind, 16) } }, `${verb} `, cwd ? value : h("code", { text: value }));
	if (why) li.append(h("span", { class: "approval-why", text: ` — ${str(why, 300)}` }));
	return li;
}

function renderApprovals() {
	const box = $("approvals");
	box.replaceChildren();
	const sessionId = state.current;
	for (const approval of snapshot().approvals || []) {
		const name = str(approval.name, 128);
		const decide = async (decision, buttons) => {
			for (const b of buttons) b.disabled = true;
			try {
				await api("POST", `/sessions/${encodeURIComponent(sessionId)}/approvals/${encodeURIComponent(approval.extension)}`, { decision });
				const snap = liveOf(sessionId).snapshot;
				snap.approvals = (snap.approvals || []).filter((a) => a.extension !== approval.extension);
				if (decision !== "deny") toast(`${name}: allowed ${decision === "always" ? "from now on" : "for this session"}`, "success");
			} catch (error) {
				if (error.status !== 404) toast(`Approval failed: ${error.message}`, "error");
				for (const b of buttons) b.disabled = false;
			}
			if (state.current === sessionId) renderApprovals();
		};
		const buttons = [
			h("button", { type: "button", class: "btn primary", text: "Allow once", title: "For this session only" }),
			h("button", { type: "button", class: "btn secondary", text: "Always allow", title: "For this version of the extension, in every session" }),
			h("button", { type: "button", class: "btn danger", text: "Deny", title: "It runs without them; what needs them fails with an error" }),
		];
		["once", "always", "deny"].forEach((decision, i) => buttons[i].addEventListener("click", () => decide(decision, buttons)));
		const section = h(
			"section",
			{ class: "approval", role: "region", "aria-label": `Capability request from ${name}`, dataset: { extension: str(approval.extension, 64) } },
			h("h3", {}, h("strong", { text: name }), " asks to:"),
			h("ul", { class: "approval-items" }, ...(approval.items || []).slice(0, 64).map((item) => capabilityItem(item))),
		);
		if (approval.reason) section.append(h("p", { class: "approval-reason", text: `Why: ${str(approval.reason, 300)}` }));
		if ((approval.refused || []).length) {
			section.append(
				h("p", { class: "approval-note", text: "Also requested, not available here:" }),
				h("ul", { class: "approval-items refused" }, ...approval.refused.slice(0, 64).map((r) => capabilityItem(r, r.why))),
			);
		}
		section.append(h("div", { class: "approval-buttons" }, ...buttons));
		box.append(section);
	}
	box.hidden = !box.childElementCount;
}

function renderTitle() {
	const summary = state.sessions.get(state.current);
	const title = snapshot().title || (summary ? sessionLabel(summary) : "Session");
	$("session-title").textContent = str(title, 256);
	document.title = `${str(title, 256)} — PiChamber`;
}

function renderBusy() {
	const busy = !!snapshot().busy || !!state.sessions.get(state.current)?.busy;
	$("busy-indicator").hidden = !busy;
	$("abort-run").hidden = !busy;
}

function renderStatus() {
	const bar = $("status-bar");
	bar.replaceChildren();
	for (const [key, text] of Object.entries(snapshot().status || {})) {
		if (text === undefined || text === null) continue;
		bar.append(h("span", { class: "status-item", dataset: { key: str(key, 128) }, title: str(key, 128) }, h("span", { class: "status-key", text: `${str(key, 128)}:` }), " ", h("span", { text: str(text, 1000) })));
	}
	bar.hidden = !bar.childElementCount;
}

function renderWidgets() {
	const above = $("widgets-above");
	const below = $("widgets-below");
	above.replaceChildren();
	below.replaceChildren();
	for (const [key, widget] of Object.entries(snapshot().widgets || {})) {
		const lines = Array.isArray(widget?.lines) ? widget.lines : [];
		const el = h("section", { class: "widget", "aria-label": `Widget ${str(key, 128)}`, dataset: { key: str(key, 128) } }, h("pre", { text: lines.map((l) => str(l, 4000)).join("\n") }));
		(widget?.placement === "belowEditor" ? below : above).append(el);
	}
	above.hidden = !above.childElementCount;
	below.hidden = !below.childElementCount;
}

/** The dock: one slot per panel id; an update replaces the slot's content in place. */
function renderDock() {
	const dock = $("dock");
	const panels = snapshot().panels || {};
	const seen = new Set();
	for (const [id, card] of Object.entries(panels)) {
		seen.add(id);
		let slot = [...dock.children].find((el) => el.dataset.panelId === id);
		const fingerprint = JSON.stringify(card);
		if (!slot) {
			slot = h("div", { class: "panel-slot", dataset: { panelId: id } });
			dock.append(slot);
		}
		if (slot.dataset.fingerprint !== fingerprint) {
			slot.dataset.fingerprint = fingerprint;
			slot.replaceChildren(renderCard(card, { live: true }));
			clearLoading();
		}
	}
	for (const slot of [...dock.children]) if (!seen.has(slot.dataset.panelId)) slot.remove();
	dock.hidden = !dock.childElementCount;
}

// App surfaces ---------------------------------------------------------------------------------

// Injected by the page (never by the extension) before the app's HTML: forwards clicks on
// [data-pichamber-command] to the parent. It has no token; the parent adds the mount's.
const BRIDGE = `<script>(function(){function find(t){while(t&&t.nodeType===1){if(t.hasAttribute("data-pichamber-command"))return t;t=t.parentElement;}return null;}
document.addEventListener("click",function(e){var el=find(e.target);if(!el)return;e.preventDefault();
parent.postMessage({pichamber:"command",command:String(el.getAttribute("data-pichamber-command")||""),args:String(el.getAttribute("data-pichamber-args")||"")},"*");},true);})();<\/script>`;

/** The page's look for an app surface, before the app's own HTML (whose styles win). The
 *  values are the page's own theme colours, never extension text. */
function appBaseStyle() {
	const css = getComputedStyle(document.documentElement);
	const v = (name) => css.getPropertyValue(name).trim().replace(/[^#\w(),.% -]/g, "");
	const dark = window.matchMedia("(prefers-color-scheme: dark)").matches;
	return `<style>
:root{color-scheme:${dark ? "dark" : "light"}}
body{margin:8px;font:15px/1.45 system-ui,-apple-system,"Segoe UI","Liberation Sans",sans-serif;color:${v("--text")};background:${v("--panel")}}
a{color:${v("--accent")}}
button,input,select,textarea{font:inherit;color:${v("--text")};background:${v("--panel")};border:1px solid ${v("--border")};border-radius:6px;padding:5px 10px}
button{cursor:pointer}button:hover{border-color:${v("--accent")}}
button.primary,button[type=submit]{background:${v("--accent")};color:${v("--accent-text")};border-color:${v("--accent")}}
table{border-collapse:collapse}th,td{text-align:left;padding:4px 10px 4px 0;border-bottom:1px solid ${v("--border")}}
code,pre{font-family:ui-monospace,"DejaVu Sans Mono",monospace;font-size:.9em}
h1,h2,h3{line-height:1.2}
</style>`;
}

function renderApps() {
	const container = $("apps");
	const apps = snapshot().apps || {};
	for (const [appId, mount] of state.mounts) {
		const app = apps[appId];
		if (!app || app.token !== mount.token || app.html !== mount.html || mount.sessionId !== state.current) {
			mount.element.remove();
			state.mounts.delete(appId);
		}
	}
	for (const [appId, app] of Object.entries(apps)) {
		if (state.mounts.has(appId)) continue;
		const title = str(app.title, 256) || appId.slice(appId.indexOf("/") + 1);
		const iframe = h("iframe", { sandbox: "allow-scripts", title: `App: ${title}`, referrerpolicy: "no-referrer", loading: "eager" });
		iframe.srcdoc = `<!doctype html><meta charset="utf-8">${appBaseStyle()}${BRIDGE}${typeof app.html === "string" ? app.html : ""}`;
		const element = h("section", { class: "app-surface", "aria-label": title, dataset: { appId: str(appId, 128) } }, h("h3", { class: "card-title", text: title }), iframe);
		container.append(element);
		state.mounts.set(appId, { iframe, element, token: app.token, html: app.html, sessionId: state.current });
	}
	container.hidden = !container.childElementCount;
}

function unmountAllApps() {
	for (const mount of state.mounts.values()) mount.element.remove();
	state.mounts.clear();
	$("apps").hidden = true;
}

window.addEventListener("message", (event) => {
	const data = event.data;
	if (!data || typeof data !== "object" || data.pichamber !== "command") return;
	let found = null;
	for (const [appId, mount] of state.mounts) {
		if (mount.iframe.contentWindow === event.source) found = [appId, mount];
	}
	if (!found) return; // not one of our mounts: ignore
	const [appId, mount] = found;
	const command = typeof data.command === "string" ? data.command : "";
	const args = typeof data.args === "string" ? data.args.slice(0, 50_000) : "";
	if (!COMMAND_NAME.test(command)) {
		toast(`App ${appId}: invalid command name`, "warning");
		return;
	}
	api("POST", `/sessions/${encodeURIComponent(mount.sessionId)}/apps/${encodeURIComponent(appId)}/command`, { token: mount.token, command, args }).catch((error) =>
		toast(`App ${appId}: ${error.message}`, "error"),
	);
});

// Dialogs ---------------------------------------------------------------------------------------

let shownDialog = null; // { sessionId, id, timer }

function closeUiDialog() {
	const dialog = $("ui-dialog");
	if (shownDialog?.timer) clearInterval(shownDialog.timer);
	shownDialog = null;
	if (dialog.open) dialog.close();
	dialog.replaceChildren();
}

function renderDialogs() {
	const pending = (snapshot().dialogs || []).filter((d) => !d.deadline || d.deadline > Date.now() - 1000);
	const next = pending[0];
	if (shownDialog && next && shownDialog.id === next.id && shownDialog.sessionId === state.current) return;
	closeUiDialog();
	if (next) showUiDialog(state.current, next);
}

function showUiDialog(sessionId, spec) {
	const dialog = $("ui-dialog");
	const answer = async (body) => {
		try {
			await api("POST", `/sessions/${encodeURIComponent(sessionId)}/dialogs/${encodeURIComponent(spec.id)}`, body);
		} catch (error) {
			if (error.status === 400 && error.body?.fields) return showFieldErrors(error.body.fields, error.body.error);
			if (error.status !== 404) return toast(`Answer refused: ${error.message}`, "error");
		}
		const snap = liveOf(sessionId).snapshot;
		snap.dialogs = snap.dialogs.filter((d) => d.id !== spec.id);
		if (state.current === sessionId) renderDialogs();
	};
	const cancel = () => answer({ cancelled: true });

	const title = h("h2", { id: "ui-dialog-title", text: str(spec.title, 256) || "Question" });
	const form = h("form", { method: "dialog", class: "dialog-form", novalidate: true });
	form.dataset.method = spec.method;
	form.append(title);
	if (spec.message) form.append(h("p", { class: "dialog-message", text: str(spec.message) }));
	const errors = h("p", { class: "dialog-errors", role: "alert" });
	const buttons = h("div", { class: "dialog-buttons" });
	let submit = () => {};

	switch (spec.method) {
		case "select": {
			const options = Array.isArray(spec.options) ? spec.options : [];
			const group = h("div", { class: "select-options", role: "group", "aria-label": str(spec.title, 256) || "Options" });
			for (const option of options) {
				const value = typeof option === "string" ? option : str(option?.value ?? option?.label);
				group.append(h("button", { type: "button", class: "btn secondary option", onclick: () => answer({ value }) }, str(typeof option === "string" ? option : option?.label ?? value, 1000)));
			}
			form.append(group);
			buttons.append(h("button", { type: "button", class: "btn secondary", onclick: cancel }, "Cancel"));
			break;
		}
		case "confirm": {
			buttons.append(h("button", { type: "button", class: "btn secondary", onclick: () => answer({ confirmed: false }) }, "No"), h("button", { type: "submit", class: "btn primary" }, "Yes"));
			submit = () => answer({ confirmed: true });
			break;
		}
		case "input": {
			const input = h("input", { id: "dialog-input", type: "text", placeholder: str(spec.placeholder, 256) || undefined, value: spec.prefill === undefined ? "" : str(spec.prefill) });
			form.append(h("label", { for: "dialog-input", class: "sr-only", text: str(spec.title, 256) || "Answer" }), input);
			buttons.append(h("button", { type: "button", class: "btn secondary", onclick: cancel }, "Cancel"), h("button", { type: "submit", class: "btn primary" }, "OK"));
			submit = () => answer({ value: input.value });
			break;
		}
		case "editor": {
			const area = h("textarea", { id: "dialog-editor", rows: 8 });
			area.value = spec.prefill === undefined ? "" : str(spec.prefill);
			form.append(h("label", { for: "dialog-editor", class: "sr-only", text: str(spec.title, 256) || "Text" }), area);
			area.addEventListener("keydown", (e) => {
				if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
					e.preventDefault();
					submit();
				}
			});
			buttons.append(h("button", { type: "button", class: "btn secondary", onclick: cancel }, "Cancel"), h("button", { type: "submit", class: "btn primary" }, "Submit"));
			submit = () => answer({ value: area.value });
			break;
		}
		case "form": {
			const fields = Array.isArray(spec.fields) ? spec.fields.slice(0, 12) : [];
			const controls = new Map();
			for (const field of fields) {
				const id = `field-${str(field.id, 128)}`;
				const type = field.type;
				let control;
				if (type === "textarea") {
					control = h("textarea", { id, rows: 3 });
					control.value = field.initial === undefined ? "" : str(field.initial);
				} else if (type === "select") {
					control = h("select", { id });
					const options = Array.isArray(field.options) ? field.options.slice(0, 20) : [];
					for (const option of options) control.append(h("option", { value: str(option, 1000), text: str(option, 1000) }));
					if (field.initial !== undefined && options.includes(field.initial)) control.value = field.initial;
				} else if (type === "checkbox") {
					control = h("input", { id, type: "checkbox" });
					control.checked = field.initial === true || field.initial === "true";
				} else {
					control = h("input", { id, type: type === "number" ? "number" : "text", value: field.initial === undefined ? "" : str(field.initial) });
					if (type === "number") {
						if (field.min !== undefined) control.min = field.min;
						if (field.max !== undefined) control.max = field.max;
						control.step = "any";
					}
					if (field.placeholder) control.placeholder = str(field.placeholder, 256);
				}
				if (field.required) {
					control.setAttribute("aria-required", "true");
				}
				control.dataset.fieldId = str(field.id, 128);
				const errorId = `${id}-error`;
				control.addEventListener("input", () => {
					control.removeAttribute("aria-invalid");
					const span = document.getElementById(errorId);
					if (span) span.textContent = "";
				});
				control.setAttribute("aria-describedby", errorId);
				const label = h("label", { for: id }, str(field.label, 256) || str(field.id, 128), field.required ? h("span", { class: "required", "aria-hidden": "true", text: " *" }) : null);
				const row = h("div", { class: `form-row form-${type || "text"}` }, type === "checkbox" ? [control, label] : [label, control], h("span", { id: errorId, class: "field-error" }));
				form.append(row);
				controls.set(field.id, { control, field });
			}
			buttons.append(h("button", { type: "button", class: "btn secondary", onclick: cancel }, "Cancel"), h("button", { type: "submit", class: "btn primary" }, "Submit"));
			submit = () => {
				const values = {};
				const problems = {};
				for (const [fieldId, { control, field }] of controls) {
					const value = field.type === "checkbox" ? (control.checked ? "true" : "false") : control.value;
					if (field.required && field.type !== "checkbox" && !value.trim()) problems[fieldId] = "Required";
					values[fieldId] = value;
				}
				if (Object.keys(problems).length) return showFieldErrors(problems);
				answer({ values });
			};
			break;
		}
		default:
			form.append(h("p", { text: `Unsupported dialog (${str(spec.method, 50)})` }));
			buttons.append(h("button", { type: "button", class: "btn secondary", onclick: cancel }, "Dismiss"));
	}

	let countdown = null;
	if (spec.deadline) {
		countdown = h("p", { class: "countdown", "aria-live": "off" });
		const bar = h("progress", { class: "countdown-bar", max: 1000, value: 1000, "aria-hidden": "true" });
		const total = Math.max(1, Number(spec.timeout) || spec.deadline - Date.now());
		const tick = () => {
			const left = Math.max(0, spec.deadline - Date.now());
			countdown.textContent = `Closes in ${Math.ceil(left / 1000)} s`;
			bar.value = Math.round((left / total) * 1000);
			if (left <= 0 && shownDialog?.id === spec.id) {
				const snap = liveOf(sessionId).snapshot;
				snap.dialogs = snap.dialogs.filter((d) => d.id !== spec.id);
				if (state.current === sessionId) renderDialogs();
			}
		};
		form.append(countdown, bar);
		tick();
		shownDialog = { sessionId, id: spec.id, timer: setInterval(tick, 250) };
	} else shownDialog = { sessionId, id: spec.id, timer: null };

	form.append(errors, buttons);
	form.addEventListener("submit", (e) => {
		e.preventDefault();
		submit();
	});
	dialog.replaceChildren(form);
	dialog.dataset.dialogId = str(spec.id, 128);
	dialog.dataset.method = str(spec.method, 32);
	dialog.oncancel = (e) => {
		// Escape: a built-in shortcut; it cancels the dialog.
		e.preventDefault();
		cancel();
	};
	if (!dialog.open) dialog.showModal();
	const focusable = form.querySelector("input, textarea, select, .option, button[type=submit]");
	focusable?.focus();

	function showFieldErrors(fields, message) {
		for (const span of form.querySelectorAll(".field-error")) span.textContent = "";
		for (const control of form.querySelectorAll("[aria-invalid]")) control.removeAttribute("aria-invalid");
		for (const [fieldId, text] of Object.entries(fields || {})) {
			const control = form.querySelector(`[data-field-id="${CSS.escape(fieldId)}"]`);
			if (!control) continue;
			control.setAttribute("aria-invalid", "true");
			const span = document.getElementById(control.getAttribute("aria-describedby"));
			if (span) span.textContent = str(text, 500);
		}
		errors.textContent = message ? str(message, 500) : "Please correct the marked fields.";
		form.querySelector("[aria-invalid]")?.focus();
	}
}

// ---------------------------------------------------------------------------------------------
// Composer: slash-command and argument completion

const completion = { items: [], index: -1, kind: null, seq: 0 };

function setCompletions(items, kind) {
	completion.items = items;
	completion.kind = kind;
	completion.index = items.length ? 0 : -1;
	const list = $("completions");
	const input = $("prompt-input");
	list.replaceChildren();
	items.forEach((item, i) => {
		const li = h(
			"li",
			{ id: `completion-${i}`, role: "option", class: "completion", "aria-selected": i === completion.index ? "true" : "false" },
			h("span", { class: "completion-value", text: item.display }),
			item.description ? h("span", { class: "completion-desc", text: str(item.description, 300) }) : null,
		);
		li.addEventListener("mousedown", (e) => {
			e.preventDefault();
			acceptCompletion(i);
		});
		list.append(li);
	});
	list.hidden = !items.length;
	if (completion.index >= 0) input.setAttribute("aria-activedescendant", `completion-${completion.index}`);
	else input.removeAttribute("aria-activedescendant");
}

function moveCompletion(step) {
	if (!completion.items.length) return;
	completion.index = (completion.index + step + completion.items.length) % completion.items.length;
	const list = $("completions");
	[...list.children].forEach((li, i) => li.setAttribute("aria-selected", i === completion.index ? "true" : "false"));
	$("prompt-input").setAttribute("aria-activedescendant", `completion-${completion.index}`);
	list.children[completion.index]?.scrollIntoView({ block: "nearest" });
}

function acceptCompletion(i = completion.index) {
	const item = completion.items[i];
	if (!item) return;
	const input = $("prompt-input");
	input.value = item.insert;
	input.setSelectionRange(input.value.length, input.value.length);
	setCompletions([], null);
	input.focus();
	updateCompletions();
}

let completeTimer = null;
function updateCompletions() {
	const text = $("prompt-input").value;
	clearTimeout(completeTimer);
	if (!text.startsWith("/") || text.includes("\n")) return setCompletions([], null);
	const space = text.indexOf(" ");
	if (space < 0) {
		const prefix = text.slice(1).toLowerCase();
		const items = state.commands
			.filter((c) => String(c.name).toLowerCase().startsWith(prefix))
			.slice(0, 50)
			.map((c) => ({ display: `/${c.name}`, description: c.description, insert: `/${c.name} ` }));
		const exact = items.length === 1 && items[0].insert.trim() === text;
		return setCompletions(exact ? [] : items, "command");
	}
	const name = text.slice(1, space);
	const prefix = text.slice(space + 1);
	if (!state.commands.some((c) => c.name === name)) return setCompletions([], null);
	// Until the command answers for this text, keep only the shown items that still fit it.
	if (completion.kind === "args") setCompletions(completion.items.filter((item) => item.insert.startsWith(text)), "args");
	const seq = ++completion.seq;
	const sessionId = state.current;
	completeTimer = setTimeout(async () => {
		try {
			const data = await api("GET", `/sessions/${encodeURIComponent(sessionId)}/complete?command=${encodeURIComponent(name)}&prefix=${encodeURIComponent(prefix)}`);
			if (seq !== completion.seq || $("prompt-input").value !== text) return;
			const items = (Array.isArray(data?.items) ? data.items : []).slice(0, 50).map((item) => ({
				display: str(item.label ?? item.value, 300),
				description: item.description,
				insert: `/${name} ${str(item.value, 50_000)}`,
			}));
			setCompletions(items, "args");
		} catch {
			setCompletions([], null);
		}
	}, 120);
}

async function submitComposer() {
	const input = $("prompt-input");
	const text = input.value;
	if (!text.trim() || !state.current) return;
	setCompletions([], null);
	input.value = "";
	fitComposer();
	const sessionId = state.current;
	// What was sent comes back: an extension's command as the server's echo (a note), anything
	// else as the user's message (templates and skills expand into one).
	const name = text.startsWith("/") ? text.slice(1).split(/\s/, 1)[0] : null;
	state.lastSent = { sessionId, text };
	scrollToEnd({ force: true });
	try {
		await sendPrompt(sessionId, text);
		const summary = state.sessions.get(sessionId);
		if (summary && !name && !summary.title) {
			summary.title = text.trim().split("\n", 1)[0].slice(0, 80);
			renderSessionList();
			if (state.current === sessionId) renderTitle();
		}
	} catch (error) {
		input.value = text;
		fitComposer();
		toast(`Not sent: ${error.message}`, "error");
	}
}

/** The message box grows with its text, up to a third of the window. */
function fitComposer() {
	const input = $("prompt-input");
	input.style.height = "auto";
	input.style.height = `${Math.min(input.scrollHeight + 2, Math.round(window.innerHeight / 3))}px`;
}

function nameSession(sessionId, name) {
	const summary = state.sessions.get(sessionId);
	if (!summary) return;
	if (name) summary.name = str(name, 256);
	else delete summary.name;
	renderSessionList();
	if (state.current === sessionId) renderTitle();
}

function setDrawer(open) {
	$("sidebar").classList.toggle("open", open);
	$("drawer-scrim").hidden = !open;
	$("toggle-sessions").setAttribute("aria-expanded", String(open));
	if (open) $("sidebar").querySelector("button")?.focus();
}

async function loadExtensions() {
	try {
		const data = await api("GET", "/extensions");
		state.extensions = new Map((data?.extensions || []).map((e) => [e.id, e]));
	} catch {
		state.extensions = new Map();
	}
}

// Entries that set a session up rather than say something: a session holding only these is empty.
const QUIET_ENTRIES = new Set(["model_change", "thinking_level_change"]);

/** An open session with nothing in it yet says what it can do: its extensions and their commands. */
function renderSessionEmpty() {
	const box = $("session-empty");
	const transcript = $("transcript");
	const summary = state.sessions.get(state.current);
	const settings = [...transcript.children].filter((el) => QUIET_ENTRIES.has(el.dataset.entryType));
	if (!summary || transcript.childElementCount > settings.length) {
		box.hidden = true;
		return;
	}
	// A session with a model starts with a model_change entry.
	const model = settings.filter((el) => el.dataset.entryType === "model_change").pop()?.textContent;
	box.replaceChildren(
		h("h3", { text: "Ready" }),
		h("p", { class: "muted", text: "Type a message for the model, or / for a command. The extensions in this session run in their sandbox:" }),
		h("p", { class: "muted session-model", text: model || "No model is set for this session: commands work; messages for a model are refused until the server is started with one (--model or --script)." }),
	);
	const list = h("ul", { class: "ext-list" });
	for (const id of summary.extensions || []) {
		const ext = state.extensions.get(id);
		if (!ext) continue;
		const commands = (ext.commands || []).slice(0, 24).map((c) =>
			h("button", {
				type: "button",
				class: "chip",
				title: str(c.description, 300) || undefined,
				text: `/${str(c.name, 128)}`,
				onclick: () => {
					const input = $("prompt-input");
					input.value = `/${c.name} `;
					input.focus();
					updateCompletions();
				},
			}),
		);
		const tools = (ext.tools || []).map((t) => str(t.name, 128));
		const access = state.access.get(id);
		const may = [...(access?.given || []), ...(access?.approved || [])];
		const asks = access?.pending || [];
		list.append(
			h(
				"li",
				{ class: "ext" },
				h("div", { class: "ext-name" }, h("strong", { text: str(ext.name, 128) }), ext.version ? h("span", { class: "muted", text: ` ${str(ext.version, 64)}` }) : null),
				commands.length ? h("div", { class: "chips", role: "group", "aria-label": `Commands of ${str(ext.name, 128)}` }, commands) : null,
				tools.length ? h("div", { class: "muted ext-tools", text: `Tools for the model: ${tools.join(", ")}` }) : null,
				access ? h("div", { class: "muted ext-tools", text: may.length ? `May: ${may.map(capabilityText).join("; ")}` : "May touch no files, programs, variables or hosts" }) : null,
				asks.length ? h("div", { class: "muted ext-tools", text: `Asks to: ${asks.map(capabilityText).join("; ")} (answer above)` }) : null,
			),
		);
	}
	if (list.childElementCount) box.append(list);
	box.hidden = false;
}

function setupComposer() {
	const input = $("prompt-input");
	input.addEventListener("input", fitComposer);
	$("composer").addEventListener("submit", (e) => {
		e.preventDefault();
		submitComposer();
	});
	input.addEventListener("input", updateCompletions);
	input.addEventListener("blur", () => setTimeout(() => setCompletions([], null), 100));
	input.addEventListener("keydown", (e) => {
		const open = completion.items.length > 0;
		if (open && e.key === "ArrowDown") {
			e.preventDefault();
			moveCompletion(1);
		} else if (open && e.key === "ArrowUp") {
			e.preventDefault();
			moveCompletion(-1);
		} else if (open && e.key === "Enter" && !e.shiftKey && completion.items[completion.index]?.insert.trim() === input.value.trim()) {
			// The text already is the highlighted completion: Enter sends it.
			e.preventDefault();
			submitComposer();
		} else if (open && (e.key === "Tab" || (e.key === "Enter" && !e.shiftKey))) {
			e.preventDefault();
			acceptCompletion();
		} else if (open && e.key === "Escape") {
			e.preventDefault();
			setCompletions([], null);
		} else if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
			e.preventDefault();
			submitComposer();
		}
	});
}

// ---------------------------------------------------------------------------------------------
// User command triggers (pinned buttons and key bindings, stored through ui-settings)

// Keys the page or the browser already uses; a trigger may never take them.
const RESERVED = new Set(["enter", "escape", "tab", "shift+enter", "shift+tab", "ctrl+enter", "meta+enter", "ctrl+c", "ctrl+v", "ctrl+x", "ctrl+a", "ctrl+z", "ctrl+y", "ctrl+shift+z", "meta+c", "meta+v", "meta+x", "meta+a", "meta+z", "ctrl+r", "ctrl+l", "ctrl+t", "ctrl+w", "ctrl+n", "ctrl+f", "ctrl+p", "ctrl+s", "f5", "ctrl+f5", "f11", "f12", "backspace", "delete", "space", "arrowup", "arrowdown", "arrowleft", "arrowright", "home", "end", "pageup", "pagedown"]);

function normaliseKey(text) {
	const parts = String(text || "")
		.toLowerCase()
		.split("+")
		.map((p) => p.trim())
		.filter(Boolean);
	if (!parts.length) return "";
	const key = parts.pop();
	const mods = ["ctrl", "alt", "shift", "meta"].filter((m) => parts.includes(m) || (m === "meta" && parts.includes("cmd")));
	return [...mods, key].join("+");
}

function eventKey(e) {
	const mods = [];
	if (e.ctrlKey) mods.push("ctrl");
	if (e.altKey) mods.push("alt");
	if (e.shiftKey) mods.push("shift");
	if (e.metaKey) mods.push("meta");
	let key = e.key === " " ? "space" : e.key.toLowerCase();
	if (e.code?.startsWith("Key")) key = e.code.slice(3).toLowerCase();
	else if (e.code?.startsWith("Digit")) key = e.code.slice(5);
	return [...mods, key].join("+");
}

function triggerKeyProblem(key) {
	const k = normaliseKey(key);
	if (!k) return null;
	if (RESERVED.has(k)) return `${k} is a built-in shortcut`;
	if (!/^(ctrl|alt|meta)\+/.test(k) && !/^f([1-9]|1[0-2])$/.test(k)) return "use ctrl, alt or meta with the key (or F1–F12)";
	return null;
}

async function loadSettings() {
	try {
		const data = await api("GET", "/ui-settings");
		state.settings = { triggers: Array.isArray(data?.triggers) ? data.triggers : [] };
	} catch {
		state.settings = { triggers: [] };
	}
	renderTriggers();
}

async function saveSettings(triggers) {
	const data = await api("PUT", "/ui-settings", { ...state.settings, triggers });
	state.settings = { ...state.settings, ...(data && typeof data === "object" ? data : {}), triggers: Array.isArray(data?.triggers) ? data.triggers : triggers };
	renderTriggers();
}

function triggerLabel(t) {
	return str(t.label, 256) || `/${str(t.command, 128)}${t.args ? ` ${str(t.args, 200)}` : ""}`;
}

function renderTriggers() {
	const bar = $("triggers");
	bar.replaceChildren();
	for (const trigger of state.settings.triggers || []) {
		if (!COMMAND_NAME.test(String(trigger.command))) continue;
		const key = normaliseKey(trigger.key);
		bar.append(
			h(
				"button",
				{ type: "button", class: "btn secondary trigger", title: key ? `Shortcut: ${key}` : undefined, "aria-keyshortcuts": key ? key.replace(/\b\w/g, (c) => c.toUpperCase()) : undefined, onclick: () => runCommand(trigger.command, trigger.args ? String(trigger.args) : "") },
				triggerLabel(trigger),
				key ? h("kbd", { text: key }) : null,
			),
		);
	}
	bar.hidden = !bar.childElementCount;
}

// Bubble phase on window: the composer, dialogs and the browser handle their keys first; a
// trigger fires only when nothing else did (defaultPrevented) and never on reserved keys.
window.addEventListener("keydown", (e) => {
	if (e.defaultPrevented || e.repeat || !state.current || e.isComposing) return;
	if ($("ui-dialog").open || $("settings-dialog").open) return;
	const pressed = eventKey(e);
	if (RESERVED.has(pressed)) return;
	for (const trigger of state.settings.triggers || []) {
		const key = normaliseKey(trigger.key);
		if (!key || key !== pressed || triggerKeyProblem(key)) continue;
		if (!COMMAND_NAME.test(String(trigger.command))) continue;
		e.preventDefault();
		runCommand(trigger.command, trigger.args ? String(trigger.args) : "");
		return;
	}
});

function openSettings() {
	const dialog = $("settings-dialog");
	let triggers = (state.settings.triggers || []).map((t) => ({ ...t }));
	const list = h("ul", { class: "trigger-list" });
	const redraw = () => {
		list.replaceChildren();
		if (!triggers.length) list.append(h("li", { class: "muted", text: "No triggers yet." }));
		triggers.forEach((t, i) => {
			list.append(
				h(
					"li",
					{},
					h("span", { text: triggerLabel(t) }),
					t.key ? h("kbd", { text: normaliseKey(t.key) }) : null,
					h("button", { type: "button", class: "btn secondary", "aria-label": `Remove ${triggerLabel(t)}`, onclick: () => (triggers.splice(i, 1), redraw()) }, "Remove"),
				),
			);
		});
	};
	redraw();
	const datalist = h("datalist", { id: "trigger-commands" }, state.commands.map((c) => h("option", { value: str(c.name, 128) })));
	const command = h("input", { id: "trigger-command", list: "trigger-commands", required: true, placeholder: "command name" });
	const args = h("input", { id: "trigger-args", placeholder: "optional" });
	const label = h("input", { id: "trigger-label", placeholder: "optional" });
	const key = h("input", { id: "trigger-key", placeholder: "e.g. alt+1 or ctrl+shift+m" });
	const problem = h("p", { class: "dialog-errors", role: "alert" });
	const add = h("form", { class: "trigger-add", novalidate: true },
		h("label", { for: "trigger-command", text: "Command" }), command, datalist,
		h("label", { for: "trigger-args", text: "Arguments" }), args,
		h("label", { for: "trigger-label", text: "Button label" }), label,
		h("label", { for: "trigger-key", text: "Key binding" }), key,
		h("button", { type: "submit", class: "btn secondary" }, "Add trigger"),
	);
	add.addEventListener("submit", (e) => {
		e.preventDefault();
		const name = command.value.trim().replace(/^\//, "");
		if (!COMMAND_NAME.test(name)) return (problem.textContent = "A command name is letters, digits, : _ -");
		const k = key.value.trim() ? normaliseKey(key.value) : "";
		const why = k ? triggerKeyProblem(k) : null;
		if (why) return (problem.textContent = `Key binding refused: ${why}`);
		if (k && triggers.some((t) => normaliseKey(t.key) === k)) return (problem.textContent = `${k} is already bound`);
		problem.textContent = "";
		const trigger = { command: name };
		if (args.value.trim()) trigger.args = args.value.trim();
		if (label.value.trim()) trigger.label = label.value.trim();
		if (k) trigger.key = k;
		triggers.push(trigger);
		for (const input of [command, args, label, key]) input.value = "";
		redraw();
		command.focus();
	});
	const save = h("button", { type: "button", class: "btn primary" }, "Save");
	save.addEventListener("click", async () => {
		try {
			await saveSettings(triggers);
			dialog.close();
		} catch (error) {
			problem.textContent = `Not saved: ${error.message}`;
		}
	});
	const cancel = h("button", { type: "button", class: "btn secondary", onclick: () => dialog.close() }, "Cancel");
	dialog.replaceChildren(
		h("div", { class: "dialog-form" },
			h("h2", { id: "settings-title", text: "Command triggers" }),
			h("p", { class: "muted", text: "Pinned buttons beside the message box run a command; a key binding runs it from anywhere. Built-in keys (Enter, Escape, Tab, ctrl+c, …) always keep their meaning." }),
			list, add, problem,
			h("div", { class: "dialog-buttons" }, cancel, save),
		),
	);
	dialog.showModal();
	command.focus();
}

// ---------------------------------------------------------------------------------------------
// The extensions panel: per extension of the open session, what it asked for and where each
// item stands; the user approves, revokes or asks again here, not with command-line flags.

async function openExtensions() {
	if (!state.current) return;
	state.extensionsOpen = true;
	const dialog = $("extensions-dialog");
	if (!dialog.open) dialog.showModal();
	await refreshExtensions();
}

async function refreshExtensions() {
	const sessionId = state.current;
	const dialog = $("extensions-dialog");
	if (!sessionId || !dialog.open) return;
	let data;
	try {
		data = await api("GET", `/sessions/${encodeURIComponent(sessionId)}/extensions`);
	} catch (error) {
		toast(`Could not read the extensions: ${error.message}`, "error");
		return;
	}
	if (state.current !== sessionId || !dialog.open) return;
	renderExtensions(dialog, sessionId, data?.extensions || []);
}

function renderExtensions(dialog, sessionId, extensions) {
	const close = h("button", { type: "button", class: "btn secondary", text: "Close", onclick: () => dialog.close() });
	const body = h("div", { class: "dialog-form extensions-panel" }, h("h2", { id: "extensions-title", text: "Extensions in this session" }));
	if (!extensions.length) body.append(h("p", { class: "muted", text: "No extensions are loaded in this session." }));
	const errors = state.errors.get(sessionId) || [];
	for (const ext of extensions) {
		const info = state.extensions.get(ext.extension) || {};
		const name = str(ext.name, 128);
		const section = h("section", { class: "ext-access", "aria-label": name, dataset: { extension: str(ext.extension, 64) } });
		section.append(h("h3", {}, h("strong", { text: name }), info.version ? h("span", { class: "muted", text: ` ${str(info.version, 64)}` }) : null));
		if (ext.reason) section.append(h("p", { class: "muted", text: `Why it asks: ${str(ext.reason, 300)}` }));
		const group = (title, items, extra) => {
			if (!items?.length) return;
			section.append(h("div", { class: "access-group" }, h("h4", { text: title }), h("ul", { class: "approval-items" }, ...items.slice(0, 64).map((item) => capabilityItem(item, item.why))), extra || null));
		};
		const act = (label, variant, method, path, done) =>
			h("button", {
				type: "button",
				class: `btn ${variant}`,
				text: label,
				onclick: async (e) => {
					e.currentTarget.disabled = true;
					try {
						await api(method, `/sessions/${encodeURIComponent(sessionId)}/approvals/${encodeURIComponent(ext.extension)}${path}`);
						toast(`${name}: ${done}`, "success");
					} catch (error) {
						toast(`${name}: ${error.message}`, "error");
					}
					refreshExtensions();
				},
			});
		group("May, by its grants", ext.given);
		group("May, approved by you", ext.approved, act("Revoke", "danger", "DELETE", "", "approvals revoked; it restarted without them"));
		if (ext.pending?.length) group("Asks for (answer above the transcript)", ext.pending);
		group("Denied in this session", ext.declined, act("Ask me again", "secondary", "POST", "/ask", "asked again above the transcript"));
		group("Requested, not available here", ext.refused);
		if (![ext.given, ext.approved, ext.pending, ext.declined, ext.refused].some((l) => l?.length)) section.append(h("p", { class: "muted", text: "It asks for no files, programs, variables or hosts: it runs with nothing." }));
		const commands = (info.commands || []).map((c) => `/${str(c.name, 128)}`);
		const tools = (info.tools || []).map((t) => str(t.name, 128));
		if (commands.length) section.append(h("p", { class: "muted", text: `Commands: ${commands.join(", ")}` }));
		if (tools.length) section.append(h("p", { class: "muted", text: `Tools for the model: ${tools.join(", ")}` }));
		const own = errors.filter((e) => e.extension === ext.name);
		if (own.length) {
			section.append(h("div", { class: "access-group" }, h("h4", { text: `Errors (${own.length})` }), h("ul", { class: "ext-errors" }, ...own.slice(-10).map((e) => h("li", { text: `${e.event}: ${e.error}` })))));
		}
		body.append(section);
	}
	body.append(h("div", { class: "dialog-buttons" }, close));
	dialog.replaceChildren(body);
}

// ---------------------------------------------------------------------------------------------
// Start

function showLogin(reason) {
	if (state.stream) state.stream.abort();
	$("app").hidden = true;
	$("login").hidden = false;
	$("login-reason").textContent = reason;
	setConnected(false);
	$("conn-status").textContent = "Not connected";
	$("login-token").focus();
}

async function start() {
	const params = new URLSearchParams(location.hash.slice(1));
	state.token = params.get("token");
	const wanted = params.get("session");
	setupComposer();
	setupFollow();
	$("toggle-sessions").addEventListener("click", () => setDrawer(!$("sidebar").classList.contains("open")));
	$("drawer-scrim").addEventListener("click", () => setDrawer(false));
	$("sidebar").addEventListener("keydown", (e) => {
		if (e.key === "Escape" && $("sidebar").classList.contains("open")) setDrawer(false);
	});
	$("new-session").addEventListener("click", createSession);
	$("new-session-top").addEventListener("click", createSession);
	$("close-session").addEventListener("click", () => state.current && closeSession(state.current));
	$("abort-run").addEventListener("click", () => state.current && api("POST", `/sessions/${encodeURIComponent(state.current)}/abort`).catch((error) => toast(error.message, "error")));
	$("open-settings").addEventListener("click", openSettings);
	$("open-extensions").addEventListener("click", openExtensions);
	$("extensions-dialog").addEventListener("close", () => (state.extensionsOpen = false));
	$("login-form").addEventListener("submit", (e) => {
		e.preventDefault();
		const token = $("login-token").value.trim();
		if (!token) return;
		location.hash = new URLSearchParams({ token }).toString();
		location.reload();
	});
	if (!state.token) return showLogin("Open the address that pichamber printed (it carries the token after #), or paste the token.");
	$("login").hidden = true;
	$("app").hidden = false;
	try {
		await loadSessions();
	} catch (error) {
		if (error.status !== 401) toast(`Could not list sessions: ${error.message}`, "error");
		if (error.status === 401) return;
	}
	await Promise.all([loadSettings(), loadExtensions()]);
	connectStream();
	if (wanted && state.sessions.has(wanted)) await openSession(wanted);
	else if (state.sessions.size === 1) await openSession([...state.sessions.keys()][0]);
	document.body.dataset.ready = "true";
}

start();
