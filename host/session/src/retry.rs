//! Automatic retry of a failed model call, with pi 0.73.1's rules (agent-session.js,
//! "Auto-Retry"): when a run ends on an assistant message whose error reads as transient
//! (overloaded, rate limit, 5xx, connection trouble ...) and retry is on, clients hear
//! `auto_retry_start {attempt, maxAttempts, delayMs, errorMessage}`, the failed message
//! leaves the context (it stays in the session file), and after `baseDelayMs * 2^(attempt-1)`
//! the agent continues from the context as it is. The next successful (non-error) assistant
//! message ends the series with `auto_retry_end {success: true, attempt}`; running out of
//! attempts with `{success: false, attempt, finalError}`; `abort_retry` or `abort` during the
//! wait with `finalError: "Retry cancelled"`. These events go to clients only, not to
//! extensions, as in pi.
//!
//! This sits above the provider's own retries (the OpenAI SDK's, in `model::openai`), which
//! happen inside one model call and are not reported.

use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;
use serde_json::{Value, json};

use super::Session;
use super::compaction;
use super::events::{RUNTIME, SessionEvent};

/// pi's `retry` settings (settings.json): `enabled` (default true), `maxRetries` (3),
/// `baseDelayMs` (2000).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetrySettings {
    pub enabled: bool,
    pub max_retries: u64,
    pub base_delay_ms: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            enabled: true,
            max_retries: 3,
            base_delay_ms: 2000,
        }
    }
}

impl RetrySettings {
    /// From settings.json contents, later ones overriding earlier ones key by key (pi reads
    /// the global file, then the project's). Values of the wrong type are ignored.
    pub fn from_settings(files: &[Value]) -> Self {
        let mut out = RetrySettings::default();
        for retry in files.iter().map(|f| &f["retry"]) {
            if let Some(b) = retry["enabled"].as_bool() {
                out.enabled = b;
            }
            if let Some(n) = retry["maxRetries"].as_u64() {
                out.max_retries = n;
            }
            if let Some(n) = retry["baseDelayMs"].as_u64() {
                out.base_delay_ms = n;
            }
        }
        out
    }

    /// The wait before attempt `attempt` (1-based).
    pub fn delay_ms(&self, attempt: u64) -> u64 {
        let factor = 1u64.checked_shl(attempt.saturating_sub(1) as u32);
        factor
            .and_then(|f| self.base_delay_ms.checked_mul(f))
            .unwrap_or(u64::MAX)
    }
}

/// The error texts pi retries (its `_isRetryableError` pattern).
static RETRYABLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)overloaded|provider.?returned.?error|rate.?limit|too many requests|429|500|502|503|504|service.?unavailable|server.?error|internal.?error|network.?error|connection.?error|connection.?refused|connection.?lost|websocket.?closed|websocket.?error|other side closed|fetch failed|upstream.?connect|reset before headers|socket hang up|ended without|http2 request did not get a response|timed? out|timeout|terminated|retry delay",
    )
    .expect("retryable pattern")
});

/// Whether an assistant message failed in a way worth retrying: an error with a message
/// that reads as transient, and not a context overflow (compaction handles those).
pub fn is_retryable(message: &Value, context_window: u64) -> bool {
    if message["stopReason"] != "error" {
        return false;
    }
    let Some(error) = message["errorMessage"].as_str().filter(|e| !e.is_empty()) else {
        return false;
    };
    !compaction::is_context_overflow(message, context_window) && RETRYABLE.is_match(error)
}

impl Session {
    /// After a run's agent_end: retries when its last assistant message failed transiently
    /// (see the module docs). Returns true when the agent should continue now.
    /// Whether [`Session::retry_after`] will retry this run (pi 1.6.0 tells clients so on
    /// `agent_end`): not aborted, retries on and left, and a retryable error last.
    pub(super) fn will_retry(&self, new_messages: &[Value]) -> bool {
        let Some(last) = new_messages.iter().rev().find(|m| m["role"] == "assistant") else {
            return false;
        };
        let state = self.shared.state.lock().unwrap();
        let window = state
            .model
            .as_ref()
            .and_then(|m| m["contextWindow"].as_u64())
            .unwrap_or(0);
        !*self.shared.abort.borrow()
            && state.agent.retry.enabled
            && state.agent.retry_attempt < state.agent.retry.max_retries
            && is_retryable(last, window)
    }

    pub(super) async fn retry_after(&mut self, new_messages: &[Value]) -> bool {
        let Some(last) = new_messages.iter().rev().find(|m| m["role"] == "assistant") else {
            return false;
        };
        let (settings, attempt) = {
            let mut state = self.shared.state.lock().unwrap();
            let window = state
                .model
                .as_ref()
                .and_then(|m| m["contextWindow"].as_u64())
                .unwrap_or(0);
            if !is_retryable(last, window) || !state.agent.retry.enabled {
                return false;
            }
            state.agent.retry_attempt += 1;
            (state.agent.retry, state.agent.retry_attempt)
        };
        let error = last["errorMessage"].as_str().unwrap_or("Unknown error");
        if attempt > settings.max_retries {
            self.shared.state.lock().unwrap().agent.retry_attempt = 0;
            self.client_event(json!({
                "type": "auto_retry_end", "success": false, "attempt": attempt - 1,
                "finalError": error,
            }));
            return false;
        }
        let delay_ms = settings.delay_ms(attempt);
        // Waiting counts as retrying from here on, so an abort right after the start event
        // is heard.
        {
            let mut state = self.shared.state.lock().unwrap();
            state.agent.retrying = true;
            self.shared.retry_abort.send_replace(false);
        }
        self.client_event(json!({
            "type": "auto_retry_start", "attempt": attempt, "maxAttempts": settings.max_retries,
            "delayMs": delay_ms, "errorMessage": error,
        }));
        let omitted = {
            let mut state = self.shared.state.lock().unwrap();
            if state
                .agent
                .messages
                .last()
                .is_some_and(|m| m["role"] == "assistant")
            {
                // A virtual model's router is told which request failed.
                self.failed_request = state.agent.messages.pop();
            }
            // pi 1.6.0 keeps the failed attempt in the session but leaves it out of the
            // model's context for good (a context edit), so a resumed session does not send
            // it again.
            match &self.failed_request {
                Some(failed) if self.shared.pi.is_1_6() => omit_from_context(&mut state, failed),
                _ => None,
            }
        };
        match omitted {
            Some(Ok(entry)) => self.shared.emit(SessionEvent::EntryAppended { entry }),
            Some(Err(e)) => self.error(RUNTIME, "session", format!("{e:#}")),
            None => {}
        }
        let mut abort = self.shared.retry_abort.subscribe();
        let cancelled = tokio::select! {
            _ = abort.wait_for(|a| *a) => true,
            _ = tokio::time::sleep(Duration::from_millis(delay_ms)) => false,
        };
        {
            let mut state = self.shared.state.lock().unwrap();
            state.agent.retrying = false;
            if cancelled {
                state.agent.retry_attempt = 0;
            }
        }
        if cancelled {
            self.client_event(json!({
                "type": "auto_retry_end", "success": false, "attempt": attempt,
                "finalError": "Retry cancelled",
            }));
            return false;
        }
        true
    }

    /// A successful assistant message ends a series of retries.
    pub(super) fn retry_succeeded(&self, message: &Value) {
        if message["role"] != "assistant" || message["stopReason"] == "error" {
            return;
        }
        let attempt = std::mem::take(&mut self.shared.state.lock().unwrap().agent.retry_attempt);
        if attempt > 0 {
            self.client_event(json!({
                "type": "auto_retry_end", "success": true, "attempt": attempt,
            }));
        }
    }

    /// An event for clients only (pi's `_emit`, which extensions do not see).
    fn client_event(&self, event: Value) {
        self.shared.emit(SessionEvent::Agent(event));
    }
}

/// A context edit that leaves `message`'s entry on the branch out of the model's context.
fn omit_from_context(
    state: &mut super::SessionState,
    message: &Value,
) -> Option<anyhow::Result<Value>> {
    let id = state
        .store
        .get_branch(None)
        .iter()
        .rev()
        .find(|e| e["type"] == "message" && e["message"] == *message)
        .and_then(|e| e["id"].as_str().map(str::to_owned))?;
    Some(state.store.append_context_edit(&id, &Value::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_merge_and_delays_double() {
        let s = RetrySettings::from_settings(&[
            json!({"retry": {"maxRetries": 5, "baseDelayMs": 10}}),
            json!({"retry": {"enabled": false, "baseDelayMs": "x"}}),
            json!(null),
        ]);
        assert_eq!(
            s,
            RetrySettings {
                enabled: false,
                max_retries: 5,
                base_delay_ms: 10
            }
        );
        assert_eq!((s.delay_ms(1), s.delay_ms(2), s.delay_ms(4)), (10, 20, 80));
        assert_eq!(s.delay_ms(200), u64::MAX);
        assert_eq!(RetrySettings::from_settings(&[]), RetrySettings::default());
    }

    #[test]
    fn which_errors_are_retried() {
        let failed =
            |e: &str| json!({"role": "assistant", "stopReason": "error", "errorMessage": e});
        for e in [
            "500 boom",
            "429 Too Many Requests",
            "Connection error.",
            "Request timed out.",
            "overloaded_error",
            "503 Service Unavailable",
        ] {
            assert!(is_retryable(&failed(e), 0), "{e}");
        }
        for e in ["400 bad request", "401 Incorrect API key provided.", ""] {
            assert!(!is_retryable(&failed(e), 0), "{e}");
        }
        // A context overflow is compaction's, even with a 5xx-looking text.
        assert!(!is_retryable(
            &failed("400 This model's maximum context length is 128000 tokens"),
            0
        ));
        let stopped = json!({"role": "assistant", "stopReason": "stop", "errorMessage": "500"});
        assert!(!is_retryable(&stopped, 0));
    }
}
