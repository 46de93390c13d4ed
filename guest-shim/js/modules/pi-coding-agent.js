// @mariozechner/pi-coding-agent for pichamber: an original implementation of the runtime
// exports extensions use, written from pi 0.73.1's observable behaviour: the output
// truncation helpers, tool-event guards, config paths, the file mutation queue, key hints,
// frontmatter parsing (a YAML subset), and inert stand-ins for pi's TUI components. Sessions,
// settings, models, modes, compaction and the built-in tools' execution live in the pi host:
// those exports exist so imports link, and throw a clear Error when used.
import {
  CancellableLoader,
  Container,
  Editor,
  Loader,
  Spacer,
  Text,
  getKeybindings,
  matchesKey,
} from "pichamber:pi-tui";
import { homedir } from "pichamber:node/os";
import { join, resolve } from "pichamber:node/path";
import { realpathSync } from "pichamber:node/fs";

const unavailable = (what) =>
  new Error(`${what} is not available inside a pichamber extension (it belongs to the pi host)`);
const hostOnly = (name) =>
  function () {
    throw unavailable(`${name}()`);
  };

// A class that cannot be constructed here; its static methods (SessionManager.inMemory()...)
// throw the same way.
function hostOnlyClass(name) {
  const cls = {
    [name]: class {
      constructor() {
        throw unavailable(name);
      }
    },
  }[name];
  return new Proxy(cls, {
    get(target, prop) {
      if (prop in target || typeof prop !== "string" || prop === "then") return target[prop];
      return () => {
        throw unavailable(`${name}.${prop}()`);
      };
    },
  });
}

// ---- config ----------------------------------------------------------------------------------

// The pi release the session follows (README, "Which pi"); 1.6.0 when the host does not say.
export const VERSION = globalThis.__pichamber_internal?.piVersion ?? "1.6.0";
export const CONFIG_DIR_NAME = ".pi";

export function getAgentDir() {
  const custom = process.env.PI_CODING_AGENT_DIR;
  if (!custom) return join(homedir(), CONFIG_DIR_NAME, "agent");
  if (custom === "~") return homedir();
  return custom.startsWith("~/") ? homedir() + custom.slice(1) : custom;
}

// ---- tool results and definitions ------------------------------------------------------------

export const defineTool = (tool) => tool;

// pi 1.6.0's read-call range, `:start-end` (finite numbers or numeric strings; malformed
// ranges give nothing).
const lineNumber = (value) => {
  if (typeof value === "string" && value.trim() !== "") value = Number(value);
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
};
export function formatReadLineRange(offset, limit) {
  if (offset == null && limit == null) return "";
  const start = offset == null ? 1 : lineNumber(offset);
  if (start === undefined) return "";
  if (limit == null) return `:${start}`;
  const count = lineNumber(limit);
  if (count === undefined) return "";
  const end = start + count - 1;
  return `:${start}${end ? `-${end}` : ""}`;
}
// pi 1.6.0's image helpers: the host's image codec does the resizing (pi's limits, choices
// and notes; see host/tools/src/image.rs).
export async function resizeImage(inputBytes, mimeType, options) {
  const bytes = inputBytes instanceof Uint8Array ? inputBytes : new Uint8Array(inputBytes);
  const internal = globalThis.__pichamber_internal;
  if (typeof internal?.resizeImage !== "function") return null; // pi: no codec, no resize
  const outcome = await internal.resizeImage(bytes, String(mimeType ?? ""), options ?? {});
  if ("error" in outcome) throw new Error(outcome.error);
  return outcome.ok ?? null;
}
export function formatDimensionNote(result) {
  if (!result.wasResized) return undefined;
  const scale = result.originalWidth / result.width;
  return `[Image: original ${result.originalWidth}x${result.originalHeight}, displayed at ${result.width}x${result.height}. Multiply coordinates by ${scale.toFixed(2)} to map to original image.]`;
}

export const isToolCallEventType = (toolName, event) => event.toolName === toolName;
export const isBashToolResult = (event) => event.toolName === "bash";
export const isReadToolResult = (event) => event.toolName === "read";
export const isEditToolResult = (event) => event.toolName === "edit";
export const isWriteToolResult = (event) => event.toolName === "write";
export const isGrepToolResult = (event) => event.toolName === "grep";
export const isFindToolResult = (event) => event.toolName === "find";
export const isLsToolResult = (event) => event.toolName === "ls";

// ---- output truncation -----------------------------------------------------------------------

export const DEFAULT_MAX_LINES = 2000;
export const DEFAULT_MAX_BYTES = 50 * 1024;
export const CURRENT_SESSION_VERSION = 3;
export const DEFAULT_COMPACTION_SETTINGS = { enabled: true, reserveTokens: 16384, keepRecentTokens: 20000 };

// UTF-8 length; an unpaired surrogate counts as the 3 bytes of U+FFFD, as Buffer does.
function utf8Length(text) {
  let bytes = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return bytes;
}

// The last `maxBytes` bytes of `text`, starting at a character boundary.
function lastBytes(text, maxBytes) {
  const bytes = new TextEncoder().encode(text);
  let start = Math.max(0, bytes.length - maxBytes);
  while (start < bytes.length && (bytes[start] & 0xc0) === 0x80) start++;
  return new TextDecoder().decode(bytes.subarray(start));
}

export function formatSize(bytes) {
  if (bytes < 1024) return `${bytes}B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)}KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)}MB`;
}

function truncationResult(content, lines, totalBytes, maxLines, maxBytes, extra) {
  return {
    content,
    truncated: false,
    truncatedBy: null,
    totalLines: lines.length,
    totalBytes,
    outputLines: lines.length,
    outputBytes: totalBytes,
    lastLinePartial: false,
    firstLineExceedsLimit: false,
    maxLines,
    maxBytes,
    ...extra,
  };
}

// Keeps whole lines from one end of `content` within both limits. `fromEnd` keeps the tail,
// and then a last line longer than the byte limit is cut to its final bytes.
function truncate(content, options = {}, fromEnd) {
  const maxLines = options.maxLines ?? DEFAULT_MAX_LINES;
  const maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
  const lines = content.split("\n");
  const totalBytes = utf8Length(content);
  if (lines.length <= maxLines && totalBytes <= maxBytes) {
    return truncationResult(content, lines, totalBytes, maxLines, maxBytes, {});
  }
  const ordered = fromEnd ? [...lines].reverse() : lines;
  if (!fromEnd && utf8Length(lines[0]) > maxBytes) {
    return truncationResult("", lines, totalBytes, maxLines, maxBytes, {
      truncated: true,
      truncatedBy: "bytes",
      outputLines: 0,
      outputBytes: 0,
      firstLineExceedsLimit: true,
    });
  }
  const kept = [];
  let used = 0;
  let truncatedBy = "lines";
  let lastLinePartial = false;
  for (const line of ordered) {
    if (kept.length >= maxLines) break;
    const cost = utf8Length(line) + (kept.length > 0 ? 1 : 0);
    if (used + cost > maxBytes) {
      truncatedBy = "bytes";
      if (fromEnd && kept.length === 0) {
        kept.push(lastBytes(line, maxBytes));
        lastLinePartial = true;
      }
      break;
    }
    kept.push(line);
    used += cost;
  }
  if (kept.length >= maxLines && used <= maxBytes) truncatedBy = "lines";
  const output = (fromEnd ? kept.reverse() : kept).join("\n");
  return truncationResult(output, lines, totalBytes, maxLines, maxBytes, {
    truncated: true,
    truncatedBy,
    outputLines: kept.length,
    outputBytes: utf8Length(output),
    lastLinePartial,
  });
}

export const truncateHead = (content, options) => truncate(content, options, false);
export const truncateTail = (content, options) => truncate(content, options, true);

export function truncateLine(line, maxChars = 500) {
  if (line.length <= maxChars) return { text: line, wasTruncated: false };
  return { text: `${line.slice(0, maxChars)}... [truncated]`, wasTruncated: true };
}

// ---- file mutation queue ---------------------------------------------------------------------

const mutationQueues = new Map();

/** Runs `fn` after every earlier queued mutation of the same file (by real path) has settled. */
export async function withFileMutationQueue(filePath, fn) {
  let key = resolve(filePath);
  try {
    key = realpathSync(key);
  } catch {}
  const before = mutationQueues.get(key) ?? Promise.resolve();
  const run = before.then(() => fn());
  const settled = run.then(
    () => {},
    () => {},
  );
  mutationQueues.set(key, settled);
  try {
    return await run;
  } finally {
    if (mutationQueues.get(key) === settled) mutationQueues.delete(key);
  }
}

// ---- built-in tools: definitions only --------------------------------------------------------

// What the model is told about each tool (description, snippet, guidelines, schema) comes from
// the host; only pi's argument repairs run here.
const PREPARE_ARGUMENTS = {
  // Models sometimes send `edits` as a JSON string, or the older single oldText/newText form.
  edit(input) {
    if (!input || typeof input !== "object") return input;
    if (typeof input.edits === "string") {
      try {
        const parsed = JSON.parse(input.edits);
        if (Array.isArray(parsed)) input.edits = parsed;
      } catch {}
    }
    const { oldText, newText, ...rest } = input;
    if (typeof oldText !== "string" || typeof newText !== "string") return input;
    return { ...rest, edits: [...(Array.isArray(input.edits) ? input.edits : []), { oldText, newText }] };
  },
};

let builtInSpecs;
function builtInSpec(name) {
  if (!builtInSpecs) {
    const internal = globalThis.__pichamber_internal;
    if (typeof internal?.builtinTools !== "function") throw unavailable(`The built-in ${name} tool`);
    builtInSpecs = new Map(internal.builtinTools().map((spec) => [spec.name, spec]));
  }
  return builtInSpecs.get(name);
}

// The host runs pi's built-in tools for an extension as a host-provided program, with the
// extension's own grants (the folder must be granted to it; bash must be granted as a
// program). Custom `operations` (ssh.ts's remote reads) would need pi's tool code here.
// Partial results (bash) are reported for the tool call the extension names, as the onUpdate
// it was given would report them.
async function runBuiltIn(name, cwd, options, toolCallId, params, signal, onUpdate) {
  if (options?.operations) throw unavailable(`The built-in ${name} tool with custom operations`);
  const internal = globalThis.__pichamber_internal;
  if (typeof internal?.runBuiltinTool !== "function") throw unavailable(`The built-in ${name} tool`);
  if (name === "bash" && params && typeof params.command === "string") {
    let command;
    ({ command, cwd } = bashSpawn(params.command, cwd, options));
    params = { ...params, command };
  }
  const updatesFor = typeof onUpdate === "function" ? String(toolCallId ?? "") : "";
  return internal.runBuiltinTool(name, params ?? {}, updatesFor, {
    cwd: cwd === undefined ? undefined : String(cwd),
    signal,
  });
}

const SHELL_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const shellQuote = (value) => `'${String(value).replaceAll("'", "'\\''")}'`;

// pi's bash options that run in the extension, as pi runs them: `commandPrefix` goes on the
// line before the command, and `spawnHook` sees what would run and may rewrite or refuse it
// (an extension's guard keeps guarding). What it changes in the environment becomes
// export/unset lines before the command: what the extension could have written itself, so
// the host still runs it under the extension's own grants and nothing more.
function bashSpawn(command, cwd, options) {
  const resolved = options?.commandPrefix ? `${options.commandPrefix}\n${command}` : command;
  if (typeof options?.spawnHook !== "function") return { command: resolved, cwd };
  const base = { ...process.env };
  const hooked = options.spawnHook({ command: resolved, cwd: cwd === undefined ? process.cwd() : String(cwd), env: { ...base } });
  if (!hooked || typeof hooked.command !== "string") throw new TypeError("The bash tool's spawnHook must return { command, cwd, env }");
  const env = hooked.env && typeof hooked.env === "object" ? hooked.env : base;
  const lines = [];
  for (const [name, value] of Object.entries(env)) {
    if (value === undefined || base[name] === String(value)) continue;
    if (!SHELL_NAME.test(name)) throw new TypeError(`The bash tool's spawnHook set the environment variable ${JSON.stringify(name)}, which a shell cannot export`);
    lines.push(`export ${name}=${shellQuote(value)}`);
  }
  for (const name of Object.keys(base)) {
    if (env[name] === undefined && SHELL_NAME.test(name)) lines.push(`unset ${name}`);
  }
  lines.push(hooked.command);
  return { command: lines.join("\n"), cwd: hooked.cwd ?? cwd };
}

function toolDefinition(name, cwd, options) {
  const { description, promptSnippet, promptGuidelines, parameters, constrainedSampling } = builtInSpec(name);
  const definition = { name, label: name, description, promptSnippet };
  if (promptGuidelines?.length) definition.promptGuidelines = [...promptGuidelines];
  // pi 1.6.0's read, bash, edit and write ask for schema-constrained sampling.
  if (constrainedSampling) definition.constrainedSampling = { ...constrainedSampling };
  return Object.assign(definition, {
    parameters: JSON.parse(JSON.stringify(parameters)),
    prepareArguments: PREPARE_ARGUMENTS[name],
    execute: (toolCallId, params, signal, onUpdate) =>
      runBuiltIn(name, cwd, options, toolCallId, params, signal, onUpdate),
  });
}

function tool(name, cwd, options) {
  const { description, parameters, prepareArguments, execute, constrainedSampling } = toolDefinition(name, cwd, options);
  const agentTool = { name, label: name, description, parameters, prepareArguments, executionMode: undefined, execute };
  if (constrainedSampling) agentTool.constrainedSampling = constrainedSampling;
  return agentTool;
}

export const createReadToolDefinition = (cwd, options) => toolDefinition("read", cwd, options);
export const createBashToolDefinition = (cwd, options) => toolDefinition("bash", cwd, options);
export const createEditToolDefinition = (cwd, options) => toolDefinition("edit", cwd, options);
export const createWriteToolDefinition = (cwd, options) => toolDefinition("write", cwd, options);
export const createGrepToolDefinition = (cwd, options) => toolDefinition("grep", cwd, options);
export const createFindToolDefinition = (cwd, options) => toolDefinition("find", cwd, options);
export const createLsToolDefinition = (cwd, options) => toolDefinition("ls", cwd, options);
export const createReadTool = (cwd, options) => tool("read", cwd, options);
export const createBashTool = (cwd, options) => tool("bash", cwd, options);
export const createEditTool = (cwd, options) => tool("edit", cwd, options);
export const createWriteTool = (cwd, options) => tool("write", cwd, options);
export const createGrepTool = (cwd, options) => tool("grep", cwd, options);
export const createFindTool = (cwd, options) => tool("find", cwd, options);
export const createLsTool = (cwd, options) => tool("ls", cwd, options);
export const createCodingTools = (cwd, options) => ["read", "bash", "edit", "write"].map((n) => tool(n, cwd, options?.[n]));
export const createReadOnlyTools = (cwd, options) => ["read", "grep", "find", "ls"].map((n) => tool(n, cwd, options?.[n]));

// ---- messages (simplified) -------------------------------------------------------------------

const textOf = (content) =>
  typeof content === "string"
    ? content
    : content
        .filter((c) => c.type === "text")
        .map((c) => c.text)
        .join("");

/** Turns pi's app messages into LLM messages (bash runs and summaries become user text). */
export function convertToLlm(messages) {
  const user = (text, m) => ({ role: "user", content: [{ type: "text", text }], timestamp: m.timestamp });
  return messages.flatMap((m) => {
    switch (m.role) {
      case "user":
      case "assistant":
      case "toolResult":
        return [m];
      case "custom":
        if (typeof m.content === "string") return [user(m.content, m)];
        return [{ role: "user", content: m.content, timestamp: m.timestamp }];
      case "bashExecution":
        return m.excludeFromContext ? [] : [user(`Ran \`${m.command}\`\n\`\`\`\n${m.output}\n\`\`\``, m)];
      case "branchSummary":
      case "compactionSummary":
        return [user(`<summary>\n${m.summary}\n</summary>`, m)];
      default:
        return [];
    }
  });
}

/** A plain-text transcript of LLM messages, as pi gives its summarizer. */
export function serializeConversation(messages) {
  const parts = [];
  for (const m of messages) {
    if (m.role === "user") {
      const text = textOf(m.content);
      if (text) parts.push(`[User]: ${text}`);
    } else if (m.role === "assistant") {
      const of = (type) => m.content.filter((c) => c.type === type);
      const thinking = of("thinking").map((c) => c.thinking);
      const text = of("text").map((c) => c.text);
      const calls = of("toolCall").map(
        (c) => `${c.name}(${Object.entries(c.arguments).map(([k, v]) => `${k}=${JSON.stringify(v)}`).join(", ")})`,
      );
      if (thinking.length) parts.push(`[Assistant thinking]: ${thinking.join("\n")}`);
      if (text.length) parts.push(`[Assistant]: ${text.join("\n")}`);
      if (calls.length) parts.push(`[Assistant tool calls]: ${calls.join("; ")}`);
    } else if (m.role === "toolResult") {
      const text = textOf(m.content);
      const cut = text.length > 2000 ? `\n\n[... ${text.length - 2000} more characters truncated]` : "";
      if (text) parts.push(`[Tool result]: ${text.slice(0, 2000)}${cut}`);
    }
  }
  return parts.join("\n\n");
}

export const createSyntheticSourceInfo = (path, options) => ({
  path,
  source: options.source,
  scope: options.scope ?? "temporary",
  origin: options.origin ?? "top-level",
  baseDir: options.baseDir,
});

export function createEventBus() {
  const channels = new Map();
  return {
    emit(channel, data) {
      for (const handler of [...(channels.get(channel) ?? [])]) {
        Promise.resolve()
          .then(() => handler(data))
          .catch((err) => console.error(`Event handler error (${channel}):`, err));
      }
    },
    on(channel, handler) {
      if (!channels.has(channel)) channels.set(channel, new Set());
      const wrapped = (data) => handler(data);
      channels.get(channel).add(wrapped);
      return () => channels.get(channel)?.delete(wrapped);
    },
    clear: () => channels.clear(),
  };
}

// ---- frontmatter: a YAML subset --------------------------------------------------------------
// Block mappings and sequences by indentation, flow [..] and {..}, plain/quoted scalars with
// YAML 1.2 core types, | and > block scalars with -/+ chomping, # comments.

const MAP_KEY = /^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"[\]{},][^#]*?)\s*:(?:\s+(.*))?$/;
const isItem = (text) => text === "-" || text.startsWith("- ");
const indentOf = (line) => line.length - line.trimStart().length;
const stripComment = (text) => text.replace(/(^|\s)#.*$/, "").trim();

function plainScalar(text) {
  if (/^(~|null|Null|NULL|)$/.test(text)) return null;
  if (/^(true|True|TRUE)$/.test(text)) return true;
  if (/^(false|False|FALSE)$/.test(text)) return false;
  if (/^0o[0-7]+$/.test(text)) return parseInt(text.slice(2), 8);
  if (/^0x[0-9a-fA-F]+$/.test(text)) return parseInt(text.slice(2), 16);
  if (/^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/.test(text)) return Number(text);
  if (/^[-+]?\.(inf|Inf|INF)$/.test(text)) return text.startsWith("-") ? -Infinity : Infinity;
  if (/^\.(nan|NaN|NAN)$/.test(text)) return NaN;
  return text;
}

const ESCAPES = { n: "\n", t: "\t", r: "\r", 0: "\0", b: "\b", e: "\x1b", a: "\x07", f: "\f", v: "\v" };
function quoted(text) {
  if (text.startsWith("'")) return text.slice(1, -1).replace(/''/g, "'");
  return text
    .slice(1, -1)
    .replace(/\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[\s\S])/g, (_, e) =>
      e.length > 1 ? String.fromCodePoint(parseInt(e.slice(1), 16)) : (ESCAPES[e] ?? e),
    );
}
const QUOTED = /^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*')/;

function parseFlow(text) {
  let pos = 0;
  const skipSpace = () => {
    while (/\s/.test(text[pos] ?? "")) pos++;
  };
  const scalar = (stop) => {
    const q = QUOTED.exec(text.slice(pos));
    if (q) {
      pos += q[0].length;
      return quoted(q[0]);
    }
    const start = pos;
    while (pos < text.length && !stop.test(text.slice(pos))) pos++;
    return plainScalar(text.slice(start, pos).trim());
  };
  const collection = (close, entry) => {
    const out = close === "]" ? [] : {};
    pos++;
    for (;;) {
      skipSpace();
      if (text[pos] === close) {
        pos++;
        return out;
      }
      entry(out);
      skipSpace();
      if (text[pos] === ",") pos++;
      else if (text[pos] !== close) throw new Error(`Unterminated flow collection in frontmatter: ${text}`);
    }
  };
  const value = () => {
    skipSpace();
    if (text[pos] === "[") return collection("]", (out) => out.push(value()));
    if (text[pos] === "{")
      return collection("}", (out) => {
        const key = scalar(/^(:\s|:$|[,}])/);
        skipSpace();
        if (text[pos] === ":") pos++;
        out[String(key)] = text[pos - 1] === ":" ? value() : null;
      });
    return scalar(/^[,\]}]/);
  };
  const result = value();
  skipSpace();
  if (pos < text.length) throw new Error(`Unexpected text in frontmatter: ${text}`);
  return result;
}

function parseYaml(source) {
  const lines = source.split("\n");
  let i = 0;
  const peek = () => {
    while (i < lines.length && /^\s*(#.*)?$/.test(lines[i])) i++;
    return lines[i];
  };

  function node(minIndent) {
    const line = peek();
    if (line === undefined || indentOf(line) < minIndent) return null;
    const text = line.trim();
    if (isItem(text)) return sequence(indentOf(line));
    if (MAP_KEY.test(text)) return mapping(indentOf(line));
    i++;
    return inlineValue(text, indentOf(line) - 1);
  }

  function sequence(indent) {
    const out = [];
    for (let line = peek(); line !== undefined && indentOf(line) === indent && isItem(line.trim()); line = peek()) {
      const rest = line.trim().slice(1).trimStart();
      if (rest === "" || rest.startsWith("#")) {
        i++;
        out.push(node(indent + 1));
      } else if (isItem(rest) || MAP_KEY.test(rest)) {
        const column = line.length - rest.length;
        lines[i] = " ".repeat(column) + rest; // re-read the item's content as a nested block
        out.push(node(column));
      } else {
        i++;
        out.push(inlineValue(rest, indent));
      }
    }
    return out;
  }

  function mapping(indent) {
    const out = {};
    for (let line = peek(); line !== undefined && indentOf(line) >= indent; line = peek()) {
      const m = indentOf(line) === indent && MAP_KEY.exec(line.trim());
      if (!m) throw new Error(`Invalid frontmatter line ${i + 1}: ${line.trim()}`);
      i++;
      const key = QUOTED.test(m[1]) ? quoted(m[1]) : m[1];
      const rest = stripComment(m[2] ?? "");
      if (rest !== "") out[key] = inlineValue(m[2].trim(), indent);
      else {
        const next = peek();
        const listHere = next !== undefined && indentOf(next) === indent && isItem(next.trim());
        out[key] = listHere ? sequence(indent) : node(indent + 1); // "key:\n- a" lists may share the key's indent
      }
    }
    return out;
  }

  // A value that starts on the current line; continuation lines must be indented past `indent`.
  function inlineValue(text, indent) {
    if (/^[|>]/.test(text)) return blockScalar(stripComment(text), indent);
    if (text.startsWith("[") || text.startsWith("{")) return parseFlow(stripComment(text));
    const q = QUOTED.exec(text);
    if (q) {
      if (stripComment(text.slice(q[0].length)) !== "") throw new Error(`Unexpected text after ${q[0]}`);
      return quoted(q[0]);
    }
    if (/^["']/.test(text)) throw new Error(`Unterminated quoted string in frontmatter: ${text}`);
    let value = stripComment(text);
    const single = value;
    while (i < lines.length && !/^\s*(#.*)?$/.test(lines[i]) && indentOf(lines[i]) > indent) {
      if (MAP_KEY.test(lines[i].trim())) throw new Error(`Invalid frontmatter line ${i + 1}: ${lines[i].trim()}`);
      value += ` ${stripComment(lines[i])}`;
      i++;
    }
    return value === single ? plainScalar(value) : value;
  }

  function blockScalar(header, indent) {
    const body = [];
    while (i < lines.length && (lines[i].trim() === "" || indentOf(lines[i]) > indent)) body.push(lines[i++]);
    const firstText = body.find((l) => l.trim() !== "");
    const cut = firstText === undefined ? 0 : indentOf(firstText);
    const content = body.map((l) => l.slice(cut));
    let trailing = 0;
    while (content.length > 0 && content[content.length - 1].trim() === "") {
      content.pop();
      trailing++;
    }
    if (content.length === 0) return "";
    // Literal (|) keeps line breaks; folded (>) joins lines with spaces, an empty line making a break.
    let text = content[0];
    for (const l of content.slice(1)) {
      if (header.startsWith("|")) text += `\n${l}`;
      else text += l === "" ? "\n" : text.endsWith("\n") ? l : ` ${l}`;
    }
    if (header.includes("-")) return text;
    text += "\n";
    return header.includes("+") ? text + "\n".repeat(trailing) : text;
  }

  const result = node(0);
  if (peek() !== undefined) throw new Error(`Invalid frontmatter line ${i + 1}: ${lines[i].trim()}`);
  return result;
}

/** Splits "---\n<yaml>\n---\n<body>" into the parsed YAML (an object, {} when absent) and body. */
export function parseFrontmatter(content) {
  const text = content.replace(/\r\n?/g, "\n");
  const end = text.startsWith("---") ? text.indexOf("\n---", 3) : -1;
  if (end === -1) return { frontmatter: {}, body: text };
  const yaml = text.slice(4, end);
  const body = text.slice(end + 4).trim();
  return { frontmatter: yaml ? (parseYaml(yaml) ?? {}) : {}, body };
}

export const stripFrontmatter = (content) => parseFrontmatter(content).body;

// ---- themes and key hints (plain text) -------------------------------------------------------

const plain = (s) => s;
const plainFns = (names) => Object.fromEntries(names.split(" ").map((n) => [n, plain]));

export { Theme } from "pichamber:theme";

export function initTheme() {}
export const getMarkdownTheme = () => ({
  ...plainFns("heading link linkUrl code codeBlock codeBlockBorder quote quoteBorder hr listBullet"),
  ...plainFns("bold italic underline strikethrough"),
  highlightCode: (code) => code.split("\n"),
});
export const getSelectListTheme = () => plainFns("selectedPrefix selectedText description scrollInfo noMatch");
export const getSettingsListTheme = () => ({ ...plainFns("label value description"), cursor: "→ ", hint: plain });
export const highlightCode = (code) => code.split("\n");

const LANGUAGES = {
  typescript: "ts tsx mts cts",
  javascript: "js jsx mjs cjs",
  python: "py",
  ruby: "rb",
  rust: "rs",
  go: "go",
  java: "java",
  kotlin: "kt",
  swift: "swift",
  c: "c h",
  cpp: "cpp cc cxx hpp",
  csharp: "cs",
  php: "php",
  bash: "sh bash zsh",
  sql: "sql",
  html: "html htm",
  css: "css scss",
  json: "json",
  yaml: "yaml yml",
  toml: "toml",
  xml: "xml",
  markdown: "md markdown",
  lua: "lua",
};
const EXTENSION_LANGUAGE = Object.fromEntries(
  Object.entries(LANGUAGES).flatMap(([lang, exts]) => exts.split(" ").map((ext) => [ext, lang])),
);
/** A highlight language id for common source file extensions, else undefined. */
export function getLanguageFromPath(filePath) {
  const ext = /\.([^./]+)$/.exec(filePath)?.[1].toLowerCase();
  return ext ? EXTENSION_LANGUAGE[ext] : undefined;
}

// Default keys of pi's app keybindings (the tui.* ones come from pi-tui's keybindings).
const APP_KEYS = {
  "app.interrupt": "escape",
  "app.clear": "ctrl+c",
  "app.exit": "ctrl+d",
  "app.suspend": "ctrl+z",
  "app.thinking.cycle": "shift+tab",
  "app.model.cycleForward": "ctrl+p",
  "app.model.cycleBackward": "shift+ctrl+p",
  "app.model.select": "ctrl+l",
  "app.tools.expand": "ctrl+o",
  "app.thinking.toggle": "ctrl+t",
  "app.editor.external": "ctrl+g",
  "app.message.followUp": "alt+enter",
  "app.message.dequeue": "alt+up",
  "app.clipboard.pasteImage": "ctrl+v",
};
const keysFor = (id) => (APP_KEYS[id] ? [APP_KEYS[id]] : getKeybindings().getKeys(id));

export const keyText = (id) => keysFor(id).join("/");
export const keyHint = (id, description) => `${keyText(id)} ${description}`;
export const rawKeyHint = (key, description) => `${key} ${description}`;

// ---- TUI components (inert) ------------------------------------------------------------------

/** A horizontal rule across the full width. */
export class DynamicBorder extends Container {
  constructor(color = plain) {
    super();
    this.color = color;
  }
  render(width) {
    return [this.color("─".repeat(Math.max(1, width)))];
  }
}

/** A loader between two rules; escape aborts `signal` unless created with cancellable: false. */
export class BorderedLoader extends Container {
  constructor(tui, theme, message, options = {}) {
    super();
    this.cancellable = options.cancellable ?? true;
    const LoaderClass = this.cancellable ? CancellableLoader : Loader;
    this.loader = new LoaderClass(tui, plain, plain, message);
    this.controller = new AbortController();
    this.addChild(new DynamicBorder());
    this.addChild(this.loader);
    if (this.cancellable) {
      this.addChild(new Spacer(1));
      this.addChild(new Text(keyHint("tui.select.cancel", "cancel"), 1, 0));
    }
    this.addChild(new Spacer(1));
    this.addChild(new DynamicBorder());
  }
  get signal() {
    return this.cancellable ? this.loader.signal : this.controller.signal;
  }
  set onAbort(fn) {
    if (this.cancellable) this.loader.onAbort = fn;
  }
  handleInput(data) {
    if (this.cancellable) this.loader.handleInput(data);
  }
  dispose() {
    this.loader.stop();
  }
}

/** pi's editor with app actions: escape, ctrl+d on an empty editor, and onAction handlers. */
export class CustomEditor extends Editor {
  actionHandlers = new Map();
  constructor(tui, theme, keybindings, options) {
    super(tui, theme, options);
    this.keybindings = keybindings;
  }
  onAction(action, handler) {
    this.actionHandlers.set(action, handler);
  }
  handleInput(data) {
    if (this.onExtensionShortcut?.(data)) return;
    const matches = (action) => keysFor(action).some((key) => matchesKey(data, key));
    if (matches("app.interrupt")) {
      const handler = this.onEscape ?? this.actionHandlers.get("app.interrupt");
      if (handler) return void handler();
    } else if (matches("app.exit") && this.getText() === "") {
      return void (this.onCtrlD ?? this.actionHandlers.get("app.exit"))?.();
    } else {
      for (const [action, handler] of this.actionHandlers) {
        if (action !== "app.exit" && matches(action)) return void handler();
      }
    }
    super.handleInput(data);
  }
}

const inertComponent = (name) => ({ [name]: class extends Container {} })[name];
export const ArminComponent = inertComponent("ArminComponent");
export const AssistantMessageComponent = inertComponent("AssistantMessageComponent");
export const BashExecutionComponent = inertComponent("BashExecutionComponent");
export const BranchSummaryMessageComponent = inertComponent("BranchSummaryMessageComponent");
export const CompactionSummaryMessageComponent = inertComponent("CompactionSummaryMessageComponent");
export const CustomMessageComponent = inertComponent("CustomMessageComponent");
export const ExtensionEditorComponent = inertComponent("ExtensionEditorComponent");
export const ExtensionInputComponent = inertComponent("ExtensionInputComponent");
export const ExtensionSelectorComponent = inertComponent("ExtensionSelectorComponent");
export const FooterComponent = inertComponent("FooterComponent");
export const LoginDialogComponent = inertComponent("LoginDialogComponent");
export const ModelSelectorComponent = inertComponent("ModelSelectorComponent");
export const OAuthSelectorComponent = inertComponent("OAuthSelectorComponent");
export const SessionSelectorComponent = inertComponent("SessionSelectorComponent");
export const SettingsSelectorComponent = inertComponent("SettingsSelectorComponent");
export const ShowImagesSelectorComponent = inertComponent("ShowImagesSelectorComponent");
export const SkillInvocationMessageComponent = inertComponent("SkillInvocationMessageComponent");
export const ThemeSelectorComponent = inertComponent("ThemeSelectorComponent");
export const ThinkingSelectorComponent = inertComponent("ThinkingSelectorComponent");
export const ToolExecutionComponent = inertComponent("ToolExecutionComponent");
export const TreeSelectorComponent = inertComponent("TreeSelectorComponent");
export const UserMessageComponent = inertComponent("UserMessageComponent");
export const UserMessageSelectorComponent = inertComponent("UserMessageSelectorComponent");

// ---- host-only -------------------------------------------------------------------------------

export const AgentSession = hostOnlyClass("AgentSession");
export const AgentSessionRuntime = hostOnlyClass("AgentSessionRuntime");
export const AuthStorage = hostOnlyClass("AuthStorage");
export const DefaultPackageManager = hostOnlyClass("DefaultPackageManager");
export const DefaultResourceLoader = hostOnlyClass("DefaultResourceLoader");
export const ExtensionRunner = hostOnlyClass("ExtensionRunner");
export const FileAuthStorageBackend = hostOnlyClass("FileAuthStorageBackend");
export const InMemoryAuthStorageBackend = hostOnlyClass("InMemoryAuthStorageBackend");
export const InteractiveMode = hostOnlyClass("InteractiveMode");
export const ModelRegistry = hostOnlyClass("ModelRegistry");
export const RpcClient = hostOnlyClass("RpcClient");
export const SessionManager = hostOnlyClass("SessionManager");
export const SettingsManager = hostOnlyClass("SettingsManager");

export const buildSessionContext = hostOnly("buildSessionContext");
export const calculateContextTokens = hostOnly("calculateContextTokens");
export const collectEntriesForBranchSummary = hostOnly("collectEntriesForBranchSummary");
export const compact = hostOnly("compact");
export const copyToClipboard = hostOnly("copyToClipboard");
export const createAgentSession = hostOnly("createAgentSession");
export const createAgentSessionFromServices = hostOnly("createAgentSessionFromServices");
export const createAgentSessionRuntime = hostOnly("createAgentSessionRuntime");
export const createAgentSessionServices = hostOnly("createAgentSessionServices");
export const createExtensionRuntime = hostOnly("createExtensionRuntime");
export const createLocalBashOperations = hostOnly("createLocalBashOperations");
export const discoverAndLoadExtensions = hostOnly("discoverAndLoadExtensions");
export const estimateTokens = hostOnly("estimateTokens");
export const findCutPoint = hostOnly("findCutPoint");
export const findTurnStartIndex = hostOnly("findTurnStartIndex");
export const formatSkillsForPrompt = hostOnly("formatSkillsForPrompt");
export const generateBranchSummary = hostOnly("generateBranchSummary");
export const generateSummary = hostOnly("generateSummary");
export const getLastAssistantUsage = hostOnly("getLastAssistantUsage");
export const getLatestCompactionEntry = hostOnly("getLatestCompactionEntry");
export const getShellConfig = hostOnly("getShellConfig");
export const loadProjectContextFiles = hostOnly("loadProjectContextFiles");
export const loadSkills = hostOnly("loadSkills");
export const loadSkillsFromDir = hostOnly("loadSkillsFromDir");
export const main = hostOnly("main");
export const migrateSessionEntries = hostOnly("migrateSessionEntries");
export const parseSessionEntries = hostOnly("parseSessionEntries");
export const parseSkillBlock = hostOnly("parseSkillBlock");
export const prepareBranchEntries = hostOnly("prepareBranchEntries");
export const renderDiff = hostOnly("renderDiff");
export const runPrintMode = hostOnly("runPrintMode");
export const runRpcMode = hostOnly("runRpcMode");
export const shouldCompact = hostOnly("shouldCompact");
export const truncateToVisualLines = hostOnly("truncateToVisualLines");
export const wrapRegisteredTool = hostOnly("wrapRegisteredTool");
export const wrapRegisteredTools = hostOnly("wrapRegisteredTools");
