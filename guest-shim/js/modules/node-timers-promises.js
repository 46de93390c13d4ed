// node:timers/promises: the promise forms of node:timers.
import { promises } from "pichamber:node/timers";

export const setTimeout = promises.setTimeout;
export const setImmediate = promises.setImmediate;
export const setInterval = promises.setInterval;
export const scheduler = promises.scheduler;
export default promises;
