//! Tool calls as pi's agent loop runs them (pi-agent-core agent-loop.js):
//!
//! preflight, in source order: `tool_execution_start`, `prepareArguments`, validation against
//! the tool's JSON schema (with pi's coercion of strings to numbers / booleans), then the
//! `tool_call` gate, whose handlers may block the call or rewrite its input;
//! execution; `tool_result` middleware; `tool_execution_end`; a toolResult message each.
//!
//! Parallel mode (pi's default): every call is preflighted first, then executed; built-in
//! tools run concurrently on the host, extension tools one after another (an instance runs
//! one call at a time); result messages follow in source order. A tool with
//! `executionMode: "sequential"` makes the whole batch sequential, as in pi.

use futures::FutureExt;
use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::{Value, json};

use super::Session;
use super::events::SessionEvent;
use super::messages::{self, error_result, now_ms};
use super::state::{Exposure, RegisteredTool, SessionShared, ToolSource};
use pichamber_access::Grants;
use pichamber_pi::PiVersion;
use pichamber_tools::{self as tools, ToolOutput};
use std::sync::Arc;

/// How a batch of tool calls runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ToolExecution {
    #[default]
    Parallel,
    Sequential,
}

/// A call after preflight, ready to run.
struct Prepared {
    call: Value,
    id: String,
    name: String,
    source: ToolSource,
    args: Value,
    /// The running call this one is nested in (`ctx.executeTool`, pi 1.6.0).
    parent: Option<String>,
}

/// Which tools a call may reach.
#[derive(Debug, Clone, PartialEq)]
enum Reach {
    /// The model's call: the active tools.
    Active,
    /// `pichamber run --tool`: any registered tool.
    Any,
    /// A nested call of the running call `parent`: pi 1.6.0's callable tools (the active
    /// `direct` ones and every `codemode` or `deferred` one).
    Callable { parent: String },
}

/// A call's final result.
struct Finalized {
    call: Value,
    result: Value,
    is_error: bool,
    /// How long the tool's execute took (pi 1.6.0 reports it); `None` when it never ran.
    duration_ms: Option<u64>,
}

enum Preflight {
    /// Ended before execution (unknown tool, invalid arguments, blocked).
    Immediate(Finalized),
    Ready(Prepared),
}

/// A built-in tool's outcome and how long it ran, in milliseconds.
type BuiltinTask = tokio::task::JoinHandle<(Result<ToolOutput, String>, u64)>;
type BuiltinJoin = Result<(Result<ToolOutput, String>, u64), tokio::task::JoinError>;

/// A built-in tool's outcome as a result value (an Err is pi's thrown error), whether it is
/// an error, and its run time.
fn builtin_result(name: &str, joined: BuiltinJoin) -> (Value, bool, Option<u64>) {
    match joined {
        Ok((Ok(output), ms)) => {
            let mut result = json!({ "content": output.content });
            if !output.details.is_null() {
                result["details"] = output.details;
            }
            if let Some(structured) = output.structured_content {
                result["structuredContent"] = structured;
            }
            (result, output.is_error, Some(ms))
        }
        Ok((Err(message), ms)) => (error_result(&message), true, Some(ms)),
        Err(e) => (
            error_result(&format!("tool {name} failed: {e}")),
            true,
            None,
        ),
    }
}

/// Milliseconds since `started`, rounded as pi's `Math.round(performance.now() - t)`.
fn elapsed_ms(started: std::time::Instant) -> u64 {
    (started.elapsed().as_secs_f64() * 1000.0).round() as u64
}

enum Running {
    Builtin(Prepared, BuiltinTask),
    Extension(Prepared),
}

impl Session {
    /// Runs an assistant message's tool calls; returns the toolResult messages in source order
    /// and whether every call asked to terminate the run.
    pub(super) async fn execute_tool_calls(&mut self, assistant: &Value) -> (Vec<Value>, bool) {
        let calls = messages::tool_calls(assistant);
        let sequential = self.settings.tool_execution == ToolExecution::Sequential || {
            let state = self.shared.state.lock().unwrap();
            calls.iter().any(|c| {
                c["name"]
                    .as_str()
                    .and_then(|n| state.tool(n))
                    .is_some_and(|t| t.execution_mode.as_deref() == Some("sequential"))
            })
        };
        let mut finalized = Vec::new();
        let mut results = Vec::new();
        if sequential {
            for call in calls {
                self.tool_execution_start(&call).await;
                let done = match self.preflight(&call, Reach::Active).await {
                    Preflight::Immediate(f) => f,
                    Preflight::Ready(p) => {
                        let running = self.start_tool(p);
                        self.finish(running).await
                    }
                };
                self.tool_execution_end(&done).await;
                let message = self.result_message(&done);
                results.push(self.deliver_message(message).await);
                finalized.push(done);
            }
        } else {
            // Preflight in order; built-in tools start running at once.
            let mut slots: Vec<Option<Finalized>> = Vec::new();
            let mut extension_calls = Vec::new();
            let mut builtins = FuturesUnordered::new();
            for (i, call) in calls.into_iter().enumerate() {
                slots.push(None);
                self.tool_execution_start(&call).await;
                match self.preflight(&call, Reach::Active).await {
                    Preflight::Immediate(f) => {
                        self.tool_execution_end(&f).await;
                        slots[i] = Some(f);
                    }
                    Preflight::Ready(p) => match self.start_tool(p) {
                        Running::Builtin(p, task) => {
                            builtins.push(async move { (i, p, task.await) })
                        }
                        Running::Extension(p) => extension_calls.push((i, p)),
                    },
                }
            }
            // Calls end as they finish (pi's tool_execution_end order): extension tools run
            // one at a time in their instances while built-in ones finish around them.
            for (i, p) in extension_calls {
                while let Some(Some((j, p, joined))) = builtins.next().now_or_never() {
                    slots[j] = Some(self.end_builtin(p, joined).await);
                }
                let started = std::time::Instant::now();
                let (result, is_error) = self.execute_extension_tool(&p).await;
                let ms = Some(elapsed_ms(started));
                let f = self.finalize(p, result, is_error, ms).await;
                self.tool_execution_end(&f).await;
                slots[i] = Some(f);
            }
            while let Some((j, p, joined)) = builtins.next().await {
                slots[j] = Some(self.end_builtin(p, joined).await);
            }
            finalized.extend(slots.into_iter().flatten());
            for done in &finalized {
                let message = self.result_message(done);
                results.push(self.deliver_message(message).await);
            }
        }
        let terminate = !finalized.is_empty()
            && finalized
                .iter()
                .all(|f| f.result["terminate"] == json!(true));
        (results, terminate)
    }

    async fn tool_execution_start(&mut self, call: &Value) {
        self.agent_event(json!({
            "type": "tool_execution_start",
            "toolCallId": call["id"], "toolName": call["name"], "args": call["arguments"],
        }))
        .await;
    }

    async fn tool_execution_end(&mut self, done: &Finalized) {
        let event = self.execution_end_event(done);
        self.agent_event(event).await;
    }

    fn execution_end_event(&self, done: &Finalized) -> Value {
        let mut event = json!({
            "type": "tool_execution_end",
            "toolCallId": done.call["id"], "toolName": done.call["name"],
            "result": done.result, "isError": done.is_error,
        });
        if let Some(ms) = done.duration_ms.filter(|_| self.shared.pi.is_1_6()) {
            event["durationMs"] = json!(ms);
        }
        event
    }

    /// The toolResult message of a finished call, with the record of the calls it made
    /// through `ctx.executeTool` (pi 1.6.0's `nestedCalls`).
    fn result_message(&mut self, done: &Finalized) -> Value {
        let mut message = result_message(done, self.shared.pi);
        let id = done.call["id"].as_str().unwrap_or_default();
        if let Some(record) = self.nested_records.remove(id).and_then(|r| r.snapshot()) {
            message["nestedCalls"] = record;
        }
        message
    }

    /// One nested call (`ctx.executeTool`) of a running tool, as pi 1.6.0 runs it: execution
    /// events with `parentToolCallId`, the pipeline against the callable tools, the outcome
    /// (pi-agent-core's `AgentToolCallOutcome`). Never fails: what cannot run is an error
    /// result.
    pub(super) fn nested_call(
        &mut self,
        parent: String,
        tool: String,
        arguments: Value,
    ) -> futures::future::BoxFuture<'_, Value> {
        async move {
            let n = self.nested_next.entry(parent.clone()).or_insert(0);
            *n += 1;
            let id = format!("{parent}/{n}");
            let call =
                json!({ "type": "toolCall", "id": id, "name": tool, "arguments": arguments });
            let Some(caller) = self.shared.nested.running(&parent) else {
                return json!({
                    "toolCall": { "type": "toolCall", "id": id, "name": tool, "arguments": arguments },
                    "result": error_result("ctx.executeTool: the calling tool call has ended"),
                    "isError": true,
                });
            };
            let (root, depth) = (caller.root.clone(), caller.depth);
            let at = self
                .nested_records
                .entry(root.clone())
                .or_default()
                .start(&call);
            let mut start = json!({
                "type": "tool_execution_start",
                "toolCallId": id, "toolName": tool, "args": call["arguments"],
            });
            start["parentToolCallId"] = json!(parent);
            self.agent_event(start).await;
            let refused = |message: String| Finalized {
                call: call.clone(),
                result: error_result(&message),
                is_error: true,
                duration_ms: None,
            };
            let reach = Reach::Callable {
                parent: parent.clone(),
            };
            let done = if depth + 1 > super::nested::MAX_DEPTH {
                refused(format!(
                    "ctx.executeTool: calls nest at most {} deep",
                    super::nested::MAX_DEPTH
                ))
            } else if let Some(refusal) = self.lent_by_nesting(&tool, &caller) {
                refused(refusal)
            } else {
                match self.preflight(&call, reach).await {
                    Preflight::Immediate(f) => f,
                    // The caller picks what a built-in reads and sees the result: it runs
                    // under the caller's grants, as the built-ins an extension runs itself.
                    Preflight::Ready(p) if p.source == ToolSource::Builtin => {
                        self.run_builtin_for(p, &caller.grants).await
                    }
                    Preflight::Ready(p) => {
                        let running = self.start_tool(p);
                        self.finish(running).await
                    }
                }
            };
            let mut end = self.execution_end_event(&done);
            end["parentToolCallId"] = json!(parent);
            self.agent_event(end).await;
            let text = messages::content_text(&done.result["content"]);
            if let Some(record) = self.nested_records.get_mut(&root) {
                record.finish(at, done.is_error, &text, done.duration_ms.unwrap_or(0));
            }
            let mut outcome =
                json!({ "toolCall": call, "result": done.result, "isError": done.is_error });
            if let Some(ms) = done.duration_ms {
                outcome["durationMs"] = json!(ms);
            }
            outcome
        }
        .boxed()
    }

    /// Why the nested call of `tool` by `caller` may not run: the tool is another extension's,
    /// whose grants reach further than the caller's own (the caller picks what it reads and
    /// sees the result; `Session::lent_grant` holds rewrites to the same rule).
    fn lent_by_nesting(&self, tool: &str, caller: &super::nested::Open) -> Option<String> {
        let owner = match self.shared.state.lock().unwrap().tool(tool)?.source {
            ToolSource::Extension(owner) if owner != caller.owner => owner,
            ToolSource::Host => return self.mcp_refusal(tool, caller.owner),
            _ => return None,
        };
        let slot = self.extensions.get(owner).filter(|s| !s.is_lent())?;
        let cwd = std::path::Path::new(&self.shared.cwd);
        let missing = slot.grants().beyond(&caller.grants, cwd)?;
        let name = &self.extensions[caller.owner].name;
        Some(format!(
            "{name} called {tool}, a tool of {}, which may reach what {name} may not ({missing}); \
             the call is refused: a nested call may not lend another extension's grants",
            slot.name
        ))
    }

    /// Why an extension may not call an MCP server's tool: the server is the operator's (its
    /// process runs unconfined) or another extension's. pi lets any tool call them.
    fn mcp_refusal(&self, tool: &str, caller: usize) -> Option<String> {
        let (server, scope) = self.mcp.as_ref()?.tool_server(tool)?;
        let name = &self.extensions[caller].name;
        match scope {
            pichamber_mcp::config::Scope::Extension(owner) if owner == caller => None,
            pichamber_mcp::config::Scope::Extension(_) => Some(format!(
                "{name} called {tool}, a tool of the MCP server \"{server}\" another extension registered; the call is refused: a nested call may not lend another extension's grants"
            )),
            _ => Some(format!(
                "{name} called {tool}, a tool of the MCP server \"{server}\" the operator configured, which runs outside every extension's grants; the call is refused: an extension may call only the MCP servers it registered"
            )),
        }
    }

    /// A nested call of a built-in tool, run under `grants` (the calling extension's).
    async fn run_builtin_for(&mut self, prepared: Prepared, grants: &Grants) -> Finalized {
        self.mark_running(&prepared);
        let shared = self.shared.clone();
        let id = prepared.id.clone();
        let on_update = move |partial: Value| report_update(&shared, &id, partial);
        let started = std::time::Instant::now();
        let cwd = std::path::PathBuf::from(&self.shared.cwd);
        let ran = tools::for_extension::run(
            grants,
            &prepared.name,
            prepared.args.clone(),
            &cwd,
            self.shared.pi,
            &on_update,
        )
        .await;
        let ms = Some(elapsed_ms(started));
        let (result, is_error) = match ran {
            Ok(result) => (result, false),
            Err(e) => (error_result(&e), true),
        };
        self.finalize(prepared, result, is_error, ms).await
    }

    /// Preflight: find the tool (active tools only when the model called it), prepare and
    /// validate its arguments, run the `tool_call` gate.
    async fn preflight(&mut self, call: &Value, reach: Reach) -> Preflight {
        let name = call["name"].as_str().unwrap_or_default().to_owned();
        let id = call["id"].as_str().unwrap_or_default().to_owned();
        let immediate = |message: &str| {
            Preflight::Immediate(Finalized {
                call: call.clone(),
                result: error_result(message),
                is_error: true,
                duration_ms: None,
            })
        };
        let tool: Option<RegisteredTool> = {
            let state = self.shared.state.lock().unwrap();
            let active = state.active_tools.contains(&name);
            state
                .tool(&name)
                .filter(|t| match reach {
                    Reach::Active => active,
                    Reach::Any => true,
                    Reach::Callable { .. } => match t.exposure {
                        Exposure::Codemode | Exposure::Deferred => true,
                        Exposure::Direct => active,
                        Exposure::ModelOnly | Exposure::Hidden => false,
                    },
                })
                .cloned()
        };
        let Some(tool) = tool else {
            return immediate(&format!("Tool {name} not found"));
        };
        let parent = match reach {
            Reach::Callable { parent } => Some(parent),
            _ => None,
        };
        // An extension runs one call at a time: the one whose tool makes this call cannot
        // run another of its tools meanwhile.
        if let ToolSource::Extension(owner) = tool.source
            && self.extensions.get(owner).is_some_and(|e| e.is_lent())
        {
            return immediate(&format!(
                "Tool {name} belongs to the extension whose running tool calls it; pichamber runs one call of an extension at a time, so a tool cannot call a tool of its own extension"
            ));
        }
        let mut args = call["arguments"].clone();
        match tool.source {
            ToolSource::Builtin => args = tools::prepare_arguments(&name, args),
            ToolSource::Extension(owner) if tool.has_prepare_arguments => {
                match self.extensions[owner].prepare_arguments(&name, &args).await {
                    Ok(prepared) => args = prepared,
                    Err(e) => return immediate(&e.to_string()),
                }
            }
            ToolSource::Extension(_) | ToolSource::Host => {}
        }
        // Validation is host work an extension's schema decides (bounded when the tool was
        // registered): it runs off the async workers so no other session waits for it, and
        // within the extension's wall limit for one call.
        let limit = self.options.call_wall_timeout;
        let validated = {
            let (tool, args) = (tool.clone(), args.clone());
            let pi = self.shared.pi;
            let check = tokio::task::spawn_blocking(move || validate_arguments(&tool, &args, pi));
            tokio::time::timeout(limit, check).await
        };
        let args = match validated {
            Ok(Ok(Ok(a))) => a,
            Ok(Ok(Err(message))) => return immediate(&message),
            Ok(Err(_)) => return immediate("the arguments could not be validated"),
            Err(_) => {
                return immediate(&format!(
                    "validating the arguments of {name} took longer than the {} s a call of \
                     its extension may take (--call-wall-timeout)",
                    limit.as_secs_f64()
                ));
            }
        };
        let mut args = args;
        if self.has_handlers("tool_call") {
            let mut event = json!({ "type": "tool_call", "toolName": name, "toolCallId": id });
            if let Some(parent) = &parent {
                event["parentToolCallId"] = json!(parent);
            }
            event["input"] = args.clone();
            let gate = self.emit_with_event("tool_call", event).await;
            match gate {
                Err(e) => return immediate(&e),
                Ok((r, _)) if r["block"] == json!(true) => {
                    let reason = r["reason"]
                        .as_str()
                        .filter(|s| !s.is_empty())
                        .unwrap_or("Tool execution was blocked");
                    return immediate(reason);
                }
                // Handlers may have rewritten the input; the tool runs with what they left.
                Ok((_, event)) => {
                    if let Some(input) = event.get("input") {
                        args = input.clone();
                    }
                }
            }
        }
        Preflight::Ready(Prepared {
            call: call.clone(),
            id,
            name,
            source: tool.source,
            args,
            parent,
        })
    }

    /// Records a call as running, so its partial results reach clients.
    fn mark_running(&self, prepared: &Prepared) {
        let running = (prepared.name.clone(), prepared.call["arguments"].clone());
        self.shared
            .state
            .lock()
            .unwrap()
            .agent
            .running_tools
            .insert(prepared.id.clone(), running);
    }

    /// Starts a prepared call: built-in tools begin running on the host at once.
    fn start_tool(&mut self, prepared: Prepared) -> Running {
        self.mark_running(&prepared);
        match (prepared.source, self.workspace.clone()) {
            (ToolSource::Builtin, Some(workspace)) => {
                let shared = self.shared.clone();
                let (name, id, args) = (
                    prepared.name.clone(),
                    prepared.id.clone(),
                    prepared.args.clone(),
                );
                let cancel = self.shared.abort.subscribe();
                let options = tools::ExecOptions {
                    pi: self.shared.pi,
                    session_env: self.session_env(),
                    ..Default::default()
                };
                let task = tokio::spawn(async move {
                    let on_update = move |partial: Value| report_update(&shared, &id, partial);
                    let started = std::time::Instant::now();
                    let output =
                        tools::execute_with(&name, &args, &workspace, &options, cancel, &on_update)
                            .await;
                    (output, elapsed_ms(started))
                });
                Running::Builtin(prepared, task)
            }
            (ToolSource::Host, _) => {
                let task = self.start_host_tool(&prepared);
                Running::Builtin(prepared, task)
            }
            _ => Running::Extension(prepared),
        }
    }

    /// Starts a tool of a built-in extension the host serves: an MCP server's, once its
    /// server is ready, or `tool_search`, once every server is.
    fn start_host_tool(&self, prepared: &Prepared) -> BuiltinTask {
        let (shared, mcp) = (self.shared.clone(), self.mcp.clone());
        let (name, args, id) = (
            prepared.name.clone(),
            prepared.args.clone(),
            prepared.id.clone(),
        );
        tokio::spawn(async move {
            let started = std::time::Instant::now();
            let outcome = if name == super::tool_search::NAME {
                if let Some(mcp) = &mcp {
                    mcp.wait_for_all().await;
                }
                super::tool_search::run(&mut shared.state.lock().unwrap(), &args)
            } else {
                let on_update = |partial: Value| report_update(&shared, &id, partial);
                match &mcp {
                    Some(mcp)
                        if super::mcp_extension::resources::NAMES.contains(&name.as_str()) =>
                    {
                        mcp.resource_tool(&name, &args).await
                    }
                    Some(mcp) => mcp.call(&name, args, &on_update).await,
                    None => Err(format!("Tool {name} not found")),
                }
            };
            let output = outcome.map(|result| ToolOutput {
                is_error: result["isError"] == json!(true),
                structured_content: result.get("structuredContent").cloned(),
                details: result["details"].clone(),
                content: result["content"].clone(),
            });
            (output, elapsed_ms(started))
        })
    }

    /// What pi 1.6.0's bash tells a command of its session (`tools::SESSION_ENV`).
    fn session_env(&self) -> Vec<(String, String)> {
        let state = self.shared.state.lock().unwrap();
        let mut env = vec![("PI_SESSION_ID".to_owned(), self.shared.id.clone())];
        if let Some(file) = state.store.get_session_file() {
            env.push((
                "PI_SESSION_FILE".into(),
                file.to_string_lossy().into_owned(),
            ));
        }
        if let Some(model) = &state.model {
            for (var, key) in [("PI_PROVIDER", "provider"), ("PI_MODEL", "id")] {
                if let Some(v) = model[key].as_str() {
                    env.push((var.into(), v.to_owned()));
                }
            }
        }
        env.push(("PI_REASONING_LEVEL".into(), state.thinking_level.clone()));
        env
    }

    /// Waits for / runs a started call, then `tool_execution_update`s and `tool_result`.
    async fn finish(&mut self, running: Running) -> Finalized {
        match running {
            Running::Builtin(p, task) => {
                let (result, is_error, ms) = builtin_result(&p.name, task.await);
                self.finalize(p, result, is_error, ms).await
            }
            Running::Extension(p) => {
                let started = std::time::Instant::now();
                let (result, is_error) = self.execute_extension_tool(&p).await;
                let ms = Some(elapsed_ms(started));
                self.finalize(p, result, is_error, ms).await
            }
        }
    }

    async fn end_builtin(&mut self, p: Prepared, joined: BuiltinJoin) -> Finalized {
        let (result, is_error, ms) = builtin_result(&p.name, joined);
        let f = self.finalize(p, result, is_error, ms).await;
        self.tool_execution_end(&f).await;
        f
    }

    /// A call's raw result through `tool_execution_update` and the `tool_result` middleware.
    async fn finalize(
        &mut self,
        prepared: Prepared,
        result: Value,
        is_error: bool,
        duration_ms: Option<u64>,
    ) -> Finalized {
        let (mut result, mut is_error) = (result, is_error);
        self.shared
            .state
            .lock()
            .unwrap()
            .agent
            .running_tools
            .remove(&prepared.id);
        self.dispatch_tool_updates(&prepared).await;
        // A message the tool sent (sendUserMessage with deliverAs) is queued before the call
        // ends, as pi queues it while the tool's promise settles.
        self.queue_streaming_requests().await;
        if self.has_handlers("tool_result") {
            let mut event = json!({
                "type": "tool_result", "toolName": prepared.name, "toolCallId": prepared.id,
            });
            if let Some(parent) = &prepared.parent {
                event["parentToolCallId"] = json!(parent);
            }
            event["input"] = prepared.args.clone();
            event["content"] = result["content"].clone();
            // pi leaves `details` out when the tool gave none.
            if let Some(details) = result.get("details") {
                event["details"] = details.clone();
            }
            event["isError"] = json!(is_error);
            let patched = self.emit("tool_result", event).await;
            if let Some(p) = patched.ok().filter(|p| !p.is_null()) {
                if !p["content"].is_null() {
                    result["content"] = p["content"].clone();
                }
                if !p["details"].is_null() {
                    result["details"] = p["details"].clone();
                }
                if let Some(e) = p["isError"].as_bool() {
                    is_error = e;
                }
            }
        }
        Finalized {
            call: prepared.call,
            result,
            is_error,
            duration_ms,
        }
    }

    async fn execute_extension_tool(&mut self, p: &Prepared) -> (Value, bool) {
        let ToolSource::Extension(owner) = p.source else {
            return (
                error_result(&format!(
                    "Tool {} is a built-in tool, and built-in tools are off in this session (--no-builtin-tools)",
                    p.name
                )),
                true,
            );
        };
        let ctx = self.ctx();
        let Some(mut instance) = self.extensions[owner].lend() else {
            return (
                error_result(&format!(
                    "Tool {} cannot run: its extension is busy",
                    p.name
                )),
                true,
            );
        };
        // While the tool runs, the calls it makes through ctx.executeTool (pi 1.6.0) are run
        // here, with the instance lent to it.
        let grants = Arc::new(instance.grants().clone());
        self.shared
            .nested
            .open(&p.id, owner, grants, p.parent.as_deref());
        let executed = {
            let call = instance.execute_tool(&p.name, &p.id, &p.args, &ctx);
            tokio::pin!(call);
            loop {
                let nested = tokio::select! {
                    done = &mut call => break done,
                    Some(nested) = self.nested_calls.recv() => nested,
                };
                // A request of a call that ended meanwhile is not run.
                if self.shared.nested.running(&nested.parent).is_none() {
                    continue;
                }
                let outcome = self
                    .nested_call(nested.parent, nested.tool, nested.arguments)
                    .await;
                let _ = nested.respond.send(outcome);
            }
        };
        self.shared.nested.close(&p.id);
        self.nested_next.remove(&p.id);
        self.extensions[owner].give_back(instance);
        self.flush_bus().await;
        match executed {
            Ok(r) => {
                // What else the tool returned rides along, as in pi; the fields pi's loop
                // reads come from their own slots only.
                let mut result = Value::Object(r.extra.unwrap_or_default());
                for reserved in ["content", "details", "terminate", "structuredContent"] {
                    result.as_object_mut().map(|o| o.remove(reserved));
                }
                result["content"] = r.content;
                if let Some(details) = r.details {
                    result["details"] = details;
                }
                if r.terminate {
                    result["terminate"] = json!(true);
                }
                // pi 1.6.0 keeps a tool's structuredContent in its result.
                if self.shared.pi == PiVersion::V1_6
                    && let Some(structured) = r.structured_content
                {
                    result["structuredContent"] = structured;
                }
                (result, r.is_error)
            }
            Err(e) => {
                let name = self.extensions[owner].name.clone();
                self.error(&name, &format!("tool:{}", p.name), &e);
                (error_result(&e.to_string()), true)
            }
        }
    }

    /// Gives extensions the partial results a tool reported while it ran.
    async fn dispatch_tool_updates(&mut self, p: &Prepared) {
        let updates: Vec<Value> = {
            let mut state = self.shared.state.lock().unwrap();
            let (mine, others): (Vec<_>, Vec<_>) = std::mem::take(&mut state.agent.tool_updates)
                .into_iter()
                .partition(|(id, _)| *id == p.id);
            state.agent.tool_updates = others;
            mine.into_iter().map(|(_, partial)| partial).collect()
        };
        if updates.is_empty() || !self.has_handlers("tool_execution_update") {
            return;
        }
        for partial in updates {
            let mut event = json!({
                "type": "tool_execution_update", "toolCallId": p.id, "toolName": p.name,
                "args": p.call["arguments"], "partialResult": partial,
            });
            if let Some(parent) = &p.parent {
                event["parentToolCallId"] = json!(parent);
            }
            let _ = self.emit("tool_execution_update", event).await;
        }
    }

    /// Runs one tool directly (`pichamber run --tool`): the same preflight, execution and
    /// `tool_result` middleware as a model's call, without the execution events.
    pub async fn execute_tool(&mut self, tool: &str, args: Value) -> super::ToolOutcome {
        self.next_call += 1;
        let call = json!({
            "type": "toolCall", "id": format!("call_{}", self.next_call),
            "name": tool, "arguments": args,
        });
        let known = self.shared.state.lock().unwrap().tool(tool).is_some();
        let done = if known {
            match self.preflight(&call, Reach::Any).await {
                Preflight::Immediate(f) => f,
                Preflight::Ready(p) => {
                    let running = self.start_tool(p);
                    self.finish(running).await
                }
            }
        } else {
            let names: Vec<String> = {
                let state = self.shared.state.lock().unwrap();
                state.tools.iter().map(|t| t.name.clone()).collect()
            };
            Finalized {
                call: call.clone(),
                result: error_result(&format!(
                    "Tool {tool} not found (registered tools: {})",
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                )),
                is_error: true,
                duration_ms: None,
            }
        };
        let outcome = super::ToolOutcome {
            tool_call_id: done.call["id"].as_str().unwrap_or_default().to_owned(),
            content: done.result["content"].clone(),
            details: done.result.get("details").cloned().unwrap_or(Value::Null),
            is_error: done.is_error,
            terminate: done.result["terminate"] == json!(true),
        };
        self.shared.emit(SessionEvent::ToolResult {
            tool_call_id: outcome.tool_call_id.clone(),
            tool_name: tool.to_owned(),
            content: outcome.content.clone(),
            details: outcome.details.clone(),
            is_error: outcome.is_error,
        });
        outcome
    }
}

/// A tool's partial result: reported to clients now, kept for the extensions'
/// `tool_execution_update` once the call returns.
pub(crate) fn report_update(shared: &SessionShared, id: &str, partial: Value) {
    let event = {
        let mut state = shared.state.lock().unwrap();
        let (name, args) = state
            .agent
            .running_tools
            .get(id)
            .cloned()
            .unwrap_or((String::new(), Value::Null));
        if state.agent.tool_updates.len() < MAX_KEPT_UPDATES {
            state
                .agent
                .tool_updates
                .push((id.to_owned(), partial.clone()));
        }
        json!({
            "type": "tool_execution_update", "toolCallId": id, "toolName": name,
            "args": args, "partialResult": partial,
        })
    };
    shared.emit(SessionEvent::Agent(event));
}

/// Partial results kept per session for extensions (clients get every one live).
const MAX_KEPT_UPDATES: usize = 1000;

fn result_message(done: &Finalized, pi: PiVersion) -> Value {
    let mut message = json!({
        "role": "toolResult",
        "toolCallId": done.call["id"],
        "toolName": done.call["name"],
        "content": done.result["content"],
    });
    if let Some(details) = done.result.get("details").filter(|d| !d.is_null()) {
        message["details"] = details.clone();
    }
    message["isError"] = json!(done.is_error);
    if let Some(ms) = done.duration_ms.filter(|_| pi.is_1_6()) {
        message["durationMs"] = json!(ms);
    }
    message["timestamp"] = json!(now_ms());
    message
}

/// Validates a call's arguments against the tool's schema after pi's coercions (TypeBox's
/// Value.Convert: "5" → 5 for a number, "true" → true for a boolean, 5 → "5" for a string).
/// The error lists each problem as pi formats it.
pub fn validate_arguments(
    tool: &RegisteredTool,
    args: &Value,
    pi: PiVersion,
) -> Result<Value, String> {
    let Some(validator) = tool.validator.get(&tool.parameters) else {
        return Ok(args.clone());
    };
    // pi 1.6.0 loosens and explains as its pi-schema does.
    if pi.is_1_6() {
        let schemas = super::pi_schema::Schemas::new(&tool.parameters);
        let coerced = schemas.coerce(args.clone());
        if validator.is_valid(&coerced) {
            return Ok(coerced);
        }
        return Err(validation_failed(tool, args, &schemas.explain(&coerced)));
    }
    let coerced = coerce(&tool.parameters, args.clone());
    let problems: Vec<String> = validator
        .iter_errors(&coerced)
        .map(|e| {
            let path = e.instance_path().to_string();
            let path = path.trim_start_matches('/').replace('/', ".");
            let path = match (&e.kind(), path.is_empty()) {
                (jsonschema::error::ValidationErrorKind::Required { property }, _) => {
                    let property = property.as_str().map(str::to_owned).unwrap_or_default();
                    if path.is_empty() {
                        property
                    } else {
                        format!("{path}.{property}")
                    }
                }
                (_, true) => "root".to_owned(),
                _ => path,
            };
            format!("  - {path}: {e}")
        })
        .collect();
    if problems.is_empty() {
        return Ok(coerced);
    }
    Err(validation_failed(tool, args, &problems))
}

fn validation_failed(tool: &RegisteredTool, args: &Value, problems: &[String]) -> String {
    format!(
        "Validation failed for tool \"{}\":\n{}\n\nReceived arguments:\n{}",
        tool.name,
        problems.join("\n"),
        serde_json::to_string_pretty(args).unwrap_or_default()
    )
}

fn coerce(schema: &Value, value: Value) -> Value {
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let wants = |t: &str| types.contains(&t);
    match value {
        Value::Object(map) if schema["properties"].is_object() => Value::Object(
            map.into_iter()
                .map(|(k, v)| {
                    let v = match schema["properties"].get(&k) {
                        Some(s) => coerce(s, v),
                        None => v,
                    };
                    (k, v)
                })
                .collect(),
        ),
        Value::Array(items) if schema["items"].is_object() => Value::Array(
            items
                .into_iter()
                .map(|v| coerce(&schema["items"], v))
                .collect(),
        ),
        Value::String(s) if !wants("string") => {
            if wants("integer")
                && let Ok(n) = s.trim().parse::<i64>()
            {
                json!(n)
            } else if wants("number")
                && let Ok(n) = s.trim().parse::<f64>()
                && n.is_finite()
            {
                // JavaScript has one number type: "5" becomes 5, not 5.0.
                if n.fract() == 0.0 && n.abs() < 9e15 {
                    json!(n as i64)
                } else {
                    json!(n)
                }
            } else if wants("boolean") && (s == "true" || s == "false") {
                json!(s == "true")
            } else {
                Value::String(s)
            }
        }
        Value::Number(n) if wants("string") && types.len() == 1 => Value::String(n.to_string()),
        Value::Bool(b) if wants("string") && types.len() == 1 => Value::String(b.to_string()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(schema: Value) -> RegisteredTool {
        RegisteredTool {
            source: ToolSource::Builtin,
            extension_name: String::new(),
            name: "t".into(),
            label: "t".into(),
            description: String::new(),
            validator: Default::default(),
            parameters: schema,
            prompt_snippet: None,
            prompt_guidelines: Vec::new(),
            has_prepare_arguments: false,
            execution_mode: None,
            constrained_sampling: None,
            exposure: Default::default(),
            default_active: None,
            namespace: None,
            annotations: None,
        }
    }

    #[test]
    fn coerces_like_typebox_then_validates() {
        let t = tool(json!({
            "type": "object",
            "properties": { "n": { "type": "number" }, "b": { "type": "boolean" }, "s": { "type": "string" } },
            "required": ["n"],
        }));
        let ok = validate_arguments(
            &t,
            &json!({ "n": "5", "b": "true", "s": 7 }),
            PiVersion::V0_73,
        )
        .unwrap();
        assert_eq!(ok, json!({ "n": 5, "b": true, "s": "7" }));
        let err = validate_arguments(&t, &json!({ "b": "maybe" }), PiVersion::V0_73).unwrap_err();
        assert!(
            err.starts_with("Validation failed for tool \"t\":\n  - n: "),
            "{err}"
        );
        assert!(err.contains("  - b: "), "{err}");
        assert!(
            err.ends_with("Received arguments:\n{\n  \"b\": \"maybe\"\n}"),
            "{err}"
        );
    }
}
