//! Comparing what real pi and pichamber print: placeholders for what differs by nature (ids,
//! times, durations, each side's folder), then the first place they differ.

use serde_json::{Value, json};

/// Ids, times, durations and the side's folder as placeholders; the context size as whether
/// there is one.
pub fn normalise(value: &Value, root: &str) -> Value {
    static ID: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}").unwrap()
    });
    static TIME: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"\d{4}-\d\d-\d\dT\d\d[:-]\d\d[:-]\d\d([.-]\d+)?Z?").unwrap()
    });
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let v = match k.as_str() {
                        "durationMs" | "timestamp" | "updatedAt" if !v.is_null() => json!("<t>"),
                        "used" if v.is_u64() => json!("<context size>"),
                        _ => normalise(v, root),
                    };
                    (k.clone(), v)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|v| normalise(v, root)).collect()),
        Value::String(s) => {
            let s = s.replace(root, "<root>");
            let s = ID.replace_all(&s, "<id>");
            Value::String(TIME.replace_all(&s, "<time>").into_owned())
        }
        other => other.clone(),
    }
}

pub fn first_difference(a: &Value, b: &Value, path: &str) -> Option<String> {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => x
            .keys()
            .chain(y.keys().filter(|k| !x.contains_key(*k)))
            .find_map(|k| {
                first_difference(
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    &format!("{path}.{k}"),
                )
            }),
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => x
            .iter()
            .zip(y)
            .enumerate()
            .find_map(|(i, (p, q))| first_difference(p, q, &format!("{path}[{i}]"))),
        _ if a == b => None,
        _ => Some(format!("{path}: pi {a}, pichamber {b}")),
    }
}
