// @mariozechner/pi-tui for pichamber: an original implementation of what extensions need from
// pi-tui, written from its observable behaviour. In pichamber the pi host owns the terminal
// and never renders extension components, so the components here are inert stand-ins that
// render their plain text; the text helpers (visibleWidth, truncateToWidth, wrapTextWithAnsi)
// and key helpers (Key, parseKey, matchesKey) are small working versions. Widths: ANSI escape
// sequences count 0, tabs 3, East Asian wide characters and emoji 2 (by code point ranges, with
// combining marks, variation selectors, ZWJ sequences and flag pairs joined into one cell group).

// ---- character widths ------------------------------------------------------------------------

const inRanges = (ranges, cp) => {
  for (let i = 0; i < ranges.length; i += 2) if (cp >= ranges[i] && cp <= ranges[i + 1]) return true;
  return false;
};
// Code points that attach to the preceding character (marks, joiners, selectors, skin tones, tags).
const EXTEND = [
  0x300, 0x36f, 0x483, 0x489, 0x591, 0x5bd, 0x610, 0x61a, 0x64b, 0x65f, 0x900, 0x903, 0x93a, 0x94f,
  0xe31, 0xe31, 0xe34, 0xe3a, 0xe47, 0xe4e, 0x1ab0, 0x1aff, 0x1dc0, 0x1dff, 0x200c, 0x200d, 0x20d0, 0x20ff,
  0xfe00, 0xfe0f, 0xfe20, 0xfe2f, 0x1f3fb, 0x1f3ff, 0xe0020, 0xe007f, 0xe0100, 0xe01ef,
];
// Code points that take no cell on their own (controls, invisible format characters, lone surrogates).
const INVISIBLE = [
  0x0, 0x1f, 0x7f, 0x9f, 0xad, 0xad, 0x200b, 0x200b, 0x200e, 0x200f, 0x2028, 0x202e, 0x2060, 0x206f,
  0xd800, 0xdfff, 0xfeff, 0xfeff,
];
// Code points drawn two cells wide: East Asian wide/fullwidth and emoji-presentation characters.
const WIDE = [
  0x1100, 0x115f, 0x231a, 0x231b, 0x2329, 0x232a, 0x23e9, 0x23ec, 0x23f0, 0x23f0, 0x23f3, 0x23f3, 0x25fd, 0x25fe,
  0x2614, 0x2615, 0x2648, 0x2653, 0x267f, 0x267f, 0x2693, 0x2693, 0x26a1, 0x26a1, 0x26aa, 0x26ab, 0x26bd, 0x26be,
  0x26c4, 0x26c5, 0x26ce, 0x26ce, 0x26d4, 0x26d4, 0x26ea, 0x26ea, 0x26f2, 0x26f3, 0x26f5, 0x26f5, 0x26fa, 0x26fa,
  0x26fd, 0x26fd, 0x2705, 0x2705, 0x270a, 0x270b, 0x2728, 0x2728, 0x274c, 0x274c, 0x274e, 0x274e, 0x2753, 0x2755,
  0x2757, 0x2757, 0x2795, 0x2797, 0x27b0, 0x27b0, 0x27bf, 0x27bf, 0x2b1b, 0x2b1c, 0x2b50, 0x2b50, 0x2b55, 0x2b55,
  0x2e80, 0x303e, 0x3041, 0x33ff, 0x3400, 0x4dbf, 0x4e00, 0x9fff, 0xa000, 0xa4cf, 0xa960, 0xa97f, 0xac00, 0xd7a3,
  0xf900, 0xfaff, 0xfe10, 0xfe19, 0xfe30, 0xfe6f, 0xff00, 0xff60, 0xffe0, 0xffe6, 0x1f004, 0x1f004, 0x1f0cf,
  0x1f0cf, 0x1f18e, 0x1f18e, 0x1f191, 0x1f19a, 0x1f1e6, 0x1f1ff, 0x1f200, 0x1f64f, 0x1f680, 0x1f6ff, 0x1f7e0,
  0x1f7eb, 0x1f90c, 0x1f9ff, 0x1fa70, 0x1faff, 0x20000, 0x3fffd,
];
const isFlagLetter = (cp) => cp >= 0x1f1e6 && cp <= 0x1f1ff;

// Plain text (no escapes, no tabs) as [group, width] pairs, one per cell group.
function groups(text) {
  const out = [];
  let joinNext = false;
  let flagOpen = false;
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    const last = out[out.length - 1];
    if (last && (joinNext || inRanges(EXTEND, cp) || (flagOpen && isFlagLetter(cp)))) {
      last[0] += ch;
      if (cp === 0xfe0f && last[1] === 1) last[1] = 2; // emoji presentation selector
      joinNext = cp === 0x200d;
      flagOpen = false;
      continue;
    }
    out.push([ch, inRanges(INVISIBLE, cp) ? 0 : inRanges(WIDE, cp) ? 2 : 1]);
    joinNext = false;
    flagOpen = isFlagLetter(cp);
  }
  return out;
}

// CSI sequences, OSC/APC strings (terminated by BEL or ST), and tabs.
const SPECIAL = /(\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]_][\s\S]*?(?:\x07|\x1b\\)|\t)/;

// Text as [unit, width] pairs; escape sequences have width null.
function units(text) {
  const out = [];
  text.split(SPECIAL).forEach((part, i) => {
    if (i % 2 === 1) out.push([part, part === "\t" ? 3 : null]);
    else if (part) out.push(...groups(part));
  });
  return out;
}

export function visibleWidth(text) {
  let width = 0;
  for (const [, w] of units(text)) width += w ?? 0;
  return width;
}

// The longest prefix of `text` at most `room` cells wide; escapes are kept only before kept text.
function takeWidth(text, room) {
  let out = "";
  let width = 0;
  let pending = "";
  for (const [unit, w] of units(text)) {
    if (w === null) pending += unit;
    else if (width + w > room) break;
    else {
      out += pending + unit;
      pending = "";
      width += w;
    }
  }
  return [out, width];
}

const RESET = "\x1b[0m";

export function truncateToWidth(text, maxWidth, ellipsis = "...", pad = false) {
  if (maxWidth <= 0) return "";
  const padTo = (s, used) => (pad ? s + " ".repeat(Math.max(0, maxWidth - used)) : s);
  const total = visibleWidth(text);
  if (total <= maxWidth) return padTo(text, total);
  let [tail, tailWidth] = [ellipsis, visibleWidth(ellipsis)];
  if (tailWidth >= maxWidth) {
    [tail, tailWidth] = takeWidth(ellipsis, maxWidth);
    if (tailWidth === 0) return padTo("", 0);
  }
  const [head, headWidth] = takeWidth(text, maxWidth - tailWidth);
  return padTo(head + RESET + (tail ? tail + RESET : ""), headWidth + tailWidth);
}

// ---- wrapping --------------------------------------------------------------------------------

// SGR state carried onto continuation lines: one active code per attribute group.
function styleGroup(param) {
  const n = Number(param);
  if (n === 1 || n === 2 || n === 22) return "weight";
  if ((n >= 30 && n <= 39) || (n >= 90 && n <= 97)) return "fg";
  if ((n >= 40 && n <= 49) || (n >= 100 && n <= 107)) return "bg";
  if (n >= 3 && n <= 9) return String(n);
  if (n >= 23 && n <= 29) return String(n - 20);
  return param;
}
function trackStyle(style, text) {
  for (const [code, params] of text.matchAll(/\x1b\[([0-9;:]*)m/g)) {
    const first = params.split(/[;:]/)[0];
    if (first === "" || first === "0") style.clear();
    else if (/^(2[2-9]|39|49)$/.test(first)) style.delete(styleGroup(first));
    else style.set(styleGroup(first), code);
  }
}
const styleCodes = (style) => [...style.values()].join("");

// Runs of spaces and of other text, each as [text, width, isSpace]; escapes join the next run.
function words(line) {
  const out = [];
  let pending = "";
  for (const [unit, w] of units(line)) {
    if (w === null) {
      pending += unit;
      continue;
    }
    const space = unit === " ";
    const last = out[out.length - 1];
    if (last && last[2] === space) {
      last[0] += pending + unit;
      last[1] += w;
    } else out.push([pending + unit, w, space]);
    pending = "";
  }
  if (pending) out.push([pending, 0, false]);
  return out;
}

function wrapLine(line, width) {
  if (visibleWidth(line) <= width) return [line];
  const lines = [];
  const style = new Map();
  let current = "";
  let used = 0;
  const breakLine = () => {
    lines.push(current);
    current = styleCodes(style);
    used = 0;
  };
  for (const [text, w, space] of words(line)) {
    if (!space && w > width) {
      if (used > 0) breakLine();
      for (const [unit, uw] of units(text)) {
        if (uw !== null && used + uw > width) breakLine();
        current += unit;
        used += uw ?? 0;
        if (uw === null) trackStyle(style, unit);
      }
      continue;
    }
    if (used > 0 && used + w > width) {
      if (space) trackStyle(style, text); // the spaces are dropped, their style changes are not
      breakLine();
      if (space) continue;
      current += text;
      used = w;
      trackStyle(style, text);
      continue;
    }
    current += text;
    used += w;
    trackStyle(style, text);
  }
  if (current) lines.push(current);
  return lines.map((l) => l.trimEnd());
}

export function wrapTextWithAnsi(text, width) {
  if (!text) return [""];
  const out = [];
  const style = new Map();
  for (const line of text.split("\n")) {
    out.push(...wrapLine(styleCodes(style) + line, width));
    trackStyle(style, line);
  }
  return out;
}

// ---- keys ------------------------------------------------------------------------------------

const SYMBOL_KEYS = {
  backtick: "`", hyphen: "-", equals: "=", leftbracket: "[", rightbracket: "]", backslash: "\\",
  semicolon: ";", quote: "'", comma: ",", period: ".", slash: "/", exclamation: "!", at: "@", hash: "#",
  dollar: "$", percent: "%", caret: "^", ampersand: "&", asterisk: "*", leftparen: "(", rightparen: ")",
  underscore: "_", plus: "+", pipe: "|", tilde: "~", leftbrace: "{", rightbrace: "}", colon: ":",
  lessthan: "<", greaterthan: ">", question: "?",
};
const NAMED_KEYS =
  "escape esc enter return tab space backspace delete insert clear home end pageUp pageDown up down left right";
const MODIFIER_HELPERS = [
  "ctrl shift alt super ctrlShift shiftCtrl ctrlAlt altCtrl shiftAlt altShift",
  "ctrlSuper superCtrl shiftSuper superShift altSuper superAlt ctrlShiftAlt ctrlShiftSuper",
].join(" ");

/** Key ids ("ctrl+c", "escape"...) and builders for modifier combinations (Key.ctrl("c")). */
export const Key = {};
for (const name of NAMED_KEYS.split(" ")) Key[name] = name;
for (let n = 1; n <= 12; n++) Key[`f${n}`] = `f${n}`;
Object.assign(Key, SYMBOL_KEYS);
for (const helper of MODIFIER_HELPERS.split(" ")) {
  const prefix = helper.replace(/[A-Z]/g, (c) => `+${c.toLowerCase()}`);
  Key[helper] = (key) => `${prefix}+${key}`;
}

const MODIFIERS = ["shift", "ctrl", "alt", "super"]; // the order key ids list them in
const MODIFIER_BITS = { shift: 1, alt: 2, ctrl: 4, super: 8 }; // terminal modifier value - 1
const CSI_FINAL = {
  A: "up", B: "down", C: "right", D: "left", H: "home", F: "end", E: "clear", P: "f1", Q: "f2", R: "f3", S: "f4",
};
const CSI_TILDE = {
  1: "home", 2: "insert", 3: "delete", 4: "end", 5: "pageUp", 6: "pageDown", 7: "home", 8: "end", 11: "f1",
  12: "f2", 13: "f3", 14: "f4", 15: "f5", 17: "f6", 18: "f7", 19: "f8", 20: "f9", 21: "f10", 23: "f11", 24: "f12",
};
const CODEPOINT_KEYS = {
  8: "backspace", 9: "tab", 10: "enter", 13: "enter", 27: "escape", 32: "space", 127: "backspace",
};

// "shift+ctrl+x" form with modifiers in a fixed order; `bits` is the terminal modifier value - 1.
function keyId(key, bits = 0) {
  const mods = MODIFIERS.filter((mod) => bits & MODIFIER_BITS[mod]);
  return [...mods, key].join("+");
}

function keyFromCodepoint(cp, bits) {
  if (cp >= 57399 && cp <= 57408) return keyId(String(cp - 57399), bits); // keypad digits
  if (CODEPOINT_KEYS[cp]) return keyId(CODEPOINT_KEYS[cp], bits);
  const ch = String.fromCodePoint(cp);
  if (/^[A-Z]$/.test(ch)) return keyId(ch.toLowerCase(), bits | 1);
  return keyId(ch.toLowerCase(), bits);
}

// The key ids a terminal input sequence stands for: the main id first, then legacy aliases.
function decodeKey(data) {
  let m = /^\x1b\[(\d+)(?::\d*)*(?:;(\d+)(?::\d+)?)?(?:;[\d:]*)?u$/.exec(data);
  if (m) return [keyFromCodepoint(Number(m[1]), (m[2] ?? 1) - 1)];
  m = /^\x1b\[27;(\d+);(\d+)~$/.exec(data);
  if (m) return [keyFromCodepoint(Number(m[2]), m[1] - 1)];
  m = /^\x1b\[(\d+)(?:;(\d+)(?::\d+)?)?~$/.exec(data);
  if (m) return CSI_TILDE[m[1]] ? [keyId(CSI_TILDE[m[1]], (m[2] ?? 1) - 1)] : [];
  m = /^\x1b(?:\[(?:1;(\d+)(?::\d+)?)?|O)([A-HPQRS])$/.exec(data);
  if (m) return [keyId(CSI_FINAL[m[2]], (m[1] ?? 1) - 1)];
  if (data === "\x1b[Z") return ["shift+tab"];
  if (data === "\x1bOM") return ["enter"];
  if (data.length === 2 && data[0] === "\x1b") {
    if (data === "\x1bb") return ["alt+left", "alt+b"]; // what macOS terminals send for option+arrow
    if (data === "\x1bf") return ["alt+right", "alt+f"];
    const [inner] = data[1] === "\x1b" ? [] : decodeKey(data[1]);
    return inner ? [normalizeKeyId(`alt+${inner}`)] : [];
  }
  if (data.length !== 1) return [];
  const code = data.charCodeAt(0);
  if (code === 0) return ["ctrl+space"];
  if (code === 8) return ["backspace", "ctrl+h"];
  if (code === 9) return ["tab", "ctrl+i"];
  if (code === 13) return ["enter", "ctrl+m"];
  if (code === 27) return ["escape", "ctrl+["];
  if (CODEPOINT_KEYS[code]) return [CODEPOINT_KEYS[code]];
  if (code <= 26) return [`ctrl+${String.fromCharCode(code + 96)}`];
  if (code === 28) return ["ctrl+\\"];
  if (code === 29) return ["ctrl+]"];
  if (code === 31) return ["ctrl+-", "ctrl+_"];
  if (code > 32 && code < 127) return [keyFromCodepoint(code, 0)];
  return [];
}

/** The key id of an input sequence ("ctrl+c", "up", "a"), or undefined. */
export function parseKey(data) {
  if (/^[!-~]$/.test(data)) return data;
  return decodeKey(data)[0];
}

// A key id in the canonical form decodeKey produces.
function normalizeKeyId(id) {
  const parts = id.toLowerCase().split("+");
  let key = parts.pop();
  if (key === "") {
    parts.pop(); // "ctrl++": the key is "+"
    key = "+";
  }
  key = { esc: "escape", return: "enter", pageup: "pageUp", pagedown: "pageDown" }[key] ?? key;
  const bits = MODIFIERS.reduce((acc, mod) => (parts.includes(mod) ? acc | MODIFIER_BITS[mod] : acc), 0);
  return keyId(key, bits);
}

/** Whether the input sequence is the given key id ("escape", "ctrl+c", "shift+enter"...). */
export function matchesKey(data, keyIdText) {
  return decodeKey(data).includes(normalizeKeyId(String(keyIdText)));
}

const kittyEvent = (data, event) => new RegExp(`^\\x1b\\[[\\d:;]*;\\d+:${event}[u~A-HPQRS]$`).test(data);
export const isKeyRelease = (data) => kittyEvent(data, 3);
export const isKeyRepeat = (data) => kittyEvent(data, 2);

/** The printable text of a Kitty keyboard-protocol key event, if it has one. */
export function decodeKittyPrintable(data) {
  const m = /^\x1b\[(\d+)(?::(\d*))?(?::\d+)?(?:;(\d+)(?::\d+)?)?u$/.exec(data);
  if (!m) return undefined;
  const bits = (m[3] ?? 1) - 1;
  let cp = Number(m[1]);
  if (bits & ~1 || cp < 32) return undefined;
  if (cp >= 57399 && cp <= 57408) cp -= 57399 - 48;
  if (bits & 1 && m[2]) cp = Number(m[2]);
  return String.fromCodePoint(cp);
}

const TUI_DEFAULT_KEYS = {
  "tui.editor.cursorUp": "up",
  "tui.editor.cursorDown": "down",
  "tui.editor.cursorLeft": ["left", "ctrl+b"],
  "tui.editor.cursorRight": ["right", "ctrl+f"],
  "tui.editor.cursorWordLeft": ["alt+left", "ctrl+left", "alt+b"],
  "tui.editor.cursorWordRight": ["alt+right", "ctrl+right", "alt+f"],
  "tui.editor.cursorLineStart": ["home", "ctrl+a"],
  "tui.editor.cursorLineEnd": ["end", "ctrl+e"],
  "tui.editor.jumpForward": "ctrl+]",
  "tui.editor.jumpBackward": "ctrl+alt+]",
  "tui.editor.pageUp": "pageUp",
  "tui.editor.pageDown": "pageDown",
  "tui.editor.deleteCharBackward": "backspace",
  "tui.editor.deleteCharForward": ["delete", "ctrl+d"],
  "tui.editor.deleteWordBackward": ["ctrl+w", "alt+backspace"],
  "tui.editor.deleteWordForward": ["alt+d", "alt+delete"],
  "tui.editor.deleteToLineStart": "ctrl+u",
  "tui.editor.deleteToLineEnd": "ctrl+k",
  "tui.editor.yank": "ctrl+y",
  "tui.editor.yankPop": "alt+y",
  "tui.editor.undo": "ctrl+-",
  "tui.input.newLine": "shift+enter",
  "tui.input.submit": "enter",
  "tui.input.tab": "tab",
  "tui.input.copy": "ctrl+c",
  "tui.select.up": "up",
  "tui.select.down": "down",
  "tui.select.pageUp": "pageUp",
  "tui.select.pageDown": "pageDown",
  "tui.select.confirm": "enter",
  "tui.select.cancel": ["escape", "ctrl+c"],
};
/** pi-tui's keybinding ids with their default keys (descriptions are not included). */
export const TUI_KEYBINDINGS = Object.fromEntries(
  Object.entries(TUI_DEFAULT_KEYS).map(([id, defaultKeys]) => [id, { defaultKeys }]),
);

export class KeybindingsManager {
  constructor(definitions = TUI_KEYBINDINGS, userBindings = {}) {
    this.definitions = definitions;
    this.userBindings = userBindings;
  }
  getKeys(id) {
    const keys = this.userBindings[id] ?? this.definitions[id]?.defaultKeys ?? [];
    return Array.isArray(keys) ? [...keys] : [keys];
  }
  matches(data, id) {
    return this.getKeys(id).some((key) => matchesKey(data, key));
  }
  setUserBindings(userBindings) {
    this.userBindings = userBindings ?? {};
  }
}
let keybindings = new KeybindingsManager();
export const getKeybindings = () => keybindings;
export const setKeybindings = (manager) => void (keybindings = manager);

// ---- fuzzy matching --------------------------------------------------------------------------

/** Case-insensitive subsequence match (leftmost). Lower scores are better: a tight match,
 *  close to the start, with letters at word starts, and an exact match ranks first. */
export function fuzzyMatch(query, text) {
  const q = query.toLowerCase();
  const t = text.toLowerCase();
  const positions = [];
  for (const ch of q) {
    const at = t.indexOf(ch, positions.length ? positions[positions.length - 1] + 1 : 0);
    if (at < 0) return { matches: false, score: 0 };
    positions.push(at);
  }
  if (positions.length === 0) return { matches: true, score: 0 };
  const skipped = positions[positions.length - 1] - positions[0] + 1 - positions.length;
  const wordStarts = positions.filter((at) => at === 0 || /[\s\-_./:]/.test(t[at - 1])).length;
  return { matches: true, score: skipped * 2 + positions[0] / 2 - wordStarts * 8 - (q === t ? 50 : 0) };
}

/** Items whose text matches every whitespace-separated query token, best first. */
export function fuzzyFilter(items, query, getText) {
  const tokens = query.trim().split(/\s+/).filter(Boolean);
  if (tokens.length === 0) return items;
  const scored = [];
  for (const item of items) {
    const text = getText(item);
    let total = 0;
    const ok = tokens.every((token) => {
      const r = fuzzyMatch(token, text);
      total += r.score;
      return r.matches;
    });
    if (ok) scored.push([item, total]);
  }
  return scored.sort((a, b) => a[1] - b[1]).map(([item]) => item);
}

// ---- components ------------------------------------------------------------------------------

export const CURSOR_MARKER = "\x1b_pi:c\x07";
// pi-tui 1.6.0: a cursor drawn in the text (reverse video once the TUI resolves it).
const FAKE_CURSOR_START = "\x1b_pi:fc\x07";
const FAKE_CURSOR_END = "\x1b_pi:/fc\x07";
export const renderFakeCursor = (text) => `${FAKE_CURSOR_START}${text}${FAKE_CURSOR_END}`;

const fill = (line, width) => line + " ".repeat(Math.max(0, width - visibleWidth(line)));
const blankLines = (count, width) => Array.from({ length: Math.max(0, count) }, () => " ".repeat(width));
// The text a key press types, if any (plain characters, pastes, Kitty-encoded characters).
function printable(data) {
  const text = decodeKittyPrintable(data) ?? data;
  return /^[^\x00-\x1f\x7f]+$/u.test(text) ? text : undefined;
}

class Inert {
  invalidate() {}
  dispose() {}
  handleInput(_data) {}
  render(_width) {
    return [];
  }
}

export class Container extends Inert {
  children = [];
  addChild(component) {
    this.children.push(component);
  }
  removeChild(component) {
    this.children = this.children.filter((c) => c !== component);
  }
  clear() {
    this.children = [];
  }
  invalidate() {
    for (const child of this.children) child.invalidate?.();
  }
  render(width) {
    return this.children.flatMap((child) => child.render(width));
  }
}

export class Text extends Inert {
  constructor(text = "", paddingX = 1, paddingY = 1, customBgFn) {
    super();
    Object.assign(this, { text, paddingX, paddingY, customBgFn });
  }
  setText(text) {
    this.text = text;
  }
  setCustomBgFn(fn) {
    this.customBgFn = fn;
  }
  render(width) {
    if (!this.text || !this.text.trim()) return [];
    const bg = (line) => (this.customBgFn ? this.customBgFn(fill(line, width)) : fill(line, width));
    const margin = " ".repeat(this.paddingX);
    const inner = Math.max(1, width - 2 * this.paddingX);
    const body = wrapTextWithAnsi(this.text.replace(/\t/g, "   "), inner).map((l) => bg(margin + l + margin));
    const pad = blankLines(this.paddingY, width).map(bg);
    return [...pad, ...body, ...pad];
  }
}

export class TruncatedText extends Inert {
  constructor(text = "", paddingX = 0, paddingY = 0) {
    super();
    Object.assign(this, { text, paddingX, paddingY });
  }
  setText(text) {
    this.text = text;
  }
  render(width) {
    const margin = " ".repeat(this.paddingX);
    const first = truncateToWidth(this.text.split("\n")[0], Math.max(1, width - 2 * this.paddingX));
    const pad = blankLines(this.paddingY, width);
    return [...pad, fill(margin + first + margin, width), ...pad];
  }
}

export class Spacer extends Inert {
  constructor(lines = 1) {
    super();
    this.lines = lines;
  }
  setLines(lines) {
    this.lines = lines;
  }
  render() {
    return Array.from({ length: this.lines }, () => "");
  }
}

export class Box extends Container {
  constructor(paddingX = 1, paddingY = 1, bgFn) {
    super();
    Object.assign(this, { paddingX, paddingY, bgFn });
  }
  setBgFn(bgFn) {
    this.bgFn = bgFn;
  }
  render(width) {
    const margin = " ".repeat(this.paddingX);
    const inner = super.render(Math.max(1, width - 2 * this.paddingX)).map((l) => margin + l);
    if (inner.length === 0) return [];
    const bg = (line) => (this.bgFn ? this.bgFn(fill(line, width)) : fill(line, width));
    const pad = Array.from({ length: this.paddingY }, () => bg(""));
    return [...pad, ...inner.map(bg), ...pad];
  }
}

/** Shows the markdown source as plain wrapped text (no markdown rendering in pichamber). */
export class Markdown extends Text {
  constructor(text = "", paddingX = 1, paddingY = 1, _theme, _defaultTextStyle) {
    super(text, paddingX, paddingY);
  }
}

export class Loader extends Inert {
  constructor(tui, spinnerColorFn = (s) => s, messageColorFn = (s) => s, message = "Loading...") {
    super();
    Object.assign(this, { tui, spinnerColorFn, messageColorFn, message });
  }
  start() {}
  stop() {}
  dispose() {}
  setMessage(message) {
    this.message = message;
  }
  render(width) {
    const line = `${this.spinnerColorFn("⠋")} ${this.messageColorFn(this.message)}`;
    return ["", ...new Text(line, 1, 0).render(width)];
  }
}

export class CancellableLoader extends Loader {
  #controller = new AbortController();
  onAbort = undefined;
  get signal() {
    return this.#controller.signal;
  }
  get aborted() {
    return this.#controller.signal.aborted;
  }
  handleInput(data) {
    if (!matchesKey(data, "escape")) return;
    this.#controller.abort();
    this.onAbort?.();
  }
}

export class SelectList extends Inert {
  constructor(items = [], maxVisible = 5, theme = {}, _layout) {
    super();
    Object.assign(this, { items, maxVisible, theme, filtered: items, selectedIndex: 0 });
  }
  setFilter(filter) {
    const f = String(filter).toLowerCase();
    this.filtered = this.items.filter((item) => item.value.toLowerCase().startsWith(f));
    this.selectedIndex = 0;
  }
  setSelectedIndex(index) {
    this.selectedIndex = Math.max(0, Math.min(index, this.filtered.length - 1));
  }
  getSelectedItem() {
    return this.filtered[this.selectedIndex] ?? null;
  }
  handleInput(data) {
    const move = matchesKey(data, "up") ? -1 : matchesKey(data, "down") ? 1 : 0;
    if (move && this.filtered.length > 0) {
      this.selectedIndex = (this.selectedIndex + move + this.filtered.length) % this.filtered.length;
      this.onSelectionChange?.(this.getSelectedItem());
    } else if (matchesKey(data, "enter") && this.getSelectedItem()) this.onSelect?.(this.getSelectedItem());
    else if (matchesKey(data, "escape") || matchesKey(data, "ctrl+c")) this.onCancel?.();
  }
  render(width) {
    const style = (fn, s) => (typeof fn === "function" ? fn(s) : s);
    if (this.filtered.length === 0) return [style(this.theme.noMatch, "  No matching commands")];
    const last = this.filtered.length - this.maxVisible;
    const start = Math.max(0, Math.min(this.selectedIndex - this.maxVisible + 1, last));
    return this.filtered.slice(start, start + this.maxVisible).map((item, i) => {
      const label = item.label ?? item.value;
      const text = item.description ? `${label}  ${item.description}` : label;
      const line = start + i === this.selectedIndex ? style(this.theme.selectedText, `→ ${text}`) : `  ${text}`;
      return truncateToWidth(line, width, "");
    });
  }
}

export class SettingsList extends Inert {
  constructor(items = [], maxVisible = 5, theme = {}, onChange = () => {}, onCancel = () => {}, _options) {
    super();
    Object.assign(this, { items, maxVisible, theme, onChange, onCancel, selectedIndex: 0 });
  }
  updateValue(id, value) {
    const item = this.items.find((i) => i.id === id);
    if (item) item.currentValue = value;
  }
  handleInput(data) {
    const item = this.items[this.selectedIndex];
    if (matchesKey(data, "up")) this.selectedIndex = Math.max(0, this.selectedIndex - 1);
    else if (matchesKey(data, "down")) this.selectedIndex = Math.min(this.items.length - 1, this.selectedIndex + 1);
    else if ((matchesKey(data, "enter") || data === " ") && item?.values?.length) {
      const next = item.values[(item.values.indexOf(item.currentValue) + 1) % item.values.length];
      item.currentValue = next;
      this.onChange(item.id, next);
    } else if (matchesKey(data, "escape")) this.onCancel();
  }
  render(width) {
    return this.items
      .slice(0, this.maxVisible)
      .map((item, i) => `${i === this.selectedIndex ? "→ " : "  "}${item.label}  ${item.currentValue}`)
      .map((line) => truncateToWidth(line, width, ""));
  }
}

// A single-line text field: printable input, backspace, left/right, enter, escape.
export class Input extends Inert {
  value = "";
  cursor = 0;
  focused = false;
  getValue() {
    return this.value;
  }
  setValue(value) {
    this.value = value;
    this.cursor = value.length;
  }
  handleInput(data) {
    const text = printable(data);
    if (text !== undefined) {
      this.value = this.value.slice(0, this.cursor) + text + this.value.slice(this.cursor);
      this.cursor += text.length;
    } else if (matchesKey(data, "backspace") && this.cursor > 0) {
      this.value = this.value.slice(0, this.cursor - 1) + this.value.slice(this.cursor);
      this.cursor--;
    } else if (matchesKey(data, "left")) this.cursor = Math.max(0, this.cursor - 1);
    else if (matchesKey(data, "right")) this.cursor = Math.min(this.value.length, this.cursor + 1);
    else if (matchesKey(data, "enter")) this.onSubmit?.(this.value);
    else if (matchesKey(data, "escape")) this.onEscape?.();
  }
  render(width) {
    return [truncateToWidth(`> ${this.value}`, width, "")];
  }
}

// A multi-line text buffer with a cursor: printable input, backspace, shift+enter for a new
// line, enter to submit. Renders the text between two horizontal rules.
export class Editor extends Inert {
  #text = "";
  #cursor = 0;
  focused = false;
  disableSubmit = false;
  constructor(tui, theme = {}, options = {}) {
    super();
    Object.assign(this, { tui, theme, options });
  }
  getText() {
    return this.#text;
  }
  getExpandedText() {
    return this.#text;
  }
  getLines() {
    return this.#text.split("\n");
  }
  setText(text) {
    this.#text = String(text);
    this.#cursor = this.#text.length;
    this.onChange?.(this.#text);
  }
  getCursor() {
    const before = this.#text.slice(0, this.#cursor).split("\n");
    return { line: before.length - 1, col: before[before.length - 1].length };
  }
  insertTextAtCursor(text) {
    this.#text = this.#text.slice(0, this.#cursor) + text + this.#text.slice(this.#cursor);
    this.#cursor += text.length;
    this.onChange?.(this.#text);
  }
  addToHistory() {}
  setAutocompleteProvider() {}
  isShowingAutocomplete() {
    return false;
  }
  handleInput(data) {
    const text = printable(data);
    if (text !== undefined) this.insertTextAtCursor(text);
    else if (matchesKey(data, "shift+enter") || matchesKey(data, "alt+enter")) this.insertTextAtCursor("\n");
    else if (matchesKey(data, "enter") && !this.disableSubmit) {
      const submitted = this.#text;
      this.setText("");
      this.onSubmit?.(submitted);
    } else if (matchesKey(data, "backspace") && this.#cursor > 0) {
      this.#text = this.#text.slice(0, this.#cursor - 1) + this.#text.slice(this.#cursor);
      this.#cursor--;
      this.onChange?.(this.#text);
    }
  }
  render(width) {
    const color = typeof this.theme.borderColor === "function" ? this.theme.borderColor : (s) => s;
    const rule = color("─".repeat(width));
    const { line, col } = this.getCursor();
    const body = this.getLines().map((l, i) =>
      this.focused && i === line ? l.slice(0, col) + CURSOR_MARKER + l.slice(col) : l,
    );
    return [rule, ...body.flatMap((l) => wrapTextWithAnsi(l, width)).map((l) => fill(l, width)), rule];
  }
}

export class Image extends Inert {
  constructor(base64Data, mimeType, theme = {}, options = {}, dimensions) {
    super();
    Object.assign(this, { base64Data, mimeType, theme, options, dimensions });
  }
  render(width) {
    const text = imageFallback(this.mimeType, this.dimensions, this.options.filename);
    const color = typeof this.theme.fallbackColor === "function" ? this.theme.fallbackColor : (s) => s;
    return [color(truncateToWidth(text, width))];
  }
}

export class CombinedAutocompleteProvider {
  constructor(commands = [], basePath = "") {
    Object.assign(this, { commands, basePath });
  }
  getSuggestions() {
    return null;
  }
  applyCompletion(lines, cursorLine, cursorCol) {
    return { lines, cursorLine, cursorCol };
  }
}

export class ProcessTerminal {
  columns = 80;
  rows = 24;
  kittyProtocolActive = false;
  start() {}
  stop() {}
  write() {}
  moveBy() {}
  hideCursor() {}
  showCursor() {}
  clearLine() {}
  clearFromCursor() {}
  clearScreen() {}
  setTitle() {}
}

export class TUI extends Container {
  constructor(terminal = new ProcessTerminal()) {
    super();
    this.terminal = terminal;
  }
  start() {}
  stop() {}
  requestRender() {}
  setFocus(component) {
    if (this.focusedComponent) this.focusedComponent.focused = false;
    this.focusedComponent = component;
    if (component && "focused" in component) component.focused = true;
  }
  showOverlay() {
    return { hide() {}, setHidden() {}, isHidden: () => true };
  }
  hideOverlay() {}
  hasOverlay() {
    return false;
  }
}

export function isFocusable(component) {
  return component !== null && typeof component === "object" && "focused" in component;
}

// ---- terminal helpers ------------------------------------------------------------------------

export const hyperlink = (text, url) => `\x1b]8;;${url}\x1b\\${text}\x1b]8;;\x1b\\`;

export function imageFallback(mimeType, dimensions, filename) {
  const parts = [filename, `[${mimeType}]`, dimensions && `${dimensions.widthPx}x${dimensions.heightPx}`];
  return `[Image: ${parts.filter(Boolean).join(" ")}]`;
}

const NO_CAPABILITIES = { images: null, trueColor: false, hyperlinks: false };
export const getCapabilities = () => ({ ...NO_CAPABILITIES });
export const detectCapabilities = getCapabilities;
export function setCapabilities() {}
export function resetCapabilitiesCache() {}
export const isKittyProtocolActive = () => false;
export function setKittyProtocolActive() {}
export const getCellDimensions = () => ({ widthPx: 9, heightPx: 18 });
export function setCellDimensions() {}
let nextImageId = 1;
export const allocateImageId = () => nextImageId++;

const terminalOnly = (name) =>
  function () {
    throw new Error(`${name} is not available inside a pichamber extension (the pi host owns the terminal)`);
  };
export const calculateImageRows = terminalOnly("calculateImageRows()");
export const deleteAllKittyImages = terminalOnly("deleteAllKittyImages()");
export const deleteKittyImage = terminalOnly("deleteKittyImage()");
export const encodeITerm2 = terminalOnly("encodeITerm2()");
export const encodeKitty = terminalOnly("encodeKitty()");
export const getGifDimensions = terminalOnly("getGifDimensions()");
export const getImageDimensions = terminalOnly("getImageDimensions()");
export const getJpegDimensions = terminalOnly("getJpegDimensions()");
export const getPngDimensions = terminalOnly("getPngDimensions()");
export const getWebpDimensions = terminalOnly("getWebpDimensions()");
export const renderImage = terminalOnly("renderImage()");
export const StdinBuffer = terminalOnly("StdinBuffer");
