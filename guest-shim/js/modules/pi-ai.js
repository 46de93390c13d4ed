// @mariozechner/pi-ai for pichamber: an original implementation of the small pure helpers that
// extensions use (Type, StringEnum, calculateCost, the assistant-message event stream), written
// from pi-ai's observable behaviour. Model catalogues, providers and LLM calls live in the pi
// host: those exports exist so imports link, and throw a clear Error when called.
import { Type } from "pichamber:typebox";

export { Type };

/** A string enum schema ({ type: "string", enum }) as pi-ai builds it for tool parameters. */
export function StringEnum(values, options) {
  const definition = { type: "string", enum: values };
  if (options?.description) definition.description = options.description;
  if (options?.default) definition.default = options.default;
  return Type.Unsafe(definition);
}

/** Fills usage.cost from the model's per-million-token prices and returns it. */
export function calculateCost(model, usage) {
  const cost = usage.cost;
  let total = 0;
  for (const part of ["input", "output", "cacheRead", "cacheWrite"]) {
    cost[part] = (model.cost[part] / 1e6) * usage[part];
    total += cost[part];
  }
  cost.total = total;
  return cost;
}

/** An async-iterable queue of events that settles `result()` at its final event. */
export class EventStream {
  #buffered = [];
  #readers = [];
  #closed = false;
  #settle;
  #result = new Promise((resolve) => (this.#settle = resolve));

  constructor(isFinal, resultOf) {
    this.isFinal = isFinal;
    this.resultOf = resultOf;
  }

  push(event) {
    if (this.#closed) return;
    if (this.isFinal(event)) {
      this.#closed = true;
      this.#settle(this.resultOf(event));
    }
    const reader = this.#readers.shift();
    if (reader) reader({ value: event, done: false });
    else this.#buffered.push(event);
  }

  end(result) {
    this.#closed = true;
    if (result !== undefined) this.#settle(result);
    for (const reader of this.#readers.splice(0)) reader({ value: undefined, done: true });
  }

  result() {
    return this.#result;
  }

  [Symbol.asyncIterator]() {
    return {
      next: () => {
        if (this.#buffered.length > 0) return Promise.resolve({ value: this.#buffered.shift(), done: false });
        if (this.#closed) return Promise.resolve({ value: undefined, done: true });
        return new Promise((resolve) => this.#readers.push(resolve));
      },
      return: () => Promise.resolve({ value: undefined, done: true }),
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }
}

export class AssistantMessageEventStream extends EventStream {
  constructor() {
    super(
      (event) => event.type === "done" || event.type === "error",
      (event) => (event.type === "done" ? event.message : event.error),
    );
  }
}

export function createAssistantMessageEventStream() {
  return new AssistantMessageEventStream();
}

const unavailable = (name) =>
  function () {
    throw new Error(
      `${name}() is not available inside a pichamber extension (models and LLM calls belong to the pi host)`,
    );
  };

export const appendAssistantMessageDiagnostic = unavailable("appendAssistantMessageDiagnostic");
export const clampThinkingLevel = unavailable("clampThinkingLevel");
export const cleanupSessionResources = unavailable("cleanupSessionResources");
export const clearApiProviders = unavailable("clearApiProviders");
export const complete = unavailable("complete");
export const completeSimple = unavailable("completeSimple");
export const createAssistantMessageDiagnostic = unavailable("createAssistantMessageDiagnostic");
export const extractDiagnosticError = unavailable("extractDiagnosticError");
export const fauxAssistantMessage = unavailable("fauxAssistantMessage");
export const fauxText = unavailable("fauxText");
export const fauxThinking = unavailable("fauxThinking");
export const fauxToolCall = unavailable("fauxToolCall");
export const findEnvKeys = unavailable("findEnvKeys");
export const formatThrownValue = unavailable("formatThrownValue");
export const getApiProvider = unavailable("getApiProvider");
export const getApiProviders = unavailable("getApiProviders");
export const getEnvApiKey = unavailable("getEnvApiKey");
export const getModel = unavailable("getModel");
export const getModels = unavailable("getModels");
export const getOverflowPatterns = unavailable("getOverflowPatterns");
export const getProviders = unavailable("getProviders");
export const getSupportedThinkingLevels = unavailable("getSupportedThinkingLevels");
export const isContextOverflow = unavailable("isContextOverflow");
export const modelsAreEqual = unavailable("modelsAreEqual");
export const parseJsonWithRepair = unavailable("parseJsonWithRepair");
export const parseStreamingJson = unavailable("parseStreamingJson");
export const registerApiProvider = unavailable("registerApiProvider");
export const registerBuiltInApiProviders = unavailable("registerBuiltInApiProviders");
export const registerFauxProvider = unavailable("registerFauxProvider");
export const registerSessionResourceCleanup = unavailable("registerSessionResourceCleanup");
export const repairJson = unavailable("repairJson");
export const resetApiProviders = unavailable("resetApiProviders");
export const setBedrockProviderModule = unavailable("setBedrockProviderModule");
export const stream = unavailable("stream");
export const streamAnthropic = unavailable("streamAnthropic");
export const streamAzureOpenAIResponses = unavailable("streamAzureOpenAIResponses");
export const streamGoogle = unavailable("streamGoogle");
export const streamGoogleVertex = unavailable("streamGoogleVertex");
export const streamMistral = unavailable("streamMistral");
export const streamOpenAICodexResponses = unavailable("streamOpenAICodexResponses");
export const streamOpenAICompletions = unavailable("streamOpenAICompletions");
export const streamOpenAIResponses = unavailable("streamOpenAIResponses");
export const streamSimple = unavailable("streamSimple");
export const streamSimpleAnthropic = unavailable("streamSimpleAnthropic");
export const streamSimpleAzureOpenAIResponses = unavailable("streamSimpleAzureOpenAIResponses");
export const streamSimpleGoogle = unavailable("streamSimpleGoogle");
export const streamSimpleGoogleVertex = unavailable("streamSimpleGoogleVertex");
export const streamSimpleMistral = unavailable("streamSimpleMistral");
export const streamSimpleOpenAICodexResponses = unavailable("streamSimpleOpenAICodexResponses");
export const streamSimpleOpenAICompletions = unavailable("streamSimpleOpenAICompletions");
export const streamSimpleOpenAIResponses = unavailable("streamSimpleOpenAIResponses");
export const unregisterApiProviders = unavailable("unregisterApiProviders");
export const validateToolArguments = unavailable("validateToolArguments");
export const validateToolCall = unavailable("validateToolCall");
