// typebox/compile for pichamber: the validator of typebox-value.js, with typebox's exports.
import { Compile } from "pichamber:typebox/value";

export { Code, Compile, Validator } from "pichamber:typebox/value";
export default Compile;
