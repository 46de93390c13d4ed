//! How far an extension's requests may be met for one user: the grants given without asking,
//! and the ceiling an approval may not pass (the operator's policy). A grant is never wider
//! than the policy: `serve` refuses a config that says otherwise, and an approval only ever
//! adds requested items the ceiling covers.

use std::path::{Path, PathBuf};

use super::request::{Item, Kind, Requests};
use crate::Grants;

/// What an approval may add to the grants.
#[derive(Debug, Clone)]
pub enum Ceiling {
    /// Nothing: no prompt (RPC, headless runs, a served extension without a policy).
    Grants,
    /// At most these (the operator's policy for this user and extension).
    Policy(Grants),
    /// Whatever the extension asks for: the person at the terminal is the operator
    /// (`pichamber run EXT` serving the GUI on loopback).
    Requests,
}

/// One user's access for one extension.
#[derive(Debug, Clone)]
pub struct Access {
    pub grants: Grants,
    pub ceiling: Ceiling,
}

/// A request item that cannot be approved here, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub item: Item,
    pub why: String,
}

/// Where each requested item stands before the user is asked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Assessment {
    /// Given already (by the grants, or approved "always" earlier).
    pub granted: Vec<Item>,
    /// Within the ceiling, not granted: the approval prompt offers these.
    pub pending: Vec<Item>,
    pub refused: Vec<Refusal>,
}

impl Access {
    /// Sorts `requests` into granted, pending and refused, and returns the grants the
    /// extension starts with: the given ones plus the `remembered` approvals the ceiling still
    /// covers (for items it still requests).
    pub fn assess(
        &self,
        requests: &Requests,
        remembered: &[Item],
        cwd: &Path,
    ) -> (Grants, Assessment) {
        let mut grants = self.grants.clone();
        let mut out = Assessment::default();
        for item in requests.items() {
            if grants.covers(&item, cwd) {
                out.granted.push(item);
                continue;
            }
            if let Err(why) = self.approvable(&item, cwd) {
                out.refused.push(Refusal { item, why });
            } else if remembered.contains(&item) {
                grants.add(&item, cwd);
                out.granted.push(item);
            } else {
                out.pending.push(item);
            }
        }
        (grants, out)
    }

    /// Whether an approval may give `item`.
    fn approvable(&self, item: &Item, cwd: &Path) -> Result<(), String> {
        if let Some(path) = item.path_in(cwd)
            && !path.is_dir()
        {
            return Err(format!(
                "{} is not a directory here",
                if Path::new(&item.value).is_absolute() {
                    item.value.as_str()
                } else {
                    "the requested path"
                }
            ));
        }
        match &self.ceiling {
            Ceiling::Requests => Ok(()),
            Ceiling::Policy(policy) if policy.covers(item, cwd) => Ok(()),
            Ceiling::Policy(_) => Err("the operator's policy does not allow it".into()),
            Ceiling::Grants => Err(format!("not granted (grant it with {})", item.flag())),
        }
    }
}

impl Grants {
    /// Whether these grants give `item` already (paths resolved against `cwd`; a read is
    /// given by a write grant too).
    pub fn covers(&self, item: &Item, cwd: &Path) -> bool {
        let under = |trees: &[PathBuf]| {
            let Some(path) = item.path_in(cwd).and_then(|p| p.canonicalize().ok()) else {
                return false;
            };
            trees.iter().any(|tree| {
                let tree = if tree.is_absolute() {
                    tree.clone()
                } else {
                    cwd.join(tree)
                };
                tree.canonicalize().is_ok_and(|t| path.starts_with(t))
            })
        };
        match item.kind {
            Kind::Read => under(&self.read) || under(&self.write),
            Kind::Write => under(&self.write),
            Kind::Run => self.run.contains(&item.value),
            Kind::Env => self.env.contains(&item.value),
            Kind::Net => self
                .net
                .iter()
                .any(|g| crate::net::pattern_covers(g, &item.value)),
            Kind::ModelKey => self.model_keys.contains(&item.value),
        }
    }

    /// Adds `item` (a path item as its directory on the host).
    pub fn add(&mut self, item: &Item, cwd: &Path) {
        match (item.kind, item.path_in(cwd)) {
            (Kind::Read, Some(path)) => self.read.push(path),
            (Kind::Write, Some(path)) => self.write.push(path),
            (Kind::Run, _) => self.run.push(item.value.clone()),
            (Kind::Env, _) => self.env.push(item.value.clone()),
            (Kind::Net, _) => self.net.push(item.value.clone()),
            (Kind::ModelKey, _) => self.model_keys.push(item.value.clone()),
            _ => {}
        }
    }

    /// The first grant `policy` does not cover, as the flag that would grant it.
    pub fn beyond(&self, policy: &Grants, cwd: &Path) -> Option<String> {
        let path_item = |kind, p: &PathBuf| Item::new(kind, p.to_string_lossy());
        let items = self
            .read
            .iter()
            .map(|p| path_item(Kind::Read, p))
            .chain(self.write.iter().map(|p| path_item(Kind::Write, p)))
            .chain(self.run.iter().map(|v| Item::new(Kind::Run, v.clone())))
            .chain(self.env.iter().map(|v| Item::new(Kind::Env, v.clone())))
            .chain(self.net.iter().map(|v| Item::new(Kind::Net, v.clone())))
            .chain(
                self.model_keys
                    .iter()
                    .map(|v| Item::new(Kind::ModelKey, v.clone())),
            );
        items
            .filter(|item| !policy.covers(item, cwd))
            .map(|item| item.flag())
            .next()
            .or_else(|| {
                // A secret is covered only by the same secret for the same host.
                self.secrets
                    .iter()
                    .find(|s| !policy.secrets.contains(s))
                    .map(|s| format!("--secret {}={}", s.name, s.host))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn requests() -> Requests {
        Requests::parse(&json!({
            "read": ["docs"], "write": ["out"], "run": ["git"], "env": ["TZ"], "net": ["api.github.com"]
        }))
        .unwrap()
    }

    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("docs")).unwrap();
        std::fs::create_dir(dir.path().join("out")).unwrap();
        dir
    }

    fn names(items: &[Item]) -> Vec<String> {
        items.iter().map(Item::to_string).collect()
    }

    #[test]
    fn without_a_ceiling_nothing_is_offered() {
        let ws = workspace();
        let access = Access {
            grants: Grants {
                run: vec!["git".into()],
                write: vec![ws.path().to_path_buf()],
                ..Default::default()
            },
            ceiling: Ceiling::Grants,
        };
        let (grants, a) = access.assess(&requests(), &[], ws.path());
        assert_eq!(names(&a.granted), ["read docs", "write out", "run git"]);
        assert!(a.pending.is_empty());
        assert_eq!(a.refused.len(), 2);
        assert!(
            a.refused[0].why.contains("--allow-env=TZ"),
            "{:?}",
            a.refused
        );
        assert_eq!(grants.run, ["git"]);
    }

    #[test]
    fn the_policy_bounds_what_may_be_approved() {
        let ws = workspace();
        let access = Access {
            grants: Grants::default(),
            ceiling: Ceiling::Policy(Grants {
                read: vec![ws.path().to_path_buf()],
                run: vec!["git".into()],
                net: vec!["*.github.com".into()],
                ..Default::default()
            }),
        };
        let (grants, a) = access.assess(&requests(), &[], ws.path());
        assert!(a.granted.is_empty());
        assert_eq!(
            names(&a.pending),
            ["read docs", "run git", "net api.github.com"]
        );
        // Write is beyond a read-only policy; env is not in it.
        assert_eq!(
            names(&a.refused.iter().map(|r| r.item.clone()).collect::<Vec<_>>()),
            ["write out", "env TZ"]
        );
        assert!(a.refused[0].why.contains("policy"));
        assert!(grants.run.is_empty());

        // Remembered approvals count while the policy still covers them.
        let remembered = [Item::new(Kind::Run, "git"), Item::new(Kind::Env, "TZ")];
        let (grants, a) = access.assess(&requests(), &remembered, ws.path());
        assert_eq!(names(&a.granted), ["run git"]);
        assert_eq!(grants.run, ["git"]);
        assert!(grants.env.is_empty());
    }

    #[test]
    fn a_missing_directory_is_not_offered() {
        let ws = tempfile::tempdir().unwrap();
        let access = Access {
            grants: Grants::default(),
            ceiling: Ceiling::Requests,
        };
        let r = Requests::parse(&json!({ "read": ["nowhere", "."] })).unwrap();
        let (grants, a) = access.assess(&r, &[], ws.path());
        assert_eq!(names(&a.pending), ["read ."]);
        assert!(a.refused[0].why.contains("not a directory"));
        let mut grants = grants;
        grants.add(&a.pending[0], ws.path());
        assert!(grants.covers(&a.pending[0], ws.path()));
    }

    #[test]
    fn grants_beyond_a_policy_are_named() {
        let ws = workspace();
        let policy = Grants {
            read: vec![ws.path().to_path_buf()],
            run: vec!["git".into()],
            ..Default::default()
        };
        let inside = Grants {
            read: vec![ws.path().join("docs")],
            run: vec!["git".into()],
            ..Default::default()
        };
        assert_eq!(inside.beyond(&policy, ws.path()), None);
        let wider = Grants {
            write: vec![ws.path().join("out")],
            ..Default::default()
        };
        assert!(
            wider
                .beyond(&policy, ws.path())
                .unwrap()
                .starts_with("--allow-write=")
        );
        let other = Grants {
            run: vec!["sh".into()],
            ..Default::default()
        };
        assert_eq!(
            other.beyond(&policy, ws.path()).as_deref(),
            Some("--allow-run=sh")
        );
    }

    #[test]
    fn a_request_cannot_climb_out_of_the_policy() {
        let ws = workspace();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.path().join("docs/link")).unwrap();
        let access = Access {
            grants: Grants::default(),
            ceiling: Ceiling::Policy(Grants {
                write: vec![ws.path().join("docs")],
                ..Default::default()
            }),
        };
        let r = Requests::parse(&json!({
            "read": ["docs", "docs/../out", "docs/link", "..", "/"],
            "write": ["docs/./", "docs/../../"]
        }))
        .unwrap();
        let cwd = ws.path();
        let (_, a) = access.assess(&r, &[], cwd);
        assert_eq!(names(&a.pending), ["read docs", "write docs/./"]);
        assert_eq!(
            names(&a.refused.iter().map(|r| r.item.clone()).collect::<Vec<_>>()),
            [
                "read docs/../out",
                "read docs/link",
                "read ..",
                "read /",
                "write docs/../../"
            ]
        );
    }
}
