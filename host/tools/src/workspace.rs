//! The session's workspace: the one directory tree the file tools may touch.
//!
//! pi resolves a tool's path against its cwd (core/tools/path-utils.js: `@` prefix dropped,
//! Unicode spaces made plain, `~` expanded, relative paths joined and normalised). pichamber
//! keeps that resolution and then confines the result: the path must lie inside the root,
//! and every file operation goes through a `cap_std::fs::Dir` opened on the root, so a
//! symbolic link pointing out of the tree is refused by the kernel-backed resolution rather
//! than by a string check. An absolute symbolic link that lands inside the root is followed
//! (cap-std refuses all absolute links, so that case is resolved here and re-checked).

use std::collections::HashMap;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use cap_std::fs::Dir;

/// A workspace root opened as a capability. Cheap to clone.
#[derive(Clone)]
pub struct Workspace {
    inner: Arc<Inner>,
}

struct Inner {
    /// The root as the caller named it (absolute, normalised): what messages show.
    root: PathBuf,
    /// The root with symbolic links resolved: what absolute paths are also checked against.
    canonical: PathBuf,
    dir: Dir,
    /// Per-file queues so that edits and writes of one file do not interleave (pi's
    /// withFileMutationQueue).
    locks: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
}

/// A tool path resolved inside the workspace.
#[derive(Clone, Debug)]
pub(crate) struct Resolved {
    /// Relative to the root; empty for the root itself. Never contains `..`.
    pub rel: PathBuf,
    /// The root joined with `rel`: the absolute path pi would show in its messages.
    pub abs: PathBuf,
}

impl Resolved {
    /// `rel` as cap-std accepts it (the root itself is `.`).
    pub fn cap_path(&self) -> &Path {
        if self.rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.rel
        }
    }
}

/// Why a file operation failed.
#[derive(Debug)]
pub(crate) enum FsError {
    /// A symbolic link on the way leads out of the workspace.
    Outside,
    Io(io::Error),
}

impl Workspace {
    /// Opens `root` (made absolute against the process's cwd if relative).
    pub fn open(root: &Path) -> io::Result<Self> {
        let absolute = if root.is_absolute() {
            root.to_path_buf()
        } else {
            std::env::current_dir()?.join(root)
        };
        let root = normalize(&absolute);
        let canonical = std::fs::canonicalize(&root)?;
        let dir = Dir::open_ambient_dir(&canonical, cap_std::ambient_authority())?;
        Ok(Workspace {
            inner: Arc::new(Inner {
                root,
                canonical,
                dir,
                locks: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The root as given to [`Workspace::open`], made absolute.
    pub fn root(&self) -> &Path {
        &self.inner.root
    }

    /// pi's `resolveToCwd`, confined: `input` resolved against the root, or the error that
    /// it lies outside.
    pub(crate) fn resolve(&self, input: &str) -> Result<Resolved, String> {
        let expanded = expand_path(input);
        let joined = if Path::new(&expanded).is_absolute() {
            PathBuf::from(&expanded)
        } else {
            self.inner.root.join(&expanded)
        };
        self.confine(&normalize(&joined))
            .ok_or_else(|| self.outside_message(input))
    }

    /// pi's `resolveReadPath`: like [`Workspace::resolve`], then if nothing exists there, the
    /// macOS screenshot spellings (narrow no-break space before AM/PM, curly apostrophe).
    pub(crate) fn resolve_read(&self, input: &str) -> Result<Resolved, String> {
        let resolved = self.resolve(input)?;
        if self.exists(&resolved) {
            return Ok(resolved);
        }
        let abs = resolved.abs.to_string_lossy().into_owned();
        let am_pm = am_pm_variant(&abs);
        let curly = abs.replace('\'', "\u{2019}");
        for variant in [am_pm, curly] {
            if variant == abs {
                continue;
            }
            if let Some(candidate) = self.confine(Path::new(&variant))
                && self.exists(&candidate)
            {
                return Ok(candidate);
            }
        }
        Ok(resolved)
    }

    /// `accessSync(F_OK)`: something is there, following links that stay inside.
    pub(crate) fn exists(&self, r: &Resolved) -> bool {
        self.with(r, |d, p| d.metadata(p)).is_ok()
    }

    fn confine(&self, normalized: &Path) -> Option<Resolved> {
        let rel = normalized
            .strip_prefix(&self.inner.root)
            .or_else(|_| normalized.strip_prefix(&self.inner.canonical))
            .ok()?;
        // `join("")` would add a trailing slash; pi shows the root as is.
        let abs = if rel.as_os_str().is_empty() {
            self.inner.root.clone()
        } else {
            self.inner.root.join(rel)
        };
        Some(Resolved {
            rel: rel.to_path_buf(),
            abs,
        })
    }

    /// The error for a path that resolves outside the root.
    pub(crate) fn outside_message(&self, input: &str) -> String {
        format!(
            "Path \"{input}\" is outside the workspace ({})",
            self.inner.root.display()
        )
    }

    /// The error for a path that reaches outside through a symbolic link.
    pub(crate) fn symlink_message(&self, input: &str) -> String {
        format!(
            "Path \"{input}\" is outside the workspace ({}): a symbolic link on it points out of the workspace",
            self.inner.root.display()
        )
    }

    /// Message for a failed operation on `r` (pi's Node error text for I/O errors).
    pub(crate) fn error_message(
        &self,
        err: &FsError,
        input: &str,
        syscall: &str,
        r: &Resolved,
    ) -> String {
        match err {
            FsError::Outside => self.symlink_message(input),
            FsError::Io(e) => node_error(e, syscall, &r.abs),
        }
    }

    /// Runs `op` on the root capability with `r`'s relative path. An escape through an
    /// absolute symbolic link is retried with the link resolved when it lands inside.
    pub(crate) fn with<T>(
        &self,
        r: &Resolved,
        op: impl Fn(&Dir, &Path) -> io::Result<T>,
    ) -> Result<T, FsError> {
        match op(&self.inner.dir, r.cap_path()) {
            Err(e) if is_escape(&e) => {
                let inside = self.resolve_links_inside(&r.rel).ok_or(FsError::Outside)?;
                let path = if inside.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    inside.as_path()
                };
                op(&self.inner.dir, path).map_err(|e| {
                    if is_escape(&e) {
                        FsError::Outside
                    } else {
                        FsError::Io(e)
                    }
                })
            }
            other => other.map_err(FsError::Io),
        }
    }

    /// `mkdir -p` inside the workspace, following links that stay inside (as Node's
    /// recursive mkdir follows them), with Node's errors: EEXIST when the target is a
    /// non-directory, ENOTDIR when a component on the way is.
    pub(crate) fn create_dir_all(&self, r: &Resolved) -> Result<(), FsError> {
        let components: Vec<_> = r.rel.components().collect();
        let mut prefix = PathBuf::new();
        for (i, component) in components.iter().enumerate() {
            prefix.push(component);
            let step = Resolved {
                rel: prefix.clone(),
                abs: self.inner.root.join(&prefix),
            };
            match self.with(&step, |d, p| d.metadata(p)) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    let errno = if i + 1 == components.len() { 17 } else { 20 };
                    return Err(FsError::Io(io::Error::from_raw_os_error(errno)));
                }
                Err(FsError::Io(e)) if e.kind() == io::ErrorKind::NotFound => {
                    match self.with(&step, |d, p| d.create_dir(p)) {
                        Ok(()) => {}
                        Err(FsError::Io(e)) if e.kind() == io::ErrorKind::AlreadyExists => {
                            // Created meanwhile, or a dangling link: fine only if a directory.
                            match self.with(&step, |d, p| d.metadata(p)) {
                                Ok(m) if m.is_dir() => {}
                                _ => return Err(FsError::Io(e)),
                            }
                        }
                        Err(e) => return Err(e),
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `rel` with symbolic links resolved by the OS, if that lands inside the root. A last
    /// component that does not exist yet (a file about to be written) is kept as is.
    fn resolve_links_inside(&self, rel: &Path) -> Option<PathBuf> {
        let full = self.inner.canonical.join(rel);
        let canonical = match std::fs::canonicalize(&full) {
            Ok(c) => c,
            Err(_) => {
                let parent = std::fs::canonicalize(full.parent()?).ok()?;
                let name = full.file_name()?;
                if std::fs::symlink_metadata(parent.join(name)).is_ok() {
                    // A dangling link: where it points cannot be checked.
                    return None;
                }
                parent.join(name)
            }
        };
        canonical
            .strip_prefix(&self.inner.canonical)
            .ok()
            .map(Path::to_path_buf)
    }

    /// Waits for earlier mutations of the same file to finish (pi's withFileMutationQueue,
    /// keyed like pi by the real path).
    pub(crate) async fn lock_file(&self, r: &Resolved) -> tokio::sync::OwnedMutexGuard<()> {
        let key = std::fs::canonicalize(&r.abs).unwrap_or_else(|_| r.abs.clone());
        let lock = {
            let mut locks = self.inner.locks.lock().unwrap_or_else(|e| e.into_inner());
            locks.entry(key).or_default().clone()
        };
        lock.lock_owned().await
    }
}

fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied
        && e.raw_os_error().is_none()
        && e.to_string().contains("outside of the filesystem")
}

/// pi's `expandPath`: `@` prefix dropped, Unicode spaces made plain, `~` expanded.
fn expand_path(input: &str) -> String {
    let input = input.strip_prefix('@').unwrap_or(input);
    let normalized: String = input
        .chars()
        .map(|c| match c {
            '\u{00A0}' | '\u{2000}'..='\u{200A}' | '\u{202F}' | '\u{205F}' | '\u{3000}' => ' ',
            c => c,
        })
        .collect();
    let home = || {
        std::env::home_dir()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    if normalized == "~" {
        home()
    } else if let Some(rest) = normalized.strip_prefix("~/") {
        format!("{}/{rest}", home())
    } else {
        normalized
    }
}

/// `path.resolve`'s lexical normalisation: `.` dropped, `..` pops (never above `/`).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir => out.push(component),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    out
}

/// macOS writes screenshot names with a narrow no-break space before AM/PM.
fn am_pm_variant(path: &str) -> String {
    static AM_PM: LazyLock<regex::Regex> =
        LazyLock::new(|| regex::Regex::new(r"(?i) (AM|PM)\.").expect("static regex"));
    AM_PM.replace_all(path, "\u{202F}$1.").into_owned()
}

/// An I/O error as Node words it: `ENOENT: no such file or directory, open '/x'`.
pub(crate) fn node_error(err: &io::Error, syscall: &str, path: &Path) -> String {
    let known = err.raw_os_error().and_then(|errno| {
        Some(match errno {
            1 => ("EPERM", "operation not permitted"),
            2 => ("ENOENT", "no such file or directory"),
            5 => ("EIO", "i/o error"),
            13 => ("EACCES", "permission denied"),
            17 => ("EEXIST", "file already exists"),
            20 => ("ENOTDIR", "not a directory"),
            21 => ("EISDIR", "illegal operation on a directory"),
            22 => ("EINVAL", "invalid argument"),
            24 => ("EMFILE", "too many open files"),
            26 => ("ETXTBSY", "text file is busy"),
            27 => ("EFBIG", "file too large"),
            28 => ("ENOSPC", "no space left on device"),
            30 => ("EROFS", "read-only file system"),
            36 => ("ENAMETOOLONG", "name too long"),
            40 => ("ELOOP", "too many symbolic links encountered"),
            _ => return None,
        })
    });
    match known {
        Some((code, text)) => format!("{code}: {text}, {syscall} '{}'", path.display()),
        None => format!("{err}, {syscall} '{}'", path.display()),
    }
}

/// The Node error code of an I/O error (`ENOENT`), for pi's "Error code: X" messages.
pub(crate) fn node_code(err: &io::Error) -> String {
    let msg = node_error(err, "", Path::new(""));
    match msg.split_once(':') {
        Some((code, _)) if code.starts_with('E') && !code.contains(' ') => code.to_owned(),
        _ => err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::open(tmp.path()).unwrap();
        (tmp, ws)
    }

    #[test]
    fn relative_and_absolute_paths_inside_resolve() {
        let (tmp, ws) = ws();
        let r = ws.resolve("a/./b/../c.txt").unwrap();
        assert_eq!(r.rel, Path::new("a/c.txt"));
        assert_eq!(r.abs, tmp.path().join("a/c.txt"));
        let abs = tmp.path().join("x/y");
        let r = ws.resolve(abs.to_str().unwrap()).unwrap();
        assert_eq!(r.rel, Path::new("x/y"));
        assert_eq!(ws.resolve("@x").unwrap().rel, Path::new("x"));
        assert_eq!(ws.resolve(".").unwrap().rel, Path::new(""));
        // Going up and back down into the root is still inside, as path.resolve has it.
        let name = tmp.path().file_name().unwrap().to_str().unwrap();
        assert_eq!(
            ws.resolve(&format!("../{name}/z")).unwrap().rel,
            Path::new("z")
        );
    }

    #[test]
    fn escapes_are_refused_with_the_path_named() {
        let (_tmp, ws) = ws();
        for input in ["..", "../x", "a/../../x", "/etc/passwd", "/"] {
            let err = ws.resolve(input).unwrap_err();
            assert!(err.contains(&format!("\"{input}\"")), "{err}");
            assert!(err.contains("outside the workspace"), "{err}");
        }
    }

    #[test]
    fn tilde_must_land_inside() {
        let (_tmp, ws) = ws();
        if std::env::home_dir().is_some() {
            assert!(
                ws.resolve("~/.bashrc")
                    .unwrap_err()
                    .contains("outside the workspace")
            );
        }
    }

    #[test]
    fn symlinks_out_are_refused_and_links_inside_followed() {
        let (tmp, ws) = ws();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::fs::write(tmp.path().join("inside.txt"), "i").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), tmp.path().join("out")).unwrap();
        std::os::unix::fs::symlink(outside.path(), tmp.path().join("outdir")).unwrap();
        std::os::unix::fs::symlink("inside.txt", tmp.path().join("rel")).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("inside.txt"), tmp.path().join("absin"))
            .unwrap();
        let read = |p: &str| {
            let r = ws.resolve(p).unwrap();
            ws.with(&r, |d, p| d.read_to_string(p))
        };
        assert!(matches!(read("out"), Err(FsError::Outside)));
        assert!(matches!(read("outdir/secret"), Err(FsError::Outside)));
        assert_eq!(read("rel").unwrap(), "i");
        assert_eq!(read("absin").unwrap(), "i");
        assert!(matches!(read("missing"), Err(FsError::Io(_))));
    }

    #[test]
    fn node_style_errors() {
        let e = io::Error::from_raw_os_error(2);
        assert_eq!(
            node_error(&e, "open", Path::new("/w/x")),
            "ENOENT: no such file or directory, open '/w/x'"
        );
        assert_eq!(node_code(&e), "ENOENT");
    }

    #[test]
    fn screenshot_spellings() {
        assert_eq!(
            am_pm_variant("/a/Shot 10.00.00 AM.png"),
            "/a/Shot 10.00.00\u{202F}AM.png"
        );
    }
}
