//! pi 1.6.0's handling of a tool's argument schema (its `pi-schema` package): how a model's
//! arguments are loosened before the check (`coerce`) and how a failure is put to the model
//! (`explain`). Whether a value passes is the `jsonschema` crate's call.

mod coerce;
mod explain;

use serde_json::Value;

/// Levels of subschemas an explanation walks before it stops (a schema whose `$ref`s cycle
/// would otherwise walk forever).
const MAX_DEPTH: usize = 64;

/// One tool's parameter schema, whose subschemas refer to its definitions.
pub struct Schemas<'a> {
    root: &'a Value,
    depth: std::cell::Cell<usize>,
}

impl<'a> Schemas<'a> {
    pub fn new(root: &'a Value) -> Self {
        Self {
            root,
            depth: std::cell::Cell::new(0),
        }
    }
}

impl Schemas<'_> {
    /// Whether `v` passes `node`, a subschema of the root (its references resolved against
    /// the root's definitions).
    fn accepts(&self, node: &Value, v: &Value) -> bool {
        let schema = match node {
            Value::Object(map) => {
                let mut map = map.clone();
                for defs in ["$defs", "definitions"] {
                    if let Some(d) = self.root.get(defs)
                        && !map.contains_key(defs)
                    {
                        map.insert(defs.into(), d.clone());
                    }
                }
                Value::Object(map)
            }
            other => other.clone(),
        };
        jsonschema::validator_for(&schema).is_ok_and(|validator| validator.is_valid(v))
    }

    /// The schema a local `$ref` (`#/$defs/X`, `#`) names.
    fn resolve(&self, reference: &str) -> Option<&Value> {
        let fragment = reference.strip_prefix('#')?;
        if fragment.is_empty() {
            return Some(self.root);
        }
        self.root.pointer(fragment)
    }
}

/// A number as JavaScript prints it (`1`, not `1.0`).
fn js_number_text(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e21 {
        format!("{}", f as i64)
    } else {
        f.to_string()
    }
}
