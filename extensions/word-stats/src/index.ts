/**
 * word-stats: a pi extension *package*. package.json lists the entry under
 * `"pi": { "extensions": ["./src/index.ts"] }`; the entry imports a sibling TypeScript module
 * and `ms`, a CommonJS package from npm, which `pichamber build` bundles into the component.
 */
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import ms from "ms";
import { computeStats, DEFAULT_WORDS_PER_MINUTE } from "./stats.ts";

interface Params {
	text: string;
	wordsPerMinute?: number;
}

export default function (pi: ExtensionAPI) {
	pi.registerTool({
		name: "word_stats",
		label: "Word stats",
		description: "Count words, sentences and frequent words in a text, and estimate its reading time",
		parameters: {
			type: "object",
			properties: {
				text: { type: "string", description: "The text to analyse" },
				wordsPerMinute: { type: "number", description: `Reading speed (default ${DEFAULT_WORDS_PER_MINUTE})` },
			},
			required: ["text"],
		} as never,

		async execute(_toolCallId, params: Params) {
			if (typeof params.text !== "string") throw new Error("word_stats: text must be a string");
			const stats = computeStats(params.text, params.wordsPerMinute);
			// ms() turns milliseconds into "2 minutes", "45 seconds", ...
			const readingTime = stats.words === 0 ? "no time" : ms(Math.max(stats.readingTimeMs, 1000), { long: true });
			const top = stats.topWords.map((w) => `${w.word} (${w.count})`).join(", ") || "none";
			return {
				content: [
					{
						type: "text",
						text: `${stats.words} words (${stats.uniqueWords} unique), ${stats.sentences} sentences, reading time ${readingTime}. Most frequent: ${top}`,
					},
				],
				details: { ...stats, readingTime },
			};
		},
	});
}
