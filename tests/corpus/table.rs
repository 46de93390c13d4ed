//! Markdown-table helpers shared by the generated compatibility documents
//! (docs/COMPATIBILITY.md from tests/corpus.rs, docs/THIRD_PARTY.md from tests/thirdparty.rs).

/// `text` cut to `max` characters.
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        format!("{}…", text.chars().take(max).collect::<String>())
    } else {
        text.to_owned()
    }
}

/// Markdown table cell text: one line, no pipes.
pub fn cell(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line.replace('|', "\\|")
}

pub fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}
