// node:readline/promises: readline's Interface whose question() returns a promise.
import { promises } from "pichamber:node/readline";

export const Interface = promises.Interface;
export const createInterface = promises.createInterface;
export default promises;
