//! The session's model selection and its catalog as extensions see it (`ctx.modelRegistry`),
//! with pi 1.6.0's virtual models: catalog entries an extension registers
//! (`pi.registerVirtualModel`) whose every request goes to a model the extension's `route`
//! picks. Everything below the routing step sees only models pichamber calls: the request goes
//! to the routed model and the answer names it (pi's `model-runtime.js` and
//! `virtual-models.js`).

use std::sync::Arc;

use pichamber_model::{LlmContext, ModelClient, StreamOptions};
use serde_json::{Value, json};

use super::{Session, SessionEvent, messages};

/// pi-ai's `api` of a virtual catalog entry.
pub const VIRTUAL_API: &str = "pi-virtual";
/// The custom entry that stores a router's state on the session branch.
pub const VIRTUAL_STATE_ENTRY: &str = "pi.virtual-model-state";
/// pi-ai 1.6.0's thinking levels, lowest first.
const LEVELS: [&str; 7] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];

/// What the session's model selection names.
#[derive(Debug, Clone)]
pub enum Selection {
    /// A model pichamber calls.
    Model(Arc<ModelClient>),
    /// A virtual model (its catalog entry): each request goes where its extension routes it.
    Virtual(Value),
}

impl Selection {
    pub fn info(&self) -> Value {
        match self {
            Selection::Model(m) => m.info(),
            Selection::Virtual(info) => info.clone(),
        }
    }

    /// A virtual model needs no credentials of its own (the model it routes to must have them).
    pub fn has_api_key(&self) -> bool {
        match self {
            Selection::Model(m) => m.has_api_key(),
            Selection::Virtual(_) => true,
        }
    }

    /// Why a prompt cannot run without a key, naming what to set (see
    /// [`ModelClient::missing_api_key`]).
    pub fn missing_api_key(&self) -> String {
        match self {
            Selection::Model(m) => m.missing_api_key(),
            Selection::Virtual(info) => format!(
                "No API key found for {}.",
                info["provider"].as_str().unwrap_or("the selected model")
            ),
        }
    }
}

/// The catalog entry of a virtual model definition (pi's `createVirtualModel`), or why the
/// definition is not one.
pub fn virtual_entry(definition: &Value) -> Result<Value, String> {
    let text = |field: &str| -> Result<String, String> {
        match &definition[field] {
            Value::String(s) if !s.trim().is_empty() => Ok(s.clone()),
            Value::Null if field == "name" => Ok(String::new()),
            _ => Err(format!(
                "registerVirtualModel: \"{field}\" must be a non-empty string"
            )),
        }
    };
    let (provider, id, name) = (text("provider")?, text("id")?, text("name")?);
    let levels: Vec<String> = match &definition["thinkingLevels"] {
        Value::Null => vec!["off".into()],
        Value::Array(items) => items
            .iter()
            .map(|l| match l.as_str() {
                Some(l) if LEVELS.contains(&l) => Ok(l.to_owned()),
                _ => Err(format!(
                    "registerVirtualModel {provider}/{id}: thinkingLevels has {l}; the levels are {}",
                    LEVELS.join(", ")
                )),
            })
            .collect::<Result<_, _>>()?,
        _ => return Err("registerVirtualModel: \"thinkingLevels\" must be an array".into()),
    };
    let limit = |field: &str| -> Result<u64, String> {
        match &definition[field] {
            Value::Null => Ok(0),
            v => v.as_u64().ok_or_else(|| {
                format!("registerVirtualModel {provider}/{id}: \"{field}\" must be a whole number")
            }),
        }
    };
    let input = match &definition["input"] {
        Value::Null => json!(["text", "image"]),
        Value::Array(items) if items.iter().all(|i| i == "text" || i == "image") => {
            definition["input"].clone()
        }
        _ => {
            return Err(format!(
                "registerVirtualModel {provider}/{id}: \"input\" lists \"text\" and \"image\" only"
            ));
        }
    };
    let map: serde_json::Map<String, Value> = LEVELS
        .iter()
        .map(|l| {
            let level = levels.iter().any(|x| x == l).then(|| json!(l));
            (l.to_string(), level.unwrap_or(Value::Null))
        })
        .collect();
    Ok(json!({
        "id": id, "name": name, "api": VIRTUAL_API, "provider": provider, "baseUrl": "",
        "reasoning": levels.iter().any(|l| l != "off"),
        "thinkingLevelMap": map,
        "input": input,
        "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
        "contextWindow": limit("contextWindow")?,
        "maxTokens": limit("maxTokens")?,
    }))
}

/// The levels a model offers (pi-ai's `getSupportedThinkingLevels`).
fn supported_levels(model: &Value) -> Vec<&'static str> {
    if model["reasoning"] != json!(true) {
        return vec!["off"];
    }
    LEVELS
        .into_iter()
        .filter(|l| match model["thinkingLevelMap"].get(*l) {
            Some(Value::Null) => false,
            None if matches!(*l, "xhigh" | "max") => false,
            _ => true,
        })
        .collect()
}

/// `level`, or the nearest level `model` offers: the next higher first (pi-ai 1.6.0's
/// `clampThinkingLevel`).
pub fn clamp_thinking_level(model: &Value, level: &str) -> String {
    let offered = supported_levels(model);
    if offered.contains(&level) {
        return level.to_owned();
    }
    let first = offered.first().copied().unwrap_or("off");
    let Some(at) = LEVELS.iter().position(|l| *l == level) else {
        return first.to_owned();
    };
    let up = LEVELS[at..].iter().find(|l| offered.contains(l));
    let down = LEVELS[..at].iter().rev().find(|l| offered.contains(l));
    up.or(down).copied().unwrap_or(first).to_owned()
}

fn same(a: &Value, provider: &str, id: &str) -> bool {
    a["provider"] == provider && a["id"] == id
}

/// One call of `model` outside the agent loop, for an extension (pi's
/// `ModelRegistry.complete`): pi-ai's `Context` and stream options in, the final
/// AssistantMessage out (a provider failure is one with stopReason "error").
pub async fn complete(
    model: &ModelClient,
    context: &Value,
    options: &Value,
    pi: pichamber_model::PiVersion,
) -> Value {
    let llm = LlmContext {
        system_prompt: context["systemPrompt"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
        messages: context["messages"].as_array().cloned().unwrap_or_default(),
        tools: context["tools"].as_array().cloned().unwrap_or_default(),
    };
    let level = options["reasoningEffort"]
        .as_str()
        .or(options["reasoning"].as_str())
        .unwrap_or("off");
    let stream = StreamOptions {
        thinking_level: clamp_thinking_level(&model.info(), level),
        session_id: options["sessionId"].as_str().map(str::to_owned),
        max_tokens: options["maxTokens"].as_u64(),
        temperature: options["temperature"].as_f64(),
        cache_retention: options["cacheRetention"].as_str().map(str::to_owned),
        pi,
        ..Default::default()
    };
    let payload = model.build_payload(&llm, &stream);
    // Nothing reads the stream's events; only the final message matters.
    let (items, _events) = tokio::sync::mpsc::unbounded_channel();
    let (_never, cancel) = tokio::sync::watch::channel(false);
    model.stream(payload, items, cancel, pi).await
}

/// Why a request is routed (pi's `ModelRouteReason`).
#[derive(Debug, Clone, PartialEq)]
pub enum RouteReason {
    /// The first request after a message the user wrote.
    User,
    /// Any other request of the agent loop.
    Continuation,
    /// An automatic retry after a failed request (the failed answer).
    Retry(Value),
    /// A request outside the agent loop (a compaction or branch summary).
    Direct,
}

impl RouteReason {
    fn name(&self) -> &'static str {
        match self {
            RouteReason::User => "user",
            RouteReason::Continuation => "continuation",
            RouteReason::Retry(_) => "retry",
            RouteReason::Direct => "direct",
        }
    }

    /// pi's rule: the request starts a user turn when a user message follows the last answer.
    pub fn of(messages: &[Value]) -> Self {
        let last_answer = messages.iter().rposition(|m| m["role"] == "assistant");
        let after = &messages[last_answer.map_or(0, |i| i + 1)..];
        if after.iter().any(|m| m["role"] == "user") {
            RouteReason::User
        } else {
            RouteReason::Continuation
        }
    }
}

/// A routed request: the model it goes to and the thinking level it is made with.
pub struct Routed {
    pub model: Arc<ModelClient>,
    pub thinking_level: String,
}

impl Session {
    /// The extension that registered the virtual model `provider`/`id`, and its entry.
    fn virtual_owner(&self, provider: &str, id: &str) -> Option<(usize, Value)> {
        let state = self.shared.state.lock().unwrap();
        state.registrations.iter().enumerate().find_map(|(i, r)| {
            let entry = r.virtual_models.iter().find(|m| same(m, provider, id))?;
            Some((i, entry.clone()))
        })
    }

    /// What `set_model`, `cycle_model` and `get_available_models` choose from: the catalog's
    /// models that have credentials, then the extensions' virtual models.
    pub fn selectable_models(&self) -> Vec<Selection> {
        let mut out: Vec<Selection> = self
            .shared
            .catalog
            .available()
            .cloned()
            .map(Selection::Model)
            .collect();
        let state = self.shared.state.lock().unwrap();
        for registrations in &state.registrations {
            out.extend(
                registrations
                    .virtual_models
                    .iter()
                    .cloned()
                    .map(Selection::Virtual),
            );
        }
        out
    }

    pub fn find_model(&self, provider: &str, id: &str) -> Option<Selection> {
        self.selectable_models()
            .into_iter()
            .find(|m| same(&m.info(), provider, id))
    }

    /// The model a request goes to: the selection, or where its router sends it. A request
    /// outside the agent loop (`Direct`) neither reads nor stores router state.
    pub(crate) async fn route(
        &mut self,
        reason: RouteReason,
        context: &[Value],
    ) -> Result<Routed, String> {
        let level = self.shared.state.lock().unwrap().thinking_level.clone();
        let info = match &self.model {
            None => return Err(super::agent_loop::NO_MODEL.into()),
            Some(Selection::Model(model)) => {
                return Ok(Routed {
                    model: model.clone(),
                    thinking_level: level,
                });
            }
            Some(Selection::Virtual(info)) => info.clone(),
        };
        let provider = info["provider"].as_str().unwrap_or_default().to_owned();
        let id = info["id"].as_str().unwrap_or_default().to_owned();
        let name = format!("Virtual model {provider}/{id}");
        let Some((owner, _)) = self.virtual_owner(&provider, &id) else {
            return Err(format!("{name} is not registered."));
        };
        let catalog = self.shared.catalog.clone();
        let state = match reason {
            RouteReason::Direct => None,
            _ => self.router_state(&provider, &id),
        };
        // The conversation as the model gets it, system messages included.
        let llm: Vec<Value> = context
            .iter()
            .flat_map(|m| {
                if m["role"] == "system" {
                    vec![m.clone()]
                } else {
                    messages::convert_to_llm(std::slice::from_ref(m))
                }
            })
            .collect();
        let mut request = json!({
            "model": info, "thinkingLevel": level, "reason": reason.name(), "messages": llm,
        });
        let latest = context.iter().rev().find(|m| {
            m["role"] == "assistant"
                && !matches!(m["stopReason"].as_str(), Some("error" | "aborted"))
        });
        if let Some(latest) = latest
            && let Some(model) = catalog.get(
                latest["provider"].as_str().unwrap_or_default(),
                latest["model"].as_str().unwrap_or_default(),
            )
        {
            let mut previous = json!({ "model": model.info() });
            if let Some(level) = latest.get("thinkingLevel") {
                previous["thinkingLevel"] = level.clone();
            }
            request["previous"] = previous;
        }
        if let Some(state) = state {
            request["state"] = state;
        }
        if let RouteReason::Retry(failed) = &reason
            && let Some(model) = catalog.get(
                failed["provider"].as_str().unwrap_or_default(),
                failed["model"].as_str().unwrap_or_default(),
            )
        {
            request["failed"] = json!({
                "model": model.info(), "thinkingLevel": failed["thinkingLevel"], "message": failed,
            });
        }
        let ctx = self.ctx();
        let route = self.extensions[owner]
            .route_model(&provider, &id, &request, &ctx)
            .await;
        self.flush_bus().await;
        let route = route.map_err(|e| e.to_string())?;
        let (to_provider, to_id) = (
            route["model"]["provider"].as_str().unwrap_or_default(),
            route["model"]["id"].as_str().unwrap_or_default(),
        );
        let routed = format!("{name} routed to {to_provider}/{to_id}");
        let target = catalog
            .get(to_provider, to_id)
            .ok_or_else(|| format!("{routed}, which is not a physical model."))?;
        if !target.has_api_key() {
            return Err(format!("{routed}, which has no credentials."));
        }
        let asked = route["thinkingLevel"].as_str().unwrap_or(&level).to_owned();
        let thinking_level = clamp_thinking_level(&target.info(), &asked);
        // The guest says when the router returned its request's state object itself (pi keeps
        // the state then; any other state it returns is stored, as pi stores it).
        let keeps = route["keepsState"] == json!(true);
        if reason != RouteReason::Direct && !keeps && route.get("state").is_some() {
            let data = json!({ "provider": provider, "modelId": id, "state": route["state"] });
            let entry = self
                .shared
                .state
                .lock()
                .unwrap()
                .store
                .append_owned_custom_entry(VIRTUAL_STATE_ENTRY, Some(data), None);
            match entry {
                Ok(entry) => self.shared.emit(SessionEvent::EntryAppended { entry }),
                Err(e) => return Err(format!("{name}: its state was not stored: {e:#}")),
            }
        }
        Ok(Routed {
            model: target,
            thinking_level,
        })
    }

    /// The state a router last stored for `provider`/`id` on the current branch.
    fn router_state(&self, provider: &str, id: &str) -> Option<Value> {
        let state = self.shared.state.lock().unwrap();
        state.store.get_branch(None).iter().rev().find_map(|e| {
            (e["type"] == "custom"
                && e["customType"] == VIRTUAL_STATE_ENTRY
                && e["data"]["provider"] == provider
                && e["data"]["modelId"] == id)
                .then(|| e["data"]["state"].clone())
        })
    }

    /// A catalog model's credentials (`ctx.modelRegistry.getApiKeyForProvider`, for an
    /// extension granted them): `provider`'s model `model_id`, or its first one; none for a
    /// model the catalog lacks, as pi answers.
    pub(crate) fn registry_credentials(
        shared: &super::state::SessionShared,
        provider: &str,
        model_id: Option<&str>,
    ) -> (Option<String>, Vec<(String, String)>) {
        shared
            .catalog
            .all()
            .iter()
            .find(|m| {
                let info = m.info();
                info["provider"] == provider && model_id.is_none_or(|id| info["id"] == id)
            })
            .map(|m| m.credentials())
            .unwrap_or_default()
    }

    /// `ctx.modelRegistry`'s catalog: every model with whether it has credentials, then the
    /// virtual models (which need none).
    pub(crate) fn registry_models(shared: &super::state::SessionShared) -> Value {
        let mut out: Vec<Value> = shared
            .catalog
            .all()
            .iter()
            .map(|m| json!({ "model": m.info(), "configured": m.has_api_key() }))
            .collect();
        let state = shared.state.lock().unwrap();
        for registrations in &state.registrations {
            out.extend(
                registrations
                    .virtual_models
                    .iter()
                    .map(|m| json!({ "model": m, "configured": true })),
            );
        }
        Value::Array(out)
    }
}
