//! The files of a package an extension reads as files at run time (its README, prompt and
//! agent definitions, templates, its package.json): they go into the artifact, and the
//! guest's `node:fs` serves them read-only at their `/ext/...` paths, where the extension's
//! `import.meta.url` and `__dirname` point. Only text, outside `node_modules` and hidden
//! folders, and bounded in size; code only when the bundle did not take it as a module and the
//! package's own code names the file (a script it reads to inject into a page, say), since
//! code is otherwise bundled, or only read by tools.

use std::path::Path;

/// Modules the host hands the guest with this prefix on their id are package files, served
/// at the path after it (wit/v0.2.0, `module-source`).
pub const FILE_ID_PREFIX: &str = "file:";

/// The largest file taken; a bigger one is left out (and the build says so).
const MAX_FILE: u64 = 1 << 20;
/// All files of one package together.
const MAX_TOTAL: usize = 8 << 20;
/// Files of one package.
const MAX_FILES: usize = 2000;

/// Extensions of code: bundled as modules, or read as text when the package's code names them.
const CODE: &[&str] = &["ts", "tsx", "mts", "cts", "js", "jsx", "mjs", "cjs"];
/// Extensions of what only tools read.
const SKIPPED: &[&str] = &["map", "wasm", "node"];

/// One file, by its `/ext/...` path.
#[derive(Debug, Clone, PartialEq)]
pub struct PackageFile {
    pub path: String,
    pub text: String,
}

/// The package's files under `root`, sorted by path, and what was left out and why.
/// `read_as_text` says of a code file whether the extension reads it as a file.
pub fn collect(
    root: &Path,
    read_as_text: &dyn Fn(&Path) -> bool,
) -> (Vec<PackageFile>, Vec<String>) {
    let mut files = Vec::new();
    let mut left_out = Vec::new();
    let mut total = 0;
    let walked = Walk { root, read_as_text };
    walked.walk(root, &mut files, &mut left_out, &mut total);
    files.sort_by(|a, b| a.path.cmp(&b.path));
    (files, left_out)
}

struct Walk<'a> {
    root: &'a Path,
    read_as_text: &'a dyn Fn(&Path) -> bool,
}

impl Walk<'_> {
    fn walk(
        &self,
        dir: &Path,
        files: &mut Vec<PackageFile>,
        left_out: &mut Vec<String>,
        total: &mut usize,
    ) {
        let root = self.root;
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = read.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "node_modules" {
                continue;
            }
            // Links are not followed: a package's files are what is inside it.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let path = entry.path();
            if kind.is_dir() {
                self.walk(&path, files, left_out, total);
                continue;
            }
            let extension = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            let skipped = SKIPPED.contains(&extension)
                || (CODE.contains(&extension) && !(self.read_as_text)(&path));
            if !kind.is_file() || skipped {
                continue;
            }
            let Ok(rel) = path.strip_prefix(root) else {
                continue;
            };
            let shown = rel.to_string_lossy().replace('\\', "/");
            let size = entry.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
            if size > MAX_FILE && looks_binary(&path) {
                continue;
            }
            if size > MAX_FILE {
                left_out.push(format!(
                    "{shown} ({size} bytes; files over {MAX_FILE} bytes are not packaged)"
                ));
                continue;
            }
            let Ok(bytes) = std::fs::read(&path) else {
                continue;
            };
            // Binary files (images, fonts) are not served: the boundary carries text.
            let Ok(text) = String::from_utf8(bytes) else {
                continue;
            };
            if files.len() >= MAX_FILES || *total + text.len() > MAX_TOTAL {
                left_out.push(format!(
                    "{shown} (the package's files are over {MAX_FILES} files or {MAX_TOTAL} bytes)"
                ));
                continue;
            }
            *total += text.len();
            files.push(PackageFile {
                path: format!("/ext/{shown}"),
                text,
            });
        }
    }
}

/// Whether a file's first bytes are not UTF-8 text (an image, a font, an archive).
fn looks_binary(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 4096];
    let read = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    // A character cut by the 4 KiB boundary is not a reason (error_len is None then).
    std::str::from_utf8(&head[..read]).is_err_and(|e| e.error_len().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_files_outside_node_modules_and_hidden_folders_are_taken_code_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for (path, bytes) in [
            ("README.md", b"# hi".as_slice()),
            ("agents/scout.md", b"scout"),
            ("package.json", b"{}"),
            ("index.ts", b"export default () => {}"),
            ("client/inject.js", b"document.title = 1"),
            ("scripts/build.js", b"build()"),
            ("node_modules/x/README.md", b"dep"),
            (".git/config", b"x"),
            ("logo.png", &[0xff, 0xd8, 0xff, 0x00]),
        ] {
            let path = root.join(path);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, bytes).unwrap();
        }
        std::fs::write(root.join("huge.txt"), vec![b'a'; MAX_FILE as usize + 1]).unwrap();
        let mut huge_image = vec![0xffu8; MAX_FILE as usize + 1];
        huge_image[0] = 0x89;
        std::fs::write(root.join("banner.png"), huge_image).unwrap();
        // index.ts is bundled; the extension reads client/inject.js as text.
        let read_as_text = |p: &Path| p.ends_with("client/inject.js");
        let (files, left_out) = collect(root, &read_as_text);
        let paths: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "/ext/README.md",
                "/ext/agents/scout.md",
                "/ext/client/inject.js",
                "/ext/package.json"
            ]
        );
        assert_eq!(files[1].text, "scout");
        assert_eq!(left_out.len(), 1);
        assert!(left_out[0].starts_with("huge.txt ("), "{left_out:?}");
    }
}
