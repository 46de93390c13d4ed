//! pi 1.6.0's actionable boundaries: `turn_end` (after a turn's messages are persisted) and
//! `agent_before_settle` (when the agent would stop). Each handler, in load and registration
//! order, sees the entries and the continuation proposed so far and a preview of the context
//! rebuilt from them; the proposal is checked whole, appended in order, and `continue` asks
//! for one more model request (pi's `emitBoundary`, `_buildBoundaryContext`,
//! `_commitBoundaryDrafts`).
//!
//! A proposal is data an extension returns, so it is checked like any other value that crosses
//! the boundary: at most [`MAX_DRAFTS`] entries and [`MAX_DRAFT_BYTES`] per boundary, no entry
//! kind the host keeps for itself, and nothing is appended unless every draft applies.

use serde_json::{Value, json};

use super::Session;
use super::events::SessionEvent;
use super::messages;
use super::models::VIRTUAL_STATE_ENTRY;
use super::port::OWNED_TYPE_PREFIX;
use super::state::SessionState;
use super::store::SessionStore;

/// Entries one boundary may append.
pub const MAX_DRAFTS: usize = 64;
/// JSON bytes of the entries one boundary may append.
pub const MAX_DRAFT_BYTES: usize = 1 << 20;

/// Which boundary: they differ in when queued messages let the agent go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Boundary {
    TurnEnd,
    BeforeSettle,
}

impl Boundary {
    pub fn event_name(self) -> &'static str {
        match self {
            Boundary::TurnEnd => "turn_end",
            Boundary::BeforeSettle => "agent_before_settle",
        }
    }

    /// The name a guest passes to the `boundaryContext` session read.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "turn_end" => Some(Boundary::TurnEnd),
            "agent_before_settle" => Some(Boundary::BeforeSettle),
            _ => None,
        }
    }
}

/// pi's `BoundaryContextPreview`: the context as it would be with `drafts` appended.
pub fn preview(state: &SessionState, boundary: Boundary, drafts: &Value) -> Result<Value, String> {
    let mut scratch = state.store.scratch_copy();
    apply(&mut scratch, drafts)?;
    Ok(context_of(state, &scratch, boundary))
}

fn context_of(state: &SessionState, store: &SessionStore, boundary: Boundary) -> Value {
    let projection = store.build_session_projection();
    let context_entries: Vec<Value> = projection
        .iter()
        .map(|(entry, messages)| json!({ "sourceEntry": entry, "messages": messages }))
        .collect();
    let context_messages: Vec<Value> = projection.into_iter().flat_map(|(_, m)| m).collect();
    // pi 1.6.0's convertToLlm keeps system messages.
    let llm_messages: Vec<Value> = context_messages
        .iter()
        .flat_map(|m| match m["role"].as_str() {
            Some("system") => vec![m.clone()],
            _ => messages::convert_to_llm(std::slice::from_ref(m)),
        })
        .collect();
    let pending: Vec<Value> = state
        .agent
        .steering
        .iter()
        .chain(&state.agent.follow_up)
        .cloned()
        .collect();
    let final_role = llm_messages.last().and_then(|m| m["role"].as_str());
    let has_conversation = llm_messages.iter().any(|m| m["role"] != "system");
    let queued = !pending.is_empty();
    let can_continue = (has_conversation && final_role != Some("assistant"))
        || match boundary {
            Boundary::TurnEnd => queued,
            Boundary::BeforeSettle => final_role == Some("assistant") && queued,
        };
    json!({
        "contextEntries": context_entries,
        "contextMessages": context_messages,
        "llmMessages": llm_messages,
        "pendingMessages": pending,
        "canContinue": can_continue,
    })
}

/// Appends `drafts` to `store` in order; the first one that does not apply stops it with pi's
/// message. Returns the appended entries.
fn apply(store: &mut SessionStore, drafts: &Value) -> Result<Vec<Value>, String> {
    let Some(drafts) = drafts.as_array() else {
        return Err("entries must be an array".into());
    };
    if drafts.len() > MAX_DRAFTS {
        return Err(format!(
            "{} entries proposed; a boundary appends at most {MAX_DRAFTS}",
            drafts.len()
        ));
    }
    let bytes = serde_json::to_string(drafts).map_or(usize::MAX, |t| t.len());
    if bytes > MAX_DRAFT_BYTES {
        return Err(format!(
            "the proposed entries hold {bytes} bytes; a boundary appends at most {} MiB",
            MAX_DRAFT_BYTES >> 20
        ));
    }
    let mut appended = Vec::with_capacity(drafts.len());
    for draft in drafts {
        let entry = apply_one(store, draft)?;
        appended.push(entry);
    }
    Ok(appended)
}

fn apply_one(store: &mut SessionStore, draft: &Value) -> Result<Value, String> {
    let text = |key: &str| draft[key].as_str();
    let custom_type = || -> Result<&str, String> {
        let custom_type = text("customType").ok_or("customType must be a string")?;
        if custom_type == VIRTUAL_STATE_ENTRY || custom_type.starts_with(OWNED_TYPE_PREFIX) {
            return Err(format!(
                "\"{custom_type}\" entries are the host's record; an extension cannot propose them"
            ));
        }
        Ok(custom_type)
    };
    let optional = |key: &str| Some(draft[key].clone()).filter(|v| !v.is_null());
    let appended = match draft["type"].as_str() {
        Some("custom") => store.append_custom_entry(custom_type()?, optional("data")),
        Some("custom_message") => {
            let content = &draft["content"];
            if !content.is_string() && !content.is_array() {
                return Err("custom_message content must be a string or an array".into());
            }
            store.append_custom_message_entry(
                custom_type()?,
                content.clone(),
                draft["display"] == json!(true),
                optional("details"),
            )
        }
        Some("context_edit") => {
            let target = text("targetId").ok_or("context_edit targetId must be a string")?;
            store.append_context_edit(target, &draft["replacement"])
        }
        Some("compaction") => {
            let summary = text("summary").ok_or("compaction summary must be a string")?;
            let first_kept = match &draft["firstKeptEntryId"] {
                Value::Null => None,
                Value::String(id) if store.get_entry(id).is_some() => Some(id.as_str()),
                Value::String(id) => return Err(format!("Entry {id} not found")),
                _ => return Err("compaction firstKeptEntryId must be a string or null".into()),
            };
            let messages: Vec<Value> = store
                .build_session_projection()
                .into_iter()
                .flat_map(|(_, m)| m)
                .collect();
            let tokens_before = messages
                .iter()
                .map(super::compaction::estimate_tokens)
                .sum();
            store.append_draft_compaction(
                summary,
                first_kept,
                tokens_before,
                optional("details"),
                optional("usage"),
            )
        }
        Some(other) => {
            return Err(format!(
                "entries of type \"{other}\" cannot be proposed (custom, custom_message, context_edit, compaction)"
            ));
        }
        None => return Err("each entry needs a type".into()),
    };
    appended.map_err(|e| format!("{e:#}"))
}

impl Session {
    /// Dispatches a boundary (`base` is the event without the proposal fields) and commits
    /// what the handlers propose. Returns whether they asked for one more request and the
    /// context allows one.
    pub(super) async fn boundary(&mut self, boundary: Boundary, base: Value) -> bool {
        let name = boundary.event_name();
        let ctx = self.ctx();
        let mut entries = json!([]);
        let mut proceed = false;
        let mut valid = true;
        let mut context = {
            let state = self.shared.state.lock().unwrap();
            preview(&state, boundary, &entries).unwrap_or(Value::Null)
        };
        for i in 0..self.extensions.len() {
            if !self.subscribed(i, name) || self.extensions[i].is_lent() {
                continue;
            }
            let mut event = base.clone();
            event["entries"] = entries.clone();
            event["continue"] = json!(proceed);
            event["context"] = context.clone();
            let extension_name = self.extensions[i].name.clone();
            let dispatched = match self.extensions[i]
                .dispatch_event(name, &event, &ctx, true)
                .await
            {
                Ok(d) => d,
                Err(e) => {
                    self.error(&extension_name, name, &e);
                    continue;
                }
            };
            let updated = dispatched.event.unwrap_or(event);
            if updated["entries"].is_array() {
                entries = updated["entries"].clone();
            }
            if let Some(c) = updated["continue"].as_bool() {
                proceed = c;
            }
            // The guest rebuilt the preview after each handler and reported what did not
            // apply; the next extension gets one the host built.
            let state = self.shared.state.lock().unwrap();
            match preview(&state, boundary, &entries) {
                Ok(rebuilt) => {
                    context = rebuilt;
                    valid = true;
                }
                Err(e) => {
                    drop(state);
                    if updated["valid"] != json!(false) {
                        self.error(
                            &extension_name,
                            name,
                            format!("Invalid boundary entries: {e}"),
                        );
                    }
                    valid = false;
                }
            }
        }
        self.flush_bus().await;
        if !valid {
            return false;
        }
        self.commit(&entries);
        if proceed {
            let can_continue = {
                let state = self.shared.state.lock().unwrap();
                context_of(&state, &state.store, boundary)["canContinue"] == json!(true)
            };
            if !can_continue {
                self.error(
                    "<boundary>",
                    name,
                    format!("{name} requested continuation without runnable model context"),
                );
                return false;
            }
        }
        proceed
    }

    /// Appends checked drafts to the session; the agent's context is rebuilt from it.
    fn commit(&mut self, drafts: &Value) {
        if drafts.as_array().is_none_or(Vec::is_empty) {
            return;
        }
        let appended = {
            let mut state = self.shared.state.lock().unwrap();
            let appended = apply(&mut state.store, drafts);
            if appended.is_ok() {
                state.agent.messages = state.store.build_session_context().messages;
            }
            appended
        };
        match appended {
            Ok(entries) => {
                for entry in entries {
                    self.shared.emit(SessionEvent::EntryAppended { entry });
                }
            }
            // Checked on a copy first, so only a failing write lands here.
            Err(e) => self.error("<boundary>", "session", e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store() -> SessionStore {
        let mut store = SessionStore::in_memory("/p");
        store
            .append_message(json!({ "role": "user", "content": "hi", "timestamp": 1 }))
            .unwrap();
        store
    }

    fn refusal(drafts: Value) -> String {
        let mut store = store();
        let before = store.get_entries().len();
        let err = apply(&mut store, &drafts).unwrap_err();
        // A refused draft stops the batch where it is; the caller checks on a copy first.
        assert!(store.get_entries().len() < before + drafts.as_array().map_or(1, Vec::len));
        err
    }

    #[test]
    fn proposals_are_checked_before_anything_is_appended() {
        assert_eq!(refusal(json!({})), "entries must be an array");
        assert_eq!(
            refusal(json!([{ "type": "message", "message": {} }])),
            "entries of type \"message\" cannot be proposed (custom, custom_message, context_edit, compaction)"
        );
        // The host's own records cannot be forged through a proposal.
        for reserved in [VIRTUAL_STATE_ENTRY, "pichamber.ui.card"] {
            let err = refusal(json!([{ "type": "custom", "customType": reserved }]));
            assert!(err.contains("host's record"), "{err}");
        }
        assert_eq!(
            refusal(json!([{ "type": "custom_message", "customType": "x", "content": 1 }])),
            "custom_message content must be a string or an array"
        );
        let many = Value::Array(vec![
            json!({ "type": "custom", "customType": "x" });
            MAX_DRAFTS + 1
        ]);
        assert!(refusal(many).contains("at most 64"));
        let big =
            json!([{ "type": "custom", "customType": "x", "data": "y".repeat(MAX_DRAFT_BYTES) }]);
        assert!(refusal(big).contains("at most 1 MiB"));
    }

    #[test]
    fn a_compaction_without_a_kept_entry_keeps_nothing_before_it() {
        let mut store = store();
        let appended = apply(
            &mut store,
            &json!([{ "type": "compaction", "summary": "all of it", "firstKeptEntryId": null }]),
        )
        .unwrap();
        assert_eq!(appended[0]["firstKeptEntryId"], appended[0]["id"]);
        assert_eq!(appended[0]["fromHook"], json!(true));
        let messages = store.build_session_context().messages;
        assert_eq!(messages.len(), 1);
        assert_eq!(messages[0]["role"], "compactionSummary");
        assert_eq!(messages[0]["summary"], "all of it");
    }
}
