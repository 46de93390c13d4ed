// Resolve hook for the pichamber guest modules under Node: maps `pichamber:<id>` specifiers to
// the files listed in guest-shim/js/virtual-modules.json. Registered by register.mjs.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const jsDir = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "guest-shim", "js");
const table = JSON.parse(readFileSync(join(jsDir, "virtual-modules.json"), "utf8")).modules;

export async function resolve(specifier, context, nextResolve) {
  if (specifier.startsWith("pichamber:")) {
    const file = table[specifier];
    if (!file) throw new Error(`unknown pichamber module ${specifier}`);
    return { url: pathToFileURL(join(jsDir, file)).href, shortCircuit: true, format: "module" };
  }
  return nextResolve(specifier, context);
}
