//! The example extensions under extensions/: each is built with `pichamber build` into a
//! temporary folder, the component is run through the binary, and what the extension did is
//! checked from the NDJSON it produced. Plus the failure modes a user meets first: a syntax
//! error, a factory that throws, a tool that throws, and a command that never returns.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use serde_json::{Value, json};
use tempfile::TempDir;

// ---------------------------------------------------------------------------------------------
// Helpers

/// Builds `extensions/<name>` with `pichamber build` into a fresh temporary folder and returns
/// the folder (keep it alive) and the component's path.
fn build_example(name: &str) -> (TempDir, String) {
    build_source(&repo().join("extensions").join(name), name)
}

fn build_source(source: &Path, out_name: &str) -> (TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let wasm = dir.path().join(format!("{out_name}.wasm"));
    let out = pichamber(&[
        "build",
        &source.to_string_lossy(),
        "-o",
        &wasm.to_string_lossy(),
    ]);
    assert!(
        out.status.success(),
        "pichamber build {} failed:\n{}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        wasm.is_file(),
        "pichamber build did not write {}",
        wasm.display()
    );
    (dir, wasm.to_string_lossy().into_owned())
}

/// Writes a throwaway extension source into `dir`.
fn write_ext(dir: &Path, file: &str, source: &str) -> String {
    let path = dir.join(file);
    std::fs::write(&path, source).expect("write extension");
    path.to_string_lossy().into_owned()
}

/// `pichamber inspect --json`.
fn inspect(ext: &str) -> Value {
    let out = pichamber(&["inspect", ext, "--json"]);
    assert!(
        out.status.success(),
        "inspect {ext} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("inspect prints JSON")
}

/// Runs and prints the transcript when an assertion is about to need it.
fn run(args: &[&str]) -> (bool, Vec<Value>, String) {
    let (ok, events, stderr) = run_json(args);
    eprintln!(
        "--- pichamber run {}\n{}",
        args.join(" "),
        events
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    );
    if !stderr.is_empty() {
        eprintln!("--- stderr\n{stderr}");
    }
    (ok, events, stderr)
}

/// A UI request without its random id and the `type` tag: what a client has to render.
fn view(request: &Value) -> Value {
    let mut v = request.clone();
    let map = v.as_object_mut().unwrap();
    map.remove("id");
    map.remove("type");
    v
}

/// The UI conversation in order: each request as [`view`]s it, each answer as
/// `{"answer": {...}}`. Also checks that every answer belongs to the dialog just asked.
fn ui_transcript(events: &[Value]) -> Vec<Value> {
    let mut out = Vec::new();
    let mut last_dialog: Option<String> = None;
    for e in events {
        match e["type"].as_str() {
            Some("extension_ui_request") => {
                if ["select", "confirm", "input", "editor", "form"]
                    .contains(&e["method"].as_str().unwrap_or_default())
                {
                    last_dialog = e["id"].as_str().map(str::to_owned);
                }
                out.push(view(e));
            }
            Some("extension_ui_response") => {
                assert_eq!(
                    e["id"].as_str(),
                    last_dialog.as_deref(),
                    "a response must answer the dialog asked just before it: {e}"
                );
                out.push(json!({ "answer": view(e) }));
            }
            _ => {}
        }
    }
    out
}

fn tool_results(events: &[Value]) -> Vec<&Value> {
    of_type(events, "tool_result")
}

fn errors_of(events: &[Value]) -> Vec<&Value> {
    of_type(events, "extension_error")
}

fn custom_entries<'a>(events: &'a [Value], custom_type: &str) -> Vec<&'a Value> {
    of_type(events, "entry")
        .into_iter()
        .map(|e| &e["entry"])
        .filter(|e| e["type"] == "custom" && e["customType"] == custom_type)
        .collect()
}

/// Object keys in the order they were serialized.
fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// hello-tool

#[test]
fn hello_tool_greets_with_content_details_and_one_update() {
    let (_dir, wasm) = build_example("hello-tool");

    let report = inspect(&wasm);
    assert_eq!(report["loaded"], true);
    let tools = report["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 1, "{report}");
    assert_eq!(tools[0]["name"], "greet");
    assert_eq!(tools[0]["parameters"]["required"], json!(["name"]));
    assert_eq!(
        tools[0]["parameters"]["properties"]["greeting"]["type"],
        "string"
    );

    let (ok, events, stderr) = run(&[
        &wasm,
        "--tool",
        "greet",
        "--args",
        r#"{"name":"Ada"}"#,
        "--tool",
        "greet",
        "--args",
        r#"{"name":"Grace","greeting":"Ahoy"}"#,
    ]);
    assert!(ok, "both calls succeed: {stderr}");
    assert!(errors_of(&events).is_empty());

    // Exactly: update(call 1), result(call 1), update(call 2), result(call 2).
    let kinds: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_update" || e["type"] == "tool_result")
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "tool_execution_update",
            "tool_result",
            "tool_execution_update",
            "tool_result"
        ]
    );

    let updates = of_type(&events, "tool_execution_update");
    let results = tool_results(&events);
    for (update, result) in updates.iter().zip(&results) {
        assert_eq!(
            update["toolCallId"], result["toolCallId"],
            "the update belongs to its call"
        );
    }
    assert_ne!(results[0]["toolCallId"], results[1]["toolCallId"]);
    assert_eq!(
        text_of(&updates[0]["partialResult"]["content"]),
        "Thinking of a greeting for Ada..."
    );
    assert_eq!(
        updates[0]["partialResult"]["details"],
        json!({ "stage": "composing" })
    );

    assert_eq!(results[0]["toolName"], "greet");
    assert_eq!(results[0]["isError"], false);
    assert_eq!(
        results[0]["content"],
        json!([{ "type": "text", "text": "Hello, Ada!" }])
    );
    assert_eq!(
        results[0]["details"],
        json!({ "name": "Ada", "greeting": "Hello", "message": "Hello, Ada!", "length": 11 })
    );
    assert_eq!(text_of(&results[1]["content"]), "Ahoy, Grace!");
    assert_eq!(results[1]["details"]["greeting"], "Ahoy");
    assert_eq!(results[1]["details"]["length"], 12);
}

#[test]
fn hello_tool_reports_a_thrown_error_as_an_error_result() {
    let (_dir, wasm) = build_example("hello-tool");
    let (ok, events, _) = run(&[&wasm, "--tool", "greet", "--args", r#"{"name":"   "}"#]);
    assert!(!ok, "a tool result with isError fails the run");
    let results = tool_results(&events);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["isError"], true);
    assert_eq!(
        text_of(&results[0]["content"]),
        "greet: name must not be empty"
    );
    assert!(
        of_type(&events, "tool_execution_update").is_empty(),
        "it threw before streaming anything"
    );
}

#[test]
fn hello_tool_demo_turns_run_a_whole_agent_turn() {
    // The README's first command: a scripted model calls the extension's tool.
    let (_dir, wasm) = build_example("hello-tool");
    let script = common::path("extensions/hello-tool/demo-turns.json");
    let (ok, events, stderr) = run(&[&wasm, "--script", &script, "--prompt", "Say hello to Ada"]);
    assert!(ok, "{stderr}");
    let ends: Vec<&Value> = of_type(&events, "message_end")
        .into_iter()
        .map(|e| &e["message"])
        .collect();
    let roles: Vec<&str> = ends.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "toolResult", "assistant"]);
    assert_eq!(text_of(&ends[2]["content"]), "Hello, Ada!");
    assert_eq!(ends[2]["details"]["name"], "Ada");
    assert_eq!(
        text_of(&ends[3]["content"]),
        "Done: the tool said hello to Ada."
    );
    assert_eq!(of_type(&events, "agent_end").len(), 1);
}

#[test]
fn tool_details_keep_their_key_order() {
    let (_dir, wasm) = build_example("hello-tool");
    let (_, events, _) = run(&[&wasm, "--tool", "greet", "--args", r#"{"name":"Ada"}"#]);
    let result = tool_results(&events)[0];
    // Objects an extension hands over keep their key order, as JSON.stringify in pi does.
    assert_eq!(
        keys(&result["details"]),
        ["name", "greeting", "message", "length"]
    );
    assert_eq!(keys(&result["content"][0]), ["type", "text"]);
}

// ---------------------------------------------------------------------------------------------
// dialogs

const FORM_ANSWER: &str = r#"{"team":"core","years":"3","editor":"vim","remote":"true"}"#;

fn survey_form_request() -> Value {
    json!({
        "method": "form",
        "title": "A few details",
        "fields": [
            { "id": "team", "label": "Team", "type": "text", "required": true },
            { "id": "years", "label": "Years of experience", "type": "number" },
            { "id": "editor", "label": "Editor", "type": "select", "options": ["vim", "emacs", "vscode"], "initial": "vim" },
            { "id": "remote", "label": "Works remotely", "type": "checkbox", "initial": "false" },
        ],
    })
}

fn status(n: u32) -> Value {
    json!({ "method": "setStatus", "statusKey": "survey", "statusText": format!("question {n} of 7") })
}

#[test]
fn dialogs_survey_uses_every_dialog_in_order() {
    let (_dir, wasm) = build_example("dialogs");
    let (ok, events, stderr) = run(&[
        &wasm,
        "--command",
        "/survey",
        "--answer",
        "TypeScript",
        "--answer",
        "yes",
        "--answer",
        "Ada",
        "--answer",
        "Great tool",
        "--answer",
        FORM_ANSWER,
        "--answer",
        "4",
        "--answer",
        "yes",
        "--command",
        "/survey-clear",
    ]);
    assert!(ok, "{stderr}");
    assert!(errors_of(&events).is_empty());

    let summary = "language: TypeScript; newsletter: yes; name: Ada; comments: Great tool; team: core; \
                   years: 3; editor: vim; remote: true; rating: 4";
    let expected = vec![
        json!({ "method": "setTitle", "title": "pi — survey" }),
        status(1),
        json!({ "method": "select", "title": "Favourite language?", "options": ["Rust", "TypeScript", "Go"] }),
        json!({ "answer": { "value": "TypeScript" } }),
        status(2),
        // The answer flows into the next question.
        json!({ "method": "confirm", "title": "Newsletter", "message": "Subscribe to the TypeScript newsletter?" }),
        json!({ "answer": { "confirmed": true } }),
        status(3),
        json!({ "method": "input", "title": "Your name?", "placeholder": "Ada Lovelace" }),
        json!({ "answer": { "value": "Ada" } }),
        status(4),
        json!({ "method": "editor", "title": "Any comments?", "prefill": "Dear Ada, about TypeScript: " }),
        json!({ "answer": { "value": "Great tool" } }),
        status(5),
        survey_form_request(),
        json!({ "answer": { "value": FORM_ANSWER } }),
        status(6),
        json!({ "method": "select", "title": "Rate this survey", "options": ["1", "2", "3", "4", "5"], "timeout": 5000 }),
        json!({ "answer": { "value": "4" } }),
        status(7),
        // The AbortSignal dialog: no timeout field, the signal stays on the extension's side.
        json!({ "method": "confirm", "title": "Send the survey?", "message": "Ada (core) likes TypeScript" }),
        json!({ "answer": { "confirmed": true } }),
        json!({ "method": "setStatus", "statusKey": "survey" }),
        json!({
            "method": "setWidget",
            "widgetKey": "survey",
            "widgetLines": [
                "language: TypeScript", "newsletter: yes", "name: Ada", "comments: Great tool", "team: core",
                "years: 3", "editor: vim", "remote: true", "rating: 4",
            ],
            "widgetPlacement": "belowEditor",
        }),
        json!({ "method": "set_editor_text", "text": "Thanks Ada! Tell me more about TypeScript." }),
        json!({ "method": "notify", "message": format!("Survey sent: {summary}"), "notifyType": "info" }),
        // /survey-clear
        json!({ "method": "setWidget", "widgetKey": "survey" }),
        json!({ "method": "setTitle", "title": "pi" }),
    ];
    let transcript = ui_transcript(&events);
    for (i, (got, want)) in transcript.iter().zip(&expected).enumerate() {
        assert_eq!(got, want, "UI step {i} differs");
    }
    assert_eq!(transcript.len(), expected.len(), "number of UI steps");
    // Every request has its own id.
    let ids: std::collections::HashSet<&str> = of_type(&events, "extension_ui_request")
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), of_type(&events, "extension_ui_request").len());
}

#[test]
fn dialogs_survey_handles_cancel_and_no() {
    let (_dir, wasm) = build_example("dialogs");
    let (ok, events, stderr) = run(&[
        &wasm,
        "--command",
        "/survey",
        "--answer",
        "2", // select by number: TypeScript
        "--answer",
        "no", // newsletter
        "--answer",
        "<cancel>", // name -> "anonymous"
        "--answer",
        "<cancel>", // editor cancelled -> "(skipped)"
        "--answer",
        r#"{"team":"infra"}"#,
        "--answer",
        "<cancel>", // rating cancelled
        "--answer",
        "yes",
    ]);
    assert!(ok, "{stderr}");
    let transcript = ui_transcript(&events);
    let answers: Vec<&Value> = transcript
        .iter()
        .filter(|t| t.get("answer").is_some())
        .map(|t| &t["answer"])
        .collect();
    assert_eq!(
        answers,
        [
            &json!({ "value": "TypeScript" }),
            &json!({ "confirmed": false }),
            &json!({ "cancelled": true }),
            &json!({ "cancelled": true }),
            &json!({ "value": r#"{"team":"infra"}"# }),
            &json!({ "cancelled": true }),
            &json!({ "confirmed": true }),
        ]
    );
    // The cancelled name reaches the editor's prefill.
    let editor = transcript.iter().find(|t| t["method"] == "editor").unwrap();
    assert_eq!(editor["prefill"], "Dear anonymous, about TypeScript: ");
    let confirm = transcript
        .iter()
        .rfind(|t| t["method"] == "confirm")
        .unwrap();
    assert_eq!(confirm["message"], "anonymous (infra) likes TypeScript");
    let notify = transcript.iter().find(|t| t["method"] == "notify").unwrap();
    assert_eq!(
        notify["message"],
        "Survey sent: language: TypeScript; newsletter: no; name: anonymous; comments: (skipped); team: infra; rating: no rating"
    );

    // An empty editor submit is not a cancel.
    let (_, events, _) = run(&[
        &wasm,
        "--command",
        "/survey",
        "--answer",
        "Go",
        "--answer",
        "yes",
        "--answer",
        "Bo",
        "--answer",
        "",
        "--answer",
        r#"{"team":"x"}"#,
        "--answer",
        "5",
        "--answer",
        "yes",
    ]);
    let notify = ui_requests(&events)
        .into_iter()
        .find(|(m, _)| m == "notify")
        .unwrap()
        .1;
    assert!(
        notify["message"]
            .as_str()
            .unwrap()
            .contains("comments: (empty)"),
        "{notify}"
    );
}

#[test]
fn dialogs_survey_stops_when_the_first_question_is_cancelled() {
    let (_dir, wasm) = build_example("dialogs");
    let (ok, events, stderr) = run(&[&wasm, "--command", "/survey", "--answer", "<cancel>"]);
    assert!(ok, "{stderr}");
    let transcript = ui_transcript(&events);
    assert_eq!(
        transcript,
        vec![
            json!({ "method": "setTitle", "title": "pi — survey" }),
            status(1),
            json!({ "method": "select", "title": "Favourite language?", "options": ["Rust", "TypeScript", "Go"] }),
            json!({ "answer": { "cancelled": true } }),
            json!({ "method": "setStatus", "statusKey": "survey" }),
            json!({ "method": "notify", "message": "Survey cancelled", "notifyType": "warning" }),
        ]
    );
}

#[test]
fn dialogs_survey_can_be_discarded_at_the_end() {
    let (_dir, wasm) = build_example("dialogs");
    let (_, events, _) = run(&[
        &wasm,
        "--command",
        "/survey",
        "--answer",
        "Rust",
        "--answer",
        "yes",
        "--answer",
        "Ada",
        "--answer",
        "ok",
        "--answer",
        FORM_ANSWER,
        "--answer",
        "3",
        "--answer",
        "no",
    ]);
    let requests = ui_requests(&events);
    let last = &requests.last().unwrap().1;
    assert_eq!(
        view(last),
        json!({ "method": "notify", "message": "Survey discarded", "notifyType": "warning" })
    );
    assert!(
        !requests.iter().any(|(m, _)| m == "setWidget"),
        "nothing is shown for a discarded survey"
    );
}

#[test]
fn dialogs_survey_without_ui_asks_nothing() {
    let (_dir, wasm) = build_example("dialogs");
    let (ok, events, stderr) = run(&[&wasm, "--no-ui", "--command", "/survey"]);
    assert!(ok, "{stderr}");
    assert!(
        ui_requests(&events).is_empty(),
        "no UI requests without a UI"
    );
    let logs = of_type(&events, "log");
    assert_eq!(logs.len(), 1);
    assert_eq!(logs[0]["level"], "info");
    assert_eq!(
        logs[0]["message"],
        "survey: no UI available, nothing to ask"
    );
}

// ---------------------------------------------------------------------------------------------
// tool-gate

fn tool_call_payload(id: &str, command: &str) -> String {
    json!({ "toolName": "bash", "toolCallId": id, "input": { "command": command } }).to_string()
}

#[test]
fn tool_gate_blocks_dangerous_commands() {
    let (_dir, wasm) = build_example("tool-gate");
    let rm = tool_call_payload("1", "rm -rf /");
    let sudo = tool_call_payload("2", "sudo apt-get install x");
    let ls = tool_call_payload("3", "ls -la");
    let other_tool =
        json!({ "toolName": "read", "toolCallId": "4", "input": { "command": "rm -rf /" } })
            .to_string();
    let (ok, events, stderr) = run(&[
        &wasm,
        "--event",
        "tool_call",
        "--payload",
        &rm,
        "--event",
        "tool_call",
        "--payload",
        &sudo,
        "--event",
        "tool_call",
        "--payload",
        &ls,
        "--event",
        "tool_call",
        "--payload",
        &other_tool,
    ]);
    assert!(ok, "{stderr}");
    let results: Vec<&Value> = of_type(&events, "event_result")
        .into_iter()
        .map(|e| &e["result"])
        .collect();
    assert_eq!(results.len(), 4);
    assert_eq!(
        results[0],
        &json!({ "block": true, "reason": "tool-gate: blocked recursive forced delete (rm -rf): rm -rf /" })
    );
    assert_eq!(results[1]["block"], true);
    assert_eq!(
        results[1]["reason"],
        "tool-gate: blocked privilege escalation (sudo): sudo apt-get install x"
    );
    assert_eq!(results[2], &Value::Null, "a harmless command passes");
    assert_eq!(results[3], &Value::Null, "other tools are not gated");
    assert!(ui_requests(&events).is_empty(), "blocking needs no dialog");
}

#[test]
fn tool_gate_asks_before_git_push() {
    let (_dir, wasm) = build_example("tool-gate");
    let push = tool_call_payload("1", "git push origin main");
    let rm = tool_call_payload("2", "rm -rf build");
    let push2 = tool_call_payload("3", "git push --force");

    let (ok, events, stderr) = run(&[
        &wasm,
        "--event",
        "tool_call",
        "--payload",
        &push,
        "--event",
        "tool_call",
        "--payload",
        &rm,
        "--event",
        "tool_call",
        "--payload",
        &push2,
        "--answer",
        "no",
        "--answer",
        "yes",
        "--command",
        "/gate-stats",
    ]);
    assert!(ok, "{stderr}");
    let results: Vec<&Value> = of_type(&events, "event_result")
        .into_iter()
        .map(|e| &e["result"])
        .collect();
    assert_eq!(
        results[0],
        &json!({ "block": true, "reason": "tool-gate: git push was not confirmed by the user" })
    );
    assert_eq!(results[1]["block"], true);
    assert_eq!(results[2], &Value::Null, "a confirmed push goes through");
    assert_eq!(
        ui_transcript(&events),
        vec![
            json!({ "method": "confirm", "title": "Allow git push?", "message": "The agent wants to run:\n\n  git push origin main" }),
            json!({ "answer": { "confirmed": false } }),
            json!({ "method": "confirm", "title": "Allow git push?", "message": "The agent wants to run:\n\n  git push --force" }),
            json!({ "answer": { "confirmed": true } }),
            json!({ "method": "notify", "message": "git push allowed: git push --force", "notifyType": "info" }),
            // State kept across events: the refused push and the rm -rf.
            json!({ "method": "notify", "message": "tool-gate blocked 2 calls", "notifyType": "info" }),
        ]
    );
    // The dialog was asked before the event's result was reported.
    let confirm_at = events
        .iter()
        .position(|e| e["method"] == "confirm")
        .unwrap();
    let result_at = events
        .iter()
        .position(|e| e["type"] == "event_result")
        .unwrap();
    assert!(confirm_at < result_at);

    // Without a UI nobody can confirm: blocked.
    let (_, events, _) = run(&[&wasm, "--event", "tool_call", "--payload", &push]);
    let result = &of_type(&events, "event_result")[0]["result"];
    assert_eq!(result["block"], true);
    assert_eq!(
        result["reason"],
        "tool-gate: git push needs confirmation, and there is no UI to ask"
    );
}

const ECHO_BASH: &str = r#"
export default function (pi) {
  pi.registerTool({
    name: "bash",
    description: "Pretends to run a command: echoes what it was given",
    parameters: { type: "object", properties: { command: { type: "string" }, timeout: { type: "number" } }, required: ["command"] },
    async execute(_id, params) {
      return { content: [{ type: "text", text: "ran: " + params.command }], details: { input: params } };
    },
  });
}
"#;

#[test]
fn tool_gate_blocks_real_tool_calls() {
    let (dir, wasm) = build_example("tool-gate");
    let echo = write_ext(dir.path(), "echo-bash.ts", ECHO_BASH);
    let (ok, events, _) = run(&[
        &wasm,
        &echo,
        "--tool",
        "bash",
        "--args",
        r#"{"command":"sudo rm x"}"#,
        "--tool",
        "bash",
        "--args",
        r#"{"command":"echo hi"}"#,
    ]);
    assert!(!ok, "a blocked call is an error result");
    let results = tool_results(&events);
    assert_eq!(results.len(), 2);
    assert_eq!(results[0]["isError"], true);
    assert_eq!(
        text_of(&results[0]["content"]),
        "tool-gate: blocked privilege escalation (sudo): sudo rm x"
    );
    assert!(
        !text_of(&results[0]["content"]).contains("ran:"),
        "the tool never ran"
    );
    assert_eq!(results[1]["isError"], false);
    assert_eq!(text_of(&results[1]["content"]), "ran: echo hi");
}

#[test]
fn tool_gate_patches_the_input_of_real_tool_calls() {
    let (dir, wasm) = build_example("tool-gate");
    let echo = write_ext(dir.path(), "echo-bash.ts", ECHO_BASH);
    let (ok, events, stderr) = run(&[
        &wasm,
        &echo,
        "--tool",
        "bash",
        "--args",
        r#"{"command":"npm install left-pad"}"#,
    ]);
    assert!(ok, "{stderr}");
    let result = tool_results(&events)[0];
    // pi: "Mutations to event.input affect the actual tool execution".
    assert_eq!(
        text_of(&result["content"]),
        "ran: npm install left-pad --no-audit --no-fund"
    );
    assert_eq!(
        result["details"]["input"],
        json!({ "command": "npm install left-pad --no-audit --no-fund", "timeout": 300 })
    );
}

// ---------------------------------------------------------------------------------------------
// todo-store

fn todo(id: u64, text: &str, done: bool) -> Value {
    json!({ "id": id, "text": text, "done": done })
}

#[test]
fn todo_store_keeps_state_across_calls_and_records_entries() {
    let (_dir, wasm) = build_example("todo-store");

    let report = inspect(&wasm);
    assert_eq!(report["loaded"], true, "{report}");
    let params = &report["tools"][0]["parameters"];
    assert_eq!(params["type"], "object");
    assert_eq!(params["properties"]["action"]["type"], "string");
    assert_eq!(
        params["properties"]["action"]["enum"],
        json!(["add", "list", "toggle", "clear"])
    );
    assert_eq!(params["properties"]["id"]["type"], "number");
    assert_eq!(
        params["required"],
        json!(["action"]),
        "text and id are Type.Optional"
    );

    let (ok, events, _) = run(&[
        &wasm,
        "--tool",
        "todo",
        "--args",
        r#"{"action":"add","text":"write tests"}"#,
        "--tool",
        "todo",
        "--args",
        r#"{"action":"add","text":"fix bugs"}"#,
        "--tool",
        "todo",
        "--args",
        r#"{"action":"toggle","id":1}"#,
        "--tool",
        "todo",
        "--args",
        r#"{"action":"list"}"#,
        "--command",
        "/todos",
        "--tool",
        "todo",
        "--args",
        r#"{"action":"toggle","id":9}"#,
        "--tool",
        "todo",
        "--args",
        r#"{"action":"clear"}"#,
        "--tool",
        "todo",
        "--args",
        r#"{"action":"list"}"#,
    ]);
    assert!(!ok, "toggling a missing todo is an error result");
    assert!(errors_of(&events).is_empty());

    let results = tool_results(&events);
    assert_eq!(results.len(), 7);
    let texts: Vec<String> = results.iter().map(|r| text_of(&r["content"])).collect();
    assert_eq!(
        texts,
        [
            "Added #1: write tests",
            "Added #2: fix bugs",
            "#1 is now done",
            "[x] #1 write tests\n[ ] #2 fix bugs",
            "todo toggle: no todo #9",
            "Cleared 2 todos",
            "No todos.",
        ]
    );
    let errors: Vec<bool> = results.iter().map(|r| r["isError"] == true).collect();
    assert_eq!(errors, [false, false, false, false, true, false, false]);

    let both_open = json!([todo(1, "write tests", false), todo(2, "fix bugs", false)]);
    let first_done = json!([todo(1, "write tests", true), todo(2, "fix bugs", false)]);
    assert_eq!(
        results[0]["details"],
        json!({ "action": "add", "todos": [todo(1, "write tests", false)], "nextId": 2 })
    );
    assert_eq!(
        results[1]["details"],
        json!({ "action": "add", "todos": both_open, "nextId": 3 })
    );
    assert_eq!(
        results[2]["details"],
        json!({ "action": "toggle", "todos": first_done, "nextId": 3 })
    );
    assert_eq!(
        results[3]["details"],
        json!({ "action": "list", "todos": first_done, "nextId": 3 })
    );
    assert_eq!(
        results[5]["details"],
        json!({ "action": "clear", "todos": [], "nextId": 1 })
    );

    // One todo-state entry per change (not for list or the failed toggle), in order.
    let entries = custom_entries(&events, "todo-state");
    let data: Vec<&Value> = entries.iter().map(|e| &e["data"]).collect();
    assert_eq!(
        data,
        [
            &json!({ "action": "add", "todos": [todo(1, "write tests", false)], "nextId": 2 }),
            &json!({ "action": "add", "todos": both_open, "nextId": 3 }),
            &json!({ "action": "toggle", "todos": first_done, "nextId": 3 }),
            &json!({ "action": "clear", "todos": [], "nextId": 1 }),
        ]
    );
    // Each entry is appended before its tool result is reported.
    for (entry, result_index) in entries.iter().zip([0, 1, 2, 5]) {
        let entry_at = events
            .iter()
            .position(|e| std::ptr::eq(&e["entry"], *entry))
            .unwrap();
        let result_at = events
            .iter()
            .position(|e| std::ptr::eq(e, results[result_index]))
            .unwrap();
        assert!(entry_at < result_at);
    }

    // Entries form one chain: each one's parent is the entry appended before it (the /todos
    // custom message included).
    let all: Vec<&Value> = of_type(&events, "entry")
        .into_iter()
        .map(|e| &e["entry"])
        .collect();
    assert_eq!(all.len(), 5);
    assert_eq!(all[0]["parentId"], Value::Null);
    for pair in all.windows(2) {
        assert_eq!(
            pair[1]["parentId"], pair[0]["id"],
            "entries chain by parentId"
        );
    }

    // /todos posts the list into the transcript (pi's message_start / message_end of a
    // custom message, sent while the agent is idle).
    let messages: Vec<&Value> = of_type(&events, "message_end")
        .into_iter()
        .filter(|e| e["message"]["role"] == "custom")
        .collect();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0]["message"]["customType"], "todo-list");
    assert_eq!(
        messages[0]["message"]["content"],
        "1/2 done\n[x] #1 write tests\n[ ] #2 fix bugs"
    );
    assert_eq!(messages[0]["message"]["details"]["todos"], first_done);
    assert_eq!(all[3]["type"], "custom_message");
    assert_eq!(all[3]["customType"], "todo-list");
}

// ---------------------------------------------------------------------------------------------
// card-demo

const COMPONENTS: [&str; 7] = [
    "markdown", "kv", "list", "table", "progress", "badges", "code",
];

#[test]
fn card_demo_emits_all_seven_components_with_actions() {
    let (_dir, wasm) = build_example("card-demo");
    let commands: Vec<String> = inspect(&wasm)["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_owned())
        .collect();

    let (ok, events, stderr) = run(&[&wasm, "--command", "/cards"]);
    assert!(ok, "{stderr}");
    let cards: Vec<&Value> = custom_entries(&events, "pichamber.ui")
        .into_iter()
        .map(|e| &e["data"])
        .collect();
    assert_eq!(
        cards.len(),
        10,
        "7 components, 2 progress updates, 1 removal"
    );

    for card in &cards {
        assert_eq!(card["protocol"], "pichamber-extension-ui", "{card}");
        assert_eq!(card["version"], 1, "{card}");
    }
    let components: Vec<&str> = cards
        .iter()
        .filter_map(|c| c["component"].as_str())
        .collect();
    assert_eq!(
        components,
        [
            "markdown", "kv", "list", "table", "progress", "progress", "progress", "badges", "code"
        ]
    );
    let mut distinct = components.clone();
    distinct.dedup();
    assert_eq!(distinct, COMPONENTS);

    // Every card has a title and 1..=8 actions, each invoking a registered command.
    for card in cards.iter().filter(|c| c.get("component").is_some()) {
        let title = card["title"].as_str().expect("title");
        assert!(!title.is_empty() && title.len() <= 256);
        let actions = card["actions"].as_array().expect("actions");
        assert!((1..=8).contains(&actions.len()), "{card}");
        for action in actions {
            assert!(
                action["label"].as_str().is_some_and(|l| !l.is_empty()),
                "{action}"
            );
            let command = action["command"].as_str().unwrap();
            assert!(
                commands.iter().any(|c| c == command),
                "action command /{command} is registered: {commands:?}"
            );
        }
    }
    // The optional action fields all appear somewhere.
    let actions: Vec<&Value> = cards
        .iter()
        .flat_map(|c| c["actions"].as_array().into_iter().flatten())
        .collect();
    for field in [
        "args",
        "variant",
        "icon",
        "disabled",
        "loading",
        "confirm",
        "promptForArgs",
    ] {
        assert!(
            actions.iter().any(|a| a.get(field).is_some()),
            "some action uses {field}"
        );
    }

    // Props per component, as the protocol defines them.
    let by = |component: &str| *cards.iter().find(|c| c["component"] == component).unwrap();
    assert_eq!(
        by("markdown")["props"]["body"],
        "**PiChamber** renders these cards from plain JSON."
    );
    let kv = by("kv")["props"]["rows"].as_array().unwrap().clone();
    assert_eq!(
        kv[0],
        json!({ "label": "Files", "value": "12", "tone": "info" })
    );
    assert!(
        kv.iter()
            .all(|r| r["label"].is_string() && r["value"].is_string())
    );
    assert_eq!(
        by("list")["props"]["items"][0],
        json!({ "label": "src/", "value": "42 files" })
    );
    let table = &by("table")["props"];
    assert_eq!(table["columns"], json!(["File", "Status"]));
    assert!(
        table["rows"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r.as_array().unwrap().len() == 2)
    );
    assert_eq!(
        by("badges")["props"]["items"],
        json!([{ "label": "passing", "tone": "success" }, "3 skipped", { "label": "1 flaky", "tone": "warning" }])
    );
    assert_eq!(by("code")["props"]["language"], "ts");
    assert!(
        by("code")["props"]["code"]
            .as_str()
            .unwrap()
            .contains("pichamber.ui")
    );

    // The live panel: one stable id, updated twice in place, then removed.
    let build: Vec<&Value> = cards
        .iter()
        .copied()
        .filter(|c| c["id"] == "cards-build")
        .collect();
    assert_eq!(build.len(), 4);
    let values: Vec<&Value> = build[..3].iter().map(|c| &c["props"]["value"]).collect();
    assert_eq!(values, [&json!(10), &json!(60), &json!(100)]);
    assert!(
        build[..3]
            .iter()
            .all(|c| c["props"]["max"] == 100 && c["component"] == "progress")
    );
    assert_eq!(
        build[3],
        &json!({ "protocol": "pichamber-extension-ui", "version": 1, "id": "cards-build", "removed": true })
    );
    assert_eq!(cards.last().unwrap(), &build[3], "the removal comes last");
    // Only the progress panel carries an id.
    assert_eq!(cards.iter().filter(|c| c.get("id").is_some()).count(), 4);
}

#[test]
fn card_demo_actions_invoke_registered_commands() {
    let (_dir, wasm) = build_example("card-demo");
    // First collect the actions, then run two of them as a client's buttons would.
    let (_, events, _) = run(&[&wasm, "--command", "/cards"]);
    let cards: Vec<Value> = custom_entries(&events, "pichamber.ui")
        .into_iter()
        .map(|e| e["data"].clone())
        .collect();
    let table_action =
        cards.iter().find(|c| c["component"] == "table").unwrap()["actions"][0].clone();
    let cancel_action =
        cards.iter().find(|c| c["component"] == "progress").unwrap()["actions"][0].clone();
    assert_eq!(cancel_action["confirm"], true);
    let line = |a: &Value| match a["args"].as_str() {
        Some(args) => format!("/{} {}", a["command"].as_str().unwrap(), args),
        None => format!("/{}", a["command"].as_str().unwrap()),
    };

    let (ok, events, stderr) = run(&[
        &wasm,
        "--command",
        &line(&table_action),
        "--command",
        &line(&cancel_action),
    ]);
    assert!(ok, "{stderr}");
    let cards: Vec<&Value> = custom_entries(&events, "pichamber.ui")
        .into_iter()
        .map(|e| &e["data"])
        .collect();
    assert_eq!(cards.len(), 3);
    assert_eq!(cards[0]["title"], "Opened");
    assert_eq!(cards[0]["component"], "markdown");
    assert_eq!(cards[0]["props"]["body"], "Opened `a.ts`");
    assert_eq!(cards[1]["id"], "cards-build");
    assert_eq!(cards[1]["props"]["label"], "Cancelled");
    assert_eq!(
        cards[2],
        &json!({ "protocol": "pichamber-extension-ui", "version": 1, "id": "cards-build", "removed": true })
    );
}

// ---------------------------------------------------------------------------------------------
// word-stats: a package with a relative TS import and an npm dependency

static NPM_INSTALL: Mutex<Option<bool>> = Mutex::new(None);

/// Installs word-stats' locked dependencies when node_modules is missing (it is not committed).
/// Returns false, loudly, only when npm is not available at all.
fn ensure_word_stats_deps() -> bool {
    let mut done = NPM_INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(ok) = *done {
        return ok;
    }
    let dir = repo().join("extensions/word-stats");
    if dir.join("node_modules/ms/package.json").is_file() {
        *done = Some(true);
        return true;
    }
    if Command::new("npm")
        .arg("--version")
        .output()
        .map(|o| !o.status.success())
        .unwrap_or(true)
    {
        eprintln!(
            "\n\n!!!!!!!! SKIPPING word-stats: npm is not installed, so extensions/word-stats/node_modules \
             cannot be installed. Install Node.js/npm to run this test. !!!!!!!!\n\n"
        );
        *done = Some(false);
        return false;
    }
    let out = Command::new("npm")
        .args(["install", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .output()
        .expect("run npm install");
    assert!(
        out.status.success(),
        "npm install in {} failed:\n{}\n{}",
        dir.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        dir.join("node_modules/ms/package.json").is_file(),
        "npm install did not install ms"
    );
    *done = Some(true);
    true
}

#[test]
fn word_stats_package_bundles_local_modules_and_an_npm_dependency() {
    if !ensure_word_stats_deps() {
        return;
    }
    let (_dir, wasm) = build_example("word-stats");
    let report = inspect(&wasm);
    assert_eq!(report["loaded"], true, "{report}");
    assert_eq!(report["manifest"]["name"], "word-stats");
    assert_eq!(report["manifest"]["version"], "1.0.0");
    assert_eq!(
        report["manifest"]["entry"], "/ext/src/index.ts",
        "the entry named by package.json pi.extensions"
    );
    assert_eq!(
        report["manifest"]["modules"], 3,
        "src/index.ts, src/stats.ts and ms"
    );
    assert_eq!(report["tools"][0]["name"], "word_stats");

    let long: String = vec!["word"; 450].join(" ");
    let long_args = json!({ "text": long }).to_string();
    let slow_args = json!({ "text": long, "wordsPerMinute": 100 }).to_string();
    let (ok, events, stderr) = run(&[
        &wasm,
        "--tool",
        "word_stats",
        "--args",
        r#"{"text":"The cat sat. The cat ran! A dog? The end."}"#,
        "--tool",
        "word_stats",
        "--args",
        &long_args,
        "--tool",
        "word_stats",
        "--args",
        &slow_args,
        "--tool",
        "word_stats",
        "--args",
        r#"{"text":""}"#,
    ]);
    assert!(ok, "{stderr}");
    let results = tool_results(&events);
    assert_eq!(results.len(), 4);

    assert_eq!(
        text_of(&results[0]["content"]),
        "10 words (7 unique), 4 sentences, reading time 3 seconds. Most frequent: the (3), cat (2), sat (1)"
    );
    assert_eq!(
        results[0]["details"],
        json!({
            "characters": 41,
            "words": 10,
            "uniqueWords": 7,
            "sentences": 4,
            "topWords": [{ "word": "the", "count": 3 }, { "word": "cat", "count": 2 }, { "word": "sat", "count": 1 }],
            "readingTimeMs": 3000,
            "readingTime": "3 seconds",
        })
    );
    // ms(…, { long: true }) formats the reading time: the npm dependency really runs.
    assert_eq!(results[1]["details"]["readingTimeMs"], 135_000);
    assert_eq!(results[1]["details"]["readingTime"], "2 minutes");
    assert_eq!(results[2]["details"]["readingTimeMs"], 270_000);
    assert_eq!(results[2]["details"]["readingTime"], "5 minutes");
    assert_eq!(
        text_of(&results[3]["content"]),
        "0 words (0 unique), 0 sentences, reading time no time. Most frequent: none"
    );
}

// ---------------------------------------------------------------------------------------------
// Failures

#[test]
fn syntax_error_fails_the_build_with_file_line_col() {
    let dir = tempfile::tempdir().unwrap();
    let src = write_ext(
        dir.path(),
        "broken.ts",
        "export default function (pi) {\n  const x = ;\n}\n",
    );
    let out_wasm = dir.path().join("broken.wasm");
    let out = pichamber(&["build", &src, "-o", &out_wasm.to_string_lossy()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(
        stderr.contains("broken.ts:2:13"),
        "stderr names file:line:col of the stray ';': {stderr}"
    );
    assert!(!out_wasm.exists(), "no component is written");
    assert!(
        std::fs::read_dir(dir.path()).unwrap().all(|e| !e
            .unwrap()
            .file_name()
            .to_string_lossy()
            .ends_with(".partial")),
        "no half-written component is left behind"
    );

    // Running the source directly reports the same.
    let out = pichamber(&["run", &src, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("broken.ts:2:13"));
}

const THROWING_FACTORY: &str = r#"export default function (pi) {
  pi.registerTool({ name: "half_registered", description: "", parameters: { type: "object", properties: {} },
    async execute() { return { content: [], details: {} }; } });
  throw new Error("factory exploded");
}
"#;

#[test]
fn a_throwing_factory_does_not_take_down_the_other_extensions() {
    let (dir, good) = build_example("hello-tool");
    let bad = write_ext(dir.path(), "bad.ts", THROWING_FACTORY);
    let (ok, events, _) = run(&[
        &bad,
        &good,
        "--tool",
        "greet",
        "--args",
        r#"{"name":"Bo"}"#,
        "--tool",
        "half_registered",
    ]);
    assert!(!ok, "an extension error fails the run");
    let errors = errors_of(&events);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["extensionPath"], "bad");
    assert_eq!(errors[0]["event"], "load");
    assert!(
        errors[0]["error"]
            .as_str()
            .unwrap()
            .contains("factory exploded"),
        "{}",
        errors[0]
    );

    let results = tool_results(&events);
    assert_eq!(results[0]["toolName"], "greet");
    assert_eq!(results[0]["isError"], false);
    assert_eq!(text_of(&results[0]["content"]), "Hello, Bo!");
    // What the failed factory registered before throwing is gone with it (as in pi).
    assert_eq!(results[1]["isError"], true);
    assert!(
        text_of(&results[1]["content"]).contains("not found"),
        "{}",
        results[1]
    );
}

#[test]
fn runtime_errors_point_at_source_lines() {
    let dir = tempfile::tempdir().unwrap();
    let src = write_ext(
        dir.path(),
        "typed.ts",
        "import type { ExtensionAPI } from \"@mariozechner/pi-coding-agent\";\n\
         \n\
         interface Unused { x: number }\n\
         \n\
         export default function (pi: ExtensionAPI) {\n\
         \x20 throw new Error(\"boom\");\n\
         }\n",
    );
    let (_, events, _) = run(&[&src]);
    let error = &errors_of(&events)[0];
    assert_eq!(error["error"], "failed to load: boom", "{error}");
    // Positions come from the source, not the bundler's regenerated code (source maps).
    assert!(
        error["stack"]
            .as_str()
            .unwrap_or_default()
            .contains("typed.ts:6:"),
        "the stack names the throwing line of the source: {error}"
    );
}

#[test]
fn a_throwing_tool_is_an_error_result_not_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let src = write_ext(
        dir.path(),
        "thrower.ts",
        r#"export default function (pi) {
  let calls = 0;
  pi.registerTool({ name: "flaky", description: "fails first", parameters: { type: "object", properties: {} },
    async execute() {
      calls++;
      if (calls === 1) throw new Error("disk on fire");
      // A returned isError fails the call under pi 1.6.0; 0.73.1 counts only a throw.
      if (calls === 3) return { content: [{ type: "text", text: "said failed" }], details: {}, isError: true };
      return { content: [{ type: "text", text: `call ${calls} ok` }], details: { calls } };
    } });
}
"#,
    );
    let (_dir, wasm) = build_source(Path::new(&src), "thrower");
    // It names no pi, so it follows 1.6.0 unless told.
    for (pi, returned_error_fails) in [("1.6.0", true), ("0.73.1", false)] {
        let (ok, events, _) = run(&[
            &wasm,
            "--pi-version",
            pi,
            "--tool",
            "flaky",
            "--tool",
            "flaky",
            "--tool",
            "flaky",
        ]);
        assert!(!ok, "an isError result fails the run");
        let results = tool_results(&events);
        assert_eq!(results.len(), 3);
        assert_eq!(
            results[2]["isError"], returned_error_fails,
            "pi {pi}: {}",
            results[2]
        );
        assert_eq!(text_of(&results[2]["content"]), "said failed");
        check_throw_and_recovery(&results, &events);
    }
}

fn check_throw_and_recovery(results: &[&Value], events: &[Value]) {
    assert_eq!(results[0]["isError"], true);
    assert_eq!(text_of(&results[0]["content"]), "disk on fire");
    // The instance survives and keeps its state.
    assert_eq!(results[1]["isError"], false);
    assert_eq!(text_of(&results[1]["content"]), "call 2 ok");
    assert_eq!(results[1]["details"], json!({ "calls": 2 }));
    assert!(
        errors_of(events).is_empty(),
        "a tool error goes to the model, not the extension-error channel"
    );
}

#[test]
fn an_endless_loop_is_stopped_by_the_call_timeout() {
    let (dir, good) = build_example("card-demo");
    let spin = write_ext(
        dir.path(),
        "spin.ts",
        "export default function (pi) {\n  pi.registerCommand(\"spin\", { handler: async () => { while (true) {} } });\n}\n",
    );
    let started = Instant::now();
    let (ok, events, _) = run(&[
        &spin,
        &good,
        "--call-timeout",
        "1",
        "--command",
        "/spin",
        "--command",
        "/cards-open after-the-loop",
    ]);
    let elapsed = started.elapsed();
    assert!(!ok);
    assert!(
        elapsed < Duration::from_secs(30),
        "stopped in time, took {elapsed:?}"
    );

    let errors = errors_of(&events);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0]["extensionPath"], "spin");
    assert_eq!(errors[0]["event"], "command:/spin");
    let message = errors[0]["error"].as_str().unwrap();
    assert!(
        message.contains("limit")
            && ["1s", "1.0s", "1 s", "1 second"]
                .iter()
                .any(|t| message.contains(t)),
        "mentions the time limit of 1 s: {message}"
    );
    assert!(
        message.contains("--call-timeout"),
        "tells how to raise it: {message}"
    );

    // The other extension still answers afterwards.
    let cards = custom_entries(&events, "pichamber.ui");
    assert_eq!(cards.len(), 1);
    assert_eq!(cards[0]["data"]["props"]["body"], "Opened `after-the-loop`");
    let error_at = events
        .iter()
        .position(|e| e["type"] == "extension_error")
        .unwrap();
    let card_at = events.iter().position(|e| e["type"] == "entry").unwrap();
    assert!(error_at < card_at);
}

// ---------------------------------------------------------------------------------------------
// What npm packages of pi extensions reach for (tests/thirdparty.rs)

const NPM_HABITS: &str = r#"import { createRequire } from "node:module";
import { streamSimple } from "@earendil-works/pi-ai/compat";
import { Type } from "typebox";
export default function (pi) {
  pi.registerTool({ name: "habits", label: "habits", description: "", parameters: Type.Object({}),
    async execute() {
      const require = createRequire(import.meta.url);
      let missing;
      try { require.resolve("glimpseui"); } catch (e) { missing = e.code; }
      const out = {
        global: typeof global === "object" && global === globalThis,
        graphemes: [...new Intl.Segmenter(undefined, { granularity: "grapheme" }).segment("a👍🏽🇫🇷é")].map((s) => s.segment),
        path: require("node:path").join("a", "b"),
        missing,
        compat: typeof streamSimple,
      };
      return { content: [{ type: "text", text: JSON.stringify(out) }], details: {} };
    } });
}
"#;

#[test]
fn npm_package_habits_work_global_intl_segmenter_create_require_pi_ai_compat() {
    let dir = tempfile::tempdir().unwrap();
    let src = write_ext(dir.path(), "habits.ts", NPM_HABITS);
    let (_out, wasm) = build_source(Path::new(&src), "habits");
    let (ok, events, stderr) = run(&[&wasm, "--tool", "habits", "--args", "{}"]);
    assert!(ok, "{stderr}");
    let results = tool_results(&events);
    assert_eq!(results.len(), 1, "{events:?}");
    let text = results[0]["content"][0]["text"].as_str().unwrap();
    let got: Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        got,
        json!({
            "global": true,
            "graphemes": ["a", "👍🏽", "🇫🇷", "é"],
            "path": "a/b",
            "missing": "MODULE_NOT_FOUND",
            "compat": "function",
        })
    );
}
