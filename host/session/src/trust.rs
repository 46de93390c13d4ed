//! pi 1.6.0's project trust, as its RPC and print modes resolve it: whether a working folder's
//! own settings and resources (`.pi/settings.json`, `.pi/extensions`, ..., `.agents/skills`)
//! load. A command-line decision (`--approve` / `--no-approve`) comes first; a folder with no
//! such resources is trusted unless a saved decision says otherwise; else the decision saved in
//! the agent folder's `trust.json` for the folder or its nearest parent; else the
//! `defaultProjectTrust` setting (`"always"` trusts; `"ask"` and `"never"` do not, as nobody
//! can be asked headless).
//!
//! Before those rules, pi 1.6.0 asks the user's and the command line's extensions
//! (`project_trust`, [`Session::project_trust`]): the first that says yes or no decides, and may
//! have the decision saved ([`save_decision`]). The caller loads those extensions in a session
//! of their own first, as pi loads them in a bootstrap pass without the project's.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use crate::Session;

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

/// What the first extension that decided said (`project_trust`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vote {
    /// `trusted: "yes"`; any other decision but "undecided" counts as no, as in pi.
    pub trusted: bool,
    /// `remember: true`: the decision is saved in `trust.json`.
    pub remember: bool,
}

impl Session {
    /// pi 1.6.0's `project_trust` in `cwd`: handlers run in load order until one returns a
    /// decision other than "undecided". A handler that fails is reported as an extension error
    /// of the event and the next one is asked.
    pub async fn project_trust(&mut self, cwd: &Path) -> Option<Vote> {
        let event = json!({ "type": "project_trust", "cwd": cwd.to_string_lossy() });
        let decided = self.emit("project_trust", event).await.ok()?;
        let trusted = decided.get("trusted")?;
        Some(Vote {
            trusted: trusted == "yes",
            remember: decided["remember"] == json!(true),
        })
    }
}

/// Saves `decision` for `cwd` in `agent_dir/trust.json` as pi does: keys are canonical paths,
/// sorted, and the file is written under pi's lock (`trust.json.lock`, a folder made and
/// removed around the change) so that a pi running beside it loses no decision.
pub fn save_decision(agent_dir: &Path, cwd: &Path, decision: bool) -> Result<(), String> {
    let path = agent_dir.join("trust.json");
    let fail = |what: &str, e: &dyn std::fmt::Display| {
        format!(
            "cannot save the trust decision in {}: {what}: {e}",
            path.display()
        )
    };
    std::fs::create_dir_all(agent_dir).map_err(|e| fail("creating the folder", &e))?;
    let lock = agent_dir.join("trust.json.lock");
    let mut attempts = 0;
    while let Err(e) = std::fs::create_dir(&lock) {
        attempts += 1;
        if e.kind() != std::io::ErrorKind::AlreadyExists || attempts == 10 {
            return Err(fail("it is locked by another program", &e));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let saved = (|| {
        let mut store = match std::fs::read_to_string(&path) {
            Ok(text) => match serde_json::from_str::<Value>(text.trim_start_matches('\u{feff}')) {
                Ok(Value::Object(map)) => map,
                Ok(_) => return Err(fail("reading it", &"expected an object")),
                Err(e) => return Err(fail("reading it", &e)),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Default::default(),
            Err(e) => return Err(fail("reading it", &e)),
        };
        let key = canonical(cwd).to_string_lossy().into_owned();
        store.insert(key, Value::Bool(decision));
        // Sorted, as pi writes them.
        let sorted: std::collections::BTreeMap<_, _> = store.into_iter().collect();
        let text = serde_json::to_string_pretty(&sorted).map_err(|e| fail("writing it", &e))?;
        let partial = agent_dir.join("trust.json.partial");
        std::fs::write(&partial, format!("{text}\n")).map_err(|e| fail("writing it", &e))?;
        std::fs::rename(&partial, &path).map_err(|e| fail("writing it", &e))
    })();
    let _ = std::fs::remove_dir(&lock);
    saved
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
        // A saved decision keeps the others, replaces the folder's own, and reads back.
        std::fs::write(agent.join("trust.json"), store.to_string()).unwrap();
        save_decision(&agent, &project, true).unwrap();
        let saved: Value =
            serde_json::from_str(&std::fs::read_to_string(agent.join("trust.json")).unwrap())
                .unwrap();
        assert_eq!(
            saved,
            json!({ work.to_string_lossy(): true, canonical_project.to_string_lossy(): true })
        );
        assert!(
            !agent.join("trust.json.lock").exists(),
            "the lock is released"
        );
        std::fs::write(agent.join("trust.json"), "[1]").unwrap();
        assert!(
            save_decision(&agent, &project, true).is_err(),
            "nothing lost"
        );
        assert_eq!(
            std::fs::read_to_string(agent.join("trust.json")).unwrap(),
            "[1]"
        );
        let err = saved_decision(&agent, &project).unwrap_err();
        assert!(err.contains("expected an object"), "{err}");
    }
}
