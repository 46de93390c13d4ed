//! How much work a tool's parameter schema can cause. The host validates every call's
//! arguments against the schema an extension registered, in host code outside the
//! extension's deadlines; a small schema can still be exponential to validate (29 levels of
//! `anyOf` each naming the next twice froze a server for 11 s). So a schema is measured once,
//! when it is registered: its size with every local `$ref` expanded (computed without
//! expanding, a definition's size remembered), and no `$ref` cycle through a branching
//! combinator, whose cost grows with the depth of the arguments. A schema over either is
//! refused, and saying why.

use std::collections::HashMap;

use serde_json::Value;

/// Subschemas a schema may stand for once its local `$ref`s are expanded.
pub const MAX_EXPANDED_NODES: u64 = 20_000;

/// Keywords whose value is one subschema.
const ONE: &[&str] = &[
    "additionalProperties",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "additionalItems",
];
/// Keywords whose value is a list of subschemas.
const LIST: &[&str] = &["anyOf", "oneOf", "allOf", "prefixItems", "items"];
/// Keywords whose value maps names to subschemas.
const MAP: &[&str] = &["properties", "patternProperties", "dependentSchemas"];
/// Combinators that try several branches: a cycle through one can branch at every level.
const BRANCHING: &[&str] = &["anyOf", "oneOf"];

/// Refuses a schema whose validation could take more than polynomial time in its size.
pub fn check_schema_cost(schema: &Value) -> Result<(), String> {
    let mut walk = Walk {
        root: schema,
        memo: HashMap::new(),
        stack: Vec::new(),
    };
    let nodes = walk.cost(schema, "#", false)?;
    if nodes > MAX_EXPANDED_NODES {
        return Err(format!(
            "its parameter schema stands for more than {MAX_EXPANDED_NODES} subschemas once its $refs are expanded ({}); validating it could take too long",
            if nodes == u64::MAX {
                "far more".to_owned()
            } else {
                nodes.to_string()
            }
        ));
    }
    Ok(())
}

struct Walk<'a> {
    root: &'a Value,
    /// Expanded size of each `$ref` target already measured.
    memo: HashMap<String, u64>,
    /// `$ref` targets being measured, and whether a branching combinator lies between each
    /// and the node being looked at.
    stack: Vec<(String, bool)>,
}

impl<'a> Walk<'a> {
    fn cost(&mut self, node: &'a Value, at: &str, branching: bool) -> Result<u64, String> {
        let Some(object) = node.as_object() else {
            return Ok(1);
        };
        let mut total: u64 = 1;
        if let Some(target) = object.get("$ref").and_then(Value::as_str) {
            total = total.saturating_add(self.reference(target, branching)?);
        }
        for (key, value) in object {
            let key = key.as_str();
            let branches = branching || (BRANCHING.contains(&key) && is_branching(value));
            let path = format!("{at}/{key}");
            if ONE.contains(&key) && value.is_object() {
                total = total.saturating_add(self.cost(value, &path, branches)?);
            } else if LIST.contains(&key) {
                for (i, item) in value.as_array().into_iter().flatten().enumerate() {
                    total =
                        total.saturating_add(self.cost(item, &format!("{path}/{i}"), branches)?);
                }
            } else if MAP.contains(&key) {
                for (name, item) in value.as_object().into_iter().flatten() {
                    total = total.saturating_add(self.cost(
                        item,
                        &format!("{path}/{name}"),
                        branches,
                    )?);
                }
            }
            if total > MAX_EXPANDED_NODES {
                return Ok(u64::MAX);
            }
        }
        Ok(total)
    }

    /// The expanded size of what `$ref` names; a non-local reference counts as one node (the
    /// validator cannot fetch it either).
    fn reference(&mut self, target: &str, branching: bool) -> Result<u64, String> {
        let Some(pointer) = target.strip_prefix('#') else {
            return Ok(1);
        };
        if let Some(position) = self.stack.iter().position(|(t, _)| t == target) {
            let through_branch = branching || self.stack[position + 1..].iter().any(|(_, b)| *b);
            if through_branch {
                return Err(format!(
                    "its parameter schema refers to {target:?} from inside itself through anyOf/oneOf: validating such a schema can take time exponential in the arguments' depth"
                ));
            }
            return Ok(1);
        }
        if let Some(known) = self.memo.get(target) {
            return Ok(*known);
        }
        let root = self.root;
        let Some(node) = root.pointer(&unescape_pointer(pointer)) else {
            return Ok(1);
        };
        self.stack.push((target.to_owned(), branching));
        let cost = self.cost(node, target, false);
        self.stack.pop();
        let cost = cost?;
        self.memo.insert(target.to_owned(), cost);
        Ok(cost)
    }
}

/// A list of two or more subschemas: the validator may try each.
fn is_branching(value: &Value) -> bool {
    value.as_array().is_some_and(|a| a.len() > 1)
}

/// A JSON pointer as it appears in a URI fragment (`%25` and the like decoded).
fn unescape_pointer(pointer: &str) -> String {
    let mut out = String::with_capacity(pointer.len());
    let bytes = pointer.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Ok(byte) = u8::from_str_radix(&pointer[i + 1..i + 3], 16)
        {
            out.push(byte as char);
            i += 3;
            continue;
        }
        out.push(bytes[i] as char);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// `levels` definitions, each an anyOf naming the next twice: small to write,
    /// exponential to expand.
    fn doubling(levels: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..levels {
            let next = format!("#/$defs/d{}", i + 1);
            defs.insert(
                format!("d{i}"),
                json!({ "anyOf": [{ "$ref": next }, { "$ref": next, "type": "object" }] }),
            );
        }
        defs.insert(format!("d{levels}"), json!({ "type": "string" }));
        json!({ "type": "object", "properties": { "x": { "$ref": "#/$defs/d0" } }, "$defs": defs })
    }

    #[test]
    fn ordinary_schemas_pass() {
        for schema in [
            json!({ "type": "object", "properties": { "path": { "type": "string" } }, "required": ["path"] }),
            json!({ "type": "object", "properties": { "items": { "type": "array", "items": { "anyOf": [{ "type": "string" }, { "type": "number" }] } } } }),
            doubling(8),
            // A recursive tree without branching: linear to validate.
            json!({ "$defs": { "node": { "type": "object", "properties": { "children": { "type": "array", "items": { "$ref": "#/$defs/node" } } } } }, "$ref": "#/$defs/node" }),
        ] {
            assert_eq!(check_schema_cost(&schema), Ok(()), "{schema}");
        }
    }

    #[test]
    fn exponential_expansions_and_branching_recursion_are_refused() {
        let refused = check_schema_cost(&doubling(29)).unwrap_err();
        assert!(refused.contains("more than 20000 subschemas"), "{refused}");
        let recursive = json!({
            "$defs": { "v": { "anyOf": [{ "type": "array", "items": { "$ref": "#/$defs/v" } }, { "type": "array", "items": { "$ref": "#/$defs/v" } }] } },
            "type": "object", "properties": { "v": { "$ref": "#/$defs/v" } }
        });
        let refused = check_schema_cost(&recursive).unwrap_err();
        assert!(refused.contains("through anyOf/oneOf"), "{refused}");
    }
}
