//! Why a value fails a JSON Schema, as pi 1.6.0 tells the model: a walk over the schema that
//! reports each failing keyword at the value it failed on, in pi-schema's words (`expected
//! number, got string`, `missing`, `unknown field`, ...), with the path dotted
//! (`edits.0.oldText`, `root` for the value itself).

use serde_json::{Map, Value};

use super::Schemas;

/// Enum errors list at most this many values (pi-schema's `LISTED_VALUES`).
const LISTED_VALUES: usize = 20;

/// A JSON Pointer as the dotted path the model sees.
fn dotted(pointer: &str) -> String {
    if pointer.is_empty() {
        return "root".to_owned();
    }
    pointer[1..]
        .split('/')
        .map(|s| s.replace("~1", "/").replace("~0", "~"))
        .collect::<Vec<_>>()
        .join(".")
}

fn pointer(path: &str, key: &str) -> String {
    format!("{path}/{}", key.replace('~', "~0").replace('/', "~1"))
}

impl Schemas<'_> {
    /// The `- path: message` lines pi 1.6.0 gives for `value` failing the schema (at least
    /// one).
    pub fn explain(&self, value: &Value) -> Vec<String> {
        let mut out = Vec::new();
        self.walk(self.root, value, "", &mut out);
        if out.is_empty() {
            out.push((String::new(), "invalid".to_owned()));
        }
        out.into_iter()
            .map(|(path, message)| format!("  - {}: {message}", dotted(&path)))
            .collect()
    }

    fn walk(&self, node: &Value, v: &Value, path: &str, out: &mut Vec<(String, String)>) {
        if self.depth.get() >= super::MAX_DEPTH {
            return;
        }
        self.depth.set(self.depth.get() + 1);
        self.walk_node(node, v, path, out);
        self.depth.set(self.depth.get() - 1);
    }

    fn walk_node(&self, node: &Value, v: &Value, path: &str, out: &mut Vec<(String, String)>) {
        let node = match node {
            Value::Bool(true) => return,
            Value::Bool(false) => {
                out.push((path.into(), "no value is allowed here".into()));
                return;
            }
            Value::Object(node) => node,
            _ => return,
        };
        let as_value = Value::Object(node.clone());
        if self.accepts(&as_value, v) {
            return;
        }
        let push = |out: &mut Vec<(String, String)>, message: String| {
            out.push((path.to_owned(), message));
        };
        if let Some(types) = node.get("type") {
            let types: Vec<&str> = match types {
                Value::String(t) => vec![t.as_str()],
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                _ => Vec::new(),
            };
            if !types.iter().any(|t| is_type(t, v)) {
                push(
                    out,
                    format!("expected {}, got {}", types.join(" or "), type_name(v)),
                );
                return;
            }
        }
        if let Some(Value::Array(values)) = node.get("enum")
            && !values.contains(v)
        {
            push(out, format!("expected one of {}", list_values(values)));
        }
        if let Some(c) = node.get("const")
            && c != v
        {
            push(out, format!("expected {c}"));
        }
        match v {
            Value::String(s) => Self::walk_string(node, s, path, out),
            Value::Number(n) => Self::walk_number(node, n.as_f64().unwrap_or(0.0), path, out),
            Value::Object(map) => self.walk_object(node, map, path, out),
            Value::Array(items) => self.walk_array(node, items, path, out),
            _ => {}
        }
        if let Some(Value::Array(all)) = node.get("allOf") {
            for s in all {
                self.walk(s, v, path, out);
            }
        }
        if let Some(Value::Array(any)) = node.get("anyOf") {
            self.walk_union(any, v, path, out, false);
        }
        if let Some(Value::Array(one)) = node.get("oneOf") {
            self.walk_union(one, v, path, out, true);
        }
        if let Some(not) = node.get("not")
            && self.accepts(not, v)
        {
            out.push((path.into(), "must not match the schema in not".into()));
        }
        if let Some(condition) = node.get("if") {
            let branch = if self.accepts(condition, v) {
                node.get("then")
            } else {
                node.get("else")
            };
            if let Some(branch) = branch {
                self.walk(branch, v, path, out);
            }
        }
        if let Some(reference) = node.get("$ref").and_then(Value::as_str) {
            match self.resolve(reference) {
                Some(target) => self.walk(target, v, path, out),
                None => out.push((path.into(), format!("unresolved reference {reference}"))),
            }
        }
    }

    fn walk_string(
        node: &Map<String, Value>,
        s: &str,
        path: &str,
        out: &mut Vec<(String, String)>,
    ) {
        let n = s.chars().count() as u64;
        let mut push = |m: String| out.push((path.to_owned(), m));
        if let Some(min) = node.get("minLength").and_then(Value::as_u64)
            && n < min
        {
            push(format!("expected at least {min} characters"));
        }
        if let Some(max) = node.get("maxLength").and_then(Value::as_u64)
            && n > max
        {
            push(format!("expected at most {max} characters"));
        }
        if let Some(pattern) = node.get("pattern").and_then(Value::as_str)
            && regex::Regex::new(pattern).is_ok_and(|re| !re.is_match(s))
        {
            push(format!("expected to match {pattern}"));
        }
    }

    fn walk_number(node: &Map<String, Value>, v: f64, path: &str, out: &mut Vec<(String, String)>) {
        let bound = |key: &str| node.get(key).and_then(Value::as_f64);
        let mut push = |m: String| out.push((path.to_owned(), m));
        if let Some(b) = bound("minimum").filter(|b| v < *b) {
            push(format!("expected >= {}", super::js_number_text(b)));
        }
        if let Some(b) = bound("maximum").filter(|b| v > *b) {
            push(format!("expected <= {}", super::js_number_text(b)));
        }
        if let Some(b) = bound("exclusiveMinimum").filter(|b| v <= *b) {
            push(format!("expected > {}", super::js_number_text(b)));
        }
        if let Some(b) = bound("exclusiveMaximum").filter(|b| v >= *b) {
            push(format!("expected < {}", super::js_number_text(b)));
        }
        if let Some(b) = bound("multipleOf").filter(|b| *b != 0.0 && (v / b).fract() != 0.0) {
            push(format!(
                "expected a multiple of {}",
                super::js_number_text(b)
            ));
        }
    }

    fn walk_object(
        &self,
        node: &Map<String, Value>,
        v: &Map<String, Value>,
        path: &str,
        out: &mut Vec<(String, String)>,
    ) {
        let empty = Map::new();
        let properties = node
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for key in node
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(key) = key.as_str()
                && !v.contains_key(key)
            {
                out.push((pointer(path, key), "missing".into()));
            }
        }
        for (key, schema) in properties {
            if let Some(value) = v.get(key) {
                self.walk(schema, value, &pointer(path, key), out);
            }
        }
        let patterns: Vec<(regex::Regex, &Value)> = node
            .get("patternProperties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .filter_map(|(p, s)| Some((regex::Regex::new(p).ok()?, s)))
            .collect();
        for (key, value) in v {
            let mut matched = properties.contains_key(key);
            for (re, schema) in &patterns {
                if re.is_match(key) {
                    matched = true;
                    self.walk(schema, value, &pointer(path, key), out);
                }
            }
            match node.get("additionalProperties") {
                Some(Value::Bool(false)) if !matched => {
                    out.push((pointer(path, key), "unknown field".into()));
                }
                Some(schema) if !matched => self.walk(schema, value, &pointer(path, key), out),
                _ => {}
            }
            if let Some(names) = node.get("propertyNames")
                && !self.accepts(names, &Value::String(key.clone()))
            {
                out.push((pointer(path, key), "invalid property name".into()));
            }
        }
        let count = v.len() as u64;
        if let Some(min) = node.get("minProperties").and_then(Value::as_u64)
            && count < min
        {
            out.push((path.into(), format!("expected at least {min} properties")));
        }
        if let Some(max) = node.get("maxProperties").and_then(Value::as_u64)
            && count > max
        {
            out.push((path.into(), format!("expected at most {max} properties")));
        }
    }

    fn walk_array(
        &self,
        node: &Map<String, Value>,
        v: &[Value],
        path: &str,
        out: &mut Vec<(String, String)>,
    ) {
        let (prefix, rest): (&[Value], Option<&Value>) = match node.get("items") {
            Some(Value::Array(prefix)) => (prefix, node.get("additionalItems")),
            rest => (
                node.get("prefixItems")
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice),
                rest,
            ),
        };
        for (i, item) in v.iter().enumerate() {
            if let Some(schema) = prefix.get(i).or(rest) {
                self.walk(schema, item, &format!("{path}/{i}"), out);
            }
        }
        let n = v.len() as u64;
        if let Some(min) = node.get("minItems").and_then(Value::as_u64)
            && n < min
        {
            out.push((path.into(), format!("expected at least {min} items")));
        }
        if let Some(max) = node.get("maxItems").and_then(Value::as_u64)
            && n > max
        {
            out.push((path.into(), format!("expected at most {max} items")));
        }
        if node.get("uniqueItems") == Some(&Value::Bool(true))
            && v.iter().enumerate().any(|(i, a)| v[..i].contains(a))
        {
            out.push((path.into(), "expected unique items".into()));
        }
    }

    /// pi-schema's union account: a tagged union blames the branch its tag selects; an object
    /// the branch that declares most of its keys, then the branch whose first error is deepest.
    fn walk_union(
        &self,
        branches: &[Value],
        v: &Value,
        path: &str,
        out: &mut Vec<(String, String)>,
        exactly_one: bool,
    ) {
        let matches = branches.iter().filter(|s| self.accepts(s, v)).count();
        if matches == 1 || (!exactly_one && matches > 0) {
            return;
        }
        if matches > 1 {
            out.push((path.into(), "matches more than one alternative".into()));
            return;
        }
        let resolved: Vec<&Value> = branches
            .iter()
            .map(|s| match s.get("$ref").and_then(Value::as_str) {
                Some(r) => self.resolve(r).unwrap_or(s),
                None => s,
            })
            .collect();
        if let (Some((key, values)), Value::Object(map)) = (tag_of(&resolved), v) {
            match values.iter().position(|t| Some(*t) == map.get(&key)) {
                None => {
                    let listed: Vec<Value> = values.into_iter().cloned().collect();
                    out.push((
                        pointer(path, &key),
                        format!("expected one of {}", list_values(&listed)),
                    ));
                }
                Some(i) => self.walk(&branches[i], v, path, out),
            }
            return;
        }
        let mut best: Option<(Vec<(String, String)>, usize)> = None;
        for (s, r) in branches.iter().zip(&resolved) {
            let mut errors = Vec::new();
            self.walk(s, v, path, &mut errors);
            if errors.is_empty() {
                continue;
            }
            let declared = match v {
                Value::Object(map) => r
                    .get("properties")
                    .and_then(Value::as_object)
                    .map_or(0, |p| map.keys().filter(|k| p.contains_key(*k)).count()),
                _ => 0,
            };
            let better = match &best {
                None => true,
                Some((b, d)) => {
                    declared > *d || (declared == *d && errors[0].0.len() > b[0].0.len())
                }
            };
            if better {
                best = Some((errors, declared));
            }
        }
        match best {
            Some((errors, _)) => out.extend(errors),
            None => out.push((path.into(), "matches no alternative".into())),
        }
    }
}

/// A property whose `const` differs in every branch and is a primitive in each: the union's
/// tag, with its values in branch order.
fn tag_of<'a>(branches: &[&'a Value]) -> Option<(String, Vec<&'a Value>)> {
    let first = branches.first()?.get("properties")?.as_object()?;
    for key in first.keys() {
        let values: Option<Vec<&Value>> = branches
            .iter()
            .map(|b| b.get("properties")?.get(key)?.get("const"))
            .collect();
        let Some(values) = values else { continue };
        let primitive = values.iter().all(|v| !v.is_object() && !v.is_array());
        let distinct = values
            .iter()
            .enumerate()
            .all(|(i, v)| !values[..i].contains(v));
        if primitive && distinct {
            return Some((key.clone(), values));
        }
    }
    None
}

fn is_type(t: &str, v: &Value) -> bool {
    match t {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        _ => false,
    }
}

/// JavaScript's `typeof`, with pi-schema's refinements.
fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Array(_) => "array",
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Bool(_) => "boolean",
        Value::Object(_) => "object",
    }
}

/// `values` as JSON, at most [`LISTED_VALUES`] of them, then how many more there are.
fn list_values(values: &[Value]) -> String {
    let listed =
        serde_json::to_string(&values[..values.len().min(LISTED_VALUES)]).unwrap_or_default();
    if values.len() <= LISTED_VALUES {
        return listed;
    }
    format!(
        "{}, ... and {} more]",
        &listed[..listed.len() - 1],
        values.len() - LISTED_VALUES
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn explain(schema: &Value, value: &Value) -> Vec<String> {
        Schemas::new(schema).explain(value)
    }

    #[test]
    fn failures_read_as_pi_1_6_words_them() {
        let schema = json!({
            "type": "object",
            "properties": {
                "x": { "type": "number", "minimum": 1 },
                "mode": { "enum": ["a", "b"] },
                "edits": { "type": "array", "items": {
                    "type": "object", "properties": { "oldText": { "type": "string" } },
                    "required": ["oldText"], "additionalProperties": false,
                }},
            },
            "required": ["x", "path"],
        });
        let value = json!({ "x": "5", "mode": "c", "edits": [{ "oldText": 1, "extra": true }] });
        assert_eq!(
            explain(&schema, &value),
            vec![
                "  - path: missing",
                "  - x: expected number, got string",
                "  - mode: expected one of [\"a\",\"b\"]",
                "  - edits.0.oldText: expected string, got integer",
                "  - edits.0.extra: unknown field",
            ]
        );
        assert_eq!(
            explain(&json!({ "type": "number", "minimum": 1 }), &json!(0.5)),
            vec!["  - root: expected >= 1"]
        );
    }

    #[test]
    fn a_tagged_union_blames_the_branch_its_tag_selects() {
        let schema = json!({ "anyOf": [
            { "type": "object", "properties": { "kind": { "const": "a" }, "n": { "type": "number" } }, "required": ["kind", "n"] },
            { "type": "object", "properties": { "kind": { "const": "b" } }, "required": ["kind"] },
        ]});
        assert_eq!(
            explain(&schema, &json!({ "kind": "a", "n": "x" })),
            vec!["  - n: expected number, got string"]
        );
        assert_eq!(
            explain(&schema, &json!({ "kind": "z" })),
            vec!["  - kind: expected one of [\"a\",\"b\"]"]
        );
    }
}
