// Run from the repo root: node --import ./tests/js/register.mjs --test tests/js/
// Every named runtime import that pi's example extensions (and the extension docs) take from an
// aliased package must exist in the matching pichamber module.
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { ORACLE_DIR, oracleSkip } from "./oracle.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const table = JSON.parse(readFileSync(join(here, "..", "..", "guest-shim", "js", "virtual-modules.json"), "utf8"));
const pkg = join(ORACLE_DIR, "@mariozechner", "pi-coding-agent");

function* walk(dir) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) {
      if (e.name !== "node_modules") yield* walk(p);
    } else if (/\.(ts|js|mjs|md)$/.test(e.name)) yield p;
  }
}

function collectImports(files) {
  const found = new Map();
  const re = /import\s+(type\s+)?([\s\S]*?)\s+from\s+["']([^"']+)["']/g;
  for (const file of files) {
    const src = readFileSync(file, "utf8");
    for (const m of src.matchAll(re)) {
      if (m[1]) continue;
      const spec = m[3];
      const canonical = table.aliases[spec] ?? (spec.startsWith("pichamber:") ? spec : null);
      if (!canonical) continue;
      const clause = m[2].replace(/\/\/[^\n]*/g, "");
      const names = [];
      const braces = /\{([\s\S]*)\}/.exec(clause);
      if (braces) {
        for (let part of braces[1].split(",")) {
          part = part.trim();
          if (!part || part.startsWith("type ")) continue;
          names.push(part.split(/\s+as\s+/)[0].trim());
        }
      }
      const rest = clause
        .replace(/\{[\s\S]*\}/, "")
        .replace(/,/g, " ")
        .trim();
      if (rest && !rest.startsWith("*")) names.push("default");
      for (const n of names) {
        const key = `${canonical} ${n}`;
        if (!found.has(key)) found.set(key, { canonical, spec, name: n, file });
      }
    }
  }
  return [...found.values()];
}

const ORACLE_ENTRY = {
  "pichamber:pi-coding-agent": "@mariozechner/pi-coding-agent/dist/index.js",
  "pichamber:pi-ai": "@mariozechner/pi-ai/dist/index.js",
  "pichamber:pi-tui": "@mariozechner/pi-tui/dist/index.js",
  "pichamber:pi-agent-core": "@mariozechner/pi-agent-core/dist/index.js",
  "pichamber:typebox": "typebox/build/index.mjs",
};

// The module the import would get outside pichamber: the real package, or Node's builtin.
async function realModule(canonical, spec) {
  if (ORACLE_ENTRY[canonical]) return import(join(ORACLE_DIR, ORACLE_ENTRY[canonical]));
  return import(spec.startsWith("node:") ? spec : `node:${spec}`);
}

test("example extensions' runtime imports all exist", async (t) => {
  if (!existsSync(pkg)) return t.skip(oracleSkip("@mariozechner/pi-coding-agent (examples/ and docs/)"));
  const files = [...walk(join(pkg, "examples")), ...(existsSync(join(pkg, "docs")) ? walk(join(pkg, "docs")) : [])];
  const imports = collectImports(files);
  assert.ok(imports.length > 50, `found ${imports.length} imports`);
  const missing = [];
  let checked = 0;
  for (const { canonical, spec, name, file } of imports) {
    // Names the real module lacks too are stale docs or type-only imports: nothing to provide.
    const real = await realModule(canonical, spec);
    if (!(name in real)) continue;
    checked++;
    const mod = await import(canonical);
    if (!(name in mod)) missing.push(`${canonical} ${name} (${file.slice(pkg.length + 1)})`);
  }
  assert.ok(checked > 50, `checked ${checked} imports`);
  assert.deepEqual(missing, []);
});
