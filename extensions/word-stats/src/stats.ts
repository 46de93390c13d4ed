/** Plain text statistics: no pi API in here, so it is easy to unit-test on its own. */

export interface TextStats {
	characters: number;
	words: number;
	uniqueWords: number;
	sentences: number;
	/** The most frequent words, most frequent first (ties in order of first use). */
	topWords: { word: string; count: number }[];
	/** Estimated reading time in milliseconds. */
	readingTimeMs: number;
}

export const DEFAULT_WORDS_PER_MINUTE = 200;

export function tokenize(text: string): string[] {
	return text.toLowerCase().match(/[\p{L}\p{N}]+(?:['’][\p{L}]+)*/gu) ?? [];
}

export function computeStats(text: string, wordsPerMinute = DEFAULT_WORDS_PER_MINUTE, top = 3): TextStats {
	const words = tokenize(text);
	const counts = new Map<string, number>();
	for (const w of words) counts.set(w, (counts.get(w) ?? 0) + 1);
	// Map keeps first-use order and sort is stable: ties stay in order of first use.
	const topWords = [...counts.entries()]
		.map(([word, count]) => ({ word, count }))
		.sort((a, b) => b.count - a.count)
		.slice(0, top);
	const sentences = text.split(/[.!?]+/).filter((s) => tokenize(s).length > 0).length;
	const wpm = wordsPerMinute > 0 ? wordsPerMinute : DEFAULT_WORDS_PER_MINUTE;
	return {
		characters: [...text].length,
		words: words.length,
		uniqueWords: counts.size,
		sentences,
		topWords,
		readingTimeMs: Math.round((words.length / wpm) * 60_000),
	};
}
