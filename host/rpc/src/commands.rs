//! pi's RPC commands (docs/rpc.md, modes/rpc/rpc-mode.js): those answered from the shared
//! state by the reader, and those the worker runs on the session.

use std::path::Path;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Output, RpcDialogs, Work, response};
use pichamber_session::export_html::{self, ExportExtras};
use pichamber_session::messages;
use pichamber_session::state::{AgentRequest, Disposition, SessionShared};
use pichamber_session::{ForkPosition, QueueMode, Session};

fn same_model(a: &Value, b: &Value) -> bool {
    a["provider"] == b["provider"] && a["id"] == b["id"]
}

fn text_arg<'a>(command: &'a Value, field: &str) -> Result<&'a str, String> {
    command[field]
        .as_str()
        .ok_or_else(|| format!("{} needs \"{field}\" (a string)", command["type"]))
}

fn images_arg(command: &Value) -> Vec<Value> {
    command["images"].as_array().cloned().unwrap_or_default()
}

fn mode_name(mode: QueueMode) -> &'static str {
    match mode {
        QueueMode::All => "all",
        QueueMode::OneAtATime => "one-at-a-time",
    }
}

fn parse_mode(command: &Value) -> Result<QueueMode, String> {
    match command["mode"].as_str() {
        Some("all") => Ok(QueueMode::All),
        Some("one-at-a-time") => Ok(QueueMode::OneAtATime),
        other => Err(format!(
            "mode must be \"all\" or \"one-at-a-time\", got {}",
            other.map_or("nothing".into(), |m| format!("{m:?}"))
        )),
    }
}

/// One input line, on the reader's side.
pub(super) fn handle_line(
    line: &str,
    shared: &Arc<SessionShared>,
    dialogs: &RpcDialogs,
    output: &Arc<Output>,
    work: &mpsc::UnboundedSender<Work>,
) {
    let command: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => {
            output.line(&response(
                &Value::Null,
                "parse",
                Err(format!("Failed to parse command: {e}")),
            ));
            return;
        }
    };
    if command["type"] == "extension_ui_response" {
        dialogs.resolve(&command);
        return;
    }
    let id = command.get("id").cloned().unwrap_or(Value::Null);
    let kind = command["type"].as_str().unwrap_or_default().to_owned();
    let outcome = match kind.as_str() {
        "prompt" => {
            let text = match text_arg(&command, "message") {
                Ok(t) => t.to_owned(),
                Err(e) => {
                    output.line(&response(&id, "prompt", Err(e)));
                    return;
                }
            };
            let behavior = command["streamingBehavior"].as_str();
            // During a run, a plain prompt is queued (or refused) at once, as pi answers it;
            // with input handlers or as a command it needs the session and waits its turn.
            let immediate = {
                let state = shared.state.lock().unwrap();
                state.agent.streaming
                    && !state.has_handlers("input")
                    && text
                        .strip_prefix('/')
                        .is_none_or(|t| state.command(t.split(' ').next().unwrap_or("")).is_none())
            };
            if immediate {
                let outcome = shared.queue_user_message(&text, &images_arg(&command), behavior);
                output.line(&response(
                    &id,
                    "prompt",
                    outcome.map(|()| disposition(Disposition::Queued)),
                ));
                return;
            }
            // Answered when the session accepts (or rejects) it; queued into a running run.
            let answer = output.clone();
            let answer_id = id.clone();
            shared
                .state
                .lock()
                .unwrap()
                .agent
                .requests
                .push_back(AgentRequest::UserMessage {
                    text,
                    images: images_arg(&command),
                    deliver_as: command["streamingBehavior"].as_str().map(str::to_owned),
                    source: "rpc",
                    commands: true,
                    respond: Some(Box::new(move |outcome| {
                        answer.line(&response(&answer_id, "prompt", outcome.map(disposition)));
                    })),
                });
            let _ = work.send(Work::Wake);
            return;
        }
        "steer" | "follow_up" => queue(shared, &command, &kind),
        "abort" => {
            // pi aborts what runs; an idle abort must not cancel the next operation.
            let busy = {
                let state = shared.state.lock().unwrap();
                state.agent.streaming || state.agent.compacting
            };
            if busy {
                shared.abort.send_replace(true);
            }
            abort_retry(shared);
            Ok(None)
        }
        "abort_bash" => {
            shared.bash_abort.send_replace(true);
            Ok(None)
        }
        "abort_retry" => {
            abort_retry(shared);
            Ok(None)
        }
        "set_auto_retry" => match command["enabled"].as_bool() {
            Some(enabled) => {
                shared.state.lock().unwrap().agent.retry.enabled = enabled;
                Ok(None)
            }
            None => Err("set_auto_retry needs \"enabled\" (true or false)".into()),
        },
        "get_state" => Ok(Some(state_of(shared))),
        "get_messages" => {
            let state = shared.state.lock().unwrap();
            Ok(Some(json!({ "messages": state.agent.messages })))
        }
        "get_commands" => {
            let state = shared.state.lock().unwrap();
            Ok(Some(json!({ "commands": state.commands_json() })))
        }
        "get_fork_messages" => Ok(Some(json!({ "messages": fork_messages(shared) }))),
        // pi 1.6.0's: the levels the current model takes, the queues taken back, the session's
        // entries (after a cursor) and its tree.
        "get_available_thinking_levels" => Ok(Some(json!({ "levels": thinking_levels(shared) }))),
        "clear_queue" => Ok(Some(clear_queue(shared))),
        "get_entries" => entries_since(shared, &command["since"]),
        "get_tree" => {
            let state = shared.state.lock().unwrap();
            let store = &state.store;
            if store.get_entries().len() > pichamber_session::store::MAX_TREE_ENTRIES {
                Err(format!(
                    "get_tree: the session has more than {} entries; use get_entries",
                    pichamber_session::store::MAX_TREE_ENTRIES
                ))
            } else {
                Ok(Some(
                    json!({ "tree": store.get_tree().to_json(), "leafId": store.get_leaf_id() }),
                ))
            }
        }
        // pi leaves `text` out when there is none.
        "get_last_assistant_text" => Ok(Some(match last_assistant_text(shared) {
            Value::Null => json!({}),
            text => json!({ "text": text }),
        })),
        "get_session_stats" => Ok(Some(session_stats(shared))),
        "set_steering_mode" | "set_follow_up_mode" => parse_mode(&command).map(|mode| {
            let mut state = shared.state.lock().unwrap();
            if kind == "set_steering_mode" {
                state.agent.steering_mode = mode;
            } else {
                state.agent.follow_up_mode = mode;
            }
            None
        }),
        "set_auto_compaction" => match command["enabled"].as_bool() {
            Some(enabled) => {
                shared.state.lock().unwrap().agent.auto_compaction = enabled;
                Ok(None)
            }
            None => Err("set_auto_compaction needs \"enabled\" (true or false)".into()),
        },
        "new_session"
        | "switch_session"
        | "fork"
        | "clone"
        | "compact"
        | "set_model"
        | "cycle_model"
        | "get_available_models"
        | "set_thinking_level"
        | "cycle_thinking_level"
        | "bash"
        | "set_session_name"
        | "export_html" => {
            let _ = work.send(Work::Command(id, command));
            return;
        }
        // pi 0.73.1 answers an unknown command without its id; 1.6.0 with it.
        _ => {
            let shown = match &command["type"] {
                Value::String(s) => s.clone(),
                Value::Null => "undefined".into(),
                other => other.to_string(),
            };
            let id = if shared.pi.is_1_6() {
                &id
            } else {
                &Value::Null
            };
            output.line(&response(
                id,
                &kind,
                Err(format!("Unknown command: {shown}")),
            ));
            return;
        }
    };
    output.line(&response(&id, &kind, outcome));
}

/// Cancels the wait before an automatic retry, when there is one (pi's `abortRetry`).
fn abort_retry(shared: &SessionShared) {
    if shared.state.lock().unwrap().agent.retrying {
        shared.retry_abort.send_replace(true);
    }
}

/// `steer` / `follow_up`: queued as they are (no `input` event, as in pi); extension
/// commands cannot be queued.
fn queue(shared: &SessionShared, command: &Value, kind: &str) -> Result<Option<Value>, String> {
    let text = text_arg(command, "message")?;
    if let Some(name) = text
        .strip_prefix('/')
        .map(|t| t.split(' ').next().unwrap_or(""))
        && shared.state.lock().unwrap().command(name).is_some()
    {
        return Err(format!(
            "Extension command \"/{name}\" cannot be queued. Use prompt() or execute the command when not streaming."
        ));
    }
    let behavior = if kind == "steer" { "steer" } else { "followUp" };
    shared
        .queue_user_message(text, &images_arg(command), Some(behavior))
        .map(|()| disposition(Disposition::Queued))
}

/// pi 1.6.0's `data` of a prompt's, steer's or follow-up's response: what became of it
/// (0.73.1 sent none; its clients ignore it).
fn disposition(d: Disposition) -> Option<Value> {
    Some(json!({ "disposition": d.as_str() }))
}

fn state_of(shared: &SessionShared) -> Value {
    let state = shared.state.lock().unwrap();
    let agent = &state.agent;
    let mut out = json!({
        "model": state.model,
        "thinkingLevel": state.thinking_level,
        "isStreaming": agent.streaming,
        "isCompacting": agent.compacting,
        "steeringMode": mode_name(agent.steering_mode),
        "followUpMode": mode_name(agent.follow_up_mode),
    });
    if let Some(file) = state.store.get_session_file() {
        out["sessionFile"] = json!(file.to_string_lossy());
    }
    out["sessionId"] = json!(state.store.get_session_id());
    if let Some(name) = state.store.get_session_name() {
        out["sessionName"] = json!(name);
    }
    out["autoCompactionEnabled"] = json!(agent.auto_compaction);
    out["messageCount"] = json!(agent.messages.len());
    out["pendingMessageCount"] = json!(agent.queued_steering.len() + agent.queued_follow_up.len());
    out
}

/// pi's `getSupportedThinkingLevels` of the current model (every level without one).
fn thinking_levels(shared: &SessionShared) -> Vec<&'static str> {
    const ALL: [&str; 7] = ["off", "minimal", "low", "medium", "high", "xhigh", "max"];
    let state = shared.state.lock().unwrap();
    let Some(model) = &state.model else {
        return ALL.to_vec();
    };
    if model["reasoning"] != json!(true) {
        return vec!["off"];
    }
    let map = &model["thinkingLevelMap"];
    ALL.into_iter()
        .filter(|level| match map.get(*level) {
            Some(Value::Null) => false,
            Some(_) => true,
            None => !matches!(*level, "xhigh" | "max"),
        })
        .collect()
}

/// pi's `clearQueue`: the queued steering and follow-up texts, taken back.
fn clear_queue(shared: &SessionShared) -> Value {
    let taken = {
        let mut state = shared.state.lock().unwrap();
        let agent = &mut state.agent;
        agent.steering.clear();
        agent.follow_up.clear();
        json!({
            "steering": std::mem::take(&mut agent.queued_steering),
            "followUp": std::mem::take(&mut agent.queued_follow_up),
        })
    };
    shared.emit_queue_update();
    taken
}

/// pi's `get_entries`: every entry, or those after the entry `since`, with the leaf's id.
fn entries_since(shared: &SessionShared, since: &Value) -> Result<Option<Value>, String> {
    let state = shared.state.lock().unwrap();
    let entries = state.store.get_entries();
    let start = match since {
        Value::Null => 0,
        since => {
            let at = entries
                .iter()
                .position(|e| &e["id"] == since)
                .ok_or_else(|| format!("Entry not found: {}", since.as_str().unwrap_or("?")))?;
            at + 1
        }
    };
    Ok(Some(
        json!({ "entries": entries[start..], "leafId": state.store.get_leaf_id() }),
    ))
}

fn fork_messages(shared: &SessionShared) -> Vec<Value> {
    let state = shared.state.lock().unwrap();
    state
        .store
        .get_entries()
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "user")
        .filter_map(|e| {
            let text = messages::user_text(&e["message"]);
            (!text.is_empty()).then(|| json!({ "entryId": e["id"], "text": text }))
        })
        .collect()
}

fn last_assistant_text(shared: &SessionShared) -> Value {
    let state = shared.state.lock().unwrap();
    let last = state.agent.messages.iter().rev().find(|m| {
        m["role"] == "assistant"
            && !(m["stopReason"] == "aborted"
                && m["content"].as_array().is_none_or(|c| c.is_empty()))
    });
    let text: String = last
        .and_then(|m| m["content"].as_array())
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    let text = text.trim();
    if text.is_empty() {
        Value::Null
    } else {
        json!(text)
    }
}

fn session_stats(shared: &SessionShared) -> Value {
    let state = shared.state.lock().unwrap();
    let messages = &state.agent.messages;
    let count = |role: &str| messages.iter().filter(|m| m["role"] == role).count();
    let (mut calls, mut input, mut output, mut read, mut write, mut cost) = (0, 0, 0, 0, 0, 0.0);
    for m in messages.iter().filter(|m| m["role"] == "assistant") {
        calls += m["content"]
            .as_array()
            .map_or(0, |c| c.iter().filter(|b| b["type"] == "toolCall").count());
        let usage = &m["usage"];
        input += usage["input"].as_u64().unwrap_or(0);
        output += usage["output"].as_u64().unwrap_or(0);
        read += usage["cacheRead"].as_u64().unwrap_or(0);
        write += usage["cacheWrite"].as_u64().unwrap_or(0);
        cost += usage["cost"]["total"].as_f64().unwrap_or(0.0);
    }
    let mut out = json!({});
    if let Some(file) = state.store.get_session_file() {
        out["sessionFile"] = json!(file.to_string_lossy());
    }
    out["sessionId"] = json!(state.store.get_session_id());
    out["userMessages"] = json!(count("user"));
    out["assistantMessages"] = json!(count("assistant"));
    out["toolCalls"] = json!(calls);
    out["toolResults"] = json!(count("toolResult"));
    out["totalMessages"] = json!(messages.len());
    out["tokens"] = json!({
        "input": input, "output": output, "cacheRead": read, "cacheWrite": write,
        "total": input + output + read + write,
    });
    out["cost"] = json!(cost);
    if let Some(usage) = state.context_usage(shared.pi) {
        out["contextUsage"] = usage;
    }
    out
}

const THINKING_LEVELS: [&str; 5] = ["off", "minimal", "low", "medium", "high"];

/// A command that changes the session, on the worker's side.
pub(super) async fn run_session_command(
    session: &mut Session,
    command: &Value,
) -> Result<Option<Value>, String> {
    let current_model = || session.shared.state.lock().unwrap().model.clone();
    match command["type"].as_str().unwrap_or_default() {
        "new_session" => {
            let cancelled = session.new_session().await?;
            Ok(Some(json!({ "cancelled": cancelled })))
        }
        "switch_session" => {
            let path = text_arg(command, "sessionPath")?;
            let cancelled = session.switch_session(Path::new(path)).await?;
            Ok(Some(json!({ "cancelled": cancelled })))
        }
        "fork" => {
            let entry = text_arg(command, "entryId")?;
            let outcome = session.fork(entry, ForkPosition::Before).await?;
            let mut data = json!({ "cancelled": outcome.cancelled });
            if let Some(text) = outcome.selected_text {
                data["text"] = json!(text);
            }
            Ok(Some(data))
        }
        "clone" => {
            let cancelled = session.clone_session().await?;
            Ok(Some(json!({ "cancelled": cancelled })))
        }
        "compact" => {
            let instructions = command["customInstructions"].as_str();
            session.compact(instructions, "manual").await.map(Some)
        }
        "get_available_models" => {
            let mut infos: Vec<Value> = session
                .selectable_models()
                .iter()
                .map(|m| m.info())
                .collect();
            // The session's own model is listed even when it is not one models.json defines.
            if let Some(current) = current_model()
                && !infos.iter().any(|m| same_model(m, &current))
            {
                infos.insert(0, current);
            }
            Ok(Some(json!({ "models": infos })))
        }
        "set_model" => {
            let provider = text_arg(command, "provider")?;
            let id = text_arg(command, "modelId")?;
            let model = session
                .find_model(provider, id)
                .ok_or_else(|| format!("Model not found: {provider}/{id}"))?;
            let info = model.info();
            session.set_model(model, "set").await?;
            Ok(Some(info))
        }
        "cycle_model" => {
            let models = session.selectable_models();
            if models.len() < 2 {
                return Ok(Some(Value::Null));
            }
            let current = current_model();
            let at = models
                .iter()
                .position(|m| current.as_ref().is_some_and(|c| same_model(&m.info(), c)));
            let next = models[at.map_or(0, |i| (i + 1) % models.len())].clone();
            let info = next.info();
            session.set_model(next, "cycle").await?;
            let level = session.shared.state.lock().unwrap().thinking_level.clone();
            Ok(Some(
                json!({ "model": info, "thinkingLevel": level, "isScoped": false }),
            ))
        }
        "set_thinking_level" => {
            let level = text_arg(command, "level")?;
            session.change_thinking_level(level).await.map(|()| None)
        }
        "cycle_thinking_level" => {
            let reasoning = current_model().is_some_and(|m| m["reasoning"] == json!(true));
            if !reasoning {
                return Ok(Some(Value::Null));
            }
            let current = session.shared.state.lock().unwrap().thinking_level.clone();
            let at = THINKING_LEVELS.iter().position(|l| *l == current);
            let next = THINKING_LEVELS[at.map_or(0, |i| (i + 1) % THINKING_LEVELS.len())];
            session.change_thinking_level(next).await?;
            Ok(Some(json!({ "level": next })))
        }
        "bash" => {
            let line = text_arg(command, "command")?;
            session.execute_bash(line, false).await.map(Some)
        }
        "set_session_name" => {
            let name = text_arg(command, "name")?;
            session.set_session_name(name).map(|()| None)
        }
        "export_html" => {
            let output = match &command["outputPath"] {
                Value::Null => None,
                Value::String(s) => Some(s.as_str()),
                _ => return Err("export_html: \"outputPath\" must be a string".into()),
            };
            let state = session.shared.state.lock().unwrap();
            let extras = ExportExtras {
                system_prompt: Some(state.agent.system_prompt.clone()).filter(|p| !p.is_empty()),
                tools: state
                    .active_tools
                    .iter()
                    .filter_map(|name| state.tool(name))
                    .map(|t| json!({ "name": t.name, "description": t.description }))
                    .collect(),
            };
            let path = export_html::export_store(&state.store, output, &extras)?;
            Ok(Some(json!({ "path": path.to_string_lossy() })))
        }
        other => Err(format!("Unknown command: {other}")),
    }
}
