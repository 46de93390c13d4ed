//! Finding a pi user's extensions the way pi 0.73.1 finds them (core/extensions/loader.js,
//! package-manager.js), so `pichamber run` / `pichamber rpc` without an extension argument
//! run an existing set-up sandboxed:
//!
//! 1. project-local `.pi/extensions/` (only when the project is trusted, see below),
//! 2. global `<agent dir>/extensions/` (`PI_CODING_AGENT_DIR`, default `~/.pi/agent`),
//! 3. `extensions` and `packages` of `settings.json` (global, then the project's when trusted).
//!
//! In a folder, an extension is a `*.ts` / `*.js` file, or a subfolder whose `package.json`
//! lists `pi.extensions` or that has an `index.ts` / `index.js`; no deeper. Packages:
//! `npm:name@version` resolves to an installed copy (project `.pi/npm/node_modules`, or the
//! global npm root as pi installs user packages), a plain path to a local package. Nothing
//! is downloaded.
//!
//! A project folder is someone else's code until the operator says otherwise: unlike pi,
//! project-local extensions and project settings load only with `--trust-project`; without
//! it they are listed as skipped.

use std::path::{Path, PathBuf};

use serde_json::Value;

use pichamber_artifact::manifest_entries;

use crate::resources::{Metadata, ResourcePath};

/// What discovery found.
#[derive(Debug, Default, PartialEq)]
pub struct Discovered {
    /// Extension entry points, in pi's load order, without duplicates.
    pub extensions: Vec<PathBuf>,
    /// Project-local entries not loaded because the project is not trusted.
    pub untrusted: Vec<PathBuf>,
    /// Configured entries that could not be found (a package not installed, a missing path).
    pub missing: Vec<String>,
}

/// pi's agent directory: `PI_CODING_AGENT_DIR` (with `~` expanded), else `~/.pi/agent`.
pub fn agent_dir() -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    match std::env::var("PI_CODING_AGENT_DIR") {
        Ok(dir) if !dir.is_empty() => match dir.strip_prefix("~/") {
            Some(rest) => home.join(rest),
            None if dir == "~" => home,
            None => PathBuf::from(dir),
        },
        _ => home.join(".pi").join("agent"),
    }
}

fn is_extension_file(name: &str) -> bool {
    name.ends_with(".ts") || name.ends_with(".js")
}

/// A folder's extensions: the folder itself when its package.json `pi.extensions` lists a
/// path that exists (built and loaded as one unit: SECURITY.md, "the package is the isolation
/// unit"), else its index.ts / index.js. Globs are not expanded here: pi's loader reads these
/// entries as plain paths (only a package, [`package_entries`], expands them).
fn folder_entries(dir: &Path) -> Option<Vec<PathBuf>> {
    if let Some(manifest) = pi_manifest(dir)
        && manifest["extensions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .any(|p| dir.join(p).exists())
    {
        return Some(vec![dir.to_path_buf()]);
    }
    ["index.ts", "index.js"]
        .iter()
        .map(|name| dir.join(name))
        .find(|p| p.exists())
        .map(|p| vec![p])
}

/// An installed package: itself when its manifest names extensions (globs expanded), one unit
/// as in [`folder_entries`]; else its folder's entry points.
fn package_entries(dir: &Path) -> Option<Vec<PathBuf>> {
    pi_manifest(dir)
        .filter(|manifest| !manifest_files(dir, manifest, "extensions").is_empty())
        .map(|_| vec![dir.to_path_buf()])
        .or_else(|| folder_entries(dir))
}

/// The `pi` object of a folder's package.json, if it has one.
fn pi_manifest(dir: &Path) -> Option<Value> {
    std::fs::read_to_string(dir.join("package.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .map(|p| p["pi"].clone())
        .filter(|pi| !pi.is_null())
}

/// The files one kind of a package manifest's entries names: entries expanded, folders read
/// for that kind, then the override entries applied (pi's `addManifestEntries`).
fn manifest_files(root: &Path, manifest: &Value, kind: &str) -> Vec<PathBuf> {
    let entries: Vec<&str> = manifest[kind]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let files = manifest_entries::expand(root, &entries)
        .iter()
        .flat_map(|path| resource_files(path, kind))
        .collect();
    manifest_entries::apply_overrides(files, &entries, root)
}

/// pi's discovery in one folder: files, then subfolders with entries; one level deep.
fn discover_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut entries: Vec<_> = read.flatten().collect();
    // readdir order is the file system's; sort for a stable load order.
    entries.sort_by_key(|e| e.file_name());
    let mut found = Vec::new();
    for entry in entries {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_file() && is_extension_file(&name) {
            found.push(path);
        } else if path.is_dir()
            && let Some(inner) = folder_entries(&path)
        {
            found.extend(inner);
        }
    }
    found
}

fn settings(path: &Path) -> Value {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null)
}

fn resolve_path(p: &str, base: &Path) -> PathBuf {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    if let Some(rest) = p.strip_prefix("~/") {
        home.join(rest)
    } else {
        base.join(p)
    }
}

/// The global npm root (`npm root -g`), where pi installs user-scope npm packages.
fn global_npm_root() -> Option<PathBuf> {
    let out = std::process::Command::new("npm")
        .args(["root", "-g"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let root = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (out.status.success() && !root.is_empty()).then(|| PathBuf::from(root))
}

/// `npm:@scope/name@1.2.3` → `@scope/name`.
fn npm_name(spec: &str) -> &str {
    let spec = spec.trim_start_matches("npm:");
    let at = spec.char_indices().skip(1).find(|(_, c)| *c == '@');
    match at {
        Some((i, _)) => &spec[..i],
        None => spec,
    }
}

struct Collector {
    found: Discovered,
    seen: Vec<PathBuf>,
}

impl Collector {
    fn add(&mut self, paths: Vec<PathBuf>, trusted: bool) {
        for path in paths {
            let key = path.canonicalize().unwrap_or_else(|_| path.clone());
            if self.seen.contains(&key) {
                continue;
            }
            self.seen.push(key);
            if trusted {
                self.found.extensions.push(path);
            } else {
                self.found.untrusted.push(path);
            }
        }
    }

    /// settings.json `extensions` (paths) and `packages` (npm: / local) of one scope.
    fn configured(
        &mut self,
        settings: &Value,
        base: &Path,
        project_npm: Option<&Path>,
        trusted: bool,
    ) {
        for p in settings["extensions"].as_array().into_iter().flatten() {
            let Some(p) = p.as_str() else { continue };
            let path = resolve_path(p, base);
            if path.is_dir() {
                let entries = folder_entries(&path).unwrap_or_else(|| discover_in(&path));
                self.add(entries, trusted);
            } else if path.exists() {
                self.add(vec![path], trusted);
            } else {
                self.found.missing.push(p.to_owned());
            }
        }
        for pkg in settings["packages"].as_array().into_iter().flatten() {
            // A package is a string or { source, ... }.
            let Some(spec) = pkg.as_str().or_else(|| pkg["source"].as_str()) else {
                continue;
            };
            let dir = if spec.starts_with("npm:") {
                let name = npm_name(spec);
                project_npm
                    .map(|root| root.join("node_modules").join(name))
                    .filter(|d| d.is_dir())
                    .or_else(|| global_npm_root().map(|r| r.join(name)))
            } else if spec.starts_with("git:") || spec.contains("://") {
                None
            } else {
                Some(resolve_path(spec, base))
            };
            match dir.filter(|d| d.is_dir()).and_then(|d| package_entries(&d)) {
                Some(entries) => self.add(entries, trusted),
                None => self
                    .found
                    .missing
                    .push(format!("{spec} (not installed; pichamber finds packages pi installed, it does not download them)")),
            }
        }
    }
}

/// Discovers a pi user's extensions for a session in `cwd`.
pub fn discover(cwd: &Path, agent_dir: &Path, trust_project: bool) -> Discovered {
    let mut c = Collector {
        found: Discovered::default(),
        seen: Vec::new(),
    };
    let project = cwd.join(".pi");
    c.add(discover_in(&project.join("extensions")), trust_project);
    c.add(discover_in(&agent_dir.join("extensions")), true);
    c.configured(
        &settings(&agent_dir.join("settings.json")),
        agent_dir,
        None,
        true,
    );
    c.configured(
        &settings(&project.join("settings.json")),
        &project,
        Some(&project.join("npm")),
        trust_project,
    );
    c.found
}

/// What one `-e` source brings, resolved as pi resolves a local package source
/// (package-manager.js): a folder whose package.json has a `pi` manifest gives what that lists;
/// else its `extensions/`, `skills/`, `prompts/` (and `themes/`) folders, when it has any;
/// else the folder (or file) is the extension.
#[derive(Debug, Default, PartialEq)]
pub struct PackageSource {
    /// What to load as extensions (the folder itself when its manifest lists extensions:
    /// the build reads `pi.extensions`).
    pub extensions: Vec<PathBuf>,
    /// Prompt template files.
    pub prompts: Vec<PathBuf>,
    /// Skill files (`SKILL.md`, or `.md` at the top of a skills folder).
    pub skills: Vec<PathBuf>,
}

/// A folder's entries sorted by name, hidden ones and node_modules left out, symlinks
/// followed (broken ones left out): (name, path, is file, is folder).
fn listing(dir: &Path) -> Vec<(String, PathBuf, bool, bool)> {
    let Ok(read) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<_> = read
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || name == "node_modules" {
                return None;
            }
            let meta = std::fs::metadata(e.path()).ok()?;
            Some((name, e.path(), meta.is_file(), meta.is_dir()))
        })
        .collect();
    out.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out
}

/// Every file under `dir` whose name ends with `suffix`, depth first in name order.
fn files_under(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (name, path, is_file, is_dir) in listing(dir) {
        if is_dir {
            out.extend(files_under(&path, suffix));
        } else if is_file && name.ends_with(suffix) {
            out.push(path);
        }
    }
    out
}

/// pi's skill files in a folder: its SKILL.md if it has one; else, walking subfolders, theirs,
/// and at the top the `.md` files too.
fn skill_files(dir: &Path, top: bool) -> Vec<PathBuf> {
    let skill = dir.join("SKILL.md");
    if skill.is_file() {
        return vec![skill];
    }
    let mut out = Vec::new();
    for (name, path, is_file, is_dir) in listing(dir) {
        if top && is_file && name.ends_with(".md") {
            out.push(path);
        } else if is_dir {
            out.extend(skill_files(&path, false));
        }
    }
    out
}

fn resource_files(path: &Path, kind: &str) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    if !path.is_dir() {
        return Vec::new();
    }
    match kind {
        "skills" => skill_files(path, true),
        "prompts" => files_under(path, ".md"),
        _ => folder_entries(path).unwrap_or_else(|| discover_in(path)),
    }
}

/// Resolves one `-e` source (see [`PackageSource`]).
pub fn resolve_source(path: &Path) -> PackageSource {
    if !path.is_dir() {
        return PackageSource {
            extensions: vec![path.to_path_buf()],
            ..Default::default()
        };
    }
    let mut found = PackageSource::default();
    if let Some(manifest) = pi_manifest(path) {
        // The package is one extension however many files pi.extensions names (they load
        // into one instance); when they name nothing, still the package, so that its build
        // says what is wrong.
        let listed = manifest["extensions"].as_array().map_or(0, Vec::len);
        if listed > 0 {
            found.extensions = vec![path.to_path_buf()];
        }
        found.prompts = manifest_files(path, &manifest, "prompts");
        found.skills = manifest_files(path, &manifest, "skills");
        return found;
    }
    let mut any = false;
    for kind in ["extensions", "skills", "prompts", "themes"] {
        let dir = path.join(kind);
        if !dir.exists() {
            continue;
        }
        any = true;
        let files = resource_files(&dir, kind);
        match kind {
            "extensions" => found.extensions = files,
            "skills" => found.skills = files,
            "prompts" => found.prompts = files,
            _ => {}
        }
    }
    if !any {
        found.extensions = vec![path.to_path_buf()];
    }
    found
}

/// The prompt templates and skills of the `-e` sources, with the metadata pi gives package
/// resources; each package's files are read only inside that package.
pub fn source_resources(sources: &[PathBuf]) -> (Vec<ResourcePath>, Vec<ResourcePath>) {
    let mut prompts = Vec::new();
    let mut skills = Vec::new();
    for source in sources {
        if !source.is_dir() {
            continue;
        }
        let resolved = resolve_source(source);
        let base_dir = std::path::absolute(source).unwrap_or_else(|_| source.clone());
        let meta = Metadata {
            source: source.to_string_lossy().into_owned(),
            scope: "temporary".into(),
            origin: "package".into(),
            base_dir: Some(base_dir),
        };
        let confine = source.canonicalize().ok();
        let wrap = |path: PathBuf| ResourcePath {
            path: std::path::absolute(&path).unwrap_or(path),
            meta: meta.clone(),
            confine: confine.clone(),
        };
        prompts.extend(resolved.prompts.into_iter().map(wrap));
        skills.extend(resolved.skills.into_iter().map(wrap));
    }
    (prompts, skills)
}

/// pi's own folders of prompt templates and skills: the project's `.pi/prompts`, `.pi/skills`
/// and `.agents/skills` up to the repository root (only when the project is trusted), then the
/// user's `<agent dir>/prompts`, `<agent dir>/skills` and `~/.agents/skills`.
pub fn user_resources(
    cwd: &Path,
    agent_dir: &Path,
    trust_project: bool,
) -> (Vec<ResourcePath>, Vec<ResourcePath>) {
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    let project = cwd.join(".pi");
    let meta = |scope: &str, base: &Path| Metadata {
        source: "auto".into(),
        scope: scope.into(),
        origin: "top-level".into(),
        base_dir: Some(base.to_path_buf()),
    };
    let wrap = |paths: Vec<PathBuf>, meta: Metadata| -> Vec<ResourcePath> {
        paths
            .into_iter()
            .map(|path| ResourcePath {
                path,
                meta: meta.clone(),
                confine: None,
            })
            .collect()
    };
    let prompt_files = |dir: &Path| -> Vec<PathBuf> {
        listing(dir)
            .into_iter()
            .filter(|(name, _, is_file, _)| *is_file && name.ends_with(".md"))
            .map(|(_, path, _, _)| path)
            .collect()
    };
    let user_agents = home.join(".agents").join("skills");
    let mut prompts = Vec::new();
    let mut skills = Vec::new();
    if trust_project {
        prompts.extend(wrap(
            prompt_files(&project.join("prompts")),
            meta("project", &project),
        ));
        let mut files = skill_files(&project.join("skills"), true);
        let git_root = cwd.ancestors().find(|d| d.join(".git").exists());
        for dir in cwd.ancestors() {
            let agents = dir.join(".agents").join("skills");
            if agents != user_agents {
                files.extend(skill_files(&agents, false));
            }
            if Some(dir) == git_root {
                break;
            }
        }
        skills.extend(wrap(files, meta("project", &project)));
    }
    prompts.extend(wrap(
        prompt_files(&agent_dir.join("prompts")),
        meta("user", agent_dir),
    ));
    let mut files = skill_files(&agent_dir.join("skills"), true);
    files.extend(skill_files(&user_agents, false));
    skills.extend(wrap(files, meta("user", agent_dir)));
    (prompts, skills)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn finds_what_pi_finds_in_pi_order_and_holds_back_an_untrusted_project() {
        let root = tempfile::tempdir().unwrap();
        let agent = root.path().join("agent");
        let cwd = root.path().join("project");
        write(&agent.join("extensions/b.ts"), "");
        write(&agent.join("extensions/a.js"), "");
        write(&agent.join("extensions/notes.md"), "");
        write(&agent.join("extensions/folder/index.ts"), "");
        write(
            &agent.join("extensions/pkg/package.json"),
            r#"{"pi":{"extensions":["./src/one.ts","./src/two.ts","./missing.ts"]}}"#,
        );
        write(&agent.join("extensions/pkg/src/one.ts"), "");
        write(&agent.join("extensions/pkg/src/two.ts"), "");
        write(&agent.join("extensions/empty/readme.txt"), "");
        write(&agent.join("extensions/deep/inner/index.ts"), "");
        write(&root.path().join("elsewhere/x.ts"), "");
        write(
            &agent.join("settings.json"),
            &format!(
                r#"{{"extensions":["{}", "./extensions/b.ts", "/no/such.ts"], "packages":["npm:@nobody/not-installed@1.0.0"]}}"#,
                root.path().join("elsewhere/x.ts").display()
            ),
        );
        write(&cwd.join(".pi/extensions/local.ts"), "");
        write(
            &cwd.join(".pi/settings.json"),
            r#"{"extensions":["./own.ts"]}"#,
        );
        write(&cwd.join(".pi/own.ts"), "");

        let found = discover(&cwd, &agent, false);
        let names: Vec<String> = found
            .extensions
            .iter()
            .map(|p| {
                p.strip_prefix(root.path())
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
        assert_eq!(
            names,
            [
                "agent/extensions/a.js",
                "agent/extensions/b.ts",
                "agent/extensions/folder/index.ts",
                "agent/extensions/pkg",
                "elsewhere/x.ts",
            ]
        );
        assert_eq!(found.untrusted.len(), 2, "{:?}", found.untrusted);
        assert!(found.missing.iter().any(|m| m == "/no/such.ts"));
        assert!(
            found
                .missing
                .iter()
                .any(|m| m.starts_with("npm:@nobody/not-installed@1.0.0"))
        );

        let trusted = discover(&cwd, &agent, true);
        assert!(trusted.untrusted.is_empty());
        assert!(trusted.extensions[0].ends_with(".pi/extensions/local.ts"));
        assert!(trusted.extensions.last().unwrap().ends_with(".pi/own.ts"));
    }

    #[test]
    fn npm_names_drop_the_version() {
        assert_eq!(npm_name("npm:@foo/bar@1.0.0"), "@foo/bar");
        assert_eq!(npm_name("npm:plain@2"), "plain");
        assert_eq!(npm_name("npm:plain"), "plain");
    }

    #[test]
    fn a_package_s_glob_entries_load_every_extension_they_match_as_pi_s_package_manager_does() {
        let dir = tempfile::tempdir().unwrap();
        let pkg = dir.path();
        write(
            &pkg.join("package.json"),
            r#"{"pi":{"extensions":["./extensions/*.ts","!**/old.ts"],"prompts":["./prompts/*.md"]}}"#,
        );
        for f in [
            "extensions/b.ts",
            "extensions/a.ts",
            "extensions/old.ts",
            "extensions/.wip.ts",
        ] {
            write(&pkg.join(f), "");
        }
        write(&pkg.join("prompts/review.md"), "");
        // The package is one extension, whose build reads its entries (tested in the bundler).
        let found = resolve_source(pkg);
        assert_eq!(found.extensions, [pkg.to_path_buf()]);
        assert_eq!(package_entries(pkg), Some(vec![pkg.to_path_buf()]));
        assert_eq!(found.prompts, [pkg.join("prompts/review.md")]);

        // A pattern that matches nothing leaves the package, whose build says so.
        write(
            &pkg.join("package.json"),
            r#"{"pi":{"extensions":["./src/*.ts"]}}"#,
        );
        assert_eq!(resolve_source(pkg).extensions, [pkg.to_path_buf()]);
        // A folder found by discovery reads its entries as plain paths, as pi's loader does.
        assert_eq!(folder_entries(pkg), None);
    }
}
