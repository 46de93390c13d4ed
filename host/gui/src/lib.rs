//! PiChamber's GUI protocol, independent of any transport (the seed "Pi extensions in
//! PiChamber"): `pichamber.ui` descriptors normalised into cards ([`card`]), form answers
//! validated ([`form`]), and the live ephemeral state of one session folded from its events
//! ([`state`]): status, widgets, title, pending dialogs, live panels and app surfaces.
//!
//! It reads session events and knows nothing of HTTP; the server carries what it produces.

pub mod card;
pub mod form;
pub mod markdown;
pub mod state;

pub use card::{Card, normalize_descriptor};
pub use form::validate_form;
pub use state::{GuiEvent, UiState};

/// The protocol marker of `pichamber.ui` / `pichamber.app` payloads.
pub const PROTOCOL: &str = "pichamber-extension-ui";
/// The protocol version this host understands; others degrade to a generic card.
pub const VERSION: u64 = 1;
/// The custom type of declarative cards.
pub const UI_TYPE: &str = "pichamber.ui";
/// The custom type of sandboxed app surfaces.
pub const APP_TYPE: &str = "pichamber.app";

/// The seed's limits.
pub mod limits {
    /// Ids and keys (card id, app id, status and widget keys).
    pub const KEY: usize = 128;
    /// Card titles, labels, dialog titles.
    pub const TITLE: usize = 256;
    pub const BADGE_ITEMS: usize = 24;
    /// Table rows (and kv rows, list items).
    pub const TABLE_ROWS: usize = 200;
    /// Table columns.
    pub const TABLE_COLUMNS: usize = 32;
    /// Any long text (a markdown body, code, a cell, a message).
    pub const MESSAGE: usize = 50_000;
    pub const ACTIONS: usize = 8;
    pub const FORM_FIELDS: usize = 12;
    pub const OPTIONS: usize = 20;
    /// App-surface HTML, in bytes.
    pub const APP_HTML: usize = 200 * 1024;
    pub const APPS_PER_EXTENSION: usize = 8;
    pub const APPS_PER_SESSION: usize = 32;
}

/// Whether `name` is a command name an action or an app surface may invoke:
/// `[A-Za-z0-9][A-Za-z0-9:_-]{0,127}` (no path separators, no spaces).
pub fn is_command_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 128
        && bytes[0].is_ascii_alphanumeric()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b':' | b'_' | b'-'))
}

/// `text` cut to at most `max` characters (on a character boundary).
pub fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => text[..at].to_owned(),
        None => text.to_owned(),
    }
}

/// A random token for one app mount (128 bits from the OS's random source).
pub fn random_token() -> String {
    format!(
        "{}{}",
        uuid::Uuid::new_v4().simple(),
        uuid::Uuid::new_v4().simple()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_names_follow_the_seed_pattern() {
        for ok in ["a", "board-next", "x:y_z-1", "A9", &"a".repeat(128)] {
            assert!(is_command_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            ":a",
            "a/b",
            "../x",
            "a b",
            "a.b",
            "é",
            &"a".repeat(129),
        ] {
            assert!(!is_command_name(bad), "{bad}");
        }
    }

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate("héllo", 2), "hé");
        assert_eq!(truncate("abc", 5), "abc");
        assert_eq!(truncate("", 0), "");
    }

    #[test]
    fn tokens_are_long_and_distinct() {
        let (a, b) = (random_token(), random_token());
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
    }
}
