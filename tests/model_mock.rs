//! Model providers end to end: the OpenAI-compatible client against the scripted mock
//! endpoint (and against failing endpoints), the scripted model, script-file errors, and real
//! pi pointed at the mock through a models.json custom provider, whose requests must equal
//! the payloads pichamber builds for the same conversation.
//!
//! The pi tests need real pi from tests/oracle (`npm ci --prefix tests/oracle`).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pichamber_model::mock_server::{self, MockOptions};
use pichamber_model::scripted::Script;
use pichamber_model::{
    LlmContext, ModelClient, ModelsJson, OpenAiConfig, OpenAiModel, PiVersion, ScriptedModel,
    StreamItem, StreamOptions,
};

/// The pi-ai these tests compare with (tests/oracle: 0.73.1's).
const PI: PiVersion = PiVersion::V0_73;

fn pi_options_default() -> StreamOptions {
    StreamOptions {
        pi: PI,
        ..StreamOptions::default()
    }
}
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, watch};

fn script(v: Value) -> Script {
    Script::from_value(v).expect("valid script")
}

fn openai(base_url: &str) -> OpenAiConfig {
    let mut c = OpenAiConfig::new("mock", "mock-model", base_url);
    c.api_key = Some("test-key".into());
    c
}

fn client(config: OpenAiConfig) -> ModelClient {
    ModelClient::OpenAi(OpenAiModel::new(config).unwrap())
}

fn hello_context() -> LlmContext {
    LlmContext {
        system_prompt: "You are a test.".into(),
        messages: vec![
            json!({"role": "user", "content": [{"type": "text", "text": "hi"}],
                              "timestamp": 1}),
        ],
        tools: vec![json!({"name": "read", "description": "Read a file",
                           "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                                          "required": ["path"]}})],
    }
}

/// Runs one call to completion; returns everything it reported and the final message.
async fn call(model: &ModelClient, ctx: &LlmContext) -> (Vec<StreamItem>, Value) {
    let (cancel, _) = watch::channel(false);
    call_with(model, ctx, &cancel, |_| false).await
}

/// Like [`call`], setting `cancel` when `cancel_when` first holds for an event.
async fn call_with(
    model: &ModelClient,
    ctx: &LlmContext,
    cancel: &watch::Sender<bool>,
    cancel_when: impl Fn(&Value) -> bool,
) -> (Vec<StreamItem>, Value) {
    let payload = model.build_payload(ctx, &pi_options_default());
    let (tx, mut rx) = mpsc::unbounded_channel();
    let m = model.clone();
    let receiver = cancel.subscribe();
    let task = tokio::spawn(async move { m.stream(payload, tx, receiver, PI).await });
    let mut items = Vec::new();
    while let Some(item) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
        .await
        .expect("the model stream hung")
    {
        if let StreamItem::Event(e) = &item
            && cancel_when(e)
        {
            cancel.send_replace(true);
        }
        items.push(item);
    }
    (items, task.await.unwrap())
}

fn events(items: &[StreamItem]) -> Vec<Value> {
    items
        .iter()
        .filter_map(|i| match i {
            StreamItem::Event(e) => Some(e.clone()),
            StreamItem::Response { .. } | StreamItem::Provider(_) => None,
        })
        .collect()
}

fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

/// Timestamps differ between runs; everything else must not.
fn without_timestamps(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| *k != "timestamp")
                .map(|(k, v)| (k.clone(), without_timestamps(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_timestamps).collect()),
        other => other.clone(),
    }
}

#[tokio::test]
async fn openai_streams_text_with_usage() {
    let server = mock_server::start(script(json!({"turns": [
        {"text": "Hello world", "chunks": 3, "usage": {"input": 10, "output": 5, "cacheRead": 4}}
    ]})))
    .await
    .unwrap();
    let model = client(openai(&server.base_url()));
    let (items, message) = call(&model, &hello_context()).await;

    let StreamItem::Response { status, headers } = &items[0] else {
        panic!("the response comes first: {items:?}");
    };
    assert_eq!(*status, 200);
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["x-request-id"], "req_mock_1");
    let events = events(&items);
    assert_eq!(
        kinds(&events),
        [
            "start",
            "text_start",
            "text_delta",
            "text_delta",
            "text_delta",
            "text_end",
            "done"
        ]
    );
    let deltas: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "text_delta")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, ["Hell", "o wo", "rld"]);
    // Each partial is the message at that moment.
    assert_eq!(events[2]["partial"]["content"][0]["text"], "Hell");
    assert_eq!(events[5]["content"], "Hello world");
    assert_eq!(events[6]["reason"], "stop");
    assert_eq!(events[6]["message"], message);

    assert_eq!(
        without_timestamps(&message),
        json!({
            "role": "assistant",
            "content": [{"type": "text", "text": "Hello world"}],
            "api": "openai-completions", "provider": "mock", "model": "mock-model",
            "usage": {"input": 10, "output": 5, "cacheRead": 4, "cacheWrite": 0, "totalTokens": 19,
                      "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
            "stopReason": "stop",
            "responseId": "chatcmpl-scripted-1",
        })
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(
        requests[0],
        model.build_payload(&hello_context(), &pi_options_default())
    );
    let recorded = server.recorded();
    assert_eq!(recorded[0].path, "/v1/chat/completions");
    assert_eq!(recorded[0].headers["authorization"], "Bearer test-key");
}

#[tokio::test]
async fn openai_reads_reasoning_content_as_thinking() {
    let server = mock_server::start(script(json!({"turns": [
        {"thinking": "Let me think.", "text": "Answer.", "chunks": 2}
    ]})))
    .await
    .unwrap();
    let (items, message) = call(&client(openai(&server.base_url())), &hello_context()).await;
    assert_eq!(
        kinds(&events(&items)),
        [
            "start",
            "thinking_start",
            "thinking_delta",
            "thinking_delta",
            "text_start",
            "text_delta",
            "text_delta",
            "thinking_end",
            "text_end",
            "done"
        ]
    );
    assert_eq!(
        message["content"],
        json!([
            {"type": "thinking", "thinking": "Let me think.", "thinkingSignature": "reasoning_content"},
            {"type": "text", "text": "Answer."},
        ])
    );
}

#[tokio::test]
async fn openai_accumulates_two_tool_calls() {
    let server = mock_server::start(script(json!({"turns": [{
        "text": "Reading both.",
        "toolCalls": [
            {"id": "call_a", "name": "read", "arguments": {"path": "a.txt", "limit": 20}},
            {"name": "bash", "arguments": {"command": "ls -la", "timeout": 1.5}}
        ],
        "chunks": 3,
    }]})))
    .await
    .unwrap();
    let (items, message) = call(&client(openai(&server.base_url())), &hello_context()).await;
    let events = events(&items);
    assert_eq!(message["stopReason"], "toolUse");
    assert_eq!(
        message["content"],
        json!([
            {"type": "text", "text": "Reading both."},
            {"type": "toolCall", "id": "call_a", "name": "read", "arguments": {"path": "a.txt", "limit": 20}},
            {"type": "toolCall", "id": "call_1_2", "name": "bash",
             "arguments": {"command": "ls -la", "timeout": 1.5}},
        ])
    );
    let kinds = kinds(&events);
    assert_eq!(kinds.iter().filter(|k| *k == "toolcall_start").count(), 2);
    // The id chunk (empty arguments) then three argument pieces per call.
    assert_eq!(kinds.iter().filter(|k| *k == "toolcall_delta").count(), 8);
    assert_eq!(
        &kinds[kinds.len() - 4..],
        ["text_end", "toolcall_end", "toolcall_end", "done"]
    );
    // While streaming, a call carries pi's scratch fields and the arguments parsed so far.
    let first_piece = events
        .iter()
        .find(|e| e["type"] == "toolcall_delta" && e["delta"] != "")
        .unwrap();
    let streaming = &first_piece["partial"]["content"][1];
    assert_eq!(streaming["streamIndex"], 0);
    assert_eq!(streaming["partialArgs"], first_piece["delta"]);
    assert!(streaming["arguments"].is_object());
    let end = events.iter().find(|e| e["type"] == "toolcall_end").unwrap();
    assert_eq!(end["contentIndex"], 1);
    assert_eq!(end["toolCall"], message["content"][1]);
}

/// A server that always answers `status` with `body`, counting requests.
async fn failing_server(status: u16, body: &'static str) -> (SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move || {
            let counter = counter.clone();
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
                (
                    axum::http::StatusCode::from_u16(status).unwrap(),
                    [("retry-after-ms", "5")],
                    body,
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, hits)
}

#[tokio::test]
async fn http_500_is_retried_then_reported_with_its_body() {
    let (addr, hits) = failing_server(500, r#"{"error":{"message":"upstream exploded"}}"#).await;
    let (items, message) = call(
        &client(openai(&format!("http://{addr}/v1"))),
        &hello_context(),
    )
    .await;
    assert_eq!(
        hits.load(Ordering::SeqCst),
        3,
        "the first try and two retries"
    );
    assert_eq!(message["stopReason"], "error");
    assert_eq!(message["errorMessage"], "500 upstream exploded");
    assert_eq!(message["content"], json!([]));
    // No response is reported for a failed request, and no start event.
    assert!(
        !items
            .iter()
            .any(|i| matches!(i, StreamItem::Response { .. }))
    );
    assert_eq!(kinds(&events(&items)), ["error"]);
    assert_eq!(events(&items)[0]["error"], message);

    let (addr, hits) = failing_server(502, "<html>bad gateway</html>").await;
    let mut config = openai(&format!("http://{addr}/v1"));
    config.max_retries = 0;
    let (_, message) = call(&client(config), &hello_context()).await;
    assert_eq!(hits.load(Ordering::SeqCst), 1);
    assert_eq!(message["errorMessage"], "502 <html>bad gateway</html>");
}

#[tokio::test]
async fn wrong_key_and_exhausted_script_are_not_retried() {
    let server = mock_server::start_with(
        script(json!({"turns": [{"text": "only one"}]})),
        MockOptions {
            api_key: Some("right".into()),
            ..MockOptions::default()
        },
    )
    .await
    .unwrap();
    let mut config = openai(&server.base_url());
    config.api_key = Some("wrong".into());
    let (_, message) = call(&client(config.clone()), &hello_context()).await;
    assert_eq!(message["errorMessage"], "401 Incorrect API key provided.");
    assert_eq!(server.requests().len(), 1);

    config.api_key = Some("right".into());
    let model = client(config);
    let (_, first) = call(&model, &hello_context()).await;
    assert_eq!(first["content"][0]["text"], "only one");
    let (_, second) = call(&model, &hello_context()).await;
    assert_eq!(
        second["errorMessage"],
        "400 Script exhausted: model call 2 has no scripted turn (the script has 1)"
    );
    assert_eq!(server.requests().len(), 3);

    config = openai(&server.base_url());
    config.api_key = None;
    let (_, message) = call(&client(config), &hello_context()).await;
    assert_eq!(message["errorMessage"], "No API key for provider: mock");
}

#[tokio::test]
async fn connection_refused_is_a_connection_error() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut config = openai(&format!("http://127.0.0.1:{port}/v1"));
    config.max_retries = 0;
    let (items, message) = call(&client(config), &hello_context()).await;
    assert_eq!(message["stopReason"], "error");
    assert_eq!(message["errorMessage"], "Connection error.");
    assert_eq!(kinds(&events(&items)), ["error"]);
}

async fn cancel_mid_stream(model: &ModelClient) -> (Vec<Value>, Value) {
    let (cancel, _) = watch::channel(false);
    let (items, message) = call_with(model, &hello_context(), &cancel, |e| {
        e["type"] == "text_delta"
    })
    .await;
    (events(&items), message)
}

#[tokio::test]
async fn cancel_mid_stream_aborts() {
    // The second delta would come a minute later: only the cancel can end this call.
    let turns = json!({"turns": [{"text": "abcdef", "chunks": 3, "delayMs": 60000}]});
    let server = mock_server::start(script(turns.clone())).await.unwrap();
    let (events, message) = cancel_mid_stream(&client(openai(&server.base_url()))).await;
    assert_eq!(message["stopReason"], "aborted");
    assert_eq!(message["errorMessage"], "Request was aborted");
    assert_eq!(message["content"], json!([{"type": "text", "text": "ab"}]));
    assert_eq!(
        kinds(&events),
        ["start", "text_start", "text_delta", "text_end", "error"]
    );
    assert_eq!(events[4]["reason"], "aborted");

    let scripted = ModelClient::Scripted(ScriptedModel::new(script(turns)));
    let (scripted_events, scripted_message) = cancel_mid_stream(&scripted).await;
    assert_eq!(kinds(&scripted_events), kinds(&events));
    assert_eq!(scripted_message["errorMessage"], "Request was aborted");
    assert_eq!(scripted_message["content"], message["content"]);
}

#[tokio::test]
async fn cancel_before_the_response_aborts_without_start() {
    let (cancel, _) = watch::channel(true);
    let server = mock_server::start(script(json!({"turns": [{"text": "x"}]})))
        .await
        .unwrap();
    let (items, message) = call_with(
        &client(openai(&server.base_url())),
        &hello_context(),
        &cancel,
        |_| false,
    )
    .await;
    assert_eq!(message["stopReason"], "aborted");
    assert_eq!(message["errorMessage"], "Request was aborted.");
    assert_eq!(kinds(&events(&items)), ["error"]);
}

/// An `httpStatus` turn: the mock answers with that status, and the in-process scripted
/// model fails the same way, with the SDK's retries taking further turns in both.
#[tokio::test]
async fn http_status_turns_fail_alike_over_http_and_scripted() {
    let turns = json!({"turns": [
        {"httpStatus": 500, "errorMessage": "final", "headers": {"x-should-retry": "false"}},
        {"httpStatus": 429, "errorMessage": "slow down", "headers": {"retry-after-ms": "1"}},
        {"text": "after the SDK's retry"},
        {"httpStatus": 400, "errorMessage": "bad"},
    ]});
    let server = mock_server::start(script(turns.clone())).await.unwrap();
    let config = openai(&server.base_url());
    let over_http = client(config.clone());
    let scripted_model = ScriptedModel::with_config(script(turns), config);
    let scripted = ModelClient::Scripted(scripted_model.clone());
    let mut messages = Vec::new();
    for call_number in 0..3 {
        let (_, http_message) = call(&over_http, &hello_context()).await;
        let (_, message) = call(&scripted, &hello_context()).await;
        assert_eq!(
            without_timestamps(&message),
            without_timestamps(&http_message),
            "call {call_number}"
        );
        messages.push(message);
    }
    assert_eq!(messages[0]["errorMessage"], "500 final");
    assert_eq!(messages[1]["content"][0]["text"], "after the SDK's retry");
    assert_eq!(messages[2]["errorMessage"], "400 bad");
    assert_eq!(server.requests().len(), 4);
    assert_eq!(scripted_model.payloads().len(), 4);
    assert!(
        Script::from_value(json!({"turns": [{"httpStatus": 200}]})).is_err()
            && Script::from_value(json!({"turns": [{"headers": {"a": "b"}}]})).is_err()
    );
}

#[tokio::test]
async fn scripted_model_plays_what_the_mock_serves() {
    let turns = json!({"turns": [
        {"thinking": "hmm", "text": "Let me look.", "chunks": 2,
         "toolCalls": [{"id": "c1", "name": "read", "arguments": {"path": "x"}}],
         "usage": {"input": 3, "output": 4}},
        {"text": "Half an answer", "stopReason": "length"},
        {"text": "partial", "stopReason": "error", "errorMessage": "overloaded"},
    ]});
    let server = mock_server::start(script(turns.clone())).await.unwrap();
    let config = openai(&server.base_url());
    let over_http = client(config.clone());
    let scripted_model = ScriptedModel::with_config(script(turns), config);
    let scripted = ModelClient::Scripted(scripted_model.clone());
    for turn in 0..3 {
        let (http_items, http_message) = call(&over_http, &hello_context()).await;
        let (items, message) = call(&scripted, &hello_context()).await;
        assert_eq!(
            without_timestamps(&message),
            without_timestamps(&http_message),
            "turn {turn}"
        );
        assert_eq!(
            without_timestamps(&Value::Array(events(&items))),
            without_timestamps(&Value::Array(events(&http_items))),
            "turn {turn}"
        );
    }
    let (_, exhausted) = call(&scripted, &hello_context()).await;
    assert_eq!(
        exhausted["errorMessage"],
        "Script exhausted: model call 4 has no scripted turn (the script has 3)"
    );
    assert_eq!(exhausted["stopReason"], "error");
    // The scripted model records the payloads it was given, as the mock records requests.
    assert_eq!(scripted_model.payloads().len(), 4);
    assert_eq!(scripted_model.payloads()[0], server.requests()[0]);
    assert_eq!(scripted_model.turns_left(), 0);
}

#[tokio::test]
async fn scripted_error_turn_and_length() {
    let model = ModelClient::Scripted(ScriptedModel::new(script(json!({"turns": [
        {"text": "cut", "stopReason": "length"},
        {"text": "so far", "stopReason": "error"},
    ]}))));
    let (_, first) = call(&model, &hello_context()).await;
    assert_eq!(first["stopReason"], "length");
    let (items, second) = call(&model, &hello_context()).await;
    assert_eq!(second["stopReason"], "error");
    assert_eq!(second["errorMessage"], "Scripted error");
    assert_eq!(
        second["content"],
        json!([{"type": "text", "text": "so far"}])
    );
    // A stream that fails does not end its blocks, as in pi.
    assert_eq!(
        kinds(&events(&items)),
        ["start", "text_start", "text_delta", "error"]
    );
    assert_eq!(second["provider"], "scripted");
    assert_eq!(model.info()["api"], "openai-completions");
}

#[test]
fn script_file_errors_name_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("turns.json");
    std::fs::write(
        &path,
        r#"{"turns": [{"text": "a"}, {"toolCalls": [{"id": "x"}]}]}"#,
    )
    .unwrap();
    let err = format!("{:#}", Script::load(&path).unwrap_err());
    assert!(err.contains(&path.display().to_string()), "{err}");
    assert!(
        err.contains("turns[1].toolCalls[0]: missing field `name`"),
        "{err}"
    );

    std::fs::write(&path, "{\"turns\": [").unwrap();
    let err = format!("{:#}", Script::load(&path).unwrap_err());
    assert!(
        err.contains("invalid JSON") && err.contains("line 1"),
        "{err}"
    );

    let missing = dir.path().join("nope.json");
    let err = format!("{:#}", Script::load(&missing).unwrap_err());
    assert!(err.contains("nope.json"), "{err}");
}

// ---- real pi against the mock ----

fn repo() -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .canonicalize()
        .unwrap()
}

fn pi_bin() -> PathBuf {
    let bin = repo().join("tests/oracle/node_modules/.bin/pi");
    assert!(
        bin.exists(),
        "real pi is missing ({}): run `npm ci --prefix tests/oracle`",
        bin.display()
    );
    bin
}

/// Runs `pi --mode rpc` on one prompt and returns its events up to `agent_end`.
async fn run_pi(agent_dir: &Path, cwd: &Path, args: &[&str], env: &[(&str, &str)]) -> Vec<Value> {
    let mut cmd = tokio::process::Command::new(pi_bin());
    cmd.args(["--mode", "rpc", "--no-session", "--offline"])
        .args(args)
        .current_dir(cwd)
        .env("PI_CODING_AGENT_DIR", agent_dir)
        .env("PI_OFFLINE", "1")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn pi");
    let mut stdin = child.stdin.take().unwrap();
    stdin
        .write_all(b"{\"type\":\"prompt\",\"message\":\"Read a.txt and b.txt\"}\n")
        .await
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut events = Vec::new();
    let read = async {
        while let Some(line) = lines.next_line().await.unwrap() {
            let event: Value = serde_json::from_str(&line).unwrap_or(json!({"raw": line}));
            let done = event["type"] == "agent_end";
            events.push(event);
            if done {
                return true;
            }
        }
        false
    };
    let finished = tokio::time::timeout(Duration::from_secs(120), read).await;
    let _ = child.start_kill();
    let output = child.wait_with_output().await.unwrap();
    assert!(
        matches!(finished, Ok(true)),
        "pi did not reach agent_end; stderr:\n{}\nevents: {events:#?}",
        String::from_utf8_lossy(&output.stderr)
    );
    events
}

/// The context pi had for its `n`th model call: its system prompt and tools (from the
/// request), and the conversation before the `n`th assistant message.
fn pi_context(request: &Value, messages: &[Value], n: usize) -> LlmContext {
    let sent = request["messages"].as_array().unwrap();
    let system_prompt = match sent[0]["role"].as_str() {
        Some("system" | "developer") => sent[0]["content"].as_str().unwrap().to_string(),
        _ => String::new(),
    };
    let assistant_at = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m["role"] == "assistant")
        .nth(n)
        .map(|(i, _)| i)
        .unwrap();
    let tools = request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| {
                    let f = &t["function"];
                    json!({"name": f["name"], "description": f["description"], "parameters": f["parameters"]})
                })
                .collect()
        })
        .unwrap_or_default();
    LlmContext {
        system_prompt,
        messages: messages[..assistant_at].to_vec(),
        tools,
    }
}

/// An event without its `partial` snapshot (pi's RPC output serialises the shared partial
/// object late, so it may show a later state than the event's).
fn without_partial(e: &Value) -> Value {
    let mut e = e.clone();
    e.as_object_mut().unwrap().shift_remove("partial");
    without_timestamps(&e)
}

/// pi's `message_update` events of each assistant message, as assistant-message events.
fn pi_assistant_events(events: &[Value]) -> Vec<Vec<Value>> {
    let mut out: Vec<Vec<Value>> = Vec::new();
    for e in events {
        if e["type"] == "message_start" && e["message"]["role"] == "assistant" {
            out.push(Vec::new());
        }
        if e["type"] == "message_update" {
            out.last_mut()
                .unwrap()
                .push(without_partial(&e["assistantMessageEvent"]));
        }
    }
    out
}

fn assert_same_payload(pi_sent: &Value, ours: &Value, what: &str) {
    if pi_sent != ours {
        let a = serde_json::to_string_pretty(pi_sent).unwrap();
        let b = serde_json::to_string_pretty(ours).unwrap();
        let diff = similar::TextDiff::from_lines(&a, &b)
            .unified_diff()
            .header("pi", "pichamber")
            .to_string();
        panic!("{what}: pichamber's payload differs from pi's:\n{diff}");
    }
}

struct PiSetup {
    _dir: tempfile::TempDir,
    agent: PathBuf,
    cwd: PathBuf,
}

fn pi_setup(models_json: &Value) -> PiSetup {
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("agent");
    let cwd = dir.path().join("project");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::write(agent.join("models.json"), models_json.to_string()).unwrap();
    std::fs::write(cwd.join("a.txt"), "alpha\n").unwrap();
    std::fs::write(cwd.join("b.txt"), "beta\n").unwrap();
    PiSetup {
        _dir: dir,
        agent,
        cwd,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_pi_reads_the_mock_and_sends_our_payload() {
    let turns = json!({"turns": [
        {"text": "Reading both files.", "chunks": 2,
         "toolCalls": [
            {"id": "call_a", "name": "read", "arguments": {"path": "a.txt"}},
            {"id": "call_b", "name": "read", "arguments": {"path": "b.txt", "limit": 10}}],
         "usage": {"input": 100, "output": 20}},
        {"text": "a.txt says alpha, b.txt says beta.", "chunks": 3,
         "usage": {"input": 150, "output": 12, "cacheRead": 100}},
    ]});
    let server = mock_server::start_with(
        script(turns.clone()),
        MockOptions {
            api_key: Some("secret-from-env".into()),
            model_id: "mock-model".into(),
        },
    )
    .await
    .unwrap();
    // pi resolves apiKey as an environment variable name when one is set.
    let models = json!({"providers": {"mock": {
        "baseUrl": server.base_url(), "api": "openai-completions", "apiKey": "PICHAMBER_TEST_MOCK_KEY",
        "models": [{"id": "mock-model"}],
    }}});
    let setup = pi_setup(&models);
    let pi_events = run_pi(
        &setup.agent,
        &setup.cwd,
        &["--provider", "mock", "--model", "mock-model"],
        &[("PICHAMBER_TEST_MOCK_KEY", "secret-from-env")],
    )
    .await;

    let end = pi_events.last().unwrap();
    let messages = end["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "toolResult", "toolResult", "assistant"]
    );
    let first = &messages[1];
    assert_eq!(first["stopReason"], "toolUse");
    assert_eq!(
        first["content"],
        json!([
            {"type": "text", "text": "Reading both files."},
            {"type": "toolCall", "id": "call_a", "name": "read", "arguments": {"path": "a.txt"}},
            {"type": "toolCall", "id": "call_b", "name": "read", "arguments": {"path": "b.txt", "limit": 10}},
        ])
    );
    assert_eq!(first["usage"]["input"], 100);
    assert_eq!(first["usage"]["output"], 20);
    assert_eq!(first["responseId"], "chatcmpl-scripted-1");
    assert_eq!(messages[2]["content"][0]["text"], "alpha\n");
    assert_eq!(messages[3]["content"][0]["text"], "beta\n");
    let last = &messages[4];
    assert_eq!(
        last["content"][0]["text"],
        "a.txt says alpha, b.txt says beta."
    );
    assert_eq!(last["usage"]["cacheRead"], 100);
    assert_eq!(last["usage"]["input"], 150);

    let config = ModelsJson::load(&setup.agent.join("models.json"))
        .unwrap()
        .openai_config("mock", "mock-model")
        .unwrap();

    // pichamber's scripted model, playing the same turns as this model, produces the messages
    // and the events pi produced reading them from the mock.
    let scripted = ModelClient::Scripted(ScriptedModel::with_config(script(turns), config.clone()));
    let pi_updates = pi_assistant_events(&pi_events);
    for (n, at) in [(0, 1), (1, 4)] {
        let (items, ours) = call(&scripted, &hello_context()).await;
        assert_eq!(
            without_timestamps(&ours),
            without_timestamps(&messages[at]),
            "assistant message {n}"
        );
        let ours: Vec<Value> = events(&items)
            .iter()
            .filter(|e| e["type"] != "start" && e["type"] != "done")
            .map(without_partial)
            .collect();
        assert_eq!(ours, pi_updates[n], "events of assistant message {n}");
    }

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        server.recorded()[0].headers["authorization"],
        "Bearer secret-from-env"
    );
    let opts = StreamOptions {
        thinking_level: "medium".into(), // pi's default; clamped to off for this model
        ..pi_options_default()
    };
    for (n, request) in requests.iter().enumerate() {
        let ctx = pi_context(request, messages, n);
        let ours = config.build_payload(&ctx, &opts);
        assert_same_payload(request, &ours, &format!("request {}", n + 1));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_pi_with_a_reasoning_model_replays_reasoning_as_we_do() {
    let turns = json!({"turns": [
        {"thinking": "The user wants a.txt.", "text": "Looking.", "chunks": 2,
         "toolCalls": [{"id": "call_1", "name": "read", "arguments": {"path": "a.txt"}}],
         "usage": {"input": 2000, "output": 300, "cacheRead": 1000}},
        {"thinking": "Got it.", "text": "It says alpha."},
    ]});
    let server = mock_server::start(script(turns.clone())).await.unwrap();
    let models = json!({"providers": {"thinker": {
        "baseUrl": server.base_url(), "api": "openai-completions", "apiKey": "literal-key",
        "models": [{"id": "think-1", "name": "Thinker", "reasoning": true, "input": ["text", "image"],
                    "contextWindow": 64000, "maxTokens": 50000,
                    "cost": {"input": 1, "output": 2, "cacheRead": 0.5, "cacheWrite": 0}}],
    }}});
    let setup = pi_setup(&models);
    let events = run_pi(
        &setup.agent,
        &setup.cwd,
        &[
            "--provider",
            "thinker",
            "--model",
            "think-1",
            "--thinking",
            "high",
        ],
        &[],
    )
    .await;
    let messages = events.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(
        messages[1]["content"][0],
        json!({"type": "thinking", "thinking": "The user wants a.txt.",
               "thinkingSignature": "reasoning_content"})
    );

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    // What pi sends for a reasoning model: the developer role and the effort.
    assert_eq!(requests[0]["messages"][0]["role"], "developer");
    assert_eq!(requests[0]["reasoning_effort"], "high");
    assert_eq!(requests[0]["max_completion_tokens"], 32000);
    assert_eq!(
        requests[1]["messages"][2]["reasoning_content"],
        "The user wants a.txt."
    );

    let config = ModelsJson::load(&setup.agent.join("models.json"))
        .unwrap()
        .openai_config("thinker", "think-1")
        .unwrap();
    let opts = StreamOptions {
        thinking_level: "high".into(),
        ..pi_options_default()
    };
    for (n, request) in requests.iter().enumerate() {
        let ctx = pi_context(request, &messages, n);
        let ours = config.build_payload(&ctx, &opts);
        assert_same_payload(request, &ours, &format!("request {}", n + 1));
    }
    // Same messages (usage priced with the model's cost) from our scripted model.
    let scripted = ModelClient::Scripted(ScriptedModel::with_config(script(turns), config.clone()));
    let pi_updates = pi_assistant_events(&events);
    for (n, at) in [(0, 1), (1, 3)] {
        let (items, ours) = call(&scripted, &hello_context()).await;
        assert_eq!(
            without_timestamps(&ours),
            without_timestamps(&messages[at]),
            "assistant message {n}"
        );
        let ours: Vec<Value> = self::events(&items)
            .iter()
            .filter(|e| e["type"] != "start" && e["type"] != "done")
            .map(without_partial)
            .collect();
        assert_eq!(ours, pi_updates[n], "events of assistant message {n}");
    }
    assert_eq!(
        messages[1]["usage"]["cost"]["cacheRead"],
        json!(0.5 / 1_000_000.0 * 1000.0)
    );

    let scripted = ModelClient::Scripted(ScriptedModel::with_config(
        script(json!({"turns": [{"text": "x", "usage": {"input": 1000000, "output": 10}}]})),
        config,
    ));
    let (_, priced) = call(&scripted, &hello_context()).await;
    assert_eq!(priced["usage"]["cost"]["input"], 1);
    assert_eq!(
        priced["usage"]["cost"]["output"],
        json!(2.0 / 1_000_000.0 * 10.0)
    );
}

// ---- payloads against pi-ai's own builder ----

/// The payloads pi-ai's `streamSimple` builds for `(model, context, options)` cases,
/// captured with `onPayload` and aborted before any request is sent.
fn pi_ai_payloads(cases: &[Value]) -> Vec<Value> {
    const SCRIPT: &str = r#"
import { streamSimple } from "@mariozechner/pi-ai";
let text = "";
for await (const chunk of process.stdin) text += chunk;
const out = [];
for (const c of JSON.parse(text)) {
  let payload = null;
  const ctrl = new AbortController();
  const s = streamSimple(c.model, c.context, {
    ...c.options, apiKey: "k", maxRetries: 0, signal: ctrl.signal,
    onPayload: (p) => { payload = JSON.parse(JSON.stringify(p)); ctrl.abort(); return undefined; },
  });
  const result = await s.result();
  out.push(payload ?? { failed: result.errorMessage });
}
process.stdout.write(JSON.stringify(out));
"#;
    pi_bin();
    let mut child = std::process::Command::new("node")
        .args(["--input-type=module", "-e", SCRIPT])
        .current_dir(repo().join("tests/oracle"))
        .env_remove("PI_CACHE_RETENTION")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run node");
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(Value::Array(cases.to_vec()).to_string().as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn model_config(provider: &str, id: &str, base_url: &str, patch: Value) -> OpenAiConfig {
    let mut c = OpenAiConfig::new(provider, id, base_url);
    if let Some(r) = patch["reasoning"].as_bool() {
        c.reasoning = r;
    }
    if let Some(m) = patch["thinkingLevelMap"].as_object() {
        c.thinking_level_map = m.clone();
    }
    if let Some(i) = patch["input"].as_array() {
        c.input = i.iter().map(|v| v.as_str().unwrap().to_string()).collect();
    }
    if let Some(m) = patch["maxTokens"].as_u64() {
        c.max_tokens = m;
    }
    if let Some(m) = patch["compat"].as_object() {
        c.compat = m.clone();
    }
    c
}

fn opts(v: Value) -> StreamOptions {
    StreamOptions {
        thinking_level: v["thinking"].as_str().unwrap_or("off").into(),
        session_id: v["sessionId"].as_str().map(str::to_string),
        max_tokens: v["maxTokens"].as_u64(),
        temperature: v["temperature"].as_f64(),
        cache_retention: v["cacheRetention"].as_str().map(str::to_string),
        tool_choice: v.get("toolChoice").cloned(),
        pi: PI,
    }
}

/// pi-ai's `SimpleStreamOptions` for the same options.
fn pi_options(o: &StreamOptions) -> Value {
    let mut v = serde_json::Map::new();
    if o.thinking_level != "off" {
        v.insert("reasoning".into(), json!(o.thinking_level));
    }
    if let Some(s) = &o.session_id {
        v.insert("sessionId".into(), json!(s));
    }
    if let Some(m) = o.max_tokens {
        v.insert("maxTokens".into(), json!(m));
    }
    if let Some(t) = o.temperature {
        v.insert("temperature".into(), json!(t));
    }
    if let Some(r) = &o.cache_retention {
        v.insert("cacheRetention".into(), json!(r));
    }
    if let Some(c) = &o.tool_choice {
        v.insert("toolChoice".into(), c.clone());
    }
    Value::Object(v)
}

fn assistant(provider: &str, model: &str, content: Value, stop: &str) -> Value {
    json!({"role": "assistant", "content": content, "api": "openai-completions",
           "provider": provider, "model": model,
           "usage": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
                     "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}},
           "stopReason": stop, "timestamp": 1})
}

fn tool_result(id: &str, name: &str, content: Value) -> Value {
    json!({"role": "toolResult", "toolCallId": id, "toolName": name, "content": content,
           "isError": false, "timestamp": 1})
}

#[test]
fn payloads_match_pi_ai_across_contexts_and_dialects() {
    let local = "http://127.0.0.1:9/v1";
    let image = json!({"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"});
    let tools = vec![json!({"name": "read", "description": "Read a file",
                            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}})];
    let user = |text: &str| json!({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1});
    let call_read = |id: &str| json!({"type": "toolCall", "id": id, "name": "read", "arguments": {"path": "a", "n": 2.0}});
    let history = vec![
        user("look at this"),
        assistant(
            "p",
            "m",
            json!([
            {"type": "thinking", "thinking": "mine", "thinkingSignature": "reasoning_content"},
            {"type": "text", "text": "Sure."}, {"type": "text", "text": "  "},
            call_read("c1"), call_read("c2")]),
            "toolUse",
        ),
        tool_result(
            "c1",
            "read",
            json!([{"type": "text", "text": "one"}, {"type": "text", "text": "two"}]),
        ),
        tool_result("c2", "read", json!([image.clone()])),
        assistant("p", "m", json!([]), "aborted"),
        assistant(
            "p",
            "m",
            json!([{"type": "text", "text": "failed"}]),
            "error",
        ),
        assistant(
            "anthropic",
            "claude",
            json!([
            {"type": "thinking", "thinking": "theirs", "thinkingSignature": "sig"},
            {"type": "thinking", "thinking": "secret", "thinkingSignature": "x", "redacted": true},
            {"type": "text", "text": "Checking", "textSignature": "t"},
            {"type": "toolCall", "id": "call_9|fc_abc+/=", "name": "read", "arguments": {},
             "thoughtSignature": "{\"type\":\"reasoning.encrypted\",\"id\":\"call_9\",\"data\":\"d\"}"}]),
            "toolUse",
        ),
        tool_result(
            "call_9|fc_abc+/=",
            "read",
            json!([{"type": "text", "text": "r"}]),
        ),
        assistant(
            "p",
            "m",
            json!([{"type": "toolCall", "id": "orphan", "name": "read", "arguments": {}}]),
            "toolUse",
        ),
        json!({"role": "user", "content": [{"type": "text", "text": "and this"}, image.clone()], "timestamp": 1}),
        json!({"role": "user", "content": "plain string", "timestamp": 1}),
    ];
    let ctx = |messages: Vec<Value>, tools: Vec<Value>| LlmContext {
        system_prompt: "You are a test.".into(),
        messages,
        tools,
    };
    let cases: Vec<(OpenAiConfig, LlmContext, StreamOptions)> = vec![
        (
            model_config("p", "m", local, json!({})),
            ctx(history.clone(), tools.clone()),
            opts(json!({})),
        ),
        (
            model_config("p", "m", local, json!({"input": ["text", "image"]})),
            ctx(history.clone(), vec![]),
            opts(json!({"temperature": 0.2, "maxTokens": 77, "toolChoice": "auto"})),
        ),
        (
            model_config(
                "openai",
                "m",
                "https://api.openai.com/v1",
                json!({"reasoning": true}),
            ),
            ctx(history.clone(), tools.clone()),
            opts(json!({"thinking": "xhigh", "sessionId": "s-1"})),
        ),
        (
            model_config(
                "p",
                "m",
                local,
                json!({"reasoning": true, "thinkingLevelMap": {"off": "none", "xhigh": "max", "low": null}}),
            ),
            ctx(history.clone(), tools.clone()),
            opts(json!({"thinking": "off", "cacheRetention": "long", "sessionId": "s"})),
        ),
        (
            model_config(
                "p",
                "m",
                local,
                json!({"reasoning": true, "thinkingLevelMap": {"xhigh": "max", "low": null}}),
            ),
            ctx(vec![user("hi")], tools.clone()),
            opts(json!({"thinking": "low"})),
        ),
        (
            model_config(
                "p",
                "m",
                local,
                json!({"reasoning": true, "thinkingLevelMap": {"xhigh": "max"}}),
            ),
            ctx(vec![user("hi")], tools.clone()),
            opts(json!({"thinking": "xhigh"})),
        ),
        (
            model_config(
                "p",
                "m",
                local,
                json!({"reasoning": true, "compat": {
            "requiresToolResultName": true, "requiresAssistantAfterToolResult": true,
            "requiresThinkingAsText": true, "maxTokensField": "max_tokens", "supportsStore": false,
            "supportsStrictMode": false, "supportsUsageInStreaming": false,
            "supportsDeveloperRole": false, "supportsReasoningEffort": false}}),
            ),
            ctx(history.clone(), tools.clone()),
            opts(json!({"thinking": "medium"})),
        ),
        (
            model_config(
                "deepseek",
                "d",
                "https://api.deepseek.com/v1",
                json!({"reasoning": true}),
            ),
            ctx(history.clone(), tools.clone()),
            opts(json!({"thinking": "high"})),
        ),
        (
            model_config(
                "zai",
                "z",
                "https://api.z.ai/v1",
                json!({"reasoning": true}),
            ),
            ctx(vec![user("hi")], vec![]),
            opts(json!({"thinking": "high"})),
        ),
        (
            model_config(
                "q",
                "q",
                local,
                json!({"reasoning": true, "compat": {"thinkingFormat": "qwen-chat-template"}}),
            ),
            ctx(vec![user("hi")], vec![]),
            opts(json!({})),
        ),
        (
            model_config(
                "q",
                "q",
                local,
                json!({"reasoning": true, "compat": {"thinkingFormat": "qwen"}}),
            ),
            ctx(vec![user("hi")], vec![]),
            opts(json!({"thinking": "low"})),
        ),
        (
            model_config(
                "openrouter",
                "anthropic/claude-x",
                "https://openrouter.ai/api/v1",
                json!({"reasoning": true, "compat": {"openRouterRouting": {"only": ["anthropic"]}}}),
            ),
            ctx(history.clone(), tools.clone()),
            opts(json!({"cacheRetention": "long"})),
        ),
        (
            model_config(
                "v",
                "v",
                "https://ai-gateway.vercel.sh/v1",
                json!({"compat": {"vercelGatewayRouting": {"order": ["a"]}}}),
            ),
            ctx(vec![user("hi")], vec![]),
            opts(json!({})),
        ),
        (
            model_config("openai", "gpt", "https://api.openai.com/v1", json!({})),
            ctx(
                vec![
                    user("hi"),
                    assistant(
                        "other",
                        "o",
                        json!([
             {"type": "toolCall", "id": "x".repeat(50), "name": "read", "arguments": {}}]),
                        "toolUse",
                    ),
                ],
                vec![],
            ),
            opts(json!({"cacheRetention": "none", "sessionId": "s"})),
        ),
        (
            model_config("p", "m", local, json!({"maxTokens": 0})),
            LlmContext {
                system_prompt: String::new(),
                messages: vec![user("hi")],
                tools: vec![],
            },
            opts(json!({})),
        ),
    ];
    let inputs: Vec<Value> = cases
        .iter()
        .map(|(config, ctx, o)| {
            json!({"model": config.info(),
                   "context": {"systemPrompt": ctx.system_prompt, "messages": ctx.messages, "tools": ctx.tools},
                   "options": pi_options(o)})
        })
        .collect();
    let theirs = pi_ai_payloads(&inputs);
    assert_eq!(theirs.len(), cases.len());
    for (n, ((config, ctx, o), pi)) in cases.iter().zip(&theirs).enumerate() {
        assert!(pi.get("failed").is_none(), "case {n}: pi-ai failed: {pi}");
        let ours = config.build_payload(ctx, o);
        assert_same_payload(pi, &ours, &format!("case {n} ({})", config.base_url));
    }
}
