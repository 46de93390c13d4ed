//! The entries of a package's `pi` manifest (`"extensions": ["./extensions/*.ts",
//! "!**/legacy.ts"]`) read as pi 1.6.0's package manager reads them: plain entries are paths,
//! entries with `*` or `?` are globs over the package (hidden files and folders never match),
//! and `!pattern`, `+path`, `-path` then exclude, force back in and force out what was found.

use std::path::{Component, Path, PathBuf};

use globset::{Glob, GlobMatcher};

/// `!x`, `+x` and `-x` entries say what to leave out or keep; they name no files themselves.
pub fn is_override(entry: &str) -> bool {
    entry.starts_with('!') || entry.starts_with('+') || entry.starts_with('-')
}

/// `*` and `?` make an entry a glob over the package.
pub fn is_glob(entry: &str) -> bool {
    entry.contains('*') || entry.contains('?')
}

/// The paths the non-override entries name, in the manifest's order: a plain entry as it is
/// (it may not exist), a glob's matches sorted by path. A glob pi could not read matches nothing.
pub fn expand(root: &Path, entries: &[&str]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in entries.iter().filter(|e| !is_override(e)) {
        if !is_glob(entry) {
            out.push(normalize_join(root, entry));
            continue;
        }
        let Some(matcher) = matcher(entry) else {
            continue;
        };
        // Walk only below the entry's literal folders: `./extensions/*.ts` reads extensions/.
        let literal: PathBuf = entry
            .trim_start_matches("./")
            .split('/')
            .take_while(|part| !is_glob(part))
            .collect();
        let mut found = Vec::new();
        walk(root, &root.join(&literal), &matcher, &mut found);
        found.sort();
        out.extend(found);
    }
    out
}

/// `paths` less those the override entries turn off, as pi's `applyPatterns` decides: `!glob`
/// excludes what it matches (by path in the package, by name or by absolute path), `+path`
/// brings an exact path back, `-path` removes an exact path whatever else said.
pub fn apply_overrides(paths: Vec<PathBuf>, entries: &[&str], root: &Path) -> Vec<PathBuf> {
    let excludes: Vec<GlobMatcher> = entries
        .iter()
        .filter_map(|e| e.strip_prefix('!'))
        .filter_map(matcher)
        .collect();
    let exact = |prefix: char| -> Vec<String> {
        entries
            .iter()
            .filter_map(|e| e.strip_prefix(prefix))
            .map(|e| e.trim_start_matches("./").to_string())
            .collect()
    };
    let (force_in, force_out) = (exact('+'), exact('-'));
    let names = |path: &Path| -> [String; 3] {
        let rel = path.strip_prefix(root).unwrap_or(path);
        [
            rel.to_string_lossy().into_owned(),
            path.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            path.to_string_lossy().into_owned(),
        ]
    };
    paths
        .into_iter()
        .filter(|path| {
            let [rel, name, abs] = names(path);
            let excluded = excludes
                .iter()
                .any(|m| m.is_match(&rel) || m.is_match(&name) || m.is_match(&abs));
            let exact_hit = |list: &[String]| list.iter().any(|e| *e == rel || *e == abs);
            (!excluded || exact_hit(&force_in)) && !exact_hit(&force_out)
        })
        .collect()
}

/// A minimatch-like matcher: `*` stays within one path segment, `**` crosses them.
fn matcher(pattern: &str) -> Option<GlobMatcher> {
    let pattern = pattern.trim_start_matches("./");
    globset::GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .ok()
        .map(|g: Glob| g.compile_matcher())
}

/// Files and folders under `dir` (symlinked folders are not entered) whose path in the package
/// matches; hidden names are skipped, as pi drops matches with a hidden segment.
fn walk(root: &Path, dir: &Path, matcher: &GlobMatcher, out: &mut Vec<PathBuf>) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in read.flatten() {
        if entry.file_name().to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        if let Ok(rel) = path.strip_prefix(root)
            && matcher.is_match(rel)
        {
            out.push(path.clone());
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(root, &path, matcher, out);
        }
    }
}

/// `dir` joined with an entry such as `./extensions/a/index.ts`, without `.` parts.
pub fn normalize_join(dir: &Path, entry: &str) -> PathBuf {
    dir.join(entry)
        .components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(root: &Path, rel: &str) {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, "").unwrap();
    }

    fn rel(root: &Path, paths: &[PathBuf]) -> Vec<String> {
        paths
            .iter()
            .map(|p| p.strip_prefix(root).unwrap().to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn globs_expand_sorted_without_hidden_matches_and_overrides_apply_as_in_pi() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for f in [
            "extensions/b.ts",
            "extensions/a.ts",
            "extensions/legacy.ts",
            "extensions/keep.ts",
            "extensions/.hidden.ts",
            "extensions/.cache/c.ts",
            "extensions/deep/d.ts",
            "tools/x.ts",
        ] {
            touch(root, f);
        }
        let entries = [
            "./tools/x.ts",
            "./extensions/*.ts",
            "!legacy.ts",
            "!extensions/keep.ts",
            "+extensions/keep.ts",
            "-tools/x.ts",
        ];
        let expanded = expand(root, &entries);
        assert_eq!(
            rel(root, &expanded),
            [
                "tools/x.ts",
                "extensions/a.ts",
                "extensions/b.ts",
                "extensions/keep.ts",
                "extensions/legacy.ts"
            ]
        );
        let kept = apply_overrides(expanded, &entries, root);
        assert_eq!(
            rel(root, &kept),
            ["extensions/a.ts", "extensions/b.ts", "extensions/keep.ts"]
        );
        let deep = expand(root, &["extensions/**/*.ts"]);
        assert!(rel(root, &deep).contains(&"extensions/deep/d.ts".to_string()));
        assert!(!rel(root, &deep).iter().any(|p| p.contains(".cache")));
        assert!(expand(root, &["./nowhere/*.ts"]).is_empty());
    }
}
