// node:assert/strict for pichamber: assert whose loose comparisons are the strict ones.

import { strict } from "pichamber:node/assert";

export const {
  ok, strictEqual, notStrictEqual, deepStrictEqual, notDeepStrictEqual, match, doesNotMatch, throws,
  rejects, doesNotThrow, doesNotReject, ifError, fail, AssertionError,
} = strict;
export const equal = strict.equal;
export const notEqual = strict.notEqual;
export const deepEqual = strict.deepEqual;
export const notDeepEqual = strict.notDeepEqual;
export { strict };
export default strict;
