//! How pi 1.6.0 loosens a model's tool-call arguments before checking them (pi-schema's
//! coercion, three passes in order):
//!
//! 1. a `null` in an optional property whose schema rejects null counts as omitted;
//! 2. TypeBox's conversions, read off the schema's structure: strings, numbers and booleans
//!    into the primitive asked for (`"3.5"` → 3 for an integer, `null` → `"null"` for a
//!    string), a single value into a one-item array, a union takes the first branch whose
//!    conversion the union accepts, a literal the value that converts to exactly it;
//! 3. primitive coercion by `type`, type lists included (`""` → null, `null` → 0).
//!
//! A value that cannot be loosened is left as it is, and the check reports it.

use serde_json::{Map, Number, Value};

use super::Schemas;

/// References followed (and single values wrapped) within one conversion before it stops:
/// a recursive schema that meets a value no branch accepts would otherwise convert forever.
const MAX_REENTRIES: usize = 64;

impl Schemas<'_> {
    /// `value` loosened as pi 1.6.0 loosens tool-call arguments for this schema.
    pub fn coerce(&self, value: Value) -> Value {
        let value = self.drop_optional_nulls(self.root, value);
        let value = self.convert(self.root, value, &mut 0);
        self.coerce_types(self.root, value)
    }

    // ----- pass 1 -----

    fn drop_optional_nulls(&self, schema: &Value, value: Value) -> Value {
        match value {
            Value::Array(items) => Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| match item_schema(schema, i) {
                        Some(s) => self.drop_optional_nulls(s, item),
                        None => item,
                    })
                    .collect(),
            ),
            Value::Object(map) => {
                let empty = Map::new();
                let properties = schema["properties"].as_object().unwrap_or(&empty);
                let required = |key: &str| {
                    schema["required"]
                        .as_array()
                        .is_some_and(|r| r.iter().any(|k| k == key))
                };
                let mut out = Map::with_capacity(map.len());
                for (key, v) in map {
                    match properties.get(&key) {
                        Some(property) => {
                            let is_ref = property.get("$ref").is_some_and(Value::is_string);
                            if v.is_null()
                                && !required(&key)
                                && !is_ref
                                && property.is_object()
                                && !self.accepts(property, &Value::Null)
                            {
                                continue;
                            }
                            out.insert(key, self.drop_optional_nulls(property, v));
                        }
                        None => {
                            let v = match self.member_schemas(schema, &key).first() {
                                Some(s) => self.drop_optional_nulls(s, v),
                                None => v,
                            };
                            out.insert(key, v);
                        }
                    }
                }
                Value::Object(out)
            }
            other => other,
        }
    }

    /// The schemas a key that `properties` does not name falls under: the matching
    /// `patternProperties`, else `additionalProperties`.
    fn member_schemas<'s>(&'s self, schema: &'s Value, key: &str) -> Vec<&'s Value> {
        let mut found: Vec<&Value> = schema["patternProperties"]
            .as_object()
            .into_iter()
            .flatten()
            .filter(|(p, _)| regex::Regex::new(p).is_ok_and(|re| re.is_match(key)))
            .map(|(_, s)| s)
            .collect();
        if found.is_empty() && schema["additionalProperties"].is_object() {
            found.push(&schema["additionalProperties"]);
        }
        found
    }

    // ----- pass 2 -----

    fn convert(&self, node: &Value, value: Value, reentries: &mut usize) -> Value {
        if !node.is_object() {
            return value;
        }
        if let Some(reference) = node["$ref"].as_str() {
            let Some(target) = self.resolve(reference) else {
                return value;
            };
            if *reentries >= MAX_REENTRIES {
                return value;
            }
            *reentries += 1;
            return self.convert(target, value, reentries);
        }
        if let Some(literal) = node.get("const") {
            return convert_literal(literal, value);
        }
        if let Some(values) = node["enum"].as_array() {
            if values.contains(&value) {
                return value;
            }
            for member in values {
                let candidate = convert_literal(member, value.clone());
                if candidate != value && self.accepts(node, &candidate) {
                    return candidate;
                }
            }
            return value;
        }
        for union in ["anyOf", "oneOf"] {
            if let Some(branches) = node[union].as_array() {
                if branches.iter().any(|b| self.accepts(b, &value)) {
                    return self.convert_members(node, value, reentries);
                }
                for branch in branches {
                    let candidate = self.convert(branch, value.clone(), reentries);
                    let candidate = self.convert_members(node, candidate, reentries);
                    if self.accepts(node, &candidate) {
                        return candidate;
                    }
                }
                return self.convert_members(node, value, reentries);
            }
        }
        if let Some(members) = node["allOf"].as_array() {
            let mut next = value;
            for member in members {
                next = self.convert(member, next, reentries);
            }
            return self.convert_members(node, next, reentries);
        }
        match node["type"].as_str() {
            Some("string") => to_string(&value).unwrap_or(value),
            Some("number") => to_number(&value).map_or(value, js_number),
            Some("integer") => to_number(&value).map_or(value, |n| js_number(n.trunc())),
            Some("boolean") => to_boolean(&value).map_or(value, Value::Bool),
            Some("null") => {
                if to_null(&value) {
                    Value::Null
                } else {
                    value
                }
            }
            Some("array") => self.convert_array(node, value, reentries),
            Some("object") => self.convert_object(node, value, reentries),
            None if node.get("properties").is_some() || node.get("patternProperties").is_some() => {
                self.convert_object(node, value, reentries)
            }
            None if node.get("items").is_some() || node.get("prefixItems").is_some() => {
                self.convert_array(node, value, reentries)
            }
            _ => value,
        }
    }

    /// A union or intersection node's own members, when it declares any.
    fn convert_members(&self, node: &Value, value: Value, reentries: &mut usize) -> Value {
        let declares = ["properties", "patternProperties", "additionalProperties"]
            .iter()
            .any(|k| node.get(k).is_some());
        if declares {
            self.convert_object(node, value, reentries)
        } else {
            value
        }
    }

    fn convert_array(&self, node: &Value, value: Value, reentries: &mut usize) -> Value {
        let prefix = node["items"].as_array().or(node["prefixItems"].as_array());
        if let Some(prefix) = prefix {
            // A tuple converts its items and never wraps a single value.
            let Value::Array(items) = value else {
                return value;
            };
            let rest = (!node["items"].is_array()).then(|| &node["items"]);
            return Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| match prefix.get(i).or(rest) {
                        Some(s) => self.convert(s, item, reentries),
                        None => item,
                    })
                    .collect(),
            );
        }
        match value {
            Value::Array(items) if node.get("items").is_some() => Value::Array(
                items
                    .into_iter()
                    .map(|item| self.convert(&node["items"], item, reentries))
                    .collect(),
            ),
            Value::Array(items) => Value::Array(items),
            single => {
                if *reentries >= MAX_REENTRIES || !node["items"].is_object() {
                    return Value::Array(vec![single]);
                }
                *reentries += 1;
                Value::Array(vec![self.convert(&node["items"], single, reentries)])
            }
        }
    }

    fn convert_object(&self, node: &Value, value: Value, reentries: &mut usize) -> Value {
        let Value::Object(map) = value else {
            return value;
        };
        let empty = Map::new();
        let properties = node["properties"].as_object().unwrap_or(&empty);
        let mut out = Map::with_capacity(map.len());
        for (key, v) in map {
            let mut next = v;
            if let Some(property) = properties.get(&key) {
                next = self.convert(property, next, reentries);
            }
            let patterns: Vec<&Value> = node["patternProperties"]
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(p, _)| regex::Regex::new(p).is_ok_and(|re| re.is_match(&key)))
                .map(|(_, s)| s)
                .collect();
            for schema in &patterns {
                next = self.convert(schema, next, reentries);
            }
            if !properties.contains_key(&key)
                && patterns.is_empty()
                && node["additionalProperties"].is_object()
            {
                next = self.convert(&node["additionalProperties"], next, reentries);
            }
            out.insert(key, next);
        }
        Value::Object(out)
    }

    // ----- pass 3 -----

    fn coerce_types(&self, schema: &Value, value: Value) -> Value {
        if !schema.is_object() {
            return value;
        }
        let mut next = value;
        for member in schema["allOf"].as_array().into_iter().flatten() {
            next = self.coerce_types(member, next);
        }
        for union in ["anyOf", "oneOf"] {
            if let Some(branches) = schema[union].as_array()
                && !branches.iter().any(|b| self.accepts(b, &next))
            {
                for branch in branches {
                    let coerced = self.coerce_types(branch, next.clone());
                    if self.accepts(branch, &coerced) {
                        next = coerced;
                        break;
                    }
                }
            }
        }
        let types: Vec<&str> = match &schema["type"] {
            Value::String(t) => vec![t.as_str()],
            Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let matches_one = types.len() > 1 && types.iter().any(|t| matches_type(&next, t));
        if !types.is_empty() && !matches_one {
            for t in &types {
                if let Some(coerced) = coerce_primitive(&next, t) {
                    next = coerced;
                    break;
                }
            }
        }
        match next {
            Value::Object(map) if types.contains(&"object") => {
                let empty = Map::new();
                let properties = schema["properties"].as_object().unwrap_or(&empty);
                Value::Object(
                    map.into_iter()
                        .map(|(key, v)| {
                            let v = match properties.get(&key) {
                                Some(p) => self.coerce_types(p, v),
                                None => match self.member_schemas(schema, &key).first() {
                                    Some(s) => self.coerce_types(s, v),
                                    None => v,
                                },
                            };
                            (key, v)
                        })
                        .collect(),
                )
            }
            Value::Array(items) if types.contains(&"array") => Value::Array(
                items
                    .into_iter()
                    .enumerate()
                    .map(|(i, item)| match item_schema(schema, i) {
                        Some(s) if s.is_object() => self.coerce_types(s, item),
                        _ => item,
                    })
                    .collect(),
            ),
            other => other,
        }
    }
}

/// The schema of an array's item at `index`: a tuple's for its prefix, `items` for the rest.
fn item_schema(schema: &Value, index: usize) -> Option<&Value> {
    if let Some(prefix) = schema["items"].as_array() {
        return prefix.get(index);
    }
    if let Some(prefix) = schema["prefixItems"].as_array()
        && index < prefix.len()
    {
        return prefix.get(index);
    }
    schema.get("items")
}

/// A literal taken from a value of another kind that converts to exactly it.
fn convert_literal(literal: &Value, value: Value) -> Value {
    if *literal == value {
        return value;
    }
    let converted = match literal {
        Value::String(_) => to_string(&value),
        Value::Number(_) => to_number(&value).map(js_number),
        Value::Bool(_) => to_boolean(&value).map(Value::Bool),
        _ => None,
    };
    match converted {
        Some(c) if c == *literal => c,
        _ => value,
    }
}

fn finite(value: &Value) -> Option<f64> {
    value.as_f64().filter(|f| f.is_finite())
}

/// What a value reads as where a string is asked for.
fn to_string(value: &Value) -> Option<Value> {
    match value {
        Value::String(_) => Some(value.clone()),
        Value::Bool(b) => Some(Value::String(b.to_string())),
        Value::Number(_) => finite(value).map(|f| Value::String(super::js_number_text(f))),
        Value::Null => Some(Value::String("null".into())),
        _ => None,
    }
}

/// What a value reads as where a number is asked for.
fn to_number(value: &Value) -> Option<f64> {
    match value {
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        Value::Number(_) => finite(value),
        Value::Null => Some(0.0),
        Value::String(s) => {
            let trimmed = s.trim();
            let parsed = if trimmed.is_empty() {
                Some(0.0)
            } else {
                js_string_to_number(trimmed)
            };
            match parsed {
                Some(f) if f.is_finite() => Some(f),
                _ => match s.to_lowercase().as_str() {
                    "false" => Some(0.0),
                    "true" => Some(1.0),
                    // `12n` and `12.5` read as big integers, truncated.
                    _ => {
                        let digits = s.strip_suffix('n').unwrap_or(s);
                        let whole = digits.split('.').next().unwrap_or(digits);
                        whole.parse::<i64>().ok().map(|n| n as f64)
                    }
                },
            }
        }
        _ => None,
    }
}

/// JavaScript's `+string` for decimal text (hex, octal and binary literals included).
fn js_string_to_number(s: &str) -> Option<f64> {
    let radix = |prefix: &str, radix: u32| {
        s.strip_prefix(prefix)
            .or_else(|| s.strip_prefix(&prefix.to_uppercase()))
            .and_then(|d| u64::from_str_radix(d, radix).ok())
            .map(|n| n as f64)
    };
    radix("0x", 16)
        .or_else(|| radix("0o", 8))
        .or_else(|| radix("0b", 2))
        .or_else(|| match s {
            "Infinity" | "+Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            _ if s.chars().all(|c| c.is_ascii_digit() || "+-.eE".contains(c)) => s.parse().ok(),
            _ => None,
        })
}

fn to_boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Null => Some(false),
        Value::Number(_) => match finite(value) {
            Some(0.0) => Some(false),
            Some(1.0) => Some(true),
            _ => None,
        },
        Value::String(s) => match s.to_lowercase().as_str() {
            "false" | "0" => Some(false),
            "true" | "1" => Some(true),
            _ => None,
        },
        _ => None,
    }
}

fn to_null(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(_) => finite(value) == Some(0.0),
        Value::String(s) => {
            matches!(s.to_lowercase().as_str(), "undefined" | "null") || s.is_empty() || s == "0"
        }
        _ => false,
    }
}

fn matches_type(value: &Value, t: &str) -> bool {
    match t {
        "number" => finite(value).is_some(),
        "integer" => finite(value).is_some_and(|f| f.fract() == 0.0),
        "boolean" => value.is_boolean(),
        "string" => value.is_string(),
        "null" => value.is_null(),
        "array" => value.is_array(),
        "object" => value.is_object(),
        _ => false,
    }
}

/// Pass 3's coercion of a primitive to `t`; `None` when it stays as it is.
fn coerce_primitive(value: &Value, t: &str) -> Option<Value> {
    match (t, value) {
        ("number" | "integer", Value::Null) => Some(js_number(0.0)),
        ("number" | "integer", Value::String(s)) if !s.trim().is_empty() => {
            let parsed = js_string_to_number(s.trim())?;
            let fits = if t == "number" {
                parsed.is_finite()
            } else {
                parsed.is_finite() && parsed.fract() == 0.0
            };
            fits.then(|| js_number(parsed))
        }
        ("number" | "integer", Value::Bool(b)) => Some(js_number(if *b { 1.0 } else { 0.0 })),
        ("boolean", Value::Null) => Some(Value::Bool(false)),
        ("boolean", Value::String(s)) if s == "true" || s == "false" => {
            Some(Value::Bool(s == "true"))
        }
        ("boolean", Value::Number(_)) => match finite(value) {
            Some(1.0) => Some(Value::Bool(true)),
            Some(0.0) => Some(Value::Bool(false)),
            _ => None,
        },
        ("string", Value::Null) => Some(Value::String(String::new())),
        ("string", Value::Number(_) | Value::Bool(_)) => to_string(value),
        ("null", Value::String(s)) if s.is_empty() => Some(Value::Null),
        ("null", Value::Bool(false)) => Some(Value::Null),
        ("null", Value::Number(_)) if finite(value) == Some(0.0) => Some(Value::Null),
        _ => None,
    }
}

/// A number as JSON holds what JavaScript would: `5`, not `5.0`.
fn js_number(f: f64) -> Value {
    if f.fract() == 0.0 && f.abs() < 9e15 {
        Value::Number((f as i64).into())
    } else {
        Number::from_f64(f).map_or(Value::Null, Value::Number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn coerce(schema: Value, value: Value) -> Value {
        Schemas::new(&schema).coerce(value)
    }

    #[test]
    fn arguments_loosen_as_pi_1_6_loosens_them() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": { "type": "string" },
                "limit": { "type": "integer" },
                "paths": { "type": "array", "items": { "type": "string" } },
                "flag": { "type": "boolean" },
                "offset": { "type": "number" },
            },
            "required": ["path"],
        });
        assert_eq!(
            coerce(
                schema,
                json!({ "path": 7, "limit": "3.5", "paths": "a", "flag": "1", "offset": null })
            ),
            json!({ "path": "7", "limit": 3, "paths": ["a"], "flag": true })
        );
    }

    #[test]
    fn a_union_takes_the_first_branch_that_accepts_the_conversion() {
        let schema = json!({ "anyOf": [{ "type": "number" }, { "type": "boolean" }] });
        assert_eq!(coerce(schema.clone(), json!("12")), json!(12));
        assert_eq!(coerce(schema, json!(true)), json!(true));
        let literal = json!({ "anyOf": [{ "const": 1 }, { "const": "x" }] });
        assert_eq!(coerce(literal, json!("1")), json!(1));
    }
}
