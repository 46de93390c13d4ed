//! The find tool (pi's core/tools/find.js). pi runs `fd --glob --color=never --hidden
//! --no-require-git --max-results N [--full-path] -- PATTERN PATH`; this runs the same walk
//! in-process with the crates fd is built from: gitignore rules apply with or without a git
//! repository, `.ignore`/`.fdignore` and fd's global ignore file are read, hidden entries are
//! listed, links are not followed. As in fd, a pattern without `/` matches the file name and
//! one with `/` the absolute path (pi prefixes `**/`), case-insensitively unless the pattern
//! has an uppercase letter (fd's smart case), and directories are listed with a trailing `/`.
//!
//! Results come in fd's sorted order; with a limit, the first ones in that order are kept
//! (fd keeps whichever its threads find first).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use globset::GlobBuilder;
use ignore::WalkBuilder;
use serde_json::{Map, Value, json};

use super::args::{Args, js_number};
use super::truncate::{DEFAULT_MAX_BYTES, LineCount, NO_LINE_LIMIT, format_size, truncate_head};
use super::workspace::{FsError, Workspace};
use super::{ABORTED, PiVersion, ToolOutput, effective_limit, js_json_number};

pub(crate) const DEFAULT_LIMIT: usize = 1000;

pub(crate) fn run(
    args: &Value,
    ws: &Workspace,
    cancel: &AtomicBool,
    pi: PiVersion,
) -> Result<ToolOutput, String> {
    let a = Args::new("find", args)?;
    let pattern = a.string("pattern")?;
    let search_input = a.opt_string("path")?.filter(|p| !p.is_empty());
    let limit = effective_limit(a.opt_number("limit")?.unwrap_or(DEFAULT_LIMIT as f64), pi);

    let input = search_input.as_deref().unwrap_or(".");
    let r = ws.resolve(input)?;
    let fd_no_dir = || {
        format!(
            "[fd error]: Search path '{}' is not a directory.\n[fd error]: No valid search paths given.",
            r.abs.display()
        )
    };
    match ws.with(&r, |d, p| d.metadata(p)) {
        Ok(m) if m.is_dir() => {}
        Ok(_) | Err(FsError::Io(_)) => return Err(fd_no_dir()),
        Err(FsError::Outside) => return Err(ws.symlink_message(input)),
    }

    // pi 1.6.0 drops a leading "./" (fd's full paths have none) and anchors a relative path
    // pattern at the search path: 'src/*.ts' finds 'src/a.ts', not 'pkg/src/b.ts'.
    let pattern = if pi.is_1_6() {
        let mut p = pattern.as_str();
        while let Some(rest) = p.strip_prefix("./") {
            p = rest;
        }
        p.to_owned()
    } else {
        pattern
    };
    let full_path = pattern.contains('/');
    let effective = if pi.is_1_6() && full_path && !pattern.starts_with('/') {
        let root = r.abs.to_string_lossy();
        let escaped: String = root
            .trim_end_matches('/')
            .chars()
            .flat_map(|c| {
                let escape = matches!(c, '\\' | '*' | '?' | '[' | ']' | '{' | '}');
                escape.then_some('\\').into_iter().chain([c])
            })
            .collect();
        format!("{escaped}/{pattern}")
    } else if full_path
        && !pattern.starts_with('/')
        && !pattern.starts_with("**/")
        && pattern != "**"
    {
        format!("**/{pattern}")
    } else {
        pattern.clone()
    };
    let matcher = if pattern.is_empty() {
        None
    } else {
        let case_sensitive = pattern.chars().any(char::is_uppercase);
        let glob = GlobBuilder::new(&effective)
            .literal_separator(true)
            .case_insensitive(!case_sensitive)
            .build()
            .map_err(|e| format!("[fd error]: {e}"))?;
        Some(glob.compile_matcher())
    };

    let mut walker = WalkBuilder::new(&r.abs);
    walker
        .hidden(false)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_global(true)
        .git_exclude(true)
        .require_git(false)
        .follow_links(false)
        .sort_by_file_name(|a, b| a.cmp(b));
    walker.add_custom_ignore_filename(".fdignore");
    if let Some(config) = fd_global_ignore() {
        let _ = walker.add_ignore(config);
    }

    // Entries come depth-first with siblings sorted by name, which is fd's sorted order.
    // pi 1.6.0 asks for one result past the limit, to tell "exactly N" from "more than N".
    let max = match limit {
        l if pi.is_1_6() => l + 1.0,
        l if l > 0.0 => l,
        _ => f64::INFINITY,
    };
    let mut found: Vec<String> = Vec::new();
    for entry in walker.build() {
        if cancel.load(Ordering::Relaxed) {
            return Err(ABORTED.into());
        }
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        let path = entry.path();
        let is_match = match &matcher {
            None => true,
            Some(m) if full_path => m.is_match(path),
            Some(m) => path.file_name().is_some_and(|n| m.is_match(n)),
        };
        if !is_match {
            continue;
        }
        let Ok(rel) = path.strip_prefix(&r.abs) else {
            continue;
        };
        let mut shown = rel.to_string_lossy().into_owned();
        if entry.file_type().is_some_and(|t| t.is_dir()) {
            shown.push('/');
        }
        found.push(shown);
        if found.len() as f64 >= max {
            break;
        }
    }

    if found.is_empty() {
        return Ok(ToolOutput::text(
            "No files found matching pattern",
            Value::Null,
        ));
    }
    let limit_reached = if pi.is_1_6() {
        let more = found.len() as f64 > limit;
        found.truncate(limit as usize);
        more
    } else {
        found.len() as f64 >= limit
    };
    let t = truncate_head(
        &found.join("\n"),
        NO_LINE_LIMIT,
        DEFAULT_MAX_BYTES,
        LineCount::of(pi),
    );
    let mut output = t.content.clone();
    let mut details = Map::new();
    let mut notices = Vec::new();
    if limit_reached {
        notices.push(format!(
            "{} results limit reached. Use limit={} for more, or refine pattern",
            js_number(limit),
            js_number(limit * 2.0)
        ));
        details.insert("resultLimitReached".into(), js_json_number(limit));
    }
    if t.truncated {
        notices.push(format!("{} limit reached", format_size(DEFAULT_MAX_BYTES)));
        details.insert("truncation".into(), t.to_json());
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

/// fd's global ignore file (`$XDG_CONFIG_HOME/fd/ignore` or `~/.config/fd/ignore`).
fn fd_global_ignore() -> Option<PathBuf> {
    let config = std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::home_dir().map(|h| h.join(".config")))?;
    let file = config.join("fd").join("ignore");
    file.is_file().then_some(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path();
        std::fs::create_dir_all(p.join("src/deep")).unwrap();
        for f in [
            "src/a.ts",
            "src/a.spec.ts",
            "src/deep/b.ts",
            "README.md",
            ".env",
            "src/C.TS",
        ] {
            std::fs::write(p.join(f), "").unwrap();
        }
        let ws = Workspace::open(p).unwrap();
        (tmp, ws)
    }

    fn find(ws: &Workspace, args: Value) -> Result<ToolOutput, String> {
        run(&args, ws, &AtomicBool::new(false), PiVersion::V0_73)
    }

    fn text(out: &ToolOutput) -> &str {
        out.content[0]["text"].as_str().unwrap()
    }

    #[test]
    fn globs_on_names_and_paths() {
        let (_tmp, ws) = setup();
        let out = find(&ws, json!({"pattern": "*.ts"})).unwrap();
        // Smart case: a lowercase pattern matches C.TS too.
        assert_eq!(
            text(&out),
            "src/C.TS\nsrc/a.spec.ts\nsrc/a.ts\nsrc/deep/b.ts"
        );
        let out = find(&ws, json!({"pattern": "src/*.spec.ts"})).unwrap();
        assert_eq!(text(&out), "src/a.spec.ts");
        let out = find(&ws, json!({"pattern": "src/**/*.ts", "path": "src"})).unwrap();
        assert_eq!(text(&out), "C.TS\na.spec.ts\na.ts\ndeep/b.ts");
        let out = find(&ws, json!({"pattern": "*"})).unwrap();
        assert_eq!(
            text(&out),
            ".env\nREADME.md\nsrc/\nsrc/C.TS\nsrc/a.spec.ts\nsrc/a.ts\nsrc/deep/\nsrc/deep/b.ts"
        );
        let out = find(&ws, json!({"pattern": "*.TS"})).unwrap();
        assert_eq!(text(&out), "src/C.TS");
        let out = find(&ws, json!({"pattern": "*.rs"})).unwrap();
        assert_eq!(text(&out), "No files found matching pattern");
    }

    #[test]
    fn limit_gitignore_and_errors() {
        let (tmp, ws) = setup();
        let out = find(&ws, json!({"pattern": "*.ts", "limit": 2})).unwrap();
        assert_eq!(
            text(&out),
            "src/C.TS\nsrc/a.spec.ts\n\n[2 results limit reached. Use limit=4 for more, or refine pattern]"
        );
        assert_eq!(out.details, json!({"resultLimitReached": 2}));

        // No git repository needed (fd --no-require-git).
        std::fs::write(tmp.path().join(".gitignore"), "deep/\n").unwrap();
        let out = find(&ws, json!({"pattern": "*.ts"})).unwrap();
        assert!(!text(&out).contains("deep"), "{}", text(&out));

        let err = find(&ws, json!({"pattern": "*", "path": "nope"})).unwrap_err();
        assert_eq!(
            err,
            format!(
                "[fd error]: Search path '{}' is not a directory.\n[fd error]: No valid search paths given.",
                tmp.path().join("nope").display()
            )
        );
        let err = find(&ws, json!({"pattern": "["})).unwrap_err();
        assert!(
            err.starts_with("[fd error]: error parsing glob '['"),
            "{err}"
        );
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("out")).unwrap();
        for p in ["out", "../", "/usr"] {
            let err = find(&ws, json!({"pattern": "*", "path": p})).unwrap_err();
            assert!(err.contains("outside the workspace"), "{p}: {err}");
        }
    }
}
