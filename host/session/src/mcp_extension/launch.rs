//! How a server is started or reached: the operator's as pi starts them, an extension's as
//! that extension's programs run and its `fetch` reaches hosts.

use super::*;

impl McpExtension {
    /// `auth: {provider}`: the provider's key, as the session's models have it, sent as a
    /// bearer token (pi sends the model registry's). An extension's server gets it only with
    /// `--allow-model-key=PROVIDER`: the key goes wherever that server sends it.
    fn provider_token(&self, provider: &str, grants: Option<&Grants>) -> Result<String, String> {
        if let Some(grants) = grants {
            grants.check_model_key(provider)?;
        }
        match crate::Session::registry_credentials(&self.shared, provider, None).0 {
            Some(key) => Ok(format!("Bearer {key}")),
            None => Err(format!(
                "no API key for provider \"{provider}\" (auth.provider): configure it in models.json or its environment variable"
            )),
        }
    }

    /// How `entry`'s server is reached: its process started (as the operator's, or as the
    /// registering extension's program) or its URL with resolved headers.
    pub(super) async fn launch(
        &self,
        entry: &Entry,
        grants: Option<&Grants>,
    ) -> Result<Launch, String> {
        let cfg = &entry.config;
        let name = &entry.name;
        let timeout = cfg["timeout"]
            .as_f64()
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .map_or(DEFAULT_TIMEOUT, |t| t.min(LONGEST_TIMEOUT));
        let cwd = PathBuf::from(&self.shared.cwd);
        // An extension's values come from its granted environment, never from a shell: an
        // operator's from the host's, as pi reads them.
        let granted = grants.map(Grants::env_pairs);
        let lookup = |var: &str| match &granted {
            Some(pairs) => pairs.iter().find(|(k, _)| k == var).map(|(_, v)| v.clone()),
            None => std::env::var(var).ok(),
        };
        let resolve = |value: String, description: String| {
            let lookup = &lookup;
            async move {
                if grants.is_some() && value.starts_with('!') {
                    return Err(format!(
                        "{description}: a server an extension registers may not run a shell command (\"!...\") for a value"
                    ));
                }
                config::resolve_value(&value, &description, lookup).await
            }
        };
        let transport = if let Some(url) = cfg["url"].as_str() {
            let mut headers = Vec::new();
            for (key, value) in cfg["headers"].as_object().into_iter().flatten() {
                let value = value.as_str().unwrap_or_default().to_owned();
                let description = format!("MCP server \"{name}\" header \"{key}\"");
                headers.push((key.clone(), resolve(value, description).await?));
            }
            if let Some(provider) = cfg["auth"]["provider"].as_str() {
                headers.push((
                    "Authorization".into(),
                    self.provider_token(provider, grants)?,
                ));
            }
            let client = match grants {
                Some(grants) => {
                    Some(pichamber_access::net::pinned_client(grants, url, &mut headers).await?)
                }
                None => None,
            };
            Transport::Http {
                url: url.to_owned(),
                headers,
                client,
            }
        } else {
            let home = std::env::var("HOME").unwrap_or_default();
            let expand = |s: &str| -> String {
                if s == "~" {
                    home.clone()
                } else if let Some(rest) = s.strip_prefix("~/") {
                    format!("{home}/{rest}")
                } else {
                    s.to_owned()
                }
            };
            let command = expand(cfg["command"].as_str().unwrap_or_default());
            let args: Vec<String> = cfg["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(expand)
                .collect();
            let dir = cwd.join(expand(cfg["cwd"].as_str().unwrap_or(".")));
            let mut env = Vec::new();
            for (key, value) in cfg["env"].as_object().into_iter().flatten() {
                let value = value.as_str().unwrap_or_default().to_owned();
                let description = format!("MCP server \"{name}\" env \"{key}\"");
                env.push((key.clone(), resolve(value, description).await?));
            }
            let child = match grants {
                Some(grants) => grants.spawn_program(
                    &ProgramRequest {
                        command: command.clone(),
                        args,
                        cwd: Some(dir.display().to_string()),
                        timeout_ms: None,
                        env,
                    },
                    &self.shared.cwd,
                )?,
                None => operator_process(&command, &args, &dir, &env)?,
            };
            Transport::Stdio(child)
        };
        Ok(Launch {
            server: name.clone(),
            transport,
            timeout,
            cwd,
            log: Some(self.agent_dir.join("mcp.log")),
        })
    }
}

/// A server of the operator's mcp.json, started as pi starts it: the host's environment and
/// the config's, in its own process group, ended with the connection.
fn operator_process(
    command: &str,
    args: &[String],
    dir: &Path,
    env: &[(String, String)],
) -> Result<tokio::process::Child, String> {
    tokio::process::Command::new(command)
        .args(args)
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| match e.kind() {
            // Node's words, which pi shows.
            std::io::ErrorKind::NotFound => format!("spawn {command} ENOENT"),
            std::io::ErrorKind::PermissionDenied => format!("spawn {command} EACCES"),
            _ => format!("spawn {command}: {e}"),
        })
}
