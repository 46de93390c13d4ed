//! `pichamber serve` as nodes of a cluster on a real nats-server with JetStream
//! (docs/CLUSTER.md): a session made on one node, prompted through another and watched from a
//! third; a node killed (SIGKILL) mid-command and its session resumed elsewhere with every
//! entry a client saw; two nodes racing for it; users kept apart across nodes; NATS going
//! away (requests refused, then served again by themselves); the whole cluster restarted.
//!
//! nats-server comes from tests/setup.sh (PICHAMBER_NATS_SERVER) or PATH.

mod common;

use common::sse::{Events, Sse};

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

const ADA: &str = "ada-token-0123456789abcdef";
const BOB: &str = "bob-token-0123456789abcdef";

fn nats_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("PICHAMBER_NATS_SERVER") {
        return path.into();
    }
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("nats-server"))
            .find(|p| p.is_file())
    });
    found.expect(
        "nats-server is needed: run `source tests/setup.sh` (it installs it) or put it on PATH",
    )
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// nats-server with JetStream on, its store in `dir`.
struct Nats {
    child: Option<Child>,
    port: u16,
    store: PathBuf,
}

impl Nats {
    fn start(store: &Path) -> Self {
        let mut nats = Self {
            child: None,
            port: free_port(),
            store: store.to_owned(),
        };
        nats.restart();
        nats
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Starts it (again, on the same port and store).
    fn restart(&mut self) {
        let child = Command::new(nats_binary())
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(&self.store)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nats-server");
        self.child = Some(child);
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("nats-server did not start");
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One `pichamber serve` node.
struct Node {
    child: Option<Child>,
    base: String,
    http: reqwest::Client,
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The cluster's config for node `name`: ada may use the counter, bob too (his own sessions).
fn config(name: &str, nats: &str, lease: &str) -> String {
    let counter = common::repo().join("tests/fixtures/cluster/counter.js");
    config_with(
        name,
        nats,
        lease,
        &format!("extensions = [{counter:?}]"),
        "",
    )
}

/// [`config`] with other extensions and more of ada's tables.
fn config_with(name: &str, nats: &str, lease: &str, extensions: &str, ada: &str) -> String {
    format!(
        r#"
listen = "127.0.0.1:0"
{extensions}

[[users]]
name = "ada"
token = "{ADA}"
{ada}

[[users]]
name = "bob"
token = "{BOB}"

[cluster]
nats = "{nats}"
node = "{name}"
lease = "{lease}"
"#
    )
}

impl Node {
    fn start(dir: &Path, name: &str, nats: &str, lease: &str) -> Self {
        Self::start_config(dir, name, &config(name, nats, lease))
    }

    fn start_config(dir: &Path, name: &str, config: &str) -> Self {
        let file = dir.join(format!("{name}.toml"));
        std::fs::write(&file, config).unwrap();
        let mut child = Command::new(common::bin())
            .args(["serve", "--config"])
            .arg(&file)
            .current_dir(dir)
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
        assert!(
            base.starts_with("http://127.0.0.1:"),
            "node {name}: {line:?}"
        );
        Self {
            child: Some(child),
            base,
            http: reqwest::Client::new(),
        }
    }

    /// SIGKILL: nothing is flushed, no session_shutdown runs.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP / SIGCONT: a node that stops answering without going away, as a partitioned
    /// one does.
    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().unwrap().id().to_string();
        let status = Command::new("kill").args([signal, &pid]).status().unwrap();
        assert!(status.success());
        if signal == "-STOP" {
            // The stop is complete once every thread shows it (on a loaded machine a thread
            // may take a moment to be scheduled and stop).
            let stopped = || {
                std::fs::read_dir(format!("/proc/{pid}/task"))
                    .unwrap()
                    .flatten()
                    .all(|task| {
                        let stat =
                            std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
                        stat.rsplit_once(") ")
                            .is_some_and(|(_, rest)| rest.starts_with('T') || rest.starts_with('t'))
                    })
            };
            for _ in 0..200 {
                if stopped() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            panic!("node {pid} did not stop");
        }
    }

    /// Status, the node that answered (x-pichamber-node), body.
    async fn call(
        &self,
        method: &str,
        path: &str,
        token: &str,
        body: Option<Value>,
    ) -> (u16, String, Value) {
        let method = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token)
            .timeout(Duration::from_secs(60));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let node = response
            .headers()
            .get("x-pichamber-node")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let text = response.text().await.unwrap();
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, node, value)
    }

    async fn new_session(&self, token: &str) -> String {
        let (status, _, body) = self
            .call("POST", "/api/pi/sessions", token, Some(json!({})))
            .await;
        assert_eq!(status, 201, "{body}");
        body["id"].as_str().unwrap().to_owned()
    }

    /// Sends a prompt; returns the node that ran it.
    async fn prompt(&self, token: &str, session: &str, text: &str) -> String {
        let (status, node, body) = self
            .call(
                "POST",
                &format!("/api/pi/sessions/{session}/prompt"),
                token,
                Some(json!({ "text": text })),
            )
            .await;
        assert_eq!(status, 202, "{text}: {body}");
        node
    }

    /// Status, answering node and the session (`{session, transcript, snapshot}`).
    async fn session(&self, token: &str, id: &str) -> (u16, String, Value) {
        self.call("GET", &format!("/api/pi/sessions/{id}"), token, None)
            .await
    }

    /// Polls `GET path` until its body satisfies `check` (another node's change reaches this
    /// one through NATS); returns the last body either way, for the caller's assertion.
    async fn wait_get(&self, path: &str, token: &str, check: impl Fn(&Value) -> bool) -> Value {
        let mut body = Value::Null;
        for _ in 0..100 {
            body = self.call("GET", path, token, None).await.2;
            if check(&body) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        body
    }

    /// Polls the session until its snapshot's status `key` is `value`: the node that ran it
    /// and the session.
    async fn wait_status(&self, token: &str, id: &str, key: &str, value: &str) -> (String, Value) {
        let mut last = Value::Null;
        for _ in 0..300 {
            let (status, node, body) = self.session(token, id).await;
            if status == 200 && body["snapshot"]["status"][key] == value {
                return (node, body);
            }
            last = body;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("status {key} never became {value:?}: {last}");
    }

    async fn events(&self, token: &str, last: Option<u64>) -> Events {
        let mut request = self
            .http
            .get(format!("{}/api/pi/events", self.base))
            .bearer_auth(token);
        if let Some(last) = last {
            request = request.header("Last-Event-ID", last.to_string());
        }
        Events::open(request).await
    }
}

/// A status event (`extension.ui` of kind status) of `session` setting `key` to `value`.
fn status_event(e: &Sse, session: &str, key: &str, value: &str) -> bool {
    e.name == "extension.ui"
        && e.data["sessionId"] == session
        && e.data["kind"] == "status"
        && e.data["key"] == key
        && e.data["text"] == value
}

/// The `cluster.count` values of a transcript, in order.
fn counts(session: &Value) -> Vec<u64> {
    session["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["customType"] == "cluster.count")
        .filter_map(|e| e["data"]["n"].as_u64())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_made_on_one_node_is_prompted_through_another_and_watched_from_a_third() {
    let dir = tempfile::tempdir().unwrap();
    let nats = Nats::start(&dir.path().join("nats"));
    let [a, b, c] = ["a", "b", "c"].map(|n| Node::start(dir.path(), n, &nats.url(), "10s"));

    let id = a.new_session(ADA).await;
    let mut watch = c.events(ADA, None).await;
    let (snapshot, _) = watch
        .until("the session's snapshot", |e| {
            e.name == "session.snapshot" && e.data["sessionId"] == id.as_str()
        })
        .await;
    assert_eq!(snapshot.data["snapshot"]["status"]["start"], "startup");

    // Through b, run by a (which made it).
    assert_eq!(b.prompt(ADA, &id, "/count").await, "a");
    let (counted, _) = watch
        .until("count 1", |e| status_event(e, &id, "count", "1"))
        .await;
    assert_eq!(c.prompt(ADA, &id, "/count").await, "a");
    let (second, _) = watch
        .until("count 2", |e| status_event(e, &id, "count", "2"))
        .await;
    assert!(
        second.id > counted.id,
        "ids grow: {} {}",
        counted.id,
        second.id
    );
    let (_, _, session) = b.session(ADA, &id).await;
    assert_eq!(counts(&session), [1, 2]);

    // Resumed on another node from the last id seen: what came after, and no snapshot.
    drop(watch);
    b.prompt(ADA, &id, "/count").await;
    let mut resumed = b.events(ADA, Some(second.id)).await;
    let (third, before) = resumed
        .until("count 3", |e| status_event(e, &id, "count", "3"))
        .await;
    assert!(third.id > second.id);
    assert!(
        before.iter().all(|e| e.name != "session.snapshot"),
        "{before:?}"
    );

    // Out as a pi session file through one node, in again through another.
    let file = b
        .http
        .get(format!("{}/api/pi/sessions/{id}/file", b.base))
        .bearer_auth(ADA)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(file.starts_with("{\"type\":\"session\""), "{file}");
    let (status, _, copy) = c
        .call(
            "POST",
            "/api/pi/sessions",
            ADA,
            Some(json!({ "import": file })),
        )
        .await;
    assert_eq!(status, 201, "{copy}");
    let copy = copy["id"].as_str().unwrap().to_owned();
    a.prompt(ADA, &copy, "/count").await;
    let (_, moved) = a.wait_status(ADA, &copy, "count", "4").await;
    assert_eq!(counts(&moved), [1, 2, 3, 4]);
    let (status, _, _) = a
        .call("DELETE", &format!("/api/pi/sessions/{copy}"), ADA, None)
        .await;
    assert_eq!(status, 204);

    // Its name reaches the lists of the nodes that do not run it.
    c.prompt(ADA, &id, "/name counted").await;
    b.wait_get("/api/pi/sessions", ADA, |l| {
        l["sessions"][0]["name"] == "counted"
    })
    .await;

    // Users stay apart on every node.
    for node in [&a, &b, &c] {
        let (status, _, _) = node.session(BOB, &id).await;
        assert_eq!(status, 404);
        let (status, _, _) = node
            .call(
                "POST",
                &format!("/api/pi/sessions/{id}/prompt"),
                BOB,
                Some(json!({ "text": "/count" })),
            )
            .await;
        assert_eq!(status, 404);
        let (_, _, listed) = node.call("GET", "/api/pi/sessions", BOB, None).await;
        assert_eq!(listed["sessions"], json!([]));
        let (_, _, listed) = node.call("GET", "/api/pi/sessions", ADA, None).await;
        assert_eq!(listed["sessions"][0]["name"], "counted", "{listed}");
        let ids: Vec<&str> = listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, [id.as_str()]);
    }
    let bob_session = c.new_session(BOB).await;
    let mut bobs = a.events(BOB, None).await;
    b.prompt(BOB, &bob_session, "/count").await;
    let (_, before) = bobs
        .until("bob's count", |e| {
            status_event(e, &bob_session, "count", "1")
        })
        .await;
    assert!(before.iter().all(|e| e.data["sessionId"] != id.as_str()));

    // Closed on one node: gone on all.
    let (status, _, _) = c
        .call("DELETE", &format!("/api/pi/sessions/{id}"), ADA, None)
        .await;
    assert_eq!(status, 204);
    let (status, _, _) = b.session(ADA, &id).await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_nodes_session_resumes_on_one_other_node_with_every_entry_a_client_saw() {
    let dir = tempfile::tempdir().unwrap();
    let nats = Nats::start(&dir.path().join("nats"));
    let mut a = Node::start(dir.path(), "a", &nats.url(), "2s");
    let b = Node::start(dir.path(), "b", &nats.url(), "2s");
    let c = Node::start(dir.path(), "c", &nats.url(), "2s");

    let id = a.new_session(ADA).await;
    let mut watch = b.events(ADA, None).await;
    a.prompt(ADA, &id, "/count").await;
    a.prompt(ADA, &id, "/count").await;
    watch
        .until("count 2", |e| status_event(e, &id, "count", "2"))
        .await;
    // Mid-command: its first entry seen by a client, its end never reached.
    a.prompt(ADA, &id, "/slow 60000").await;
    watch
        .until("the slow command's start", |e| {
            status_event(e, &id, "slow", "started")
        })
        .await;
    a.kill();

    // b and c race for it: exactly one runs it, the other carries the request there.
    let (from_b, from_c) = tokio::join!(b.session(ADA, &id), c.session(ADA, &id));
    assert_eq!(from_b.0, 200, "{}", from_b.2);
    assert_eq!(from_c.0, 200, "{}", from_c.2);
    assert_eq!(from_b.1, from_c.1, "one node runs it");
    assert!(["b", "c"].contains(&from_b.1.as_str()), "{}", from_b.1);
    let session = from_b.2;
    assert_eq!(session["snapshot"]["status"]["start"], "resume");
    assert_eq!(counts(&session), [1, 2], "every entry a client saw is kept");
    let slow: Vec<&Value> = session["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["customType"] == "cluster.slow")
        .collect();
    assert_eq!(
        slow.len(),
        1,
        "the killed command's first entry, not its last"
    );

    // It goes on from its log.
    let runner = b.prompt(ADA, &id, "/count").await;
    assert_eq!(runner, from_b.1);
    let (_, session) = c.wait_status(ADA, &id, "count", "3").await;
    assert_eq!(counts(&session), [1, 2, 3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_owner_loses_its_session_and_writes_nothing_to_it_after() {
    let dir = tempfile::tempdir().unwrap();
    let nats = Nats::start(&dir.path().join("nats"));
    let a = Node::start(dir.path(), "a", &nats.url(), "2s");
    let b = Node::start(dir.path(), "b", &nats.url(), "2s");
    let id = a.new_session(ADA).await;
    a.prompt(ADA, &id, "/count").await;
    a.prompt(ADA, &id, "/slow 2500").await;
    a.wait_status(ADA, &id, "slow", "started").await;

    // a stops answering but keeps its connections: b's request waits for it, then takes the
    // session once a's lease lapses.
    a.signal("-STOP");
    let (status, node, session) = b.session(ADA, &id).await;
    assert_eq!((status, node.as_str()), (200, "b"), "{session}");
    assert_eq!(session["snapshot"]["status"]["start"], "resume");

    // a wakes with its command's timer due: neither the status event it then sends nor the
    // entry after it leaves (its lease lapsed; the log's last record is b's), and it gives
    // the session up.
    let mut watch = b.events(ADA, None).await;
    a.signal("-CONT");
    let late = tokio::time::timeout(
        Duration::from_secs(4),
        watch.until("a's late status", |e| status_event(e, &id, "slow", "ended")),
    )
    .await;
    assert!(late.is_err(), "a wrote after it lost the session: {late:?}");
    assert_eq!(b.prompt(ADA, &id, "/count").await, "b");
    let (_, session) = b.wait_status(ADA, &id, "count", "2").await;
    assert_eq!(counts(&session), [1, 2]);
    let slow: Vec<&Value> = session["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["customType"] == "cluster.slow")
        .collect();
    assert_eq!(
        slow.len(),
        1,
        "nothing of a's after it lost the session: {slow:?}"
    );
    let (status, node, _) = a.session(ADA, &id).await;
    assert_eq!((status, node.as_str()), (200, "b"), "a carries it to b now");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_nats_nodes_refuse_and_recover_by_themselves_and_a_restarted_cluster_keeps_sessions()
 {
    let dir = tempfile::tempdir().unwrap();
    let mut nats = Nats::start(&dir.path().join("nats"));
    let a = Node::start(dir.path(), "a", &nats.url(), "2s");
    let b = Node::start(dir.path(), "b", &nats.url(), "2s");
    let id = a.new_session(ADA).await;
    a.prompt(ADA, &id, "/count").await;
    a.wait_status(ADA, &id, "count", "1").await;

    nats.stop();
    tokio::time::sleep(Duration::from_millis(500)).await;
    for node in [&a, &b] {
        let (status, _, body) = node
            .call(
                "POST",
                &format!("/api/pi/sessions/{id}/prompt"),
                ADA,
                Some(json!({ "text": "/count" })),
            )
            .await;
        assert_eq!(status, 503, "{body}");
        assert!(body["error"].as_str().unwrap().contains("NATS"), "{body}");
        let (status, _, _) = node.session(ADA, &id).await;
        assert_eq!(status, 503, "nothing stale is served as current");
    }

    // Back: served again without a restart of either node.
    nats.restart();
    let mut served = false;
    for _ in 0..200 {
        let (status, _, _) = b
            .call(
                "POST",
                &format!("/api/pi/sessions/{id}/prompt"),
                ADA,
                Some(json!({ "text": "/count" })),
            )
            .await;
        if status == 202 {
            served = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(served, "the nodes came back when NATS did");
    let (_, session) = a.wait_status(ADA, &id, "count", "2").await;
    assert_eq!(counts(&session), [1, 2]);

    // The whole cluster stops (nodes killed, NATS stopped) and starts again.
    drop((a, b));
    nats.stop();
    nats.restart();
    let c = Node::start(dir.path(), "c", &nats.url(), "2s");
    let (_, _, listed) = c.call("GET", "/api/pi/sessions", ADA, None).await;
    assert_eq!(listed["sessions"][0]["id"], id.as_str(), "{listed}");
    let (node, session) = c.wait_status(ADA, &id, "start", "resume").await;
    assert_eq!(node, "c");
    assert_eq!(counts(&session), [1, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_always_approval_given_on_one_node_holds_on_every_node() {
    let dir = tempfile::tempdir().unwrap();
    let nats = Nats::start(&dir.path().join("nats"));
    let glance = common::repo().join("extensions/git-glance");
    let node = |name: &str| {
        let config = config_with(
            name,
            &nats.url(),
            "10s",
            &format!("extensions = [{glance:?}]"),
            &format!("[users.policy.{glance:?}]\nrun = [\"git\"]"),
        );
        Node::start_config(dir.path(), name, &config)
    };
    let (a, b) = (node("a"), node("b"));
    let approved = |listed: &Value| listed["extensions"][0]["capabilities"]["approved"].clone();
    let git = json!([{ "kind": "run", "value": "git" }]);

    let id = a.new_session(ADA).await;
    let (_, _, session) = a.session(ADA, &id).await;
    let extension = session["snapshot"]["approvals"][0]["extension"]
        .as_str()
        .unwrap_or_else(|| panic!("git is asked for: {session}"))
        .to_owned();
    // Answered through b, run by a.
    let (status, _, answer) = b
        .call(
            "POST",
            &format!("/api/pi/sessions/{id}/approvals/{extension}"),
            ADA,
            Some(json!({ "decision": "always" })),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let seen = b
        .wait_get("/api/pi/extensions", ADA, |l| approved(l) == git)
        .await;
    assert_eq!(approved(&seen), git, "b knows: {seen}");
    let on_b = b.new_session(ADA).await;
    let (_, _, session) = b.session(ADA, &on_b).await;
    assert_eq!(
        session["snapshot"]["approvals"],
        json!([]),
        "not asked again"
    );
    let (_, _, bobs) = b.call("GET", "/api/pi/extensions", BOB, None).await;
    assert_eq!(approved(&bobs), json!([]), "ada's approval is hers");

    // Forgotten on b: a asks again.
    let (status, _, _) = b
        .call(
            "DELETE",
            &format!("/api/pi/extensions/{extension}/approvals"),
            ADA,
            None,
        )
        .await;
    assert_eq!(status, 200);
    let seen = a
        .wait_get("/api/pi/extensions", ADA, |l| approved(l) == json!([]))
        .await;
    assert_eq!(approved(&seen), json!([]), "a forgot too: {seen}");
    let again = a.new_session(ADA).await;
    let (_, _, session) = a.session(ADA, &again).await;
    assert_eq!(session["snapshot"]["approvals"][0]["items"], git);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_killed_mid_turn_leaves_the_prompt_and_the_turn_to_another() {
    let dir = tempfile::tempdir().unwrap();
    // Each node's scripted model streams one slow answer (20 chunks, 300 ms apart).
    std::fs::write(
        dir.path().join("turns.json"),
        r#"{"turns": [{"text": "a long answer that is still streaming when its node dies", "chunks": 20, "delayMs": 300},
                      {"text": "answered again"}]}"#,
    )
    .unwrap();
    let nats = Nats::start(&dir.path().join("nats"));
    let counter = common::repo().join("tests/fixtures/cluster/counter.js");
    let node = |name: &str| {
        let extensions = format!("extensions = [{counter:?}]\n\n[model]\nscript = \"turns.json\"");
        Node::start_config(
            dir.path(),
            name,
            &config_with(name, &nats.url(), "2s", &extensions, ""),
        )
    };
    let mut a = node("a");
    let b = node("b");
    let id = a.new_session(ADA).await;
    let mut watch = b.events(ADA, None).await;
    a.prompt(ADA, &id, "tell me something long").await;
    // The answer is streaming: its first delta reached a client on another node.
    watch
        .until("the answer streaming", |e| {
            e.name == "agent"
                && e.data["sessionId"] == id.as_str()
                && e.data["event"]["type"] == "message_update"
        })
        .await;
    a.kill();

    let (status, node, session) = b.session(ADA, &id).await;
    assert_eq!((status, node.as_str()), (200, "b"), "{session}");
    assert_eq!(session["snapshot"]["status"]["start"], "resume");
    let users: Vec<&Value> = session["transcript"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["type"] == "message" && e["message"]["role"] == "user")
        .collect();
    assert_eq!(users.len(), 1, "the prompt is kept: {session}");
    assert!(users[0].to_string().contains("tell me something long"));
    assert_eq!(
        session["snapshot"]["busy"], false,
        "the dead node's turn is not running"
    );

    // The conversation goes on where it now runs (b's model answers from its own script).
    b.prompt(ADA, &id, "again").await;
    let mut answered = Value::Null;
    for _ in 0..200 {
        let (_, _, now) = b.session(ADA, &id).await;
        if now["transcript"].to_string().contains("a long answer") {
            answered = now;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(answered.is_object(), "b answered the next prompt");
}
