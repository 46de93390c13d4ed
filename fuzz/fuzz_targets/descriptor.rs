//! The `pichamber.ui` descriptor validator and the form-answer validator on arbitrary JSON: no
//! panic, and what comes out holds the seed's limits whatever came in — a known component
//! (or the generic fallback), at most 8 actions each naming a valid command, a title within
//! 256 characters, at most 200 table rows, and markdown HTML without script.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pichamber_gui::card::{COMPONENTS, Descriptor, normalize_descriptor};
use pichamber_gui::form::{normalize_fields, validate_form};
use pichamber_gui::{is_command_name, limits};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Ok(value) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if let Descriptor::Card(card) = normalize_descriptor(&value) {
        let component = card["component"].as_str().unwrap_or_default();
        assert!(COMPONENTS.contains(&component) || component == "generic", "{component}");
        let actions = card["actions"].as_array().map_or(0, Vec::len);
        assert!(actions <= limits::ACTIONS);
        for action in card["actions"].as_array().into_iter().flatten() {
            assert!(is_command_name(action["command"].as_str().unwrap_or_default()));
        }
        if let Some(title) = card["title"].as_str() {
            // The cut adds a marker after the limit at most.
            assert!(title.chars().count() <= limits::TITLE + 64, "title of {}", title.len());
        }
        if component == "table" {
            assert!(card["props"]["rows"].as_array().map_or(0, Vec::len) <= limits::TABLE_ROWS);
        }
        if let Some(html) = card["html"].as_str() {
            let lower = html.to_ascii_lowercase();
            // Text may say anything (it is escaped); no tag may run script: no <script>, no
            // on* attribute, no javascript: URL in an attribute.
            assert!(!lower.contains("<script"), "{html}");
            for (name, value) in attributes(&lower) {
                assert!(!name.starts_with("on"), "{html}");
                let scheme = value.trim_start_matches(|c: char| c.is_ascii_whitespace());
                assert!(!scheme.starts_with("javascript:"), "{html}");
            }
        }
    }
    // The same value as a form: fields, then itself as the answers.
    let fields = normalize_fields(&value);
    assert!(fields.len() <= limits::FORM_FIELDS);
    if let Some(answers) = value.as_object() {
        let _ = validate_form(&fields, answers);
    }
});

/// Every attribute (name, value) of every tag in serialised HTML, as the sanitiser writes it:
/// `<tag name="value" ...>`, values in double quotes (a quote inside is `&quot;`). Text between
/// tags is escaped (`&lt;`), so every `<` opens a tag.
fn attributes(html: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for tag in html.split('<').skip(1) {
        let mut rest = tag.trim_start_matches('/');
        // The tag name.
        rest = rest.trim_start_matches(|c: char| !c.is_ascii_whitespace() && c != '>');
        loop {
            rest = rest.trim_start();
            if rest.is_empty() || rest.starts_with('>') || rest.starts_with('/') {
                break;
            }
            let end = rest
                .find(|c: char| c == '=' || c == '>' || c.is_ascii_whitespace())
                .unwrap_or(rest.len());
            let name = rest[..end].to_owned();
            rest = &rest[end..];
            let mut value = String::new();
            if let Some(after) = rest.strip_prefix("=\"") {
                let close = after.find('"').unwrap_or(after.len());
                value = after[..close].to_owned();
                rest = after.get(close + 1..).unwrap_or("");
            }
            found.push((name, value));
        }
    }
    found
}
