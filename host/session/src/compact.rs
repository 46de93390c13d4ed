//! The session's side of compaction (pi's AgentSession.compact and _checkCompaction): the
//! `session_before_compact` hook (cancel, or a summary of the extension's own), the summary
//! from the model otherwise, the compaction entry, the rebuilt context, `session_compact`, and
//! the automatic check after each agent run. The algorithm itself is in `compaction`.

use serde_json::{Value, json};

use super::compaction::{self, AutoCompactionReason};
use super::events::SessionEvent;
use super::models::RouteReason;
use super::{PiVersion, Session};

const CANCELLED: &str = "Compaction cancelled";

impl Session {
    /// Compacts the current branch; returns pi's compaction result
    /// (`{summary, firstKeptEntryId, tokensBefore, details}`).
    pub async fn compact(
        &mut self,
        custom_instructions: Option<&str>,
        reason: &str,
    ) -> Result<Value, String> {
        self.shared.emit(SessionEvent::Agent(
            json!({ "type": "compaction_start", "reason": reason }),
        ));
        self.shared.state.lock().unwrap().agent.compacting = true;
        // A fresh abort for this operation (pi makes a new controller for each compaction).
        self.shared.abort.send_replace(false);
        let mut from_extension = false;
        let outcome = self
            .compact_inner(custom_instructions, &mut from_extension)
            .await;
        self.shared.state.lock().unwrap().agent.compacting = false;
        let end = match &outcome {
            Ok(result) => json!({
                "type": "compaction_end", "reason": reason, "result": result,
                "aborted": false, "willRetry": false,
            }),
            Err(message) => {
                let aborted = message == CANCELLED;
                let mut end = json!({
                    "type": "compaction_end", "reason": reason, "aborted": aborted, "willRetry": false,
                });
                if !aborted {
                    end["errorMessage"] = json!(format!("Compaction failed: {message}"));
                }
                end
            }
        };
        let failed = (outcome.is_err()).then(|| {
            json!({
                "type": "session_compact_failed", "reason": reason,
                "errorMessage": end.get("errorMessage"), "aborted": end["aborted"],
                "willRetry": false, "fromExtension": from_extension,
            })
        });
        self.shared.emit(SessionEvent::Agent(end));
        // pi 1.6.0 tells extensions when a compaction failed or was cancelled.
        if let Some(mut event) = failed
            && self.shared.pi == PiVersion::V1_6
            && self.has_handlers("session_compact_failed")
        {
            if event["errorMessage"].is_null() {
                event.as_object_mut().unwrap().remove("errorMessage");
            }
            let _ = self.emit("session_compact_failed", event).await;
        }
        outcome
    }

    /// `ctx.compact`: a manual compaction whose outcome goes to the callbacks `reply_to`
    /// names (extension index, callback id), if any.
    pub(super) async fn compact_for(
        &mut self,
        instructions: Option<&str>,
        reply_to: Option<(usize, u64)>,
    ) {
        let outcome = self.compact(instructions, "manual").await;
        match reply_to {
            Some((index, callback)) => self.report_compaction(index, callback, outcome).await,
            // Without callbacks the failure is not the extension's to hear, as in pi; clients
            // saw it in compaction_end.
            None => {
                if let Err(e) = outcome {
                    tracing::debug!("ctx.compact without onError failed: {e}");
                }
            }
        }
    }

    /// Hands a compaction's outcome to the `onComplete` / `onError` callbacks the extension
    /// passed to `ctx.compact` (the prelude keeps them under `callback`).
    pub(super) async fn report_compaction(
        &mut self,
        index: usize,
        callback: u64,
        outcome: Result<Value, String>,
    ) {
        let ctx = self.ctx();
        let Some(extension) = self.extensions.get_mut(index) else {
            return;
        };
        let name = extension.name.clone();
        if let Err(e) = extension.compaction_outcome(callback, outcome, &ctx).await {
            self.error(&name, "compact", e);
        }
        self.flush_bus().await;
    }

    /// The compaction itself; `from_extension` says whether a `session_before_compact`
    /// handler supplied it (what a failure is reported with).
    async fn compact_inner(
        &mut self,
        custom_instructions: Option<&str>,
        from_extension: &mut bool,
    ) -> Result<Value, String> {
        if self.model.is_none() {
            return Err(super::agent_loop::NO_MODEL.to_owned());
        }
        let (branch, preparation) = {
            let state = self.shared.state.lock().unwrap();
            let branch: Vec<Value> = state.store.get_branch(None).into_iter().cloned().collect();
            let preparation = compaction::prepare_manual(&branch, &self.settings.compaction)
                .map_err(|e| e.to_string())?;
            (branch, preparation)
        };
        let mut result: Option<Value> = None;
        if self.has_handlers("session_before_compact") {
            let answer = self
                .emit(
                    "session_before_compact",
                    json!({
                        "type": "session_before_compact", "preparation": preparation.to_json(),
                        "branchEntries": branch, "customInstructions": custom_instructions,
                    }),
                )
                .await
                .unwrap_or(Value::Null);
            if answer["cancel"] == json!(true) {
                return Err(CANCELLED.into());
            }
            if answer["compaction"].is_object() {
                result = Some(answer["compaction"].clone());
                *from_extension = true;
            }
        }
        let result = match result {
            Some(r) => r,
            None => {
                // A virtual model routes the summary request as one outside the agent loop.
                let context = self.shared.state.lock().unwrap().agent.messages.clone();
                let routed = self.route(RouteReason::Direct, &context).await?;
                compaction::summarize_with_thinking(
                    &routed.model,
                    &preparation,
                    custom_instructions,
                    &routed.thinking_level,
                    self.shared.abort.subscribe(),
                )
                .await
                .map_err(|e| e.to_string())?
                .to_json()
            }
        };
        let summary = result["summary"].as_str().unwrap_or_default().to_owned();
        let first_kept = result["firstKeptEntryId"]
            .as_str()
            .unwrap_or(&preparation.first_kept_entry_id)
            .to_owned();
        let tokens_before = result["tokensBefore"]
            .as_u64()
            .unwrap_or(preparation.tokens_before);
        let details = Some(result["details"].clone()).filter(|d| !d.is_null());
        let entry = {
            let mut state = self.shared.state.lock().unwrap();
            let entry = state
                .store
                .append_compaction(
                    &summary,
                    &first_kept,
                    tokens_before,
                    details.clone(),
                    Some(*from_extension),
                )
                .map_err(|e| format!("{e:#}"))?;
            state.agent.messages = state.store.build_session_context().messages;
            entry
        };
        self.shared.emit(SessionEvent::Entry {
            entry: entry.clone(),
        });
        let _ = self
            .emit(
                "session_compact",
                json!({ "type": "session_compact", "compactionEntry": entry, "fromExtension": *from_extension }),
            )
            .await;
        let mut out = json!({
            "summary": summary, "firstKeptEntryId": first_kept, "tokensBefore": tokens_before,
        });
        if let Some(details) = details {
            out["details"] = details;
        }
        Ok(out)
    }

    /// After an agent run: compact when the context passed the threshold, or when the model
    /// refused it as too large (pi then retries the turn; pichamber reports the error and
    /// leaves the retry to the user).
    pub(super) async fn check_auto_compaction(&mut self) {
        if !self.shared.state.lock().unwrap().agent.auto_compaction {
            return;
        }
        let reason = {
            let state = self.shared.state.lock().unwrap();
            let Some(assistant) = state
                .agent
                .messages
                .iter()
                .rev()
                .find(|m| m["role"] == "assistant")
            else {
                return;
            };
            compaction::check_auto_compaction(
                assistant,
                &state.agent.messages,
                &state.store.get_branch(None),
                state.model.as_ref(),
                &self.settings.compaction,
                false,
            )
        };
        let reason = match reason {
            Some(AutoCompactionReason::Overflow) => "overflow",
            Some(AutoCompactionReason::Threshold) => "threshold",
            None => return,
        };
        if let Err(e) = self.compact(None, reason).await {
            tracing::debug!("auto-compaction ({reason}): {e}");
        }
    }
}
