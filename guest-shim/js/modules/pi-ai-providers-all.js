// pi-ai's `providers/all` entry: its built-in catalog of providers and some 1,700 models. The
// guest carries no copy; the models a session can use are the host's (ctx.modelRegistry), so
// each of these throws, naming what to use instead.
const catalog = (name) =>
  function () {
    throw new Error(
      `${name}() reads pi-ai's built-in model catalog, which is not available inside a pichamber extension; ctx.modelRegistry lists the models the host serves`,
    );
  };

export const builtinModels = catalog("builtinModels");
export const builtinProviders = catalog("builtinProviders");
export const getAllBuiltinModels = catalog("getAllBuiltinModels");
export const getBuiltinClassifierModel = catalog("getBuiltinClassifierModel");
export const getBuiltinClassifierModels = catalog("getBuiltinClassifierModels");
export const getBuiltinImageModel = catalog("getBuiltinImageModel");
export const getBuiltinImageModels = catalog("getBuiltinImageModels");
export const getBuiltinModel = catalog("getBuiltinModel");
export const getBuiltinModelDataGeneratedAt = catalog("getBuiltinModelDataGeneratedAt");
export const getBuiltinModels = catalog("getBuiltinModels");
export const getBuiltinProviders = catalog("getBuiltinProviders");
export const radiusProvider = catalog("radiusProvider");
