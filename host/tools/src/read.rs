//! The read tool (pi's core/tools/read.js): a text file with 1-indexed offset/limit, head
//! truncation and continuation notices, or an image as an image block.

use std::io::Read;

use serde_json::{Value, json};

use super::args::{Args, js_number, js_truthy};
use super::image;
use super::truncate::{
    DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, LineCount, format_size, truncate_head,
};
use super::workspace::{Workspace, node_error};
use super::{ExecOptions, ToolOutput};

const NON_VISION_NOTE: &str =
    "[Current model does not support images. The image will be omitted from this request.]";

pub(crate) fn run(
    args: &Value,
    ws: &Workspace,
    options: &ExecOptions,
) -> Result<ToolOutput, String> {
    let a = Args::new("read", args)?;
    let path = a.string("path")?;
    let offset = a.opt_number("offset")?;
    let limit = a.opt_number("limit")?;

    let r = ws.resolve_read(&path)?;
    // pi first checks access(R_OK), then reads.
    let mut file = ws
        .with(&r, |d, p| d.open(p))
        .map_err(|e| ws.error_message(&e, &path, "access", &r))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|e| {
        // Node reports a read error without the path (FileHandle.read).
        let msg = node_error(&e, "read", std::path::Path::new(""));
        msg.strip_suffix(" ''").unwrap_or(&msg).to_owned()
    })?;

    if let Some(found) = image::inline_image(&bytes, options.pi) {
        return Ok(read_image(found, options));
    }
    read_text(&bytes, &path, offset, limit, LineCount::of(options.pi))
}

fn read_image(found: image::InlineImage, options: &ExecOptions) -> ToolOutput {
    let note = (options.model_accepts_images == Some(false)).then_some(NON_VISION_NOTE);
    let mime = found.mime;
    let Some(data) = found.data else {
        let mut text = format!("Read image file [{mime}]\n{}", found.omitted);
        if let Some(note) = note {
            text.push('\n');
            text.push_str(note);
        }
        return ToolOutput::text(text, Value::Null);
    };
    let mut text = format!("Read image file [{mime}]");
    for hint in &found.hints {
        text.push('\n');
        text.push_str(hint);
    }
    if let Some(note) = note {
        text.push('\n');
        text.push_str(note);
    }
    ToolOutput {
        content: json!([
            {"type": "text", "text": text},
            {"type": "image", "data": data, "mimeType": mime},
        ]),
        details: Value::Null,
        structured_content: None,
        is_error: false,
    }
}

/// `Array.prototype.slice` bounds for a possibly fractional or negative index.
fn js_index(i: f64, len: usize) -> usize {
    let i = i.trunc();
    if i < 0.0 {
        (len as f64 + i).max(0.0) as usize
    } else {
        i.min(len as f64) as usize
    }
}

fn read_text(
    bytes: &[u8],
    path: &str,
    offset: Option<f64>,
    limit: Option<f64>,
    count: LineCount,
) -> Result<ToolOutput, String> {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.split('\n').collect();
    let total = lines.len();

    let start = if js_truthy(offset) {
        (offset.unwrap_or(0.0) - 1.0).max(0.0)
    } else {
        0.0
    };
    let start_display = start + 1.0;
    if start >= total as f64 {
        return Err(format!(
            "Offset {} is beyond end of file ({total} lines total)",
            offset.map(js_number).unwrap_or_else(|| "undefined".into())
        ));
    }
    let from = js_index(start, total);
    let (selected, user_limited) = match limit {
        Some(limit) => {
            let end = (start + limit).min(total as f64);
            let to = js_index(end, total).max(from);
            (lines[from..to].join("\n"), Some(end - start))
        }
        None => (lines[from..].join("\n"), None),
    };

    let t = truncate_head(&selected, DEFAULT_MAX_LINES, DEFAULT_MAX_BYTES, count);
    let n = js_number;
    if t.first_line_exceeds_limit {
        let size = format_size(lines[from].len());
        let text = format!(
            "[Line {} is {size}, exceeds {} limit. Use bash: sed -n '{}p' {path} | head -c {DEFAULT_MAX_BYTES}]",
            n(start_display),
            format_size(DEFAULT_MAX_BYTES),
            n(start_display),
        );
        return Ok(ToolOutput::text(text, json!({"truncation": t.to_json()})));
    }
    if t.truncated {
        let end_display = start_display + t.output_lines as f64 - 1.0;
        let next = end_display + 1.0;
        let notice = if t.truncated_by == Some("lines") {
            format!(
                "[Showing lines {}-{} of {total}. Use offset={} to continue.]",
                n(start_display),
                n(end_display),
                n(next)
            )
        } else {
            format!(
                "[Showing lines {}-{} of {total} ({} limit). Use offset={} to continue.]",
                n(start_display),
                n(end_display),
                format_size(DEFAULT_MAX_BYTES),
                n(next)
            )
        };
        let text = format!("{}\n\n{notice}", t.content);
        return Ok(ToolOutput::text(text, json!({"truncation": t.to_json()})));
    }
    if let Some(taken) = user_limited
        && start + taken < total as f64
    {
        let remaining = total as f64 - (start + taken);
        let next = start + taken + 1.0;
        let text = format!(
            "{}\n\n[{} more lines in file. Use offset={} to continue.]",
            t.content,
            n(remaining),
            n(next)
        );
        return Ok(ToolOutput::text(text, Value::Null));
    }
    Ok(ToolOutput::text(t.content, Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::image::tests::tiny_png;

    fn setup() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::open(tmp.path()).unwrap();
        (tmp, ws)
    }

    fn text(out: &ToolOutput) -> &str {
        out.content[0]["text"].as_str().unwrap()
    }

    fn read(ws: &Workspace, args: Value) -> Result<ToolOutput, String> {
        run(&args, ws, &ExecOptions::default())
    }

    #[test]
    fn whole_file_offset_and_limit() {
        let (tmp, ws) = setup();
        std::fs::write(tmp.path().join("f.txt"), "one\ntwo\nthree\nfour").unwrap();
        let out = read(&ws, json!({"path": "f.txt"})).unwrap();
        assert_eq!(text(&out), "one\ntwo\nthree\nfour");
        assert_eq!(out.details, Value::Null);

        let out = read(&ws, json!({"path": "f.txt", "offset": 2, "limit": 2})).unwrap();
        assert_eq!(
            text(&out),
            "two\nthree\n\n[1 more lines in file. Use offset=4 to continue.]"
        );
        let out = read(&ws, json!({"path": "f.txt", "offset": 3})).unwrap();
        assert_eq!(text(&out), "three\nfour");

        let err = read(&ws, json!({"path": "f.txt", "offset": 9})).unwrap_err();
        assert_eq!(err, "Offset 9 is beyond end of file (4 lines total)");
    }

    #[test]
    fn line_and_byte_truncation_notices() {
        let (tmp, ws) = setup();
        let many: Vec<String> = (1..=2500).map(|i| format!("line {i}")).collect();
        std::fs::write(tmp.path().join("many.txt"), many.join("\n")).unwrap();
        let out = read(&ws, json!({"path": "many.txt"})).unwrap();
        assert!(
            text(&out).ends_with(
                "line 2000\n\n[Showing lines 1-2000 of 2500. Use offset=2001 to continue.]"
            ),
            "{}",
            &text(&out)[text(&out).len() - 100..]
        );
        assert_eq!(out.details["truncation"]["truncatedBy"], "lines");
        assert_eq!(out.details["truncation"]["outputLines"], 2000);

        let wide: Vec<String> = (0..100).map(|_| "x".repeat(1000)).collect();
        std::fs::write(tmp.path().join("wide.txt"), wide.join("\n")).unwrap();
        let out = read(&ws, json!({"path": "wide.txt"})).unwrap();
        assert!(text(&out).ends_with(
            "\n\n[Showing lines 1-51 of 100 (50.0KB limit). Use offset=52 to continue.]"
        ));

        std::fs::write(tmp.path().join("long.txt"), "y".repeat(60 * 1024)).unwrap();
        let out = read(&ws, json!({"path": "long.txt"})).unwrap();
        assert_eq!(
            text(&out),
            "[Line 1 is 60.0KB, exceeds 50.0KB limit. Use bash: sed -n '1p' long.txt | head -c 51200]"
        );
        assert_eq!(out.details["truncation"]["firstLineExceedsLimit"], true);
    }

    #[test]
    fn images_become_image_blocks() {
        let (tmp, ws) = setup();
        std::fs::write(tmp.path().join("p.png"), tiny_png()).unwrap();
        let out = read(&ws, json!({"path": "p.png"})).unwrap();
        assert_eq!(out.content[0]["text"], "Read image file [image/png]");
        assert_eq!(out.content[1]["type"], "image");
        assert_eq!(out.content[1]["mimeType"], "image/png");
        assert_eq!(out.content[1]["data"], image::base64(&tiny_png()));

        let options = ExecOptions {
            model_accepts_images: Some(false),
            ..Default::default()
        };
        let out = run(&json!({"path": "p.png"}), &ws, &options).unwrap();
        assert_eq!(
            out.content[0]["text"],
            format!("Read image file [image/png]\n{NON_VISION_NOTE}")
        );
    }

    #[test]
    fn missing_files_and_escapes() {
        let (tmp, ws) = setup();
        let err = read(&ws, json!({"path": "nope.txt"})).unwrap_err();
        assert_eq!(
            err,
            format!(
                "ENOENT: no such file or directory, access '{}'",
                tmp.path().join("nope.txt").display()
            )
        );
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), tmp.path().join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("dirlink")).unwrap();
        for p in [
            "link".to_string(),
            "dirlink/secret".into(),
            "../x".into(),
            outside.path().join("secret").display().to_string(),
        ] {
            let err = read(&ws, json!({"path": p})).unwrap_err();
            assert!(err.contains("outside the workspace"), "{p}: {err}");
            assert!(err.contains(&p), "{err}");
        }
    }
}
