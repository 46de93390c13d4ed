//! The edit tool (pi's core/tools/edit.js): exact-text replacements in one file, matched
//! against the original, keeping its BOM and line endings, with a numbered diff in details
//! (and, as pi 1.6.0 has it, a unified patch; only the touched lines change, each keeping its
//! own line ending).

use std::io::Read;

use serde_json::{Value, json};

use super::ToolOutput;
use super::args::Args;
use pichamber_pi::PiVersion;

use super::edit_diff::{
    apply_edits, apply_replacements_to_original, detect_line_ending, normalize_to_lf,
    restore_line_endings, strip_bom,
};
use super::line_diff::{generate_diff_string, generate_edit_diff};
use super::workspace::{FsError, Workspace, node_code, node_error};

/// pi's `prepareEditArguments`: `edits` sent as a JSON string is parsed; a top-level
/// `oldText`/`newText` pair (the older single-edit form) is appended to `edits`.
pub(crate) fn prepare_arguments(mut args: Value) -> Value {
    let Some(obj) = args.as_object_mut() else {
        return args;
    };
    if let Some(Value::String(s)) = obj.get("edits")
        && let Ok(parsed @ Value::Array(_)) = serde_json::from_str::<Value>(s)
    {
        obj.insert("edits".into(), parsed);
    }
    let (Some(Value::String(old)), Some(Value::String(new))) =
        (obj.get("oldText"), obj.get("newText"))
    else {
        return args;
    };
    let edit = json!({"oldText": old, "newText": new});
    let mut edits = match obj.get("edits") {
        Some(Value::Array(list)) => list.clone(),
        _ => Vec::new(),
    };
    edits.push(edit);
    obj.remove("oldText");
    obj.remove("newText");
    obj.insert("edits".into(), Value::Array(edits));
    args
}

pub(crate) fn run(args: &Value, ws: &Workspace, pi: PiVersion) -> Result<ToolOutput, String> {
    let a = Args::new("edit", args)?;
    let list = match a.raw("edits") {
        Some(Value::Array(list)) if !list.is_empty() => list,
        _ => {
            return Err(
                "Edit tool input is invalid. edits must contain at least one replacement.".into(),
            );
        }
    };
    let path = a.string("path")?;
    let mut edits = Vec::with_capacity(list.len());
    for (i, edit) in list.iter().enumerate() {
        let field = |key: &str| {
            edit.get(key)
                .and_then(Value::as_str)
                .map(str::to_owned)
                .ok_or_else(|| {
                    format!(
                        "Invalid arguments for tool \"edit\": edits[{i}].{key} must be a string"
                    )
                })
        };
        edits.push((field("oldText")?, field("newText")?));
    }

    let r = ws.resolve(&path)?;
    // pi checks access(R_OK | W_OK) first and reports only the error code.
    let could_not = |e: &FsError| match e {
        FsError::Outside => ws.symlink_message(&path),
        FsError::Io(e) => format!("Could not edit file: {path}. Error code: {}.", node_code(e)),
    };
    let meta = ws
        .with(&r, |d, p| d.metadata(p))
        .map_err(|e| could_not(&e))?;
    let mut bytes = Vec::new();
    if meta.is_dir() {
        return Err("EISDIR: illegal operation on a directory, read".into());
    }
    let mut file = ws
        .with(&r, |d, p| {
            d.open_with(p, cap_std::fs::OpenOptions::new().read(true).write(true))
        })
        .map_err(|e| could_not(&e))?;
    file.read_to_end(&mut bytes)
        .map_err(|e| node_error(&e, "read", &r.abs))?;
    drop(file);

    let raw = String::from_utf8_lossy(&bytes);
    let (bom, content) = strip_bom(&raw);
    let normalized = normalize_to_lf(content);
    let applied = apply_edits(&normalized, &edits, &path, pi.is_1_6())?;
    let (details, final_content) = if pi.is_1_6() {
        // Diffed before writing, as pi does, so the diff cannot fail after the write.
        let d = generate_edit_diff(&path, &applied.base, &applied.new, &applied.replacements, 4);
        let text = if content == normalized {
            applied.new
        } else {
            apply_replacements_to_original(content, &applied.replacements)
        };
        let details = json!({"diff": d.diff, "patch": d.patch});
        ((details, d.first_changed), text)
    } else {
        let (diff, first_changed) = generate_diff_string(&applied.base, &applied.new, 4);
        let ending = detect_line_ending(content);
        let text = restore_line_endings(&applied.new, ending);
        ((json!({"diff": diff}), first_changed), text)
    };
    let ((mut details, first_changed), final_content) = (details, format!("{bom}{final_content}"));
    ws.with(&r, |d, p| d.write(p, final_content.as_bytes()))
        .map_err(|e| ws.error_message(&e, &path, "open", &r))?;

    if let Some(line) = first_changed {
        details["firstChangedLine"] = json!(line);
    }
    Ok(ToolOutput::text(
        format!("Successfully replaced {} block(s) in {path}.", edits.len()),
        details,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::open(tmp.path()).unwrap();
        (tmp, ws)
    }

    #[test]
    fn replaces_and_keeps_bom_and_crlf() {
        let (tmp, ws) = setup();
        let f = tmp.path().join("f.txt");
        std::fs::write(&f, "\u{FEFF}one\r\ntwo\r\nthree\r\n").unwrap();
        let out = run(
            &json!({"path": "f.txt", "edits": [{"oldText": "two\n", "newText": "2\n"}]}),
            &ws,
            PiVersion::V0_73,
        )
        .unwrap();
        assert_eq!(
            out.content[0]["text"],
            "Successfully replaced 1 block(s) in f.txt."
        );
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "\u{FEFF}one\r\n2\r\nthree\r\n"
        );
        assert_eq!(out.details["diff"], " 1 one\n-2 two\n+2 2\n 3 three");
        assert_eq!(out.details["firstChangedLine"], 2);
    }

    #[test]
    fn missing_file_empty_edits_and_escapes() {
        let (tmp, ws) = setup();
        let err = run(
            &json!({"path": "nope", "edits": [{"oldText": "a", "newText": "b"}]}),
            &ws,
            PiVersion::V0_73,
        )
        .unwrap_err();
        assert_eq!(err, "Could not edit file: nope. Error code: ENOENT.");
        let err = run(&json!({"path": "nope", "edits": []}), &ws, PiVersion::V0_73).unwrap_err();
        assert_eq!(
            err,
            "Edit tool input is invalid. edits must contain at least one replacement."
        );
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("t"), "a").unwrap();
        std::os::unix::fs::symlink(outside.path().join("t"), tmp.path().join("l")).unwrap();
        let err = run(
            &json!({"path": "l", "edits": [{"oldText": "a", "newText": "b"}]}),
            &ws,
            PiVersion::V0_73,
        )
        .unwrap_err();
        assert!(err.contains("outside the workspace"), "{err}");
        assert_eq!(
            std::fs::read_to_string(outside.path().join("t")).unwrap(),
            "a"
        );
        let err = run(
            &json!({"path": "../t", "edits": [{"oldText": "a", "newText": "b"}]}),
            &ws,
            PiVersion::V0_73,
        )
        .unwrap_err();
        assert!(err.contains("outside the workspace"), "{err}");
    }

    #[test]
    fn prepares_legacy_and_string_arguments() {
        let v = prepare_arguments(json!({"path": "p", "oldText": "a", "newText": "b"}));
        assert_eq!(
            v,
            json!({"path": "p", "edits": [{"oldText": "a", "newText": "b"}]})
        );
        let v = prepare_arguments(
            json!({"path": "p", "edits": "[{\"oldText\":\"a\",\"newText\":\"b\"}]"}),
        );
        assert_eq!(
            v,
            json!({"path": "p", "edits": [{"oldText": "a", "newText": "b"}]})
        );
    }
}
