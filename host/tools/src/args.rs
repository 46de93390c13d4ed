//! Reading a tool's arguments. They arrive validated against the tool's schema, but a wrong
//! type must still end in a clear error rather than a panic. `null` counts as absent.

use serde_json::Value;

/// A tool's arguments with the tool's name for messages.
pub(crate) struct Args<'a> {
    tool: &'a str,
    value: &'a Value,
}

impl<'a> Args<'a> {
    pub fn new(tool: &'a str, value: &'a Value) -> Result<Self, String> {
        if !value.is_object() {
            return Err(format!(
                "Invalid arguments for tool \"{tool}\": expected an object"
            ));
        }
        Ok(Args { tool, value })
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.value.get(key).filter(|v| !v.is_null())
    }

    fn wrong(&self, key: &str, expected: &str) -> String {
        format!(
            "Invalid arguments for tool \"{}\": {key} must be {expected}",
            self.tool
        )
    }

    pub fn string(&self, key: &str) -> Result<String, String> {
        self.opt_string(key)?
            .ok_or_else(|| self.wrong(key, "a string (required)"))
    }

    pub fn opt_string(&self, key: &str) -> Result<Option<String>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(self.wrong(key, "a string")),
        }
    }

    pub fn opt_number(&self, key: &str) -> Result<Option<f64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Number(n)) => Ok(n.as_f64()),
            Some(_) => Err(self.wrong(key, "a number")),
        }
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.wrong(key, "a boolean")),
        }
    }

    pub fn raw(&self, key: &str) -> Option<&'a Value> {
        self.get(key)
    }
}

/// A number as JavaScript prints it in a template string (`${n}`), for the finite values a
/// tool argument can hold: integers without a fraction, others in shortest form.
pub(crate) fn js_number(n: f64) -> String {
    if n.is_nan() {
        "NaN".into()
    } else if n.is_infinite() {
        if n > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else if n == n.trunc() && n.abs() < 1e21 {
        format!("{}", n as i128)
    } else {
        format!("{n}")
    }
}

/// JavaScript's truthiness of an optional number (`offset ? ... : ...`).
pub(crate) fn js_truthy(n: Option<f64>) -> bool {
    matches!(n, Some(v) if v != 0.0 && !v.is_nan())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_types_are_errors_not_panics() {
        let v = json!({"path": 3, "limit": "x", "flag": "y"});
        let a = Args::new("read", &v).unwrap();
        assert!(
            a.string("path")
                .unwrap_err()
                .contains("path must be a string")
        );
        assert!(
            a.opt_number("limit")
                .unwrap_err()
                .contains("limit must be a number")
        );
        assert!(
            a.opt_bool("flag")
                .unwrap_err()
                .contains("flag must be a boolean")
        );
        assert!(a.string("missing").unwrap_err().contains("required"));
        assert!(Args::new("read", &json!([1])).is_err());
    }

    #[test]
    fn numbers_print_like_javascript() {
        assert_eq!(js_number(3.0), "3");
        assert_eq!(js_number(-0.0), "0");
        assert_eq!(js_number(1.5), "1.5");
        assert!(js_truthy(Some(2.0)));
        assert!(!js_truthy(Some(0.0)));
        assert!(!js_truthy(None));
    }
}
