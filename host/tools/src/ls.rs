//! The ls tool (pi's core/tools/ls.js): a directory's entries sorted case-insensitively,
//! `/` after directories, dotfiles included. Entries that cannot be stat'ed are skipped, as
//! in pi; inside the workspace that includes symbolic links pointing out of it.

use serde_json::{Map, Value, json};

use super::args::{Args, js_number};
use super::truncate::{DEFAULT_MAX_BYTES, LineCount, NO_LINE_LIMIT, format_size, truncate_head};
use super::workspace::{FsError, Resolved, Workspace, node_error};
use super::{PiVersion, ToolOutput, collate, effective_limit, js_json_number};

pub(crate) const DEFAULT_LIMIT: usize = 500;

pub(crate) fn run(args: &Value, ws: &Workspace, pi: PiVersion) -> Result<ToolOutput, String> {
    let a = Args::new("ls", args)?;
    let path = a.opt_string("path")?.filter(|p| !p.is_empty());
    let limit = effective_limit(a.opt_number("limit")?.unwrap_or(DEFAULT_LIMIT as f64), pi);
    let input = path.as_deref().unwrap_or(".");
    let r = ws.resolve(input)?;

    let meta = match ws.with(&r, |d, p| d.metadata(p)) {
        Ok(m) => m,
        Err(FsError::Outside) => return Err(ws.symlink_message(input)),
        Err(FsError::Io(_)) => return Err(format!("Path not found: {}", r.abs.display())),
    };
    if !meta.is_dir() {
        return Err(format!("Not a directory: {}", r.abs.display()));
    }
    let mut names: Vec<String> = ws
        .with(&r, |d, p| {
            d.read_dir(p)?
                .map(|e| e.map(|e| e.file_name().to_string_lossy().into_owned()))
                .collect::<std::io::Result<Vec<_>>>()
        })
        .map_err(|e| match e {
            FsError::Outside => ws.symlink_message(input),
            FsError::Io(e) => format!(
                "Cannot read directory: {}",
                node_error(&e, "scandir", &r.abs)
            ),
        })?;
    names.sort_by(|a, b| collate::compare(a, b));

    let mut results = Vec::new();
    let mut limit_reached = false;
    for name in names {
        if results.len() as f64 >= limit {
            limit_reached = true;
            break;
        }
        let entry = Resolved {
            rel: r.rel.join(&name),
            abs: r.abs.join(&name),
        };
        match ws.with(&entry, |d, p| d.metadata(p)) {
            Ok(m) if m.is_dir() => results.push(format!("{name}/")),
            Ok(_) => results.push(name),
            Err(_) => continue,
        }
    }
    if results.is_empty() {
        return Ok(ToolOutput::text("(empty directory)", Value::Null));
    }

    let t = truncate_head(
        &results.join("\n"),
        NO_LINE_LIMIT,
        DEFAULT_MAX_BYTES,
        LineCount::of(pi),
    );
    let mut output = t.content.clone();
    let mut details = Map::new();
    let mut notices = Vec::new();
    if limit_reached {
        notices.push(format!(
            "{} entries limit reached. Use limit={} for more",
            js_number(limit),
            js_number(limit * 2.0)
        ));
        details.insert("entryLimitReached".into(), js_json_number(limit));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn text(out: &ToolOutput) -> &str {
        out.content[0]["text"].as_str().unwrap()
    }

    #[test]
    fn lists_sorted_with_dir_suffix_and_limit() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::open(tmp.path()).unwrap();
        std::fs::create_dir(tmp.path().join("Src")).unwrap();
        for f in ["b.txt", ".hidden", "a_b", "A.md"] {
            std::fs::write(tmp.path().join(f), "").unwrap();
        }
        let out = run(&json!({}), &ws, PiVersion::V0_73).unwrap();
        assert_eq!(text(&out), ".hidden\na_b\nA.md\nb.txt\nSrc/");
        assert_eq!(out.details, Value::Null);

        let out = run(&json!({"path": ".", "limit": 2}), &ws, PiVersion::V0_73).unwrap();
        assert_eq!(
            text(&out),
            ".hidden\na_b\n\n[2 entries limit reached. Use limit=4 for more]"
        );
        assert_eq!(out.details, json!({"entryLimitReached": 2}));

        let out = run(&json!({"path": "Src"}), &ws, PiVersion::V0_73).unwrap();
        assert_eq!(text(&out), "(empty directory)");
        let err = run(&json!({"path": "nope"}), &ws, PiVersion::V0_73).unwrap_err();
        assert_eq!(
            err,
            format!("Path not found: {}", tmp.path().join("nope").display())
        );
        let err = run(&json!({"path": "b.txt"}), &ws, PiVersion::V0_73).unwrap_err();
        assert_eq!(
            err,
            format!("Not a directory: {}", tmp.path().join("b.txt").display())
        );
    }

    #[test]
    fn links_out_are_refused_or_skipped() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::open(tmp.path()).unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "").unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("out")).unwrap();
        std::fs::write(tmp.path().join("f"), "").unwrap();
        let err = run(&json!({"path": "out"}), &ws, PiVersion::V0_73).unwrap_err();
        assert!(err.contains("outside the workspace"), "{err}");
        let err = run(&json!({"path": ".."}), &ws, PiVersion::V0_73).unwrap_err();
        assert!(err.contains("outside the workspace"), "{err}");
        // Listing the root shows the file but not the link it cannot follow.
        assert_eq!(text(&run(&json!({}), &ws, PiVersion::V0_73).unwrap()), "f");
    }
}
