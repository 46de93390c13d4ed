//! `ctx.ui.form` fields and the validation of an answer, done by the host before the
//! extension is resolved: required fields, number bounds, select options, checkbox values.

use serde_json::{Map, Value, json};

use super::{limits, truncate};

pub const FIELD_TYPES: [&str; 5] = ["text", "textarea", "number", "select", "checkbox"];

/// The fields as the page shows them: at most 12, each with an id, a label, a known type
/// (unknown ones are text), at most 20 options; fields without an id or with a repeated one
/// are left out.
pub fn normalize_fields(fields: &Value) -> Vec<Value> {
    let mut seen = std::collections::HashSet::new();
    fields
        .as_array()
        .map_or(&[][..], Vec::as_slice)
        .iter()
        .filter_map(|f| {
            let f = f.as_object()?;
            let id = f
                .get("id")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())?;
            let id = truncate(id, limits::KEY);
            if !seen.insert(id.clone()) {
                return None;
            }
            let kind = f
                .get("type")
                .and_then(Value::as_str)
                .filter(|t| FIELD_TYPES.contains(t))
                .unwrap_or("text");
            let label = f.get("label").and_then(Value::as_str).unwrap_or(&id);
            let mut out =
                json!({ "id": id, "label": truncate(label, limits::TITLE), "type": kind });
            if f.get("required") == Some(&Value::Bool(true)) {
                out["required"] = json!(true);
            }
            if kind == "select" {
                let options: Vec<Value> = f
                    .get("options")
                    .and_then(Value::as_array)
                    .map_or(&[][..], Vec::as_slice)
                    .iter()
                    .filter_map(|o| match o {
                        Value::String(s) => Some(truncate(s, limits::TITLE)),
                        Value::Number(n) => Some(n.to_string()),
                        _ => None,
                    })
                    .take(limits::OPTIONS)
                    .map(Value::String)
                    .collect();
                out["options"] = Value::Array(options);
            }
            if kind == "number" {
                for bound in ["min", "max", "step"] {
                    if let Some(n) = f
                        .get(bound)
                        .and_then(Value::as_f64)
                        .filter(|n| n.is_finite())
                    {
                        out[bound] = json!(n);
                    }
                }
            }
            for text in ["placeholder", "description"] {
                if let Some(s) = f.get(text).and_then(Value::as_str) {
                    out[text] = json!(truncate(s, limits::TITLE));
                }
            }
            if let Some(initial) = f.get("initial").filter(|v| !v.is_null()) {
                let initial = match initial {
                    Value::String(s) => truncate(s, limits::MESSAGE),
                    other => other.to_string(),
                };
                out["initial"] = json!(initial);
            }
            Some(out)
        })
        .take(limits::FORM_FIELDS)
        .collect()
}

/// Checks a form answer against the (normalised) fields. The values the extension gets:
/// every answered field as a string, and the initial value of a field left out (when that
/// value is itself valid). Values for fields the form does not have are dropped. Errors are
/// keyed by field id.
pub fn validate_form(
    fields: &[Value],
    values: &Map<String, Value>,
) -> Result<Map<String, Value>, Map<String, Value>> {
    let mut out = Map::new();
    let mut errors = Map::new();
    for field in fields {
        let id = field["id"].as_str().unwrap_or_default();
        let kind = field["type"].as_str().unwrap_or("text");
        let given = match values.get(id) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(Value::Bool(b)) if kind == "checkbox" => Some(b.to_string()),
            Some(Value::Number(n)) if kind == "number" => Some(n.to_string()),
            Some(_) => {
                errors.insert(id.into(), json!("must be a string"));
                continue;
            }
        };
        let (value, defaulted) = match given {
            Some(v) => (v, false),
            None => match field["initial"].as_str() {
                Some(initial) => (initial.to_owned(), true),
                None => (String::new(), true),
            },
        };
        let blank = value.trim().is_empty();
        if blank {
            if field["required"] == json!(true) {
                errors.insert(id.into(), json!("is required"));
            } else if !defaulted {
                out.insert(id.into(), json!(value));
            }
            continue;
        }
        let problem = match kind {
            "number" => match value.trim().parse::<f64>() {
                Ok(n) if n.is_finite() => {
                    if let Some(min) = field["min"].as_f64().filter(|min| n < *min) {
                        Some(format!("must be at least {min}"))
                    } else {
                        field["max"]
                            .as_f64()
                            .filter(|max| n > *max)
                            .map(|max| format!("must be at most {max}"))
                    }
                }
                _ => Some("must be a number".to_owned()),
            },
            "select" => {
                let options = field["options"].as_array().map_or(&[][..], Vec::as_slice);
                (!options.iter().any(|o| o.as_str() == Some(&value)))
                    .then(|| "must be one of the options".to_owned())
            }
            "checkbox" => (value != "true" && value != "false")
                .then(|| "must be \"true\" or \"false\"".to_owned()),
            _ => (value.chars().count() > limits::MESSAGE)
                .then(|| format!("must be at most {} characters", limits::MESSAGE)),
        };
        match problem {
            // A default that does not fit (an initial value outside the options) is left out
            // rather than blamed on the user.
            Some(_) if defaulted => {
                if field["required"] == json!(true) {
                    errors.insert(id.into(), json!("is required"));
                }
            }
            Some(problem) => {
                errors.insert(id.into(), json!(problem));
            }
            None => {
                out.insert(id.into(), json!(value));
            }
        }
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields() -> Vec<Value> {
        normalize_fields(&json!([
            { "id": "name", "label": "Name", "type": "text", "required": true },
            { "id": "task", "label": "Task", "type": "textarea" },
            { "id": "age", "label": "Age", "type": "number", "min": 0, "max": 120 },
            { "id": "priority", "label": "Priority", "type": "select", "options": ["low", "high"], "initial": "normal" },
            { "id": "dryRun", "label": "Dry run", "type": "checkbox", "initial": "true" },
        ]))
    }

    fn values(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_valid_answer_passes_with_defaults_filled() {
        let out = validate_form(
            &fields(),
            &values(json!({ "name": "ada", "age": "36", "priority": "high" })),
        )
        .unwrap();
        assert_eq!(
            Value::Object(out),
            json!({ "name": "ada", "age": "36", "priority": "high", "dryRun": "true" })
        );
    }

    #[test]
    fn required_fields_are_required() {
        for name in [json!({}), json!({ "name": "" }), json!({ "name": "   " })] {
            let errors = validate_form(&fields(), &values(name)).unwrap_err();
            assert_eq!(errors["name"], "is required");
        }
    }

    #[test]
    fn numbers_are_checked_against_their_bounds() {
        let check =
            |age: &str| validate_form(&fields(), &values(json!({ "name": "a", "age": age })));
        assert_eq!(check("-1").unwrap_err()["age"], "must be at least 0");
        assert_eq!(check("121").unwrap_err()["age"], "must be at most 120");
        assert_eq!(check("abc").unwrap_err()["age"], "must be a number");
        assert_eq!(check("NaN").unwrap_err()["age"], "must be a number");
        assert_eq!(check("0").unwrap()["age"], "0");
        assert_eq!(check("120").unwrap()["age"], "120");
    }

    #[test]
    fn selects_take_only_their_options() {
        let errors = validate_form(
            &fields(),
            &values(json!({ "name": "a", "priority": "urgent" })),
        )
        .unwrap_err();
        assert_eq!(errors["priority"], "must be one of the options");
        // The extension's own initial value outside the options is not the user's fault.
        let out = validate_form(&fields(), &values(json!({ "name": "a" }))).unwrap();
        assert!(!out.contains_key("priority"));
    }

    #[test]
    fn checkboxes_are_true_or_false() {
        let errors =
            validate_form(&fields(), &values(json!({ "name": "a", "dryRun": "yes" }))).unwrap_err();
        assert_eq!(errors["dryRun"], "must be \"true\" or \"false\"");
        let out =
            validate_form(&fields(), &values(json!({ "name": "a", "dryRun": false }))).unwrap();
        assert_eq!(out["dryRun"], "false");
    }

    #[test]
    fn several_errors_are_reported_together_and_unknown_values_dropped() {
        let errors = validate_form(
            &fields(),
            &values(json!({ "age": "x", "priority": "none", "dryRun": "1", "extra": "z" })),
        )
        .unwrap_err();
        let mut keys: Vec<&String> = errors.keys().collect();
        keys.sort();
        assert_eq!(keys, ["age", "dryRun", "name", "priority"]);
        let out = validate_form(&fields(), &values(json!({ "name": "a", "extra": "z" }))).unwrap();
        assert!(!out.contains_key("extra"));
        let errors = validate_form(&fields(), &values(json!({ "name": ["a"] }))).unwrap_err();
        assert_eq!(errors["name"], "must be a string");
    }

    #[test]
    fn fields_and_options_are_capped() {
        let many: Vec<Value> = (0..30)
            .map(|i| json!({ "id": format!("f{i}"), "type": "select", "options": (0..50).collect::<Vec<_>>() }))
            .collect();
        let fields = normalize_fields(&json!(many));
        assert_eq!(fields.len(), 12);
        assert_eq!(fields[0]["options"].as_array().unwrap().len(), 20);
        let odd = normalize_fields(
            &json!([{ "id": "a", "type": "colour" }, { "id": "a" }, { "label": "no id" }]),
        );
        assert_eq!(
            odd,
            vec![json!({ "id": "a", "label": "a", "type": "text" })]
        );
    }
}
