//! The first checks on what a guest hands the host: names, JSON texts and their sizes. Every
//! value crossing the WIT boundary goes through these before anything else looks at it; they
//! are public so the fuzz targets (fuzz/) can reach them.

use serde_json::Value;

/// Largest JSON value accepted from a guest in one call.
pub const MAX_JSON_BYTES: usize = 4 << 20;
/// Longest name (tool, command, flag, entry type, status key).
pub const MAX_NAME_BYTES: usize = 128;

/// A name an extension registers: 1..=128 bytes, no whitespace, control or invisible
/// characters (a name must look like what it is).
pub fn check_name(kind: &str, name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "{kind} name must be 1..={MAX_NAME_BYTES} bytes, got {}",
            name.len()
        ));
    }
    if name
        .chars()
        .any(|c| c.is_control() || c.is_whitespace() || is_invisible(c))
    {
        return Err(format!(
            "{kind} name {name:?} must not contain spaces, control or invisible characters"
        ));
    }
    Ok(())
}

/// Format characters that change how a name displays without showing themselves: zero-width
/// spaces and joiners, bidirectional overrides and isolates, the byte-order mark. A name with
/// one could pass for another's.
fn is_invisible(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}'
        | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{E0000}'..='\u{E0FFF}')
}

/// pi 1.6.0's tool exposures: how the model reaches a tool (`ToolExposure`).
pub const TOOL_EXPOSURES: [&str; 5] = ["direct", "model-only", "codemode", "deferred", "hidden"];

/// A JSON text from the guest, refused whole when larger than [`MAX_JSON_BYTES`].
pub fn parse_json(what: &str, text: &str) -> Result<Value, String> {
    if text.len() > MAX_JSON_BYTES {
        return Err(format!(
            "{what} is {} bytes; the limit is {MAX_JSON_BYTES}",
            text.len()
        ));
    }
    serde_json::from_str(text).map_err(|e| format!("{what} is not valid JSON: {e}"))
}

/// `text` cut to `max` bytes (on a character boundary), saying how much was cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [truncated {} bytes]", &text[..end], text.len() - end)
}
