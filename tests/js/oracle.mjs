// Locates the real pi packages used as the differential oracle: $PI_ORACLE_DIR (a node_modules
// directory), else tests/oracle/node_modules (installed by tests/run.sh). Tests skip their
// differential parts when it is missing.
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const repoOracle = join(dirname(fileURLToPath(import.meta.url)), "..", "oracle", "node_modules");

export const ORACLE_DIR = process.env.PI_ORACLE_DIR || repoOracle;

const cache = new Map();

/** Imports a file inside the oracle (relative to ORACLE_DIR); null when it is missing. */
export async function importOracle(relPath) {
  const file = join(ORACLE_DIR, relPath);
  if (!existsSync(file)) return null;
  if (!cache.has(file)) cache.set(file, import(pathToFileURL(file).href));
  return cache.get(file);
}

export function oracleSkip(what) {
  return `oracle not found at ${ORACLE_DIR} (set PI_ORACLE_DIR to a node_modules with ${what}); differential checks skipped`;
}
