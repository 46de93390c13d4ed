// Intl for pichamber. The guest's JavaScript engine has no Intl; extensions reach for it
// mostly to split text into user-perceived characters (`new Intl.Segmenter(undefined,
// { granularity: "grapheme" })`) when measuring terminal text. This provides Intl.Segmenter:
// grapheme clusters by the common rules (a base character with its combining marks, variation
// selectors, emoji modifiers and tags; ZWJ sequences; regional-indicator pairs; CR LF; Hangul
// syllable blocks; Devanagari and Bengali conjuncts), words as runs of letters and digits
// (with . , ' between them as in 3,000 or e.g) or of white space, each other character alone,
// and sentences ending after . ! ? and the spaces that follow (see sentences()). It is installed as the global
// `Intl` on first use (see prelude.js); other Intl services are absent.

const inRanges = (ranges, cp) => {
  for (let i = 0; i < ranges.length; i += 2) if (cp >= ranges[i] && cp <= ranges[i + 1]) return true;
  return false;
};
// Code points that extend the cluster before them (combining marks, joiners, variation
// selectors, emoji modifiers, tags) and spacing marks of common scripts.
const EXTEND = [
  0x300, 0x36f, 0x483, 0x489, 0x591, 0x5bd, 0x5bf, 0x5bf, 0x5c1, 0x5c2, 0x5c4, 0x5c5, 0x5c7, 0x5c7,
  0x610, 0x61a, 0x64b, 0x65f, 0x670, 0x670, 0x6d6, 0x6dc, 0x6df, 0x6e4, 0x6e7, 0x6e8, 0x6ea, 0x6ed,
  0x900, 0x903, 0x93a, 0x94f, 0x951, 0x957, 0x962, 0x963, 0x981, 0x983, 0x9bc, 0x9d7, 0xe31, 0xe31,
  0xe34, 0xe3a, 0xe47, 0xe4e, 0xeb1, 0xeb1, 0xeb4, 0xebc, 0xec8, 0xece, 0x1ab0, 0x1aff, 0x1dc0, 0x1dff,
  0x200c, 0x200c, 0x20d0, 0x20ff, 0x302a, 0x302f, 0x3099, 0x309a, 0xfe00, 0xfe0f, 0xfe20, 0xfe2f,
  0xff9e, 0xff9f, 0x1f3fb, 0x1f3ff, 0xe0020, 0xe007f, 0xe0100, 0xe01ef,
];
const ZWJ = 0x200d;
// Emoji and other pictographs (the Extended_Pictographic ranges, coarsely).
const PICTOGRAPHIC = [
  0xa9, 0xa9, 0xae, 0xae, 0x203c, 0x203c, 0x2049, 0x2049, 0x2122, 0x2122, 0x2139, 0x2139, 0x2194, 0x2199,
  0x21a9, 0x21aa, 0x231a, 0x231b, 0x2328, 0x2328, 0x23cf, 0x23cf, 0x23e9, 0x23f3, 0x23f8, 0x23fa, 0x24c2, 0x24c2,
  0x25aa, 0x25ab, 0x25b6, 0x25b6, 0x25c0, 0x25c0, 0x25fb, 0x25fe, 0x2600, 0x27bf, 0x2934, 0x2935, 0x2b05, 0x2b07,
  0x2b1b, 0x2b1c, 0x2b50, 0x2b50, 0x2b55, 0x2b55, 0x3030, 0x3030, 0x303d, 0x303d, 0x3297, 0x3297, 0x3299, 0x3299,
  0x1f000, 0x1f0ff, 0x1f10d, 0x1f10f, 0x1f12f, 0x1f12f, 0x1f16c, 0x1f171, 0x1f17e, 0x1f17f, 0x1f18e, 0x1f18e,
  0x1f191, 0x1f19a, 0x1f1ad, 0x1f1e5, 0x1f201, 0x1f20f, 0x1f21a, 0x1f21a, 0x1f22f, 0x1f22f, 0x1f232, 0x1f23a,
  0x1f23c, 0x1f23f, 0x1f249, 0x1f3fa, 0x1f400, 0x1f53d, 0x1f546, 0x1f64f, 0x1f680, 0x1f6ff, 0x1f774, 0x1f77f,
  0x1f7d5, 0x1f7ff, 0x1f80c, 0x1f80f, 0x1f848, 0x1f84f, 0x1f85a, 0x1f85f, 0x1f888, 0x1f88f, 0x1f8ae, 0x1f8ff,
  0x1f90c, 0x1f93a, 0x1f93c, 0x1f945, 0x1f947, 0x1faff, 0x1fc00, 0x1fffd,
];
const isPictographic = (cp) => inRanges(PICTOGRAPHIC, cp);
const isRegional = (cp) => cp >= 0x1f1e6 && cp <= 0x1f1ff;
// Hangul jamo: leading consonants, vowels, trailing consonants; precomposed syllables.
const isL = (cp) => (cp >= 0x1100 && cp <= 0x115f) || (cp >= 0xa960 && cp <= 0xa97c);
const isV = (cp) => (cp >= 0x1160 && cp <= 0x11a7) || (cp >= 0xd7b0 && cp <= 0xd7c6);
const isT = (cp) => (cp >= 0x11a8 && cp <= 0x11ff) || (cp >= 0xd7cb && cp <= 0xd7fb);
const isSyllable = (cp) => cp >= 0xac00 && cp <= 0xd7a3;
const hasTrailingSlot = (cp) => isSyllable(cp) && (cp - 0xac00) % 28 === 0; // an LV syllable

// Indic scripts join consonant + virama + consonant into one cluster (conjuncts):
// Devanagari and Bengali, as [virama, first consonant, last consonant].
const CONJUNCTS = [
  [0x94d, 0x915, 0x939],
  [0x9cd, 0x995, 0x9b9],
];
const isVirama = (cp) => CONJUNCTS.some(([virama]) => cp === virama);
const joinsConjunct = (virama, cp) => CONJUNCTS.some(([v, a, b]) => virama === v && cp >= a && cp <= b);

/** Whether a cluster ending in `prev` continues with `cp`. */
function joins(prev, cp, state) {
  if (prev === 0x0d && cp === 0x0a) return true;
  if (prev === 0x0d || prev === 0x0a || cp === 0x0d || cp === 0x0a) return false;
  if (cp === ZWJ || inRanges(EXTEND, cp)) return true;
  if (joinsConjunct(state.virama, cp)) return true;
  if (prev === ZWJ) return state.pictographic && isPictographic(cp); // emoji ZWJ sequences
  if (isRegional(prev) && isRegional(cp)) return state.regionalOpen;
  if (isL(prev)) return isL(cp) || isV(cp) || isSyllable(cp);
  if (isV(prev) || hasTrailingSlot(prev)) return isV(cp) || isT(cp);
  if (isT(prev) || isSyllable(prev)) return isT(cp);
  return false;
}

function* graphemes(text) {
  let start = 0;
  let index = 0;
  let prev = null;
  const state = { regionalOpen: false, pictographic: false, virama: null };
  for (const ch of text) {
    const cp = ch.codePointAt(0);
    if (prev === null || !joins(prev, cp, state)) {
      if (prev !== null) yield [start, index];
      start = index;
      state.regionalOpen = false;
      state.pictographic = isPictographic(cp);
    }
    // A regional indicator pairs with the next one only when it opens a pair.
    state.regionalOpen = isRegional(cp) ? !state.regionalOpen : false;
    // The last virama, while only joiners and marks follow it.
    state.virama = isVirama(cp) ? cp : cp === ZWJ || inRanges(EXTEND, cp) ? state.virama : null;
    prev = cp;
    index += ch.length;
  }
  if (index > start) yield [start, index];
}

const LETTER = /^[\p{L}\p{M}_]/u;
const DIGIT = /^\p{N}/u;
// Between two letters these stay inside a word (don't, e.g); between two digits, these (3,000).
const MID_LETTER = new Set([".", "'", "’", ":", "·"]);
const MID_NUMBER = new Set([".", ",", ";", "'", "’"]);

function* words(text) {
  const clusters = [...graphemes(text)].map(([from, to]) => [from, to, text.slice(from, to)]);
  const kindOf = (i) => {
    const c = clusters[i]?.[2];
    if (c === undefined) return null;
    if (LETTER.test(c)) return "letter";
    if (DIGIT.test(c)) return "digit";
    return /^\s+$/u.test(c) ? "space" : "other";
  };
  let start = 0;
  let kind = null;
  for (let i = 0; i < clusters.length; i++) {
    const [from, , c] = clusters[i];
    let cat = kindOf(i);
    if (cat === "letter" || cat === "digit") cat = "word";
    else if (kind === "word") {
      const [before, after] = [kindOf(i - 1), kindOf(i + 1)];
      if ((before === "letter" && after === "letter" && MID_LETTER.has(c)) ||
          (before === "digit" && after === "digit" && MID_NUMBER.has(c))) {
        cat = "word";
      }
    }
    // Runs of white space are one segment; any other character is a segment of its own.
    if (kind !== null && (cat !== kind || cat === "other")) {
      yield [start, from, kind === "word"];
      start = from;
    }
    kind = cat;
  }
  if (text.length > start) yield [start, text.length, kind === "word"];
}

// Sentences end after ? or ! (with closing quotes and brackets and the spaces that follow);
// after . too, unless the next letter is lower-case (e.g. "Wait... what"), a digit follows
// directly (3.14), or it sits between capitals (U.S).
function* sentences(text) {
  let start = 0;
  let i = 0;
  while (i < text.length) {
    if (!".!?".includes(text[i])) {
      i++;
      continue;
    }
    let j = i;
    let strong = false;
    for (; j < text.length && ".!?".includes(text[j]); j++) if (text[j] !== ".") strong = true;
    while (j < text.length && "\"')]’”".includes(text[j])) j++;
    let k = j;
    while (k < text.length && /\s/u.test(text[k])) k++;
    if (!strong && k < text.length) {
      const next = text.slice(k).match(/[\p{L}\p{N}]/u)?.[0] ?? "";
      const spaced = k > j;
      const lower = next !== "" && next === next.toLowerCase() && next !== next.toUpperCase();
      const upperAround = /\p{Lu}/u.test(text[i - 1] ?? "") && /\p{Lu}/u.test(text[k]);
      if (lower || (!spaced && (/\p{N}/u.test(text[k]) || upperAround))) {
        i = k;
        continue;
      }
    }
    yield [start, k];
    start = k;
    i = k;
  }
  if (text.length > start) yield [start, text.length];
}

const GRANULARITIES = ["grapheme", "word", "sentence"];

class Segments {
  #segmenter;
  #input;
  constructor(segmenter, input) {
    this.#segmenter = segmenter;
    this.#input = input;
  }
  #segment([from, to, wordLike]) {
    const out = { segment: this.#input.slice(from, to), index: from, input: this.#input };
    if (this.#segmenter.resolvedOptions().granularity === "word") out.isWordLike = wordLike;
    return out;
  }
  *[Symbol.iterator]() {
    for (const range of this.#segmenter._ranges(this.#input)) yield this.#segment(range);
  }
  containing(index = 0) {
    const at = Number(index);
    if (!(at >= 0 && at < this.#input.length)) return undefined;
    for (const range of this.#segmenter._ranges(this.#input)) {
      if (range[0] <= at && at < range[1]) return this.#segment(range);
    }
    return undefined;
  }
}

export class Segmenter {
  #granularity;
  constructor(locales, options) {
    const granularity = options?.granularity ?? "grapheme";
    if (!GRANULARITIES.includes(granularity)) {
      throw new RangeError(`Value ${granularity} out of range for Intl.Segmenter options property granularity`);
    }
    this.#granularity = granularity;
  }
  _ranges(input) {
    if (this.#granularity === "word") return words(input);
    if (this.#granularity === "sentence") return sentences(input);
    return graphemes(input);
  }
  segment(input) {
    return new Segments(this, String(input));
  }
  resolvedOptions() {
    return { locale: "en-US", granularity: this.#granularity };
  }
  static supportedLocalesOf() {
    return ["en-US"];
  }
}

export const Intl = { Segmenter };
Object.defineProperty(Intl, Symbol.toStringTag, { value: "Intl" });

export default Intl;
