//! Extension text on a terminal. What an extension writes (a dialog's title and options, a
//! notice, an error, a specifier a build names) reaches the operator's terminal, where an
//! escape sequence would act: OSC 52 writes the clipboard, OSC 0 the window title, CSI moves
//! the cursor or clears the screen, a bidirectional override makes a line read as something
//! else. Every command prints such text through [`escape`], the one sanitiser.

use std::fmt::Write;

/// `text` with every C0 and C1 control but newline and tab (ESC among them, so no OSC or CSI
/// sequence can start) and every bidirectional override, embedding and isolate written as a
/// visible escape (`\u{1b}`, `\u{202e}`).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(c),
            c if c.is_control() || is_bidi_control(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// The characters that reorder the text around them (Unicode's explicit directional
/// formatting characters) or mark direction invisibly.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_direction_overrides_are_made_visible() {
        assert_eq!(
            escape("\u{1b}]52;c;aGk=\u{7}title\u{1b}[2J"),
            "\\u{1b}]52;c;aGk=\\u{7}title\\u{1b}[2J"
        );
        // C1 controls: CSI and OSC as single code points.
        assert_eq!(escape("\u{9b}31m\u{9d}0;x"), "\\u{9b}31m\\u{9d}0;x");
        assert_eq!(escape("safe\u{202e}txt.exe"), "safe\\u{202e}txt.exe");
        assert_eq!(escape("\u{2066}a\u{2069}"), "\\u{2066}a\\u{2069}");
        assert_eq!(escape("a\tb\nc — ü 日本"), "a\tb\nc — ü 日本");
        assert_eq!(escape("\r\u{0}\u{7f}"), "\\u{d}\\u{0}\\u{7f}");
    }
}
