// The benchmarks' no-op extension (tests/bench/session_rpc.py): a command and a session_start
// handler that do nothing, so what is measured is the cost of a session and of a round trip.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export default function (pi: ExtensionAPI) {
  pi.on("session_start", async () => {});
  pi.registerCommand("noop", {
    description: "Does nothing",
    handler: async () => {},
  });
}
