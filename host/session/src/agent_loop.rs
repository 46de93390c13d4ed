//! The agent loop: a prompt becomes turns of model calls and tool calls, with every lifecycle
//! event dispatched to the extensions in pi 0.73.1's order and with its semantics
//! (pi-agent-core agent-loop.js, pi-coding-agent agent-session.js):
//!
//! commands → `input` → `before_agent_start` → `agent_start` → per turn: `turn_start`,
//! `context`, `before_provider_request`, `after_provider_response`, message_start / update /
//! end, tool calls (see `tool_calls`), `turn_end` → `agent_end`.
//!
//! Steering messages are taken after a turn's tool calls, follow-ups when the agent would
//! stop. Work an extension asks for from inside a handler (`sendUserMessage`, a triggered
//! turn) is queued in the shared state and run here, because an extension cannot re-enter
//! the session it is being called from.

use serde_json::{Value, json};

use super::Session;
use super::boundary::Boundary;
use super::events::{RUNTIME, SessionEvent};
use super::messages::{self, now_ms};
use super::models::{RouteReason, Routed, Selection};
use super::state::{AgentRequest, Disposition, Responder, SessionShared};
use super::system_message;
use super::system_prompt::SystemPromptOptions;
use pichamber_model::{LlmContext, StreamItem, StreamOptions};

/// How a prompt arrived and what to do with it.
#[derive(Debug, Clone)]
pub struct PromptOptions {
    pub images: Vec<Value>,
    /// While a run is streaming: "steer" or "followUp" (pi's streamingBehavior / deliverAs).
    pub streaming_behavior: Option<String>,
    /// `input` event source: "interactive", "rpc" or "extension".
    pub source: String,
    /// Treat `/name args` as an extension command (false for sendUserMessage, as in pi).
    pub expand_commands: bool,
}

impl Default for PromptOptions {
    fn default() -> Self {
        Self {
            images: Vec::new(),
            streaming_behavior: None,
            source: "interactive".into(),
            expand_commands: true,
        }
    }
}

pub const NO_MODEL: &str = "No model configured. Give one with --model (an OpenAI-compatible model: --base-url, or a provider from models.json) or --script FILE (a scripted model). Commands and tools work without a model.";
pub const ALREADY_PROCESSING: &str = "Agent is already processing. Specify streamingBehavior ('steer' or 'followUp') to queue the message.";

/// Upper bound on turns extensions may start one after another from one prompt (an
/// extension answering every agent_end with sendUserMessage would otherwise never stop).
const MAX_CHAINED_REQUESTS: usize = 100;

/// pi's queue modes: deliver one queued message per turn, or all at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum QueueMode {
    #[default]
    OneAtATime,
    All,
}

impl SessionShared {
    /// Queues a user message for a streaming run: steering (delivered after the current
    /// turn's tool calls) or follow-up (when the agent would stop). Without a behaviour it is
    /// pi's "already processing" error. A client's text: `/skill:name` and `/template` are
    /// expanded first, as pi's steer / followUp / prompt do.
    pub fn queue_user_message(
        &self,
        text: &str,
        images: &[Value],
        behavior: Option<&str>,
    ) -> Result<(), String> {
        let text = self.expand_user_text(text);
        self.enqueue_user_message(&text, images, behavior)
    }

    /// [`SessionShared::queue_user_message`] for text as it is (already expanded, or an
    /// extension's, which pi does not expand).
    pub(super) fn enqueue_user_message(
        &self,
        text: &str,
        images: &[Value],
        behavior: Option<&str>,
    ) -> Result<(), String> {
        let message = messages::user_message(text, images);
        {
            let mut state = self.state.lock().unwrap();
            let agent = &mut state.agent;
            match behavior {
                None => return Err(ALREADY_PROCESSING.into()),
                Some("followUp") => {
                    agent.follow_up.push_back(message);
                    agent.queued_follow_up.push(text.to_owned());
                }
                Some(_) => {
                    agent.steering.push_back(message);
                    agent.queued_steering.push(text.to_owned());
                }
            }
        }
        self.emit_queue_update();
        Ok(())
    }

    pub fn emit_queue_update(&self) {
        let state = self.state.lock().unwrap();
        let event = json!({
            "type": "queue_update",
            "steering": state.agent.queued_steering,
            "followUp": state.agent.queued_follow_up,
        });
        drop(state);
        self.emit(SessionEvent::Agent(event));
    }
}

impl Session {
    /// Whether any loaded extension subscribed to `event`.
    pub fn has_handlers(&self, event: &str) -> bool {
        self.shared.state.lock().unwrap().has_handlers(event)
    }

    pub fn is_streaming(&self) -> bool {
        self.shared.state.lock().unwrap().agent.streaming
    }

    /// Runs a prompt to completion, then whatever turns extensions asked for meanwhile.
    pub async fn prompt(&mut self, text: &str, options: PromptOptions) -> Result<(), String> {
        let result = self.prompt_once(text, options, &mut None).await;
        self.run_requests().await;
        result.map(|_| ())
    }

    /// Runs turns extensions asked for (sendUserMessage, sendMessage with triggerTurn).
    pub async fn run_requests(&mut self) {
        for _ in 0..MAX_CHAINED_REQUESTS {
            let next = self.shared.state.lock().unwrap().agent.requests.pop_front();
            let Some(request) = next else { return };
            match request {
                AgentRequest::UserMessage {
                    text,
                    images,
                    deliver_as,
                    source,
                    commands,
                    respond,
                } => {
                    let options = PromptOptions {
                        images,
                        streaming_behavior: deliver_as,
                        source: source.into(),
                        // pi's sendUserMessage skips command handling (unless asked); a
                        // client's prompt not.
                        expand_commands: commands,
                    };
                    let mut respond = respond;
                    let outcome = self.prompt_once(&text, options, &mut respond).await;
                    match respond {
                        Some(respond) => respond(outcome),
                        None => {
                            if let Err(e) = outcome {
                                self.error(RUNTIME, "send_user_message", e);
                            }
                        }
                    }
                }
                AgentRequest::CustomTurn(message) => {
                    if self.model.is_none() {
                        self.error(RUNTIME, "send_message", NO_MODEL);
                        continue;
                    }
                    self.run_agent(vec![message]).await;
                }
                AgentRequest::SessionAction { action, args } => {
                    if let Err(e) = self.session_action(&action, &args).await {
                        self.error(RUNTIME, &action, e);
                    }
                }
                AgentRequest::Event { name, event } => {
                    let _ = self.emit(&name, event).await;
                }
                AgentRequest::Compact {
                    instructions,
                    reply_to,
                } => self.compact_for(instructions.as_deref(), reply_to).await,
            }
        }
        let dropped = std::mem::take(&mut self.shared.state.lock().unwrap().agent.requests);
        if !dropped.is_empty() {
            self.error(
                RUNTIME,
                "send_user_message",
                format!(
                    "extensions started {MAX_CHAINED_REQUESTS} turns in a row; {} more were dropped",
                    dropped.len()
                ),
            );
        }
    }

    /// One prompt. `accepted`, when given, hears of the prompt's acceptance right before the
    /// run starts (pi answers an RPC prompt then, not when the run ends); when it is still
    /// there on return, the caller answers with the outcome.
    async fn prompt_once(
        &mut self,
        text: &str,
        options: PromptOptions,
        accepted: &mut Option<Responder>,
    ) -> Result<Disposition, String> {
        if options.expand_commands
            && let Some(name) = text
                .strip_prefix('/')
                .map(|t| t.split(' ').next().unwrap_or(""))
            && self.has_command(name)
        {
            // pi runs extension commands immediately and reports their failures as errors.
            let _ = self.run_command(text).await;
            return Ok(Disposition::Handled);
        }
        let Some((text, images)) = self
            .apply_input(text, options.images, &options.source)
            .await
        else {
            return Ok(Disposition::Handled);
        };
        // After the input event, skills and templates (pi's order); not for an extension's
        // sendUserMessage.
        let text = if options.expand_commands {
            self.shared.expand_user_text(&text)
        } else {
            text
        };
        if self.is_streaming() {
            return self
                .shared
                .enqueue_user_message(&text, &images, options.streaming_behavior.as_deref())
                .map(|()| Disposition::Queued);
        }
        match &self.model {
            None => return Err(NO_MODEL.into()),
            Some(model) if !model.has_api_key() => return Err(model.missing_api_key()),
            Some(_) => {}
        }
        let mut prompts = vec![messages::user_message(&text, &images)];
        prompts.extend(std::mem::take(
            &mut self.shared.state.lock().unwrap().agent.next_turn,
        ));
        let (system_prompt, injected, options) = self.before_agent_start(&text, &images).await;
        prompts.extend(injected.iter().map(messages::custom_message));
        // pi 1.6.0 declares the prompt and tools ahead of the run's first message.
        if let Some(system) = self.system_message_patch(&options) {
            prompts.insert(0, system);
        }
        self.shared.state.lock().unwrap().agent.run_prompt_options = Some(options);
        self.shared.state.lock().unwrap().agent.system_prompt = system_prompt;
        if let Some(accepted) = accepted.take() {
            accepted(Ok(Disposition::Started));
        }
        self.run_agent(prompts).await;
        Ok(Disposition::Started)
    }

    /// The prompt options of the running prompt: the session's (its tools as they are now)
    /// with what `before_agent_start` added for the run.
    fn run_prompt_options(&self) -> SystemPromptOptions {
        let mut options = self.system_prompt_options();
        if let Some(run) = &self.shared.state.lock().unwrap().agent.run_prompt_options {
            options.custom_prompt = run.custom_prompt.clone();
            options.append = run.append.clone();
            options.extra_guidelines = run.extra_guidelines.clone();
            options.sections = run.sections.clone();
        }
        options
    }

    fn has_command(&self, name: &str) -> bool {
        let state = self.shared.state.lock().unwrap();
        state.command(name).is_some()
    }

    /// The `input` event: `None` when an extension handled the input.
    async fn apply_input(
        &mut self,
        text: &str,
        images: Vec<Value>,
        source: &str,
    ) -> Option<(String, Vec<Value>)> {
        if !self.has_handlers("input") {
            return Some((text.to_owned(), images));
        }
        let mut event = json!({ "type": "input", "text": text, "source": source });
        if !images.is_empty() {
            event["images"] = Value::Array(images.clone());
        }
        let result = self.emit("input", event).await.unwrap_or(Value::Null);
        match result["action"].as_str() {
            Some("handled") => None,
            Some("transform") => {
                let text = result["text"].as_str().unwrap_or(text).to_owned();
                let images = result["images"].as_array().cloned().unwrap_or(images);
                Some((text, images))
            }
            _ => Some((text.to_owned(), images)),
        }
    }

    /// A queued user message is starting: it leaves pi's queue lists (and clients hear so).
    fn unlist_queued(&self, message: &Value) {
        if message["role"] != "user" {
            return;
        }
        let text = messages::user_text(message);
        let removed = {
            let mut state = self.shared.state.lock().unwrap();
            let agent = &mut state.agent;
            if let Some(i) = agent.queued_steering.iter().position(|t| *t == text) {
                agent.queued_steering.remove(i);
                true
            } else if let Some(i) = agent.queued_follow_up.iter().position(|t| *t == text) {
                agent.queued_follow_up.remove(i);
                true
            } else {
                false
            }
        };
        if removed {
            self.shared.emit_queue_update();
        }
    }

    /// `before_agent_start` of the extensions, then of pi 1.6.0's built-in MCP extension,
    /// which loads after them: the first prompt waits for the servers whose tools are
    /// declared, and every prompt lists the other servers in the `mcp_servers` section.
    async fn before_agent_start(
        &mut self,
        text: &str,
        images: &[Value],
    ) -> (String, Vec<Value>, SystemPromptOptions) {
        let (prompt, injected, mut options) =
            self.extensions_before_agent_start(text, images).await;
        let Some(mcp) = self.mcp.clone() else {
            return (prompt, injected, options);
        };
        mcp.wait_for_direct_servers().await;
        let name = super::mcp_extension::SECTION;
        let before = options.sections.clone();
        options.sections.retain(|(n, _)| n != name);
        if let Some(section) = mcp.servers_section() {
            options.sections.push((name.to_owned(), section));
        }
        if options.sections == before {
            return (prompt, injected, options);
        }
        // The prompt is built again from the options, unless an extension gave its own.
        let rebuilt = if prompt
            == self.system_prompt_from(&SystemPromptOptions {
                sections: before,
                ..options.clone()
            }) {
            self.system_prompt_from(&options)
        } else {
            prompt
        };
        (rebuilt, injected, options)
    }

    /// `before_agent_start`: extensions may chain a new system prompt and inject messages;
    /// under pi 1.6.0 they may also edit the prompt's options for this run (sections, rules,
    /// the tool selection). Returns the prompt the model gets, the injected messages and the
    /// run's prompt options.
    async fn extensions_before_agent_start(
        &mut self,
        text: &str,
        images: &[Value],
    ) -> (String, Vec<Value>, SystemPromptOptions) {
        let options = self.system_prompt_options();
        let base = self.system_prompt_from(&options);
        if !self.has_handlers("before_agent_start") {
            return (base, Vec::new(), options);
        }
        let pi = self.shared.pi;
        let mut event = json!({
            "type": "before_agent_start",
            "prompt": text,
            "systemPrompt": base,
            "systemPromptOptions": options.to_json_for(pi),
        });
        if !images.is_empty() {
            event["images"] = Value::Array(images.to_vec());
        }
        let (result, event) = self
            .emit_with_event("before_agent_start", event)
            .await
            .unwrap_or((Value::Null, Value::Null));
        let injected = result["messages"].as_array().cloned().unwrap_or_default();
        let mut options = options;
        let mut base = base;
        if pi.is_1_6() && event["systemPromptOptions"] != options.to_json_for(pi) {
            let edited = &event["systemPromptOptions"];
            if let Some(tools) = edited["selectedTools"].as_array() {
                let names: Vec<String> = tools
                    .iter()
                    .filter_map(|t| t.as_str().map(str::to_owned))
                    .collect();
                if let Err(e) = self.set_active_tools(&names) {
                    self.error(RUNTIME, "before_agent_start", e);
                }
            }
            match self.system_prompt_options().with_edits(edited) {
                Ok(edited) => options = edited,
                Err(e) => self.error(RUNTIME, "before_agent_start", e),
            }
            base = self.system_prompt_from(&options);
        }
        let system_prompt = match result["systemPrompt"].as_str() {
            Some(s) if !s.is_empty() => s.to_owned(),
            _ => base,
        };
        (system_prompt, injected, options)
    }

    /// One agent run, continued while a transient model error is retried (see `retry`), then
    /// auto-compaction when the context calls for it.
    /// In sessions that follow pi 1.6.0, `agent_before_settle` may then ask for one more
    /// request, and the run goes on from the context.
    pub(super) async fn run_agent(&mut self, prompts: Vec<Value>) {
        let mut new_messages = self.run_agent_once(prompts).await;
        let mut continued = 0;
        loop {
            while self.retry_after(&new_messages).await {
                new_messages = self.run_agent_once(Vec::new()).await;
            }
            self.check_auto_compaction().await;
            if !self.before_settle(&mut continued).await {
                break;
            }
            new_messages = self.run_agent_once(Vec::new()).await;
        }
        self.shared.state.lock().unwrap().agent.run_prompt_options = None;
        // pi 1.6.0 says when it will not go on by itself: after retries and compaction.
        if self.shared.pi.is_1_6() {
            let aborted = *self.shared.abort.borrow();
            self.agent_event(json!({ "type": "agent_settled", "aborted": aborted }))
                .await;
        }
    }

    /// `agent_before_settle` (pi 1.6.0): whether its handlers asked the agent to go on (not
    /// after an abort, and at most [`MAX_CHAINED_REQUESTS`] times in a row).
    async fn before_settle(&mut self, continued: &mut usize) -> bool {
        let name = Boundary::BeforeSettle.event_name();
        if !self.shared.pi.is_1_6() || *self.shared.abort.borrow() || !self.has_handlers(name) {
            return false;
        }
        let base = json!({ "type": name, "outcome": self.last_outcome() });
        let proceed = self.boundary(Boundary::BeforeSettle, base).await;
        if !proceed || *self.shared.abort.borrow() {
            return false;
        }
        *continued += 1;
        if *continued > MAX_CHAINED_REQUESTS {
            self.error(
                "<boundary>",
                name,
                format!("extensions asked to continue {MAX_CHAINED_REQUESTS} times in a row; the agent stops here"),
            );
            return false;
        }
        true
    }

    /// pi's `AgentActivityOutcome` of the last answer.
    fn last_outcome(&self) -> &'static str {
        let state = self.shared.state.lock().unwrap();
        let last = state
            .agent
            .messages
            .iter()
            .rev()
            .find(|m| m["role"] == "assistant");
        outcome_of(last.unwrap_or(&Value::Null))
    }

    /// `turn_end`. In sessions that follow pi 1.6.0 an actionable boundary: returns whether
    /// its handlers asked for one more request.
    async fn turn_end(&mut self, assistant: &Value, tool_results: &[Value]) -> bool {
        let event =
            json!({ "type": "turn_end", "message": assistant, "toolResults": tool_results });
        let name = Boundary::TurnEnd.event_name();
        if !self.shared.pi.is_1_6() || !self.has_handlers(name) {
            self.agent_event(event).await;
            return false;
        }
        let ids = self.persisted_ids(std::iter::once(assistant).chain(tool_results));
        let proceed = match ids.first().cloned().flatten() {
            Some(message_entry_id) => {
                let base = json!({
                    "type": name, "turnIndex": self.turn_index,
                    "message": assistant, "toolResults": tool_results,
                    "messageEntryId": message_entry_id,
                    "toolResultEntryIds": ids[1..].iter().flatten().collect::<Vec<_>>(),
                    "outcome": outcome_of(assistant),
                });
                let proceed = self.boundary(Boundary::TurnEnd, base).await;
                if self.is_streaming() {
                    self.queue_streaming_requests().await;
                }
                proceed
            }
            None => {
                self.error(
                    "<boundary>",
                    name,
                    "turn_end could not resolve the persisted assistant entry ID",
                );
                false
            }
        };
        self.announce_agent_event(name, event);
        proceed
    }

    /// The ids of the entries `messages` were persisted as on the current branch, newest
    /// match first.
    fn persisted_ids<'a>(&self, messages: impl Iterator<Item = &'a Value>) -> Vec<Option<String>> {
        let state = self.shared.state.lock().unwrap();
        let branch = state.store.get_branch(None);
        messages
            .map(|message| {
                branch
                    .iter()
                    .rev()
                    .find(|e| e["type"] == "message" && e["message"] == *message)
                    .and_then(|e| e["id"].as_str().map(str::to_owned))
            })
            .collect()
    }

    /// `agent_start`, turns until there is nothing left to do, `agent_end`; returns the run's
    /// new messages. Without prompts it continues from the context (pi's `continue()`).
    async fn run_agent_once(&mut self, prompts: Vec<Value>) -> Vec<Value> {
        self.shared.state.lock().unwrap().agent.streaming = true;
        self.shared.abort.send_replace(false);
        self.turn_index = 0;
        self.agent_event(json!({ "type": "agent_start" })).await;
        self.agent_event(json!({ "type": "turn_start" })).await;
        let mut new_messages = Vec::new();
        for prompt in prompts {
            new_messages.push(self.deliver_message(prompt).await);
        }
        self.run_turns(&mut new_messages).await;
        self.agent_event(json!({ "type": "agent_end", "messages": new_messages.clone() }))
            .await;
        self.shared.state.lock().unwrap().agent.streaming = false;
        new_messages
    }

    async fn run_turns(&mut self, new_messages: &mut Vec<Value>) {
        let mut first_turn = true;
        let mut pending = self.take_queued(false);
        let mut continued = 0;
        loop {
            let mut more_tool_calls = true;
            while more_tool_calls || !pending.is_empty() {
                if first_turn {
                    first_turn = false;
                } else {
                    self.agent_event(json!({ "type": "turn_start" })).await;
                    // Tools a tool call turned on or off are declared before the next call.
                    if let Some(system) = self.system_message_patch(&self.run_prompt_options()) {
                        new_messages.push(self.deliver_message(system).await);
                    }
                }
                for message in std::mem::take(&mut pending) {
                    new_messages.push(self.deliver_message(message).await);
                }
                let assistant = self.stream_assistant().await;
                new_messages.push(assistant.clone());
                let stop = assistant["stopReason"].as_str().unwrap_or_default();
                // An error or an abort ends the run, whatever turn_end asks.
                if stop == "error" || stop == "aborted" {
                    self.turn_end(&assistant, &[]).await;
                    return;
                }
                more_tool_calls = false;
                let mut terminate = false;
                let mut tool_results = Vec::new();
                if !messages::tool_calls(&assistant).is_empty() {
                    let (results, end) = self.execute_tool_calls(&assistant).await;
                    more_tool_calls = !end;
                    terminate = end;
                    new_messages.extend(results.iter().cloned());
                    tool_results = results;
                }
                // pi 1.6.0: turn_end may ask for one more request; a terminating tool batch
                // still ends the run.
                if self.turn_end(&assistant, &tool_results).await && !terminate {
                    continued += 1;
                    if continued > MAX_CHAINED_REQUESTS {
                        self.error(
                            "<boundary>",
                            "turn_end",
                            format!("extensions asked to continue {MAX_CHAINED_REQUESTS} times in a row; the agent stops here"),
                        );
                    } else {
                        more_tool_calls = true;
                    }
                }
                self.queue_streaming_requests().await;
                pending = self.take_queued(false);
            }
            self.queue_streaming_requests().await;
            let follow_ups = self.take_queued(true);
            if follow_ups.is_empty() {
                return;
            }
            pending = follow_ups;
        }
    }

    /// User messages sent while the run streams join the queues (or fail without a
    /// deliverAs, as in pi); triggered turns, and commands a client sent, wait until the run
    /// ends.
    pub(super) async fn queue_streaming_requests(&mut self) {
        let requests: Vec<AgentRequest> = {
            let mut state = self.shared.state.lock().unwrap();
            let commands: Vec<String> = state
                .commands
                .iter()
                .map(|c| c.invocation_name.clone())
                .collect();
            let is_command = |text: &str, expands: bool| {
                expands
                    && text.strip_prefix('/').is_some_and(|t| {
                        commands
                            .iter()
                            .any(|c| c == t.split(' ').next().unwrap_or(""))
                    })
            };
            let all = std::mem::take(&mut state.agent.requests);
            let (now, later): (Vec<_>, Vec<_>) = all.into_iter().partition(|r| {
                matches!(r, AgentRequest::UserMessage { text, commands, .. } if !is_command(text, *commands))
            });
            state.agent.requests = later.into();
            now
        };
        for request in requests {
            let AgentRequest::UserMessage {
                text,
                images,
                deliver_as,
                source,
                commands,
                respond,
            } = request
            else {
                continue;
            };
            let Some((text, images)) = self.apply_input(&text, images, source).await else {
                if let Some(respond) = respond {
                    respond(Ok(Disposition::Handled));
                }
                continue;
            };
            let text = if commands {
                self.shared.expand_user_text(&text)
            } else {
                text
            };
            let outcome = self
                .shared
                .enqueue_user_message(&text, &images, deliver_as.as_deref())
                .map(|()| Disposition::Queued);
            match respond {
                Some(respond) => respond(outcome),
                None => {
                    if let Err(e) = outcome {
                        self.error(RUNTIME, "send_user_message", e);
                    }
                }
            }
        }
    }

    /// Takes queued steering (or follow-up) messages per the queue mode.
    fn take_queued(&mut self, follow_up: bool) -> Vec<Value> {
        let mut state = self.shared.state.lock().unwrap();
        let mode = if follow_up {
            state.agent.follow_up_mode
        } else {
            state.agent.steering_mode
        };
        let queue = if follow_up {
            &mut state.agent.follow_up
        } else {
            &mut state.agent.steering
        };
        match mode {
            QueueMode::All => queue.drain(..).collect(),
            QueueMode::OneAtATime => queue.pop_front().into_iter().collect(),
        }
    }

    /// message_start + message_end for a message that enters the context whole (prompts,
    /// queued messages, tool results). Returns it as extensions left it.
    pub(super) async fn deliver_message(&mut self, message: Value) -> Value {
        self.agent_event(json!({ "type": "message_start", "message": message }))
            .await;
        self.message_end(message).await
    }

    /// `message_end`: extensions may replace the message (same role only); then it joins the
    /// context, is persisted, and only then reported to clients.
    async fn message_end(&mut self, message: Value) -> Value {
        let mut message = message;
        if self.has_handlers("message_end") {
            let result = self
                .emit(
                    "message_end",
                    json!({ "type": "message_end", "message": message }),
                )
                .await
                .unwrap_or(Value::Null);
            if let Some(replacement) = result.get("message").filter(|m| m.is_object()) {
                if replacement["role"] == message["role"] {
                    message = replacement.clone();
                } else {
                    self.error(
                        RUNTIME,
                        "message_end",
                        "message_end handlers must return a message with the same role",
                    );
                }
            }
        }
        {
            let mut state = self.shared.state.lock().unwrap();
            state.agent.messages.push(message.clone());
            if message["role"] == "assistant" && message["usage"].is_object() {
                state.agent.last_usage = Some(message["usage"].clone());
            }
        }
        self.persist_message(&message);
        self.shared.emit(SessionEvent::Agent(
            json!({ "type": "message_end", "message": message }),
        ));
        self.retry_succeeded(&message);
        message
    }

    /// Dispatches an agent event to the extensions (in the form pi's runner gives them) and
    /// reports it to clients (in the form pi's agent emits it).
    pub(super) async fn agent_event(&mut self, event: Value) {
        let name = event["type"].as_str().unwrap_or_default().to_owned();
        if self.has_handlers(&name) {
            let extension_event = match name.as_str() {
                "turn_start" => {
                    json!({ "type": "turn_start", "turnIndex": self.turn_index, "timestamp": now_ms() })
                }
                "turn_end" => json!({
                    "type": "turn_end", "turnIndex": self.turn_index,
                    "message": event["message"], "toolResults": event["toolResults"],
                }),
                _ => event.clone(),
            };
            let _ = self.emit(&name, extension_event).await;
            // pi handles a sendUserMessage inside the handler, before clients hear of the
            // event, and sees the agent as busy until agent_end's handlers are done; after
            // agent_settled it is idle, and what a handler sent starts a run of its own.
            if self.is_streaming() {
                self.queue_streaming_requests().await;
            }
        }
        self.announce_agent_event(&name, event);
    }

    /// Reports an agent event to clients (in the form pi's agent emits it), after extensions
    /// had it.
    fn announce_agent_event(&mut self, name: &str, event: Value) {
        if name == "turn_end" {
            self.turn_index += 1;
        }
        if name == "message_start" {
            self.unlist_queued(&event["message"]);
        }
        let mut event = event;
        if name == "agent_end" && self.shared.pi.is_1_6() {
            let messages = event["messages"].as_array().cloned().unwrap_or_default();
            event["willRetry"] = json!(self.will_retry(&messages));
        }
        self.shared.emit(SessionEvent::Agent(event));
    }

    /// One model call: `context`, the payload through `before_provider_request`, the response
    /// through `after_provider_response`, the streamed message as message_start / update /
    /// end. Never fails: a provider failure is an assistant message with stopReason "error".
    async fn stream_assistant(&mut self) -> Value {
        let mut context = self.shared.state.lock().unwrap().agent.messages.clone();
        // A virtual model's router picks this request's model (pi 1.6.0); a router that fails
        // ends the run with an error answer that names the virtual model.
        let reason = match self.failed_request.take() {
            Some(failed) => RouteReason::Retry(failed),
            None => RouteReason::of(&context),
        };
        let Routed {
            model,
            thinking_level,
        } = match self.route(reason, &context).await {
            Ok(routed) => routed,
            Err(e) => {
                let info = self.model.as_ref().map(Selection::info).unwrap_or_default();
                let message = json!({
                    "role": "assistant", "content": [],
                    "api": info["api"], "provider": info["provider"], "model": info["id"],
                    "usage": messages::empty_usage(),
                    "stopReason": "error", "errorMessage": e,
                    "timestamp": now_ms(),
                });
                self.agent_event(json!({ "type": "message_start", "message": message }))
                    .await;
                return self.message_end(message).await;
            }
        };
        // pi 1.6.0's `context` handlers see the conversation without its system messages
        // (the prompt and tools are pi's), and the model gets those from the loadout anyway.
        let transcript = context.clone();
        if self.shared.pi.is_1_6() {
            context.retain(|m| m["role"] != "system");
        }
        let mut replaced = false;
        if self.has_handlers("context") {
            let result = self
                .emit(
                    "context",
                    json!({ "type": "context", "messages": context.clone() }),
                )
                .await;
            if let Some(messages) = result.ok().and_then(|r| r["messages"].as_array().cloned()) {
                replaced = messages != context;
                context = messages;
            }
        }
        let mut system_prompt = self
            .shared
            .state
            .lock()
            .unwrap()
            .agent
            .system_prompt
            .clone();
        // pi 1.6.0's `context_with_system` handlers then see the whole transcript (the system
        // messages replayed into one when `context` handlers replaced the conversation), and
        // the request gets what they return: its prompt from the system messages they leave.
        if self.shared.pi.is_1_6() && self.has_handlers("context_with_system") {
            let full: Vec<Value> = if replaced {
                system_message::current(&transcript)
                    .into_iter()
                    .chain(context.iter().cloned())
                    .collect()
            } else {
                transcript
            };
            let result = self
                .emit(
                    "context_with_system",
                    json!({ "type": "context_with_system", "messages": full.clone() }),
                )
                .await;
            if let Some(returned) = result.ok().and_then(|r| r["messages"].as_array().cloned())
                && returned != full
            {
                system_prompt = system_message::prompt_text(&returned);
                context = returned
                    .into_iter()
                    .filter(|m| m["role"] != "system")
                    .collect();
            }
        }
        let llm_context = LlmContext {
            system_prompt,
            messages: messages::convert_to_llm(&context),
            tools: self.active_tool_schemas(),
        };
        let options = StreamOptions {
            thinking_level: thinking_level.clone(),
            session_id: Some(self.shared.id.clone()),
            pi: self.shared.pi,
            ..Default::default()
        };
        let mut payload = model.build_payload(&llm_context, &options);
        if self.has_handlers("before_provider_request") {
            let result = self
                .emit(
                    "before_provider_request",
                    json!({ "type": "before_provider_request", "payload": payload }),
                )
                .await;
            if let Some(replaced) = result.ok().filter(|p| !p.is_null()) {
                payload = replaced;
            }
        }

        let headers = self.provider_headers().await;
        let (items, mut received) = tokio::sync::mpsc::unbounded_channel();
        let cancel = self.shared.abort.subscribe();
        let pi = self.shared.pi;
        let task = tokio::spawn({
            let model = model.clone();
            async move {
                model
                    .stream_with_headers(payload, &headers, items, cancel, pi)
                    .await
            }
        });
        let mut started = false;
        while let Some(item) = received.recv().await {
            match item {
                StreamItem::Response { status, headers } => {
                    if self.has_handlers("after_provider_response") {
                        let _ = self
                            .emit(
                                "after_provider_response",
                                json!({ "type": "after_provider_response", "status": status, "headers": headers }),
                            )
                            .await;
                    }
                }
                // pi 1.6.0 hands each provider event to extensions before it is applied.
                StreamItem::Provider(data) => {
                    if pi.is_1_6() && self.has_handlers("provider_stream_event") {
                        let info = model.info();
                        let _ = self
                            .emit(
                                "provider_stream_event",
                                json!({
                                    "data": data, "type": "provider_stream_event",
                                    "provider": info["provider"], "api": info["api"], "model": info["id"],
                                }),
                            )
                            .await;
                    }
                }
                StreamItem::Event(event) => match event["type"].as_str() {
                    Some("start") => {
                        started = true;
                        self.agent_event(
                            json!({ "type": "message_start", "message": event["partial"] }),
                        )
                        .await;
                    }
                    Some("done") | Some("error") | None => {}
                    Some(_) if started => {
                        let partial = event["partial"].clone();
                        self.agent_event(json!({
                            "type": "message_update",
                            "assistantMessageEvent": event,
                            "message": partial,
                        }))
                        .await;
                    }
                    Some(_) => {}
                },
            }
        }
        let final_message = match task.await {
            // pi 1.6.0's agent notes the thinking level the answer was made with.
            Ok(mut message) if pi.is_1_6() => {
                message["thinkingLevel"] = json!(thinking_level);
                message
            }
            Ok(message) => message,
            Err(e) => {
                let info = model.info();
                json!({
                    "role": "assistant", "content": [],
                    "api": info["api"], "provider": info["provider"], "model": info["id"],
                    "usage": messages::empty_usage(),
                    "stopReason": "error", "errorMessage": format!("model task failed: {e}"),
                    "timestamp": now_ms(),
                })
            }
        };
        if !started {
            self.agent_event(json!({ "type": "message_start", "message": final_message }))
                .await;
        }
        self.message_end(final_message).await
    }

    /// pi 1.6.0's `before_provider_headers`: handlers edit the request's headers in place.
    /// They start from none, since the provider's own (its key, its configured headers) stay
    /// on the host, and what they add goes with the request without replacing those.
    async fn provider_headers(&mut self) -> Vec<(String, String)> {
        if !self.shared.pi.is_1_6() || !self.has_handlers("before_provider_headers") {
            return Vec::new();
        }
        let event = json!({ "type": "before_provider_headers", "headers": {} });
        let Ok((_, event)) = self.emit_with_event("before_provider_headers", event).await else {
            return Vec::new();
        };
        event["headers"]
            .as_object()
            .into_iter()
            .flatten()
            .filter_map(|(name, value)| Some((name.clone(), value.as_str()?.to_owned())))
            .collect()
    }

    /// The active tools as the model sees them.
    fn active_tool_schemas(&self) -> Vec<Value> {
        let state = self.shared.state.lock().unwrap();
        state
            .active_tools
            .iter()
            .filter_map(|name| state.tool(name))
            .map(|t| json!({ "name": t.name, "description": t.description, "parameters": t.parameters }))
            .collect()
    }

    /// Records a message that reached `message_end` the way pi does: custom messages as
    /// custom_message entries, user / assistant / tool results as message entries.
    fn persist_message(&self, message: &Value) {
        let appended = {
            let mut state = self.shared.state.lock().unwrap();
            match message["role"].as_str() {
                Some("custom") => Some(state.store.append_custom_message_entry(
                    message["customType"].as_str().unwrap_or_default(),
                    message["content"].clone(),
                    message["display"] != json!(false),
                    Some(message["details"].clone()).filter(|d| !d.is_null()),
                )),
                Some("user" | "assistant" | "toolResult" | "system") => {
                    Some(state.store.append_message(message.clone()))
                }
                _ => None,
            }
        };
        match appended {
            Some(Ok(entry)) => self.shared.emit(SessionEvent::Entry { entry }),
            Some(Err(e)) => self.error(RUNTIME, "session", format!("{e:#}")),
            None => {}
        }
    }
}

/// pi's `AgentActivityOutcome` of an answer.
fn outcome_of(assistant: &Value) -> &'static str {
    match assistant["stopReason"].as_str() {
        Some("aborted") => "aborted",
        Some("error") => "error",
        _ => "completed",
    }
}
