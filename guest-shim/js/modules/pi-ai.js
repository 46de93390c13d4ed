// @mariozechner/pi-ai for pichamber: an original implementation of the small pure helpers that
// extensions use (Type, StringEnum, calculateCost, the assistant-message event stream), written
// from pi-ai's observable behaviour. Model catalogues, providers and LLM calls live in the pi
// host: those exports exist so imports link, and throw a clear Error when called.
import { Type } from "pichamber:typebox";

export { Type };
export * from "pichamber:pi-ai/transcript";

// pi 1.6.0's constants, as it exports them.
export const PI_AI_VERSION = "1.6.0";
export const PI_ATTRIBUTION = Object.freeze({ name: "pi", url: "https://pi.dev", categories: ["cli-agent"] });
export const CACHE_WARMING_IDLE_CONTINUATION_PROBABILITY = 0.15;
export const CACHE_WARMING_MAX_AGE_MS = 3600000;
export const CACHE_WARMING_MAX_IDLE_AGE_MS = 1800000;
export const CACHE_WARMING_MINIMUM_EXPECTED_SAVINGS = 0.05;
export const DEFAULT_MAX_AGENT_RETRY_DELAY_MS = 60000;
export const ANTHROPIC_API_KEY_ENV = "ANTHROPIC_API_KEY";
export const ANTHROPIC_AUTH_TOKEN_ENV = "ANTHROPIC_AUTH_TOKEN";
export const ANTHROPIC_FEDERATION_RULE_ID_ENV = "ANTHROPIC_FEDERATION_RULE_ID";
export const ANTHROPIC_IDENTITY_TOKEN_FILE_ENV = "ANTHROPIC_IDENTITY_TOKEN_FILE";
export const ANTHROPIC_OAUTH_TOKEN_ENV = "ANTHROPIC_OAUTH_TOKEN";
export const ANTHROPIC_ORGANIZATION_ID_ENV = "ANTHROPIC_ORGANIZATION_ID";
export const ANTHROPIC_SERVICE_ACCOUNT_ID_ENV = "ANTHROPIC_SERVICE_ACCOUNT_ID";
export const ANTHROPIC_WORKSPACE_ID_ENV = "ANTHROPIC_WORKSPACE_ID";
// Telemetry is the host's: the schema's version, without its span catalogue.
export const AI_TELEMETRY_SCHEMA = Object.freeze({ version: 1, spans: Object.freeze({}) });

/** pi 1.6.0's error of the models store: a code, and the cause's reason kept in the message. */
export class ModelsError extends Error {
  constructor(code, message, options) {
    const cause = options?.cause;
    const detail = cause === undefined || cause === null ? "" : formatThrownValue(cause).trim();
    super(detail && !message.includes(detail) ? `${message}: ${detail}` : message, options);
    this.name = "ModelsError";
    this.code = code;
  }
}

// Pure helpers of pi-ai over model records and errors, as the session's pi release has them.
// Read when called: the release is the session's, known once the prelude has run.
const followsPi16 = () => !String(globalThis.__pichamber_internal?.piVersion ?? "1.6.0").startsWith("0.");
const thinkingLevels = () => ["off", "minimal", "low", "medium", "high", "xhigh", ...(followsPi16() ? ["max"] : [])];

/** The type of a model; models without one are chat models. */
export function getModelType(model) {
  return model.type ?? "chat";
}

export function isModelType(model, type) {
  return getModelType(model) === type;
}

/** Whether `model` is a chat model of `api`. */
export function hasApi(model, api) {
  return isModelType(model, "chat") && model.api === api;
}

export function getSupportedThinkingLevels(model) {
  if (!model.reasoning) return ["off"];
  return thinkingLevels().filter((level) => {
    const mapped = model.thinkingLevelMap?.[level];
    if (mapped === null) return false;
    if (level === "xhigh" || level === "max") return mapped !== undefined;
    return true;
  });
}

/** `level` if the model supports it, else the nearest supported one above, then below. */
export function clampThinkingLevel(model, level) {
  const available = getSupportedThinkingLevels(model);
  if (available.includes(level)) return level;
  const levels = thinkingLevels();
  const at = levels.indexOf(level);
  if (at === -1) return available[0] ?? "off";
  for (let i = at; i < levels.length; i++) if (available.includes(levels[i])) return levels[i];
  for (let i = at - 1; i >= 0; i--) if (available.includes(levels[i])) return levels[i];
  return available[0] ?? "off";
}

/** Same provider and id (and, in pi 1.6.0, the same type); false when either is missing. */
export function modelsAreEqual(a, b) {
  if (!a || !b) return false;
  return (!followsPi16() || getModelType(a) === getModelType(b)) && a.id === b.id && a.provider === b.provider;
}

export function formatThrownValue(value) {
  if (value instanceof Error) return value.message || value.name;
  if (typeof value === "string") return value;
  return String(value);
}

export function extractDiagnosticError(error) {
  if (!(error instanceof Error)) return { name: "ThrownValue", message: formatThrownValue(error) };
  const code = error.code;
  return {
    name: error.name || undefined,
    message: error.message || error.name,
    stack: error.stack,
    code: typeof code === "string" || typeof code === "number" ? code : undefined,
  };
}

export function createAssistantMessageDiagnostic(type, error, details) {
  return { type, timestamp: Date.now(), error: extractDiagnosticError(error), details };
}

export function appendAssistantMessageDiagnostic(message, diagnostic) {
  message.diagnostics = [...(message.diagnostics ?? []), diagnostic];
}

const UUID_V7_MAX_TIME = 2 ** 48 - 1;
let uuidLastTime = -1;
let uuidCounter = 0;

/**
 * A UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, version 7, 12 bits of a counter that keeps
 * ids of one millisecond in order (pi 1.6.0's `uuidv7`), variant 10, 62 random bits. A given
 * `timestampMs` is used as it is (ids that follow another's time).
 */
export function uuidv7(timestampMs) {
  const now = timestampMs ?? Date.now();
  if (!Number.isInteger(now) || now < 0 || now > UUID_V7_MAX_TIME) {
    throw new RangeError(`UUIDv7 timestamp must be an integer between 0 and ${UUID_V7_MAX_TIME}`);
  }
  // QuickJS has no WebCrypto: random bytes come from the host (seeded under `pichamber check`).
  const random = Uint8Array.from(JSON.parse(globalThis.__host("randomBytes", [16])));
  let time = now;
  if (timestampMs === undefined) {
    // Never behind the last id, and one more than it within a millisecond.
    if (time <= uuidLastTime) {
      time = uuidLastTime;
      uuidCounter += 1;
      if (uuidCounter > 0xfff) {
        time += 1;
        uuidCounter = 0;
      }
    } else {
      uuidCounter = random[6] & 0x7f; // a random start, with room to count up
    }
    uuidLastTime = time;
  } else {
    uuidCounter = ((random[6] & 0x0f) << 8) | random[7];
  }
  const bytes = random;
  for (let i = 5, t = time; i >= 0; i--, t = Math.floor(t / 256)) bytes[i] = t % 256;
  bytes[6] = 0x70 | (uuidCounter >> 8);
  bytes[7] = uuidCounter & 0xff;
  bytes[8] = 0x80 | (bytes[8] & 0x3f);
  const hex = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

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

// A class whose construction needs what the host keeps (credentials, the model catalogue, a
// provider's stream parser).
const unavailableClass = (name) =>
  class {
    constructor() {
      throw new Error(`${name} is not available inside a pichamber extension (models and LLM calls belong to the pi host)`);
    }
  };

export const InMemoryCredentialStore = unavailableClass("InMemoryCredentialStore");
export const InMemoryModelsStore = unavailableClass("InMemoryModelsStore");
export const StreamingJsonParser = unavailableClass("StreamingJsonParser");
export const ToolCallArgumentsStream = unavailableClass("ToolCallArgumentsStream");

// pi 1.6.0's provider APIs (`anthropicMessagesApi()` & co.), auth, retry and cache-warming
// helpers, and image generation.
export const anthropicMessagesApi = unavailable("anthropicMessagesApi");
export const azureOpenAIResponsesApi = unavailable("azureOpenAIResponsesApi");
export const bedrockConverseStreamApi = unavailable("bedrockConverseStreamApi");
export const googleGenerativeAIApi = unavailable("googleGenerativeAIApi");
export const googleVertexApi = unavailable("googleVertexApi");
export const mistralConversationsApi = unavailable("mistralConversationsApi");
export const openAICodexResponsesApi = unavailable("openAICodexResponsesApi");
export const openAICompletionsApi = unavailable("openAICompletionsApi");
export const openAIResponsesApi = unavailable("openAIResponsesApi");
export const piMessagesApi = unavailable("piMessagesApi");
export const generateImages = unavailable("generateImages");
export const generateImagesOpenRouter = unavailable("generateImagesOpenRouter");
export const getImageModel = unavailable("getImageModel");
export const getImageModels = unavailable("getImageModels");
export const getImageProviders = unavailable("getImageProviders");
export const getImagesApiProvider = unavailable("getImagesApiProvider");
export const registerBuiltInImagesApiProviders = unavailable("registerBuiltInImagesApiProviders");
export const registerImagesApiProvider = unavailable("registerImagesApiProvider");
export const setBedrockProviderLoader = unavailable("setBedrockProviderLoader");
export const createFauxCore = unavailable("createFauxCore");
export const createModels = unavailable("createModels");
export const createProvider = unavailable("createProvider");
export const defaultProviderAuthContext = unavailable("defaultProviderAuthContext");
export const envApiKeyAuth = unavailable("envApiKeyAuth");
export const evaluateCacheWarming = unavailable("evaluateCacheWarming");
export const fauxProvider = unavailable("fauxProvider");
export const formatUserAgent = unavailable("formatUserAgent");
export const getAttributionHeaders = unavailable("getAttributionHeaders");
export const getCacheWarmingDelayMs = unavailable("getCacheWarmingDelayMs");
export const getCacheWarmingRequestOptions = unavailable("getCacheWarmingRequestOptions");
export const getClientVersion = unavailable("getClientVersion");
export const getIdentityHeaders = unavailable("getIdentityHeaders");
export const getOpenCodeSessionHeaders = unavailable("getOpenCodeSessionHeaders");
export const getPromptCacheTtlMs = unavailable("getPromptCacheTtlMs");
export const isCacheWarmingReplayable = unavailable("isCacheWarmingReplayable");
export const isRecoverableLength = unavailable("isRecoverableLength");
export const isRetryableAssistantError = unavailable("isRetryableAssistantError");
export const lazyApi = unavailable("lazyApi");
export const lazyOAuth = unavailable("lazyOAuth");
export const lazyStream = unavailable("lazyStream");
export const mergeClientIdentity = unavailable("mergeClientIdentity");
export const parseToolCallArguments = unavailable("parseToolCallArguments");
export const retryAssistantCall = unavailable("retryAssistantCall");
export const retryDelayMs = unavailable("retryDelayMs");
export const withClientIdentity = unavailable("withClientIdentity");

export const cleanupSessionResources = unavailable("cleanupSessionResources");
export const clearApiProviders = unavailable("clearApiProviders");
export const complete = unavailable("complete");
export const completeSimple = unavailable("completeSimple");
export const fauxAssistantMessage = unavailable("fauxAssistantMessage");
export const fauxText = unavailable("fauxText");
export const fauxThinking = unavailable("fauxThinking");
export const fauxToolCall = unavailable("fauxToolCall");
export const findEnvKeys = unavailable("findEnvKeys");
export const getApiProvider = unavailable("getApiProvider");
export const getApiProviders = unavailable("getApiProviders");
export const getEnvApiKey = unavailable("getEnvApiKey");
export const getModel = unavailable("getModel");
export const getModels = unavailable("getModels");
export const getOverflowPatterns = unavailable("getOverflowPatterns");
export const getProviders = unavailable("getProviders");
export const isContextOverflow = unavailable("isContextOverflow");
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
