//! Context compaction as pi 0.73.1 does it (pi-coding-agent core/compaction/compaction.js and
//! utils.js): choose where to cut a branch so that roughly `keepRecentTokens` of recent
//! conversation stays verbatim, summarise what comes before the cut with the session's model,
//! and decide when compaction is due (the threshold and context-overflow checks of
//! agent-session.js `_checkCompaction`).
//!
//! Entries and messages stay JSON in pi's shapes: extensions receive the preparation in
//! `session_before_compact`, and the session file stores the result verbatim. Token estimates
//! count string lengths in UTF-16 code units, as JavaScript's `length` does, so cut points
//! land where pi's do.

use std::borrow::Borrow;
use std::sync::LazyLock;

use anyhow::anyhow;
use regex::Regex;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::messages::{content_text, convert_to_llm, now_ms};
use pichamber_model::openai::js_stringify;
use pichamber_model::{LlmContext, ModelClient, StreamOptions};
use pichamber_pi::PiVersion;

/// pi's error when the branch already ends in a compaction.
pub const ALREADY_COMPACTED: &str = "Already compacted";
/// pi's error when there is no preparation for any other reason.
pub const NOTHING_TO_COMPACT: &str = "Nothing to compact (session too small)";
/// The error pi's callers raise when a compaction's signal was aborted.
pub const COMPACTION_CANCELLED: &str = "Compaction cancelled";

/// Tool results longer than this (UTF-16 units) are cut when serialised for a summary.
const TOOL_RESULT_MAX_CHARS: usize = 2000;

/// pi's `compaction` settings (settings.json), with pi's defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionSettings {
    /// Auto-compaction on; `/compact` works either way.
    pub enabled: bool,
    /// Room left for the model's answer: compaction is due when the context exceeds the
    /// window minus this.
    pub reserve_tokens: u64,
    /// About how many tokens of recent conversation survive a compaction verbatim.
    pub keep_recent_tokens: u64,
    /// Whose rules estimate the context (the session's pi version; not a setting of pi's).
    pub pi: PiVersion,
}

impl Default for CompactionSettings {
    fn default() -> Self {
        CompactionSettings {
            enabled: true,
            reserve_tokens: 16384,
            keep_recent_tokens: 20000,
            pi: PiVersion::default(),
        }
    }
}

impl CompactionSettings {
    /// From settings.json's `compaction` object; what is missing takes pi's default.
    pub fn from_json(value: &Value) -> Self {
        let d = CompactionSettings::default();
        CompactionSettings {
            enabled: value["enabled"].as_bool().unwrap_or(d.enabled),
            reserve_tokens: value["reserveTokens"].as_u64().unwrap_or(d.reserve_tokens),
            keep_recent_tokens: value["keepRecentTokens"]
                .as_u64()
                .unwrap_or(d.keep_recent_tokens),
            pi: d.pi,
        }
    }

    pub fn to_json(self) -> Value {
        json!({
            "enabled": self.enabled,
            "reserveTokens": self.reserve_tokens,
            "keepRecentTokens": self.keep_recent_tokens,
        })
    }
}

/// Files the summarised conversation touched, as insertion-ordered sets (pi's `FileOperations`,
/// whose members are `Set`s).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileOps {
    pub read: Vec<String>,
    pub written: Vec<String>,
    pub edited: Vec<String>,
}

pub(crate) fn set_add(set: &mut Vec<String>, item: &str) {
    if !set.iter().any(|s| s == item) {
        set.push(item.to_owned());
    }
}

impl FileOps {
    /// The files read by `read`, written by `write` and edited by `edit` tool calls of an
    /// assistant message.
    pub fn add_from_message(&mut self, message: &Value) {
        if message["role"] != "assistant" {
            return;
        }
        let Some(blocks) = message["content"].as_array() else {
            return;
        };
        for block in blocks {
            if block["type"] != "toolCall" || block.get("name").is_none() {
                continue;
            }
            let Some(path) = block
                .get("arguments")
                .and_then(|a| a["path"].as_str())
                .filter(|p| !p.is_empty())
            else {
                continue;
            };
            match block["name"].as_str() {
                Some("read") => set_add(&mut self.read, path),
                Some("write") => set_add(&mut self.written, path),
                Some("edit") => set_add(&mut self.edited, path),
                _ => {}
            }
        }
    }

    /// (files only read, files modified), each sorted: what a summary lists and what
    /// `details` records.
    pub fn file_lists(&self) -> (Vec<String>, Vec<String>) {
        let mut modified: Vec<String> = Vec::new();
        for f in self.edited.iter().chain(&self.written) {
            set_add(&mut modified, f);
        }
        let mut read: Vec<String> = self
            .read
            .iter()
            .filter(|f| !modified.contains(f))
            .cloned()
            .collect();
        read.sort_by(|a, b| js_cmp(a, b));
        modified.sort_by(|a, b| js_cmp(a, b));
        (read, modified)
    }

    /// Sets become arrays in JSON (`JSON.stringify` would drop a `Set`'s members).
    pub fn to_json(&self) -> Value {
        json!({ "read": self.read, "written": self.written, "edited": self.edited })
    }
}

/// JavaScript's default sort order: by UTF-16 code units.
fn js_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// Everything a compaction needs, worked out from the branch before any model call (pi's
/// `CompactionPreparation`).
#[derive(Debug, Clone, PartialEq)]
pub struct Preparation {
    /// The entry the kept part of the context starts from.
    pub first_kept_entry_id: String,
    /// Whole turns before the cut, to be summarised and dropped from the context.
    pub messages_to_summarize: Vec<Value>,
    /// The early part of a turn the cut goes through (only for a split turn).
    pub turn_prefix_messages: Vec<Value>,
    pub is_split_turn: bool,
    /// The context's size before compaction (last usage plus estimates after it).
    pub tokens_before: u64,
    /// The summary of the compaction before this one, to be updated rather than restarted.
    pub previous_summary: Option<String>,
    pub file_ops: FileOps,
    pub settings: CompactionSettings,
}

impl Preparation {
    /// The `preparation` of pi's `session_before_compact` event.
    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "firstKeptEntryId": self.first_kept_entry_id,
            "messagesToSummarize": self.messages_to_summarize,
            "turnPrefixMessages": self.turn_prefix_messages,
            "isSplitTurn": self.is_split_turn,
            "tokensBefore": self.tokens_before,
        });
        if let Some(summary) = &self.previous_summary {
            out["previousSummary"] = summary.as_str().into();
        }
        out["fileOps"] = self.file_ops.to_json();
        out["settings"] = self.settings.to_json();
        out
    }
}

/// What a compaction appends (pi's `CompactionResult`, the fields of a compaction entry).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionResult {
    pub summary: String,
    pub first_kept_entry_id: String,
    pub tokens_before: u64,
    pub details: Option<Value>,
}

impl CompactionResult {
    pub fn to_json(&self) -> Value {
        let mut out = json!({
            "summary": self.summary,
            "firstKeptEntryId": self.first_kept_entry_id,
            "tokensBefore": self.tokens_before,
        });
        if let Some(details) = &self.details {
            out["details"] = details.clone();
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Token estimates

fn js_len(s: &str) -> usize {
    s.encode_utf16().count()
}

fn str_len(v: &Value) -> usize {
    v.as_str().map_or(0, js_len)
}

/// A JSON number as a token count (pi's usage fields are plain numbers).
fn count(v: &Value) -> u64 {
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f > 0.0).map(|f| f as u64))
        .unwrap_or(0)
}

/// pi's `estimateTokens`: a message's characters divided by four, rounded up (images count
/// as 4800 characters in tool results and custom messages; user images are not counted).
pub fn estimate_tokens(message: &Value) -> u64 {
    let text_blocks = |content: &Value, images: bool| -> usize {
        match content {
            Value::String(s) => js_len(s),
            Value::Array(blocks) => blocks
                .iter()
                .map(|b| match b["type"].as_str() {
                    Some("text") => str_len(&b["text"]),
                    Some("image") if images => 4800,
                    _ => 0,
                })
                .sum(),
            _ => 0,
        }
    };
    let chars = match message["role"].as_str() {
        // pi 1.6.0's system messages: their text, sections and tool declarations.
        Some("system") => {
            let sections: usize = message["sections"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(_, text)| str_len(text))
                .sum();
            let tools = match message.get("toolsAdded") {
                Some(tools) if !tools.is_null() => js_len(&js_stringify(tools)),
                _ => 0,
            };
            text_blocks(&message["content"], true) + sections + tools
        }
        Some("user") => text_blocks(&message["content"], false),
        Some("assistant") => message["content"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|b| match b["type"].as_str() {
                Some("text") => str_len(&b["text"]),
                Some("thinking") => str_len(&b["thinking"]),
                Some("toolCall") => {
                    let args = b.get("arguments").unwrap_or(&Value::Null);
                    str_len(&b["name"]) + js_len(&js_stringify(args))
                }
                _ => 0,
            })
            .sum(),
        Some("custom") | Some("toolResult") => text_blocks(&message["content"], true),
        Some("bashExecution") => str_len(&message["command"]) + str_len(&message["output"]),
        Some("branchSummary") | Some("compactionSummary") => str_len(&message["summary"]),
        _ => 0,
    };
    chars.div_ceil(4) as u64
}

/// pi's `calculateContextTokens`: `totalTokens`, or the sum of the parts when it is 0.
pub fn calculate_context_tokens(usage: &Value) -> u64 {
    match count(&usage["totalTokens"]) {
        0 => ["input", "output", "cacheRead", "cacheWrite"]
            .iter()
            .map(|k| count(&usage[*k]))
            .sum(),
        total => total,
    }
}

/// The usage of an assistant message that completed (aborted and failed calls report none
/// worth trusting).
/// An assistant message's usage, when it can be trusted: not aborted or failed, and (pi
/// 1.6.0) not all zero, as a provider that reports no usage leaves it.
fn assistant_usage(message: &Value, pi: PiVersion) -> Option<&Value> {
    let usage = message.get("usage")?;
    (message["role"] == "assistant"
        && message["stopReason"] != "aborted"
        && message["stopReason"] != "error"
        && js_truthy(usage)
        && (!pi.is_1_6() || calculate_context_tokens(usage) > 0))
        .then_some(usage)
}

/// pi's `estimateContextTokens` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextEstimate {
    pub tokens: u64,
    pub usage_tokens: u64,
    pub trailing_tokens: u64,
    /// Where the usage came from; `None` when no message reported one.
    pub last_usage_index: Option<usize>,
}

/// The context's size: the last reported usage plus estimates of the messages after it, or
/// an estimate of everything when no usage is known.
pub fn estimate_context_tokens(messages: &[Value], pi: PiVersion) -> ContextEstimate {
    let last = messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| assistant_usage(m, pi).map(|u| (i, u)));
    match last {
        None => {
            let estimated = messages.iter().map(estimate_tokens).sum();
            ContextEstimate {
                tokens: estimated,
                usage_tokens: 0,
                trailing_tokens: estimated,
                last_usage_index: None,
            }
        }
        Some((i, usage)) => {
            let usage_tokens = calculate_context_tokens(usage);
            let trailing_tokens = messages[i + 1..].iter().map(estimate_tokens).sum();
            ContextEstimate {
                tokens: usage_tokens + trailing_tokens,
                usage_tokens,
                trailing_tokens,
                last_usage_index: Some(i),
            }
        }
    }
}

/// pi's threshold: compaction is due once the context leaves less than `reserve_tokens` of
/// the window (always, for a window smaller than the reserve).
pub fn should_compact(
    context_tokens: u64,
    context_window: u64,
    settings: &CompactionSettings,
) -> bool {
    settings.enabled
        && i128::from(context_tokens)
            > i128::from(context_window) - i128::from(settings.reserve_tokens)
}

// ---------------------------------------------------------------------------------------------
// Entries as context messages

pub(crate) fn js_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

/// `new Date(timestamp).getTime()`; `None` where JavaScript gets NaN.
fn js_time_ms(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64().filter(|f| f.is_finite()).map(f64::trunc),
        Value::String(s) => {
            let t = humantime::parse_rfc3339_weak(s).ok()?;
            let d = t.duration_since(std::time::UNIX_EPOCH).ok()?;
            Some(d.as_millis() as f64)
        }
        _ => None,
    }
}

fn js_time(v: &Value) -> Value {
    js_time_ms(v).map_or(Value::Null, |ms| json!(ms as i64))
}

/// A message built from entry fields; fields the entry lacks stay absent, as `undefined`
/// does in JSON.
pub(crate) fn message_from(role: &str, entry: &Value, keys: &[&str]) -> Value {
    let mut message = serde_json::Map::new();
    message.insert("role".into(), role.into());
    for &key in keys {
        if let Some(v) = entry.get(key) {
            message.insert(key.into(), v.clone());
        }
    }
    message.insert("timestamp".into(), js_time(&entry["timestamp"]));
    Value::Object(message)
}

pub(crate) fn custom_message(entry: &Value) -> Value {
    message_from(
        "custom",
        entry,
        &["customType", "content", "display", "details"],
    )
}

pub(crate) fn branch_summary_message(entry: &Value) -> Value {
    message_from("branchSummary", entry, &["summary", "fromId"])
}

/// The message an entry puts into the material to summarise (pi's
/// `getMessageFromEntryForCompaction`): compactions are carried as the previous summary
/// instead.
fn message_for_summary(entry: &Value) -> Option<Value> {
    match entry["type"].as_str()? {
        // A system message (pi 1.6.0) is prompt state, not conversation: nothing to summarise.
        "message" => entry
            .get("message")
            .filter(|m| js_truthy(m) && m["role"] != "system")
            .cloned(),
        "custom_message" => Some(custom_message(entry)),
        "branch_summary" => Some(branch_summary_message(entry)),
        _ => None,
    }
}

/// The LLM context along `path` (the messages of pi's `buildSessionContext`, with the path
/// taken as given): the latest compaction's summary, the entries it kept, then what follows.
fn context_messages<E: Borrow<Value>>(path: &[E]) -> Vec<Value> {
    let entry = |i: usize| path[i].borrow();
    let push = |out: &mut Vec<Value>, e: &Value| match e["type"].as_str() {
        Some("message") => {
            if let Some(m) = e.get("message").filter(|m| js_truthy(m)) {
                out.push(m.clone());
            }
        }
        Some("custom_message") => out.push(custom_message(e)),
        Some("branch_summary") if js_truthy(&e["summary"]) => out.push(branch_summary_message(e)),
        _ => {}
    };
    let mut out = Vec::new();
    let Some(c) = (0..path.len())
        .rev()
        .find(|&i| entry(i)["type"] == "compaction")
    else {
        path.iter().for_each(|e| push(&mut out, e.borrow()));
        return out;
    };
    let compaction = entry(c);
    out.push(message_from(
        "compactionSummary",
        compaction,
        &["summary", "tokensBefore"],
    ));
    let first_kept = &compaction["firstKeptEntryId"];
    if let Some(k) = (0..c).find(|&i| entry(i)["id"] == *first_kept) {
        (k..c).for_each(|i| push(&mut out, entry(i)));
    }
    (c + 1..path.len()).for_each(|i| push(&mut out, entry(i)));
    out
}

// ---------------------------------------------------------------------------------------------
// Cut points

/// Where a branch is cut (pi's `CutPointResult`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CutPoint {
    /// The first entry that stays in the context.
    pub first_kept_entry_index: usize,
    /// For a cut inside a turn: the entry that starts that turn.
    pub turn_start_index: Option<usize>,
    pub is_split_turn: bool,
}

/// Entries that start a turn's worth of user context: user and bash-execution messages, and
/// the user-role custom messages and branch summaries.
fn starts_turn(entry: &Value) -> bool {
    match entry["type"].as_str() {
        Some("branch_summary") | Some("custom_message") => true,
        Some("message") => matches!(
            entry["message"]["role"].as_str(),
            Some("user") | Some("bashExecution")
        ),
        _ => false,
    }
}

/// Entries the kept part may start at: every message but a tool result (a result must stay
/// with the call that asked for it), and custom messages and branch summaries.
fn is_valid_cut(entry: &Value) -> bool {
    match entry["type"].as_str() {
        Some("branch_summary") | Some("custom_message") => true,
        Some("message") => matches!(
            entry["message"]["role"].as_str(),
            Some("user")
                | Some("assistant")
                | Some("bashExecution")
                | Some("custom")
                | Some("branchSummary")
                | Some("compactionSummary")
        ),
        _ => false,
    }
}

/// The entry at or before `entry_index` (not before `start`) that starts its turn.
pub fn find_turn_start_index<E: Borrow<Value>>(
    entries: &[E],
    entry_index: usize,
    start: usize,
) -> Option<usize> {
    (start..=entry_index)
        .rev()
        .find(|&i| starts_turn(entries[i].borrow()))
}

/// pi's `findCutPoint` over `entries[start..end]`: walking back from the newest message,
/// the cut goes at the first valid cut point at or after the message where the estimated
/// tokens reach `keep_recent_tokens`, then moves back over any non-message entries (model
/// or thinking changes, labels, ...) right before it, stopping at a compaction.
pub fn find_cut_point<E: Borrow<Value>>(
    entries: &[E],
    start: usize,
    end: usize,
    keep_recent_tokens: u64,
) -> CutPoint {
    let entry = |i: usize| entries[i].borrow();
    let cut_points: Vec<usize> = (start..end).filter(|&i| is_valid_cut(entry(i))).collect();
    let Some(&first_cut) = cut_points.first() else {
        return CutPoint {
            first_kept_entry_index: start,
            turn_start_index: None,
            is_split_turn: false,
        };
    };
    let mut cut = first_cut;
    let mut accumulated = 0u64;
    for i in (start..end).rev() {
        if entry(i)["type"] != "message" {
            continue;
        }
        accumulated += estimate_tokens(&entry(i)["message"]);
        if accumulated >= keep_recent_tokens {
            // No cut point at or after it (a trailing tool result): keep everything.
            if let Some(&c) = cut_points.iter().find(|&&c| c >= i) {
                cut = c;
            }
            break;
        }
    }
    while cut > start {
        let previous = entry(cut - 1);
        if previous["type"] == "compaction" || previous["type"] == "message" {
            break;
        }
        cut -= 1;
    }
    let cut_entry = entry(cut);
    let at_user = cut_entry["type"] == "message" && cut_entry["message"]["role"] == "user";
    let turn_start = if at_user {
        None
    } else {
        find_turn_start_index(entries, cut, start)
    };
    CutPoint {
        first_kept_entry_index: cut,
        turn_start_index: turn_start,
        is_split_turn: turn_start.is_some(),
    }
}

// ---------------------------------------------------------------------------------------------
// Preparation

/// pi's `prepareCompaction` for the entries of a branch (root first). `None` when the branch
/// already ends in a compaction, or has nothing to keep an id of; the summarised span starts
/// where the previous compaction's kept part started.
pub fn prepare<E: Borrow<Value>>(
    branch: &[E],
    settings: &CompactionSettings,
) -> Option<Preparation> {
    let entry = |i: usize| branch[i].borrow();
    if branch
        .last()
        .is_some_and(|e| e.borrow()["type"] == "compaction")
    {
        return None;
    }
    let previous = (0..branch.len())
        .rev()
        .find(|&i| entry(i)["type"] == "compaction");
    let mut previous_summary = None;
    let mut boundary_start = 0;
    if let Some(p) = previous {
        let compaction = entry(p);
        previous_summary = compaction["summary"].as_str().map(str::to_owned);
        let first_kept = &compaction["firstKeptEntryId"];
        boundary_start = branch
            .iter()
            .position(|e| e.borrow()["id"] == *first_kept)
            .unwrap_or(p + 1);
    }
    let tokens_before = estimate_context_tokens(&context_messages(branch), settings.pi).tokens;
    let cut = find_cut_point(
        branch,
        boundary_start,
        branch.len(),
        settings.keep_recent_tokens,
    );
    let first_kept_entry_id = branch
        .get(cut.first_kept_entry_index)?
        .borrow()
        .get("id")?
        .as_str()
        .filter(|id| !id.is_empty())?
        .to_owned();
    let history_end = match cut.turn_start_index {
        Some(t) if cut.is_split_turn => t,
        _ => cut.first_kept_entry_index,
    };
    let messages_to_summarize: Vec<Value> = (boundary_start..history_end)
        .filter_map(|i| message_for_summary(entry(i)))
        .collect();
    let turn_prefix_messages: Vec<Value> = match cut.turn_start_index {
        Some(t) if cut.is_split_turn => (t..cut.first_kept_entry_index)
            .filter_map(|i| message_for_summary(entry(i)))
            .collect(),
        _ => Vec::new(),
    };
    // pi 1.6.0 compacts nothing when nothing precedes the kept part; 0.73.1 compacted anyway.
    if settings.pi == PiVersion::V1_6
        && messages_to_summarize.is_empty()
        && turn_prefix_messages.is_empty()
    {
        return None;
    }

    let mut file_ops = FileOps::default();
    // Files the previous (pi-made) compaction recorded carry over.
    if let Some(p) = previous {
        let compaction = entry(p);
        let details = &compaction["details"];
        if !js_truthy(&compaction["fromHook"]) && js_truthy(details) {
            for f in details["readFiles"].as_array().into_iter().flatten() {
                if let Some(f) = f.as_str() {
                    set_add(&mut file_ops.read, f);
                }
            }
            for f in details["modifiedFiles"].as_array().into_iter().flatten() {
                if let Some(f) = f.as_str() {
                    set_add(&mut file_ops.edited, f);
                }
            }
        }
    }
    for m in messages_to_summarize.iter().chain(&turn_prefix_messages) {
        file_ops.add_from_message(m);
    }

    Some(Preparation {
        first_kept_entry_id,
        messages_to_summarize,
        turn_prefix_messages,
        is_split_turn: cut.is_split_turn,
        tokens_before,
        previous_summary,
        file_ops,
        settings: *settings,
    })
}

/// [`prepare`] for `/compact`: no preparation is an error worded as pi words it.
pub fn prepare_manual<E: Borrow<Value>>(
    branch: &[E],
    settings: &CompactionSettings,
) -> anyhow::Result<Preparation> {
    prepare(branch, settings).ok_or_else(|| {
        if branch
            .last()
            .is_some_and(|e| e.borrow()["type"] == "compaction")
        {
            anyhow!(ALREADY_COMPACTED)
        } else {
            anyhow!(NOTHING_TO_COMPACT)
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Serialisation and prompts

fn truncate_for_summary(text: &str, max_chars: usize) -> String {
    let units: Vec<u16> = text.encode_utf16().collect();
    if units.len() <= max_chars {
        return text.to_owned();
    }
    format!(
        "{}\n\n[... {} more characters truncated]",
        String::from_utf16_lossy(&units[..max_chars]),
        units.len() - max_chars
    )
}

/// pi's `serializeConversation`: LLM messages (after `convert_to_llm`) as labelled plain text,
/// so the summarising model reads a transcript instead of continuing a conversation. Tool
/// results are cut to 2000 characters.
pub fn serialize_conversation(messages: &[Value]) -> String {
    let mut parts = Vec::new();
    for message in messages {
        match message["role"].as_str() {
            Some("user") => {
                let text = content_text(&message["content"]);
                if !text.is_empty() {
                    parts.push(format!("[User]: {text}"));
                }
            }
            Some("assistant") => {
                let (mut texts, mut thinking, mut calls) = (Vec::new(), Vec::new(), Vec::new());
                for block in message["content"].as_array().into_iter().flatten() {
                    match block["type"].as_str() {
                        Some("text") => texts.push(block["text"].as_str().unwrap_or_default()),
                        Some("thinking") => {
                            thinking.push(block["thinking"].as_str().unwrap_or_default())
                        }
                        Some("toolCall") => {
                            let args: Vec<String> = block["arguments"]
                                .as_object()
                                .into_iter()
                                .flatten()
                                .map(|(k, v)| format!("{k}={}", js_stringify(v)))
                                .collect();
                            calls.push(format!(
                                "{}({})",
                                block["name"].as_str().unwrap_or_default(),
                                args.join(", ")
                            ));
                        }
                        _ => {}
                    }
                }
                if !thinking.is_empty() {
                    parts.push(format!("[Assistant thinking]: {}", thinking.join("\n")));
                }
                if !texts.is_empty() {
                    parts.push(format!("[Assistant]: {}", texts.join("\n")));
                }
                if !calls.is_empty() {
                    parts.push(format!("[Assistant tool calls]: {}", calls.join("; ")));
                }
            }
            Some("toolResult") => {
                let text = content_text(&message["content"]);
                if !text.is_empty() {
                    parts.push(format!(
                        "[Tool result]: {}",
                        truncate_for_summary(&text, TOOL_RESULT_MAX_CHARS)
                    ));
                }
            }
            _ => {}
        }
    }
    parts.join("\n\n")
}

/// The system prompt of every summarisation call.
pub const SUMMARIZATION_SYSTEM_PROMPT: &str = "\
You summarise conversations so that work can be handed over. You will read a conversation \
between a user and an AI coding assistant and write a structured summary in exactly the \
format you are asked for.

Do NOT carry on the conversation. Do NOT answer any question asked in it. Output ONLY the \
structured summary.";

/// Asks for a first summary of the conversation.
const SUMMARY_PROMPT: &str = "\
The conversation above is to be summarised. Write a structured checkpoint of its context; \
another LLM will read it to carry on with the work.

Follow this format EXACTLY:

## Goal
[The user's objective. List several if the session spans more than one task.]

## Constraints & Preferences
- [Requirements, limits or preferences the user stated]
- [Or \"(none)\" if there were none]

## Progress
### Done
- [x] [Finished tasks and changes]

### In Progress
- [ ] [Work under way]

### Blocked
- [Whatever stops progress, if anything]

## Key Decisions
- **[Decision]**: [Short reason]

## Next Steps
1. [What should happen next, in order]

## Critical Context
- [Data, examples or references needed to continue]
- [Or \"(none)\" if nothing applies]

Keep every section short. Keep file paths, function names and error messages word for word.";

/// Asks for the previous summary to be brought up to date with new messages.
const UPDATE_SUMMARY_PROMPT: &str = "\
The conversation above holds NEW messages. Fold them into the existing summary given in the \
<previous-summary> tags.

Revise that structured summary with what is new. RULES:
- KEEP everything the previous summary records
- ADD the progress, decisions and context the new messages bring
- UPDATE Progress: move items from \"In Progress\" to \"Done\" once they are finished
- UPDATE \"Next Steps\" to match what has been achieved
- KEEP file paths, function names and error messages word for word
- Drop something only when it no longer matters

Follow this format EXACTLY:

## Goal
[The goals so far, plus new ones if the task grew]

## Constraints & Preferences
- [Those so far, plus any found since]

## Progress
### Done
- [x] [Items done before AND items done since]

### In Progress
- [ ] [Work under way, updated]

### Blocked
- [Current blockers; remove the resolved ones]

## Key Decisions
- **[Decision]**: [Short reason] (keep the earlier ones, add new ones)

## Next Steps
1. [Revised for where things stand now]

## Critical Context
- [Keep what still matters, add what is new]

Keep every section short. Keep file paths, function names and error messages word for word.";

/// Asks for a summary of the early part of a turn the cut goes through.
const TURN_PREFIX_PROMPT: &str = "\
This is the EARLY PART of a turn too large to keep whole. Its LATER PART, the most recent \
work, is kept as it is.

Summarise this early part so that the kept later part can be understood:

## Original Request
[What the user asked for in this turn]

## Early Progress
- [The main decisions and work in this early part]

## Context for Suffix
- [What is needed to follow the kept recent work]

Be brief. Cover only what the kept later part depends on.";

pub(crate) fn summary_context(prompt: String) -> LlmContext {
    LlmContext {
        system_prompt: SUMMARIZATION_SYSTEM_PROMPT.to_owned(),
        messages: vec![json!({
            "role": "user",
            "content": [{ "type": "text", "text": prompt }],
            "timestamp": now_ms(),
        })],
        tools: Vec::new(),
    }
}

/// The request that summarises `messages` (agent messages): the serialised conversation in
/// `<conversation>` tags, the previous summary in `<previous-summary>` tags when there is
/// one (then the update prompt), and the instructions with any custom focus.
pub fn summary_request(
    messages: &[Value],
    custom_instructions: Option<&str>,
    previous_summary: Option<&str>,
) -> LlmContext {
    let previous_summary = previous_summary.filter(|s| !s.is_empty());
    let mut instructions = if previous_summary.is_some() {
        UPDATE_SUMMARY_PROMPT
    } else {
        SUMMARY_PROMPT
    }
    .to_owned();
    if let Some(focus) = custom_instructions.filter(|s| !s.is_empty()) {
        instructions.push_str(&format!("\n\nAdditional focus: {focus}"));
    }
    let conversation = serialize_conversation(&convert_to_llm(messages));
    let mut prompt = format!("<conversation>\n{conversation}\n</conversation>\n\n");
    if let Some(previous) = previous_summary {
        prompt.push_str(&format!(
            "<previous-summary>\n{previous}\n</previous-summary>\n\n"
        ));
    }
    prompt.push_str(&instructions);
    summary_context(prompt)
}

/// The request that summarises the early part of a split turn.
pub fn turn_prefix_request(messages: &[Value]) -> LlmContext {
    let conversation = serialize_conversation(&convert_to_llm(messages));
    summary_context(format!(
        "<conversation>\n{conversation}\n</conversation>\n\n{TURN_PREFIX_PROMPT}"
    ))
}

/// pi's file lists appended to a summary, as XML-like tags.
pub(crate) fn format_file_operations(read: &[String], modified: &[String]) -> String {
    let mut sections = Vec::new();
    if !read.is_empty() {
        sections.push(format!("<read-files>\n{}\n</read-files>", read.join("\n")));
    }
    if !modified.is_empty() {
        sections.push(format!(
            "<modified-files>\n{}\n</modified-files>",
            modified.join("\n")
        ));
    }
    if sections.is_empty() {
        String::new()
    } else {
        format!("\n\n{}", sections.join("\n\n"))
    }
}

// ---------------------------------------------------------------------------------------------
// Summarisation

/// One summarisation call; the answer's text blocks joined by newlines. A failed call is
/// `Err(errorMessage)`.
async fn complete(
    model: &ModelClient,
    context: LlmContext,
    max_tokens: u64,
    thinking_level: &str,
    pi: PiVersion,
    cancel: watch::Receiver<bool>,
) -> Result<String, String> {
    let reasoning = js_truthy(&model.info()["reasoning"]);
    let options = StreamOptions {
        thinking_level: if reasoning && !thinking_level.is_empty() {
            thinking_level.to_owned()
        } else {
            "off".to_owned()
        },
        max_tokens: Some(max_tokens),
        pi,
        ..StreamOptions::default()
    };
    let payload = model.build_payload(&context, &options);
    // Nobody watches a summary stream in; the events go nowhere.
    let (items, _) = mpsc::unbounded_channel();
    let answer = model.stream(payload, items, cancel, options.pi).await;
    if answer["stopReason"] == "error" {
        return Err(answer["errorMessage"]
            .as_str()
            .filter(|m| !m.is_empty())
            .unwrap_or("Unknown error")
            .to_owned());
    }
    Ok(answer["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n"))
}

/// pi's `compact` with thinking off (the tests' shorthand for [`summarize_with_thinking`]).
#[cfg(test)]
pub async fn summarize(
    model: &ModelClient,
    preparation: &Preparation,
    custom_instructions: Option<&str>,
    cancel: watch::Receiver<bool>,
) -> anyhow::Result<CompactionResult> {
    summarize_with_thinking(model, preparation, custom_instructions, "off", cancel).await
}

/// pi's `compact` at the session's thinking level (used only if the model reasons). One call
/// summarises the history (updating the previous summary if any); a split turn adds a second,
/// concurrent call for the turn's early part, and the two summaries are merged. A failed call
/// is an error (`Summarization failed: ...` / `Turn prefix summarization failed: ...`), and so
/// is a cancel ([`COMPACTION_CANCELLED`]), which pi's callers check for after the calls.
pub async fn summarize_with_thinking(
    model: &ModelClient,
    preparation: &Preparation,
    custom_instructions: Option<&str>,
    thinking_level: &str,
    cancel: watch::Receiver<bool>,
) -> anyhow::Result<CompactionResult> {
    let reserve = preparation.settings.reserve_tokens;
    let history = async {
        let context = summary_request(
            &preparation.messages_to_summarize,
            custom_instructions,
            preparation.previous_summary.as_deref(),
        );
        complete(
            model,
            context,
            (reserve as f64 * 0.8).floor() as u64,
            thinking_level,
            preparation.settings.pi,
            cancel.clone(),
        )
        .await
        .map_err(|e| anyhow!("Summarization failed: {e}"))
    };
    let mut summary = if preparation.is_split_turn && !preparation.turn_prefix_messages.is_empty() {
        let history = async {
            if preparation.messages_to_summarize.is_empty() {
                Ok("No prior history.".to_owned())
            } else {
                history.await
            }
        };
        let prefix = async {
            let context = turn_prefix_request(&preparation.turn_prefix_messages);
            complete(
                model,
                context,
                (reserve as f64 * 0.5).floor() as u64,
                thinking_level,
                preparation.settings.pi,
                cancel.clone(),
            )
            .await
            .map_err(|e| anyhow!("Turn prefix summarization failed: {e}"))
        };
        let (history, prefix) = tokio::try_join!(history, prefix)?;
        format!("{history}\n\n---\n\n**Turn Context (split turn):**\n\n{prefix}")
    } else {
        history.await?
    };
    if *cancel.borrow() {
        return Err(anyhow!(COMPACTION_CANCELLED));
    }
    let (read_files, modified_files) = preparation.file_ops.file_lists();
    summary.push_str(&format_file_operations(&read_files, &modified_files));
    Ok(CompactionResult {
        summary,
        first_kept_entry_id: preparation.first_kept_entry_id.clone(),
        tokens_before: preparation.tokens_before,
        details: Some(json!({ "readFiles": read_files, "modifiedFiles": modified_files })),
    })
}

// ---------------------------------------------------------------------------------------------
// When to compact

/// Provider errors that say the request did not fit the context window (pi-ai's overflow
/// patterns).
static OVERFLOW_PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"prompt is too long",
        r"request_too_large",
        r"input is too long for requested model",
        r"exceeds the context window",
        r"input token count.*exceeds the maximum",
        r"maximum prompt length is \d+",
        r"reduce the length of the messages",
        r"maximum context length is \d+ tokens",
        r"exceeds the limit of \d+",
        r"exceeds the available context size",
        r"greater than the context length",
        r"context window exceeds limit",
        r"exceeded model token limit",
        r"too large for model with \d+ maximum context length",
        r"model_context_window_exceeded",
        r"prompt too long; exceeded (?:max )?context length",
        r"context[_ ]length[_ ]exceeded",
        r"too many tokens",
        r"token limit exceeded",
        r"^4(?:00|13)\s*(?:status code)?\s*\(no body\)",
    ]
    .iter()
    .map(|p| Regex::new(&format!("(?i){p}")).expect("overflow pattern"))
    .collect()
});

/// Errors that match an overflow pattern but are throttling, not overflow.
static NON_OVERFLOW_PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    [
        r"^(Throttling error|Service unavailable):",
        r"rate limit",
        r"too many requests",
    ]
    .iter()
    .map(|p| Regex::new(&format!("(?i){p}")).expect("non-overflow pattern"))
    .collect()
});

/// pi-ai's `isContextOverflow`: an error that says the context did not fit, or (given the
/// window) a provider that silently accepted too much input or truncated it to the window.
pub fn is_context_overflow(message: &Value, context_window: u64) -> bool {
    if message["stopReason"] == "error"
        && let Some(error) = message["errorMessage"].as_str().filter(|e| !e.is_empty())
        && !NON_OVERFLOW_PATTERNS.iter().any(|p| p.is_match(error))
        && OVERFLOW_PATTERNS.iter().any(|p| p.is_match(error))
    {
        return true;
    }
    let usage = &message["usage"];
    let input = count(&usage["input"]) + count(&usage["cacheRead"]);
    if context_window > 0 {
        if message["stopReason"] == "stop" && input > context_window {
            return true;
        }
        if message["stopReason"] == "length"
            && count(&usage["output"]) == 0
            && input as f64 >= context_window as f64 * 0.99
        {
            return true;
        }
    }
    false
}

/// Why auto-compaction runs (pi's `compaction_start` reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoCompactionReason {
    /// The model refused the context as too large: compact, then retry the turn.
    Overflow,
    /// The context is past the threshold: compact, no retry.
    Threshold,
}

/// The decision of pi's `_checkCompaction` after `assistant` ended a run (or before a prompt,
/// with `skip_aborted_check` false): `agent_messages` is the agent's context, `branch` the
/// session branch, `model` the current model's info. Nothing is due when compaction is off,
/// for an aborted answer, or for an answer older than the latest compaction. An overflow
/// counts only for an answer from the current model; pi tries overflow recovery once, which
/// the caller tracks (and, as pi, drops the failed answer from the context before compacting).
pub fn check_auto_compaction<E: Borrow<Value>>(
    assistant: &Value,
    agent_messages: &[Value],
    branch: &[E],
    model: Option<&Value>,
    settings: &CompactionSettings,
    skip_aborted_check: bool,
) -> Option<AutoCompactionReason> {
    if !settings.enabled || (skip_aborted_check && assistant["stopReason"] == "aborted") {
        return None;
    }
    let context_window = model.map_or(0, |m| count(&m["contextWindow"]));
    let same_model = model
        .is_some_and(|m| assistant["provider"] == m["provider"] && assistant["model"] == m["id"]);
    let compaction_ms = branch
        .iter()
        .rev()
        .map(Borrow::borrow)
        .find(|e| e["type"] == "compaction")
        .map(|c| js_time_ms(&c["timestamp"]));
    // NaN on either side compares false, as in JavaScript.
    let before_compaction = |message: &Value| match (message["timestamp"].as_f64(), compaction_ms) {
        (Some(t), Some(Some(c))) => t <= c,
        _ => false,
    };
    if before_compaction(assistant) {
        return None;
    }
    if same_model && is_context_overflow(assistant, context_window) {
        return Some(AutoCompactionReason::Overflow);
    }
    let context_tokens = if assistant["stopReason"] == "error" {
        // A failed call reports no usage: estimate from the last one that did, if it is newer
        // than the latest compaction (older usage measured the old, larger context).
        let estimate = estimate_context_tokens(agent_messages, settings.pi);
        let usage_message = &agent_messages[estimate.last_usage_index?];
        if usage_message["role"] == "assistant" && before_compaction(usage_message) {
            return None;
        }
        estimate.tokens
    } else {
        calculate_context_tokens(&assistant["usage"])
    };
    should_compact(context_tokens, context_window, settings)
        .then_some(AutoCompactionReason::Threshold)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pichamber_model::ScriptedModel;
    use pichamber_model::scripted::{Script, ScriptStopReason, Turn};

    /// Builds a branch of pi session entries: ids `e1`, `e2`, ..., each the parent's child,
    /// one second apart.
    #[derive(Default)]
    struct Branch {
        entries: Vec<Value>,
    }

    const T0: u64 = 1_735_689_600_000; // 2025-01-01T00:00:00Z

    impl Branch {
        fn push(&mut self, mut entry: Value) -> String {
            let n = self.entries.len() + 1;
            let id = format!("e{n}");
            let ms = T0 + n as u64 * 1000;
            let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
            entry["id"] = id.clone().into();
            entry["parentId"] = self.entries.last().map_or(Value::Null, |e| e["id"].clone());
            entry["timestamp"] = humantime::format_rfc3339_millis(time).to_string().into();
            if entry["type"] == "message" {
                entry["message"]["timestamp"] = ms.into();
            }
            self.entries.push(entry);
            id
        }

        fn message(&mut self, message: Value) -> String {
            self.push(json!({ "type": "message", "message": message }))
        }

        fn user(&mut self, text: &str) -> String {
            self.message(json!({ "role": "user", "content": [{ "type": "text", "text": text }] }))
        }

        fn assistant(&mut self, text: &str, calls: &[(&str, &str, Value)]) -> String {
            let mut content = Vec::new();
            if !text.is_empty() {
                content.push(json!({ "type": "text", "text": text }));
            }
            for (id, name, arguments) in calls {
                content.push(
                    json!({ "type": "toolCall", "id": id, "name": name, "arguments": arguments }),
                );
            }
            self.message(json!({
                "role": "assistant", "content": content, "api": "openai-completions",
                "provider": "p", "model": "m",
                "usage": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0 },
                "stopReason": if calls.is_empty() { "stop" } else { "toolUse" },
            }))
        }

        fn assistant_with_usage(&mut self, text: &str, total: u64) -> String {
            let id = self.assistant(text, &[]);
            self.entries.last_mut().unwrap()["message"]["usage"]["totalTokens"] = total.into();
            id
        }

        fn result(&mut self, call_id: &str, name: &str, text: &str) -> String {
            self.message(json!({
                "role": "toolResult", "toolCallId": call_id, "toolName": name,
                "content": [{ "type": "text", "text": text }], "isError": false,
            }))
        }

        fn other(&mut self, kind: &str) -> String {
            match kind {
                "model_change" => {
                    self.push(json!({ "type": "model_change", "provider": "p", "modelId": "m" }))
                }
                "thinking_level_change" => {
                    self.push(json!({ "type": "thinking_level_change", "thinkingLevel": "low" }))
                }
                "label" => self.push(json!({ "type": "label", "targetId": "e1", "label": "x" })),
                "custom" => {
                    self.push(json!({ "type": "custom", "customType": "state", "data": 1 }))
                }
                _ => unreachable!(),
            }
        }

        fn custom_message(&mut self, text: &str) -> String {
            self.push(json!({
                "type": "custom_message", "customType": "note", "content": text, "display": true,
            }))
        }

        fn branch_summary(&mut self, summary: &str) -> String {
            self.push(json!({ "type": "branch_summary", "fromId": "e1", "summary": summary }))
        }

        fn compaction(&mut self, summary: &str, first_kept: &str, details: Value) -> String {
            self.push(json!({
                "type": "compaction", "summary": summary, "firstKeptEntryId": first_kept,
                "tokensBefore": 1234, "details": details,
            }))
        }

        fn index(&self, id: &str) -> usize {
            self.entries.iter().position(|e| e["id"] == id).unwrap()
        }
    }

    /// `n` tokens' worth of text (four characters a token).
    fn tokens(n: usize) -> String {
        "abcd".repeat(n)
    }

    fn settings(keep: u64) -> CompactionSettings {
        CompactionSettings {
            keep_recent_tokens: keep,
            ..settings_0_73()
        }
    }

    /// pi's defaults, under the rules of pi 0.73.1 (the oracle these tests compare with).
    fn settings_0_73() -> CompactionSettings {
        CompactionSettings {
            pi: PiVersion::V0_73,
            ..CompactionSettings::default()
        }
    }

    fn roles(messages: &[Value]) -> Vec<&str> {
        messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect()
    }

    /// A coding session: two prompts, each answered after reading and editing files.
    fn coding_session() -> Branch {
        let mut b = Branch::default();
        b.other("model_change");
        b.other("thinking_level_change");
        b.user(&tokens(100));
        b.assistant("Looking.", &[("c1", "read", json!({ "path": "a.rs" }))]);
        b.result("c1", "read", &tokens(300));
        b.assistant(
            "",
            &[(
                "c2",
                "edit",
                json!({ "path": "a.rs", "oldText": "x", "newText": "y" }),
            )],
        );
        b.result("c2", "edit", "Edited.");
        b.assistant(&tokens(50), &[]);
        b.user(&tokens(100));
        b.assistant(
            "",
            &[
                ("c3", "read", json!({ "path": "b.rs" })),
                ("c4", "write", json!({ "path": "c.rs", "content": "z" })),
            ],
        );
        b.result("c3", "read", &tokens(200));
        b.result("c4", "write", "Wrote.");
        b.assistant(&tokens(40), &[]);
        b
    }

    /// Every tool result sits on the same side of the cut as the call that asked for it.
    fn assert_results_follow_calls(branch: &[Value], first_kept: usize) {
        let call_side = |call_id: &Value| {
            branch.iter().position(|e| {
                e["message"]["role"] == "assistant"
                    && e["message"]["content"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|b| b["id"] == *call_id)
            })
        };
        let first = &branch[first_kept];
        assert_ne!(
            first["message"]["role"], "toolResult",
            "cut at a tool result"
        );
        for (i, e) in branch.iter().enumerate() {
            if e["message"]["role"] == "toolResult" {
                let call = call_side(&e["message"]["toolCallId"]).unwrap();
                assert_eq!(
                    call >= first_kept,
                    i >= first_kept,
                    "call {call} and its result {i} on different sides of {first_kept}"
                );
            }
        }
    }

    #[test]
    fn settings_default_to_pis() {
        let d = CompactionSettings::default();
        assert_eq!(
            (d.enabled, d.reserve_tokens, d.keep_recent_tokens),
            (true, 16384, 20000)
        );
        assert_eq!(
            CompactionSettings::from_json(&json!({ "reserveTokens": 1000 })),
            CompactionSettings {
                reserve_tokens: 1000,
                ..d
            }
        );
    }

    #[test]
    fn estimates_count_utf16_units_and_tool_arguments() {
        assert_eq!(
            estimate_tokens(&json!({ "role": "user", "content": "😀😀" })),
            1
        );
        assert_eq!(
            estimate_tokens(&json!({ "role": "user", "content": "abcde" })),
            2
        );
        // name (4) + {"path":"a"} (12)
        let call = json!({ "role": "assistant", "content": [{ "type": "toolCall", "id": "1", "name": "read", "arguments": { "path": "a" } }] });
        assert_eq!(estimate_tokens(&call), 4);
        let image = json!({ "role": "toolResult", "content": [{ "type": "image", "data": "", "mimeType": "image/png" }] });
        assert_eq!(estimate_tokens(&image), 1200);
        let user_image = json!({ "role": "user", "content": [{ "type": "image", "data": "", "mimeType": "image/png" }] });
        assert_eq!(estimate_tokens(&user_image), 0);
        let bash = json!({ "role": "bashExecution", "command": "ls", "output": "abcdef" });
        assert_eq!(estimate_tokens(&bash), 2);
    }

    #[test]
    fn cut_starts_the_kept_part_at_a_user_message() {
        let b = coding_session();
        let second_prompt = b.entries[8]["id"].as_str().unwrap();
        // The second turn is 356 tokens; 220 are reached at its first tool result, so the cut
        // goes at the next assistant message, inside the turn.
        let prep = prepare(&b.entries, &settings(220)).unwrap();
        assert_eq!(prep.first_kept_entry_id, b.entries[12]["id"]);
        assert!(prep.is_split_turn);
        assert_eq!(
            roles(&prep.turn_prefix_messages),
            ["user", "assistant", "toolResult", "toolResult"]
        );
        assert_eq!(prep.file_ops.written, ["c.rs"]);
        // 355 are reached at the second prompt: the cut goes there, between turns.
        let prep = prepare(&b.entries, &settings(355)).unwrap();
        assert_eq!(prep.first_kept_entry_id, second_prompt);
        assert!(!prep.is_split_turn);
        assert!(prep.turn_prefix_messages.is_empty());
        assert_eq!(
            roles(&prep.messages_to_summarize),
            [
                "user",
                "assistant",
                "toolResult",
                "assistant",
                "toolResult",
                "assistant"
            ]
        );
        assert_eq!(prep.file_ops.read, ["a.rs"]);
        assert_eq!(prep.file_ops.edited, ["a.rs"]);
        assert!(prep.file_ops.written.is_empty());
        assert_eq!(prep.previous_summary, None);
        // The last answer's usage is the context's size.
        assert_eq!(prep.tokens_before, 0);
        let mut b = b;
        b.entries[12]["message"]["usage"]["totalTokens"] = 900.into();
        assert_eq!(
            prepare(&b.entries, &settings(355)).unwrap().tokens_before,
            900
        );
        // No usage reported: the whole context is estimated.
        for e in &mut b.entries {
            if let Some(m) = e.get_mut("message").and_then(Value::as_object_mut) {
                m.remove("usage");
            }
        }
        let all: u64 = b
            .entries
            .iter()
            .filter(|e| e["type"] == "message")
            .map(|e| estimate_tokens(&e["message"]))
            .sum();
        assert_eq!(all, 827);
        assert_eq!(
            prepare(&b.entries, &settings(355)).unwrap().tokens_before,
            all
        );
    }

    #[test]
    fn a_tool_result_is_never_cut_from_its_call() {
        let b = coding_session();
        for keep in 0..900 {
            let prep = prepare(&b.entries, &settings(keep)).unwrap();
            assert_results_follow_calls(&b.entries, b.index(&prep.first_kept_entry_id));
        }
        // A huge result right after its call: the cut goes after the result, not between.
        let mut b = Branch::default();
        b.user("go");
        b.assistant("", &[("c1", "bash", json!({ "command": "cat big" }))]);
        b.result("c1", "bash", &tokens(5000));
        let last = b.assistant("Done.", &[]);
        let prep = prepare(&b.entries, &settings(1000)).unwrap();
        assert_eq!(prep.first_kept_entry_id, last);
        assert!(prep.is_split_turn);
        assert!(prep.messages_to_summarize.is_empty());
        assert_eq!(
            roles(&prep.turn_prefix_messages),
            ["user", "assistant", "toolResult"]
        );
    }

    #[test]
    fn a_trailing_result_past_the_budget_keeps_everything() {
        // pi's quirk: no cut point at or after the result that fills the budget, so the cut
        // falls back to the first cut point.
        let mut b = Branch::default();
        b.user("go");
        b.assistant("", &[("c1", "bash", json!({ "command": "cat big" }))]);
        b.result("c1", "bash", &tokens(5000));
        let prep = prepare(&b.entries, &settings(1000)).unwrap();
        assert_eq!(prep.first_kept_entry_id, "e1");
        assert!(prep.messages_to_summarize.is_empty());
    }

    #[test]
    fn a_split_turn_summarises_its_prefix_apart_from_history() {
        let mut b = Branch::default();
        b.user(&tokens(10));
        b.assistant(&tokens(10), &[]);
        let prompt = b.user(&tokens(10));
        b.assistant("", &[("c1", "read", json!({ "path": "x.md" }))]);
        b.result("c1", "read", &tokens(400));
        let cut = b.assistant("", &[("c2", "read", json!({ "path": "y.md" }))]);
        b.result("c2", "read", &tokens(400));
        b.assistant(&tokens(10), &[]);
        let prep = prepare(&b.entries, &settings(412)).unwrap();
        assert_eq!(prep.first_kept_entry_id, cut);
        assert!(prep.is_split_turn);
        assert_eq!(roles(&prep.messages_to_summarize), ["user", "assistant"]);
        assert_eq!(
            roles(&prep.turn_prefix_messages),
            ["user", "assistant", "toolResult"]
        );
        assert_eq!(
            prep.turn_prefix_messages[0],
            b.entries[b.index(&prompt)]["message"]
        );
        // The prefix's files count; the kept part's do not.
        assert_eq!(prep.file_ops.read, ["x.md"]);
    }

    #[test]
    fn a_later_compaction_summarises_from_the_earlier_kept_boundary() {
        let mut b = Branch::default();
        b.user(&tokens(100));
        b.assistant(&tokens(100), &[]);
        let kept = b.user(&tokens(100));
        b.assistant("", &[("c1", "read", json!({ "path": "new.txt" }))]);
        b.result("c1", "read", "text");
        b.compaction(
            "S1",
            &kept,
            json!({ "readFiles": ["old.txt"], "modifiedFiles": ["m.txt"] }),
        );
        let next = b.user(&tokens(100));
        b.assistant_with_usage(&tokens(100), 5000);
        b.user(&tokens(7));
        let prep = prepare(&b.entries, &settings(150)).unwrap();
        assert_eq!(prep.previous_summary.as_deref(), Some("S1"));
        assert_eq!(prep.first_kept_entry_id, next);
        // From the kept boundary, skipping the compaction entry itself.
        assert_eq!(
            prep.messages_to_summarize[0],
            b.entries[b.index(&kept)]["message"]
        );
        assert_eq!(
            roles(&prep.messages_to_summarize),
            ["user", "assistant", "toolResult"]
        );
        assert_eq!(prep.file_ops.read, ["old.txt", "new.txt"]);
        assert_eq!(prep.file_ops.edited, ["m.txt"]);
        // The last usage plus the estimate of what follows it.
        assert_eq!(prep.tokens_before, 5000 + 7);

        // An extension's compaction (fromHook) recorded its own details: not file lists.
        b.entries[5]["fromHook"] = true.into();
        let prep = prepare(&b.entries, &settings(150)).unwrap();
        assert_eq!(prep.file_ops.read, ["new.txt"]);
        assert!(prep.file_ops.edited.is_empty());

        // A kept id no longer on the path: start right after the compaction.
        b.entries[5]["firstKeptEntryId"] = "gone".into();
        let prep = prepare(&b.entries, &settings(150)).unwrap();
        assert_eq!(prep.first_kept_entry_id, next);
        assert!(prep.messages_to_summarize.is_empty());
        let prep = prepare(&b.entries, &settings(100)).unwrap();
        assert!(prep.is_split_turn);
        assert_eq!(roles(&prep.turn_prefix_messages), ["user"]);
    }

    #[test]
    fn custom_messages_and_branch_summaries_are_cut_points_and_summarised() {
        let mut b = Branch::default();
        b.user("fix it");
        b.assistant("", &[("c1", "bash", json!({ "command": "make" }))]);
        b.result("c1", "bash", &tokens(500));
        let note = b.custom_message("Steer: prefer small diffs");
        b.assistant(&tokens(10), &[]);
        let prep = prepare(&b.entries, &settings(200)).unwrap();
        assert_eq!(prep.first_kept_entry_id, note);
        // A custom message starts its own turn: nothing of the turn before it is kept.
        assert!(prep.is_split_turn);
        assert!(prep.turn_prefix_messages.is_empty());
        assert_eq!(
            roles(&prep.messages_to_summarize),
            ["user", "assistant", "toolResult"]
        );

        let mut b = Branch::default();
        b.branch_summary("Tried approach A; it failed.");
        b.other("label");
        b.user(&tokens(50));
        b.custom_message("reminder");
        b.assistant(&tokens(50), &[]);
        b.user(&tokens(50));
        b.assistant(&tokens(50), &[]);
        let prep = prepare(&b.entries, &settings(100)).unwrap();
        assert_eq!(prep.first_kept_entry_id, b.entries[5]["id"]);
        assert!(!prep.is_split_turn);
        assert_eq!(
            roles(&prep.messages_to_summarize),
            ["branchSummary", "user", "custom", "assistant"]
        );
        assert_eq!(prep.messages_to_summarize[0]["timestamp"], T0 + 1000);
        let request = summary_request(&prep.messages_to_summarize, None, None);
        let text = request.messages[0]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with(
            "<conversation>\n[User]: The following is a summary of a branch that this conversation came back from:\n\n<summary>\nTried approach A; it failed.</summary>\n\n[User]: abcd"
        ));
        assert!(text.contains("\n\n[User]: reminder\n\n[Assistant]: abcd"));
    }

    #[test]
    fn settings_changes_before_the_cut_stay_with_the_kept_part() {
        let mut b = Branch::default();
        b.user(&tokens(100));
        b.assistant(&tokens(100), &[]);
        let change = b.other("model_change");
        b.other("custom");
        b.user(&tokens(100));
        b.assistant(&tokens(100), &[]);
        let prep = prepare(&b.entries, &settings(150)).unwrap();
        assert_eq!(prep.first_kept_entry_id, change);
        // pi then looks for the turn start from the model change and finds the first prompt:
        // the earlier turn becomes a "prefix".
        assert!(prep.is_split_turn);
        assert_eq!(roles(&prep.turn_prefix_messages), ["user", "assistant"]);
    }

    #[test]
    fn no_preparation_after_a_compaction_or_for_an_empty_branch() {
        let mut b = Branch::default();
        let kept = b.user("hi");
        b.assistant("hello", &[]);
        b.compaction("S", &kept, json!({}));
        assert!(prepare(&b.entries, &settings(10)).is_none());
        assert_eq!(
            prepare_manual(&b.entries, &settings(10))
                .unwrap_err()
                .to_string(),
            "Already compacted"
        );
        let empty: Vec<Value> = Vec::new();
        assert_eq!(
            prepare_manual(&empty, &settings(10))
                .unwrap_err()
                .to_string(),
            "Nothing to compact (session too small)"
        );
        // A small session still gets a preparation, with nothing to summarise (as in pi).
        let mut b = Branch::default();
        b.other("model_change");
        b.user("hi");
        b.assistant("hello", &[]);
        let prep = prepare(&b.entries, &settings_0_73()).unwrap();
        assert_eq!(prep.first_kept_entry_id, "e1");
        assert!(prep.messages_to_summarize.is_empty());
        // Entries without ids (unmigrated sessions) cannot be compacted.
        let mut b = Branch::default();
        b.user("hi");
        b.entries[0].as_object_mut().unwrap().remove("id");
        assert!(prepare(&b.entries, &settings(0)).is_none());
    }

    #[test]
    fn preparation_json_has_pis_shape() {
        let b = coding_session();
        let prep = prepare(&b.entries, &settings(355)).unwrap();
        let v = prep.to_json();
        let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            [
                "firstKeptEntryId",
                "messagesToSummarize",
                "turnPrefixMessages",
                "isSplitTurn",
                "tokensBefore",
                "fileOps",
                "settings"
            ]
        );
        assert_eq!(
            v["fileOps"],
            json!({ "read": ["a.rs"], "written": [], "edited": ["a.rs"] })
        );
        assert_eq!(
            v["settings"],
            json!({ "enabled": true, "reserveTokens": 16384, "keepRecentTokens": 355 })
        );
    }

    #[test]
    fn serialisation_labels_roles_and_truncates_tool_results() {
        let messages = vec![
            json!({ "role": "user", "content": "Fix the bug" }),
            json!({ "role": "assistant", "content": [
                { "type": "thinking", "thinking": "hmm" },
                { "type": "text", "text": "On it." },
                { "type": "toolCall", "id": "1", "name": "edit", "arguments": { "path": "a.rs", "n": 2.0, "ok": true } },
                { "type": "toolCall", "id": "2", "name": "ls", "arguments": {} },
            ]}),
            json!({ "role": "toolResult", "content": [{ "type": "text", "text": "x".repeat(2005) }] }),
            json!({ "role": "toolResult", "content": [] }),
        ];
        let text = serialize_conversation(&messages);
        let expected = format!(
            "[User]: Fix the bug\n\n[Assistant thinking]: hmm\n\n[Assistant]: On it.\n\n[Assistant tool calls]: edit(path=\"a.rs\", n=2, ok=true); ls()\n\n[Tool result]: {}\n\n[... 5 more characters truncated]",
            "x".repeat(2000)
        );
        assert_eq!(text, expected);
    }

    #[test]
    fn file_lists_put_modified_files_apart_and_sort() {
        let ops = FileOps {
            read: vec!["z".into(), "b".into(), "w".into()],
            written: vec!["w".into()],
            edited: vec!["c".into(), "B".into()],
        };
        let (read, modified) = ops.file_lists();
        assert_eq!(read, ["b", "z"]);
        assert_eq!(modified, ["B", "c", "w"]);
        assert_eq!(format_file_operations(&[], &[]), "");
        assert_eq!(
            format_file_operations(&read, &modified),
            "\n\n<read-files>\nb\nz\n</read-files>\n\n<modified-files>\nB\nc\nw\n</modified-files>"
        );
    }

    fn scripted(turns: Vec<Turn>) -> (ModelClient, ScriptedModel) {
        let model = ScriptedModel::new(Script { turns });
        (ModelClient::Scripted(model.clone()), model)
    }

    fn not_cancelled() -> watch::Receiver<bool> {
        watch::channel(false).1
    }

    /// The system prompt and the user prompt of a recorded chat-completions payload.
    fn prompts(payload: &Value) -> (String, String) {
        let messages = payload["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 2, "{payload}");
        let text = |m: &Value| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other[0]["text"].as_str().unwrap().to_owned(),
        };
        assert_eq!(messages[1]["role"], "user");
        (text(&messages[0]), text(&messages[1]))
    }

    #[tokio::test]
    async fn summary_request_carries_conversation_previous_summary_and_focus() {
        let mut b = Branch::default();
        b.user("Please add logging");
        b.assistant("", &[("c1", "read", json!({ "path": "src/main.rs" }))]);
        b.result("c1", "read", "fn main() {}");
        b.assistant(
            "",
            &[(
                "c2",
                "edit",
                json!({ "path": "src/main.rs", "oldText": "a", "newText": "b" }),
            )],
        );
        b.result("c2", "edit", "ok");
        let kept = b.user(&tokens(100));
        b.assistant(&tokens(100), &[]);
        b.compaction(
            "Earlier: set up the project.",
            &kept,
            json!({ "readFiles": ["Cargo.toml"], "modifiedFiles": [] }),
        );
        b.user(&tokens(100));
        b.assistant(&tokens(100), &[]);
        let prep = prepare(&b.entries, &settings(150)).unwrap();
        let (model, recorder) = scripted(vec![Turn::text("## Goal\nLogging")]);

        let result = summarize(&model, &prep, Some("the logging format"), not_cancelled())
            .await
            .unwrap();

        let payloads = recorder.payloads();
        assert_eq!(payloads.len(), 1);
        let (system, user) = prompts(&payloads[0]);
        assert_eq!(system, SUMMARIZATION_SYSTEM_PROMPT);
        let conversation = serialize_conversation(&convert_to_llm(&prep.messages_to_summarize));
        let expected = format!(
            "<conversation>\n{conversation}\n</conversation>\n\n<previous-summary>\nEarlier: set up the project.\n</previous-summary>\n\n{UPDATE_SUMMARY_PROMPT}\n\nAdditional focus: the logging format"
        );
        assert_eq!(user, expected);
        assert!(conversation.starts_with("[User]: abcd"));
        // pi's maxTokens: 80% of the reserve.
        let max = payloads[0]["max_completion_tokens"]
            .as_u64()
            .or(payloads[0]["max_tokens"].as_u64());
        assert_eq!(max, Some(13107));
        assert_eq!(
            result,
            CompactionResult {
                summary: "## Goal\nLogging\n\n<read-files>\nCargo.toml\n</read-files>".into(),
                first_kept_entry_id: prep.first_kept_entry_id.clone(),
                tokens_before: prep.tokens_before,
                details: Some(json!({ "readFiles": ["Cargo.toml"], "modifiedFiles": [] })),
            }
        );
    }

    #[tokio::test]
    async fn first_summary_uses_the_initial_prompt_and_lists_files() {
        let b = coding_session();
        let prep = prepare(&b.entries, &settings(355)).unwrap();
        let (model, recorder) = scripted(vec![Turn::text("S")]);
        let result = summarize(&model, &prep, None, not_cancelled())
            .await
            .unwrap();
        let (_, user) = prompts(&recorder.payloads()[0]);
        assert!(user.starts_with("<conversation>\n[User]: abcd"));
        assert!(user.contains("[Assistant tool calls]: read(path=\"a.rs\")"));
        assert!(user.ends_with(&format!("</conversation>\n\n{SUMMARY_PROMPT}")));
        assert!(!user.contains("<previous-summary>"));
        assert_eq!(
            result.summary,
            "S\n\n<modified-files>\na.rs\n</modified-files>"
        );
        assert_eq!(
            result.to_json()["details"],
            json!({ "readFiles": [], "modifiedFiles": ["a.rs"] })
        );
    }

    #[tokio::test]
    async fn a_split_turn_makes_two_calls_and_merges_them() {
        let mut b = Branch::default();
        b.user("first");
        b.assistant("ok", &[]);
        b.user("second");
        b.assistant("", &[("c1", "read", json!({ "path": "x.md" }))]);
        b.result("c1", "read", &tokens(400));
        b.assistant("", &[("c2", "read", json!({ "path": "y.md" }))]);
        b.result("c2", "read", &tokens(400));
        b.assistant(&tokens(10), &[]);
        let prep = prepare(&b.entries, &settings(412)).unwrap();
        assert!(prep.is_split_turn);
        let (model, recorder) = scripted(vec![Turn::text("HISTORY"), Turn::text("PREFIX")]);
        let result = summarize(&model, &prep, None, not_cancelled())
            .await
            .unwrap();
        let payloads = recorder.payloads();
        assert_eq!(payloads.len(), 2);
        let (_, history) = prompts(&payloads[0]);
        let (_, prefix) = prompts(&payloads[1]);
        assert_eq!(
            history,
            format!(
                "<conversation>\n[User]: first\n\n[Assistant]: ok\n</conversation>\n\n{SUMMARY_PROMPT}"
            )
        );
        assert!(prefix.starts_with("<conversation>\n[User]: second\n\n[Assistant tool calls]: read(path=\"x.md\")\n\n[Tool result]: abcd"));
        assert!(prefix.ends_with(&format!("</conversation>\n\n{TURN_PREFIX_PROMPT}")));
        let max = |p: &Value| {
            p["max_completion_tokens"]
                .as_u64()
                .or(p["max_tokens"].as_u64())
        };
        assert_eq!(max(&payloads[1]), Some(8192));
        assert_eq!(
            result.summary,
            "HISTORY\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX\n\n<read-files>\nx.md\n</read-files>"
        );

        // Without earlier history only the prefix is summarised.
        let mut b = Branch::default();
        b.user("go");
        b.assistant("", &[("c1", "bash", json!({ "command": "cat big" }))]);
        b.result("c1", "bash", &tokens(5000));
        b.assistant("Done.", &[]);
        let prep = prepare(&b.entries, &settings(1000)).unwrap();
        let (model, recorder) = scripted(vec![Turn::text("PREFIX")]);
        let result = summarize(&model, &prep, None, not_cancelled())
            .await
            .unwrap();
        assert_eq!(recorder.payloads().len(), 1);
        assert_eq!(
            result.summary,
            "No prior history.\n\n---\n\n**Turn Context (split turn):**\n\nPREFIX"
        );
    }

    #[tokio::test]
    async fn a_model_error_fails_the_summary_with_its_message() {
        let b = coding_session();
        let prep = prepare(&b.entries, &settings(355)).unwrap();
        let failing = Turn {
            stop_reason: Some(ScriptStopReason::Error),
            error_message: Some("overloaded".into()),
            ..Turn::default()
        };
        let (model, _) = scripted(vec![failing.clone()]);
        let error = summarize(&model, &prep, None, not_cancelled())
            .await
            .unwrap_err();
        assert_eq!(error.to_string(), "Summarization failed: overloaded");

        let mut b = Branch::default();
        b.user("go");
        b.assistant("", &[("c1", "bash", json!({ "command": "cat big" }))]);
        b.result("c1", "bash", &tokens(5000));
        b.assistant("Done.", &[]);
        let prep = prepare(&b.entries, &settings(1000)).unwrap();
        let (model, _) = scripted(vec![failing]);
        let error = summarize(&model, &prep, None, not_cancelled())
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "Turn prefix summarization failed: overloaded"
        );
    }

    #[tokio::test]
    async fn a_cancelled_summary_is_an_error() {
        let b = coding_session();
        let prep = prepare(&b.entries, &settings(355)).unwrap();
        let (model, _) = scripted(vec![Turn::text("S")]);
        let (tx, rx) = watch::channel(false);
        tx.send(true).unwrap();
        let error = summarize(&model, &prep, None, rx).await.unwrap_err();
        assert_eq!(error.to_string(), COMPACTION_CANCELLED);
    }

    #[tokio::test]
    async fn a_store_branch_compacts_into_a_context_that_starts_with_the_summary() {
        let mut store = crate::store::SessionStore::in_memory("/work");
        let mut b = coding_session();
        for e in b.entries.drain(..) {
            match e["type"].as_str().unwrap() {
                "message" => store.append_message(e["message"].clone()).unwrap(),
                "model_change" => store.append_model_change("p", "m").unwrap(),
                _ => store.append_thinking_level_change("low").unwrap(),
            };
        }
        let branch = store.get_branch(None);
        let prep = prepare(&branch, &settings(355)).unwrap();
        let first_kept = branch
            .iter()
            .position(|e| e["id"] == prep.first_kept_entry_id.as_str())
            .unwrap();
        assert_eq!(first_kept, 8);
        let (model, _) = scripted(vec![Turn::text("SUMMARY")]);
        let r = summarize(&model, &prep, None, not_cancelled())
            .await
            .unwrap();
        store
            .append_compaction(
                &r.summary,
                &r.first_kept_entry_id,
                r.tokens_before,
                r.details,
                None,
            )
            .unwrap();
        let context = store.build_session_context();
        assert_eq!(context.messages[0]["role"], "compactionSummary");
        assert_eq!(context.messages[0]["summary"], r.summary.as_str());
        assert_eq!(
            roles(&context.messages[1..]),
            ["user", "assistant", "toolResult", "toolResult", "assistant"]
        );
        let branch = store.get_branch(None);
        assert_eq!(
            prepare_manual(&branch, &settings(355))
                .unwrap_err()
                .to_string(),
            ALREADY_COMPACTED
        );
    }

    #[test]
    fn threshold_leaves_the_reserve_free() {
        let s = settings_0_73();
        assert!(!should_compact(100_000 - 16384, 100_000, &s));
        assert!(should_compact(100_000 - 16383, 100_000, &s));
        // A window smaller than the reserve: always due.
        assert!(should_compact(0, 1000, &s));
        let off = CompactionSettings {
            enabled: false,
            ..s
        };
        assert!(!should_compact(1_000_000, 100_000, &off));
    }

    fn model_info() -> Value {
        json!({ "provider": "p", "id": "m", "contextWindow": 100_000 })
    }

    fn answer(stop: &str, total: u64, error: Option<&str>) -> Value {
        let mut m = json!({
            "role": "assistant", "content": [], "provider": "p", "model": "m",
            "usage": { "input": total, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": total },
            "stopReason": stop, "timestamp": T0 + 100_000,
        });
        if let Some(e) = error {
            m["errorMessage"] = e.into();
        }
        m
    }

    #[test]
    fn overflow_errors_are_recognised() {
        let overflow = answer(
            "error",
            0,
            Some("prompt is too long: 213462 tokens > 200000 maximum"),
        );
        assert!(is_context_overflow(&overflow, 0));
        assert!(!is_context_overflow(
            &answer("error", 0, Some("Rate limit: too many tokens")),
            0
        ));
        assert!(is_context_overflow(
            &answer("error", 0, Some("413 status code (no body)")),
            0
        ));
        assert!(!is_context_overflow(
            &answer("error", 0, Some("overloaded")),
            0
        ));
        // Silent overflow: more input than the window.
        assert!(is_context_overflow(&answer("stop", 100_001, None), 100_000));
        assert!(!is_context_overflow(&answer("stop", 100_001, None), 0));
    }

    #[test]
    fn auto_compaction_check_follows_pis_cases() {
        let s = settings_0_73();
        let info = model_info();
        let none: Vec<Value> = Vec::new();
        let check = |a: &Value, messages: &[Value], branch: &[Value]| {
            check_auto_compaction(a, messages, branch, Some(&info), &s, true)
        };
        let big = answer("stop", 90_000, None);
        assert_eq!(
            check(&big, &none, &none),
            Some(AutoCompactionReason::Threshold)
        );
        assert_eq!(check(&answer("stop", 50_000, None), &none, &none), None);
        let mut aborted = big.clone();
        aborted["stopReason"] = "aborted".into();
        assert_eq!(check(&aborted, &none, &none), None);
        assert_eq!(
            check_auto_compaction(&aborted, &none, &none, Some(&info), &s, false),
            Some(AutoCompactionReason::Threshold)
        );
        let overflow = answer("error", 0, Some("maximum context length is 100000 tokens"));
        assert_eq!(
            check(&overflow, &none, &none),
            Some(AutoCompactionReason::Overflow)
        );
        // From another model: not an overflow for this one; no usage to go on either.
        let mut other = overflow.clone();
        other["model"] = "bigger".into();
        assert_eq!(check(&other, &none, &none), None);
        // A failed answer: the last reported usage plus what followed it.
        let messages = vec![
            answer("stop", 84_000, None),
            json!({ "role": "user", "content": tokens(10) }),
        ];
        assert_eq!(
            check(&answer("error", 0, Some("overloaded")), &messages, &none),
            Some(AutoCompactionReason::Threshold)
        );
        // Answers from before the latest compaction trigger nothing.
        let mut b = Branch::default();
        let kept = b.user("hi");
        b.compaction("S", &kept, json!({}));
        b.entries[1]["timestamp"] = "2025-01-01T00:05:00.000Z".into();
        assert_eq!(check(&big, &none, &b.entries), None);
        assert_eq!(
            check(
                &answer("error", 0, Some("overloaded")),
                &messages,
                &b.entries
            ),
            None
        );
        b.entries[1]["timestamp"] = "2025-01-01T00:01:00.000Z".into();
        assert_eq!(
            check(&big, &none, &b.entries),
            Some(AutoCompactionReason::Threshold)
        );
        let disabled = CompactionSettings {
            enabled: false,
            ..s
        };
        assert_eq!(
            check_auto_compaction(&big, &none, &none, Some(&info), &disabled, true),
            None
        );
    }

    // -----------------------------------------------------------------------------------------
    // Real pi as the oracle (tests/oracle/compaction.mjs)

    /// Runs the oracle script on `request` and returns what pi computed.
    fn oracle(request: &Value) -> Value {
        use std::io::Write;
        use std::process::{Command, Stdio};
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("tests/oracle");
        assert!(
            dir.join("node_modules/@mariozechner/pi-coding-agent")
                .exists(),
            "real pi is missing: run `npm ci --prefix tests/oracle`"
        );
        let mut child = Command::new("node")
            .arg("compaction.mjs")
            .current_dir(&dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run node (Node.js >= 20 is required)");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(request.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "compaction.mjs failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("oracle output is JSON")
    }

    /// Branches that exercise every rule: turns with tool calls, split turns, earlier
    /// compactions, custom messages, branch summaries, settings entries, odd text.
    fn oracle_branches() -> Vec<Vec<Value>> {
        let mut branches = vec![coding_session().entries];

        let mut b = Branch::default();
        b.user(&tokens(10));
        b.assistant(&tokens(10), &[]);
        b.user(&tokens(10));
        b.assistant("", &[("c1", "read", json!({ "path": "x.md" }))]);
        b.result("c1", "read", &tokens(400));
        b.assistant("", &[("c2", "read", json!({ "path": "y.md" }))]);
        b.result("c2", "read", &tokens(400));
        b.assistant(&tokens(10), &[]);
        branches.push(b.entries);

        let mut b = Branch::default();
        b.user(&tokens(100));
        b.assistant(&tokens(100), &[]);
        let kept = b.user(&tokens(100));
        b.assistant("", &[("c1", "read", json!({ "path": "new.txt" }))]);
        b.result("c1", "read", "text");
        b.compaction(
            "S1",
            &kept,
            json!({ "readFiles": ["old.txt", "new.txt"], "modifiedFiles": ["m.txt"] }),
        );
        b.user(&tokens(100));
        b.assistant_with_usage(&tokens(100), 5000);
        b.assistant(
            "",
            &[("c2", "write", json!({ "path": "m.txt", "content": "x" }))],
        );
        b.result("c2", "write", "ok");
        b.user(&tokens(7));
        branches.push(b.entries.clone());
        let mut hooked = b.entries.clone();
        hooked[5]["fromHook"] = true.into();
        branches.push(hooked);
        let mut gone = b.entries.clone();
        gone[5]["firstKeptEntryId"] = "gone".into();
        branches.push(gone);
        // A second compaction on top of the first.
        let kept2 = b.entries[8]["id"].as_str().unwrap().to_owned();
        b.compaction(
            "S2",
            &kept2,
            json!({ "readFiles": ["new.txt"], "modifiedFiles": ["m.txt"] }),
        );
        b.user(&tokens(30));
        b.assistant(&tokens(30), &[]);
        branches.push(b.entries);

        let mut b = Branch::default();
        b.branch_summary("Tried approach A; it failed.");
        b.other("label");
        b.user("fix it");
        b.assistant("", &[("c1", "bash", json!({ "command": "make" }))]);
        b.result("c1", "bash", &tokens(500));
        b.custom_message("Steer: prefer small diffs");
        b.assistant(&tokens(10), &[]);
        b.user(&tokens(50));
        b.custom_message("reminder");
        b.other("custom");
        b.assistant(&tokens(50), &[]);
        b.other("model_change");
        b.other("thinking_level_change");
        b.user(&tokens(50));
        b.assistant(&tokens(50), &[]);
        branches.push(b.entries);

        // Odd content: UTF-16 lengths, images, thinking, bash executions, custom-role messages,
        // numbers in arguments, a long tool result, a failed answer, an empty summary.
        let mut b = Branch::default();
        b.other("model_change");
        b.user("héllo 😀 世界 — ok");
        b.message(json!({ "role": "user", "content": [
            { "type": "text", "text": "look" },
            { "type": "image", "data": "AAAA", "mimeType": "image/png" },
        ]}));
        b.message(json!({ "role": "assistant", "content": [
            { "type": "thinking", "thinking": "Let me think 🤔" },
            { "type": "text", "text": "Reading." },
            { "type": "toolCall", "id": "c1", "name": "read", "arguments": { "path": "ü.txt", "offset": 2.0, "limit": 1.5, "deep": { "a": [1, null, "x\ny"] } } },
            { "type": "toolCall", "id": "c2", "name": "grep", "arguments": { "pattern": "\"q\"", "path": "src" } },
        ], "api": "a", "provider": "p", "model": "m", "stopReason": "toolUse",
           "usage": { "input": 100, "output": 20, "cacheRead": 5, "cacheWrite": 0, "totalTokens": 0 } }));
        b.message(json!({ "role": "toolResult", "toolCallId": "c1", "toolName": "read", "isError": false, "content": [
            { "type": "text", "text": format!("{}€", "y".repeat(2500)) },
            { "type": "image", "data": "AAAA", "mimeType": "image/png" },
        ]}));
        b.message(json!({ "role": "toolResult", "toolCallId": "c2", "toolName": "grep", "isError": true, "content": [] }));
        b.message(json!({ "role": "bashExecution", "command": "ls -la", "output": "a\nb", "exitCode": 1, "cancelled": false, "truncated": false }));
        b.message(json!({ "role": "bashExecution", "command": "secret", "output": "x", "exitCode": 0, "cancelled": false, "truncated": false, "excludeFromContext": true }));
        b.message(json!({ "role": "custom", "customType": "n", "content": [{ "type": "text", "text": "injected" }], "display": false }));
        b.message(json!({ "role": "assistant", "content": [{ "type": "text", "text": "partial" }], "api": "a", "provider": "p", "model": "m",
            "stopReason": "error", "errorMessage": "boom",
            "usage": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0 } }));
        b.branch_summary("");
        b.user(&tokens(20));
        b.assistant(&"ж".repeat(120), &[]);
        branches.push(b.entries);

        let mut b = Branch::default();
        b.other("model_change");
        b.user("hi");
        b.assistant("hello", &[]);
        branches.push(b.entries.clone());
        let kept = b.entries[1]["id"].as_str().unwrap().to_owned();
        b.compaction("S", &kept, json!({}));
        branches.push(b.entries);
        branches.push(Vec::new());
        branches
    }

    #[test]
    fn oracle_preparations_match_pis() {
        let keeps = [
            0, 1, 5, 20, 50, 100, 150, 220, 300, 355, 412, 600, 900, 20000,
        ];
        let mut cases = Vec::new();
        for branch in oracle_branches() {
            for keep in keeps {
                cases.push(json!({ "branch": branch, "settings": settings(keep).to_json() }));
            }
        }
        let pi = oracle(&json!({ "cases": cases }));
        let pi_cases = pi["cases"].as_array().unwrap();
        assert_eq!(pi_cases.len(), cases.len());
        let mut prepared = 0;
        for (case, expected) in cases.iter().zip(pi_cases) {
            let branch = case["branch"].as_array().unwrap();
            let keep = &case["settings"]["keepRecentTokens"];
            let settings = CompactionSettings {
                pi: PiVersion::V0_73,
                ..CompactionSettings::from_json(&case["settings"])
            };
            let ours = prepare(branch, &settings);
            let at = || format!("branch {} with keep {keep}", branch.len());
            let estimates: Vec<u64> = branch
                .iter()
                .filter(|e| e["type"] == "message")
                .map(|e| estimate_tokens(&e["message"]))
                .collect();
            assert_eq!(
                json!(estimates),
                expected["estimates"],
                "estimates, {}",
                at()
            );
            let Some(ours) = ours else {
                assert_eq!(expected["preparation"], Value::Null, "{}", at());
                continue;
            };
            prepared += 1;
            // Numbers as JavaScript holds them (2.0 is 2).
            let ours_json: Value = serde_json::from_str(&js_stringify(&ours.to_json())).unwrap();
            assert_eq!(ours_json, expected["preparation"], "{}", at());
            let serialized = serialize_conversation(&convert_to_llm(&ours.messages_to_summarize));
            assert_eq!(serialized, expected["serialized"], "{}", at());
            let prefix = serialize_conversation(&convert_to_llm(&ours.turn_prefix_messages));
            assert_eq!(prefix, expected["serializedPrefix"], "{}", at());
        }
        // The cases must reach the interesting paths, not only the refusals.
        assert!(prepared > cases.len() / 2);
        assert!(
            pi_cases
                .iter()
                .any(|c| c["preparation"]["isSplitTurn"] == true)
        );
        assert!(
            pi_cases
                .iter()
                .any(|c| c["preparation"]["previousSummary"].is_string())
        );
        assert!(pi_cases.iter().any(|c| {
            c["serialized"]
                .as_str()
                .is_some_and(|s| s.contains("more characters truncated"))
        }));
    }

    #[test]
    fn oracle_thresholds_and_overflow_match_pis() {
        let s = settings_0_73();
        let mut thresholds = Vec::new();
        for (tokens, window) in [
            (0, 0),
            (83_616, 100_000),
            (83_617, 100_000),
            (10, 1000),
            (200_000, 200_000),
        ] {
            for enabled in [true, false] {
                let settings = CompactionSettings { enabled, ..s };
                thresholds.push((tokens, window, settings));
            }
        }
        let errors = [
            "prompt is too long: 213462 tokens > 200000 maximum",
            "413 {\"error\":{\"type\":\"request_too_large\"}}",
            "Your input exceeds the context window of this model",
            "The input token count (1196265) exceeds the maximum number of tokens allowed",
            "This model's maximum prompt length is 131072 but the request contains 537812 tokens",
            "400 status code (no body)",
            "ThrottlingException: Too many tokens, please wait",
            "Throttling error: Too many tokens",
            "Rate limit reached: too many tokens",
            "prompt too long; exceeded max context length by 5 tokens",
            "CONTEXT_LENGTH_EXCEEDED",
            "overloaded",
            "",
        ];
        let mut overflow: Vec<(Value, u64)> = errors
            .iter()
            .map(|e| (answer("error", 0, Some(e)), 0))
            .collect();
        for (stop, input, output, window) in [
            ("stop", 100_001, 5, 100_000),
            ("stop", 100_000, 5, 100_000),
            ("stop", 100_001, 5, 0),
            ("length", 99_000, 0, 100_000),
            ("length", 98_999, 0, 100_000),
            ("length", 99_500, 1, 100_000),
        ] {
            let mut m = answer(stop, input, None);
            m["usage"]["output"] = output.into();
            overflow.push((m, window));
        }
        let pi = oracle(&json!({
            "thresholds": thresholds.iter().map(|(t, w, s)| json!({ "contextTokens": t, "contextWindow": w, "settings": s.to_json() })).collect::<Vec<_>>(),
            "overflow": overflow.iter().map(|(m, w)| json!({ "message": m, "contextWindow": w })).collect::<Vec<_>>(),
        }));
        let ours: Vec<bool> = thresholds
            .iter()
            .map(|(t, w, s)| should_compact(*t, *w, s))
            .collect();
        assert_eq!(json!(ours), pi["thresholds"]);
        let ours: Vec<bool> = overflow
            .iter()
            .map(|(m, w)| is_context_overflow(m, *w))
            .collect();
        assert_eq!(json!(ours), pi["overflow"]);
    }

    /// A summarisation request with the instruction texts (ours are worded apart from pi's)
    /// replaced by which instructions they are; everything else must match pi's exactly.
    fn normalise_request(body: &Value) -> Value {
        let mut body = body.clone();
        let messages = body["messages"].as_array_mut().unwrap();
        assert_eq!(messages.len(), 2, "system prompt and one user message");
        messages[0]["content"] = "<system prompt>".into();
        let text = match &messages[1]["content"] {
            Value::String(s) => s.clone(),
            other => other[0]["text"].as_str().unwrap().to_owned(),
        };
        let (conversation, rest) = text.split_once("</conversation>\n\n").unwrap();
        let (previous, rest) = match rest.split_once("</previous-summary>\n\n") {
            Some((p, r)) => (p.to_owned(), r),
            None => (String::new(), rest),
        };
        let (instructions, focus) = match rest.split_once("\n\nAdditional focus: ") {
            Some((i, f)) => (i, f),
            None => (rest, ""),
        };
        let kind = if instructions == SUMMARY_PROMPT
            || instructions.starts_with("The messages above are a conversation")
        {
            "initial"
        } else if instructions == UPDATE_SUMMARY_PROMPT
            || instructions.starts_with("The messages above are NEW")
        {
            "update"
        } else if instructions == TURN_PREFIX_PROMPT
            || instructions.starts_with("This is the PREFIX")
        {
            "turn prefix"
        } else {
            panic!("unknown instructions: {instructions}")
        };
        messages[1]["content"] = json!([conversation, previous, kind, focus]);
        body
    }

    /// pi's `compact()` and ours, each calling the mock server with the same script: the
    /// requests (up to the instruction wording) and the results must be the same.
    async fn compare_summaries(
        branch: Vec<Value>,
        keep: u64,
        custom_instructions: Option<&str>,
        reasoning: bool,
        thinking_level: &str,
    ) {
        use pichamber_model::OpenAiModel;
        use pichamber_model::mock_server;
        let script = Script {
            turns: vec![Turn::text("## Goal\nS"), Turn::text("## Goal\nS")],
        };
        let config = |base_url: String| {
            let mut c = pichamber_model::OpenAiConfig::new("mock", "mock-model", &base_url);
            c.api_key = Some("k".into());
            c.reasoning = reasoning;
            c
        };
        let settings = settings(keep);

        let pi_server = mock_server::start(script.clone()).await.unwrap();
        let request = json!({ "compact": {
            "branch": branch, "settings": settings.to_json(),
            "model": config(pi_server.base_url()).info(), "apiKey": "k",
            "customInstructions": custom_instructions, "thinkingLevel": thinking_level,
        }});
        let pi = tokio::task::spawn_blocking(move || oracle(&request))
            .await
            .unwrap();
        let pi_result = &pi["compacted"]["result"];
        assert!(pi_result.is_object(), "pi's compact failed: {pi}");

        let our_server = mock_server::start(script).await.unwrap();
        let model = ModelClient::OpenAi(OpenAiModel::new(config(our_server.base_url())).unwrap());
        let prep = prepare(&branch, &settings).unwrap();
        let ours = summarize_with_thinking(
            &model,
            &prep,
            custom_instructions,
            thinking_level,
            not_cancelled(),
        )
        .await
        .unwrap();

        assert_eq!(&ours.to_json(), pi_result);
        // pi sends a split turn's two requests at once: compare them in any order.
        let sorted = |server: &mock_server::MockServer| {
            let mut bodies: Vec<Value> = server.requests().iter().map(normalise_request).collect();
            bodies.sort_by_key(|b| b.to_string());
            bodies
        };
        assert_eq!(sorted(&our_server), sorted(&pi_server));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn oracle_summary_requests_match_pis() {
        let branches = oracle_branches();
        // An update of the previous summary with a custom focus, from a reasoning model.
        compare_summaries(
            branches[2].clone(),
            150,
            Some("the file layout"),
            true,
            "high",
        )
        .await;
        // A split turn: history and turn prefix.
        compare_summaries(branches[1].clone(), 412, None, false, "off").await;
        // Odd content (truncation, images, bash executions, custom messages) in one turn.
        compare_summaries(branches[7].clone(), 20, None, true, "off").await;
    }
}
