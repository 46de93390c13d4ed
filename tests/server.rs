//! The GUI server over HTTP (docs/GUI-API.md): `pichamber serve --config FILE` driven with
//! reqwest. Every route, the auth refusals (no token, a wrong token, another user's session,
//! an app command with another mount's token), the event stream and its resume, cards and
//! live panels, dialogs and forms answered over HTTP and reaching the extension.

mod common;

use common::sse::{Events, Sse};

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const ADA: &str = "ada-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";

struct Server {
    child: Child,
    base: String,
    dir: Option<tempfile::TempDir>,
    http: reqwest::Client,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A panel or app of a snapshot by the id its extension gave it (the snapshot's keys are
/// namespaced by extension: `name@hash/id`); null when there is none.
fn own<'a>(map: &'a Value, id: &str) -> &'a Value {
    map.as_object()
        .and_then(|m| {
            m.iter()
                .find(|(k, _)| k.rsplit_once('/').map_or(k.as_str(), |(_, i)| i) == id)
        })
        .map_or(&Value::Null, |(_, v)| v)
}

/// The id a panel's or app's extension gave it, from the namespaced id clients see.
fn id_in_extension(id: &Value) -> &str {
    let id = id.as_str().unwrap();
    id.rsplit_once('/').map_or(id, |(_, own)| own)
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A serve config on loopback with its data in `data`: each user (name, token, the repo paths
/// of their extensions), then `extra` (more tables).
fn users_config(users: &[(&str, &str, &[&str])], extra: &str) -> String {
    let mut config = "listen = \"127.0.0.1:0\"\ndata_dir = \"data\"\n".to_owned();
    for (name, token, extensions) in users {
        let extensions: Vec<String> = extensions.iter().map(|e| ext(e)).collect();
        config += &format!(
            "\n[[users]]\nname = {name:?}\ntoken = {token:?}\nextensions = {extensions:?}\n"
        );
    }
    config + "\n" + extra
}

fn ext(path: &str) -> String {
    common::repo().join(path).to_string_lossy().into_owned()
}

/// Starts `pichamber serve` with ada (card-demo, dialogs, the fixture) and bob (card-demo).
fn start() -> Server {
    start_with("")
}

/// [`start`] with more of the config file (tables after the users).
fn start_with(extra: &str) -> Server {
    start_in(tempfile::tempdir().unwrap(), extra)
}

/// [`start_with`] in a folder of its own (the data folder is `data` in it, named relative to
/// the config file, which the server is given by a relative path).
fn start_in(dir: tempfile::TempDir, extra: &str) -> Server {
    start_in_with(dir, "", extra)
}

/// [`start_in`] with `top` among the file's top-level keys.
fn start_in_with(dir: tempfile::TempDir, top: &str, extra: &str) -> Server {
    let config = format!(
        r#"
listen = "127.0.0.1:0"
data_dir = "data"
extensions = [{card:?}]
{top}

[[users]]
name = "ada"
token = "{ADA}"
extensions = [{dialogs:?}, {fixture:?}]

[[users]]
name = "bob"
token = "{BOB}"

{extra}
"#,
        card = ext("extensions/card-demo"),
        dialogs = ext("extensions/dialogs"),
        fixture = ext("tests/fixtures/gui/gui-fixture.js"),
    );
    start_config(dir, &config)
}

/// `pichamber serve --config serve.toml` in `dir`, with this config written there.
fn start_config(dir: tempfile::TempDir, config: &str) -> Server {
    std::fs::write(dir.path().join("serve.toml"), config).unwrap();
    let mut child = Command::new(common::bin())
        .args(["serve", "--config", "serve.toml"])
        .current_dir(dir.path())
        .env("PICHAMBER_CACHE_DIR", common::cache_dir())
        .env_remove("PICHAMBER_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start pichamber serve");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base = line.trim().trim_end_matches('/').to_owned();
    assert!(base.starts_with("http://127.0.0.1:"), "{line:?}");
    Server {
        child,
        base,
        dir: Some(dir),
        http: reqwest::Client::new(),
    }
}

impl Server {
    fn dir(&self) -> &std::path::Path {
        self.dir.as_ref().unwrap().path()
    }

    /// Stops the server (SIGKILL: nothing is flushed at exit) and hands back its folder.
    fn stop(mut self) -> tempfile::TempDir {
        self.dir.take().unwrap()
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (u16, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    async fn get(&self, path: &str, token: &str) -> (u16, Value) {
        self.call("GET", path, Some(token), None).await
    }

    async fn post(&self, path: &str, token: &str, body: Value) -> (u16, Value) {
        self.call("POST", path, Some(token), Some(body)).await
    }

    /// A new session of `token`'s user; its id.
    async fn session(&self, token: &str) -> String {
        let (status, body) = self.post("/api/pi/sessions", token, json!({})).await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    async fn prompt(&self, token: &str, session: &str, text: &str) {
        let (status, body) = self
            .post(
                &format!("/api/pi/sessions/{session}/prompt"),
                token,
                json!({ "text": text }),
            )
            .await;
        assert_eq!(status, 202, "{text}: {body}");
    }

    async fn snapshot(&self, token: &str, session: &str) -> Value {
        let (status, body) = self
            .get(&format!("/api/pi/sessions/{session}"), token)
            .await;
        assert_eq!(status, 200, "{body}");
        body["snapshot"].clone()
    }

    /// Polls the snapshot until `check` holds.
    async fn wait_snapshot(
        &self,
        token: &str,
        session: &str,
        what: &str,
        check: impl Fn(&Value) -> bool,
    ) -> Value {
        for _ in 0..200 {
            let snapshot = self.snapshot(token, session).await;
            if check(&snapshot) {
                return snapshot;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "timed out waiting for {what}: {}",
            self.snapshot(token, session).await
        );
    }

    async fn events(&self, token: &str, last: Option<u64>, session: Option<&str>) -> Events {
        let mut url = format!("{}/api/pi/events", self.base);
        if let Some(s) = session {
            url.push_str(&format!("?session={s}"));
        }
        let mut request = self.http.get(url).bearer_auth(token);
        if let Some(last) = last {
            request = request.header("Last-Event-ID", last.to_string());
        }
        Events::open(request).await
    }
}

fn ui_kind(e: &Sse, kind: &str) -> bool {
    e.name == "extension.ui" && e.data["kind"] == kind
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_auth_and_isolation() {
    let server = start();
    // No token, an unknown token: 401 with a JSON error.
    for token in [None, Some("wrong-token-0123456789")] {
        for path in [
            "/api/pi/sessions",
            "/api/pi/extensions",
            "/api/pi/events",
            "/api/pi/ui-settings",
        ] {
            let (status, body) = server.call("GET", path, token, None).await;
            assert_eq!(status, 401, "{path} with {token:?}");
            assert!(body["error"].is_string());
        }
        let (status, _) = server
            .call("POST", "/api/pi/sessions", token, Some(json!({})))
            .await;
        assert_eq!(status, 401);
    }
    // The OpenAPI document and the page need no token.
    let (status, doc) = server.call("GET", "/api/pi/openapi.json", None, None).await;
    assert_eq!(status, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    assert!(doc["paths"]["/api/pi/events"]["get"].is_object());
    let (status, page) = server.call("GET", "/", None, None).await;
    assert_eq!(status, 200);
    assert!(page.as_str().unwrap().to_lowercase().contains("<html"));

    // Extensions: opaque ids, never paths; bob sees only the global one.
    let (_, ada_ext) = server.get("/api/pi/extensions", ADA).await;
    let (_, bob_ext) = server.get("/api/pi/extensions", BOB).await;
    let names = |v: &Value| -> Vec<String> {
        v["extensions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(names(&ada_ext).len(), 3, "{ada_ext}");
    assert_eq!(names(&bob_ext), ["card-demo"]);
    let text = ada_ext.to_string();
    assert!(
        !text.contains(&common::repo().to_string_lossy().to_string()),
        "a path leaked: {text}"
    );
    for e in ada_ext["extensions"].as_array().unwrap() {
        let id = e["id"].as_str().unwrap();
        assert!(
            id.len() == 16 && id.chars().all(|c| c.is_ascii_hexdigit()),
            "{id}"
        );
    }
    let card_demo = &bob_ext["extensions"][0];
    assert!(card_demo["commands"].to_string().contains("cards-open"));

    // Sessions: create (only extensions one may use), list, get.
    let (status, body) = server
        .post(
            "/api/pi/sessions",
            BOB,
            json!({ "extensions": [ada_ext["extensions"][1]["id"]] }),
        )
        .await;
    assert_eq!(status, 400, "bob may not use ada's extension: {body}");
    let (status, created) = server
        .post(
            "/api/pi/sessions",
            ADA,
            json!({ "extensions": [card_demo["id"]] }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["extensions"], json!([card_demo["id"]]));
    assert_eq!(created["busy"], false);
    let id = created["id"].as_str().unwrap().to_owned();
    let (_, list) = server.get("/api/pi/sessions", ADA).await;
    assert_eq!(list["sessions"][0]["id"], id.as_str());
    let (_, list) = server.get("/api/pi/sessions", BOB).await;
    assert_eq!(list["sessions"], json!([]));
    let (status, full) = server.get(&format!("/api/pi/sessions/{id}"), ADA).await;
    assert_eq!(status, 200);
    assert_eq!(full["session"]["id"], id.as_str());
    assert!(full["transcript"].is_array());
    for key in ["status", "widgets", "dialogs", "panels", "apps", "busy"] {
        assert!(full["snapshot"].get(key).is_some(), "snapshot.{key}");
    }
    // The session file is in ada's folder.
    let files: Vec<_> = std::fs::read_dir(server.dir().join("data/ada"))
        .unwrap()
        .flatten()
        .collect();
    assert!(
        files
            .iter()
            .any(|f| f.file_name().to_string_lossy().ends_with(".jsonl"))
    );

    // Another user's session answers exactly as an unknown one: 404 on every route.
    let session_routes = [
        ("GET", format!("/api/pi/sessions/{id}"), None),
        (
            "POST",
            format!("/api/pi/sessions/{id}/prompt"),
            Some(json!({ "text": "/cards" })),
        ),
        ("POST", format!("/api/pi/sessions/{id}/abort"), None),
        (
            "POST",
            format!("/api/pi/sessions/{id}/dialogs/x"),
            Some(json!({ "value": "a" })),
        ),
        (
            "POST",
            format!("/api/pi/sessions/{id}/apps/a/command"),
            Some(json!({ "token": "t", "command": "cards" })),
        ),
        ("GET", format!("/api/pi/sessions/{id}/commands"), None),
        (
            "GET",
            format!("/api/pi/sessions/{id}/complete?command=cards"),
            None,
        ),
        ("GET", format!("/api/pi/events?session={id}"), None),
        ("DELETE", format!("/api/pi/sessions/{id}"), None),
    ];
    for (method, path, body) in &session_routes {
        let (status, answer) = server.call(method, path, Some(BOB), body.clone()).await;
        assert_eq!(status, 404, "bob {method} {path}: {answer}");
        let (status, _) = server
            .call(
                method,
                &path.replace(&id, "no-such-session"),
                Some(ADA),
                body.clone(),
            )
            .await;
        assert_eq!(status, 404, "ada {method} {path} of an unknown session");
    }
    // Bob's prompt did not reach ada's session.
    let (_, full) = server.get(&format!("/api/pi/sessions/{id}"), ADA).await;
    assert_eq!(full["transcript"], json!([]));

    // Commands and completions.
    let (_, commands) = server
        .get(&format!("/api/pi/sessions/{id}/commands"), ADA)
        .await;
    let names: Vec<&str> = commands["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["cards", "cards-open", "cards-cancel"]);
    assert_eq!(commands["commands"][0]["source"], "extension");
    let (status, items) = server
        .get(
            &format!("/api/pi/sessions/{id}/complete?command=cards&prefix=x"),
            ADA,
        )
        .await;
    assert_eq!((status, &items["items"]), (200, &Value::Null));
    let full_session = server.session(ADA).await;
    let (status, items) = server
        .get(
            &format!("/api/pi/sessions/{full_session}/complete?command=pick&prefix=b"),
            ADA,
        )
        .await;
    assert_eq!(status, 200, "{items}");
    assert_eq!(
        items["items"],
        json!([{ "value": "beta", "label": "BETA", "description": null }, { "value": "bravo", "label": "BRAVO", "description": null }])
    );
    let (status, _) = server
        .get(&format!("/api/pi/sessions/{id}/complete?command=nope"), ADA)
        .await;
    assert_eq!(status, 400);

    // Prompts: text needed; a bad streaming behaviour refused; a command runs.
    let (status, _) = server
        .post(&format!("/api/pi/sessions/{id}/prompt"), ADA, json!({}))
        .await;
    assert_eq!(status, 400);
    let (status, _) = server
        .post(
            &format!("/api/pi/sessions/{id}/prompt"),
            ADA,
            json!({ "text": "hi", "streamingBehavior": "later" }),
        )
        .await;
    assert_eq!(status, 400);
    let (status, body) = server
        .call(
            "POST",
            &format!("/api/pi/sessions/{id}/prompt"),
            Some(ADA),
            None,
        )
        .await;
    assert_eq!(status, 400, "{body}");
    let (status, _) = server
        .post(&format!("/api/pi/sessions/{id}/abort"), ADA, json!({}))
        .await;
    assert_eq!(status, 202);

    // ui-settings: per user, checked, stored in the user's folder.
    let triggers =
        json!({ "triggers": [{ "command": "/cards", "label": "Cards", "key": "Alt+C" }] });
    let (status, stored) = server
        .call("PUT", "/api/pi/ui-settings", Some(ADA), Some(triggers))
        .await;
    assert_eq!(status, 200);
    assert_eq!(stored["triggers"][0]["command"], "cards");
    let (_, got) = server.get("/api/pi/ui-settings", ADA).await;
    assert_eq!(got, stored);
    let (_, other) = server.get("/api/pi/ui-settings", BOB).await;
    assert_eq!(other, json!({ "triggers": [] }));
    assert!(server.dir().join("data/ada/ui-settings.json").is_file());
    for bad in [
        json!({}),
        json!({ "triggers": [{ "command": "../x" }] }),
        json!({ "triggers": [{ "command": "a", "key": 1 }] }),
    ] {
        let (status, _) = server
            .call("PUT", "/api/pi/ui-settings", Some(ADA), Some(bad.clone()))
            .await;
        assert_eq!(status, 400, "{bad}");
    }

    // Closing: 204, then the session is gone.
    let (status, _) = server
        .call("DELETE", &format!("/api/pi/sessions/{id}"), Some(ADA), None)
        .await;
    assert_eq!(status, 204);
    let (status, _) = server.get(&format!("/api/pi/sessions/{id}"), ADA).await;
    assert_eq!(status, 404);
    let (status, _) = server
        .call("GET", "/api/pi/nothing-here", Some(ADA), None)
        .await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cards_and_live_panels() {
    let server = start();
    let id = server.session(ADA).await;
    let mut events = server.events(ADA, None, Some(&id)).await;
    let first = events.next().await;
    assert_eq!(first.name, "session.snapshot");
    assert_eq!(first.data["sessionId"], id.as_str());

    // Detection: the marker, the environment and ctx.mode / hasUI all say PiChamber.
    let detect: Value =
        serde_json::from_str(first.data["snapshot"]["status"]["detect"].as_str().unwrap()).unwrap();
    assert_eq!(
        detect,
        json!({ "marker": 1, "env": "1", "mode": "rpc", "hasUI": true })
    );

    server.prompt(ADA, &id, "/cards").await;
    let (markdown, _) = events
        .until("the markdown card", |e| {
            e.name == "session.entry" && e.data["entry"]["card"]["component"] == "markdown"
        })
        .await;
    let card = &markdown.data["entry"]["card"];
    assert_eq!(card["title"], "About");
    assert_eq!(
        card["html"].as_str().unwrap().trim(),
        "<p><strong>PiChamber</strong> renders these cards from plain JSON.</p>"
    );
    assert_eq!(
        card["actions"][0],
        json!({ "label": "Open README", "command": "cards-open", "args": "README.md", "icon": "file" })
    );
    // The progress card is a live panel: three updates, then removed.
    let mut values = Vec::new();
    loop {
        let (panel, _) = events.until("a panel event", |e| ui_kind(e, "panel")).await;
        if panel.data["removed"] == json!(true) {
            assert_eq!(id_in_extension(&panel.data["id"]), "cards-build");
            break;
        }
        assert_eq!(id_in_extension(&panel.data["card"]["id"]), "cards-build");
        values.push(panel.data["card"]["props"]["value"].clone());
    }
    assert_eq!(values, [json!(10), json!(60), json!(100)]);
    let snapshot = server.snapshot(ADA, &id).await;
    assert_eq!(snapshot["panels"], json!({}));
    let (_, full) = server.get(&format!("/api/pi/sessions/{id}"), ADA).await;
    let components: Vec<&str> = full["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["card"]["component"].as_str())
        .collect();
    assert_eq!(
        components,
        [
            "markdown", "kv", "list", "table", "progress", "progress", "progress", "badges", "code"
        ]
    );

    // A panel update replaces the previous one in the snapshot.
    server.prompt(ADA, &id, "/app-next one").await;
    server
        .wait_snapshot(ADA, &id, "hits 1", |s| {
            own(&s["panels"], "hits")["props"]["rows"][0]["value"] == "1"
        })
        .await;
    server.prompt(ADA, &id, "/app-next two").await;
    let snapshot = server
        .wait_snapshot(ADA, &id, "hits 2", |s| {
            own(&s["panels"], "hits")["props"]["rows"][0]["value"] == "2"
        })
        .await;
    assert_eq!(snapshot["panels"].as_object().unwrap().len(), 1);
    assert_eq!(
        own(&snapshot["panels"], "hits")["props"]["rows"][1]["value"],
        "two"
    );
    // A card sent with sendMessage is a transcript card, never a panel.
    server.prompt(ADA, &id, "/send-card").await;
    let (message, _) = events
        .until("the message card", |e| {
            e.name == "session.entry" && e.data["entry"]["type"] == "custom_message"
        })
        .await;
    assert_eq!(message.data["entry"]["card"]["id"], "msg-card");
    assert_eq!(
        message.data["entry"]["card"]["props"]["rows"][0]["value"],
        "sendMessage"
    );
    assert!(
        server.snapshot(ADA, &id).await["panels"]
            .get("msg-card")
            .is_none()
    );
    // An action's command runs through the prompt path and its handler's result shows.
    server.prompt(ADA, &id, "/cards-open src").await;
    let (notify, _) = events
        .until("the notification", |e| ui_kind(e, "notify"))
        .await;
    assert_eq!(notify.data["message"], "Opened src");

    // Another user's stream never carries ada's events.
    let bob_session = server.session(BOB).await;
    let mut bob_events = server.events(BOB, None, None).await;
    let snapshot = bob_events.next().await;
    assert_eq!(snapshot.data["sessionId"], bob_session.as_str());
    server.prompt(ADA, &id, "/app-next three").await;
    server.prompt(BOB, &bob_session, "/cards-open mine").await;
    let (mine, before) = bob_events
        .until("bob's notification", |e| ui_kind(e, "notify"))
        .await;
    assert_eq!(mine.data["message"], "Opened mine");
    assert!(
        before
            .iter()
            .chain([&mine])
            .all(|e| e.data["sessionId"] == bob_session.as_str())
    );
}

/// Its summary in the user's list of sessions.
async fn summary_of(server: &Server, token: &str, session: &str) -> Value {
    let (_, list) = server.get("/api/pi/sessions", token).await;
    list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == session)
        .cloned()
        .unwrap_or_else(|| panic!("{session} is not listed: {list}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_session_hibernates_and_wakes_with_its_panels_count_going_on() {
    let server = start_in_with(
        tempfile::tempdir().unwrap(),
        "hibernate_after = \"200ms\"",
        "",
    );
    let id = server.session(ADA).await;
    let hits = |n: &'static str| {
        move |s: &Value| own(&s["panels"], "hits")["props"]["rows"][0]["value"] == n
    };
    server.prompt(ADA, &id, "/app-next one").await;
    server.wait_snapshot(ADA, &id, "hits 1", hits("1")).await;
    for round in ["2", "3"] {
        let mut asleep = false;
        for _ in 0..100 {
            if summary_of(&server, ADA, &id).await["hibernating"] == json!(true) {
                asleep = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(asleep, "the session did not hibernate");
        // Woken by the prompt, the extension's closure counts on from where it was.
        server.prompt(ADA, &id, "/app-next again").await;
        server
            .wait_snapshot(ADA, &id, "the next hit", hits(round))
            .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dialogs_and_forms_are_answered_over_http() {
    let server = start();
    let id = server.session(ADA).await;
    let mut events = server.events(ADA, None, Some(&id)).await;
    let dialogs = format!("/api/pi/sessions/{id}/dialogs");
    server.prompt(ADA, &id, "/survey").await;

    let next_dialog = async |events: &mut Events| {
        events
            .until("a dialog", |e| ui_kind(e, "dialog"))
            .await
            .0
            .data["dialog"]
            .clone()
    };
    let select = next_dialog(&mut events).await;
    assert_eq!(
        (select["method"].as_str(), select["title"].as_str()),
        (Some("select"), Some("Favourite language?"))
    );
    // The dialog is in the snapshot while it waits.
    let snapshot = server.snapshot(ADA, &id).await;
    assert_eq!(snapshot["dialogs"][0]["id"], select["id"]);
    let sid = select["id"].as_str().unwrap();
    let (status, body) = server
        .post(
            &format!("{dialogs}/{sid}"),
            ADA,
            json!({ "value": "Cobol" }),
        )
        .await;
    assert_eq!(status, 400, "not an option: {body}");
    let (status, _) = server
        .post(
            &format!("{dialogs}/no-such-dialog"),
            ADA,
            json!({ "value": "Rust" }),
        )
        .await;
    assert_eq!(status, 404);
    let (status, _) = server
        .post(&format!("{dialogs}/{sid}"), BOB, json!({ "value": "Rust" }))
        .await;
    assert_eq!(status, 404, "bob cannot answer ada's dialog");
    let (status, _) = server
        .post(&format!("{dialogs}/{sid}"), ADA, json!({ "value": "Rust" }))
        .await;
    assert_eq!(status, 200);
    events
        .until("the select closing", |e| {
            ui_kind(e, "dialog.closed") && e.data["dialogId"] == sid
        })
        .await;
    let (status, _) = server
        .post(&format!("{dialogs}/{sid}"), ADA, json!({ "value": "Rust" }))
        .await;
    assert_eq!(status, 404, "answered already");

    let confirm = next_dialog(&mut events).await;
    assert_eq!(confirm["method"], "confirm");
    let (status, _) = server
        .post(
            &format!("{dialogs}/{}", confirm["id"].as_str().unwrap()),
            ADA,
            json!({ "value": "yes" }),
        )
        .await;
    assert_eq!(status, 400);
    server
        .post(
            &format!("{dialogs}/{}", confirm["id"].as_str().unwrap()),
            ADA,
            json!({ "confirmed": true }),
        )
        .await;

    let input = next_dialog(&mut events).await;
    assert_eq!(input["method"], "input");
    server
        .post(
            &format!("{dialogs}/{}", input["id"].as_str().unwrap()),
            ADA,
            json!({ "value": "Ada" }),
        )
        .await;

    let editor = next_dialog(&mut events).await;
    assert_eq!(
        (editor["method"].as_str(), editor["prefill"].as_str()),
        (Some("editor"), Some("Dear Ada, about Rust: "))
    );
    server
        .post(
            &format!("{dialogs}/{}", editor["id"].as_str().unwrap()),
            ADA,
            json!({ "value": "great" }),
        )
        .await;

    // PiChamber was detected, so the extension asks with a form.
    let form = next_dialog(&mut events).await;
    assert_eq!(form["method"], "form", "{form}");
    let fields: Vec<&str> = form["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["team", "years", "editor", "remote"]);
    let form_path = format!("{dialogs}/{}", form["id"].as_str().unwrap());
    let (status, body) = server
        .post(&form_path, ADA, json!({ "values": { "team": "", "years": "many", "editor": "nano", "remote": "maybe" } }))
        .await;
    assert_eq!(status, 400);
    assert_eq!(
        body["fields"],
        json!({ "team": "is required", "years": "must be a number", "editor": "must be one of the options", "remote": "must be \"true\" or \"false\"" })
    );
    let (status, _) = server
        .post(&form_path, ADA, json!({ "values": { "team": "core", "years": "7", "editor": "emacs", "remote": "true" } }))
        .await;
    assert_eq!(status, 200);

    // The timed select carries its deadline.
    let rating = next_dialog(&mut events).await;
    assert_eq!(rating["timeout"], 5000);
    assert!(rating["deadline"].as_u64().unwrap() > 1_700_000_000_000);
    server
        .post(
            &format!("{dialogs}/{}", rating["id"].as_str().unwrap()),
            ADA,
            json!({ "value": "5" }),
        )
        .await;
    let send = next_dialog(&mut events).await;
    server
        .post(
            &format!("{dialogs}/{}", send["id"].as_str().unwrap()),
            ADA,
            json!({ "confirmed": true }),
        )
        .await;

    // The extension received every value.
    let (done, _) = events.until("the summary", |e| ui_kind(e, "notify")).await;
    let message = done.data["message"].as_str().unwrap();
    for part in [
        "language: Rust",
        "newsletter: yes",
        "name: Ada",
        "comments: great",
        "team: core",
        "years: 7",
        "editor: emacs",
        "remote: true",
        "rating: 5",
    ] {
        assert!(message.contains(part), "{part} missing in {message}");
    }
    let snapshot = server.snapshot(ADA, &id).await;
    assert_eq!(snapshot["dialogs"], json!([]));
    assert_eq!(snapshot["title"], "pi — survey");
    assert_eq!(snapshot["widgets"]["survey"]["placement"], "belowEditor");

    // The editor: an empty submit is "", a cancel undefined.
    for (answer, expected) in [
        (json!({ "value": "" }), "\"\""),
        (json!({ "cancelled": true }), "undefined"),
    ] {
        server.prompt(ADA, &id, "/ask-editor").await;
        let editor = next_dialog(&mut events).await;
        server
            .post(
                &format!("{dialogs}/{}", editor["id"].as_str().unwrap()),
                ADA,
                answer,
            )
            .await;
        server
            .wait_snapshot(ADA, &id, "the editor's status", |s| {
                s["status"]["editor"] == expected
            })
            .await;
    }
    // A form's values reach the extension with defaults filled.
    server.prompt(ADA, &id, "/ask-form").await;
    let form = next_dialog(&mut events).await;
    let path = format!("{dialogs}/{}", form["id"].as_str().unwrap());
    let (status, body) = server
        .post(&path, ADA, json!({ "values": { "name": "x", "n": "9" } }))
        .await;
    assert_eq!(
        (status, &body["fields"]),
        (400, &json!({ "n": "must be at most 5" }))
    );
    let (status, _) = server
        .post(
            &path,
            ADA,
            json!({ "values": { "name": "x", "n": "3", "p": "high" } }),
        )
        .await;
    assert_eq!(status, 200);
    let snapshot = server
        .wait_snapshot(ADA, &id, "the form's status", |s| {
            s["status"]["form"].is_string()
        })
        .await;
    let values: Value = serde_json::from_str(snapshot["status"]["form"].as_str().unwrap()).unwrap();
    assert_eq!(
        values,
        json!({ "name": "x", "n": "3", "p": "high", "dry": "true" })
    );

    // Dialogs nobody answered close for the clients: one dismissed through its AbortSignal,
    // one that timed out.
    server.prompt(ADA, &id, "/ask-abandoned").await;
    // (A dismissed dialog is reported once the extension waits again, so the second dialog
    // may open before the first one closes.)
    let mut opened: Vec<Value> = Vec::new();
    let mut closed: Vec<String> = Vec::new();
    while opened.len() < 2
        || !opened
            .iter()
            .all(|d| closed.iter().any(|c| d["id"] == c.as_str()))
    {
        let e = events.next().await;
        if ui_kind(&e, "dialog") {
            opened.push(e.data["dialog"].clone());
        } else if ui_kind(&e, "dialog.closed") {
            closed.push(e.data["dialogId"].as_str().unwrap().to_owned());
        }
    }
    let methods: Vec<&str> = opened
        .iter()
        .map(|d| d["method"].as_str().unwrap())
        .collect();
    assert_eq!(methods, ["confirm", "select"]);
    for dialog in &opened {
        let dialog_id = dialog["id"].as_str().unwrap();
        assert!(closed.iter().any(|c| c == dialog_id), "{dialog_id} closed");
        let (status, _) = server
            .post(
                &format!("{dialogs}/{dialog_id}"),
                ADA,
                json!({ "value": "a" }),
            )
            .await;
        assert_eq!(status, 404, "no longer pending");
    }
    let snapshot = server
        .wait_snapshot(ADA, &id, "the abandoned dialogs' status", |s| {
            s["status"]["abandoned"].is_string()
        })
        .await;
    assert_eq!(
        snapshot["status"]["abandoned"],
        r#"{"confirmed":false,"picked":null}"#
    );
    assert_eq!(snapshot["dialogs"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_commands_need_their_mount_token() {
    let server = start();
    let one = server.session(ADA).await;
    let two = server.session(ADA).await;
    server.prompt(ADA, &one, "/app-mount board").await;
    server.prompt(ADA, &two, "/app-mount board").await;
    let snap_one = server
        .wait_snapshot(ADA, &one, "the app", |s| {
            own(&s["apps"], "board").is_object()
        })
        .await;
    let snap_two = server
        .wait_snapshot(ADA, &two, "the app", |s| {
            own(&s["apps"], "board").is_object()
        })
        .await;
    let app = &own(&snap_one["apps"], "board");
    assert!(
        app["html"]
            .as_str()
            .unwrap()
            .contains("data-pichamber-command=\"app-next\"")
    );
    let token_one = app["token"].as_str().unwrap();
    let token_two = own(&snap_two["apps"], "board")["token"].as_str().unwrap();
    assert_ne!(token_one, token_two);
    // The transcript carries nothing executable.
    let (_, full) = server.get(&format!("/api/pi/sessions/{one}"), ADA).await;
    assert!(
        !full["transcript"].to_string().contains("<button"),
        "{}",
        full["transcript"]
    );

    // The app's id is namespaced by the extension that mounted it.
    let app_id = app["appId"].as_str().unwrap();
    assert!(
        app_id.starts_with("gui-fixture@") && app_id.ends_with("/board"),
        "{app_id}"
    );
    let command = format!(
        "/api/pi/sessions/{one}/apps/{}/command",
        percent_encode(app_id)
    );
    // Another mount's token (same user, same appId, other session): 403, nothing sent.
    for bad in [
        json!({ "token": token_two, "command": "app-next" }),
        json!({ "token": "", "command": "app-next" }),
        json!({ "command": "app-next" }),
    ] {
        let (status, body) = server.post(&command, ADA, bad.clone()).await;
        assert_eq!(status, 403, "{bad}: {body}");
    }
    // Another user with the right token: 404 (the session is not theirs).
    let (status, _) = server
        .post(
            &command,
            BOB,
            json!({ "token": token_one, "command": "app-next" }),
        )
        .await;
    assert_eq!(status, 404);
    // The right token, a bad or unknown command: 400.
    // ... and another extension's command (card-demo's) is not the app's to fire.
    for name in ["../etc", "a b", "", "not-registered", "cards"] {
        let (status, _) = server
            .post(
                &command,
                ADA,
                json!({ "token": token_one, "command": name }),
            )
            .await;
        assert_eq!(status, 400, "{name:?}");
    }
    let (status, _) = server
        .post(
            &format!("/api/pi/sessions/{one}/apps/nope/command"),
            ADA,
            json!({ "token": token_one, "command": "app-next" }),
        )
        .await;
    assert_eq!(status, 404);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        own(&server.snapshot(ADA, &one).await["panels"], "hits").is_null(),
        "a refused command ran"
    );
    // The right token: the command runs with its args.
    let (status, _) = server
        .post(
            &command,
            ADA,
            json!({ "token": token_one, "command": "app-next", "args": "from-app" }),
        )
        .await;
    assert_eq!(status, 202);
    let snapshot = server
        .wait_snapshot(ADA, &one, "the app's command", |s| {
            own(&s["panels"], "hits")["props"]["rows"][0]["value"] == "1"
        })
        .await;
    assert_eq!(
        own(&snapshot["panels"], "hits")["props"]["rows"][1]["value"],
        "from-app"
    );
    assert!(
        own(&server.snapshot(ADA, &two).await["panels"], "hits").is_null(),
        "the other session is untouched"
    );
    // A remount gets a new token; the old one is refused.
    server.prompt(ADA, &one, "/app-mount board").await;
    server
        .wait_snapshot(ADA, &one, "a new token", |s| {
            own(&s["apps"], "board")["token"] != token_one
        })
        .await;
    let (status, _) = server
        .post(
            &command,
            ADA,
            json!({ "token": token_one, "command": "app-next" }),
        )
        .await;
    assert_eq!(status, 403);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extension_cannot_replace_or_drive_another_extensions_panels_and_apps() {
    let config = users_config(
        &[(
            "ada",
            ADA,
            &[
                "tests/fixtures/gui/gui-fixture.js",
                "tests/fixtures/hostile/gui-squatter.ts",
            ],
        )],
        "",
    );
    let server = start_config(tempfile::tempdir().unwrap(), &config);
    let id = server.session(ADA).await;
    server.prompt(ADA, &id, "/app-next").await;
    server.prompt(ADA, &id, "/app-mount board").await;
    server
        .wait_snapshot(ADA, &id, "the fixture's panel and app", |s| {
            own(&s["panels"], "hits").is_object() && own(&s["apps"], "board").is_object()
        })
        .await;
    let mut events = server.events(ADA, None, Some(&id)).await;
    server.prompt(ADA, &id, "/squat").await;
    let (refused, _) = events
        .until("the ninth app refused", |e| e.name == "extension.error")
        .await;
    assert!(
        refused.data["error"]
            .as_str()
            .unwrap()
            .contains("an extension may have 8 apps"),
        "{:?}",
        refused.data
    );
    let snapshot = server
        // Its last entry removes its own "hits": wait for that too, or the snapshot can fall
        // between its apps and that removal.
        .wait_snapshot(ADA, &id, "the squatter's apps and its removal", |s| {
            s["apps"].as_object().unwrap().len() == 9 && s["panels"].as_object().unwrap().len() == 1
        })
        .await;
    // The fixture's panel and app are its own still; the squatter's landed beside them, under
    // its own name whatever owner it wrote, and its removal of "hits" removed only its own.
    let panels = snapshot["panels"].as_object().unwrap();
    assert_eq!(panels.len(), 1, "{panels:?}");
    let (panel_id, panel) = panels.iter().next().unwrap();
    assert!(panel_id.starts_with("gui-fixture@"), "{panel_id}");
    assert_eq!(panel["props"]["rows"][0]["value"], "1");
    let apps = snapshot["apps"].as_object().unwrap();
    let fixture_board = apps
        .iter()
        .find(|(k, _)| k.starts_with("gui-fixture@"))
        .unwrap()
        .1;
    assert!(!fixture_board["html"].as_str().unwrap().contains("SQUATTED"));
    let squatter_apps: Vec<&String> = apps
        .keys()
        .filter(|k| k.starts_with("gui-squatter@"))
        .collect();
    assert_eq!(
        squatter_apps.len(),
        8,
        "the per-extension cap: {squatter_apps:?}"
    );
    // The squatter's app cannot fire the fixture's command, only its own.
    let (squat_id, squat_board) = apps
        .iter()
        .find(|(k, _)| k.starts_with("gui-squatter@") && k.ends_with("/board"))
        .unwrap();
    let command = format!(
        "/api/pi/sessions/{id}/apps/{}/command",
        percent_encode(squat_id)
    );
    let token = squat_board["token"].as_str().unwrap();
    let (status, body) = server
        .post(
            &command,
            ADA,
            json!({ "token": token, "command": "app-next" }),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    assert!(
        body.to_string().contains("not a command of the extension"),
        "{body}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        own(&server.snapshot(ADA, &id).await["panels"], "hits")["props"]["rows"][0]["value"],
        "1",
        "the refused command did not run"
    );
    let (status, body) = server
        .post(&command, ADA, json!({ "token": token, "command": "squat" }))
        .await;
    assert_eq!(status, 202, "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_spinning_in_guest_code_delays_no_other_user() {
    let config = users_config(
        &[
            ("ada", ADA, &["tests/fixtures/hostile/busy-command.ts"]),
            ("bob", BOB, &["tests/fixtures/gui/gui-fixture.js"]),
        ],
        "",
    );
    let server = start_config(tempfile::tempdir().unwrap(), &config);
    let (ada, bob) = (server.session(ADA).await, server.session(BOB).await);
    // Two sessions spinning: as many as the machine here has cores.
    let ada_two = server.session(ADA).await;
    for session in [&ada, &ada_two] {
        server.prompt(ADA, session, "/spin").await;
        server
            .wait_snapshot(ADA, session, "the spin started", |s| {
                s["status"]["spin"] == "started"
            })
            .await;
    }
    // While ada's extension computes, bob's session answers command after command.
    for n in 1..=5 {
        server.prompt(BOB, &bob, "/app-next").await;
        let want = n.to_string();
        server
            .wait_snapshot(BOB, &bob, "bob's command", |s| {
                own(&s["panels"], "hits")["props"]["rows"][0]["value"] == want.as_str()
            })
            .await;
    }
    assert_eq!(
        server.snapshot(ADA, &ada).await["status"]["spin"],
        "started",
        "bob's five commands waited for ada's spin to end"
    );
    server
        .wait_snapshot(ADA, &ada, "the spin's end", |s| {
            s["status"]["spin"] == "done after spinning"
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_event_stream_resumes_inside_the_window() {
    let server = start();
    let id = server.session(ADA).await;
    let mut events = server.events(ADA, None, None).await;
    assert_eq!(events.next().await.name, "session.snapshot");
    server.prompt(ADA, &id, "/spam 5").await;
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let e = events.next().await;
        if ui_kind(&e, "panel") {
            seen.push(e);
        }
    }
    drop(events);
    let ids: Vec<u64> = seen.iter().map(|e| e.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");

    // Resuming after the second panel event: the three missed extension events, in order,
    // and no snapshot.
    let mut resumed = server.events(ADA, Some(ids[1]), None).await;
    for expected in &seen[2..] {
        let e = resumed.next().await;
        assert_eq!(e.name, "extension.ui", "{e:?}");
        assert_eq!((e.id, &e.data), (expected.id, &expected.data));
    }
    // Live events follow.
    server.prompt(ADA, &id, "/app-next live").await;
    let (live, _) = resumed
        .until("the live panel", |e| ui_kind(e, "panel"))
        .await;
    assert_eq!(id_in_extension(&live.data["card"]["id"]), "hits");
    assert!(live.id > ids[4]);
    drop(resumed);

    // Missing more than the window (1000 extension.* events): a fresh snapshot instead.
    server.prompt(ADA, &id, "/spam 1100").await;
    server
        .wait_snapshot(ADA, &id, "the last spam", |s| {
            own(&s["panels"], "spam")["props"]["value"] == 1100
        })
        .await;
    let mut late = server.events(ADA, Some(ids[1]), None).await;
    let first = late.next().await;
    assert_eq!(first.name, "session.snapshot");
    assert_eq!(
        own(&first.data["snapshot"]["panels"], "spam")["props"]["value"],
        1100
    );
    assert_eq!(
        own(&first.data["snapshot"]["panels"], "hits")["props"]["rows"][1]["value"],
        "live"
    );
    // An unknown id: a snapshot too.
    let mut unknown = server.events(ADA, Some(u64::MAX / 2), None).await;
    assert_eq!(unknown.next().await.name, "session.snapshot");
    // Resuming at the newest event: nothing to replay, live events follow.
    let head = first.id;
    let mut current = server.events(ADA, Some(head), None).await;
    server.prompt(ADA, &id, "/app-next again").await;
    let e = current.next().await;
    assert_ne!(e.name, "session.snapshot");
    assert!(e.id > head);
}

#[tokio::test]
async fn commands_refusals_and_console_warnings_are_notes_kept_with_the_transcript() {
    let server = start();
    let id = server.session(ADA).await;
    let mut events = server.events(ADA, None, Some(&id)).await;
    server.prompt(ADA, &id, "/terminal-ui").await;
    let (echo, _) = events
        .until("the command's echo", |e| e.name == "session.note")
        .await;
    assert_eq!(
        echo.data["note"],
        json!({ "kind": "command", "text": "/terminal-ui", "extension": "gui-fixture", "after": null })
    );
    let (notice, _) = events
        .until("ctx.ui.custom's notice", |e| e.name == "session.note")
        .await;
    assert_eq!(notice.data["note"]["kind"], "console");
    assert_eq!(notice.data["note"]["level"], "warn");
    assert!(
        notice.data["note"]["text"]
            .as_str()
            .unwrap()
            .starts_with("ctx.ui.custom() asks for a terminal component"),
        "{notice:?}"
    );
    // No model: the host refuses the prompt, and says so once.
    server.prompt(ADA, &id, "hello").await;
    let (refused, seen) = events
        .until("the refusal", |e| e.name == "extension.error")
        .await;
    assert!(
        !seen.iter().any(|e| e.name == "session.note"),
        "ctx.ui.custom is explained once per instance: {seen:?}"
    );
    assert_eq!(refused.data["extension"], "<runtime>");
    // A plain prompt is not a command: no echo. A reload reads the notes back in order.
    let (_, session) = server.get(&format!("/api/pi/sessions/{id}"), ADA).await;
    let notes = session["notes"].as_array().unwrap();
    let kinds: Vec<&str> = notes.iter().map(|n| n["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["command", "console", "host"], "{notes:?}");
    assert_eq!(notes[2]["text"], refused.data["error"]);
    // The refusal follows the prompt's entry, when it made one; the others came before any.
    let entry_ids: Vec<&Value> = session["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["id"])
        .collect();
    assert!(
        notes[2]["after"].is_null() || entry_ids.contains(&&notes[2]["after"]),
        "{notes:?}"
    );
    // Another user sees none of it.
    assert_eq!(
        server.get(&format!("/api/pi/sessions/{id}"), BOB).await.0,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_during_a_run_is_refused_unless_queued() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        json!({ "turns": [
            { "text": "a slow answer in many parts", "chunks": 20, "delayMs": 100 },
            { "text": "the follow-up answer" },
        ] })
        .to_string(),
    )
    .unwrap();
    let server = start_with(&format!(
        "[model]\nscript = {:?}\n",
        script.to_string_lossy()
    ));
    let id = server.session(BOB).await;
    let mut events = server.events(BOB, None, Some(&id)).await;
    server.prompt(BOB, &id, "hello").await;
    events
        .until("agent_start", |e| {
            e.name == "agent" && e.data["event"]["type"] == "agent_start"
        })
        .await;
    events
        .until("a streamed delta", |e| {
            e.name == "agent" && e.data["event"]["type"] == "message_update"
        })
        .await;
    let (_, list) = server.get("/api/pi/sessions", BOB).await;
    assert_eq!(list["sessions"][0]["busy"], true);
    let path = format!("/api/pi/sessions/{id}/prompt");
    let (status, body) = server.post(&path, BOB, json!({ "text": "again" })).await;
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("already processing"),
        "{body}"
    );
    let (status, _) = server
        .post(
            &path,
            BOB,
            json!({ "text": "afterwards", "streamingBehavior": "followUp" }),
        )
        .await;
    assert_eq!(status, 202);
    // The follow-up runs after the first answer; then the session is idle again.
    let (end, _) = events
        .until("the follow-up's answer", |e| {
            e.name == "agent"
                && e.data["event"]["type"] == "message_end"
                && e.data["event"]["message"]["content"]
                    .to_string()
                    .contains("the follow-up answer")
        })
        .await;
    assert_eq!(end.data["sessionId"], id.as_str());
    events
        .until("agent_end", |e| {
            e.name == "agent" && e.data["event"]["type"] == "agent_end"
        })
        .await;
    server
        .wait_snapshot(BOB, &id, "idle", |s| s["busy"] == false)
        .await;
    let (_, full) = server.get(&format!("/api/pi/sessions/{id}"), BOB).await;
    let roles: Vec<&str> = full["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["message"]["role"].as_str())
        .collect();
    assert_eq!(roles, ["user", "assistant", "user", "assistant"]);
}

/// `pichamber run EXT` with no step: the GUI's process, and its base URL and token (from the
/// URL it prints first).
struct Gui {
    child: std::process::Child,
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Gui {
    fn start(command: &mut Command, extension: &str) -> Gui {
        let mut child = command
            .args(["run", &ext(extension)])
            .env("PICHAMBER_CACHE_DIR", common::cache_dir())
            .env_remove("PICHAMBER_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line.trim().to_owned();
        let (base, token) = url
            .split_once("/#token=")
            .unwrap_or_else(|| panic!("{url:?}"));
        let (base, token) = (base.to_owned(), token.to_owned());
        Gui {
            child,
            base,
            token,
            http: reqwest::Client::new(),
        }
    }

    async fn get(&self, path: &str) -> Value {
        let url = format!("{}{path}", self.base);
        let response = self
            .http
            .get(url)
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        response.json().await.unwrap()
    }

    /// The session the GUI opened, and the status of posting `text` to it.
    async fn prompt_first(&self, text: &str) -> (String, u16) {
        let sessions = self.get("/api/pi/sessions").await;
        let id = sessions["sessions"][0]["id"].as_str().unwrap().to_owned();
        let url = format!("{}/api/pi/sessions/{id}/prompt", self.base);
        let sent = self
            .http
            .post(url)
            .bearer_auth(&self.token)
            .json(&json!({ "text": text }));
        let status = sent.send().await.unwrap().status().as_u16();
        (id, status)
    }
}

impl Drop for Gui {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_without_steps_serves_the_gui_on_loopback() {
    let gui = Gui::start(&mut Command::new(common::bin()), "extensions/card-demo");
    let base = &gui.base;
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    assert_eq!(gui.token.len(), 64);
    let (_, status) = gui.prompt_first("/cards").await;
    assert_eq!(status, 202);
    let refused = gui
        .http
        .get(format!("{base}/api/pi/sessions"))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status().as_u16(), 401);
    let page = gui.http.get(format!("{base}/")).send().await.unwrap();
    assert_eq!(page.status().as_u16(), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gui_of_run_gives_its_session_pis_settings_and_models() {
    let home = tempfile::tempdir().unwrap();
    let agent = home.path().join("agent");
    std::fs::create_dir_all(&agent).unwrap();
    std::fs::write(agent.join("settings.json"), r#"{"quietStartup": true}"#).unwrap();
    let models = json!({"providers": {"local": {
        "baseUrl": "http://127.0.0.1:9", "api": "openai-completions", "apiKey": "k",
        "models": [{"id": "first"}, {"id": "second"}],
    }}});
    std::fs::write(agent.join("models.json"), models.to_string()).unwrap();
    let mut command = Command::new(common::bin());
    command
        .current_dir(home.path())
        .env("HOME", home.path())
        .env("PI_CODING_AGENT_DIR", &agent);
    let gui = Gui::start(&mut command, "tests/fixtures/gui-run/settings-models.ts");
    let (id, status) = gui.prompt_first("/seen").await;
    assert_eq!(status, 202);
    let mut seen = Value::Null;
    for _ in 0..100 {
        let full = gui.get(&format!("/api/pi/sessions/{id}")).await;
        let entries = full["transcript"].as_array().unwrap();
        if let Some(m) = entries.iter().find(|e| e["customType"] == "seen") {
            seen = serde_json::from_str(m["content"].as_str().unwrap()).unwrap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen["settings"]["quietStartup"], true, "{seen}");
    assert_eq!(
        seen["models"],
        json!(["local/first", "local/second"]),
        "{seen}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_reopens_its_sessions_with_their_panels() {
    let server = start();
    let kept = server.session(ADA).await;
    let closed = server.session(ADA).await;
    server.prompt(ADA, &kept, "/app-next before-restart").await;
    server.prompt(ADA, &kept, "/app-mount board").await;
    server
        .wait_snapshot(ADA, &kept, "the panel and the app", |s| {
            own(&s["panels"], "hits").is_object() && own(&s["apps"], "board").is_object()
        })
        .await;
    let (status, _) = server
        .call(
            "DELETE",
            &format!("/api/pi/sessions/{closed}"),
            Some(ADA),
            None,
        )
        .await;
    assert_eq!(status, 204);
    assert!(
        server.dir().join("data/ada/closed").is_dir(),
        "a closed session's file is kept aside"
    );
    let (_, before) = server.get("/api/pi/sessions", ADA).await;
    let dir = server.stop();

    let server = start_in(dir, "");
    let (_, after) = server.get("/api/pi/sessions", ADA).await;
    assert_eq!(after["sessions"].as_array().unwrap().len(), 1, "{after}");
    assert_eq!(after["sessions"][0]["id"], kept.as_str());
    assert_eq!(
        after["sessions"][0]["createdAt"],
        before["sessions"][0]["createdAt"]
    );
    assert_eq!(
        after["sessions"][0]["extensions"],
        before["sessions"][0]["extensions"]
    );
    let (_, full) = server.get(&format!("/api/pi/sessions/{kept}"), ADA).await;
    assert!(full["transcript"].to_string().contains("before-restart"));
    // The live dock comes back from the entries; the app is mounted again with a new token.
    let snapshot = &full["snapshot"];
    assert_eq!(
        own(&snapshot["panels"], "hits")["props"]["rows"][1]["value"],
        "before-restart"
    );
    assert!(own(&snapshot["apps"], "board")["token"].is_string());
    // And the session works: a command reaches the reopened extension.
    server.prompt(ADA, &kept, "/app-next after").await;
    server
        .wait_snapshot(ADA, &kept, "the panel after the restart", |s| {
            own(&s["panels"], "hits")["props"]["rows"][1]["value"] == "after"
        })
        .await;
    let (_, bob) = server.get("/api/pi/sessions", BOB).await;
    assert_eq!(bob["sessions"], json!([]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_leaves_as_a_pi_session_file_and_comes_back_as_a_new_session() {
    let server = start();
    let first = server.session(ADA).await;
    server.prompt(ADA, &first, "/app-next exported").await;
    server
        .wait_snapshot(ADA, &first, "the panel", |s| {
            own(&s["panels"], "hits").is_object()
        })
        .await;
    let response = server
        .http
        .get(format!("{}/api/pi/sessions/{first}/file", server.base))
        .bearer_auth(ADA)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert!(
        response.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/jsonl")
    );
    let file = response.text().await.unwrap();
    let records: Vec<Value> = file
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records[0]["type"], "session");
    assert_eq!(records[0]["id"], first.as_str());
    // The file on disk says the same.
    let on_disk = std::fs::read_dir(server.dir().join("data/ada"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .unwrap();
    assert_eq!(std::fs::read_to_string(on_disk).unwrap(), file);
    let (status, _) = server
        .get(&format!("/api/pi/sessions/{first}/file"), BOB)
        .await;
    assert_eq!(status, 404, "another user's session");

    // Imported: a new session holding the same entries, whose extensions see them.
    let (status, imported) = server
        .post("/api/pi/sessions", ADA, json!({ "import": file }))
        .await;
    assert_eq!(status, 201, "{imported}");
    let second = imported["id"].as_str().unwrap();
    assert_ne!(second, first);
    let (_, a) = server.get(&format!("/api/pi/sessions/{first}"), ADA).await;
    let (_, b) = server.get(&format!("/api/pi/sessions/{second}"), ADA).await;
    assert_eq!(a["transcript"], b["transcript"]);
    assert_eq!(
        own(&b["snapshot"]["panels"], "hits")["props"]["rows"][1]["value"],
        "exported"
    );
    for (body, says) in [
        (
            json!({ "import": "{\"type\":\"message\",\"id\":\"x\"}\n" }),
            "not a pi session file",
        ),
        (
            json!({ "import": 7 }),
            "must be the text of a pi session file",
        ),
    ] {
        let (status, refused) = server.post("/api/pi/sessions", ADA, body).await;
        assert_eq!(status, 400);
        assert!(
            refused["error"].as_str().unwrap().contains(says),
            "{refused}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capability_grants_come_from_the_config_per_extension() {
    let dir = tempfile::tempdir().unwrap();
    let granted = dir.path().join("granted");
    let secret = dir.path().join("secret");
    std::fs::create_dir_all(&granted).unwrap();
    std::fs::create_dir_all(&secret).unwrap();
    std::fs::write(granted.join("a.txt"), "granted text").unwrap();
    std::fs::write(secret.join("b.txt"), "secret text").unwrap();
    let extra = format!(
        "[grants.{:?}]\nread = [{:?}]\n",
        ext("tests/fixtures/gui/gui-fixture.js"),
        granted.to_string_lossy()
    );
    let server = start_in(dir, &extra);
    let id = server.session(ADA).await;
    let read = |path: std::path::PathBuf| format!("/read-file {}", path.to_string_lossy());
    server.prompt(ADA, &id, &read(granted.join("a.txt"))).await;
    server
        .wait_snapshot(ADA, &id, "the granted read", |s| {
            s["status"]["read"] == "granted text"
        })
        .await;
    server.prompt(ADA, &id, &read(secret.join("b.txt"))).await;
    let snapshot = server
        .wait_snapshot(ADA, &id, "the denied read", |s| {
            s["status"]["read"]
                .as_str()
                .is_some_and(|t| t.starts_with("denied"))
        })
        .await;
    assert!(!snapshot.to_string().contains("secret text"));
}

/// Serve with the grant holder (read on `granted/`, holding `public.txt` and `private.txt`) and
/// `borrower` (no grants unless `borrower_reads`), a model that calls `tool` with the
/// arguments `arguments` makes of the granted folder; the tool result the model was given
/// (its text, after `error: ` when it failed).
async fn borrowed(
    borrower: &str,
    tool: &str,
    arguments: impl Fn(&Path) -> Value,
    borrower_reads: bool,
) -> String {
    let dir = tempfile::tempdir().unwrap();
    let granted = dir.path().join("granted");
    std::fs::create_dir_all(&granted).unwrap();
    std::fs::write(granted.join("public.txt"), "public text").unwrap();
    std::fs::write(granted.join("private.txt"), "private text").unwrap();
    let script = json!([
        { "toolCalls": [{ "id": "c1", "name": tool, "arguments": arguments(&granted) }] },
        { "text": "Done." },
    ]);
    std::fs::write(
        dir.path().join("script.json"),
        json!({ "turns": script }).to_string(),
    )
    .unwrap();
    let holder = "tests/fixtures/hostile/grant-holder.ts";
    let granted_read = |extension: &str| {
        format!(
            "[grants.{:?}]\nread = [{:?}]\n",
            ext(extension),
            granted.to_string_lossy()
        )
    };
    let mut extra = format!(
        "[model]\nscript = \"script.json\"\n\n{}",
        granted_read(holder)
    );
    if borrower_reads {
        extra += &granted_read(borrower);
    }
    let config = users_config(&[("ada", ADA, &[holder, borrower])], &extra);
    let server = start_config(dir, &config);
    let id = server.session(ADA).await;
    server.prompt(ADA, &id, "go").await;
    let mut full = Value::Null;
    for _ in 0..200 {
        full = server.get(&format!("/api/pi/sessions/{id}"), ADA).await.1;
        if full["transcript"].to_string().contains("Done.") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let result = full["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["message"]["role"] == "toolResult")
        .unwrap_or_else(|| panic!("no tool result: {full}"));
    assert_eq!(
        full.to_string().contains("private text"),
        borrower_reads,
        "{full}"
    );
    let text = common::text_of(&result["message"]["content"]);
    if result["message"]["isError"] == true {
        format!("error: {text}")
    } else {
        text
    }
}

/// The holder's tool called on `public.txt`, which the borrower rewrites to `private.txt`.
async fn borrowed_through_a_rewrite(borrower_reads: bool) -> String {
    let public = |granted: &Path| json!({ "path": granted.join("public.txt") });
    let seen = borrowed(
        "tests/fixtures/hostile/grant-borrower.ts",
        "read_note",
        public,
        borrower_reads,
    )
    .await;
    if seen.starts_with("error: ") {
        seen
    } else {
        format!("ok: {seen}")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_rewrite_never_lends_the_tool_owners_grants() {
    // No grants of its own: the rewritten call is blocked, and says why.
    let seen = borrowed_through_a_rewrite(false).await;
    assert!(seen.starts_with("error: "), "{seen}");
    assert!(
        seen.contains("may not lend another extension's grants") && seen.contains("--allow-read"),
        "{seen}"
    );
    // Granted the same folder, the rewrite is within its own reach and stands (pi's semantics).
    let seen = borrowed_through_a_rewrite(true).await;
    assert_eq!(seen, "ok: private text");
}

/// The borrower's tool asks, through ctx.executeTool, for the holder's tool on `private.txt`.
async fn borrowed_through_a_nested_call(borrower_reads: bool) -> String {
    let private =
        |granted: &Path| json!({ "path": granted.join("private.txt"), "tools": ["read_note"] });
    borrowed(
        "tests/fixtures/hostile/nested-borrower.ts",
        "borrow",
        private,
        borrower_reads,
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_nested_tool_call_never_lends_grants_the_caller_lacks() {
    // No grants of its own: the holder's tool is refused, and says why.
    let seen = borrowed_through_a_nested_call(false).await;
    assert!(
        seen.starts_with("read_note: error: ")
            && seen.contains("may not lend another extension's grants")
            && seen.contains("--allow-read"),
        "{seen}"
    );
    // Granted the same folder, the call is within its own reach and runs.
    let seen = borrowed_through_a_nested_call(true).await;
    assert_eq!(seen, "read_note: ok: private text");
}

/// The `pichamber.ui` cards of a session's transcript, once there are `n`.
async fn wait_cards(server: &Server, token: &str, session: &str, n: usize) -> Vec<Value> {
    for _ in 0..200 {
        let (status, body) = server
            .get(&format!("/api/pi/sessions/{session}"), token)
            .await;
        assert_eq!(status, 200, "{body}");
        let cards: Vec<Value> = body["transcript"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["customType"] == "pichamber.ui")
            .cloned()
            .collect();
        if cards.len() >= n {
            return cards;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("timed out waiting for {n} card(s) in {session}");
}

/// git-glance's Git row once git is granted but the folder is not: git runs confined to the
/// extension's grants and finds no repository (or, on a kernel without Landlock, is refused
/// because it cannot be confined).
fn git_ran_confined(row: &str) -> bool {
    if pichamber_access::sandbox::kernel_abi().is_some() {
        row.contains("not a git repository")
    } else {
        row.contains("--allow-unconfined-run")
    }
}

/// The rows of git-glance's card: label → value.
fn glance_rows(card: &Value) -> std::collections::BTreeMap<String, String> {
    card["data"]["props"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["label"].as_str().unwrap().to_owned(),
                r["value"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_are_offered_within_the_policy_and_remembered_per_user() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "a").unwrap();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .args(args)
            .current_dir(&ws)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "-b", "trunk"]);
    let glance = ext("extensions/git-glance");
    // ada's policy lets her approve git, not reading the folder; bob has no policy.
    let config = format!(
        r#"
listen = "127.0.0.1:0"
data_dir = {data:?}
cwd = {ws:?}
extensions = [{glance:?}]

[[users]]
name = "ada"
token = "{ADA}"
[users.policy.{glance:?}]
run = ["git"]

[[users]]
name = "bob"
token = "{BOB}"
"#,
        data = dir.path().join("data").to_string_lossy(),
        ws = ws.to_string_lossy(),
    );
    let data = dir.path().join("data");
    let server = start_config(dir, &config);

    let (_, listed) = server.get("/api/pi/extensions", ADA).await;
    let info = &listed["extensions"][0];
    let id = info["id"].as_str().unwrap().to_owned();
    assert_eq!(
        info["capabilities"],
        json!({
            "requested": [{ "kind": "read", "value": "." }, { "kind": "run", "value": "git" }],
            "approved": [],
            "reason": "to show the folder's files and its git status",
        })
    );
    assert!(
        !listed.to_string().contains(&*ws.to_string_lossy()),
        "no host path: {listed}"
    );

    // Bob: nothing beyond his grants is offered.
    let bobs = server.session(BOB).await;
    assert_eq!(server.snapshot(BOB, &bobs).await["approvals"], json!([]));

    // Ada: git is offered, reading the folder is refused by the policy.
    let first = server.session(ADA).await;
    let approvals = server.snapshot(ADA, &first).await["approvals"].clone();
    assert_eq!(approvals.as_array().unwrap().len(), 1, "{approvals}");
    assert_eq!(approvals[0]["extension"], json!(id));
    assert_eq!(approvals[0]["name"], "git-glance");
    assert_eq!(
        approvals[0]["items"],
        json!([{ "kind": "run", "value": "git" }])
    );
    assert_eq!(approvals[0]["refused"][0]["kind"], "read");
    assert!(
        approvals[0]["refused"][0]["why"]
            .as_str()
            .unwrap()
            .contains("policy")
    );

    // Before an answer the extension runs with its grants alone.
    server.prompt(ADA, &first, "/glance").await;
    let rows = glance_rows(&wait_cards(&server, ADA, &first, 1).await[0]);
    assert!(rows["Git"].contains("--allow-run=git"), "{rows:?}");
    assert!(rows["Files"].contains("--allow-read"), "{rows:?}");

    let decide = |session: &str, extension: &str, decision: &str| {
        let path = format!("/api/pi/sessions/{session}/approvals/{extension}");
        let body = json!({ "decision": decision });
        let server = &server;
        async move { server.post(&path, ADA, body).await }
    };
    assert_eq!(decide(&first, &id, "maybe").await.0, 400);
    assert_eq!(decide(&first, "nope", "once").await.0, 404);
    assert_eq!(
        server
            .call(
                "POST",
                &format!("/api/pi/sessions/{first}/approvals/{id}"),
                Some(BOB),
                Some(json!({ "decision": "once" }))
            )
            .await
            .0,
        404,
        "another user's session"
    );
    let (status, answer) = decide(&first, &id, "once").await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(
        answer["granted"],
        json!([{ "kind": "run", "value": "git" }])
    );
    assert_eq!(server.snapshot(ADA, &first).await["approvals"], json!([]));
    assert_eq!(decide(&first, &id, "once").await.0, 404, "answered already");
    server.prompt(ADA, &first, "/glance").await;
    let rows = glance_rows(&wait_cards(&server, ADA, &first, 2).await[1]);
    // Never wider than the policy: git runs now, but the folder stays unreadable, to the
    // extension and to git (confined to the extension's grants, it finds no repository).
    assert!(git_ran_confined(&rows["Git"]), "{rows:?}");
    assert!(rows["Files"].contains("--allow-read"), "{rows:?}");

    // "once" was for that session; "always" is remembered for this build, for ada only.
    let second = server.session(ADA).await;
    assert_eq!(
        server.snapshot(ADA, &second).await["approvals"][0]["items"],
        json!([{ "kind": "run", "value": "git" }])
    );
    assert_eq!(decide(&second, &id, "always").await.0, 200);
    let saved = std::fs::read_to_string(data.join("ada/approvals.json")).unwrap();
    assert!(saved.contains("\"git\""), "{saved}");
    let third = server.session(ADA).await;
    assert_eq!(server.snapshot(ADA, &third).await["approvals"], json!([]));
    server.prompt(ADA, &third, "/glance").await;
    let rows = glance_rows(&wait_cards(&server, ADA, &third, 1).await[0]);
    assert!(git_ran_confined(&rows["Git"]), "git runs: {rows:?}");
    let (_, listed) = server.get("/api/pi/extensions", ADA).await;
    assert_eq!(
        listed["extensions"][0]["capabilities"]["approved"],
        json!([{ "kind": "run", "value": "git" }])
    );
    let bobs = server.session(BOB).await;
    assert_eq!(server.snapshot(BOB, &bobs).await["approvals"], json!([]));

    // Forgotten, it is asked again; denied, the extension goes on without.
    let (status, forgot) = server
        .call(
            "DELETE",
            &format!("/api/pi/extensions/{id}/approvals"),
            Some(ADA),
            None,
        )
        .await;
    assert_eq!((status, &forgot["forgot"]), (200, &json!(true)), "{forgot}");
    let fourth = server.session(ADA).await;
    assert_eq!(
        server.snapshot(ADA, &fourth).await["approvals"][0]["extension"],
        json!(id)
    );
    let (status, answer) = decide(&fourth, &id, "deny").await;
    assert_eq!((status, &answer["granted"]), (200, &json!([])), "{answer}");
    assert_eq!(server.snapshot(ADA, &fourth).await["approvals"], json!([]));
    server.prompt(ADA, &fourth, "/glance").await;
    let rows = glance_rows(&wait_cards(&server, ADA, &fourth, 1).await[0]);
    assert!(rows["Git"].contains("--allow-run=git"), "{rows:?}");

    // Where each item stands, per session: the third has git from "always" (remembered when
    // it opened), the fourth had it denied.
    let git = json!([{ "kind": "run", "value": "git" }]);
    let access = |session: String| {
        let server = &server;
        async move {
            server
                .get(&format!("/api/pi/sessions/{session}/extensions"), ADA)
                .await
                .1["extensions"][0]
                .clone()
        }
    };
    let third_access = access(third.clone()).await;
    assert_eq!(third_access["approved"], git, "{third_access}");
    assert_eq!(third_access["given"], json!([]));
    assert_eq!(third_access["refused"][0]["kind"], "read");
    assert_eq!(access(fourth.clone()).await["declined"], git);
    let (status, _) = server
        .get(&format!("/api/pi/sessions/{fourth}/extensions"), BOB)
        .await;
    assert_eq!(status, 404, "another user's session");
    // Asked again, approved, then revoked: it restarts without git, which is denied again.
    let action = |method: &'static str, session: String, extension: String, tail: &'static str| {
        let server = &server;
        async move {
            let path = format!("/api/pi/sessions/{session}/approvals/{extension}{tail}");
            server.call(method, &path, Some(ADA), None).await
        }
    };
    assert_eq!(
        action("POST", fourth.clone(), "nope".into(), "/ask")
            .await
            .0,
        404
    );
    assert_eq!(
        action("DELETE", fourth.clone(), id.clone(), "").await.0,
        409,
        "nothing approved"
    );
    let (status, asked) = action("POST", fourth.clone(), id.clone(), "/ask").await;
    assert_eq!(
        (status, &asked["approval"]["items"]),
        (200, &git),
        "{asked}"
    );
    assert_eq!(
        action("POST", fourth.clone(), id.clone(), "/ask").await.0,
        409,
        "open already"
    );
    assert_eq!(access(fourth.clone()).await["pending"], git);
    assert_eq!(decide(&fourth, &id, "always").await.0, 200);
    server.prompt(ADA, &fourth, "/glance").await;
    let rows = glance_rows(&wait_cards(&server, ADA, &fourth, 2).await[1]);
    assert!(
        git_ran_confined(&rows["Git"]),
        "approved when asked again: {rows:?}"
    );
    let (status, revoked) = action("DELETE", fourth.clone(), id.clone(), "").await;
    assert_eq!((status, &revoked["revoked"]), (200, &git), "{revoked}");
    let after = access(fourth.clone()).await;
    assert_eq!(
        (&after["approved"], &after["declined"]),
        (&json!([]), &git),
        "{after}"
    );
    let saved = std::fs::read_to_string(data.join("ada/approvals.json")).unwrap();
    assert!(
        !saved.contains("\"git\""),
        "the always approval is forgotten: {saved}"
    );
    server.prompt(ADA, &fourth, "/glance").await;
    let rows = glance_rows(&wait_cards(&server, ADA, &fourth, 3).await[2]);
    assert!(rows["Git"].contains("--allow-run=git"), "revoked: {rows:?}");
}

#[test]
fn a_grant_wider_than_the_policy_stops_the_server_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let glance = ext("extensions/git-glance");
    let config = format!(
        r#"
listen = "127.0.0.1:0"
extensions = [{glance:?}]
[grants.{glance:?}]
run = ["git", "sh"]
[policy.{glance:?}]
run = ["git"]
[[users]]
name = "ada"
token = "{ADA}"
"#
    );
    let path = dir.path().join("serve.toml");
    std::fs::write(&path, config).unwrap();
    let out = Command::new(common::bin())
        .args(["serve", "--config"])
        .arg(&path)
        .env("PICHAMBER_CACHE_DIR", common::cache_dir())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--allow-run=sh") && stderr.contains("wider than the policy"),
        "{stderr}"
    );
}

/// Instances beyond `max_instances` find no slot: the session opens without that extension
/// and says why, and a closed session's slot serves the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_past_max_instances_are_refused_until_a_session_closes() {
    // Without hibernation: with it, idle sessions make room (the test below).
    let config = format!(
        "max_instances = 2\nhibernate_after = \"off\"\n{}",
        users_config(&[("ada", ADA, &["extensions/card-demo"])], "")
    );
    let server = start_config(tempfile::tempdir().unwrap(), &config);
    let open = || async {
        let (status, body) = server.post("/api/pi/sessions", ADA, json!({})).await;
        assert_eq!(status, 201, "{body}");
        let id = body["id"].as_str().unwrap().to_owned();
        let (_, whole) = server.get(&format!("/api/pi/sessions/{id}"), ADA).await;
        (id, body["extensions"].as_array().unwrap().len(), whole)
    };
    let (first, loaded, _) = open().await;
    assert_eq!(loaded, 1);
    assert_eq!(open().await.1, 1);
    let (_, loaded, refused) = open().await;
    assert_eq!(loaded, 0, "{refused}");
    let note = &refused["notes"][0];
    assert_eq!(note["extension"], "card-demo", "{refused}");
    assert!(
        note["text"]
            .as_str()
            .unwrap()
            .contains("every instance slot of this process is in use"),
        "{note}"
    );
    let (status, body) = server
        .call(
            "DELETE",
            &format!("/api/pi/sessions/{first}"),
            Some(ADA),
            None,
        )
        .await;
    assert!(status < 300, "{status} {body}");
    assert_eq!(open().await.1, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_hibernate_to_make_room_past_max_instances() {
    // Long before their time: only the want of a slot makes them hibernate.
    let config = format!(
        "max_instances = 2\nhibernate_after = \"1h\"\n{}",
        users_config(&[("ada", ADA, &["tests/fixtures/gui/gui-fixture.js"])], "")
    );
    let server = start_config(tempfile::tempdir().unwrap(), &config);
    let mut sessions = Vec::new();
    for _ in 0..4 {
        let (status, body) = server.post("/api/pi/sessions", ADA, json!({})).await;
        assert_eq!(status, 201, "{body}");
        let id = body["id"].as_str().unwrap().to_owned();
        let (_, whole) = server.get(&format!("/api/pi/sessions/{id}"), ADA).await;
        assert_eq!(whole["notes"], json!([]), "{whole}");
        assert_eq!(body["extensions"].as_array().unwrap().len(), 1, "{body}");
        sessions.push(id);
    }
    let asleep = |summaries: &Value| {
        summaries["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["hibernating"] == json!(true))
            .count()
    };
    let (_, list) = server.get("/api/pi/sessions", ADA).await;
    assert!(asleep(&list) >= 2, "two of four hold no slot: {list}");
    // Each wakes in turn, taking the room another idle one makes, and counts on.
    let hits = |n: &'static str| {
        move |s: &Value| own(&s["panels"], "hits")["props"]["rows"][0]["value"] == n
    };
    for round in ["1", "2"] {
        for id in &sessions {
            server.prompt(ADA, id, "/app-next").await;
            server
                .wait_snapshot(ADA, id, "the next hit", hits(round))
                .await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_runs_session_shutdown_and_keeps_the_sessions_for_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ext = dir.path().join("goodbye.ts");
    std::fs::write(
        &ext,
        r#"export default function (pi: any) {
  pi.on("session_shutdown", () => { pi.appendEntry("goodbye", { said: "bye" }); });
}
"#,
    )
    .unwrap();
    let config = format!(
        r#"
listen = "127.0.0.1:0"
data_dir = {data:?}
extensions = [{ext:?}]
[[users]]
name = "ada"
token = "{ADA}"
"#,
        data = dir.path().join("data").to_string_lossy(),
        ext = ext.to_string_lossy(),
    );
    let data = dir.path().join("data/ada");
    let mut server = start_config(dir, &config);
    let id = server.session(ADA).await;
    let status = Command::new("kill")
        .args(["-TERM", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut exited = None;
    for _ in 0..200 {
        if let Some(status) = server.child.try_wait().unwrap() {
            exited = Some(status);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let exited = exited.expect("the server stops within 10 s of SIGTERM");
    assert!(exited.success(), "{exited:?}");
    // The session's file stays in the user's folder (not moved to closed/), for a restart.
    let files: Vec<std::path::PathBuf> = std::fs::read_dir(&data)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    assert!(text.contains(&id), "{text}");
    assert!(text.contains(r#""customType":"goodbye""#), "{text}");
}
