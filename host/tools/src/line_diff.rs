//! Line diffs of an edit as pi reports them (jsdiff's `diffLines`, which pi's edit tool uses):
//! the numbered context diff of `details.diff`, and pi 1.6.0's unified `details.patch` and
//! its diffing of only the lines around each replacement.

use similar::{Algorithm, DiffOp, capture_diff_slices};

/// One run of a line diff: unchanged, removed or added lines, each with its newline (a last
/// line without one has none), as jsdiff's tokens are.
#[derive(Debug, PartialEq)]
enum Part<'a> {
    Same(Vec<&'a str>),
    Removed(Vec<&'a str>),
    Added(Vec<&'a str>),
}

/// The line diff as jsdiff's `diffLines` reports it: runs of unchanged lines, and between
/// them the removed lines before the added ones.
fn line_parts<'a>(old: &'a str, new: &'a str) -> Vec<Part<'a>> {
    // jsdiff's tokens: each line with its newline; a last line without one is its own token.
    let old_lines: Vec<&'a str> = old.split_inclusive('\n').collect();
    let new_lines: Vec<&'a str> = new.split_inclusive('\n').collect();
    let ops = capture_diff_slices(Algorithm::Myers, &old_lines, &new_lines);
    let mut parts: Vec<Part<'a>> = Vec::new();
    let mut removed: Vec<&'a str> = Vec::new();
    let mut added: Vec<&'a str> = Vec::new();
    let flush =
        |parts: &mut Vec<Part<'a>>, removed: &mut Vec<&'a str>, added: &mut Vec<&'a str>| {
            if !removed.is_empty() {
                parts.push(Part::Removed(std::mem::take(removed)));
            }
            if !added.is_empty() {
                parts.push(Part::Added(std::mem::take(added)));
            }
        };
    for op in &ops {
        match *op {
            DiffOp::Equal { old_index, len, .. } => {
                flush(&mut parts, &mut removed, &mut added);
                let lines = old_lines[old_index..old_index + len].iter().copied();
                match parts.last_mut() {
                    Some(Part::Same(same)) => same.extend(lines),
                    _ => parts.push(Part::Same(lines.collect())),
                }
            }
            DiffOp::Delete {
                old_index, old_len, ..
            } => removed.extend(&old_lines[old_index..old_index + old_len]),
            DiffOp::Insert {
                new_index, new_len, ..
            } => added.extend(&new_lines[new_index..new_index + new_len]),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                removed.extend(&old_lines[old_index..old_index + old_len]);
                added.extend(&new_lines[new_index..new_index + new_len]);
            }
        }
    }
    flush(&mut parts, &mut removed, &mut added);
    parts
}

/// pi's `generateDiffString`: changed lines with `+`/`-` and line numbers, up to
/// `context` unchanged lines around them, `...` for the rest. Returns the diff and the first
/// changed line (in the new file).
pub(crate) fn generate_diff_string(
    old: &str,
    new: &str,
    context: usize,
) -> (String, Option<usize>) {
    let (out, first_changed) =
        format_display_diff(&line_parts(old, new), 1, 1, number_width(old, new), context);
    (out.join("\n"), first_changed)
}

/// How many digits the line numbers of a diff of `old` to `new` take.
fn number_width(old: &str, new: &str) -> usize {
    let lines = |t: &str| t.matches('\n').count() + 1;
    lines(old).max(lines(new)).to_string().len()
}

/// pi's `formatDisplayDiff`: the display lines of `parts`, numbered from `old_n` / `new_n`,
/// and the first changed line (in the new file).
fn format_display_diff(
    parts: &[Part<'_>],
    mut old_n: usize,
    mut new_n: usize,
    width: usize,
    context: usize,
) -> (Vec<String>, Option<usize>) {
    let num = |n: usize| format!("{n:>width$}");
    let gap = format!(" {} ...", " ".repeat(width));
    let strip = |s: &str| s.strip_suffix('\n').unwrap_or(s).to_owned();
    let mut out: Vec<String> = Vec::new();
    let mut last_was_change = false;
    let mut first_changed = None;

    for (i, part) in parts.iter().enumerate() {
        match part {
            Part::Removed(lines) | Part::Added(lines) => {
                first_changed.get_or_insert(new_n);
                for line in lines.iter().map(|l| strip(l)) {
                    if matches!(part, Part::Added(_)) {
                        out.push(format!("+{} {line}", num(new_n)));
                        new_n += 1;
                    } else {
                        out.push(format!("-{} {line}", num(old_n)));
                        old_n += 1;
                    }
                }
                last_was_change = true;
            }
            Part::Same(lines) => {
                let next_is_change =
                    matches!(parts.get(i + 1), Some(Part::Removed(_) | Part::Added(_)));
                let show = |out: &mut Vec<String>,
                            shown: &[&str],
                            old_n: &mut usize,
                            new_n: &mut usize| {
                    for line in shown {
                        out.push(format!(" {} {}", num(*old_n), strip(line)));
                        *old_n += 1;
                        *new_n += 1;
                    }
                };
                if last_was_change && next_is_change {
                    if lines.len() <= context * 2 {
                        show(&mut out, lines, &mut old_n, &mut new_n);
                    } else {
                        let skipped = lines.len() - 2 * context;
                        show(&mut out, &lines[..context], &mut old_n, &mut new_n);
                        out.push(gap.clone());
                        old_n += skipped;
                        new_n += skipped;
                        show(
                            &mut out,
                            &lines[lines.len() - context..],
                            &mut old_n,
                            &mut new_n,
                        );
                    }
                } else if last_was_change {
                    let shown = &lines[..lines.len().min(context)];
                    let skipped = lines.len() - shown.len();
                    show(&mut out, shown, &mut old_n, &mut new_n);
                    if skipped > 0 {
                        out.push(gap.clone());
                        old_n += skipped;
                        new_n += skipped;
                    }
                } else if next_is_change {
                    let skipped = lines.len().saturating_sub(context);
                    if skipped > 0 {
                        out.push(gap.clone());
                        old_n += skipped;
                        new_n += skipped;
                    }
                    show(&mut out, &lines[skipped..], &mut old_n, &mut new_n);
                } else {
                    old_n += lines.len();
                    new_n += lines.len();
                }
                last_was_change = false;
            }
        }
    }
    (out, first_changed)
}

/// One hunk of a unified diff (jsdiff's structured patch): where it starts on each side
/// (1-based), how many lines it spans there, and its lines with their `' '`/`-`/`+` mark.
struct Hunk {
    old_start: usize,
    old_lines: usize,
    new_start: usize,
    new_lines: usize,
    lines: Vec<String>,
}

/// jsdiff's `structuredPatch` hunks of `parts`: changes with `context` unchanged lines around
/// them, merged where the lines between two changes are at most twice that; a line without a
/// newline is followed by `\ No newline at end of file`.
fn hunks(parts: &[Part<'_>], context: usize) -> Vec<Hunk> {
    let mark = |m: char, lines: &[&str]| -> Vec<String> {
        lines.iter().map(|l| format!("{m}{l}")).collect()
    };
    let mut hunks = Vec::new();
    // The start of the hunk being built (0: none), as jsdiff keeps it.
    let (mut old_start, mut new_start) = (0usize, 0usize);
    let mut current: Vec<String> = Vec::new();
    let (mut old_n, mut new_n) = (1usize, 1usize);
    for (i, part) in parts.iter().enumerate() {
        match part {
            Part::Removed(lines) | Part::Added(lines) => {
                if old_start == 0 {
                    old_start = old_n;
                    new_start = new_n;
                    if let Some(Part::Same(before)) = i.checked_sub(1).map(|p| &parts[p]) {
                        current = mark(' ', &before[before.len().saturating_sub(context)..]);
                        old_start -= current.len();
                        new_start -= current.len();
                    }
                }
                let added = matches!(part, Part::Added(_));
                current.extend(mark(if added { '+' } else { '-' }, lines));
                if added {
                    new_n += lines.len();
                } else {
                    old_n += lines.len();
                }
            }
            Part::Same(lines) => {
                if old_start != 0 {
                    if lines.len() <= context * 2 && i + 1 < parts.len() {
                        current.extend(mark(' ', lines));
                    } else {
                        let shown = lines.len().min(context);
                        current.extend(mark(' ', &lines[..shown]));
                        hunks.push(Hunk {
                            old_start,
                            old_lines: old_n - old_start + shown,
                            new_start,
                            new_lines: new_n - new_start + shown,
                            lines: std::mem::take(&mut current),
                        });
                        old_start = 0;
                        new_start = 0;
                    }
                }
                old_n += lines.len();
                new_n += lines.len();
            }
        }
    }
    // jsdiff ends the last hunk at the (empty) part it appends after the last one.
    if old_start != 0 {
        hunks.push(Hunk {
            old_start,
            old_lines: old_n - old_start,
            new_start,
            new_lines: new_n - new_start,
            lines: current,
        });
    }
    for hunk in &mut hunks {
        let mut lines = Vec::with_capacity(hunk.lines.len());
        for line in hunk.lines.drain(..) {
            match line.strip_suffix('\n') {
                Some(l) => lines.push(l.to_owned()),
                None => {
                    lines.push(line);
                    lines.push("\\ No newline at end of file".to_owned());
                }
            }
        }
        hunk.lines = lines;
    }
    hunks
}

/// jsdiff's `formatPatch` with file headers only (no index line, no underline), as pi 1.6.0's
/// edit writes `details.patch`.
fn format_patch(path: &str, hunks: &[Hunk]) -> String {
    let mut out = vec![format!("--- {path}"), format!("+++ {path}")];
    for h in hunks {
        // The unified format's quirk: an empty side starts one line earlier.
        let old_start = if h.old_lines == 0 {
            h.old_start.saturating_sub(1)
        } else {
            h.old_start
        };
        let new_start = if h.new_lines == 0 {
            h.new_start.saturating_sub(1)
        } else {
            h.new_start
        };
        out.push(format!(
            "@@ -{old_start},{} +{new_start},{} @@",
            h.old_lines, h.new_lines
        ));
        out.extend(h.lines.iter().cloned());
    }
    out.join("\n") + "\n"
}

/// One replacement of an edit in the text it was matched in: `len` bytes at `at` become `new`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Replacement {
    pub at: usize,
    pub len: usize,
    pub new: String,
}

/// What pi 1.6.0's edit reports of its change (`generateEditDiff`).
pub(crate) struct EditDiff {
    pub diff: String,
    pub patch: String,
    pub first_changed: Option<usize>,
}

/// Unchanged lines diffed on each side of a replacement (pi's `DIFF_WINDOW_MARGIN_LINES`).
const WINDOW_MARGIN_LINES: usize = 32;

/// pi 1.6.0's `generateEditDiff`: `base` to `new` diffed only in whole-line windows around the
/// `replacements` (sorted, disjoint, in `base`), so the cost follows the change, not the file;
/// the display diff and the unified patch of those windows.
pub(crate) fn generate_edit_diff(
    path: &str,
    base: &str,
    new: &str,
    replacements: &[Replacement],
    context: usize,
) -> EditDiff {
    let width = number_width(base, new);
    let gap = format!(" {} ...", " ".repeat(width));
    let mut out: Vec<String> = Vec::new();
    let mut all_hunks = Vec::new();
    let mut first_changed = None;
    for w in windows(base, replacements) {
        let parts = line_parts(&base[w.old_start..w.old_end], &new[w.new_start..w.new_end]);
        let (mut shown, first) =
            format_display_diff(&parts, w.old_line + 1, w.new_line + 1, width, context);
        first_changed = first_changed.or(first);
        // Both windows around a run of unchanged lines mark it; the whole-file diff shows one.
        if out.last() == Some(&gap) && shown.first() == Some(&gap) {
            shown.remove(0);
        }
        out.extend(shown);
        for mut h in hunks(&parts, context) {
            h.old_start += w.old_line;
            h.new_start += w.new_line;
            all_hunks.push(h);
        }
    }
    EditDiff {
        diff: out.join("\n"),
        patch: format_patch(path, &all_hunks),
        first_changed,
    }
}

/// A window of whole lines: byte ranges in the old and new text, and the line each starts at
/// (0-based).
struct Window {
    old_start: usize,
    old_end: usize,
    old_line: usize,
    new_start: usize,
    new_end: usize,
    new_line: usize,
}

/// The start of the line holding `offset`.
fn line_start_before(text: &str, offset: usize) -> usize {
    if offset == 0 {
        return 0;
    }
    text[..offset].rfind('\n').map_or(0, |i| i + 1)
}

/// pi's `getDiffWindows`: the lines of each replacement with [`WINDOW_MARGIN_LINES`] around
/// them; windows that touch merge.
fn windows(base: &str, replacements: &[Replacement]) -> Vec<Window> {
    let lf = |from: usize, to: usize| base[from..to].matches('\n').count();
    let mut windows: Vec<Window> = Vec::new();
    let (mut offset_delta, mut line_delta) = (0isize, 0isize);
    let (mut cursor_offset, mut cursor_line) = (0usize, 0usize);
    for r in replacements {
        let match_end = r.at + r.len;
        let mut start = line_start_before(base, r.at);
        for _ in 0..WINDOW_MARGIN_LINES {
            if start == 0 {
                break;
            }
            start = line_start_before(base, start - 1);
        }
        let mut end = match_end;
        for i in 0..=WINDOW_MARGIN_LINES {
            if end >= base.len() {
                break;
            }
            let mut from = if i == 0 {
                match_end.saturating_sub(1).max(r.at)
            } else {
                end
            };
            // pi steps back one UTF-16 unit (to find a newline that ends the match); a newline
            // is one byte, so the start of the character before does the same here.
            while !base.is_char_boundary(from) {
                from -= 1;
            }
            end = base[from..]
                .find('\n')
                .map_or(base.len(), |at| from + at + 1);
        }
        let r_offset = r.new.len() as isize - r.len as isize;
        let r_lines = r.new.matches('\n').count() as isize - lf(r.at, match_end) as isize;
        let shift = |at: usize, by: isize| (at as isize + by) as usize;
        match windows.last_mut() {
            Some(previous) if start <= previous.old_end => {
                previous.old_end = previous.old_end.max(end);
                previous.new_end = shift(previous.old_end, offset_delta + r_offset);
            }
            _ => {
                cursor_line += lf(cursor_offset, start);
                cursor_offset = start;
                windows.push(Window {
                    old_start: start,
                    old_end: end,
                    old_line: cursor_line,
                    new_start: shift(start, offset_delta),
                    new_end: shift(end, offset_delta + r_offset),
                    new_line: shift(cursor_line, line_delta),
                });
            }
        }
        offset_delta += r_offset;
        line_delta += r_lines;
    }
    windows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_with_numbers_and_context() {
        let old: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        let new = old.replace("line 10\n", "line ten\n");
        let (diff, first) = generate_diff_string(&old, &new, 4);
        assert_eq!(first, Some(10));
        let expected = [
            "    ...",
            "  6 line 6",
            "  7 line 7",
            "  8 line 8",
            "  9 line 9",
            "-10 line 10",
            "+10 line ten",
            " 11 line 11",
            " 12 line 12",
            " 13 line 13",
            " 14 line 14",
            "    ...",
        ]
        .join("\n");
        assert_eq!(diff, expected);
    }
}
