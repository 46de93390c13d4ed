//! The write tool (pi's core/tools/write.js): create or overwrite a file, creating parent
//! directories.

use serde_json::Value;

use super::args::Args;
use super::workspace::{Resolved, Workspace};
use super::{PiVersion, ToolOutput};

pub(crate) fn run(args: &Value, ws: &Workspace, pi: PiVersion) -> Result<ToolOutput, String> {
    let a = Args::new("write", args)?;
    let path = a.string("path")?;
    let content = a.string("content")?;
    let r = ws.resolve(&path)?;

    if let Some(parent) = r.rel.parent().filter(|p| !p.as_os_str().is_empty()) {
        let dir = Resolved {
            rel: parent.to_path_buf(),
            abs: ws.root().join(parent),
        };
        ws.create_dir_all(&dir)
            .map_err(|e| ws.error_message(&e, &path, "mkdir", &dir))?;
    }
    ws.with(&r, |d, p| d.write(p, content.as_bytes()))
        .map_err(|e| ws.error_message(&e, &path, "open", &r))?;
    // pi 0.73.1 reports `content.length`: UTF-16 code units, not bytes; 1.6.0 no size.
    let text = if pi.is_1_6() {
        format!("Successfully wrote to {path}")
    } else {
        format!(
            "Successfully wrote {} bytes to {path}",
            content.encode_utf16().count()
        )
    };
    Ok(ToolOutput::text(text, Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn writes_with_parents_and_refuses_escapes() {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::open(tmp.path()).unwrap();
        let out = run(
            &json!({"path": "a/b/c.txt", "content": "héllo"}),
            &ws,
            PiVersion::V0_73,
        )
        .unwrap();
        assert_eq!(
            out.content[0]["text"],
            "Successfully wrote 5 bytes to a/b/c.txt"
        );
        assert_eq!(
            std::fs::read_to_string(tmp.path().join("a/b/c.txt")).unwrap(),
            "héllo"
        );

        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("f"), tmp.path().join("fl")).unwrap();
        for p in [
            "out/x.txt",
            "out/new/x.txt",
            "fl",
            "../x.txt",
            "/tmp/pichamber-x",
        ] {
            let err = run(&json!({"path": p, "content": "x"}), &ws, PiVersion::V0_73).unwrap_err();
            assert!(err.contains("outside the workspace"), "{p}: {err}");
        }
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);

        // A directory link inside the workspace is followed, as Node's mkdir -p does.
        std::fs::create_dir(tmp.path().join("real")).unwrap();
        std::os::unix::fs::symlink("real", tmp.path().join("alias")).unwrap();
        run(
            &json!({"path": "alias/n/f.txt", "content": ""}),
            &ws,
            PiVersion::V0_73,
        )
        .unwrap();
        assert!(tmp.path().join("real/n/f.txt").exists());
        std::fs::write(tmp.path().join("file"), "").unwrap();
        let err = run(
            &json!({"path": "file/x/y.txt", "content": ""}),
            &ws,
            PiVersion::V0_73,
        )
        .unwrap_err();
        assert_eq!(
            err,
            format!(
                "ENOTDIR: not a directory, mkdir '{}'",
                tmp.path().join("file/x").display()
            )
        );
    }
}
