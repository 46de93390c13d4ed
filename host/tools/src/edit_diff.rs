//! The edit tool's text work (pi's core/tools/edit-diff.js): line endings, exact-then-fuzzy
//! matching of each `oldText` against the original file and pi's error messages (the diffs
//! of the result are `line_diff`'s).
//!
//! Fuzzy matching normalises both sides the way pi does: Unicode compatibility forms (pi
//! applies NFKC; without a normalisation table here, the common compatibility characters
//! are folded and text already in NFKC, such as ASCII, is unchanged), trailing whitespace
//! per line, smart quotes, Unicode dashes and special spaces.

pub(crate) use super::line_diff::Replacement;

pub(crate) fn detect_line_ending(content: &str) -> &'static str {
    match (content.find("\r\n"), content.find('\n')) {
        (Some(crlf), Some(lf)) if crlf < lf => "\r\n",
        _ => "\n",
    }
}

pub(crate) fn normalize_to_lf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\r', "\n")
}

pub(crate) fn restore_line_endings(text: &str, ending: &str) -> String {
    if ending == "\r\n" {
        text.replace('\n', "\r\n")
    } else {
        text.to_owned()
    }
}

/// JavaScript's `String.prototype.trimEnd` whitespace (WhiteSpace and LineTerminator).
fn js_whitespace(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{B}' | '\u{C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// The compatibility decompositions (NFKC) most likely to differ between a model's text and
/// a file: spaces, dots, ligatures, full-width ASCII, super/subscript digits, circled
/// numbers.
fn compatibility_fold(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let u = c as u32;
        match c {
            '\u{A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => {
                out.push(' ')
            }
            '\u{AA}' => out.push('a'),
            '\u{BA}' => out.push('o'),
            '\u{B2}' => out.push('2'),
            '\u{B3}' => out.push('3'),
            '\u{B9}' => out.push('1'),
            '\u{B5}' => out.push('\u{3BC}'),
            '\u{BC}' => out.push_str("1\u{2044}4"),
            '\u{BD}' => out.push_str("1\u{2044}2"),
            '\u{BE}' => out.push_str("3\u{2044}4"),
            '\u{2011}' => out.push('\u{2010}'),
            '\u{2024}' => out.push('.'),
            '\u{2025}' => out.push_str(".."),
            '\u{2026}' => out.push_str("..."),
            '\u{2033}' => out.push_str("\u{2032}\u{2032}"),
            '\u{2070}' => out.push('0'),
            '\u{2074}'..='\u{2079}' => out.push(char::from(b'0' + (u - 0x2070) as u8)),
            '\u{2080}'..='\u{2089}' => out.push(char::from(b'0' + (u - 0x2080) as u8)),
            '\u{2122}' => out.push_str("TM"),
            '\u{2460}'..='\u{2473}' => out.push_str(&(u - 0x2460 + 1).to_string()),
            '\u{FB00}' => out.push_str("ff"),
            '\u{FB01}' => out.push_str("fi"),
            '\u{FB02}' => out.push_str("fl"),
            '\u{FB03}' => out.push_str("ffi"),
            '\u{FB04}' => out.push_str("ffl"),
            '\u{FB05}' | '\u{FB06}' => out.push_str("st"),
            '\u{FF01}'..='\u{FF5E}' => out.push(char::from_u32(u - 0xFEE0).unwrap_or(c)),
            _ => out.push(c),
        }
    }
    out
}

/// pi's `normalizeForFuzzyMatch`.
pub(crate) fn normalize_for_fuzzy_match(text: &str) -> String {
    let folded = compatibility_fold(text);
    let trimmed: Vec<&str> = folded
        .split('\n')
        .map(|line| line.trim_end_matches(js_whitespace))
        .collect();
    trimmed
        .join("\n")
        .chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' => '\'',
            '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' => '"',
            '\u{2010}'..='\u{2015}' | '\u{2212}' => '-',
            '\u{A0}' | '\u{2002}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect()
}

/// Where `old` is in `content`: exact first, then in fuzzy-normalised space.
/// Returns (index, length, used fuzzy) with byte offsets into the searched text.
fn fuzzy_find(content: &str, old: &str) -> Option<(usize, usize, bool)> {
    if let Some(i) = content.find(old) {
        return Some((i, old.len(), false));
    }
    let fuzzy_content = normalize_for_fuzzy_match(content);
    let fuzzy_old = normalize_for_fuzzy_match(old);
    fuzzy_content
        .find(&fuzzy_old)
        .map(|i| (i, fuzzy_old.len(), true))
}

/// `content.split(old).length - 1` in fuzzy space, as pi counts (an empty needle splits
/// into UTF-16 units).
fn count_occurrences(content: &str, old: &str) -> isize {
    let fuzzy_content = normalize_for_fuzzy_match(content);
    let fuzzy_old = normalize_for_fuzzy_match(old);
    if fuzzy_old.is_empty() {
        return fuzzy_content.encode_utf16().count() as isize - 1;
    }
    fuzzy_content.matches(fuzzy_old.as_str()).count() as isize
}

/// pi's `stripBom`.
pub(crate) fn strip_bom(content: &str) -> (&'static str, &str) {
    match content.strip_prefix('\u{FEFF}') {
        Some(rest) => ("\u{FEFF}", rest),
        None => ("", content),
    }
}

/// An edit's outcome: the text its diff starts from, the text it ends with, and the
/// replacements that lead from one to the other (sorted, disjoint, in `base`).
#[derive(Debug)]
pub(crate) struct Applied {
    pub base: String,
    pub new: String,
    pub replacements: Vec<Replacement>,
}

/// pi's `applyEditsToNormalizedContent`: every edit matched against the same original,
/// unique and non-overlapping, applied from the end. When an edit needed fuzzy matching, pi
/// 0.73.1 rewrites the whole file in fuzzy-normalised form (the base is that form); with
/// `keep_lines` (pi 1.6.0) only the lines an edit touches are rewritten from it, each
/// replacement widened to whole lines of the original, which stays the base.
pub(crate) fn apply_edits(
    normalized: &str,
    edits: &[(String, String)],
    path: &str,
    keep_lines: bool,
) -> Result<Applied, String> {
    let total = edits.len();
    let edits: Vec<(String, String)> = edits
        .iter()
        .map(|(o, n)| (normalize_to_lf(o), normalize_to_lf(n)))
        .collect();
    for (i, (old, _)) in edits.iter().enumerate() {
        if old.is_empty() {
            return Err(if total == 1 {
                format!("oldText must not be empty in {path}.")
            } else {
                format!("edits[{i}].oldText must not be empty in {path}.")
            });
        }
    }
    let any_fuzzy = edits
        .iter()
        .any(|(old, _)| matches!(fuzzy_find(normalized, old), Some((_, _, true))));
    let base = if any_fuzzy {
        normalize_for_fuzzy_match(normalized)
    } else {
        normalized.to_owned()
    };

    struct Matched {
        edit: usize,
        at: usize,
        len: usize,
    }
    let mut matched = Vec::new();
    for (i, (old, _)) in edits.iter().enumerate() {
        let Some((at, len, _)) = fuzzy_find(&base, old) else {
            return Err(if total == 1 {
                format!(
                    "Could not find the exact text in {path}. The old text must match exactly including all whitespace and newlines."
                )
            } else {
                format!(
                    "Could not find edits[{i}] in {path}. The oldText must match exactly including all whitespace and newlines."
                )
            });
        };
        let occurrences = count_occurrences(&base, old);
        if occurrences > 1 {
            return Err(if total == 1 {
                format!(
                    "Found {occurrences} occurrences of the text in {path}. The text must be unique. Please provide more context to make it unique."
                )
            } else {
                format!(
                    "Found {occurrences} occurrences of edits[{i}] in {path}. Each oldText must be unique. Please provide more context to make it unique."
                )
            });
        }
        matched.push(Matched { edit: i, at, len });
    }
    matched.sort_by_key(|m| m.at);
    for pair in matched.windows(2) {
        if pair[0].at + pair[0].len > pair[1].at {
            return Err(format!(
                "edits[{}] and edits[{}] overlap in {path}. Merge them into one edit or target disjoint regions.",
                pair[0].edit, pair[1].edit
            ));
        }
    }
    let mut replacements: Vec<Replacement> = matched
        .iter()
        .map(|m| Replacement {
            at: m.at,
            len: m.len,
            new: edits[m.edit].1.clone(),
        })
        .collect();
    let base = if keep_lines && any_fuzzy {
        replacements = widen_to_lines(normalized, &base, &replacements)?;
        normalized.to_owned()
    } else {
        base
    };
    let new_content = apply_replacements(&base, &replacements, 0);
    if new_content == base {
        return Err(if total == 1 {
            format!(
                "No changes made to {path}. The replacement produced identical content. This might indicate an issue with special characters or the text not existing as expected."
            )
        } else {
            format!("No changes made to {path}. The replacements produced identical content.")
        });
    }
    Ok(Applied {
        base,
        new: new_content,
        replacements,
    })
}

/// `replacements` (sorted, in `text` shifted by `offset`) applied from the end.
fn apply_replacements(text: &str, replacements: &[Replacement], offset: usize) -> String {
    let mut out = text.to_owned();
    for r in replacements.iter().rev() {
        out.replace_range(r.at - offset..r.at - offset + r.len, &r.new);
    }
    out
}

/// Each line with its newline, as pi's `splitLinesWithEndings` gives them: byte ranges.
fn line_spans(text: &str) -> Vec<(usize, usize)> {
    let mut at = 0;
    text.split_inclusive('\n')
        .map(|line| {
            let span = (at, at + line.len());
            at = span.1;
            span
        })
        .collect()
}

/// pi 1.6.0's `widenReplacementsToLines`: replacements matched in `base` (the fuzzy form of
/// `original`, line for line) become replacements of whole lines of `original`, each group of
/// touched lines rewritten from `base`; every other line keeps its original text.
fn widen_to_lines(
    original: &str,
    base: &str,
    replacements: &[Replacement],
) -> Result<Vec<Replacement>, String> {
    let (original_lines, base_lines) = (line_spans(original), line_spans(base));
    if original_lines.len() != base_lines.len() {
        return Err(
            "Cannot preserve unchanged lines because the base content has a different line count."
                .into(),
        );
    }
    let outside = || "Replacement range is outside the base content.".to_owned();
    // (first line, line after the last, the replacements in them)
    let mut groups: Vec<(usize, usize, Vec<Replacement>)> = Vec::new();
    for r in replacements {
        let start = base_lines
            .iter()
            .position(|&(s, e)| r.at >= s && r.at < e)
            .ok_or_else(outside)?;
        let mut end = start;
        while end < base_lines.len() && base_lines[end].1 < r.at + r.len {
            end += 1;
        }
        if end >= base_lines.len() {
            return Err(outside());
        }
        match groups.last_mut() {
            Some(group) if start < group.1 => {
                group.1 = group.1.max(end + 1);
                group.2.push(r.clone());
            }
            _ => groups.push((start, end + 1, vec![r.clone()])),
        }
    }
    Ok(groups
        .into_iter()
        .map(|(first, after, group)| {
            let (from, to) = (base_lines[first].0, base_lines[after - 1].1);
            let original_from = original_lines[first].0;
            Replacement {
                at: original_from,
                len: original_lines[after - 1].1 - original_from,
                new: apply_replacements(&base[from..to], &group, from),
            }
        })
        .collect())
}

/// pi 1.6.0's `applyReplacementsToOriginal`: `replacements` made in the LF form of `original`
/// applied to `original` itself, so the text outside them keeps its bytes and line endings; a
/// line break of new text takes the line ending of the line where its replacement starts.
pub(crate) fn apply_replacements_to_original(
    original: &str,
    replacements: &[Replacement],
) -> String {
    // Only a CRLF is shorter in the LF form: add the CRLFs before an offset to map it back.
    let crlfs: Vec<usize> = original.match_indices("\r\n").map(|(i, _)| i).collect();
    let mut seen = 0;
    let mut to_original = |offset: usize| {
        while seen < crlfs.len() && crlfs[seen] - seen < offset {
            seen += 1;
        }
        offset + seen
    };
    let mut out = String::with_capacity(original.len());
    let mut ends_with_cr = false;
    let mut push = |out: &mut String, part: &str| {
        if part.is_empty() {
            return;
        }
        // A kept CR before a seam and an LF after it would merge into one CRLF.
        if ends_with_cr && part.starts_with('\n') {
            out.push('\n');
        }
        out.push_str(part);
        ends_with_cr = part.ends_with('\r');
    };
    let mut position = 0;
    for r in replacements {
        let start = to_original(r.at);
        push(&mut out, &original[position..start]);
        let new = match line_ending_at(original, start) {
            "\n" => r.new.clone(),
            ending => r.new.replace('\n', ending),
        };
        push(&mut out, &new);
        position = to_original(r.at + r.len);
    }
    push(&mut out, &original[position..]);
    out
}

/// pi's `getLineEndingAt`: the ending of the line holding `offset` (that of the line before for
/// an unterminated last line); a lone CR counts only in a file without any LF.
fn line_ending_at(content: &str, offset: usize) -> &'static str {
    let lf = content[offset..]
        .find('\n')
        .map(|i| offset + i)
        .or_else(|| content[..offset].rfind('\n'));
    match lf {
        None if content.contains('\r') => "\r",
        None => "\n",
        Some(i) if i > 0 && content.as_bytes()[i - 1] == b'\r' => "\r\n",
        Some(_) => "\n",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edits(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn line_endings() {
        assert_eq!(detect_line_ending("a\r\nb\n"), "\r\n");
        assert_eq!(detect_line_ending("a\nb\r\n"), "\n");
        assert_eq!(detect_line_ending("ab"), "\n");
        assert_eq!(normalize_to_lf("a\r\nb\rc"), "a\nb\nc");
        assert_eq!(restore_line_endings("a\nb", "\r\n"), "a\r\nb");
    }

    #[test]
    fn exact_unique_and_error_messages() {
        let Applied { base, new, .. } =
            apply_edits("a\nb\nc\n", &edits(&[("b", "B")]), "f", false).unwrap();
        assert_eq!((base.as_str(), new.as_str()), ("a\nb\nc\n", "a\nB\nc\n"));

        let err = apply_edits("x x", &edits(&[("x", "y")]), "f", false).unwrap_err();
        assert_eq!(
            err,
            "Found 2 occurrences of the text in f. The text must be unique. Please provide more context to make it unique."
        );
        let err = apply_edits("abc", &edits(&[("zz", "y")]), "f", false).unwrap_err();
        assert_eq!(
            err,
            "Could not find the exact text in f. The old text must match exactly including all whitespace and newlines."
        );
        let err = apply_edits("abc", &edits(&[("a", "1"), ("zz", "2")]), "f", false).unwrap_err();
        assert_eq!(
            err,
            "Could not find edits[1] in f. The oldText must match exactly including all whitespace and newlines."
        );
        let err =
            apply_edits("abcdef", &edits(&[("abc", "1"), ("bcd", "2")]), "f", false).unwrap_err();
        assert_eq!(
            err,
            "edits[0] and edits[1] overlap in f. Merge them into one edit or target disjoint regions."
        );
        let err = apply_edits("abc", &edits(&[("", "1")]), "f", false).unwrap_err();
        assert_eq!(err, "oldText must not be empty in f.");
        let err = apply_edits("abc", &edits(&[("b", "b")]), "f", false).unwrap_err();
        assert!(
            err.starts_with("No changes made to f. The replacement produced identical content.")
        );
    }

    #[test]
    fn multiple_edits_against_the_original() {
        let new = apply_edits(
            "one two three",
            &edits(&[("three", "3"), ("one", "1")]),
            "f",
            false,
        )
        .unwrap()
        .new;
        assert_eq!(new, "1 two 3");
    }

    #[test]
    fn fuzzy_matching_normalises_the_file() {
        // Smart quotes and trailing spaces in the file, plain text from the model.
        let content = "say \u{201C}hi\u{201D}   \nnext\u{2014}line\n";
        let Applied { base, new, .. } = apply_edits(
            content,
            &edits(&[("say \"hi\"", "say \"bye\"")]),
            "f",
            false,
        )
        .unwrap();
        assert_eq!(base, "say \"hi\"\nnext-line\n");
        assert_eq!(new, "say \"bye\"\nnext-line\n");
        assert_eq!(normalize_for_fuzzy_match("a\u{2026}\u{FB01}"), "a...fi");
    }
}
