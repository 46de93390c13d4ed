//! The extension's own package files (host/artifact/src/package_files.rs), handed over at load
//! as modules whose id is `file:` and their `/ext/...` path: `node:fs` serves them read-only
//! there, where `import.meta.url` and `__dirname` point, so an extension reads its README,
//! templates and agent definitions as in pi. Nothing else is under `/ext`.

use std::cell::RefCell;
use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::hostcall::Args;

pub const FILE_ID_PREFIX: &str = "file:";
const ROOT: &str = "/ext";

thread_local! {
    static FILES: RefCell<BTreeMap<String, String>> = const { RefCell::new(BTreeMap::new()) };
}

/// Takes a package file handed over at load (its id without the prefix).
pub fn add(path: String, text: String) {
    FILES.with(|f| f.borrow_mut().insert(path, text));
}

enum Entry {
    File(usize),
    Folder,
}

fn entry(path: &str) -> Option<Entry> {
    FILES.with(|f| {
        let files = f.borrow();
        if let Some(text) = files.get(path) {
            return Some(Entry::File(text.len()));
        }
        let prefix = format!("{path}/");
        files
            .range(prefix.clone()..)
            .next()
            .filter(|(p, _)| p.starts_with(&prefix))
            .map(|_| Entry::Folder)
    })
}

/// What `node:fs` operation `op` on `path` (normalised) gives when the path is under `/ext`;
/// `None` for any other path.
pub fn serve(op: &str, path: &str, a: &Args) -> Option<Result<Value, String>> {
    if path != ROOT && !path.starts_with("/ext/") {
        return None;
    }
    let missing = |verb: &str| format!("ENOENT: no such file or directory, {verb} '{path}'");
    let read_only = |verb: &str| {
        format!(
            "EROFS: read-only file system, {verb} '{path}' — the extension's own package files can be read, not changed"
        )
    };
    Some(match op {
        "readFile" => match entry(path) {
            Some(Entry::File(_)) => {
                let text = FILES.with(|f| f.borrow().get(path).cloned().unwrap_or_default());
                Ok(if a.str(1) == "bytes" {
                    json!(text.into_bytes())
                } else {
                    Value::String(text)
                })
            }
            Some(Entry::Folder) => Err(format!(
                "EISDIR: illegal operation on a directory, read '{path}'"
            )),
            None => Err(missing("open")),
        },
        "stat" => match entry(path) {
            Some(Entry::File(size)) => Ok(stat(size as u64, false)),
            Some(Entry::Folder) => Ok(stat(0, true)),
            None => Err(missing("stat")),
        },
        "exists" => Ok(Value::Bool(entry(path).is_some())),
        "readdir" => match entry(path) {
            Some(Entry::Folder) => Ok(Value::Array(list(path))),
            Some(Entry::File(_)) => Err(format!("ENOTDIR: not a directory, scandir '{path}'")),
            None => Err(missing("scandir")),
        },
        "realpath" => match entry(path) {
            Some(_) => Ok(Value::String(path.to_owned())),
            None => Err(missing("realpath")),
        },
        "readlink" => Err(format!("EINVAL: invalid argument, readlink '{path}'")),
        "copyFile" => match entry(path) {
            Some(Entry::File(_)) => {
                let text = FILES.with(|f| f.borrow().get(path).cloned().unwrap_or_default());
                let to = a.str(1);
                if to == ROOT || to.starts_with("/ext/") {
                    Err(read_only("copyfile"))
                } else {
                    std::fs::write(&to, text)
                        .map(|()| Value::Null)
                        .map_err(|e| format!("{e}, copyfile '{path}' -> '{to}'"))
                }
            }
            _ => Err(missing("copyfile")),
        },
        "writeFile" => Err(read_only("open")),
        "mkdir" => Err(read_only("mkdir")),
        "rm" | "unlink" => Err(read_only("unlink")),
        "rmdir" => Err(read_only("rmdir")),
        "rename" => Err(read_only("rename")),
        other => Err(format!("ENOSYS: fs.{other} is not supported")),
    })
}

fn stat(size: u64, folder: bool) -> Value {
    json!({
        "size": size,
        "isFile": !folder,
        "isDirectory": folder,
        "isSymbolicLink": false,
        "mtimeMs": 0.0,
        "atimeMs": 0.0,
        "birthtimeMs": 0.0,
        "mode": if folder { 0o40555 } else { 0o100444 },
    })
}

/// The entries of folder `path`: its files and the first segment of deeper paths.
fn list(path: &str) -> Vec<Value> {
    let prefix = format!("{path}/");
    let mut names: BTreeMap<String, bool> = BTreeMap::new();
    FILES.with(|f| {
        for p in f.borrow().keys().filter(|p| p.starts_with(&prefix)) {
            let rest = &p[prefix.len()..];
            match rest.split_once('/') {
                Some((folder, _)) => names.insert(folder.to_owned(), true),
                None => names.insert(rest.to_owned(), false),
            };
        }
    });
    names
        .into_iter()
        .map(|(name, folder)| {
            json!({ "name": name, "isFile": !folder, "isDirectory": folder, "isSymbolicLink": false })
        })
        .collect()
}
