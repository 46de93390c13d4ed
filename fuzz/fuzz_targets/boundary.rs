//! The WIT-boundary decoders on arbitrary guest input: a name check, a JSON text, a cut.
//! None may panic; a name that passes holds no whitespace, control or invisible character; a
//! cut text stays within its bound plus the note.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pichamber_runtime::boundary::{check_name, parse_json, truncate, MAX_NAME_BYTES};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if check_name("tool", &text).is_ok() {
        assert!(!text.is_empty() && text.len() <= MAX_NAME_BYTES);
        assert!(!text.chars().any(|c| c.is_whitespace() || c.is_control()));
    }
    let _ = parse_json("fuzz", &text);
    let max = data.first().copied().unwrap_or(0) as usize;
    let cut = truncate(&text, max);
    if text.len() <= max {
        assert_eq!(cut, text);
    } else {
        assert!(cut.starts_with(&text[..cut.find('…').unwrap_or(0)]));
    }
});
