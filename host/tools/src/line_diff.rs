//! Line diffs of an edit as pi reports them (jsdiff's `diffLines`, which pi's edit tool uses):
//! the numbered context diff of `details.diff`.

use similar::{Algorithm, DiffOp, capture_diff_slices};

/// One run of a line diff: unchanged, removed or added lines (newlines stripped).
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
    let strip = |s: &'a str| s.strip_suffix('\n').unwrap_or(s);
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
                let lines = old_lines[old_index..old_index + len]
                    .iter()
                    .map(|s| strip(s));
                match parts.last_mut() {
                    Some(Part::Same(same)) => same.extend(lines),
                    _ => parts.push(Part::Same(lines.collect())),
                }
            }
            DiffOp::Delete {
                old_index, old_len, ..
            } => removed.extend(
                old_lines[old_index..old_index + old_len]
                    .iter()
                    .map(|s| strip(s)),
            ),
            DiffOp::Insert {
                new_index, new_len, ..
            } => added.extend(
                new_lines[new_index..new_index + new_len]
                    .iter()
                    .map(|s| strip(s)),
            ),
            DiffOp::Replace {
                old_index,
                old_len,
                new_index,
                new_len,
            } => {
                removed.extend(
                    old_lines[old_index..old_index + old_len]
                        .iter()
                        .map(|s| strip(s)),
                );
                added.extend(
                    new_lines[new_index..new_index + new_len]
                        .iter()
                        .map(|s| strip(s)),
                );
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
    let parts = line_parts(old, new);
    let max_line = old.split('\n').count().max(new.split('\n').count());
    let width = max_line.to_string().len();
    let num = |n: usize| format!("{n:>width$}");
    let gap = format!(" {} ...", " ".repeat(width));
    let mut out: Vec<String> = Vec::new();
    let (mut old_n, mut new_n) = (1usize, 1usize);
    let mut last_was_change = false;
    let mut first_changed = None;

    for (i, part) in parts.iter().enumerate() {
        match part {
            Part::Removed(lines) | Part::Added(lines) => {
                first_changed.get_or_insert(new_n);
                for line in lines {
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
                        out.push(format!(" {} {line}", num(*old_n)));
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
    (out.join("\n"), first_changed)
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
