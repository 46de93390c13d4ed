// Preloaded with `node --import ./tests/js/register.mjs --test tests/js/` (from the repo root):
// installs the pichamber:* resolve hook and the guest globals (__host over node:fs,
// __pichamber_internal.exec stub) that the guest modules expect.
import { register } from "node:module";
import "./host-shim.mjs";

register("./loader.mjs", import.meta.url);
