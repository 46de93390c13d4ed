//! `pichamber serve --config FILE`: who may connect (users and their bearer tokens), which
//! extensions each may use, where session files go, and what each extension may reach:
//! `grants` are given without asking; `policy` is the most a user may approve when an
//! extension requests more (without a policy entry nothing beyond the grants is offered). Both
//! are per extension, for all users or (under `[[users]]`) for one; a user's policy replaces
//! the global one for that user, a user's grants add to the global ones, and no grant may be
//! wider than the policy that applies (the config is refused).
//! TOML (`.toml`) or JSON (anything else that parses as JSON).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use pichamber_access::Grants;
use pichamber_access::{Access, Ceiling};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct ServerConfig {
    /// Where to listen [default: 127.0.0.1:8377]; port 0 picks a free port.
    #[serde(default = "default_listen")]
    pub listen: String,
    /// Where session files (pi's JSONL) and each user's ui-settings go, one folder per user.
    /// Without it sessions live in memory.
    #[serde(default)]
    pub data_dir: Option<PathBuf>,
    /// The extensions' working directory (ctx.cwd) [default: the current directory].
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Extensions every user may use (paths to sources or built `.wasm`).
    #[serde(default)]
    pub extensions: Vec<PathBuf>,
    pub users: Vec<UserConfig>,
    /// Capabilities granted to an extension, keyed by its path as written in `extensions`.
    #[serde(default)]
    pub grants: BTreeMap<String, GrantConfig>,
    /// The most a user may approve for an extension that requests more (same keys).
    #[serde(default)]
    pub policy: BTreeMap<String, GrantConfig>,
    /// The model prompts go to: a script of canned turns, or an OpenAI-compatible endpoint.
    #[serde(default)]
    pub model: Option<ModelConfig>,
    /// Extension instances the server holds at once (each session's extensions and their
    /// workers); their slots are reserved at start [default: 10240].
    #[serde(default = "default_max_instances")]
    pub max_instances: u32,
    /// Run as one node of a cluster: sessions kept on NATS JetStream (docs/CLUSTER.md).
    #[serde(default)]
    pub cluster: Option<crate::cluster::ClusterConfig>,
    /// How long a session waits with nothing to run before its extensions hibernate, their
    /// instances released and their state kept as a few KiB until their next use ("30s",
    /// "5m"; "off" never) [default: 30s].
    #[serde(default)]
    pub hibernate_after: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    pub token: String,
    /// Extensions only this user may use, besides the global ones.
    #[serde(default)]
    pub extensions: Vec<PathBuf>,
    /// Grants for this user only, added to the global ones (same keys as `grants`).
    #[serde(default)]
    pub grants: BTreeMap<String, GrantConfig>,
    /// This user's policy, in place of the global one (same keys).
    #[serde(default)]
    pub policy: BTreeMap<String, GrantConfig>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantConfig {
    #[serde(default)]
    pub read: Vec<PathBuf>,
    #[serde(default)]
    pub write: Vec<PathBuf>,
    #[serde(default)]
    pub run: Vec<String>,
    #[serde(default)]
    pub env: Vec<String>,
    /// Hosts its `fetch` may reach (as `--allow-net`).
    #[serde(default)]
    pub net: Vec<String>,
    /// Model providers whose API key it may read (as `--allow-model-key`).
    #[serde(default)]
    pub model_keys: Vec<String>,
    /// Run its granted programs unconfined where the kernel cannot confine them (as
    /// `--allow-unconfined-run`).
    #[serde(default)]
    pub unconfined_run: bool,
    /// Secrets by reference, `NAME = "host"` (as `--secret NAME=HOST`).
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
}

impl From<&GrantConfig> for Grants {
    fn from(g: &GrantConfig) -> Self {
        Grants {
            read: g.read.clone(),
            write: g.write.clone(),
            run: g.run.clone(),
            env: g.env.clone(),
            net: g.net.clone(),
            model_keys: g.model_keys.clone(),
            allow_unconfined_run: g.unconfined_run,
            secrets: g
                .secrets
                .iter()
                .map(|(name, host)| pichamber_access::secrets::Secret {
                    name: name.clone(),
                    host: host.clone(),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub struct ModelConfig {
    /// A scripted model: a JSON file of canned assistant turns (as `run --script`).
    #[serde(default)]
    pub script: Option<PathBuf>,
    /// An OpenAI-compatible chat-completions endpoint and model id.
    #[serde(default)]
    pub base_url: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
    /// The environment variable holding its API key.
    #[serde(default)]
    pub api_key_env: Option<String>,
}

/// The slots a server may reserve: at 4 GiB of address space each, 16384 take half of
/// what a process can address.
const MAX_INSTANCES: std::ops::RangeInclusive<u32> = 1..=16_384;

fn default_max_instances() -> u32 {
    10_240
}

fn default_listen() -> String {
    "127.0.0.1:8377".into()
}

impl ServerConfig {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the config {}", path.display()))?;
        let mut config = Self::parse(&text, path.extension().is_some_and(|e| e == "toml"))
            .with_context(|| format!("config {}", path.display()))?;
        // Relative paths in the file are relative to the file, and made absolute: the server
        // compares them with the absolute paths of the files it opens (a closed session's
        // file is moved out of `data_dir` only when it lies inside it).
        let path = std::path::absolute(path)
            .with_context(|| format!("cannot locate the config {}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("/"));
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        config.extensions.iter_mut().for_each(resolve);
        for user in &mut config.users {
            user.extensions.iter_mut().for_each(resolve);
        }
        if let Some(dir) = &mut config.data_dir {
            resolve(dir);
        }
        if let Some(dir) = &mut config.cwd {
            resolve(dir);
        }
        if let Some(script) = config.model.as_mut().and_then(|m| m.script.as_mut()) {
            resolve(script);
        }
        let resolve_map = |map: &mut BTreeMap<String, GrantConfig>| {
            *map = std::mem::take(map)
                .into_iter()
                .map(|(key, mut g)| {
                    g.read.iter_mut().for_each(resolve);
                    g.write.iter_mut().for_each(resolve);
                    let mut key_path = PathBuf::from(&key);
                    resolve(&mut key_path);
                    (key_path.to_string_lossy().into_owned(), g)
                })
                .collect();
        };
        resolve_map(&mut config.grants);
        resolve_map(&mut config.policy);
        for user in &mut config.users {
            resolve_map(&mut user.grants);
            resolve_map(&mut user.policy);
        }
        config.check_keys()?;
        Ok(config)
    }

    pub fn parse(text: &str, toml: bool) -> Result<Self> {
        let config: Self = if toml {
            toml::from_str(text)?
        } else {
            serde_json::from_str(text)?
        };
        config.check()?;
        Ok(config)
    }

    /// `hibernate_after` read: `None` when it is "off".
    pub fn hibernate_after(&self) -> Result<Option<std::time::Duration>> {
        let text = self.hibernate_after.as_deref().unwrap_or("30s");
        if text == "off" {
            return Ok(None);
        }
        let after = humantime::parse_duration(text).map_err(|e| {
            anyhow::anyhow!(
                "hibernate_after = {text:?} is not a duration (\"30s\", \"5m\") or \"off\": {e}"
            )
        })?;
        if after.is_zero() {
            bail!("hibernate_after = {text:?}: give a duration above zero, or \"off\"");
        }
        Ok(Some(after))
    }

    fn check(&self) -> Result<()> {
        if let Some(cluster) = &self.cluster {
            cluster.check()?;
        }
        self.hibernate_after()?;
        if !MAX_INSTANCES.contains(&self.max_instances) {
            bail!(
                "max_instances = {}: give {} to {} (each slot reserves 4 GiB of address space)",
                self.max_instances,
                MAX_INSTANCES.start(),
                MAX_INSTANCES.end()
            );
        }
        if self.users.is_empty() {
            bail!("no users: add at least one [[users]] with a name and a token");
        }
        let mut tokens = std::collections::HashSet::new();
        let mut names = std::collections::HashSet::new();
        for user in &self.users {
            if user.token.len() < 16 {
                bail!("user {:?}: a token needs at least 16 characters", user.name);
            }
            if !tokens.insert(&user.token) {
                bail!("user {:?}: two users have the same token", user.name);
            }
            if user.name.is_empty()
                || !user
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                bail!(
                    "user {:?}: a name is letters, digits, - and _ (it names the user's folder)",
                    user.name
                );
            }
            if !names.insert(&user.name) {
                bail!("user {:?} is listed twice", user.name);
            }
        }
        let tables = [&self.grants, &self.policy]
            .into_iter()
            .chain(self.users.iter().flat_map(|u| [&u.grants, &u.policy]));
        for (key, grant) in tables.flat_map(|t| t.iter()) {
            for (name, host) in &grant.secrets {
                pichamber_access::secrets::Secret::parse(&format!("{name}={host}"))
                    .map_err(|e| anyhow::anyhow!("secrets of {key:?}: {e}"))?;
            }
        }
        Ok(())
    }

    /// Every `grants` / `policy` key names a listed extension (a typo would silently grant
    /// nothing, or leave a policy unapplied).
    fn check_keys(&self) -> Result<()> {
        let listed = |key: &str| {
            self.extensions
                .iter()
                .chain(self.users.iter().flat_map(|u| u.extensions.iter()))
                .any(|p| p.to_string_lossy() == key)
        };
        let keys = self
            .grants
            .keys()
            .map(|k| ("grants", k))
            .chain(self.policy.keys().map(|k| ("policy", k)))
            .chain(self.users.iter().flat_map(|u| {
                u.grants
                    .keys()
                    .map(|k| ("grants", k))
                    .chain(u.policy.keys().map(|k| ("policy", k)))
            }));
        for (table, key) in keys {
            if !listed(key) {
                bail!(
                    "[{table}.\"{key}\"] names no extension of the config; its key must be an extensions entry, as written there"
                );
            }
        }
        Ok(())
    }

    /// What `user` may let the extension at `path` (as resolved) reach: the global and the
    /// user's grants, under the user's policy or else the global one. A grant wider than
    /// that policy is an error naming it.
    pub fn access_for(&self, user: &UserConfig, path: &Path, cwd: &Path) -> Result<Access> {
        let key = path.to_string_lossy();
        let mut grants = self
            .grants
            .get(key.as_ref())
            .map(Grants::from)
            .unwrap_or_default();
        if let Some(own) = user.grants.get(key.as_ref()) {
            let own = Grants::from(own);
            grants.read.extend(own.read);
            grants.write.extend(own.write);
            grants.run.extend(own.run);
            grants.env.extend(own.env);
            grants.net.extend(own.net);
            grants.secrets.extend(own.secrets);
            grants.allow_unconfined_run |= own.allow_unconfined_run;
        }
        let policy = user
            .policy
            .get(key.as_ref())
            .or_else(|| self.policy.get(key.as_ref()))
            .map(Grants::from);
        let ceiling = match policy {
            Some(policy) => {
                if let Some(flag) = grants.beyond(&policy, cwd) {
                    bail!(
                        "{}: the grant {flag} for user {:?} is wider than the policy that applies to them; widen the policy or narrow the grant",
                        path.display(),
                        user.name
                    );
                }
                Ceiling::Policy(policy)
            }
            None => Ceiling::Grants,
        };
        Ok(Access { grants, ceiling })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOML: &str = r#"
listen = "127.0.0.1:0"
data_dir = "data"
extensions = ["extensions/card-demo"]

[[users]]
name = "ada"
token = "ada-token-0123456789"
extensions = ["extensions/dialogs"]

[[users]]
name = "bob"
token = "bob-token-0123456789"

[grants."extensions/card-demo"]
read = ["docs"]
run = ["git"]

[grants."extensions/dialogs"]
run = ["git"]
unconfined_run = true
secrets = { GITHUB_TOKEN = "api.github.com" }
"#;

    #[test]
    fn hibernation_defaults_to_thirty_seconds_and_says_what_a_bad_value_lacks() {
        let with = |value: &str| {
            ServerConfig::parse(&format!("hibernate_after = {value:?}\n{TOML}"), true)
        };
        let after = |config: ServerConfig| config.hibernate_after().unwrap();
        assert_eq!(
            after(ServerConfig::parse(TOML, true).unwrap()),
            Some(std::time::Duration::from_secs(30))
        );
        assert_eq!(
            after(with("5m").unwrap()),
            Some(std::time::Duration::from_secs(300))
        );
        assert_eq!(after(with("off").unwrap()), None);
        let refused = format!("{:#}", with("soon").unwrap_err());
        assert!(refused.contains("\"soon\" is not a duration"), "{refused}");
        let refused = format!("{:#}", with("0s").unwrap_err());
        assert!(refused.contains("above zero"), "{refused}");
    }

    #[test]
    fn max_instances_defaults_and_is_bounded() {
        assert_eq!(
            ServerConfig::parse(TOML, true).unwrap().max_instances,
            10_240
        );
        let with = |n: u32| ServerConfig::parse(&format!("max_instances = {n}\n{TOML}"), true);
        assert_eq!(with(3).unwrap().max_instances, 3);
        for n in [0, 16_385] {
            let refused = format!("{:#}", with(n).unwrap_err());
            assert!(refused.contains("give 1 to 16384"), "{n}: {refused}");
        }
    }

    #[test]
    fn a_cluster_table_is_checked() {
        let with = |table: &str| ServerConfig::parse(&format!("{TOML}\n[cluster]\n{table}"), true);
        let config = with("nats = \"nats://127.0.0.1:4222\"\nnode = \"a-1\"").unwrap();
        let cluster = config.cluster.unwrap();
        assert_eq!(cluster.lease().unwrap(), std::time::Duration::from_secs(10));
        for (table, says) in [
            ("nats = \"n\"\nnode = \"a.b\"", "must be 1-32 letters"),
            (
                "nats = \"n\"\nnode = \"a\"\nlease = \"soon\"",
                "is not a duration",
            ),
            (
                "nats = \"n\"\nnode = \"a\"\nlease = \"1h\"",
                "between 1s and 5m",
            ),
            ("node = \"a\"", "missing field `nats`"),
        ] {
            let refused = format!("{:#}", with(table).unwrap_err());
            assert!(refused.contains(says), "{table}: {refused}");
        }
    }

    #[test]
    fn toml_and_json_say_the_same() {
        let toml = ServerConfig::parse(TOML, true).unwrap();
        assert_eq!(toml.users.len(), 2);
        assert_eq!(
            toml.users[0].extensions,
            [PathBuf::from("extensions/dialogs")]
        );
        assert_eq!(toml.grants["extensions/card-demo"].run, ["git"]);
        let dialogs = Grants::from(&toml.grants["extensions/dialogs"]);
        assert_eq!(dialogs.secrets[0].name, "GITHUB_TOKEN");
        assert_eq!(dialogs.secrets[0].host, "api.github.com");
        let bad = TOML.replace(
            "GITHUB_TOKEN = \"api.github.com\"",
            "GITHUB_TOKEN = \"http://x\"",
        );
        let refused = ServerConfig::parse(&bad, true).unwrap_err();
        assert!(
            format!("{refused:#}").contains("is not a host"),
            "{refused:#}"
        );
        let json = ServerConfig::parse(
            r#"{ "users": [{ "name": "ada", "token": "ada-token-0123456789" }], "extensions": ["x.ts"] }"#,
            false,
        )
        .unwrap();
        assert_eq!(json.listen, "127.0.0.1:8377");
        assert_eq!(json.extensions, [PathBuf::from("x.ts")]);
    }

    #[test]
    fn bad_configs_are_refused_with_a_reason() {
        let cases = [
            (r#"{ "users": [] }"#, "no users"),
            (
                r#"{ "users": [{ "name": "a", "token": "short" }] }"#,
                "at least 16",
            ),
            (
                r#"{ "users": [{ "name": "a", "token": "0123456789abcdef" }, { "name": "b", "token": "0123456789abcdef" }] }"#,
                "same token",
            ),
            (
                r#"{ "users": [{ "name": "../x", "token": "0123456789abcdef" }] }"#,
                "letters",
            ),
            (r#"{ "users": [], "listn": "x" }"#, "unknown field"),
        ];
        for (text, expected) in cases {
            let err = format!("{:#}", ServerConfig::parse(text, false).unwrap_err());
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn paths_are_relative_to_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve.toml");
        std::fs::write(&path, TOML).unwrap();
        let config = ServerConfig::load(&path).unwrap();
        assert_eq!(
            config.extensions[0],
            dir.path().join("extensions/card-demo")
        );
        assert_eq!(config.data_dir.clone().unwrap(), dir.path().join("data"));
        // A config named by a relative path gives absolute paths all the same.
        let near = tempfile::tempdir_in(".").unwrap();
        std::fs::write(near.path().join("serve.toml"), TOML).unwrap();
        let name = near.path().file_name().unwrap();
        let relative = ServerConfig::load(&Path::new(name).join("serve.toml")).unwrap();
        let data = relative.data_dir.unwrap();
        assert!(data.is_absolute(), "{}", data.display());
        assert_eq!(data, std::path::absolute(near.path()).unwrap().join("data"));
        let access = config
            .access_for(
                &config.users[1],
                &dir.path().join("extensions/card-demo"),
                dir.path(),
            )
            .unwrap();
        assert_eq!(access.grants.read, [dir.path().join("docs")]);
        assert!(matches!(access.ceiling, Ceiling::Grants));
        // Unconfined programs only where the config says so.
        assert!(!access.grants.allow_unconfined_run);
        let dialogs = config
            .access_for(
                &config.users[0],
                &dir.path().join("extensions/dialogs"),
                dir.path(),
            )
            .unwrap();
        assert!(dialogs.grants.allow_unconfined_run);
    }

    #[test]
    fn policies_are_per_user_and_bound_every_grant() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("work/docs")).unwrap();
        let text = r#"
extensions = ["ext.ts"]
[[users]]
name = "ada"
token = "ada-token-0123456789"
[users.policy."ext.ts"]
run = ["git", "rg"]
read = ["work"]
[users.grants."ext.ts"]
run = ["rg"]

[[users]]
name = "bob"
token = "bob-token-0123456789"

[grants."ext.ts"]
read = ["work/docs"]
[policy."ext.ts"]
read = ["work"]
"#;
        let path = dir.path().join("serve.toml");
        std::fs::write(&path, text).unwrap();
        let config = ServerConfig::load(&path).unwrap();
        let ext = dir.path().join("ext.ts");
        let ada = config
            .access_for(&config.users[0], &ext, dir.path())
            .unwrap();
        assert_eq!(ada.grants.run, ["rg"]);
        assert_eq!(ada.grants.read, [dir.path().join("work/docs")]);
        let Ceiling::Policy(policy) = &ada.ceiling else {
            panic!("ada has a policy")
        };
        assert_eq!(policy.run, ["git", "rg"]);
        let bob = config
            .access_for(&config.users[1], &ext, dir.path())
            .unwrap();
        assert!(bob.grants.run.is_empty());
        let Ceiling::Policy(policy) = &bob.ceiling else {
            panic!("bob has the global policy")
        };
        assert!(policy.run.is_empty());

        // A grant the policy does not cover is refused, naming it.
        std::fs::write(&path, text.replace("run = [\"rg\"]", "run = [\"sh\"]")).unwrap();
        let config = ServerConfig::load(&path).unwrap();
        let err = config
            .access_for(&config.users[0], &ext, dir.path())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--allow-run=sh") && err.contains("ada"),
            "{err}"
        );

        std::fs::write(
            &path,
            text.replace("[policy.\"ext.ts\"]", "[policy.\"ext.js\"]"),
        )
        .unwrap();
        let err = format!("{:#}", ServerConfig::load(&path).unwrap_err());
        assert!(err.contains("names no extension"), "{err}");
    }
}
