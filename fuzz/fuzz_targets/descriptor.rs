//! The `pichamber.ui` descriptor validator and the form-answer validator on arbitrary JSON: no
//! panic, and what comes out holds the seed's limits whatever came in — a known component
//! (or the generic fallback), at most 8 actions each naming a valid command, a title within
//! 256 characters, at most 200 table rows, and markdown HTML without script.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pichamber::gui::card::{COMPONENTS, Descriptor, normalize_descriptor};
use pichamber::gui::form::{normalize_fields, validate_form};
use pichamber::gui::{is_command_name, limits};
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
            let in_tags = lower.split('<').skip(1).map(|t| t.split('>').next().unwrap_or(""));
            for tag in in_tags {
                for attribute in tag.split_whitespace().skip(1) {
                    assert!(!attribute.starts_with("on"), "{html}");
                    let value = attribute.split_once('=').map_or("", |(_, v)| v);
                    // The sanitiser writes values in double quotes; what is inside is the URL.
                    let value = value.strip_prefix('"').unwrap_or(value);
                    let scheme = value.trim_start_matches(|c: char| c.is_ascii_whitespace());
                    assert!(!scheme.starts_with("javascript:"), "{html}");
                }
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
