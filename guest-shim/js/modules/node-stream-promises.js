// node:stream/promises for pichamber: pipeline and finished as promises (node-stream.js).
import { promises } from "pichamber:node/stream";

export const pipeline = promises.pipeline;
export const finished = promises.finished;
export default promises;
