// ctx.ui.theme as pi's RPC mode hands it out: the built-in theme pi would pick for this
// terminal, producing the same ANSI escapes, so strings an extension builds with it (status
// lines, widgets) reach RPC clients exactly as pi sends them. The host tells which theme and
// colour mode apply (the terminal's environment is the host's, not the extension's).
//
// The colour values are pi's built-in "dark" and "light" themes with their variables
// resolved: a compatibility contract, like the built-in tool descriptions.

const BUILTIN = {
  dark: {
    fg: {
      accent: "#8abeb7",
      border: "#5f87ff",
      borderAccent: "#00d7ff",
      borderMuted: "#505050",
      success: "#b5bd68",
      error: "#cc6666",
      warning: "#ffff00",
      muted: "#808080",
      dim: "#666666",
      text: "",
      thinkingText: "#808080",
      userMessageText: "",
      customMessageText: "",
      customMessageLabel: "#9575cd",
      toolTitle: "",
      toolOutput: "#808080",
      mdHeading: "#f0c674",
      mdLink: "#81a2be",
      mdLinkUrl: "#666666",
      mdCode: "#8abeb7",
      mdCodeBlock: "#b5bd68",
      mdCodeBlockBorder: "#808080",
      mdQuote: "#808080",
      mdQuoteBorder: "#808080",
      mdHr: "#808080",
      mdListBullet: "#8abeb7",
      toolDiffAdded: "#b5bd68",
      toolDiffRemoved: "#cc6666",
      toolDiffContext: "#808080",
      syntaxComment: "#6A9955",
      syntaxKeyword: "#569CD6",
      syntaxFunction: "#DCDCAA",
      syntaxVariable: "#9CDCFE",
      syntaxString: "#CE9178",
      syntaxNumber: "#B5CEA8",
      syntaxType: "#4EC9B0",
      syntaxOperator: "#D4D4D4",
      syntaxPunctuation: "#D4D4D4",
      thinkingOff: "#505050",
      thinkingMinimal: "#6e6e6e",
      thinkingLow: "#5f87af",
      thinkingMedium: "#81a2be",
      thinkingHigh: "#b294bb",
      thinkingXhigh: "#d183e8",
      bashMode: "#b5bd68",
    },
    bg: {
      selectedBg: "#3a3a4a",
      userMessageBg: "#343541",
      customMessageBg: "#2d2838",
      toolPendingBg: "#282832",
      toolSuccessBg: "#283228",
      toolErrorBg: "#3c2828",
    },
  },
  light: {
    fg: {
      accent: "#5a8080",
      border: "#547da7",
      borderAccent: "#5a8080",
      borderMuted: "#b0b0b0",
      success: "#588458",
      error: "#aa5555",
      warning: "#9a7326",
      muted: "#6c6c6c",
      dim: "#767676",
      text: "",
      thinkingText: "#6c6c6c",
      userMessageText: "",
      customMessageText: "",
      customMessageLabel: "#7e57c2",
      toolTitle: "",
      toolOutput: "#6c6c6c",
      mdHeading: "#9a7326",
      mdLink: "#547da7",
      mdLinkUrl: "#767676",
      mdCode: "#5a8080",
      mdCodeBlock: "#588458",
      mdCodeBlockBorder: "#6c6c6c",
      mdQuote: "#6c6c6c",
      mdQuoteBorder: "#6c6c6c",
      mdHr: "#6c6c6c",
      mdListBullet: "#588458",
      toolDiffAdded: "#588458",
      toolDiffRemoved: "#aa5555",
      toolDiffContext: "#6c6c6c",
      syntaxComment: "#008000",
      syntaxKeyword: "#0000FF",
      syntaxFunction: "#795E26",
      syntaxVariable: "#001080",
      syntaxString: "#A31515",
      syntaxNumber: "#098658",
      syntaxType: "#267F99",
      syntaxOperator: "#000000",
      syntaxPunctuation: "#000000",
      thinkingOff: "#b0b0b0",
      thinkingMinimal: "#767676",
      thinkingLow: "#547da7",
      thinkingMedium: "#5a8080",
      thinkingHigh: "#875f87",
      thinkingXhigh: "#8b008b",
      bashMode: "#588458",
    },
    bg: {
      selectedBg: "#d0d0e0",
      userMessageBg: "#e8e8e8",
      customMessageBg: "#ede7f6",
      toolPendingBg: "#e8e8f0",
      toolSuccessBg: "#e8f0e8",
      toolErrorBg: "#f0e8e8",
    },
  },
};

// xterm's 256-colour palette: a 6x6x6 cube and a 24-step grey ramp.
const CUBE = [0, 95, 135, 175, 215, 255];
const GREYS = Array.from({ length: 24 }, (_, i) => 8 + 10 * i);

function nearestIndex(values, target) {
  let best = 0;
  for (let i = 1; i < values.length; i++) {
    if (Math.abs(values[i] - target) < Math.abs(values[best] - target)) best = i;
  }
  return best;
}

// Perceptual weighting: the eye is most sensitive to green, least to blue.
const distance = (r, g, b, r2, g2, b2) => (r - r2) ** 2 * 0.299 + (g - g2) ** 2 * 0.587 + (b - b2) ** 2 * 0.114;

function parseHex(hex) {
  const digits = hex.slice(1);
  const [r, g, b] = [0, 2, 4].map((i) => parseInt(digits.slice(i, i + 2), 16));
  if (digits.length !== 6 || [r, g, b].some(Number.isNaN)) throw new Error(`Invalid hex color: ${hex}`);
  return [r, g, b];
}

// The palette entry closest to a colour; greys only for nearly neutral colours, so a tint
// survives.
function to256([r, g, b]) {
  const [ri, gi, bi] = [r, g, b].map((c) => nearestIndex(CUBE, c));
  const cube = 16 + 36 * ri + 6 * gi + bi;
  const grey = Math.round(0.299 * r + 0.587 * g + 0.114 * b);
  const gIdx = nearestIndex(GREYS, grey);
  const neutral = Math.max(r, g, b) - Math.min(r, g, b) < 10;
  const greyCloser =
    distance(r, g, b, GREYS[gIdx], GREYS[gIdx], GREYS[gIdx]) < distance(r, g, b, CUBE[ri], CUBE[gi], CUBE[bi]);
  return neutral && greyCloser ? 232 + gIdx : cube;
}

// SGR for a colour value: "" is the terminal default, a number a palette index, "#rrggbb"
// 24-bit or its nearest palette entry.
function sgr(value, layer, mode) {
  const base = layer === "fg" ? 38 : 48;
  if (value === "") return `\x1b[${base + 1}m`;
  if (typeof value === "number") return `\x1b[${base};5;${value}m`;
  const rgb = parseHex(value);
  return mode === "truecolor" ? `\x1b[${base};2;${rgb.join(";")}m` : `\x1b[${base};5;${to256(rgb)}m`;
}

const THINKING_COLORS = {
  off: "thinkingOff",
  minimal: "thinkingMinimal",
  low: "thinkingLow",
  medium: "thinkingMedium",
  high: "thinkingHigh",
  xhigh: "thinkingXhigh",
  max: "thinkingMax",
};

/** pi's Theme: colour values ("#rrggbb", palette index, "") by name, rendered for `mode`;
 * the tokens in `options.dim` are drawn faint (SGR 2) on top of their colour (pi 1.6.0). */
export class Theme {
  constructor(fgColors = {}, bgColors = {}, mode = "truecolor", options = {}) {
    this.name = options.name;
    this.sourcePath = options.sourcePath;
    this.sourceInfo = options.sourceInfo;
    this.mode = mode;
    this.fgColors = new Map(Object.entries(fgColors).map(([k, v]) => [k, sgr(v, "fg", mode)]));
    this.bgColors = new Map(Object.entries(bgColors).map(([k, v]) => [k, sgr(v, "bg", mode)]));
    this.dimTokens = new Set(options.dim ?? []);
  }
  getFgAnsi(color) {
    const ansi = this.fgColors.get(color);
    if (!ansi) throw new Error(`Unknown theme color: ${color}`);
    return this.dimTokens.has(color) ? `${ansi}\x1b[2m` : ansi;
  }
  getBgAnsi(color) {
    const ansi = this.bgColors.get(color);
    if (!ansi) throw new Error(`Unknown theme background color: ${color}`);
    return ansi;
  }
  fg(color, text) {
    if (this.dimTokens.has(color)) return `${this.getFgAnsi(color)}${text}\x1b[22;39m`;
    return `${this.getFgAnsi(color)}${text}\x1b[39m`;
  }
  bg(color, text) {
    return `${this.getBgAnsi(color)}${text}\x1b[49m`;
  }
  // pi styles these with chalk, which writes no escapes when stdout is not a terminal, as in
  // RPC mode.
  bold(text) {
    return String(text);
  }
  italic(text) {
    return String(text);
  }
  underline(text) {
    return String(text);
  }
  inverse(text) {
    return String(text);
  }
  strikethrough(text) {
    return String(text);
  }
  getColorMode() {
    return this.mode;
  }
  getThinkingBorderColor(level) {
    const color = THINKING_COLORS[level] ?? "thinkingOff";
    return (text) => this.fg(color, text);
  }
  getBashModeBorderColor() {
    return (text) => this.fg("bashMode", text);
  }
}

// pi 1.6.0's default theme, "system", as its RPC mode builds it: RPC mode asks the terminal
// nothing, so every token is an ANSI palette index the terminal renders with its own theme
// (its colour family's slot), or the terminal's default colour; neutral tokens other than
// body text are faint, panels have no background. Each token's family slot, "" for neutral:
const SYSTEM_FG = {
  accent: 5, border: 4, borderAccent: 5, borderMuted: "", success: 2, error: 1, warning: 3,
  muted: "", dim: "", text: "", thinkingText: "", scrollbarTrack: "", scrollbarThumb: "",
  searchMatchText: "", userMessageText: "", customMessageText: "", customMessageLabel: 5,
  toolTitle: "", toolOutput: "", mdHeading: 3, mdLink: 4, mdLinkUrl: "", mdCode: 5,
  mdCodeBlock: 2, mdCodeBlockBorder: "", mdQuote: "", mdQuoteBorder: "", mdHr: "",
  mdListBullet: 5, toolDiffAdded: 2, toolDiffRemoved: 1, toolDiffContext: "",
  syntaxComment: "", syntaxKeyword: 4, syntaxFunction: 3, syntaxVariable: 6, syntaxString: 2,
  syntaxNumber: 5, syntaxType: 5, syntaxOperator: "", syntaxPunctuation: "", thinkingOff: "",
  thinkingMinimal: 4, thinkingLow: 4, thinkingMedium: 6, thinkingHigh: 5, thinkingXhigh: 13,
  thinkingMax: 1, bashMode: 2,
};
const SYSTEM_BG = ["selectedBg", "searchMatchBg", "userMessageBg", "customMessageBg", "toolPendingBg", "toolSuccessBg", "toolErrorBg"];
/** Neutral tokens that stay at full strength: body text. */
const SYSTEM_FOREGROUND = ["text", "userMessageText", "toolTitle"];

function systemTheme(mode) {
  const dim = Object.entries(SYSTEM_FG)
    .filter(([token, slot]) => slot === "" && !SYSTEM_FOREGROUND.includes(token))
    .map(([token]) => token);
  const bg = Object.fromEntries(SYSTEM_BG.map((token) => [token, ""]));
  return new Theme(SYSTEM_FG, bg, mode, { name: "system", dim });
}

/** One of pi's built-in themes ("dark" for an unknown name); "system" is pi 1.6.0's. */
export function builtinTheme(name, mode) {
  if (name === "system") return systemTheme(mode === "256color" ? "256color" : "truecolor");
  const known = Object.hasOwn(BUILTIN, name) ? name : "dark";
  return new Theme(BUILTIN[known].fg, BUILTIN[known].bg, mode === "256color" ? "256color" : "truecolor", { name: known });
}

let current;
/** The session's theme, built on first use from what `readInfo` says the host picked. */
export function sessionTheme(readInfo) {
  if (!current) {
    const { name, colorMode } = readInfo();
    current = builtinTheme(name, colorMode);
  }
  return current;
}
