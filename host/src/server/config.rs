//! `pichamber serve --config FILE`: who may connect (users and their bearer tokens), which
//! extensions each may use, where session files go, and what each extension may reach.
//! TOML (`.toml`) or JSON (anything else that parses as JSON).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;

use crate::capabilities::Grants;

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
    /// The model prompts go to: a script of canned turns, or an OpenAI-compatible endpoint.
    #[serde(default)]
    pub model: Option<ModelConfig>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    pub token: String,
    /// Extensions only this user may use, besides the global ones.
    #[serde(default)]
    pub extensions: Vec<PathBuf>,
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
    /// Run its granted programs unconfined where the kernel cannot confine them (as
    /// `--allow-unconfined-run`).
    #[serde(default)]
    pub unconfined_run: bool,
}

impl From<&GrantConfig> for Grants {
    fn from(g: &GrantConfig) -> Self {
        Grants {
            read: g.read.clone(),
            write: g.write.clone(),
            run: g.run.clone(),
            env: g.env.clone(),
            net: g.net.clone(),
            allow_unconfined_run: g.unconfined_run,
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

fn default_listen() -> String {
    "127.0.0.1:8377".into()
}

impl ServerConfig {
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the config {}", path.display()))?;
        let mut config = Self::parse(&text, path.extension().is_some_and(|e| e == "toml"))
            .with_context(|| format!("config {}", path.display()))?;
        // Relative paths in the file are relative to the file.
        let base = path.parent().unwrap_or(Path::new("."));
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
        let grants = std::mem::take(&mut config.grants);
        config.grants = grants
            .into_iter()
            .map(|(key, mut g)| {
                g.read.iter_mut().for_each(resolve);
                g.write.iter_mut().for_each(resolve);
                let mut key_path = PathBuf::from(&key);
                resolve(&mut key_path);
                (key_path.to_string_lossy().into_owned(), g)
            })
            .collect();
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

    fn check(&self) -> Result<()> {
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
        Ok(())
    }

    /// The grants for the extension at `path` (as resolved), if the config has any.
    pub fn grants_for(&self, path: &Path) -> Option<Grants> {
        self.grants
            .get(path.to_string_lossy().as_ref())
            .map(Grants::from)
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
"#;

    #[test]
    fn toml_and_json_say_the_same() {
        let toml = ServerConfig::parse(TOML, true).unwrap();
        assert_eq!(toml.users.len(), 2);
        assert_eq!(
            toml.users[0].extensions,
            [PathBuf::from("extensions/dialogs")]
        );
        assert_eq!(toml.grants["extensions/card-demo"].run, ["git"]);
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
        let grants = config
            .grants_for(&dir.path().join("extensions/card-demo"))
            .unwrap();
        assert_eq!(grants.read, [dir.path().join("docs")]);
        // Unconfined programs only where the config says so.
        assert!(!grants.allow_unconfined_run);
        let dialogs = config.grants_for(&dir.path().join("extensions/dialogs"));
        assert!(dialogs.unwrap().allow_unconfined_run);
    }
}
