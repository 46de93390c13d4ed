//! Branch summaries for tree navigation as pi 0.73.1 writes them
//! (core/compaction/branch-summarization.js): when `/tree` leaves a branch, the entries
//! between the old leaf and the common ancestor with the target are summarised by the
//! session's model, so that what was tried there is not lost from the context.
//!
//! The pieces compaction has too (serialising the conversation, token estimates, file
//! tracking, the summarisation request) come from [`super::compaction`]; what is particular to
//! branches is which entries are taken, the token budget walked from the newest entry back, the
//! prompt, and the preamble put before the model's answer.

use anyhow::anyhow;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::compaction::{
    self, FileOps, custom_message, estimate_tokens, js_truthy, message_from, set_add,
    summary_context,
};
use super::messages::convert_to_llm;
use super::store::SessionStore;
use pichamber_model::{LlmContext, ModelClient, StreamOptions};
use pichamber_pi::PiVersion;

/// pi's `branchSummary.reserveTokens` default: room kept free of the context window for the
/// prompt and the answer.
pub const DEFAULT_RESERVE_TOKENS: u64 = 16384;
/// pi's error when a summary is wanted and the session has no model.
pub const NO_MODEL: &str = "No model available for summarization";
/// The summary pi writes when nothing on the branch becomes a message.
pub const NO_CONTENT: &str = "No content to summarize";
/// pi's error when a failed call gives no message of its own.
const FAILED: &str = "Summarization failed";
/// The window assumed for a model that names none (pi's `contextWindow || 128000`).
const DEFAULT_CONTEXT_WINDOW: u64 = 128_000;
/// pi caps every branch summary at this many tokens.
const MAX_SUMMARY_TOKENS: u64 = 2048;
/// Put before the model's answer so the summary reads as such in the context later.
const PREAMBLE: &str = "The user explored a different conversation branch before returning here.\nSummary of that exploration:\n\n";

/// Asks for the structured summary of the branch being left.
const BRANCH_SUMMARY_PROMPT: &str = "\
Summarise this branch of the conversation in a structured form, so that its context is at \
hand if the user comes back to it later.

Follow this format EXACTLY:

## Goal
[What the user set out to do on this branch]

## Constraints & Preferences
- [Requirements, limits or preferences the user stated]
- [Or \"(none)\" if there were none]

## Progress
### Done
- [x] [Finished tasks and changes]

### In Progress
- [ ] [Work begun but not finished]

### Blocked
- [Whatever stopped progress, if anything]

## Key Decisions
- **[Decision]**: [Short reason]

## Next Steps
1. [What should happen next to carry this work on]

Keep every section short. Keep file paths, function names and error messages word for word.";

/// What leaving the old leaf for the target abandons (pi's `CollectEntriesResult`).
#[derive(Debug, Clone, PartialEq)]
pub struct CollectedEntries {
    /// From just below the common ancestor to the old leaf, oldest first.
    pub entries: Vec<Value>,
    /// The deepest entry on both paths; `None` when the paths share nothing.
    pub common_ancestor_id: Option<String>,
}

/// pi's `collectEntriesForBranchSummary`: the entries from `old_leaf_id` back to (not
/// including) the deepest entry it shares with the path to `target_id`. Compactions on the way
/// are taken too: their summaries are context.
pub fn collect_entries(
    store: &SessionStore,
    old_leaf_id: Option<&str>,
    target_id: &str,
) -> CollectedEntries {
    let Some(old_leaf_id) = old_leaf_id.filter(|id| !id.is_empty()) else {
        return CollectedEntries {
            entries: Vec::new(),
            common_ancestor_id: None,
        };
    };
    let old_path: std::collections::HashSet<&str> = store
        .get_branch(Some(old_leaf_id))
        .iter()
        .filter_map(|e| e["id"].as_str())
        .collect();
    let common_ancestor_id = store
        .get_branch(Some(target_id))
        .iter()
        .rev()
        .filter_map(|e| e["id"].as_str())
        .find(|id| old_path.contains(id))
        .map(str::to_owned);
    let mut entries = Vec::new();
    let mut current = Some(old_leaf_id.to_owned());
    // A parent cycle in a damaged file must not loop forever.
    while let Some(id) = current.filter(|id| Some(id) != common_ancestor_id.as_ref())
        && entries.len() <= store.get_entries().len()
    {
        let Some(entry) = store.get_entry(&id) else {
            break;
        };
        current = entry["parentId"]
            .as_str()
            .filter(|p| !p.is_empty())
            .map(str::to_owned);
        entries.push(entry.clone());
    }
    entries.reverse();
    CollectedEntries {
        entries,
        common_ancestor_id,
    }
}

/// The branch as it goes to the model (pi's `BranchPreparation`).
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedBranch {
    /// The newest messages that fit the budget, oldest first.
    pub messages: Vec<Value>,
    /// Files touched on the whole branch, including those earlier branch summaries recorded.
    pub file_ops: FileOps,
    pub total_tokens: u64,
}

/// The message an entry contributes (pi's `getMessageFromEntry` of branch summarisation):
/// tool results are left out (the calls carry their context) and compactions count as their
/// summary.
fn message_from_entry(entry: &Value) -> Option<Value> {
    match entry["type"].as_str()? {
        "message" => entry
            .get("message")
            .filter(|m| m.is_object() && m["role"] != "toolResult")
            .cloned(),
        "custom_message" => Some(custom_message(entry)),
        "branch_summary" => Some(compaction::branch_summary_message(entry)),
        "compaction" => Some(message_from(
            "compactionSummary",
            entry,
            &["summary", "tokensBefore"],
        )),
        _ => None,
    }
}

/// pi's `prepareBranchEntries`: walks from the newest entry back and keeps messages while they
/// fit `token_budget` (0: no limit); a summary that does not fit is still kept while less than
/// 90% of the budget is used, since it stands for a lot of history. File operations are
/// gathered from every entry, fitting or not, and from the details of earlier pi-made branch
/// summaries.
pub fn prepare_branch_entries(entries: &[Value], token_budget: u64) -> PreparedBranch {
    let mut file_ops = FileOps::default();
    for entry in entries {
        let details = &entry["details"];
        if entry["type"] != "branch_summary" || js_truthy(&entry["fromHook"]) || !js_truthy(details)
        {
            continue;
        }
        for file in details["readFiles"].as_array().into_iter().flatten() {
            if let Some(file) = file.as_str() {
                set_add(&mut file_ops.read, file);
            }
        }
        for file in details["modifiedFiles"].as_array().into_iter().flatten() {
            if let Some(file) = file.as_str() {
                set_add(&mut file_ops.edited, file);
            }
        }
    }
    let mut kept = Vec::new();
    let mut total_tokens = 0;
    for entry in entries.iter().rev() {
        let Some(message) = message_from_entry(entry) else {
            continue;
        };
        file_ops.add_from_message(&message);
        let tokens = estimate_tokens(&message);
        if token_budget > 0 && total_tokens + tokens > token_budget {
            let is_summary = matches!(
                entry["type"].as_str(),
                Some("compaction" | "branch_summary")
            );
            if is_summary && (total_tokens as f64) < token_budget as f64 * 0.9 {
                kept.push(message);
                total_tokens += tokens;
            }
            break;
        }
        kept.push(message);
        total_tokens += tokens;
    }
    kept.reverse();
    PreparedBranch {
        messages: kept,
        file_ops,
        total_tokens,
    }
}

/// How a branch is summarised (pi's `GenerateBranchSummaryOptions` less the model and auth).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchSummaryOptions {
    /// A focus added to the prompt, or with `replace_instructions` the whole prompt.
    pub custom_instructions: Option<String>,
    pub replace_instructions: bool,
    /// The budget for the branch is the model's context window minus this.
    pub reserve_tokens: u64,
    /// Whose request shape the summary call has (the session's pi version).
    pub pi: PiVersion,
}

impl Default for BranchSummaryOptions {
    fn default() -> Self {
        BranchSummaryOptions {
            custom_instructions: None,
            replace_instructions: false,
            reserve_tokens: DEFAULT_RESERVE_TOKENS,
            pi: PiVersion::default(),
        }
    }
}

/// A summary ready for a `branch_summary` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BranchSummary {
    pub summary: String,
    /// Files only read on the branch, sorted.
    pub read_files: Vec<String>,
    /// Files written or edited on the branch, sorted.
    pub modified_files: Vec<String>,
}

impl BranchSummary {
    /// The entry's `details`: the file lists a later branch summary carries forward.
    pub fn details(&self) -> Value {
        json!({ "readFiles": self.read_files, "modifiedFiles": self.modified_files })
    }
}

/// The summarisation was cancelled (pi's `{ aborted: true }`): navigation is called off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Aborted;

impl std::fmt::Display for Aborted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Branch summarization aborted")
    }
}

impl std::error::Error for Aborted {}

/// The request that summarises a prepared branch: the serialised conversation in
/// `<conversation>` tags, then the instructions (the branch prompt, the prompt plus an
/// "Additional focus", or, when replacing, the custom instructions alone).
pub fn summary_request(
    messages: &[Value],
    custom_instructions: Option<&str>,
    replace_instructions: bool,
) -> LlmContext {
    let instructions = match custom_instructions.filter(|s| !s.is_empty()) {
        Some(custom) if replace_instructions => custom.to_owned(),
        Some(custom) => format!("{BRANCH_SUMMARY_PROMPT}\n\nAdditional focus: {custom}"),
        None => BRANCH_SUMMARY_PROMPT.to_owned(),
    };
    let conversation = compaction::serialize_conversation(&convert_to_llm(messages));
    summary_context(format!(
        "<conversation>\n{conversation}\n</conversation>\n\n{instructions}"
    ))
}

/// pi's `generateBranchSummary`: summarises `entries` (oldest first, as
/// [`collect_entries`] gives them) with `model`, newest first within the model's context
/// window less `reserve_tokens`, and appends the files the branch read and modified. With no
/// message to summarise there is no call and the summary is [`NO_CONTENT`]. A cancel through
/// `cancel` is the error [`Aborted`]; a failed call is an error with the provider's message.
pub async fn summarize_branch(
    model: &ModelClient,
    entries: &[Value],
    options: BranchSummaryOptions,
    cancel: watch::Receiver<bool>,
) -> anyhow::Result<BranchSummary> {
    let window = model.info()["contextWindow"]
        .as_u64()
        .filter(|w| *w > 0)
        .unwrap_or(DEFAULT_CONTEXT_WINDOW);
    // A reserve larger than the window leaves no positive budget: pi then takes everything.
    let budget = window.saturating_sub(options.reserve_tokens);
    let prepared = prepare_branch_entries(entries, budget);
    if prepared.messages.is_empty() {
        return Ok(BranchSummary {
            summary: NO_CONTENT.to_owned(),
            read_files: Vec::new(),
            modified_files: Vec::new(),
        });
    }
    let context = summary_request(
        &prepared.messages,
        options.custom_instructions.as_deref(),
        options.replace_instructions,
    );
    let stream_options = StreamOptions {
        max_tokens: Some(MAX_SUMMARY_TOKENS),
        pi: options.pi,
        ..StreamOptions::default()
    };
    let payload = model.build_payload(&context, &stream_options);
    // Nobody watches a summary stream in; the events go nowhere.
    let (items, _) = mpsc::unbounded_channel();
    let answer = model
        .stream(payload, items, cancel, stream_options.pi)
        .await;
    match answer["stopReason"].as_str() {
        Some("aborted") => return Err(Aborted.into()),
        Some("error") => {
            let message = answer["errorMessage"].as_str().filter(|m| !m.is_empty());
            return Err(anyhow!("{}", message.unwrap_or(FAILED)));
        }
        _ => {}
    }
    let text: Vec<&str> = answer["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|b| b["type"] == "text")
        .filter_map(|b| b["text"].as_str())
        .collect();
    let (read_files, modified_files) = prepared.file_ops.file_lists();
    let summary = format!(
        "{PREAMBLE}{}{}",
        text.join("\n"),
        compaction::format_file_operations(&read_files, &modified_files)
    );
    Ok(BranchSummary {
        summary,
        read_files,
        modified_files,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pichamber_model::scripted::{Script, ScriptStopReason, Turn};
    use pichamber_model::{OpenAiConfig, ScriptedModel};

    fn user(text: &str) -> Value {
        json!({ "role": "user", "content": [{ "type": "text", "text": text }], "timestamp": 1 })
    }

    fn assistant(text: &str, calls: &[(&str, Value)]) -> Value {
        let mut content = vec![json!({ "type": "text", "text": text })];
        for (i, (name, arguments)) in calls.iter().enumerate() {
            content.push(json!({
                "type": "toolCall", "id": format!("c{i}"), "name": name, "arguments": arguments,
            }));
        }
        json!({
            "role": "assistant", "content": content, "api": "openai-completions",
            "provider": "p", "model": "m", "stopReason": "stop", "timestamp": 2,
            "usage": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0 },
        })
    }

    fn tool_result(text: &str) -> Value {
        json!({
            "role": "toolResult", "toolCallId": "c0", "toolName": "read",
            "content": [{ "type": "text", "text": text }], "isError": false, "timestamp": 3,
        })
    }

    fn append(store: &mut SessionStore, message: Value) -> String {
        let entry = store.append_message(message).unwrap();
        entry["id"].as_str().unwrap().to_owned()
    }

    fn ids(entries: &[Value]) -> Vec<String> {
        entries
            .iter()
            .map(|e| e["id"].as_str().unwrap().to_owned())
            .collect()
    }

    fn scripted(turns: Vec<Turn>) -> (ScriptedModel, ModelClient) {
        let model = ScriptedModel::new(Script { turns });
        (model.clone(), ModelClient::Scripted(model))
    }

    fn not_cancelled() -> watch::Receiver<bool> {
        // The sender goes: the receiver keeps reading false.
        watch::channel(false).1
    }

    /// The text of the summarisation request's user message.
    fn prompt_of(payload: &Value) -> String {
        let content = &payload["messages"][1]["content"];
        match content {
            Value::String(s) => s.clone(),
            other => other[0]["text"].as_str().unwrap().to_owned(),
        }
    }

    #[test]
    fn collects_the_entries_back_to_the_common_ancestor() {
        let mut store = SessionStore::in_memory("/w");
        let u1 = append(&mut store, user("one"));
        let a1 = append(&mut store, assistant("ok", &[]));
        let u2 = append(&mut store, user("two"));
        let a2 = append(&mut store, assistant("ok", &[]));
        store.branch(&a1).unwrap();
        let u3 = append(&mut store, user("three"));
        let a3 = append(&mut store, assistant("ok", &[]));

        let c = collect_entries(&store, Some(&a2), &a3);
        assert_eq!(ids(&c.entries), [u2.clone(), a2.clone()]);
        assert_eq!(c.common_ancestor_id.as_deref(), Some(a1.as_str()));
        let c = collect_entries(&store, Some(&a3), &u2);
        assert_eq!(ids(&c.entries), [u3.clone(), a3.clone()]);
        // Back up the same path: everything below the target goes.
        let c = collect_entries(&store, Some(&a2), &u1);
        assert_eq!(ids(&c.entries), [a1.clone(), u2.clone(), a2.clone()]);
        assert_eq!(c.common_ancestor_id.as_deref(), Some(u1.as_str()));
        // Down the same path: nothing is left behind.
        let c = collect_entries(&store, Some(&a1), &a2);
        assert!(c.entries.is_empty());
        assert_eq!(c.common_ancestor_id.as_deref(), Some(a1.as_str()));
        // No old position: nothing to summarise.
        let c = collect_entries(&store, None, &a2);
        assert_eq!(
            c,
            CollectedEntries {
                entries: vec![],
                common_ancestor_id: None
            }
        );
        // A second root shares nothing with the first tree.
        store.reset_leaf();
        let r = append(&mut store, user("elsewhere"));
        let c = collect_entries(&store, Some(&a3), &r);
        assert_eq!(ids(&c.entries), [u1, a1, u3, a3]);
        assert_eq!(c.common_ancestor_id, None);
    }

    #[test]
    fn preparation_skips_tool_results_and_tracks_files() {
        let entries = vec![
            json!({ "type": "branch_summary", "id": "b1", "summary": "earlier", "fromId": "x",
                    "timestamp": "2025-01-01T00:00:00.000Z",
                    "details": { "readFiles": ["old.md", "both.md"], "modifiedFiles": ["m.rs"] } }),
            json!({ "type": "branch_summary", "id": "b2", "summary": "hooked", "fromId": "x",
                    "timestamp": "2025-01-01T00:00:01.000Z", "fromHook": true,
                    "details": { "readFiles": ["hook.md"] } }),
            json!({ "type": "model_change", "id": "m1", "provider": "p", "modelId": "m" }),
            json!({ "type": "message", "id": "u1", "message": user("look") }),
            json!({ "type": "message", "id": "a1", "message": assistant("", &[
                ("read", json!({ "path": "both.md" })),
                ("write", json!({ "path": "both.md", "content": "x" })),
                ("edit", json!({ "path": "e.rs" })),
                ("bash", json!({ "command": "ls" })),
            ]) }),
            json!({ "type": "message", "id": "t1", "message": tool_result("contents") }),
            json!({ "type": "compaction", "id": "c1", "summary": "S", "firstKeptEntryId": "u1",
                    "tokensBefore": 10, "timestamp": "2025-01-01T00:00:02.000Z" }),
            json!({ "type": "custom_message", "id": "n1", "customType": "note", "content": "hi",
                    "display": true, "timestamp": "2025-01-01T00:00:03.000Z" }),
            json!({ "type": "label", "id": "l1", "targetId": "u1", "label": "x" }),
        ];
        let p = prepare_branch_entries(&entries, 0);
        let roles: Vec<&str> = p
            .messages
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            [
                "branchSummary",
                "branchSummary",
                "user",
                "assistant",
                "compactionSummary",
                "custom"
            ]
        );
        assert_eq!(p.messages[4]["tokensBefore"], 10);
        assert_eq!(p.messages[5]["timestamp"], 1_735_689_603_000_i64);
        assert_eq!(
            p.total_tokens,
            p.messages.iter().map(estimate_tokens).sum::<u64>()
        );
        // Earlier pi summaries carry their files forward; an extension's do not.
        let (read, modified) = p.file_ops.file_lists();
        assert_eq!(read, ["old.md"]);
        assert_eq!(modified, ["both.md", "e.rs", "m.rs"]);
    }

    #[test]
    fn the_budget_keeps_the_newest_messages_and_summaries_under_ninety_percent() {
        let long = "x".repeat(400); // 100 tokens
        let entries = vec![
            json!({ "type": "message", "id": "a0", "message": assistant("", &[("read", json!({ "path": "early.md" }))]) }),
            json!({ "type": "message", "id": "u1", "message": user(&long) }),
            json!({ "type": "message", "id": "u2", "message": user(&long) }),
            json!({ "type": "message", "id": "u3", "message": user(&long) }),
        ];
        let p = prepare_branch_entries(&entries, 250);
        assert_eq!(p.messages, [user(&long), user(&long)]);
        assert_eq!(p.total_tokens, 200);
        // Files are tracked only for what the walk reached.
        assert!(p.file_ops.read.is_empty());

        let summary = |id: &str| {
            json!({ "type": "branch_summary", "id": id, "summary": long, "fromId": "x",
                    "timestamp": "2025-01-01T00:00:00.000Z" })
        };
        // 200 of 250 used is under 90%: the summary still goes in, past the budget.
        let entries = vec![summary("s1"), entries[2].clone(), entries[3].clone()];
        let p = prepare_branch_entries(&entries, 250);
        assert_eq!(p.messages.len(), 3);
        assert_eq!(p.total_tokens, 300);
        // 200 of 220 is not: it stays out.
        let p = prepare_branch_entries(&entries, 220);
        assert_eq!(p.messages.len(), 2);
        // A plain message never goes past the budget.
        let p = prepare_branch_entries(&entries, 150);
        assert_eq!(p.messages.len(), 1);
    }

    fn branch() -> Vec<Value> {
        vec![
            json!({ "type": "message", "id": "u1", "message": user("Try the parser") }),
            json!({ "type": "message", "id": "a1", "message": assistant("Reading it.", &[("read", json!({ "path": "src/parse.rs" }))]) }),
            json!({ "type": "message", "id": "t1", "message": tool_result("fn parse() {}") }),
            json!({ "type": "message", "id": "a2", "message": assistant("Fixed.", &[("edit", json!({ "path": "src/lib.rs" }))]) }),
        ]
    }

    #[tokio::test]
    async fn summarises_with_the_model_and_appends_the_files() {
        let (scripted, model) = scripted(vec![Turn::text("## Goal\nParse")]);
        let summary = summarize_branch(
            &model,
            &branch(),
            BranchSummaryOptions::default(),
            not_cancelled(),
        )
        .await
        .unwrap();
        assert_eq!(
            summary.summary,
            "The user explored a different conversation branch before returning here.\n\
             Summary of that exploration:\n\n## Goal\nParse\n\n\
             <read-files>\nsrc/parse.rs\n</read-files>\n\n<modified-files>\nsrc/lib.rs\n</modified-files>"
        );
        assert_eq!(
            summary.details(),
            json!({ "readFiles": ["src/parse.rs"], "modifiedFiles": ["src/lib.rs"] })
        );
        let payloads = scripted.payloads();
        assert_eq!(payloads.len(), 1);
        let payload = &payloads[0];
        assert_eq!(payload["max_completion_tokens"], 2048);
        assert_eq!(
            payload["messages"][0]["content"],
            compaction::SUMMARIZATION_SYSTEM_PROMPT
        );
        assert_eq!(payload["tools"], Value::Null, "no tools are offered");
        let prompt = prompt_of(payload);
        assert_eq!(
            prompt,
            format!(
                "<conversation>\n[User]: Try the parser\n\n[Assistant]: Reading it.\n\n\
                 [Assistant tool calls]: read(path=\"src/parse.rs\")\n\n[Assistant]: Fixed.\n\n\
                 [Assistant tool calls]: edit(path=\"src/lib.rs\")\n</conversation>\n\n\
                 {BRANCH_SUMMARY_PROMPT}"
            ),
            "tool results stay out of the conversation"
        );
    }

    #[tokio::test]
    async fn custom_instructions_add_a_focus_or_replace_the_prompt() {
        let (scripted, model) = scripted(vec![Turn::text("a"), Turn::text("b"), Turn::text("c")]);
        let focus = |text: &str, replace| BranchSummaryOptions {
            custom_instructions: Some(text.to_owned()),
            replace_instructions: replace,
            ..BranchSummaryOptions::default()
        };
        for options in [
            focus("the parser", false),
            focus("Only list files.", true),
            focus("", true),
        ] {
            summarize_branch(&model, &branch(), options, not_cancelled())
                .await
                .unwrap();
        }
        let prompts: Vec<String> = scripted.payloads().iter().map(prompt_of).collect();
        let instructions: Vec<&str> = prompts
            .iter()
            .map(|p| p.split_once("</conversation>\n\n").unwrap().1)
            .collect();
        assert_eq!(
            instructions,
            [
                format!("{BRANCH_SUMMARY_PROMPT}\n\nAdditional focus: the parser"),
                "Only list files.".to_owned(),
                // Empty instructions replace nothing.
                BRANCH_SUMMARY_PROMPT.to_owned(),
            ]
        );
    }

    #[tokio::test]
    async fn nothing_to_summarise_makes_no_call() {
        let (scripted, model) = scripted(vec![]);
        let only_results =
            vec![json!({ "type": "message", "id": "t1", "message": tool_result("x") })];
        for entries in [vec![], only_results] {
            let summary = summarize_branch(
                &model,
                &entries,
                BranchSummaryOptions::default(),
                not_cancelled(),
            )
            .await
            .unwrap();
            assert_eq!(summary.summary, NO_CONTENT);
            assert_eq!(
                summary.details(),
                json!({ "readFiles": [], "modifiedFiles": [] })
            );
        }
        assert!(scripted.payloads().is_empty());
    }

    #[tokio::test]
    async fn the_budget_is_the_context_window_less_the_reserve() {
        let mut config = OpenAiConfig::new("p", "small", "http://localhost:0");
        config.context_window = 1000;
        let model = ScriptedModel::with_config(
            Script {
                turns: vec![Turn::text("a"), Turn::text("b")],
            },
            config,
        );
        let client = ModelClient::Scripted(model.clone());
        let entries: Vec<Value> = ["first", "second"]
            .iter()
            .enumerate()
            .map(|(i, t)| json!({ "type": "message", "id": format!("u{i}"), "message": user(&format!("{t} {}", "y".repeat(1600))) }))
            .collect();
        // 1000 - 500 leaves room for one 402-token message.
        let options = BranchSummaryOptions {
            reserve_tokens: 500,
            ..BranchSummaryOptions::default()
        };
        summarize_branch(&client, &entries, options, not_cancelled())
            .await
            .unwrap();
        // A reserve beyond the window means no limit.
        let options = BranchSummaryOptions {
            reserve_tokens: 5000,
            ..BranchSummaryOptions::default()
        };
        summarize_branch(&client, &entries, options, not_cancelled())
            .await
            .unwrap();
        let prompts: Vec<String> = model.payloads().iter().map(prompt_of).collect();
        assert!(!prompts[0].contains("first") && prompts[0].contains("second"));
        assert!(prompts[1].contains("first") && prompts[1].contains("second"));
    }

    #[tokio::test]
    async fn failures_and_cancels_are_errors() {
        let failing = Turn {
            stop_reason: Some(ScriptStopReason::Error),
            error_message: Some("overloaded".into()),
            ..Turn::default()
        };
        let (_, model) = scripted(vec![failing]);
        let e = summarize_branch(
            &model,
            &branch(),
            BranchSummaryOptions::default(),
            not_cancelled(),
        )
        .await
        .unwrap_err();
        assert_eq!(e.to_string(), "overloaded");
        assert!(!e.is::<Aborted>());

        let (_, model) = scripted(vec![Turn::text("never")]);
        let (cancel, receiver) = watch::channel(true);
        let e = summarize_branch(&model, &branch(), BranchSummaryOptions::default(), receiver)
            .await
            .unwrap_err();
        assert!(e.is::<Aborted>(), "{e}");
        drop(cancel);
    }

    // -----------------------------------------------------------------------------------------
    // Real pi as the oracle (tests/oracle/branch-summary.mjs)

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
            .arg("branch-summary.mjs")
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
            "branch-summary.mjs failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("oracle output is JSON")
    }

    fn words(n: usize) -> String {
        (0..n)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A session file with four leaves: two branches off the trunk (one through an earlier pi
    /// summary and a compaction), one through an extension's summary, and a second root.
    /// Returns the file and the leaves, trunk entries and a mid-branch entry by name.
    fn oracle_tree(dir: &std::path::Path) -> (std::path::PathBuf, Vec<(&'static str, String)>) {
        use super::super::store::SyncPolicy;
        let mut s = SessionStore::create(dir, "/w", SyncPolicy::None).unwrap();
        let mut named = Vec::new();
        let u1 = append(&mut s, user("Start the parser work"));
        let a1 = append(
            &mut s,
            assistant("Reading.", &[("read", json!({ "path": "README.md" }))]),
        );
        append(&mut s, tool_result(&words(300)));
        let trunk = append(&mut s, assistant(&words(40), &[]));
        // Branch A.
        let u2 = append(&mut s, user(&format!("Try approach A: {}", words(60))));
        append(
            &mut s,
            assistant(
                "",
                &[
                    ("write", json!({ "path": "a.rs", "content": "x" })),
                    (
                        "edit",
                        json!({ "path": "b.rs", "oldText": "1", "newText": "2" }),
                    ),
                    ("read", json!({ "path": "a.rs" })),
                ],
            ),
        );
        append(&mut s, tool_result("ok"));
        s.append_custom_message_entry("note", json!("Steer: smaller diffs"), true, None)
            .unwrap();
        s.append_model_change("p", "m2").unwrap();
        let leaf_a = append(&mut s, assistant(&format!("A done. {}", words(30)), &[]));
        // Branch B, through an earlier pi summary and a compaction.
        s.branch_with_summary(
            Some(&trunk),
            &format!("Tried B before. {}", words(80)),
            Some(json!({ "readFiles": ["x.md", "a.rs"], "modifiedFiles": ["y.rs"] })),
            Some(false),
        )
        .unwrap();
        let u3 = append(&mut s, user(&format!("Try B: {}", words(120))));
        append(
            &mut s,
            assistant("", &[("read", json!({ "path": "c.md" }))]),
        );
        append(&mut s, tool_result(&words(50)));
        s.append_compaction(&format!("Compacted. {}", words(70)), &u3, 900, None, None)
            .unwrap();
        append(&mut s, user("Carry on"));
        let leaf_b = append(&mut s, assistant(&words(20), &[]));
        // Branch C, through an extension's summary (its files are not carried forward).
        s.branch_with_summary(
            Some(&u1),
            "From a hook",
            Some(json!({ "readFiles": ["hook.md"] })),
            Some(true),
        )
        .unwrap();
        let u5 = append(&mut s, user("Hooked branch"));
        s.append_label_change(&u5, Some("mark")).unwrap();
        s.append_custom_entry("state", Some(json!({ "n": 1 })))
            .unwrap();
        s.append_thinking_level_change("high").unwrap();
        let leaf_c = append(
            &mut s,
            assistant("C", &[("edit", json!({ "path": "hook.md" }))]),
        );
        // A second root.
        s.reset_leaf();
        append(&mut s, user("Elsewhere"));
        let leaf_d = append(&mut s, assistant("D", &[]));
        for (name, id) in [
            ("u1", u1),
            ("a1", a1),
            ("trunk", trunk),
            ("u2", u2),
            ("A", leaf_a),
            ("B", leaf_b),
            ("C", leaf_c),
            ("D", leaf_d),
        ] {
            named.push((name, id));
        }
        (s.get_session_file().unwrap().to_path_buf(), named)
    }

    const ORACLE_MOVES: [(&str, &str); 11] = [
        ("A", "B"),
        ("B", "A"),
        ("A", "a1"),
        ("B", "u1"),
        ("B", "C"),
        ("C", "A"),
        ("D", "A"),
        ("A", "D"),
        ("trunk", "A"),
        ("A", "A"),
        ("-", "A"),
    ];

    #[test]
    fn oracle_collection_and_preparation_match_pis() {
        let dir = tempfile::tempdir().unwrap();
        let (file, named) = oracle_tree(dir.path());
        let id = |name: &str| {
            named
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, id)| id.clone())
        };
        // Fine steps, so that some budget falls between every pair of thresholds.
        let budgets: Vec<u64> = [0, 100_000]
            .into_iter()
            .chain((5..800).step_by(3))
            .collect();
        let cases: Vec<Value> = ORACLE_MOVES
            .iter()
            .map(|(from, to)| json!({ "oldLeafId": id(from), "targetId": id(to), "budgets": budgets }))
            .collect();
        let pi = oracle(&json!({ "file": file, "cases": cases }));
        let (store, _) = SessionStore::open(&file, super::super::store::SyncPolicy::None).unwrap();
        let mut kept_summary_over_budget = false;
        for ((from, to), expected) in ORACLE_MOVES.iter().zip(pi["cases"].as_array().unwrap()) {
            let at = format!("{from} -> {to}");
            let ours = collect_entries(&store, id(from).as_deref(), &id(to).unwrap());
            assert_eq!(json!(ours.entries), expected["entries"], "{at}");
            assert_eq!(
                json!(ours.common_ancestor_id),
                expected["commonAncestorId"],
                "{at}"
            );
            for (budget, expected) in budgets.iter().zip(expected["prepared"].as_array().unwrap()) {
                let p = prepare_branch_entries(&ours.entries, *budget);
                let ours = json!({
                    "messages": p.messages, "fileOps": p.file_ops.to_json(),
                    "totalTokens": p.total_tokens,
                });
                assert_eq!(&ours, expected, "{at}, budget {budget}");
                kept_summary_over_budget |= *budget > 0 && p.total_tokens > *budget;
            }
        }
        // The cases reach the interesting paths.
        assert!(kept_summary_over_budget, "a summary kept past the budget");
        let collected = |i: usize| pi["cases"][i]["entries"].as_array().unwrap().len();
        assert!(collected(0) > 5 && collected(1) > 5);
        assert_eq!(collected(9), 0);
        assert_eq!(collected(10), 0);
    }

    /// A summarisation request with the system prompt and the branch prompt (ours are worded
    /// apart from pi's) replaced by placeholders; everything else must match pi's exactly.
    fn normalise_request(body: &Value) -> Value {
        let mut body = body.clone();
        let text = prompt_of(&body);
        let messages = body["messages"].as_array_mut().unwrap();
        assert_eq!(messages.len(), 2, "system prompt and one user message");
        messages[0]["content"] = "<system prompt>".into();
        let (conversation, instructions) = text.split_once("</conversation>\n\n").unwrap();
        let (prompt, focus) = match instructions.split_once("\n\nAdditional focus: ") {
            Some((p, f)) => (p, f),
            None => (instructions, ""),
        };
        let prompt = if prompt == BRANCH_SUMMARY_PROMPT
            || prompt.starts_with("Create a structured summary of this conversation branch")
        {
            "<branch prompt>"
        } else {
            prompt
        };
        messages[1]["content"] = json!([conversation, prompt, focus]);
        body
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn oracle_summaries_match_pis() {
        use pichamber_model::{OpenAiModel, mock_server};
        let dir = tempfile::tempdir().unwrap();
        let (file, named) = oracle_tree(dir.path());
        let id = |name: &str| named.iter().find(|(n, _)| *n == name).unwrap().1.clone();
        // (from, to, custom instructions, replace, reserve, context window, reasoning)
        let summaries = [
            ("A", "B", None, None, None, 128_000, false),
            ("B", "A", Some("the parser"), None, None, 128_000, true),
            (
                "C",
                "D",
                Some("List the files only."),
                Some(true),
                None,
                128_000,
                false,
            ),
            ("B", "C", None, None, Some(1800), 2000, false),
            ("trunk", "A", None, None, None, 128_000, false),
        ];
        let script = Script {
            turns: vec![Turn::text("## Goal\nParse"); summaries.len()],
        };
        let config = |base_url: String, window: u64, reasoning: bool| {
            let mut c = OpenAiConfig::new("mock", "mock-model", &base_url);
            c.api_key = Some("k".into());
            c.context_window = window;
            c.reasoning = reasoning;
            c
        };

        let pi_server = mock_server::start(script.clone()).await.unwrap();
        let requests: Vec<Value> = summaries
            .iter()
            .map(|(from, to, custom, replace, reserve, window, reasoning)| {
                json!({
                    "oldLeafId": id(from), "targetId": id(to),
                    "model": config(pi_server.base_url(), *window, *reasoning).info(),
                    "apiKey": "k", "customInstructions": custom,
                    "replaceInstructions": replace, "reserveTokens": reserve,
                })
            })
            .collect();
        let request = json!({ "file": file, "summaries": requests });
        let pi = tokio::task::spawn_blocking(move || oracle(&request))
            .await
            .unwrap();

        let our_server = mock_server::start(script).await.unwrap();
        let (store, _) = SessionStore::open(&file, super::super::store::SyncPolicy::None).unwrap();
        for ((from, to, custom, replace, reserve, window, reasoning), expected) in
            summaries.iter().zip(pi["summaries"].as_array().unwrap())
        {
            let model = ModelClient::OpenAi(
                OpenAiModel::new(config(our_server.base_url(), *window, *reasoning)).unwrap(),
            );
            let entries = collect_entries(&store, Some(&id(from)), &id(to)).entries;
            let options = BranchSummaryOptions {
                custom_instructions: custom.map(str::to_owned),
                replace_instructions: replace.unwrap_or(false),
                reserve_tokens: reserve.unwrap_or(DEFAULT_RESERVE_TOKENS),
                // The oracle is pi 0.73.1's.
                pi: PiVersion::V0_73,
            };
            let ours = summarize_branch(&model, &entries, options, not_cancelled())
                .await
                .unwrap();
            let ours = json!({
                "summary": ours.summary, "readFiles": ours.read_files,
                "modifiedFiles": ours.modified_files,
            });
            assert_eq!(&ours, expected, "{from} -> {to}");
        }
        let ours: Vec<Value> = our_server
            .requests()
            .iter()
            .map(normalise_request)
            .collect();
        let theirs: Vec<Value> = pi_server.requests().iter().map(normalise_request).collect();
        // Moving down the branch leaves nothing behind: no call, pi's "No content" summary.
        assert_eq!(pi["summaries"][4]["summary"], NO_CONTENT);
        assert_eq!(ours.len(), summaries.len() - 1);
        assert_eq!(ours, theirs);
    }
}
