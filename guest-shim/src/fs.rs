//! Filesystem primitives for `node:fs`, over WASI: only the trees the host preopened for this
//! extension exist, so the capability model applies without any check here.
//!
//! Errors read like Node's (`ENOENT: no such file or directory, open '/x'`); the prelude turns
//! the leading code into `err.code`.

use std::fs;
use std::io::{ErrorKind, Write};
use std::time::UNIX_EPOCH;

use serde_json::{Value, json};

use crate::hostcall::Args;

pub fn call(op: &str, a: &Args) -> Result<Value, String> {
    let path = a.str(0);
    if let Some(served) = crate::package_files::serve(op, &normalize(&path), a) {
        return served;
    }
    let fail = |e: std::io::Error| {
        let second = a.opt_str(1).filter(|_| matches!(op, "rename" | "copyFile"));
        let mut text = node_error(&e, op, &path);
        // Say which capability is missing when a path lies outside what was granted.
        let hint = capability_hint(&path, writes(op), reads_folder(op, &path)).or_else(|| {
            second
                .as_deref()
                .and_then(|to| capability_hint(to, true, false))
        });
        if let Some(hint) = hint {
            text = format!(
                "{} — {hint}",
                text.replacen(
                    "ENOENT: no such file or directory",
                    "EACCES: permission denied",
                    1
                )
            );
        }
        text
    };
    // Opening a FIFO blocks until a writer comes, and reading a device may never end: the
    // host cannot interrupt a blocked WASI call, so only regular files are opened.
    if matches!(op, "readFile" | "writeFile" | "copyFile") {
        special_file_refused(&path)?;
        if op == "copyFile" {
            special_file_refused(&a.str(1))?;
        }
    }
    match op {
        "readFile" => {
            let bytes = fs::read(&path).map_err(fail)?;
            Ok(if a.str(1) == "bytes" {
                json!(bytes)
            } else {
                Value::String(String::from_utf8_lossy(&bytes).into_owned())
            })
        }
        "writeFile" => {
            let data: Vec<u8> = match a.value(1) {
                Value::Array(items) => items
                    .iter()
                    .map(|v| v.as_u64().unwrap_or(0) as u8)
                    .collect(),
                Value::String(s) => s.clone().into_bytes(),
                other => other.to_string().into_bytes(),
            };
            let append = a.bool(2);
            let mut file = fs::OpenOptions::new()
                .create(true)
                .write(true)
                .append(append)
                .truncate(!append)
                .open(&path)
                .map_err(fail)?;
            file.write_all(&data).map_err(fail)?;
            Ok(Value::Null)
        }
        "stat" => {
            let meta = if a.bool(1) {
                fs::metadata(&path)
            } else {
                fs::symlink_metadata(&path)
            }
            .map_err(fail)?;
            let ms = |t: std::io::Result<std::time::SystemTime>| {
                t.ok()
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map(|d| d.as_secs_f64() * 1000.0)
                    .unwrap_or(0.0)
            };
            Ok(json!({
                "size": meta.len(),
                "isFile": meta.is_file(),
                "isDirectory": meta.is_dir(),
                "isSymbolicLink": meta.file_type().is_symlink(),
                "mtimeMs": ms(meta.modified()),
                "atimeMs": ms(meta.accessed()),
                "birthtimeMs": ms(meta.created()),
                "mode": if meta.is_dir() { 0o40755 } else if meta.permissions().readonly() { 0o100444 } else { 0o100644 },
            }))
        }
        "exists" => Ok(Value::Bool(fs::symlink_metadata(&path).is_ok())),
        "readdir" => {
            let mut entries = Vec::new();
            for entry in fs::read_dir(&path).map_err(fail)? {
                let entry = entry.map_err(fail)?;
                let kind = entry.file_type().ok();
                entries.push(json!({
                    "name": entry.file_name().to_string_lossy(),
                    "isFile": kind.is_some_and(|k| k.is_file()),
                    "isDirectory": kind.is_some_and(|k| k.is_dir()),
                    "isSymbolicLink": kind.is_some_and(|k| k.is_symlink()),
                }));
            }
            entries.sort_by(|x, y| x["name"].as_str().cmp(&y["name"].as_str()));
            Ok(Value::Array(entries))
        }
        "mkdir" => {
            if a.bool(1) {
                fs::create_dir_all(&path).map_err(fail)?;
            } else {
                fs::create_dir(&path).map_err(fail)?;
            }
            Ok(Value::Null)
        }
        "rm" => {
            let (recursive, force) = (a.bool(1), a.bool(2));
            let result = match fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_dir() => {
                    if recursive {
                        fs::remove_dir_all(&path)
                    } else {
                        fs::remove_dir(&path)
                    }
                }
                Ok(_) => fs::remove_file(&path),
                Err(e) => Err(e),
            };
            match result {
                Err(e) if force && e.kind() == ErrorKind::NotFound => Ok(Value::Null),
                other => other.map(|()| Value::Null).map_err(fail),
            }
        }
        "unlink" => fs::remove_file(&path).map(|()| Value::Null).map_err(fail),
        "rmdir" => fs::remove_dir(&path).map(|()| Value::Null).map_err(fail),
        "rename" => fs::rename(&path, a.str(1))
            .map(|()| Value::Null)
            .map_err(fail),
        "copyFile" => fs::copy(&path, a.str(1)).map(|_| Value::Null).map_err(fail),
        "realpath" => real_path(&path)
            .map(Value::String)
            .map_err(|e| match e.raw_os_error() {
                Some(ELOOP) => {
                    format!("ELOOP: too many symbolic links encountered, realpath '{path}'")
                }
                _ => link_error(fail(e)),
            }),
        "readlink" => fs::read_link(&path)
            .map(|p| Value::String(p.to_string_lossy().into_owned()))
            .map_err(|e| match e.raw_os_error() {
                Some(EINVAL) => format!("EINVAL: invalid argument, readlink '{path}'"),
                _ => link_error(fail(e)),
            }),
        other => Err(format!("ENOSYS: fs.{other} is not supported")),
    }
}

/// WASI's errnos, as std reports them: "invalid argument" (readlink of what is not a link)
/// and "too many symbolic links".
const EINVAL: i32 = 28;
const ELOOP: i32 = 32;
/// Symbolic links followed in one resolution before giving up, as Linux's limit.
const MAX_LINKS: usize = 40;

/// `realpath` within the grants: every symbolic link on the way is followed, component by
/// component. Libc's realpath starts at `/` and so fails unless every ancestor of a grant is
/// granted too; here a folder the guest cannot see is taken as it is named when it holds a
/// grant, since the host opens its grants by their canonical paths (no link among those).
fn real_path(path: &str) -> std::io::Result<String> {
    let mut pending: Vec<String> = path.split('/').rev().map(str::to_owned).collect();
    let mut resolved = String::new();
    let mut links = 0;
    while let Some(part) = pending.pop() {
        match part.as_str() {
            "" | "." => continue,
            ".." => {
                resolved.truncate(resolved.rfind('/').unwrap_or(0));
                continue;
            }
            _ => {}
        }
        let next = format!("{resolved}/{part}");
        match fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links += 1;
                if links > MAX_LINKS {
                    return Err(std::io::Error::from_raw_os_error(ELOOP));
                }
                let target = fs::read_link(&next)?;
                let target = target.to_string_lossy();
                if target.starts_with('/') {
                    resolved.clear();
                }
                pending.extend(target.split('/').rev().map(str::to_owned));
            }
            Ok(_) => resolved = next,
            Err(_) if holds_a_grant(&next) => resolved = next,
            Err(e) => return Err(e),
        }
    }
    Ok(if resolved.is_empty() {
        "/".into()
    } else {
        resolved
    })
}

/// A link refused inside a grant: WASI gives a link's target only when it is relative and stays
/// inside the granted directory, so say that rather than a bare EACCES.
fn link_error(text: String) -> String {
    if text.starts_with("EACCES") && !text.contains(" — ") {
        format!(
            "{text} — a symbolic link on the way points outside the granted directories, or by an absolute path, which an extension does not follow"
        )
    } else {
        text
    }
}

/// Whether `folder` is a grant's ancestor (hidden from the guest, yet certainly a folder).
fn holds_a_grant(folder: &str) -> bool {
    grants()
        .iter()
        .any(|g| g.path.starts_with(&format!("{folder}/")))
}

/// Refuses a path that names something other than a regular file or a folder (a FIFO, a
/// socket, a device); a path that does not exist yet is left to the operation.
fn special_file_refused(path: &str) -> Result<(), String> {
    match fs::metadata(path) {
        Ok(meta) if !meta.is_file() && !meta.is_dir() => Err(format!(
            "EPERM: operation not permitted, open '{path}' — {path} is a FIFO, socket or device: an extension opens only regular files, which cannot block it"
        )),
        _ => Ok(()),
    }
}

/// Whether an operation reads `path` as a folder, so that granting that folder (not the one
/// holding it) is enough: listing it, or a path written as a folder (`dir/`) that is only read.
/// A path of unknown kind is not looked at: outside the grants the guest cannot see it, and
/// the folder holding it covers it either way.
fn reads_folder(op: &str, path: &str) -> bool {
    op == "readdir" || (path.ends_with('/') && !writes(op))
}

/// Whether an operation changes the filesystem (and so needs a writable grant).
fn writes(op: &str) -> bool {
    matches!(
        op,
        "writeFile" | "mkdir" | "rm" | "unlink" | "rmdir" | "rename" | "copyFile"
    )
}

/// A directory tree the host granted (a WASI preopen), and whether it may be written.
struct Grant {
    path: String,
    writable: bool,
}

fn grants() -> &'static [Grant] {
    static GRANTS: std::sync::OnceLock<Vec<Grant>> = std::sync::OnceLock::new();
    GRANTS.get_or_init(|| {
        use wasip2::filesystem::types::DescriptorFlags;
        wasip2::filesystem::preopens::get_directories()
            .into_iter()
            .map(|(descriptor, path)| Grant {
                writable: descriptor
                    .get_flags()
                    .is_ok_and(|f| f.contains(DescriptorFlags::MUTATE_DIRECTORY)),
                path: path.trim_end_matches('/').to_owned(),
            })
            .collect()
    })
}

/// `/a/./b/../c` → `/a/c` (lexically; symlinks are the host's business).
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    format!("/{}", parts.join("/"))
}

/// Names the missing capability and the flag that grants it, when `path` is outside the
/// granted trees (or inside a read-only one and `write` is wanted). The flag names the
/// narrowest folder that would do: `path` itself when it is a `folder` to read, else the
/// folder holding it (a file is read there; an entry is created or removed in it).
pub(crate) fn capability_hint(path: &str, write: bool, folder: bool) -> Option<String> {
    if !path.starts_with('/') {
        return None;
    }
    let path = normalize(path);
    let inside = grants()
        .iter()
        .filter(|g| {
            g.path.is_empty() || path == g.path || path.starts_with(&format!("{}/", g.path))
        })
        .max_by_key(|g| g.path.len());
    let grant = if folder {
        path.clone()
    } else {
        path.rsplit_once('/')
            .map(|(d, _)| if d.is_empty() { "/" } else { d })
            .unwrap_or("/")
            .to_owned()
    };
    match inside {
        None if write => Some(format!(
            "{path} is outside the directories this extension may write: grant it with --allow-write={grant}"
        )),
        None => Some(format!(
            "{path} is outside the directories this extension may read: grant it with --allow-read={grant}"
        )),
        Some(g) if write && !g.writable => Some(format!(
            "{} is granted read-only: grant writing with --allow-write={grant}",
            g.path
        )),
        Some(_) => None,
    }
}

fn node_error(error: &std::io::Error, op: &str, path: &str) -> String {
    let (code, text) = match error.kind() {
        ErrorKind::NotFound => ("ENOENT", "no such file or directory"),
        ErrorKind::PermissionDenied => ("EACCES", "permission denied"),
        ErrorKind::AlreadyExists => ("EEXIST", "file already exists"),
        ErrorKind::NotADirectory => ("ENOTDIR", "not a directory"),
        ErrorKind::IsADirectory => ("EISDIR", "illegal operation on a directory"),
        ErrorKind::DirectoryNotEmpty => ("ENOTEMPTY", "directory not empty"),
        ErrorKind::ReadOnlyFilesystem => ("EROFS", "read-only file system"),
        _ => ("EIO", "i/o error"),
    };
    let syscall = match op {
        "readFile" | "writeFile" => "open",
        "readdir" => "scandir",
        other => other,
    };
    format!("{code}: {text}, {syscall} '{path}' ({error})")
}
