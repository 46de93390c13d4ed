//! pi's output truncation (core/tools/truncate.js): a line limit and a byte limit, whichever
//! is hit first. The result, serialised with [`Truncation::to_json`], is the `truncation`
//! object pi puts in a tool result's `details`, so its field names and values are contract.

use serde_json::{Value, json};

/// Lines kept by default.
pub const DEFAULT_MAX_LINES: u64 = 2000;
/// Bytes (UTF-8) kept by default: 50 KB.
pub const DEFAULT_MAX_BYTES: usize = 50 * 1024;
/// Characters (UTF-16 code units, as JavaScript counts) kept of one grep match line.
pub const GREP_MAX_LINE_LENGTH: usize = 500;
/// `Number.MAX_SAFE_INTEGER`: the "no line limit" pi passes for grep, find and ls.
pub const NO_LINE_LIMIT: u64 = 9_007_199_254_740_991;

/// What truncation kept and why (pi's `TruncationResult`).
#[derive(Clone, Debug, PartialEq)]
pub struct Truncation {
    pub content: String,
    pub truncated: bool,
    /// `"lines"` or `"bytes"`; `None` when nothing was cut.
    pub truncated_by: Option<&'static str>,
    pub total_lines: usize,
    pub total_bytes: usize,
    pub output_lines: usize,
    pub output_bytes: usize,
    pub last_line_partial: bool,
    pub first_line_exceeds_limit: bool,
    pub max_lines: u64,
    pub max_bytes: usize,
}

impl Truncation {
    /// pi's JSON for it, keys in pi's order.
    pub fn to_json(&self) -> Value {
        json!({
            "content": self.content,
            "truncated": self.truncated,
            "truncatedBy": self.truncated_by,
            "totalLines": self.total_lines,
            "totalBytes": self.total_bytes,
            "outputLines": self.output_lines,
            "outputBytes": self.output_bytes,
            "lastLinePartial": self.last_line_partial,
            "firstLineExceedsLimit": self.first_line_exceeds_limit,
            "maxLines": self.max_lines,
            "maxBytes": self.max_bytes,
        })
    }

    fn untouched(content: &str, total_lines: usize, max_lines: u64, max_bytes: usize) -> Self {
        Truncation {
            content: content.to_owned(),
            truncated: false,
            truncated_by: None,
            total_lines,
            total_bytes: content.len(),
            output_lines: total_lines,
            output_bytes: content.len(),
            last_line_partial: false,
            first_line_exceeds_limit: false,
            max_lines,
            max_bytes,
        }
    }
}

/// `formatSize`: bytes as B / KB / MB with one decimal, rounding halves up like `toFixed(1)`.
pub fn format_size(bytes: usize) -> String {
    fn tenths(bytes: usize, unit: usize) -> String {
        // bytes * 10 / unit is exact in binary, so JavaScript's toFixed rounds a tie upwards.
        let n = (bytes as u128 * 10 + unit as u128 / 2) / unit as u128;
        format!("{}.{}", n / 10, n % 10)
    }
    if bytes < 1024 {
        format!("{bytes}B")
    } else if bytes < 1024 * 1024 {
        format!("{}KB", tenths(bytes, 1024))
    } else {
        format!("{}MB", tenths(bytes, 1024 * 1024))
    }
}

/// How a text's lines are counted, which pi changed in 1.6.0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LineCount {
    /// pi 0.73.1: `split("\n")`, so the empty text after a final newline is a line too.
    #[default]
    Split,
    /// pi 1.6.0 (`splitLinesForCounting`): a final newline ends the last line, and an empty
    /// text has none.
    Terminated,
}

impl LineCount {
    pub fn of(pi: pichamber_pi::PiVersion) -> Self {
        if pi.is_1_6() {
            LineCount::Terminated
        } else {
            LineCount::Split
        }
    }

    /// The lines of `content`, without their newlines, as this count sees them.
    pub fn lines(self, content: &str) -> Vec<&str> {
        let mut lines: Vec<&str> = content.split('\n').collect();
        // "a\n" splits into ["a", ""], and "" into [""].
        if self == LineCount::Terminated && (content.is_empty() || content.ends_with('\n')) {
            lines.pop();
        }
        lines
    }
}

/// `truncateHead`: keep the first lines that fit; never a partial line.
pub fn truncate_head(
    content: &str,
    max_lines: u64,
    max_bytes: usize,
    count: LineCount,
) -> Truncation {
    let lines = count.lines(content);
    let total_lines = lines.len();
    if total_lines as u64 <= max_lines && content.len() <= max_bytes {
        return Truncation::untouched(content, total_lines, max_lines, max_bytes);
    }
    let mut result = Truncation {
        content: String::new(),
        truncated: true,
        truncated_by: Some("bytes"),
        total_lines,
        total_bytes: content.len(),
        output_lines: 0,
        output_bytes: 0,
        last_line_partial: false,
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    };
    if lines[0].len() > max_bytes {
        result.first_line_exceeds_limit = true;
        return result;
    }
    let mut kept = 0usize;
    let mut bytes = 0usize;
    let mut by = "lines";
    for (i, line) in lines.iter().enumerate() {
        if i as u64 >= max_lines {
            break;
        }
        let cost = line.len() + usize::from(i > 0);
        if bytes + cost > max_bytes {
            by = "bytes";
            break;
        }
        kept += 1;
        bytes += cost;
    }
    if kept as u64 >= max_lines && bytes <= max_bytes {
        by = "lines";
    }
    result.content = lines[..kept].join("\n");
    result.truncated_by = Some(by);
    result.output_lines = kept;
    result.output_bytes = result.content.len();
    result
}

/// `truncateTail`: keep the last lines that fit; if even the last line is too long, keep the
/// end of it (`lastLinePartial`).
pub fn truncate_tail(
    content: &str,
    max_lines: u64,
    max_bytes: usize,
    count: LineCount,
) -> Truncation {
    let lines = count.lines(content);
    let total_lines = lines.len();
    if total_lines as u64 <= max_lines && content.len() <= max_bytes {
        return Truncation::untouched(content, total_lines, max_lines, max_bytes);
    }
    let mut kept: Vec<&str> = Vec::new();
    let mut bytes = 0usize;
    let mut by = "lines";
    let mut partial = false;
    for line in lines.iter().rev() {
        if kept.len() as u64 >= max_lines {
            break;
        }
        let cost = line.len() + usize::from(!kept.is_empty());
        if bytes + cost > max_bytes {
            by = "bytes";
            if kept.is_empty() {
                let tail = tail_within_bytes(line, max_bytes);
                bytes = tail.len();
                kept.push(tail);
                partial = true;
            }
            break;
        }
        kept.push(line);
        bytes += cost;
    }
    if kept.len() as u64 >= max_lines && bytes <= max_bytes {
        by = "lines";
    }
    kept.reverse();
    let content_out = kept.join("\n");
    Truncation {
        output_bytes: content_out.len(),
        content: content_out,
        truncated: true,
        truncated_by: Some(by),
        total_lines,
        total_bytes: content.len(),
        output_lines: kept.len(),
        last_line_partial: partial,
        first_line_exceeds_limit: false,
        max_lines,
        max_bytes,
    }
}

/// The longest suffix of `s` of at most `max_bytes` bytes that starts on a character.
fn tail_within_bytes(s: &str, max_bytes: usize) -> &str {
    if s.len() <= max_bytes {
        return s;
    }
    let mut start = s.len() - max_bytes;
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

/// `truncateLine`: cut a line to `max_chars` UTF-16 code units and mark it. Returns the text
/// and whether it was cut.
pub fn truncate_line(line: &str, max_chars: usize) -> (String, bool) {
    if line.encode_utf16().count() <= max_chars {
        return (line.to_owned(), false);
    }
    let mut units = 0;
    let mut end = 0;
    for (i, c) in line.char_indices() {
        if units + c.len_utf16() > max_chars {
            break;
        }
        units += c.len_utf16();
        end = i + c.len_utf8();
    }
    (format!("{}... [truncated]", &line[..end]), true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_round_like_to_fixed() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(1024), "1.0KB");
        // 1280 / 1024 = 1.25 exactly: toFixed(1) rounds the tie up.
        assert_eq!(format_size(1280), "1.3KB");
        assert_eq!(format_size(50 * 1024), "50.0KB");
        assert_eq!(format_size(3 * 1024 * 1024 / 2), "1.5MB");
    }

    #[test]
    fn head_keeps_whole_lines_within_limits() {
        let t = truncate_head("a\nb\nc", 2, 100, LineCount::Split);
        assert_eq!(t.content, "a\nb");
        assert_eq!(t.truncated_by, Some("lines"));
        assert_eq!((t.total_lines, t.output_lines), (3, 2));

        let t = truncate_head("aaaa\nbbbb\ncccc", 100, 9, LineCount::Split);
        assert_eq!(t.content, "aaaa\nbbbb");
        assert_eq!(t.truncated_by, Some("bytes"));

        let t = truncate_head("aaaaaaaaaa\nb", 100, 5, LineCount::Split);
        assert!(t.first_line_exceeds_limit);
        assert_eq!(t.content, "");

        let t = truncate_head("short", 100, 100, LineCount::Split);
        assert!(!t.truncated);
        assert_eq!(t.to_json()["truncatedBy"], Value::Null);
    }

    #[test]
    fn tail_keeps_the_end_and_a_partial_last_line() {
        let t = truncate_tail("a\nb\nc", 2, 100, LineCount::Split);
        assert_eq!(t.content, "b\nc");
        let t = truncate_tail("x\nééééé", 100, 5, LineCount::Split);
        // The last line is 10 bytes; its last 5 bytes start inside a character.
        assert_eq!(t.content, "éé");
        assert!(t.last_line_partial);
        assert_eq!(t.truncated_by, Some("bytes"));
    }

    #[test]
    fn pi_1_6_counts_no_line_after_a_final_newline() {
        assert_eq!(LineCount::Split.lines("a\nb\n"), ["a", "b", ""]);
        assert_eq!(LineCount::Terminated.lines("a\nb\n"), ["a", "b"]);
        assert_eq!(LineCount::Terminated.lines("a\nb"), ["a", "b"]);
        assert!(LineCount::Terminated.lines("").is_empty());
        let t = truncate_tail("1\n2\n3\n", 2, 100, LineCount::Terminated);
        assert_eq!((t.content.as_str(), t.total_lines), ("2\n3", 3));
        let t = truncate_tail("1\n2\n3\n", 2, 100, LineCount::Split);
        assert_eq!((t.content.as_str(), t.total_lines), ("3\n", 4));
    }

    #[test]
    fn lines_cut_in_utf16_units() {
        assert_eq!(truncate_line("abc", 3), ("abc".into(), false));
        assert_eq!(
            truncate_line("abcd", 3),
            ("abc... [truncated]".into(), true)
        );
        assert_eq!(truncate_line("a😀b", 2), ("a... [truncated]".into(), true));
    }
}
