//! Hibernation through the library: an idle session's extensions give up their instances and
//! come back, on their next use, with everything their JavaScript held; nothing of one session
//! reaches another; what has work pending stays awake.

mod common;

use std::sync::{Arc, Mutex};

use pichamber_runtime::{InstanceOptions, Runtime};
use pichamber_session::{Session, SessionConfig};
use serde_json::{Value, json};

/// Holds state of every kind in module scope and closures, and reports it on /show.
const KEEPER: &str = r#"
let count = 0;
const seen = new Map();
const words = [];
class Tally { constructor() { this.n = 0; } bump() { return ++this.n; } }
const tally = new Tally();
let big = null;
export default function (pi) {
  let calls = 0;
  const log = (e) => console.log(JSON.stringify(e));
  pi.registerCommand("add", { handler: async (args) => {
    count += 1; calls += 1; tally.bump();
    seen.set(args, (seen.get(args) ?? 0) + 1);
    words.push(args.repeat(3));
  }});
  // Grows the heap well past the image, so that a thaw grows the memory too.
  pi.registerCommand("grow", { handler: async () => {
    big = Array.from({ length: 200000 }, (_, i) => ({ i, s: "x" + i }));
  }});
  pi.registerCommand("show", { handler: async () => {
    log({ type: "show", count, calls, tally: tally.n, seen: [...seen], words,
          big: big ? big.length + ":" + big[123456].s : null });
  }});
  pi.registerCommand("tick", { handler: async () => { setInterval(() => {}, 60000); } });
  pi.on("turn_start", () => { calls += 100; });
}
"#;

struct Harness {
    session: Session,
    events: Arc<Mutex<Vec<Value>>>,
    _dir: tempfile::TempDir,
}

async fn harness(source: &str) -> Harness {
    harness_with(source, InstanceOptions::default()).await
}

async fn harness_with(source: &str, instance: InstanceOptions) -> Harness {
    // SAFETY: set before any thread reads the environment in this test process's runtime.
    unsafe { std::env::set_var("PICHAMBER_CACHE_DIR", common::cache_dir()) };
    let dir = tempfile::tempdir().unwrap();
    let (sink, events) = common::session::recording_sink();
    let mut session = Session::new(
        Runtime::global().unwrap(),
        SessionConfig {
            instance,
            ..common::session::config(dir.path(), sink)
        },
    );
    let artifact = common::session::artifact(dir.path(), "keeper.ts", source);
    session.load(&artifact).await.unwrap();
    session.start().await;
    Harness {
        session,
        events,
        _dir: dir,
    }
}

impl Harness {
    async fn command(&mut self, line: &str) {
        self.session.run_command(line).await.unwrap();
        self.session.run_requests().await;
    }

    async fn show(&mut self) -> Value {
        self.command_report("/show").await
    }

    /// Runs `line`, whose command reports `{ "type": "show", ... }`.
    async fn command_report(&mut self, line: &str) -> Value {
        self.events.lock().unwrap().clear();
        self.command(line).await;
        let events = std::mem::take(&mut *self.events.lock().unwrap());
        let errors: Vec<_> = events
            .iter()
            .filter(|e| e["type"] == "extension_error")
            .collect();
        assert!(errors.is_empty(), "{errors:?}");
        events
            .into_iter()
            .find(|e| e["type"] == "show")
            .unwrap_or_else(|| panic!("no /show report"))
    }
}

#[tokio::test]
async fn a_hibernated_extension_wakes_with_all_its_state() {
    let mut h = harness(KEEPER).await;
    h.command("/add a").await;
    h.command("/add b").await;
    let awake = h.show().await;
    assert_eq!(
        h.session.hibernate().await,
        1,
        "an idle extension hibernates"
    );
    assert_eq!(
        h.show().await,
        awake,
        "woken by /show, it holds what it held"
    );

    // Several rounds, its heap grown past the image's memory in between.
    h.command("/grow").await;
    for round in 0..3 {
        assert_eq!(h.session.hibernate().await, 1);
        h.command(&format!("/add r{round}")).await;
    }
    let after = h.show().await;
    assert_eq!(after["count"], 5);
    assert_eq!(after["tally"], 5);
    assert_eq!(after["big"], "200000:x123456");
    assert_eq!(
        after["seen"],
        json!([["a", 1], ["b", 1], ["r0", 1], ["r1", 1], ["r2", 1]])
    );
    assert_eq!(after["words"][4], "r2r2r2");
}

#[tokio::test]
async fn handlers_and_registrations_survive_hibernation() {
    let mut h = harness(KEEPER).await;
    assert_eq!(h.session.hibernate().await, 1);
    // An event reaches the woken instance's handler, whose closure counts on.
    h.session
        .emit(
            "turn_start",
            json!({ "type": "turn_start", "turnIndex": 0, "timestamp": 0 }),
        )
        .await
        .unwrap();
    assert_eq!(h.session.hibernate().await, 1);
    h.command("/add z").await;
    assert_eq!(h.show().await["calls"], 101);
}

#[tokio::test]
async fn sessions_of_one_extension_wake_with_their_own_state() {
    let mut first = harness(KEEPER).await;
    let mut second = harness(KEEPER).await;
    first.command("/add first").await;
    second.command("/add second").await;
    second.command("/add second").await;
    assert_eq!(first.session.hibernate().await, 1);
    assert_eq!(second.session.hibernate().await, 1);
    let (a, b) = (first.show().await, second.show().await);
    assert_eq!(a["seen"], json!([["first", 1]]));
    assert_eq!(b["seen"], json!([["second", 2]]));
    // Woken in the other order, after the other woke.
    assert_eq!(second.session.hibernate().await, 1);
    assert_eq!(first.session.hibernate().await, 1);
    first.command("/add again").await;
    assert_eq!(second.show().await["seen"], json!([["second", 2]]));
    assert_eq!(
        first.show().await["seen"],
        json!([["first", 1], ["again", 1]])
    );
}

#[tokio::test]
async fn an_extension_with_a_timer_stays_awake() {
    let mut h = harness(KEEPER).await;
    h.command("/tick").await;
    assert_eq!(
        h.session.hibernate().await,
        0,
        "a pending timer keeps it awake"
    );
    assert_eq!(h.show().await["count"], 0);
}

/// Reads a file on /show PATH; keeps an SQLite database open on /hold PATH (its file stays
/// open through WASI between calls; node:fs's descriptors are the prelude's own).
const READER: &str = r#"
import { readFileSync } from "node:fs";
import { DatabaseSync } from "node:sqlite";
let held = null;
export default function (pi) {
  pi.registerCommand("show", { handler: async (path) => {
    console.log(JSON.stringify({ type: "show", text: readFileSync(path, "utf8") }));
  }});
  pi.registerCommand("hold", { handler: async (path) => {
    held = new DatabaseSync(path);
    held.exec("CREATE TABLE IF NOT EXISTS t (x)");
  }});
  pi.registerCommand("release", { handler: async () => { held.close(); held = null; }});
}
"#;

/// A reader of a folder of its own, holding `note.txt` ("first").
async fn reader() -> (Harness, tempfile::TempDir, std::path::PathBuf) {
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("note.txt");
    std::fs::write(&file, "first").unwrap();
    let options = InstanceOptions {
        grants: std::sync::Arc::new(pichamber_access::Grants {
            write: vec![data.path().to_path_buf()],
            ..Default::default()
        }),
        ..InstanceOptions::default()
    };
    (harness_with(READER, options).await, data, file)
}

#[tokio::test]
async fn an_extension_that_read_a_file_hibernates_and_reads_again_awake() {
    let (mut h, _data, file) = reader().await;
    let show = format!("/show {}", file.display());
    assert_eq!(h.command_report(&show).await["text"], "first");
    // The C library's handles on the granted folder are let go of, and fetched again.
    assert_eq!(h.session.hibernate().await, 1);
    std::fs::write(&file, "second").unwrap();
    assert_eq!(h.command_report(&show).await["text"], "second");
}

#[tokio::test]
async fn an_extension_holding_a_database_open_stays_awake_and_reads_on() {
    let (mut h, _data, file) = reader().await;
    let database = file.with_file_name("db.sqlite");
    h.command(&format!("/hold {}", database.display())).await;
    assert_eq!(
        h.session.hibernate().await,
        0,
        "an open file keeps it awake"
    );
    let show = format!("/show {}", file.display());
    assert_eq!(h.command_report(&show).await["text"], "first");
    h.command("/release").await;
    assert_eq!(h.session.hibernate().await, 1, "closed, it hibernates");
    assert_eq!(h.command_report(&show).await["text"], "first");
}
