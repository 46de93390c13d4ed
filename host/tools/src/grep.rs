//! The grep tool (pi's core/tools/grep.js). pi runs `rg --json --line-number --color=never
//! --hidden [--ignore-case] [--fixed-strings] [--glob G] -- PATTERN PATH`; this runs the same
//! search in-process with ripgrep's own crates configured as rg is (gitignore rules only in
//! git repositories, `.ignore`/`.rgignore`, hidden files searched, links not followed, files
//! with NUL bytes skipped when found by walking) and formats matches as pi does.
//!
//! Error texts are ripgrep's as pi reports them (its stderr), from the ripgrep release pi
//! downloads (15.x: `rg: regex parse error: ...`; older releases word some differently).
//!
//! Differences: files are searched in sorted order (rg's order is whatever its threads
//! produce), so with a match limit the matches kept are deterministic; directories that
//! cannot be read are skipped (rg would fail the whole call).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::WalkBuilder;
use ignore::overrides::OverrideBuilder;
use serde_json::{Map, Value, json};

use super::args::{Args, js_number};
use super::truncate::{
    DEFAULT_MAX_BYTES, GREP_MAX_LINE_LENGTH, LineCount, NO_LINE_LIMIT, format_size, truncate_head,
    truncate_line,
};
use super::workspace::{FsError, Resolved, Workspace};
use super::{ABORTED, PiVersion, ToolOutput, js_json_number};

pub(crate) const DEFAULT_LIMIT: usize = 100;

/// One matching line as rg reports it.
struct Match {
    file: PathBuf,
    line_number: u64,
    /// The line with its terminator, if it is valid UTF-8 (rg's `lines.text`).
    text: Option<String>,
    /// The line with invalid UTF-8 replaced (what pi 1.6.0 decodes rg's `lines.bytes` to).
    lossy: String,
}

struct Collect<'a> {
    file: &'a Path,
    matches: &'a mut Vec<Match>,
    limit: f64,
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, m: &SinkMatch<'_>) -> Result<bool, Self::Error> {
        self.matches.push(Match {
            file: self.file.to_path_buf(),
            line_number: m.line_number().unwrap_or(0),
            text: std::str::from_utf8(m.bytes()).ok().map(str::to_owned),
            lossy: String::from_utf8_lossy(m.bytes()).into_owned(),
        });
        Ok((self.matches.len() as f64) < self.limit)
    }
}

pub(crate) fn run(
    args: &Value,
    ws: &Workspace,
    cancel: &AtomicBool,
    pi: PiVersion,
) -> Result<ToolOutput, String> {
    let a = Args::new("grep", args)?;
    let pattern = a.string("pattern")?;
    let search_input = a.opt_string("path")?.filter(|p| !p.is_empty());
    let glob = a.opt_string("glob")?.filter(|g| !g.is_empty());
    let ignore_case = a.opt_bool("ignoreCase")?.unwrap_or(false);
    let literal = a.opt_bool("literal")?.unwrap_or(false);
    let context = a.opt_number("context")?;
    let limit = a.opt_number("limit")?;

    let input = search_input.as_deref().unwrap_or(".");
    let r = ws.resolve(input)?;
    let is_dir = match ws.with(&r, |d, p| d.metadata(p)) {
        Ok(m) => m.is_dir(),
        Err(FsError::Outside) => return Err(ws.symlink_message(input)),
        Err(FsError::Io(_)) => return Err(format!("Path not found: {}", r.abs.display())),
    };
    let context = match context {
        Some(c) if c > 0.0 => c.trunc() as u64,
        _ => 0,
    };
    let limit = limit.unwrap_or(DEFAULT_LIMIT as f64).max(1.0);
    // pi 1.6.0 reads one match past the limit: only that one proves the limit cut results off.
    let wanted = if pi.is_1_6() {
        limit.floor() + 1.0
    } else {
        limit
    };

    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(ignore_case)
        .fixed_strings(literal)
        .line_terminator(Some(b'\n'))
        .build(&pattern)
        .map_err(|e| format!("rg: {e}"))?;

    let mut walker = WalkBuilder::new(&r.abs);
    walker
        .hidden(false)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .require_git(true)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b));
    walker.add_custom_ignore_filename(".rgignore");
    if let Some(glob) = &glob {
        let mut overrides = OverrideBuilder::new(ws.root());
        overrides.add(glob).map_err(|e| format!("rg: {e}"))?;
        walker.overrides(overrides.build().map_err(|e| format!("rg: {e}"))?);
    }

    let mut matches: Vec<Match> = Vec::new();
    for entry in walker.build() {
        if cancel.load(Ordering::Relaxed) {
            return Err(ABORTED.into());
        }
        let Ok(entry) = entry else { continue };
        let explicit = entry.depth() == 0;
        // Walked entries are searched if they are regular files (links are not followed);
        // a file named as the search path is searched whatever it is.
        let searchable = entry.file_type().is_some_and(|t| t.is_file()) || (explicit && !is_dir);
        if !searchable {
            continue;
        }
        let Some(file) = open_inside(ws, entry.path()) else {
            continue;
        };
        let binary = if explicit {
            BinaryDetection::convert(b'\x00')
        } else {
            BinaryDetection::quit(b'\x00')
        };
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .binary_detection(binary)
            .build();
        let sink = Collect {
            file: entry.path(),
            matches: &mut matches,
            limit: wanted,
        };
        let _ = searcher.search_file(&matcher, &file, sink);
        if matches.len() as f64 >= wanted {
            break;
        }
    }

    if matches.is_empty() {
        return Ok(ToolOutput::text("No matches found", Value::Null));
    }
    let limit_reached = if pi.is_1_6() {
        matches.len() as f64 > limit.floor()
    } else {
        matches.len() as f64 >= limit
    };
    let limit = if pi.is_1_6() { limit.floor() } else { limit };

    let format_path = |file: &Path| -> String {
        if is_dir
            && let Ok(rel) = file.strip_prefix(&r.abs)
            && !rel.as_os_str().is_empty()
        {
            return rel.to_string_lossy().into_owned();
        }
        file.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let mut file_lines: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut lines_truncated = false;
    let mut output_lines: Vec<String> = Vec::new();
    if pi.is_1_6() {
        (output_lines, lines_truncated) =
            rg_lines(ws, &matches, limit as usize, context, &format_path);
    }
    for m in matches.iter().filter(|_| !pi.is_1_6()) {
        let shown = format_path(&m.file);
        if context == 0
            && let Some(text) = &m.text
        {
            let text = text.replace("\r\n", "\n").replace('\r', "");
            let text = text.strip_suffix('\n').unwrap_or(&text);
            let (cut, was_cut) = truncate_line(text, GREP_MAX_LINE_LENGTH);
            lines_truncated |= was_cut;
            output_lines.push(format!("{shown}:{}: {cut}", m.line_number));
            continue;
        }
        let lines = file_lines
            .entry(m.file.clone())
            .or_insert_with(|| read_lines(ws, &m.file));
        if lines.is_empty() {
            output_lines.push(format!("{shown}:{}: (unable to read file)", m.line_number));
            continue;
        }
        let n = m.line_number;
        let (start, end) = if context > 0 {
            (
                n.saturating_sub(context).max(1),
                (lines.len() as u64).min(n + context),
            )
        } else {
            (n, n)
        };
        for current in start..=end {
            let text = lines
                .get(current as usize - 1)
                .map(|l| l.replace('\r', ""))
                .unwrap_or_default();
            let (cut, was_cut) = truncate_line(&text, GREP_MAX_LINE_LENGTH);
            lines_truncated |= was_cut;
            if current == n {
                output_lines.push(format!("{shown}:{current}: {cut}"));
            } else {
                output_lines.push(format!("{shown}-{current}- {cut}"));
            }
        }
    }

    let t = truncate_head(
        &output_lines.join("\n"),
        NO_LINE_LIMIT,
        DEFAULT_MAX_BYTES,
        LineCount::of(pi),
    );
    let mut output = t.content.clone();
    let mut details = Map::new();
    let mut notices = Vec::new();
    if limit_reached {
        notices.push(format!(
            "{} matches limit reached. Use limit={} for more, or refine pattern",
            js_number(limit),
            js_number(limit * 2.0)
        ));
        details.insert("matchLimitReached".into(), js_json_number(limit));
    }
    if t.truncated {
        notices.push(format!("{} limit reached", format_size(DEFAULT_MAX_BYTES)));
        details.insert("truncation".into(), t.to_json());
    }
    if lines_truncated {
        notices.push(format!(
            "Some lines truncated to {GREP_MAX_LINE_LENGTH} chars. Use read tool to see full lines"
        ));
        details.insert("linesTruncated".into(), json!(true));
    }
    if !notices.is_empty() {
        output.push_str(&format!("\n\n[{}]", notices.join(". ")));
    }
    let details = if details.is_empty() {
        Value::Null
    } else {
        Value::Object(details)
    };
    Ok(ToolOutput {
        content: json!([{"type": "text", "text": output}]),
        details,
        structured_content: None,
        is_error: false,
    })
}

/// Opens a walked file through the workspace capability, so a link swapped in during the
/// walk cannot lead out.
fn open_inside(ws: &Workspace, abs: &Path) -> Option<std::fs::File> {
    let rel = abs.strip_prefix(ws.root()).ok()?;
    let r = Resolved {
        rel: rel.to_path_buf(),
        abs: abs.to_path_buf(),
    };
    ws.with(&r, |d, p| d.open(p)).ok().map(|f| f.into_std())
}

/// A file's lines as pi's context formatting reads them (`\r\n` and `\r` as line breaks);
/// empty if it cannot be read.
/// pi 1.6.0's output, which is rg's with `--context`: each line once, windows of nearby
/// matches merged, a line that matches shown as a match, the trailing context of the last
/// match kept (a match past the limit inside it shown as context), lines split at `\n` only
/// and stripped of their terminator alone.
fn rg_lines(
    ws: &Workspace,
    matches: &[Match],
    limit: usize,
    context: u64,
    format_path: &dyn Fn(&Path) -> String,
) -> (Vec<String>, bool) {
    let kept = &matches[..matches.len().min(limit)];
    let mut out = Vec::new();
    let mut truncated = false;
    let mut push = |shown: &str, n: u64, text: &str, is_match: bool| {
        let (cut, was_cut) = truncate_line(text, GREP_MAX_LINE_LENGTH);
        truncated |= was_cut;
        let mark = if is_match { ':' } else { '-' };
        out.push(format!("{shown}{mark}{n}{mark} {cut}"));
    };
    let mut files: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut last_shown: HashMap<PathBuf, u64> = HashMap::new();
    for m in kept {
        let shown = format_path(&m.file);
        if context == 0 {
            let text = m.lossy.as_str();
            let text = text.strip_suffix('\n').unwrap_or(text);
            push(
                &shown,
                m.line_number,
                text.strip_suffix('\r').unwrap_or(text),
                true,
            );
            continue;
        }
        let lines = files.entry(m.file.clone()).or_insert_with(|| {
            let mut lines = read_lines_lf(ws, &m.file);
            if lines.last().is_some_and(String::is_empty) {
                lines.pop();
            }
            lines
        });
        let n = m.line_number;
        let after = last_shown.get(&m.file).map_or(1, |l| l + 1);
        let start = n.saturating_sub(context).max(1).max(after);
        let end = (lines.len() as u64).min(n + context);
        for current in start..=end {
            let is_match = kept
                .iter()
                .any(|k| k.file == m.file && k.line_number == current);
            let text = lines.get(current as usize - 1).map_or("", String::as_str);
            push(&shown, current, text, is_match);
        }
        last_shown.insert(m.file.clone(), end.max(n));
    }
    (out, truncated)
}

/// A file's text with invalid UTF-8 replaced; `None` when it cannot be read.
fn read_text(ws: &Workspace, abs: &Path) -> Option<String> {
    let mut file = open_inside(ws, abs)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// A file's lines split at `\n`, each without a trailing `\r` (rg's lines).
fn read_lines_lf(ws: &Workspace, abs: &Path) -> Vec<String> {
    read_text(ws, abs)
        .unwrap_or_default()
        .split('\n')
        .map(|l| l.strip_suffix('\r').unwrap_or(l).to_owned())
        .collect()
}

fn read_lines(ws: &Workspace, abs: &Path) -> Vec<String> {
    let Some(text) = read_text(ws, abs) else {
        return Vec::new();
    };
    text.replace("\r\n", "\n")
        .replace('\r', "\n")
        .split('\n')
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path();
        std::fs::create_dir_all(p.join("src/deep")).unwrap();
        std::fs::write(
            p.join("src/a.ts"),
            "const a = 1;\nfunction hello() {}\nhello();\n",
        )
        .unwrap();
        std::fs::write(p.join("src/deep/b.ts"), "// Hello there\nlet x = 2;\n").unwrap();
        std::fs::write(p.join("notes.md"), "hello notes\n").unwrap();
        std::fs::write(p.join(".hidden"), "hello hidden\n").unwrap();
        std::fs::write(p.join("bin.dat"), b"hello\x00binary\n").unwrap();
        let ws = Workspace::open(p).unwrap();
        (tmp, ws)
    }

    fn grep(ws: &Workspace, args: Value) -> Result<ToolOutput, String> {
        run(&args, ws, &AtomicBool::new(false), PiVersion::V0_73)
    }

    fn text(out: &ToolOutput) -> &str {
        out.content[0]["text"].as_str().unwrap()
    }

    #[test]
    fn finds_matches_like_rg() {
        let (_tmp, ws) = setup();
        let out = grep(&ws, json!({"pattern": "hello"})).unwrap();
        assert_eq!(
            text(&out),
            ".hidden:1: hello hidden\nnotes.md:1: hello notes\nsrc/a.ts:2: function hello() {}\nsrc/a.ts:3: hello();"
        );
        assert_eq!(out.details, Value::Null);

        let out = grep(
            &ws,
            json!({"pattern": "hello", "ignoreCase": true, "glob": "*.ts"}),
        )
        .unwrap();
        assert_eq!(
            text(&out),
            "src/a.ts:2: function hello() {}\nsrc/a.ts:3: hello();\nsrc/deep/b.ts:1: // Hello there"
        );
        let out = grep(
            &ws,
            json!({"pattern": "o()", "literal": true, "path": "src"}),
        )
        .unwrap();
        assert_eq!(text(&out), "a.ts:2: function hello() {}\na.ts:3: hello();");
        let out = grep(&ws, json!({"pattern": "x", "path": "src/deep/b.ts"})).unwrap();
        assert_eq!(text(&out), "b.ts:2: let x = 2;");
        let out = grep(&ws, json!({"pattern": "zzz"})).unwrap();
        assert_eq!(text(&out), "No matches found");
    }

    #[test]
    fn context_limit_and_long_lines() {
        let (tmp, ws) = setup();
        let out = grep(
            &ws,
            json!({"pattern": "function", "context": 1, "path": "src/a.ts"}),
        )
        .unwrap();
        assert_eq!(
            text(&out),
            "a.ts-1- const a = 1;\na.ts:2: function hello() {}\na.ts-3- hello();"
        );
        let out = grep(&ws, json!({"pattern": "hello", "limit": 2})).unwrap();
        assert_eq!(
            text(&out),
            ".hidden:1: hello hidden\nnotes.md:1: hello notes\n\n[2 matches limit reached. Use limit=4 for more, or refine pattern]"
        );
        assert_eq!(out.details, json!({"matchLimitReached": 2}));

        std::fs::write(
            tmp.path().join("long.txt"),
            format!("{}\n", "z".repeat(600)),
        )
        .unwrap();
        let out = grep(&ws, json!({"pattern": "zzz", "path": "long.txt"})).unwrap();
        assert_eq!(
            text(&out),
            format!(
                "long.txt:1: {}... [truncated]\n\n[Some lines truncated to 500 chars. Use read tool to see full lines]",
                "z".repeat(500)
            )
        );
        assert_eq!(out.details, json!({"linesTruncated": true}));
    }

    #[test]
    fn errors_and_confinement() {
        let (tmp, ws) = setup();
        let err = grep(&ws, json!({"pattern": "("})).unwrap_err();
        assert!(err.starts_with("rg: regex parse error:"), "{err}");
        let err = grep(&ws, json!({"pattern": "x", "path": "nope"})).unwrap_err();
        assert_eq!(
            err,
            format!("Path not found: {}", tmp.path().join("nope").display())
        );

        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "hello secret\n").unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("outdir")).unwrap();
        std::os::unix::fs::symlink(
            outside.path().join("secret.txt"),
            tmp.path().join("out.txt"),
        )
        .unwrap();
        // Walking does not follow the links; naming them is refused.
        let out = grep(&ws, json!({"pattern": "secret"})).unwrap();
        assert_eq!(text(&out), "No matches found");
        for p in ["outdir", "out.txt", "..", "/etc"] {
            let err = grep(&ws, json!({"pattern": "x", "path": p})).unwrap_err();
            assert!(err.contains("outside the workspace"), "{p}: {err}");
        }
    }

    #[test]
    fn respects_gitignore_in_a_repo() {
        let (tmp, ws) = setup();
        std::fs::create_dir(tmp.path().join(".git")).unwrap();
        std::fs::write(tmp.path().join(".gitignore"), "notes.md\n").unwrap();
        let out = grep(&ws, json!({"pattern": "hello", "path": "."})).unwrap();
        assert!(!text(&out).contains("notes.md"), "{}", text(&out));
        assert!(text(&out).contains("src/a.ts"));
    }
}
