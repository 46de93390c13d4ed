// pi-ai's `models` entry (pi 1.6.0's loader provides it): the model helpers of the root
// module, and its store and provider factories, which stay the host's.
export {
  AI_TELEMETRY_SCHEMA,
  ModelsError,
  calculateCost,
  clampThinkingLevel,
  createModels,
  createProvider,
  getModelType,
  getSupportedThinkingLevels,
  hasApi,
  isModelType,
  modelsAreEqual,
} from "pichamber:pi-ai";
