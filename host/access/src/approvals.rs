//! Approvals a user gave "always": per extension build (the manifest's source hash, so a
//! changed extension asks again), the items approved. Kept in a JSON file (the user's folder
//! under `serve`'s data_dir, or the local data folder for `pichamber run`), or in memory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::request::Item;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Remembered {
    /// The extension's name when it was approved (for a person reading the file).
    pub extension: String,
    pub items: Vec<Item>,
    pub approved_at: String,
}

#[derive(Debug, Default)]
pub struct ApprovalStore {
    file: Option<PathBuf>,
    by_hash: Mutex<BTreeMap<String, Remembered>>,
}

impl ApprovalStore {
    pub fn in_memory() -> Self {
        Self::default()
    }

    /// The store kept in `file`. An unreadable or malformed file starts empty, with a warning:
    /// forgetting an approval asks again, it never grants more.
    pub fn at(file: PathBuf) -> Self {
        let by_hash = match std::fs::read_to_string(&file) {
            Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                tracing::warn!("ignoring {}: {e}", file.display());
                BTreeMap::new()
            }),
            Err(_) => BTreeMap::new(),
        };
        Self {
            file: Some(file),
            by_hash: Mutex::new(by_hash),
        }
    }

    /// Where `pichamber run` keeps them: `$XDG_DATA_HOME/pichamber/approvals.json`, else
    /// `~/.local/share/pichamber/approvals.json`.
    pub fn local_file() -> Option<PathBuf> {
        let base = std::env::var_os("XDG_DATA_HOME")
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".local/share")))?;
        Some(base.join("pichamber").join("approvals.json"))
    }

    pub fn remembered(&self, source_hash: &str) -> Vec<Item> {
        self.by_hash
            .lock()
            .unwrap()
            .get(source_hash)
            .map(|r| r.items.clone())
            .unwrap_or_default()
    }

    /// Adds `items` to what is remembered for this build, and saves.
    pub fn remember(
        &self,
        source_hash: &str,
        extension: &str,
        items: &[Item],
    ) -> Result<(), String> {
        let mut map = self.by_hash.lock().unwrap();
        let entry = map
            .entry(source_hash.to_owned())
            .or_insert_with(|| Remembered {
                extension: extension.to_owned(),
                items: Vec::new(),
                approved_at: String::new(),
            });
        for item in items {
            if !entry.items.contains(item) {
                entry.items.push(item.clone());
            }
        }
        entry.approved_at =
            humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
        self.save(&map)
    }

    /// Forgets this build's approvals; whether there were any.
    pub fn forget(&self, source_hash: &str) -> Result<bool, String> {
        let mut map = self.by_hash.lock().unwrap();
        let had = map.remove(source_hash).is_some();
        self.save(&map)?;
        Ok(had)
    }

    /// Every remembered approval as JSON (what the file holds): how a cluster shares them.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&*self.by_hash.lock().unwrap()).unwrap_or_default()
    }

    /// Takes every approval from `json` (as [`ApprovalStore::to_json`] writes it) in place of
    /// what is held: another node of a cluster changed them. Malformed JSON changes nothing.
    pub fn replace_from_json(&self, json: &[u8]) -> Result<(), String> {
        let map: BTreeMap<String, Remembered> =
            serde_json::from_slice(json).map_err(|e| format!("malformed approvals: {e}"))?;
        let mut held = self.by_hash.lock().unwrap();
        self.save(&map)?;
        *held = map;
        Ok(())
    }

    fn save(&self, map: &BTreeMap<String, Remembered>) -> Result<(), String> {
        let Some(file) = &self.file else {
            return Ok(());
        };
        let dir = file.parent().unwrap_or(Path::new("."));
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(dir)?;
            // Written aside and renamed: a crash leaves the old file, never half a file.
            let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
            serde_json::to_writer_pretty(&mut tmp, map)?;
            tmp.persist(file).map_err(|e| e.error)?;
            Ok(())
        };
        write().map_err(|e| format!("cannot save the approval to {}: {e}", file.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::request::Kind;

    #[test]
    fn approvals_are_kept_per_build_and_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("ada/approvals.json");
        let store = ApprovalStore::at(file.clone());
        assert!(store.remembered("sha256:a").is_empty());
        let git = Item::new(Kind::Run, "git");
        store
            .remember("sha256:a", "git-cards", std::slice::from_ref(&git))
            .unwrap();
        store
            .remember("sha256:a", "git-cards", std::slice::from_ref(&git))
            .unwrap();
        let again = ApprovalStore::at(file.clone());
        assert_eq!(again.remembered("sha256:a"), [git]);
        assert!(again.remembered("sha256:b").is_empty());
        let shared = ApprovalStore::in_memory();
        shared
            .replace_from_json(again.to_json().as_bytes())
            .unwrap();
        assert_eq!(shared.remembered("sha256:a"), again.remembered("sha256:a"));
        assert!(shared.replace_from_json(b"[1]").is_err());
        assert_eq!(
            shared.remembered("sha256:a").len(),
            1,
            "a malformed update changes nothing"
        );
        assert!(again.forget("sha256:a").unwrap());
        assert!(
            ApprovalStore::at(file.clone())
                .remembered("sha256:a")
                .is_empty()
        );

        std::fs::write(&file, "not json").unwrap();
        assert!(ApprovalStore::at(file).remembered("sha256:a").is_empty());
    }
}
