//! Session lifecycle through the library: new / resume / fork / clone / reload / tree
//! navigation / thinking level / user bash, with the events extensions see and what lands in
//! pi's session file.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};

use pichamber_artifact::Artifact;
use pichamber_model::{ModelClient, Script, ScriptedModel};
use pichamber_runtime::{InstanceOptions, Runtime};
use pichamber_session::store::{SessionStore, SyncPolicy};
use pichamber_session::{AgentSettings, ForkPosition, PromptOptions, Session, SessionConfig};
use serde_json::{Value, json};

/// Logs every lifecycle event it receives (as console lines the test reads back), counts
/// calls of /count in module state, and cancels or answers where its flags say so.
const LOGGER: &str = r#"
let count = 0;
export default function (pi) {
  const log = (e) => console.log(JSON.stringify(e));
  for (const name of ["session_start", "session_shutdown", "session_before_switch", "session_before_fork",
                      "session_tree", "thinking_level_select", "model_select"]) {
    pi.on(name, (e) => { log({ ...e }); if (process.env.CANCEL === name) return { cancel: true }; });
  }
  pi.on("session_before_tree", (e) => {
    log({ type: e.type, targetId: e.preparation.targetId, abandoned: e.preparation.entriesToSummarize.length });
    if (e.preparation.userWantsSummary) return { summary: { summary: "left a branch", details: { n: 1 } } };
  });
  pi.on("user_bash", (e) => {
    log({ type: e.type, command: e.command });
    if (e.command === "magic") return { result: { output: "from the extension", exitCode: 0, cancelled: false, truncated: false } };
  });
  pi.registerCommand("count", { handler: async () => { count += 1; log({ type: "count", count }); } });
  pi.registerCommand("fresh", { handler: async (_args, ctx) => { const r = await ctx.newSession(); log({ type: "fresh", r }); } });
  pi.registerCommand("again", { handler: async (_args, ctx) => { await ctx.reload(); } });
  pi.registerCommand("think", { handler: async () => { pi.setThinkingLevel("high"); pi.setSessionName("thoughtful"); } });
  pi.registerCommand("hop", { handler: async (args, ctx) => { await ctx.switchSession(args); } });
}
"#;

struct Harness {
    session: Session,
    events: Arc<Mutex<Vec<Value>>>,
    _dir: tempfile::TempDir,
}

fn artifact(dir: &Path, source: &str) -> Artifact {
    common::session::artifact(dir, "logger.ts", source)
}

/// A scripted model that reasons (so thinking levels other than "off" stick, as in pi).
fn scripted(turns: Value) -> ScriptedModel {
    let mut config =
        pichamber_model::OpenAiConfig::new("scripted", "scripted", "http://localhost:0");
    config.reasoning = true;
    ScriptedModel::with_config(
        Script::from_value(json!({ "turns": turns })).unwrap(),
        config,
    )
}

async fn harness(turns: Value, env: &[&str]) -> Harness {
    harness_with(LOGGER, scripted(turns), env).await
}

/// A session with `source` loaded as its one extension and `model` answering.
async fn harness_with(source: &str, model: ScriptedModel, env: &[&str]) -> Harness {
    // SAFETY: set before any thread reads the environment in this test process's runtime.
    unsafe { std::env::set_var("PICHAMBER_CACHE_DIR", common::cache_dir()) };
    let dir = tempfile::tempdir().unwrap();
    let (sink, events) = common::session::recording_sink();
    let sessions = dir.path().join("sessions");
    let store =
        SessionStore::create(&sessions, &dir.path().to_string_lossy(), SyncPolicy::None).unwrap();
    let mut options = InstanceOptions::default();
    let grants = pichamber_access::Grants {
        env: env.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    };
    options.grants = Arc::new(grants);
    let mut session = Session::new(
        Runtime::global().unwrap(),
        SessionConfig {
            instance: options,
            model: Some(Arc::new(ModelClient::Scripted(model))),
            agent: AgentSettings {
                builtin_tools: true,
                ..Default::default()
            },
            store: Some(store),
            ..common::session::config(dir.path(), sink)
        },
    );
    session.load(&artifact(dir.path(), source)).await.unwrap();
    session.start().await;
    Harness {
        session,
        events,
        _dir: dir,
    }
}

impl Harness {
    fn take(&self) -> Vec<Value> {
        std::mem::take(&mut *self.events.lock().unwrap())
    }
    fn types(events: &[Value]) -> Vec<String> {
        events
            .iter()
            .filter(|e| {
                e["type"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("session_") || t == "count")
            })
            .map(|e| match e["reason"].as_str() {
                Some(r) => format!("{}:{r}", e["type"].as_str().unwrap()),
                None => e["type"].as_str().unwrap().to_owned(),
            })
            .collect()
    }
    fn entries(&self) -> Vec<Value> {
        self.session
            .shared
            .state
            .lock()
            .unwrap()
            .store
            .get_entries()
            .to_vec()
    }
    fn file(&self) -> Option<std::path::PathBuf> {
        let state = self.session.shared.state.lock().unwrap();
        state.store.get_session_file().map(Path::to_path_buf)
    }
    async fn prompt(&mut self, text: &str) {
        self.session
            .prompt(text, PromptOptions::default())
            .await
            .unwrap();
    }
}

fn text_turn(text: &str) -> Value {
    json!({ "text": text })
}

#[tokio::test]
async fn new_session_reloads_extensions_with_fresh_state_in_a_new_file() {
    let mut h = harness(json!([]), &[]).await;
    h.session.run_command("/count").await.unwrap();
    h.session.run_command("/count").await.unwrap();
    let first_file = h.file().unwrap();
    h.take();
    assert!(!h.session.new_session().await.unwrap());
    h.session.run_command("/count").await.unwrap();
    let events = h.take();
    assert_eq!(
        Harness::types(&events),
        [
            "session_before_switch:new",
            "session_shutdown:new",
            "session_start:new",
            "count"
        ]
    );
    // Module state did not survive: the counter starts again.
    let count = events.iter().find(|e| e["type"] == "count").unwrap();
    assert_eq!(count["count"], 1);
    let start = events
        .iter()
        .find(|e| e["type"] == "session_start")
        .unwrap();
    assert_eq!(
        start["previousSessionFile"],
        json!(first_file.file_name().unwrap().to_string_lossy())
    );
    assert_ne!(h.file().unwrap(), first_file);
    // A new session records only its model and thinking level, as pi's does.
    let kinds: Vec<Value> = h.entries().iter().map(|e| e["type"].clone()).collect();
    assert_eq!(
        kinds,
        [json!("model_change"), json!("thinking_level_change")]
    );
}

/// Reports each session_start with the granted variable it sees, and counts /count in module
/// state.
const AHEAD: &str = r#"
let count = 0;
export default function (pi) {
  const log = (e) => console.log(JSON.stringify(e));
  pi.on("session_start", (e) => log({ type: "start", reason: e.reason, seen: process.env.PICHAMBER_TEST_AHEAD ?? null }));
  pi.registerCommand("count", { handler: async () => { count += 1; log({ type: "count", count }); } });
}
"#;

/// The owner loop's pause between commands, with a command already waiting.
async fn pause(session: &mut Session) {
    let (tx, mut queue) = tokio::sync::mpsc::unbounded_channel();
    tx.send(()).unwrap();
    let _ = session.idle(&mut queue).await;
}

/// With slots to spare (`rpc`), a session makes its next instances while it pauses: each new
/// session still starts from a fresh instance, and one made before the extension's grants
/// changed is not the one that starts.
#[tokio::test]
async fn instances_made_ahead_are_fresh_and_take_new_grants() {
    // SAFETY: a variable of this test alone, set before any instance reads it.
    unsafe { std::env::set_var("PICHAMBER_TEST_AHEAD", "granted") };
    let mut h = harness_with(AHEAD, scripted(json!([])), &[]).await;
    h.session.set_slots_to_spare(true);
    let seen = |events: &[Value], kind: &str| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e["type"] == kind)
            .map(|e| {
                if kind == "start" {
                    e["seen"].clone()
                } else {
                    e["count"].clone()
                }
            })
            .collect()
    };
    for round in 0..3 {
        h.session.run_command("/count").await.unwrap();
        h.session.run_command("/count").await.unwrap();
        h.take();
        assert!(!h.session.new_session().await.unwrap());
        pause(&mut h.session).await;
        h.session.run_command("/count").await.unwrap();
        let events = h.take();
        assert_eq!(
            seen(&events, "start"),
            [Value::Null],
            "round {round}: {events:?}"
        );
        assert_eq!(
            seen(&events, "count"),
            [json!(1)],
            "round {round}: {events:?}"
        );
    }
    // The next instance is made; then the user grants the variable.
    let hash = artifact(h._dir.path(), AHEAD).manifest.source_hash;
    let grants = pichamber_access::Grants {
        env: vec!["PICHAMBER_TEST_AHEAD".into()],
        ..Default::default()
    };
    h.session.regrant(&hash, Arc::new(grants)).await.unwrap();
    assert_eq!(
        seen(&h.take(), "start"),
        [json!("granted")],
        "the regranted instance"
    );
    assert!(!h.session.new_session().await.unwrap());
    assert_eq!(
        seen(&h.take(), "start"),
        [json!("granted")],
        "the next session's"
    );
}

#[tokio::test]
async fn an_extension_can_cancel_a_switch_and_a_fork() {
    let mut h = harness(json!([text_turn("one")]), &["CANCEL"]).await;
    // SAFETY: the extension reads CANCEL through its granted env at load; set before reload.
    unsafe { std::env::set_var("CANCEL", "session_before_switch") };
    h.session.reload().await;
    h.prompt("hello").await;
    let before = h.entries();
    assert!(h.session.new_session().await.unwrap(), "cancelled");
    assert_eq!(h.entries(), before, "the session stayed as it was");
    unsafe { std::env::set_var("CANCEL", "session_before_fork") };
    h.session.reload().await;
    let user = before
        .iter()
        .find(|e| e["message"]["role"] == "user")
        .unwrap();
    let outcome = h
        .session
        .fork(user["id"].as_str().unwrap(), ForkPosition::Before)
        .await
        .unwrap();
    assert!(outcome.cancelled);
    unsafe { std::env::remove_var("CANCEL") };
}

#[tokio::test]
async fn fork_before_a_user_message_keeps_what_came_before_and_returns_its_text() {
    let mut h = harness(
        json!([text_turn("first answer"), text_turn("second answer")]),
        &[],
    )
    .await;
    h.prompt("first question").await;
    h.prompt("second question").await;
    let entries = h.entries();
    let second = entries
        .iter()
        .find(|e| e["message"]["content"][0]["text"] == "second question")
        .unwrap();
    let original = h.file().unwrap();
    h.take();
    let outcome = h
        .session
        .fork(second["id"].as_str().unwrap(), ForkPosition::Before)
        .await
        .unwrap();
    assert_eq!(outcome.selected_text.as_deref(), Some("second question"));
    let kept: Vec<Value> = h
        .entries()
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"]["content"][0]["text"].clone())
        .collect();
    // The system message (pi 1.6.0's prompt and tools, no text block) came before the question.
    assert_eq!(
        kept,
        [Value::Null, json!("first question"), json!("first answer")]
    );
    assert_ne!(h.file().unwrap(), original);
    let header = SessionStore::open(h.file().unwrap(), SyncPolicy::None)
        .unwrap()
        .0
        .get_header()
        .clone();
    assert!(header["parentSession"].as_str().is_some(), "{header}");
    assert!(Harness::types(&h.take()).contains(&"session_start:fork".to_owned()));
    // The agent continues from the fork's context (the system message, the first exchange).
    let messages = h.session.shared.state.lock().unwrap().agent.messages.len();
    assert_eq!(messages, 3);
}

#[tokio::test]
async fn clone_copies_the_path_to_the_leaf() {
    let mut h = harness(json!([text_turn("answer")]), &[]).await;
    h.prompt("question").await;
    let before: Vec<Value> = h.entries().iter().map(|e| e["id"].clone()).collect();
    let original = h.file().unwrap();
    assert!(!h.session.clone_session().await.unwrap());
    let after: Vec<Value> = h.entries().iter().map(|e| e["id"].clone()).collect();
    assert_eq!(before, after);
    assert_ne!(h.file().unwrap(), original);
}

#[tokio::test]
async fn tree_navigation_moves_the_leaf_and_takes_an_extension_summary() {
    let mut h = harness(
        json!([text_turn("a1"), text_turn("a2"), text_turn("a3")]),
        &[],
    )
    .await;
    h.prompt("q1").await;
    h.prompt("q2").await;
    let entries = h.entries();
    let a1 = entries
        .iter()
        .find(|e| e["message"]["content"][0]["text"] == "a1")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    h.take();
    let outcome = h
        .session
        .navigate_tree(&a1, true, None, None, None)
        .await
        .unwrap();
    assert!(!outcome.cancelled);
    let summary = outcome.summary_entry.expect("summary entry");
    assert_eq!(summary["type"], "branch_summary");
    assert_eq!(summary["summary"], "left a branch");
    assert_eq!(summary["parentId"], json!(a1));
    let events = h.take();
    let before = events
        .iter()
        .find(|e| e["type"] == "session_before_tree")
        .unwrap();
    assert_eq!(before["abandoned"], 2, "q2 and a2 are left behind");
    let tree = events.iter().find(|e| e["type"] == "session_tree").unwrap();
    assert_eq!(tree["newLeafId"], summary["id"]);
    // The next prompt continues from the new position.
    h.prompt("q3").await;
    let q3 = h
        .entries()
        .into_iter()
        .find(|e| e["message"]["content"][0]["text"] == "q3")
        .unwrap();
    assert_eq!(q3["parentId"], summary["id"]);
    let context = h
        .session
        .shared
        .state
        .lock()
        .unwrap()
        .agent
        .messages
        .clone();
    let roles: Vec<&str> = context
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "branchSummary",
            "user",
            "assistant"
        ]
    );
}

/// Leaves the summary to the model, but changes its instructions and the label, and logs what
/// it sees.
const TREE_HOOK: &str = r#"
export default function (pi) {
  pi.on("session_before_tree", (e) => {
    const p = e.preparation;
    console.log(JSON.stringify({ type: "prep", wants: p.userWantsSummary, custom: p.customInstructions,
                                 label: p.label, abandoned: p.entriesToSummarize.length }));
    return { customInstructions: "Mention the colour.", label: "explored" };
  });
  pi.on("session_tree", (e) => {
    console.log(JSON.stringify({ type: e.type, fromExtension: e.fromExtension, summaryId: e.summaryEntry?.id }));
  });
}
"#;

fn id_of(entries: &[Value], text: &str) -> String {
    entries
        .iter()
        .find(|e| e["message"]["content"][0]["text"] == text)
        .unwrap_or_else(|| panic!("no entry {text}"))["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn tree_navigation_summarises_the_abandoned_branch_with_the_model() {
    let read = json!({ "toolCalls": [{ "name": "read", "arguments": { "path": "notes.md" } }] });
    let model = scripted(json!([
        text_turn("a1"),
        read,
        text_turn("a2"),
        text_turn("## Goal\nColour")
    ]));
    let mut h = harness_with(TREE_HOOK, model.clone(), &[]).await;
    h.prompt("q1").await;
    h.prompt("q2").await;
    let a1 = id_of(&h.entries(), "a1");
    h.take();
    let outcome = h
        .session
        .navigate_tree(
            &a1,
            true,
            Some("mine".into()),
            Some("Be brief.".into()),
            None,
        )
        .await
        .unwrap();
    assert!(!outcome.cancelled);
    let summary = outcome.summary_entry.expect("a summary entry");
    assert_eq!(summary["type"], "branch_summary");
    assert_eq!(summary["parentId"], json!(a1));
    assert_eq!(
        summary["summary"],
        "The user explored a different conversation branch before returning here.\n\
         Summary of that exploration:\n\n## Goal\nColour\n\n<read-files>\nnotes.md\n</read-files>"
    );
    assert_eq!(
        summary["details"],
        json!({ "readFiles": ["notes.md"], "modifiedFiles": [] })
    );
    assert_eq!(summary["fromHook"], false);
    let id = summary["id"].as_str().unwrap();
    let label = h
        .session
        .shared
        .state
        .lock()
        .unwrap()
        .store
        .get_label(id)
        .map(str::to_owned);
    assert_eq!(label.as_deref(), Some("explored"), "the extension's label");

    let events = h.take();
    let prep = events.iter().find(|e| e["type"] == "prep").unwrap();
    assert_eq!(
        prep,
        &json!({ "type": "prep", "wants": true, "custom": "Be brief.", "label": "mine", "abandoned": 4 })
    );
    let tree = events.iter().find(|e| e["type"] == "session_tree").unwrap();
    assert_eq!(tree["fromExtension"], false);
    assert_eq!(tree["summaryId"], summary["id"]);

    // The request: the abandoned branch only, with the extension's instructions.
    let payloads = model.payloads();
    assert_eq!(payloads.len(), 4);
    let prompt = payloads[3]["messages"][1]["content"].to_string();
    assert!(prompt.contains("[User]: q2"), "{prompt}");
    assert!(prompt.contains("read(path=\\\"notes.md\\\")"), "{prompt}");
    assert!(
        !prompt.contains("[User]: q1"),
        "q1 stays on the path: {prompt}"
    );
    assert!(
        prompt.contains("Additional focus: Mention the colour."),
        "{prompt}"
    );
    assert!(!prompt.contains("Be brief."), "{prompt}");

    let context = h
        .session
        .shared
        .state
        .lock()
        .unwrap()
        .agent
        .messages
        .clone();
    let roles: Vec<&str> = context
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "branchSummary"]);
}

#[tokio::test]
async fn aborting_the_branch_summary_cancels_the_navigation() {
    let slow = json!({ "text": "never finished", "chunks": 2, "delayMs": 600_000 });
    let model = scripted(json!([text_turn("a1"), text_turn("a2"), slow]));
    let mut h = harness_with(TREE_HOOK, model.clone(), &[]).await;
    h.prompt("q1").await;
    h.prompt("q2").await;
    let entries = h.entries();
    let a1 = id_of(&entries, "a1");
    let leaf = entries.last().unwrap()["id"].clone();
    // Abort once the summary request is under way (the model has recorded it).
    let shared = h.session.shared.clone();
    let aborter = tokio::spawn(async move {
        while model.payloads().len() < 3 {
            tokio::task::yield_now().await;
        }
        shared.abort.send_replace(true);
    });
    // A generous guard: without the abort the answer would take twenty minutes.
    let outcome = tokio::time::timeout(
        std::time::Duration::from_secs(120),
        h.session.navigate_tree(&a1, true, None, None, None),
    )
    .await
    .expect("the abort ended the summary")
    .unwrap();
    aborter.await.unwrap();
    assert!(outcome.cancelled);
    assert_eq!(outcome.summary_entry, None);
    assert_eq!(h.entries().len(), entries.len(), "nothing was written");
    let now = h
        .session
        .shared
        .state
        .lock()
        .unwrap()
        .store
        .get_leaf_id()
        .map(str::to_owned);
    assert_eq!(json!(now), leaf, "the leaf stayed");
}

#[tokio::test]
async fn user_bash_runs_in_the_workspace_or_takes_an_extension_result() {
    let mut h = harness(json!([]), &[]).await;
    let result = h.session.user_bash("echo hi; exit 3", false).await.unwrap();
    assert_eq!(
        result["output"], "hi\n",
        "output as printed, as pi keeps it"
    );
    assert_eq!(result["exitCode"], 3);
    let result = h.session.user_bash("magic", true).await.unwrap();
    assert_eq!(result["output"], "from the extension");
    let recorded: Vec<Value> = h
        .entries()
        .iter()
        .filter(|e| e["type"] == "message")
        .map(|e| e["message"].clone())
        .collect();
    assert_eq!(recorded[0]["role"], "bashExecution");
    assert_eq!(recorded[0]["exitCode"], 3);
    assert_eq!(recorded[1]["excludeFromContext"], true);
}

#[tokio::test]
async fn reload_and_thinking_level_changes_reach_extensions() {
    let mut h = harness(json!([]), &[]).await;
    h.session.run_command("/count").await.unwrap();
    h.take();
    h.session.reload().await;
    h.session.run_command("/count").await.unwrap();
    h.session.change_thinking_level("high").await.unwrap();
    let events = h.take();
    assert_eq!(
        Harness::types(&events),
        ["session_shutdown:reload", "session_start:reload", "count"]
    );
    assert_eq!(
        events.iter().find(|e| e["type"] == "count").unwrap()["count"],
        1
    );
    let select = events
        .iter()
        .find(|e| e["type"] == "thinking_level_select")
        .unwrap();
    assert_eq!(select["level"], "high");
    assert_eq!(select["previousLevel"], "off");
    assert_eq!(h.entries().last().unwrap()["type"], "thinking_level_change");
    assert!(h.session.change_thinking_level("extreme").await.is_err());
}

#[tokio::test]
async fn commands_ask_for_session_actions_that_run_when_they_return() {
    let mut h = harness(json!([]), &[]).await;
    let first = h.file().unwrap();
    h.take();
    h.session.run_command("/fresh").await.unwrap();
    // The command finished first (pi's promise resolves; the switch follows).
    let events = h.take();
    assert_eq!(Harness::types(&events), Vec::<String>::new());
    assert_eq!(
        events.iter().find(|e| e["type"] == "fresh").unwrap()["r"],
        json!({ "cancelled": false })
    );
    h.session.run_requests().await;
    assert_eq!(
        Harness::types(&h.take()),
        [
            "session_before_switch:new",
            "session_shutdown:new",
            "session_start:new"
        ]
    );
    let second = h.file().unwrap();
    assert_ne!(second, first);

    h.session.run_command("/again").await.unwrap();
    h.session.run_requests().await;
    assert_eq!(
        Harness::types(&h.take()),
        ["session_shutdown:reload", "session_start:reload"]
    );

    // Back to the first session by its file name: allowed (same folder).
    let name = first.file_name().unwrap().to_string_lossy().into_owned();
    h.session
        .run_command(&format!("/hop {name}"))
        .await
        .unwrap();
    h.session.run_requests().await;
    assert_eq!(h.file().unwrap(), first);

    // Anything outside the session folder is refused: it would read files never granted.
    let outside = h._dir.path().join("elsewhere.jsonl");
    std::fs::write(&outside, "{}\n").unwrap();
    for target in [
        outside.to_string_lossy().into_owned(),
        "../elsewhere.jsonl".into(),
        "/etc/passwd".into(),
    ] {
        h.take();
        h.session
            .run_command(&format!("/hop {target}"))
            .await
            .unwrap();
        h.session.run_requests().await;
        let events = h.take();
        let error = events
            .iter()
            .find(|e| e["type"] == "extension_error")
            .unwrap_or_else(|| panic!("{target}: no error in {events:?}"));
        assert!(
            error["error"]
                .as_str()
                .unwrap()
                .contains("not a session file in this session's folder"),
            "{error}"
        );
        assert_eq!(
            h.file().unwrap(),
            first,
            "{target}: the session did not change"
        );
    }
}

#[tokio::test]
async fn extension_thinking_level_and_name_changes_are_recorded_and_announced() {
    let mut h = harness(json!([]), &[]).await;
    h.take();
    h.session.run_command("/think").await.unwrap();
    h.session.run_requests().await;
    let events = h.take();
    let kinds: Vec<String> = h
        .entries()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "model_change",
            "thinking_level_change",
            "thinking_level_change",
            "session_info"
        ]
    );
    let select = events
        .iter()
        .find(|e| e["type"] == "thinking_level_select")
        .expect("extensions hear of it");
    assert_eq!(select["previousLevel"], "off");
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "thinking_level_changed" && e["level"] == "high")
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "session_info_changed" && e["name"] == "thoughtful")
    );
}

/// An extension tool named like a built-in replaces it, for the model and in getAllTools.
#[tokio::test]
async fn an_extension_tool_overrides_a_builtin_of_the_same_name() {
    const OVERRIDE: &str = r#"
export default function (pi) {
  pi.registerTool({ name: "read", label: "read", description: "sandboxed read",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    execute: async (_id, params) => ({ content: [{ type: "text", text: `overridden ${params.path}` }] }) });
  pi.registerCommand("source", { handler: async () => {
    const read = pi.getAllTools().find((t) => t.name === "read");
    console.log(JSON.stringify({ type: "source", info: read.sourceInfo, count: pi.getAllTools().filter((t) => t.name === "read").length }));
  } });
}
"#;
    let mut h = harness(
        json!([
            { "toolCalls": [{ "id": "c1", "name": "read", "arguments": { "path": "a.txt" } }] },
            { "text": "ok" }
        ]),
        &[],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    h.session
        .load(&artifact(dir.path(), OVERRIDE))
        .await
        .unwrap();
    h.prompt("read it").await;
    let result = h
        .entries()
        .into_iter()
        .find(|e| e["message"]["role"] == "toolResult")
        .unwrap();
    assert_eq!(result["message"]["content"][0]["text"], "overridden a.txt");
    h.take();
    h.session.run_command("/source").await.unwrap();
    let source = h
        .take()
        .into_iter()
        .find(|e| e["type"] == "source")
        .unwrap();
    assert_eq!(source["count"], 1);
    assert_eq!(source["info"]["source"], "extension");
}
