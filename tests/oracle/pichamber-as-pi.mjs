// Lets pi's RpcClient (which always runs `node <cliPath> --mode rpc ...args`) start
// `pichamber rpc` instead: drops the leading `--mode rpc`, runs $PICHAMBER_BIN rpc with the
// remaining arguments on this process's own stdin/stdout/stderr, forwards termination
// signals and exits as pichamber does.

import { spawn } from "node:child_process";

const bin = process.env.PICHAMBER_BIN;
if (!bin) {
	console.error("pichamber-as-pi.mjs: set PICHAMBER_BIN to the pichamber binary");
	process.exit(2);
}
let args = process.argv.slice(2);
if (args[0] === "--mode" && args[1] === "rpc") args = args.slice(2);

const child = spawn(bin, ["rpc", ...args], { stdio: "inherit" });
for (const signal of ["SIGTERM", "SIGINT", "SIGHUP"]) {
	process.on(signal, () => child.kill(signal));
}
child.on("error", (error) => {
	console.error(`pichamber-as-pi.mjs: cannot start ${bin}: ${error.message}`);
	process.exit(2);
});
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 128 : 1)));
