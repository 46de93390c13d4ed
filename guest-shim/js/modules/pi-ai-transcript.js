// pi-ai 1.6.0's transcript helpers: the system prompt and tool set travel in the transcript as
// system messages (a leading one, then patches: more content, sections set or removed with
// null, tools added or removed by name). These pure functions replay and reshape them, as
// providers and extensions that call models themselves need.

const isSystem = (message) => message?.role === "system";

/** The text blocks of message content, joined (a string is its own text). */
export function contentText(content, separator = "\n") {
  if (typeof content === "string") return content;
  return (content ?? [])
    .filter((block) => block.type === "text")
    .map((block) => block.text)
    .join(separator);
}

/** A system message as one prompt: its content, then each section's text. */
export function getSystemMessageText(message) {
  const sections = Object.values(message.sections ?? {}).filter((text) => text !== null);
  return [contentText(message.content), ...sections].filter((part) => part.length > 0).join("\n\n");
}

/** A later system message as the model is told it: new content, then each section change. */
export function renderSystemMessageUpdate(message) {
  const text = contentText(message.content);
  const parts = text.length > 0 ? [text] : [];
  for (const [name, value] of Object.entries(message.sections ?? {})) {
    parts.push(
      value === null
        ? `Removed system prompt section "${name}".`
        : `Updated system prompt section "${name}":\n\n${value}`,
    );
  }
  return parts.join("\n\n");
}

/** The leading system message of a prompt and tools; none when both are empty. */
export function createInitialSystemMessage(systemPrompt, tools) {
  const prompt = systemPrompt ?? "";
  const hasTools = (tools?.length ?? 0) > 0;
  if (prompt.length === 0 && !hasTools) return undefined;
  const message = { role: "system", content: prompt };
  if (hasTools) message.toolsAdded = tools;
  message.timestamp = 0;
  return message;
}

/** A `Context` ({systemPrompt, tools, messages}) as a transcript led by its system message. */
export function normalizeContext(context) {
  const head = createInitialSystemMessage(context.systemPrompt, context.tools);
  return { messages: head ? [head, ...context.messages] : context.messages };
}

export function getInitialSystemMessage(messages) {
  return isSystem(messages[0]) ? messages[0] : undefined;
}

export function withoutInitialSystemMessage(messages) {
  return getInitialSystemMessage(messages) ? messages.slice(1) : messages;
}

/** The tools in force after every system message, in the order they were declared. */
export function getCurrentTools(messages) {
  const tools = new Map();
  for (const message of messages.filter(isSystem)) {
    for (const removed of message.toolsRemoved ?? []) tools.delete(removed.name);
    for (const added of message.toolsAdded ?? []) tools.set(added.name, added);
  }
  return [...tools.values()];
}

/** Every system message replayed into one: all content, sections patched, current tools. */
export function getCurrentSystemMessage(messages) {
  const content = [];
  const sections = new Map();
  let timestamp;
  for (const message of messages.filter(isSystem)) {
    timestamp ??= message.timestamp;
    const text = contentText(message.content);
    if (text.length > 0) content.push(text);
    for (const [name, value] of Object.entries(message.sections ?? {})) {
      if (value === null) sections.delete(name);
      else sections.set(name, value);
    }
  }
  const tools = getCurrentTools(messages);
  if (timestamp === undefined && tools.length === 0) return undefined;
  const replayed = { role: "system", content: content.join("\n\n") };
  if (sections.size > 0) replayed.sections = Object.fromEntries(sections);
  if (tools.length > 0) replayed.toolsAdded = tools;
  replayed.timestamp = timestamp ?? 0;
  return replayed;
}

export function getCurrentSystemPrompt(messages) {
  const message = getCurrentSystemMessage(messages);
  return message ? getSystemMessageText(message) : "";
}

/** For APIs without system messages mid-conversation: the replayed one leads, the rest go. */
export function collapseSystemMessages(context) {
  const head = getCurrentSystemMessage(context.messages);
  const rest = context.messages.filter((message) => !isSystem(message));
  return { messages: head ? [head, ...rest] : rest };
}

export function resolveTranscript(context, supportsMidConvoSystemMessages) {
  return supportsMidConvoSystemMessages ? context : collapseSystemMessages(context);
}

/** What the model is told of a tool: name, description, parameters, constrained sampling. */
export function toToolDeclaration(tool) {
  const declaration = {
    name: tool.name,
    description: tool.description,
    parameters: JSON.parse(JSON.stringify(tool.parameters)),
  };
  if (tool.constrainedSampling !== undefined) declaration.constrainedSampling = tool.constrainedSampling;
  return declaration;
}

export function declarationsEqual(left, right) {
  return JSON.stringify(toToolDeclaration(left)) === JSON.stringify(toToolDeclaration(right));
}

/** From one tool set to another; a changed tool is removed and added again. */
export function getToolStateChanges(previous, current) {
  const before = new Map(previous.map((tool) => [tool.name, tool]));
  const after = new Map(current.map((tool) => [tool.name, tool]));
  const changed = (tool, other) => other === undefined || !declarationsEqual(tool, other);
  return {
    toolsAdded: current.filter((tool) => changed(tool, before.get(tool.name))).map(toToolDeclaration),
    toolsRemoved: previous
      .filter((tool) => changed(tool, after.get(tool.name)))
      .map((tool) => ({ name: tool.name })),
  };
}

/** Every tool any system message declared, the last declaration of each name. */
export function getDeclaredTools(messages) {
  const declared = new Map();
  for (const message of messages.filter(isSystem)) {
    for (const tool of message.toolsAdded ?? []) declared.set(tool.name, tool);
  }
  return [...declared.values()];
}

export function hasToolRedefinitions(messages) {
  const declared = new Map();
  for (const message of messages.filter(isSystem)) {
    for (const tool of message.toolsAdded ?? []) {
      const earlier = declared.get(tool.name);
      if (earlier !== undefined && !declarationsEqual(earlier, tool)) return true;
      declared.set(tool.name, tool);
    }
  }
  return false;
}

/** The index of the last system message that removes a tool or declares a name again, or -1. */
function lastNonAdditiveChange(systemMessages) {
  const seen = new Set();
  let last = -1;
  systemMessages.forEach((message, index) => {
    if ((message.toolsRemoved?.length ?? 0) > 0) last = index;
    for (const tool of message.toolsAdded ?? []) {
      if (seen.has(tool.name)) last = index;
      seen.add(tool.name);
    }
  });
  return last;
}

export function hasNonAdditiveToolChanges(messages) {
  return lastNonAdditiveChange(messages.filter(isSystem)) >= 0;
}

/**
 * Which tools go in a request's top-level list and how many leading system messages that
 * list accounts for: "none" (all of them), "changes" (none: every message declares in place),
 * "additions" (up to the last removal or redefinition, which cannot be said in place).
 */
export function resolveTranscriptTools(messages, support) {
  const systemMessages = messages.filter(isSystem);
  if (support === "none") {
    return { requestTools: getCurrentTools(systemMessages), foldedSystemMessages: systemMessages.length };
  }
  if (support === "changes") return { requestTools: [], foldedSystemMessages: 0 };
  const folded = Math.max(getInitialSystemMessage(messages) ? 1 : 0, lastNonAdditiveChange(systemMessages) + 1);
  return { requestTools: getCurrentTools(systemMessages.slice(0, folded)), foldedSystemMessages: folded };
}
