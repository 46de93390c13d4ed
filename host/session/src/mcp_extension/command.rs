//! `/mcp` outside pi's terminal UI: the servers' status, `reconnect`, and what `login` and
//! `logout` can say without OAuth, each server picked as pi picks it.

use super::*;

const USAGE: &str =
    "Usage: /mcp, /mcp login [server], /mcp logout [server], /mcp reconnect [server]";

impl McpExtension {
    /// pi's `/mcp` outside its terminal UI: the servers' status, or a subcommand.
    pub async fn command(&self, args: &str) {
        let words: Vec<&str> = args.split_whitespace().collect();
        match words.as_slice() {
            [] => {
                let mut started = self.started.clone();
                let _ = started.wait_for(|d| *d).await;
                let status = self.status();
                self.notify(status, "info");
            }
            ["reconnect", rest @ ..] if rest.len() <= 1 => {
                self.reconnect(rest.first().copied()).await
            }
            [action @ ("login" | "logout"), rest @ ..] if rest.len() <= 1 => {
                let none = "No enabled MCP server uses OAuth. Only HTTP servers without an Authorization header do.";
                let preferred = |s: &Server| s.state == Some(State::NeedsAuth);
                let eligible = |s: &Server| s.entry.enabled() && uses_oauth(&s.entry);
                let Some(chosen) = self
                    .pick(rest.first().copied(), eligible, preferred, none)
                    .await
                else {
                    return;
                };
                if *action == "logout" {
                    // pichamber keeps no OAuth credentials.
                    self.notify(
                        format!("No stored credentials for MCP server \"{chosen}\"."),
                        "info",
                    );
                } else {
                    self.notify(
                        format!(
                            "pichamber cannot sign in to MCP servers with OAuth yet: give \"{chosen}\" an Authorization header in mcp.json (\"headers\": {{\"Authorization\": \"Bearer ${{TOKEN}}\"}}), then /mcp reconnect {chosen}."
                        ),
                        "error",
                    );
                }
            }
            _ => self.notify(USAGE, "warning"),
        }
    }

    fn has_server(&self, name: &str) -> bool {
        self.inner
            .lock()
            .unwrap()
            .servers
            .iter()
            .any(|s| s.entry.name == name)
    }

    /// The server a subcommand is for, as pi picks it: the one named (if eligible), else the
    /// only eligible one, else the only preferred one, else the user's choice.
    async fn pick(
        &self,
        name: Option<&str>,
        eligible: impl Fn(&Server) -> bool,
        preferred: impl Fn(&Server) -> bool,
        none: &str,
    ) -> Option<String> {
        let (candidates, preferred) = {
            let inner = self.inner.lock().unwrap();
            let eligible: Vec<&Server> = inner.servers.iter().filter(|s| eligible(s)).collect();
            let names = |servers: Vec<&&Server>| -> Vec<String> {
                servers.iter().map(|s| s.entry.name.clone()).collect()
            };
            (
                names(eligible.iter().collect()),
                names(eligible.iter().filter(|s| preferred(s)).collect()),
            )
        };
        match name {
            Some(name) if !self.has_server(name) => {
                self.notify(format!("No MCP server named \"{name}\"."), "error");
                None
            }
            Some(name) if !candidates.iter().any(|c| c == name) => {
                self.notify(none, "error");
                None
            }
            Some(name) => Some(name.to_owned()),
            None if candidates.is_empty() => {
                self.notify(none, "info");
                None
            }
            None if candidates.len() == 1 => Some(candidates[0].clone()),
            None if preferred.len() == 1 => Some(preferred[0].clone()),
            None => self.select("MCP server", candidates).await,
        }
    }

    async fn reconnect(&self, name: Option<&str>) {
        let Some(chosen) = self
            .pick(
                name,
                |s| s.entry.enabled() && s.state.is_some(),
                |s| matches!(s.state, Some(State::Failed(_))),
                "No enabled MCP server to reconnect.",
            )
            .await
        else {
            return;
        };
        let mut ready = self.connect(&chosen);
        let _ = ready.wait_for(|d| *d).await;
        let line = self.status_line(&chosen);
        let state = self
            .inner
            .lock()
            .unwrap()
            .servers
            .iter()
            .find(|s| s.entry.name == chosen)
            .and_then(|s| s.state.clone());
        match state {
            Some(State::Failed(message)) => self.notify(
                format!("MCP server \"{chosen}\" failed to connect: {message}"),
                "error",
            ),
            _ => self.notify(
                format!(
                    "Reconnected to MCP server \"{chosen}\" ({}).",
                    line.unwrap_or_default()
                ),
                "info",
            ),
        }
    }

    async fn select(&self, title: &str, options: Vec<String>) -> Option<String> {
        if !self.shared.has_ui {
            return None;
        }
        let id = uuid::Uuid::new_v4().to_string();
        let request = UiRequest::Select {
            title: title.into(),
            options,
            timeout: None,
        };
        let answer = self.shared.dialogs.answer(&id, &request);
        self.shared.emit(SessionEvent::ExtensionUiRequest {
            id: id.clone(),
            request,
        });
        let answer = answer.await;
        self.shared.emit(SessionEvent::ExtensionUiResponse {
            id,
            answer: answer.clone(),
        });
        match answer {
            crate::events::DialogAnswer::Value { value } => Some(value),
            _ => None,
        }
    }

    /// pi's `describeState` of a server.
    fn status_line(&self, name: &str) -> Option<String> {
        let inner = self.inner.lock().unwrap();
        let server = inner.servers.iter().find(|s| s.entry.name == name)?;
        Some(match &server.state {
            _ if !server.entry.enabled() => "disabled".into(),
            Some(State::Connected) => format!("connected, {} tools", server.offered),
            Some(State::Connecting) => "connecting".into(),
            Some(State::Failed(_)) => "failed".into(),
            Some(State::NeedsAuth) => "needs sign-in".into(),
            None => "starting".into(),
        })
    }

    /// pi's plain `/mcp` status.
    fn status(&self) -> String {
        let inner = self.inner.lock().unwrap();
        if inner.servers.is_empty() && inner.errors.is_empty() && inner.overridden.is_empty() {
            return format!(
                "No MCP servers configured. Add them to {} or .pi/mcp.json.",
                self.agent_dir.join("mcp.json").display()
            );
        }
        let mut lines: Vec<String> = inner
            .servers
            .iter()
            .map(|server| {
                let name = &server.entry.name;
                let exposure = server.entry.exposure();
                if server.state == Some(State::NeedsAuth) {
                    return format!("{name}: needs sign-in, run /mcp login {name} ({exposure})");
                }
                let connected = server.state == Some(State::Connected);
                let tools = if connected {
                    format!(", {} tools", server.offered)
                } else {
                    String::new()
                };
                let state = match &server.state {
                    _ if !server.entry.enabled() => "disabled",
                    Some(State::Connected) => "connected",
                    Some(State::Connecting) => "connecting",
                    Some(State::Failed(_)) => "failed",
                    Some(State::NeedsAuth) => "needs sign-in",
                    None => "starting",
                };
                let error = match &server.state {
                    Some(State::Failed(message)) => {
                        format!(
                            "\n    {}",
                            message.split('\n').collect::<Vec<_>>().join("\n    ")
                        )
                    }
                    _ => String::new(),
                };
                format!("{name}: {state}{tools} ({exposure}){error}")
            })
            .collect();
        lines.extend(inner.errors.iter().map(|e| format!("config error: {e}")));
        lines.extend(inner.overridden.iter().map(|o| format!("overridden: {o}")));
        lines.join("\n")
    }
}

/// Whether pi would sign in to the server with OAuth: an HTTP server with neither an
/// Authorization header nor a provider's key (`auth`).
fn uses_oauth(entry: &Entry) -> bool {
    let has_authorization = entry.config["headers"]
        .as_object()
        .is_some_and(|h| h.keys().any(|k| k.eq_ignore_ascii_case("authorization")));
    entry.config["url"].is_string() && entry.config["auth"].is_null() && !has_authorization
}
