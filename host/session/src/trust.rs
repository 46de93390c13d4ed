//! pi 1.6.0's project trust, as its RPC and print modes resolve it: whether a working folder's
//! own settings and resources (`.pi/settings.json`, `.pi/extensions`, ..., `.agents/skills`)
//! load. A command-line decision (`--approve` / `--no-approve`) comes first; a folder with no
//! such resources is trusted unless a saved decision says otherwise; else the decision saved in
//! the agent folder's `trust.json` for the folder or its nearest parent; else the
//! `defaultProjectTrust` setting (`"always"` trusts; `"ask"` and `"never"` do not, as nobody
//! can be asked headless).
//!
//! Not here: the `project_trust` event, by which pi lets the user's and the command line's
//! extensions decide before the project's load.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// What, under a folder's `.pi`, needs the folder trusted before it loads.
const PROTECTED: [&str; 8] = [
    "settings.json",
    "mcp.json",
    "extensions",
    "skills",
    "prompts",
    "themes",
    "SYSTEM.md",
    "APPEND_SYSTEM.md",
];

/// Whether `cwd` holds resources that load only once the folder is trusted: a protected entry
/// under `cwd/.pi`, or `.agents/skills` in `cwd` or above it (the user's own `~/.agents/skills`
/// aside).
pub fn needs_trust(cwd: &Path, home: Option<&Path>) -> bool {
    let cwd = canonical(cwd);
    if PROTECTED
        .iter()
        .any(|entry| cwd.join(".pi").join(entry).exists())
    {
        return true;
    }
    let users = home.map(|h| canonical(h).join(".agents/skills"));
    cwd.ancestors().any(|dir| {
        let skills = dir.join(".agents/skills");
        Some(&skills) != users.as_ref() && skills.exists()
    })
}

/// The decision `trust.json` (in `agent_dir`) holds for `cwd` or its nearest parent.
pub fn saved_decision(agent_dir: &Path, cwd: &Path) -> Result<Option<bool>, String> {
    let path = agent_dir.join("trust.json");
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "cannot read the trust store {}: {e}",
                path.display()
            ));
        }
    };
    let store: Value = serde_json::from_str(text.trim_start_matches('\u{feff}'))
        .map_err(|e| format!("cannot read the trust store {}: {e}", path.display()))?;
    let Some(store) = store.as_object() else {
        return Err(format!(
            "invalid trust store {}: expected an object",
            path.display()
        ));
    };
    let cwd = canonical(cwd);
    for dir in cwd.ancestors() {
        let decision = store
            .iter()
            .find(|(key, _)| Path::new(key) == dir)
            .and_then(|(_, v)| v.as_bool());
        if decision.is_some() {
            return Ok(decision);
        }
    }
    Ok(None)
}

/// Whether `cwd` is trusted, as pi 1.6.0 resolves it without asking anyone: `over` is the
/// command line's decision, `settings` the user's settings.json (`defaultProjectTrust`).
pub fn resolve(
    cwd: &Path,
    agent_dir: &Path,
    home: Option<&Path>,
    over: Option<bool>,
    settings: &Value,
) -> Result<bool, String> {
    if let Some(decision) = over {
        return Ok(decision);
    }
    let saved = saved_decision(agent_dir, cwd)?;
    if !needs_trust(cwd, home) {
        return Ok(saved.unwrap_or(true));
    }
    if let Some(decision) = saved {
        return Ok(decision);
    }
    Ok(settings["defaultProjectTrust"] == "always")
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn trust_resolves_as_pi_1_6_resolves_it_headless() {
        let root = tempfile::tempdir().unwrap();
        let (agent, home) = (root.path().join("agent"), root.path().join("home"));
        let project = root.path().join("work/project");
        std::fs::create_dir_all(project.join(".pi")).unwrap();
        std::fs::create_dir_all(&agent).unwrap();
        std::fs::create_dir_all(home.join(".agents/skills")).unwrap();
        let resolve = |over, settings: Value| {
            resolve(&project, &agent, Some(&home), over, &settings).unwrap()
        };
        // A bare .pi needs no trust, so the folder counts as trusted.
        assert!(!needs_trust(&project, Some(&home)));
        assert!(resolve(None, json!({})));
        std::fs::create_dir_all(project.join(".pi/extensions")).unwrap();
        assert!(needs_trust(&project, Some(&home)));
        assert!(!resolve(None, json!({})), "ask: nobody to ask headless");
        assert!(!resolve(None, json!({ "defaultProjectTrust": "never" })));
        assert!(resolve(None, json!({ "defaultProjectTrust": "always" })));
        assert!(resolve(Some(true), json!({})));
        // A decision saved for a parent folder applies; the nearest one wins.
        let work = std::fs::canonicalize(root.path().join("work")).unwrap();
        let canonical_project = std::fs::canonicalize(&project).unwrap();
        let store = json!({ work.to_string_lossy(): true });
        std::fs::write(agent.join("trust.json"), store.to_string()).unwrap();
        assert!(resolve(None, json!({ "defaultProjectTrust": "never" })));
        let store =
            json!({ work.to_string_lossy(): true, canonical_project.to_string_lossy(): false });
        std::fs::write(agent.join("trust.json"), store.to_string()).unwrap();
        assert!(!resolve(None, json!({ "defaultProjectTrust": "always" })));
        assert!(
            resolve(Some(true), json!({})),
            "the command line comes first"
        );
        // .agents/skills above the folder needs trust too; the user's own does not.
        std::fs::remove_dir_all(project.join(".pi/extensions")).unwrap();
        assert!(!needs_trust(&project, Some(&home)));
        std::fs::create_dir_all(root.path().join("work/.agents/skills")).unwrap();
        assert!(needs_trust(&project, Some(&home)));
        std::fs::write(agent.join("trust.json"), "[1]").unwrap();
        let err = saved_decision(&agent, &project).unwrap_err();
        assert!(err.contains("expected an object"), "{err}");
    }
}
