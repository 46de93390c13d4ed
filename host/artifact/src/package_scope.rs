//! What a build may read. A build runs before any capability applies (on every `pichamber run
//! ext.ts`, for every source a serve config lists), and whatever it bundles the extension can
//! read back at run time; so it reads only the extension's package and the packages that
//! package depends on:
//!
//! - the package folder (a lone file's own folder), its `node_modules` included;
//! - a package a bare import (`name`, `@scope/name/sub`) finds in a `node_modules` folder on
//!   Node's lookup path from the importing file (npm's flat layout puts an installed package's
//!   dependencies beside it);
//! - through a workspace link (a symlink `node_modules/name`), only a folder of the same
//!   workspace (inside the folder that holds that `node_modules`) whose package.json is named
//!   `name`;
//! - inside each of those, only its own files: an `exports` entry, a `../` or a symlink that
//!   leads out of it is refused.
//!
//! Everything else (an absolute path, `../` out of the package, a symlink to elsewhere) is a
//! build error naming the import and this rule.

use std::path::{Path, PathBuf};

/// The folders a build has admitted so far.
pub struct PackageScope {
    /// The extension's package, canonical.
    root: PathBuf,
    /// Packages outside `root` that bare imports reached, canonical, with their names.
    dependencies: Vec<(PathBuf, String)>,
}

impl PackageScope {
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.canonicalize().unwrap_or_else(|_| root.to_path_buf()),
            dependencies: Vec::new(),
        }
    }

    /// Whether the build may read `resolved`, which `specifier` in `importer` resolved to.
    pub fn admit(
        &mut self,
        importer: &Path,
        specifier: &str,
        resolved: &Path,
    ) -> Result<(), String> {
        let file = resolved
            .canonicalize()
            .map_err(|e| format!("cannot read '{specifier}' ({}): {e}", resolved.display()))?;
        if self.contains(&file) {
            return Ok(());
        }
        if let Some(name) = package_name(specifier) {
            let package = self.dependency_folder(importer, name, specifier)?;
            if !file.starts_with(&package) {
                return Err(format!(
                    "'{specifier}' resolves to {}, outside the package {name} it names; {RULE}",
                    file.display()
                ));
            }
            if !self.dependencies.iter().any(|(p, _)| *p == package) {
                self.dependencies.push((package, name.to_owned()));
            }
            return Ok(());
        }
        Err(format!(
            "'{specifier}' resolves to {}, outside the extension's package {}; {RULE}",
            file.display(),
            self.root.display()
        ))
    }

    /// The module id of an admitted file: `/ext/<path in the package>`, or for a dependency
    /// outside it `/ext/_external/<n>/<package name>/<path in that package>` (no host path
    /// reaches the guest).
    pub fn module_id(&self, path: &Path) -> String {
        let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
        if let Ok(rel) = canonical.strip_prefix(&self.root) {
            return format!("/ext/{}", slashes(rel));
        }
        for (n, (dir, name)) in self.dependencies.iter().enumerate() {
            if let Ok(rel) = canonical.strip_prefix(dir) {
                return format!("/ext/_external/{n}/{name}/{}", slashes(rel));
            }
        }
        // Not reached for admitted files; an opaque id all the same.
        format!(
            "/ext/_external/unknown/{}",
            path.file_name()
                .map(|f| f.to_string_lossy().into_owned())
                .unwrap_or_default()
        )
    }

    fn contains(&self, file: &Path) -> bool {
        file.starts_with(&self.root) || self.dependencies.iter().any(|(d, _)| file.starts_with(d))
    }

    /// The folder of dependency `name` as Node finds it from `importer`: the first
    /// `node_modules/name` up the importer's folders, if the rule admits it.
    fn dependency_folder(
        &self,
        importer: &Path,
        name: &str,
        specifier: &str,
    ) -> Result<PathBuf, String> {
        let start = importer.parent().unwrap_or(Path::new("/"));
        for folder in start.ancestors() {
            let candidate = folder.join("node_modules").join(name);
            let Ok(meta) = std::fs::symlink_metadata(&candidate) else {
                continue;
            };
            let target = candidate
                .canonicalize()
                .map_err(|e| format!("cannot read '{specifier}' ({}): {e}", candidate.display()))?;
            if !meta.file_type().is_symlink() {
                // A real folder: the package itself; a symlink inside it is checked by the
                // caller (the file must stay inside `target`).
                return Ok(target);
            }
            // A workspace link: to a package of the same workspace, named as imported.
            let workspace = folder
                .canonicalize()
                .unwrap_or_else(|_| folder.to_path_buf());
            let named = std::fs::read_to_string(target.join("package.json"))
                .ok()
                .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
                .is_some_and(|p| p["name"] == name);
            if target.starts_with(&workspace) && named {
                return Ok(target);
            }
            return Err(format!(
                "'{specifier}': {} links to {}, which is not a package named {name} in the same workspace ({}); {RULE}",
                candidate.display(),
                target.display(),
                workspace.display()
            ));
        }
        Err(format!(
            "'{specifier}' resolves outside the extension's package {}, and not to a package in a node_modules folder; {RULE}",
            self.root.display()
        ))
    }
}

/// What a build may read, said in every refusal.
const RULE: &str = "a build reads only the extension's package and the packages in its node_modules (see SECURITY.md, \"What a build reads\")";

/// The package a bare specifier names (`name`, `@scope/name`), or `None` for a relative or
/// absolute one.
fn package_name(specifier: &str) -> Option<&str> {
    if specifier.starts_with('.') || specifier.starts_with('/') || specifier.is_empty() {
        return None;
    }
    let mut parts = specifier.splitn(3, '/');
    let first = parts.next()?;
    if first.starts_with('@') {
        let second = parts.next()?;
        Some(&specifier[..first.len() + 1 + second.len()])
    } else {
        Some(first)
    }
}

fn slashes(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn bare_specifiers_name_their_package() {
        assert_eq!(package_name("lodash"), Some("lodash"));
        assert_eq!(package_name("lodash/fp/map.js"), Some("lodash"));
        assert_eq!(package_name("@scope/pkg/sub"), Some("@scope/pkg"));
        assert_eq!(package_name("./x"), None);
        assert_eq!(package_name("../x"), None);
        assert_eq!(package_name("/etc/passwd"), None);
    }

    #[test]
    fn the_package_and_its_dependencies_are_in_files_elsewhere_are_not() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        // npm's flat layout: the extension and its dependency side by side.
        let root = t.join("npm/node_modules/ext");
        write(&root.join("index.ts"), "");
        write(&root.join("src/a.ts"), "");
        write(
            &t.join("npm/node_modules/dep/package.json"),
            r#"{"name":"dep"}"#,
        );
        write(&t.join("npm/node_modules/dep/index.js"), "");
        write(&t.join("secret.txt"), "");
        let entry = root.join("index.ts");
        let mut scope = PackageScope::new(&root);
        assert_eq!(
            scope.admit(&entry, "./src/a.ts", &root.join("src/a.ts")),
            Ok(())
        );
        let dep = t.join("npm/node_modules/dep/index.js");
        assert_eq!(scope.admit(&entry, "dep", &dep), Ok(()));
        assert_eq!(scope.module_id(&dep), "/ext/_external/0/dep/index.js");
        assert_eq!(scope.module_id(&root.join("src/a.ts")), "/ext/src/a.ts");
        // The dependency's own relative files are in; a climb out of it is not.
        let climb = scope
            .admit(&dep, "../../../secret.txt", &t.join("secret.txt"))
            .unwrap_err();
        assert!(climb.contains("outside the extension's package"), "{climb}");
        for (specifier, target) in [
            ("../../../secret.txt", t.join("secret.txt")),
            ("/etc/hostname", PathBuf::from("/etc/hostname")),
        ] {
            if !target.exists() {
                continue;
            }
            let refused = scope.admit(&entry, specifier, &target).unwrap_err();
            assert!(refused.contains(RULE), "{refused}");
        }
        // A bare name that resolved to a file of another package (an exports entry that
        // climbs out) is refused.
        let refused = scope
            .admit(&entry, "dep", &t.join("secret.txt"))
            .unwrap_err();
        assert!(refused.contains("outside the package dep"), "{refused}");
    }

    #[test]
    fn a_node_modules_link_admits_only_a_package_of_the_same_workspace() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path().canonicalize().unwrap();
        let root = t.join("repo/packages/ext");
        write(&root.join("index.ts"), "");
        write(
            &t.join("repo/packages/util/package.json"),
            r#"{"name":"@ws/util"}"#,
        );
        write(&t.join("repo/packages/util/index.js"), "");
        write(&t.join("home/.ssh/package.json"), r#"{"name":"keys"}"#);
        write(&t.join("home/.ssh/id_rsa"), "");
        std::fs::create_dir_all(t.join("repo/node_modules/@ws")).unwrap();
        std::os::unix::fs::symlink(
            t.join("repo/packages/util"),
            t.join("repo/node_modules/@ws/util"),
        )
        .unwrap();
        std::os::unix::fs::symlink(t.join("home/.ssh"), t.join("repo/node_modules/keys")).unwrap();
        let entry = root.join("index.ts");
        let mut scope = PackageScope::new(&root);
        let util = t.join("repo/packages/util/index.js");
        assert_eq!(scope.admit(&entry, "@ws/util", &util), Ok(()));
        let refused = scope
            .admit(&entry, "keys/id_rsa", &t.join("home/.ssh/id_rsa"))
            .unwrap_err();
        assert!(
            refused.contains("not a package named keys in the same workspace"),
            "{refused}"
        );
    }
}
