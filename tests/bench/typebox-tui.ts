// A benchmark extension shaped like most real ones (tests/bench/serve_memory.py --extension):
// a tool whose parameters are a typebox schema and a command that renders with pi-tui, both
// modules the guest's snapshot holds evaluated.
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Text } from "@earendil-works/pi-tui";
import { Type } from "typebox";

export default function (pi: ExtensionAPI) {
  pi.registerTool({
    name: "echo",
    label: "Echo",
    description: "Returns its text",
    parameters: Type.Object({ text: Type.String() }),
    async execute(_id, params) {
      return { content: [{ type: "text", text: params.text }], details: {} };
    },
  });
  pi.registerCommand("render", {
    description: "Renders a line with pi-tui",
    handler: async (args, ctx) => {
      ctx.ui.notify(new Text(ctx.ui.theme.fg("accent", args)).render(40).join("\n"), "info");
    },
  });
}
