//! Positions in runtime errors point at the extension's own sources. The bundler re-prints
//! every module (types stripped, imports rewritten), so QuickJS reports positions in that
//! output; each module carries the source map oxc produced, and error texts are remapped
//! before anyone sees them. Maps are parsed only when an error needs them.

use std::collections::HashMap;

/// Source maps of one extension's modules, by canonical module id.
#[derive(Debug, Default, Clone)]
pub struct SourceMaps {
    maps: HashMap<String, String>,
}

impl SourceMaps {
    pub fn new(maps: impl IntoIterator<Item = (String, String)>) -> Self {
        Self {
            maps: maps.into_iter().collect(),
        }
    }

    /// Rewrites every `/ext/<module>:<line>:<col>` in `text` to the original position.
    pub fn remap(&self, text: &str) -> String {
        if self.maps.is_empty() || !text.contains("/ext/") {
            return text.to_owned();
        }
        let mut parsed: HashMap<&str, Option<oxc_sourcemap::SourceMap<'_>>> = HashMap::new();
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("/ext/") {
            out.push_str(&rest[..start]);
            let candidate = &rest[start..];
            match parse_location(candidate) {
                Some((id, line, column, len)) if self.maps.contains_key(id) => {
                    let map = parsed.entry(id).or_insert_with(|| {
                        oxc_sourcemap::SourceMap::from_json_string(&self.maps[id]).ok()
                    });
                    match map.as_ref().and_then(|m| original(m, line, column)) {
                        Some((l, c)) => out.push_str(&format!("{id}:{l}:{c}")),
                        None => out.push_str(&candidate[..len]),
                    }
                    rest = &candidate[len..];
                }
                _ => {
                    out.push_str("/ext/");
                    rest = &candidate[5..];
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// `/ext/a/b.ts:12:5…` → ("/ext/a/b.ts", 12, 5, length of the matched text).
fn parse_location(text: &str) -> Option<(&str, u32, u32, usize)> {
    let end = text
        .find(|c: char| c == ')' || c.is_whitespace() || c == '\'' || c == '"')
        .unwrap_or(text.len());
    let location = &text[..end];
    let (rest, column) = location.rsplit_once(':')?;
    let (id, line) = rest.rsplit_once(':')?;
    Some((id, line.parse().ok()?, column.parse().ok()?, end))
}

/// 1-based line and column in the generated code → 1-based position in the original source.
fn original(map: &oxc_sourcemap::SourceMap<'_>, line: u32, column: u32) -> Option<(u32, u32)> {
    let table = map.generate_lookup_table();
    let token = map.lookup_token(&table, line.checked_sub(1)?, column.saturating_sub(1))?;
    Some((token.get_src_line() + 1, token.get_src_col() + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leaves_text_without_locations_alone() {
        let maps = SourceMaps::new([("/ext/a.ts".to_owned(), "{}".to_owned())]);
        assert_eq!(maps.remap("plain error"), "plain error");
        assert_eq!(
            maps.remap("at f (/ext/other.ts:3:4)"),
            "at f (/ext/other.ts:3:4)"
        );
    }

    #[test]
    fn parses_locations() {
        assert_eq!(
            parse_location("/ext/a/b.ts:12:5)\n"),
            Some(("/ext/a/b.ts", 12, 5, 16))
        );
        assert_eq!(parse_location("/ext/a.ts"), None);
    }
}
