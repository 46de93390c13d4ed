// The benchmarks' no-op extension (tests/bench/session_rpc.py, dispatch.py): a command and
// handlers that do nothing, so what is measured is the cost of a session, of a round trip and
// of an event's dispatch.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";

export default function (pi: ExtensionAPI) {
  pi.on("session_start", async () => {});
  pi.on("turn_start", async () => {});
  pi.registerCommand("noop", {
    description: "Does nothing",
    handler: async () => {},
  });
}
