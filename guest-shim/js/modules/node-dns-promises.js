// node:dns/promises for pichamber: node:dns's promise API.

import { promises } from "pichamber:node/dns";

export const { lookup, resolve, resolve4, resolve6, reverse, getServers, setServers, setDefaultResultOrder, getDefaultResultOrder } = promises;
export default promises;
