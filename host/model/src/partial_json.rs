//! Tool-call arguments arrive as JSON text in pieces; pi shows the arguments parsed so far
//! (`parseStreamingJson`): complete JSON as is, JSON with raw control characters or bad
//! escapes in strings repaired, and a truncated document closed at its end (a partial
//! string, number or literal kept, a half-written key dropped). Anything else is `{}`.

use serde_json::{Map, Value};

/// pi-ai's `parseStreamingJson`.
pub(crate) fn parse_streaming_json(text: &str) -> Value {
    if text.trim().is_empty() {
        return Value::Object(Map::new());
    }
    if let Ok(v) = serde_json::from_str(text) {
        return v;
    }
    let repaired = repair_json(text);
    if repaired != text
        && let Ok(v) = serde_json::from_str(&repaired)
    {
        return v;
    }
    for candidate in [text, repaired.as_str()] {
        if let Some(v) = parse_partial(candidate) {
            return if v.is_null() {
                Value::Object(Map::new())
            } else {
                v
            };
        }
    }
    Value::Object(Map::new())
}

/// Escapes raw control characters inside strings and doubles backslashes that do not start
/// a valid escape (pi-ai's `repairJson`).
pub(crate) fn repair_json(json: &str) -> String {
    let chars: Vec<char> = json.chars().collect();
    let mut out = String::with_capacity(json.len());
    let mut in_string = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if !in_string {
            out.push(c);
            in_string = c == '"';
            i += 1;
            continue;
        }
        match c {
            '"' => {
                out.push(c);
                in_string = false;
            }
            '\\' => match chars.get(i + 1) {
                None => out.push_str("\\\\"),
                Some('u')
                    if chars.len() >= i + 6
                        && chars[i + 2..i + 6].iter().all(|h| h.is_ascii_hexdigit()) =>
                {
                    out.extend(&chars[i..i + 6]);
                    i += 5;
                }
                Some(&n) if matches!(n, '"' | '\\' | '/' | 'b' | 'f' | 'n' | 'r' | 't' | 'u') => {
                    out.push('\\');
                    out.push(n);
                    i += 1;
                }
                Some(_) => out.push_str("\\\\"),
            },
            c if (c as u32) < 0x20 => match c {
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                _ => out.push_str(&format!("\\u{:04x}", c as u32)),
            },
            c => out.push(c),
        }
        i += 1;
    }
    out
}

/// Parses a possibly truncated JSON document; `None` when it is malformed.
fn parse_partial(text: &str) -> Option<Value> {
    let mut p = Partial {
        s: text.chars().collect(),
        i: 0,
    };
    match p.value() {
        Ok(Some(v)) => Some(v),
        Ok(None) => Some(Value::Null),
        Err(()) => None,
    }
}

struct Partial {
    s: Vec<char>,
    i: usize,
}

/// `Ok(None)`: the text ended before anything usable; `Err`: malformed.
type Step = Result<Option<Value>, ()>;

impl Partial {
    fn eof(&self) -> bool {
        self.i >= self.s.len()
    }

    fn ws(&mut self) {
        while !self.eof() && self.s[self.i].is_whitespace() {
            self.i += 1;
        }
    }

    fn value(&mut self) -> Step {
        self.ws();
        let Some(&c) = self.s.get(self.i) else {
            return Ok(None);
        };
        match c {
            '{' => self.object(),
            '[' => self.array(),
            '"' => Ok(self.string()?.map(|(s, _)| Value::String(s))),
            't' => self.literal("true", Value::Bool(true)),
            'f' => self.literal("false", Value::Bool(false)),
            'n' => self.literal("null", Value::Null),
            '-' | '0'..='9' => self.number(),
            _ => Err(()),
        }
    }

    fn object(&mut self) -> Step {
        self.i += 1;
        let mut map = Map::new();
        loop {
            self.ws();
            match self.s.get(self.i) {
                None => return Ok(Some(Value::Object(map))),
                Some('}') => {
                    self.i += 1;
                    return Ok(Some(Value::Object(map)));
                }
                Some('"') => {}
                Some(_) => return Err(()),
            }
            let Some((key, true)) = self.string()? else {
                return Ok(Some(Value::Object(map)));
            };
            self.ws();
            match self.s.get(self.i) {
                None => return Ok(Some(Value::Object(map))),
                Some(':') => self.i += 1,
                Some(_) => return Err(()),
            }
            match self.value()? {
                None => return Ok(Some(Value::Object(map))),
                Some(v) => {
                    map.insert(key, v);
                }
            }
            self.ws();
            match self.s.get(self.i) {
                None => return Ok(Some(Value::Object(map))),
                Some(',') => self.i += 1,
                Some('}') => {
                    self.i += 1;
                    return Ok(Some(Value::Object(map)));
                }
                Some(_) => return Err(()),
            }
        }
    }

    fn array(&mut self) -> Step {
        self.i += 1;
        let mut items = Vec::new();
        loop {
            self.ws();
            match self.s.get(self.i) {
                None => return Ok(Some(Value::Array(items))),
                Some(']') => {
                    self.i += 1;
                    return Ok(Some(Value::Array(items)));
                }
                Some(_) => {}
            }
            match self.value()? {
                None => return Ok(Some(Value::Array(items))),
                Some(v) => items.push(v),
            }
            self.ws();
            match self.s.get(self.i) {
                None => return Ok(Some(Value::Array(items))),
                Some(',') => self.i += 1,
                Some(']') => {
                    self.i += 1;
                    return Ok(Some(Value::Array(items)));
                }
                Some(_) => return Err(()),
            }
        }
    }

    /// A string and whether it was closed; a truncated escape at the end is dropped.
    fn string(&mut self) -> Result<Option<(String, bool)>, ()> {
        self.i += 1;
        let mut out = String::new();
        while let Some(&c) = self.s.get(self.i) {
            self.i += 1;
            match c {
                '"' => return Ok(Some((out, true))),
                '\\' => {
                    let Some(&e) = self.s.get(self.i) else {
                        return Ok(Some((out, false)));
                    };
                    self.i += 1;
                    match e {
                        '"' | '\\' | '/' => out.push(e),
                        'b' => out.push('\u{8}'),
                        'f' => out.push('\u{c}'),
                        'n' => out.push('\n'),
                        'r' => out.push('\r'),
                        't' => out.push('\t'),
                        'u' => match self.hex4() {
                            None => {
                                // A truncated escape: the document ends here.
                                self.i = self.s.len();
                                return Ok(Some((out, false)));
                            }
                            Some(hi) if (0xD800..0xDC00).contains(&hi) => {
                                let save = self.i;
                                let lo = if self.s.get(self.i) == Some(&'\\')
                                    && self.s.get(self.i + 1) == Some(&'u')
                                {
                                    self.i += 2;
                                    self.hex4()
                                } else {
                                    None
                                };
                                match lo {
                                    Some(lo) if (0xDC00..0xE000).contains(&lo) => {
                                        let cp = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                                        out.extend(char::from_u32(cp));
                                    }
                                    _ if self.truncated_escape(save) => {
                                        self.i = self.s.len();
                                        return Ok(Some((out, false)));
                                    }
                                    _ => {
                                        self.i = save;
                                        out.push('\u{FFFD}');
                                    }
                                }
                            }
                            Some(cp) => out.push(char::from_u32(cp).unwrap_or('\u{FFFD}')),
                        },
                        _ => return Err(()),
                    }
                }
                c => out.push(c),
            }
        }
        Ok(Some((out, false)))
    }

    /// Whether the text from `at` to the end is the start of a cut-off `\uXXXX` escape.
    fn truncated_escape(&self, at: usize) -> bool {
        let rest = &self.s[at.min(self.s.len())..];
        rest.len() < 6
            && rest.iter().enumerate().all(|(k, c)| match k {
                0 => *c == '\\',
                1 => *c == 'u',
                _ => c.is_ascii_hexdigit(),
            })
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits: String = self.s.get(self.i..self.i + 4)?.iter().collect();
        let v = u32::from_str_radix(&digits, 16).ok()?;
        self.i += 4;
        Some(v)
    }

    fn literal(&mut self, word: &str, value: Value) -> Step {
        for expected in word.chars() {
            match self.s.get(self.i) {
                None => return Ok(Some(value)),
                Some(&c) if c == expected => self.i += 1,
                Some(_) => return Err(()),
            }
        }
        Ok(Some(value))
    }

    fn number(&mut self) -> Step {
        let start = self.i;
        while let Some(&c) = self.s.get(self.i) {
            if c.is_ascii_digit() || matches!(c, '-' | '+' | '.' | 'e' | 'E') {
                self.i += 1;
            } else {
                break;
            }
        }
        let text: String = self.s[start..self.i].iter().collect();
        if let Ok(v @ Value::Number(_)) = serde_json::from_str::<Value>(&text) {
            return Ok(Some(v));
        }
        if !self.eof() {
            return Err(());
        }
        let trimmed = text.trim_end_matches(['-', '+', '.', 'e', 'E']);
        match serde_json::from_str::<Value>(trimmed) {
            Ok(v @ Value::Number(_)) => Ok(Some(v)),
            _ => Ok(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn complete_and_empty() {
        assert_eq!(parse_streaming_json(""), json!({}));
        assert_eq!(parse_streaming_json("  "), json!({}));
        assert_eq!(parse_streaming_json(r#"{"a":[1,2]}"#), json!({"a": [1, 2]}));
    }

    #[test]
    fn truncated_documents_close_like_pi() {
        let cases = [
            (r#"{"a"#, json!({})),
            (r#"{"a""#, json!({})),
            (r#"{"a":"#, json!({})),
            (r#"{"a": "fo"#, json!({"a": "fo"})),
            (r#"{"a": 1"#, json!({"a": 1})),
            (r#"{"a": [1, 2"#, json!({"a": [1, 2]})),
            (r#"{"a": tr"#, json!({"a": true})),
            (r#"{"a": n"#, json!({"a": null})),
            (r#"{"a": {"b": "x\"#, json!({"a": {"b": "x"}})),
            (r#"{"a": "x\u00"#, json!({"a": "x"})),
            (r#"{"a": "\ud83d\ude"#, json!({"a": ""})),
            (r#"{"a": "\ud83d\ude00"}"#, json!({"a": "\u{1F600}"})),
            (r#"{"a": -"#, json!({})),
            ("[", json!([])),
            (r#"{"a": "x"}, "#, json!({"a": "x"})),
            (
                r#"{"path": "src/main.rs", "limit": 2"#,
                json!({"path": "src/main.rs", "limit": 2}),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(parse_streaming_json(text), want, "{text}");
        }
    }

    #[test]
    fn repairs_control_characters_and_bad_escapes() {
        assert_eq!(
            parse_streaming_json("{\"a\": \"line1\nline2\"}"),
            json!({"a": "line1\nline2"})
        );
        assert_eq!(
            parse_streaming_json(r#"{"a": "C:\dir"}"#),
            json!({"a": "C:\\dir"})
        );
    }

    #[test]
    fn malformed_is_empty_object() {
        assert_eq!(parse_streaming_json("{]"), json!({}));
        assert_eq!(parse_streaming_json("nope"), json!({}));
    }
}
