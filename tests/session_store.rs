//! Session files round-trip between pichamber's store and real pi 0.73.1's SessionManager, in
//! both directions: what one writes, the other reads with the same entries, leaf, branch,
//! labels, name, tree and LLM context. pi runs from node via tests/oracle/session-roundtrip.mjs
//! (no model needed); it must be installed with `npm ci --prefix tests/oracle`.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use pichamber_session::store::{SessionStore, SyncPolicy};
use serde_json::{Map, Value, json};

fn oracle() -> PathBuf {
    let dir = common::repo().join("tests/oracle");
    assert!(
        dir.join("node_modules/@mariozechner/pi-coding-agent")
            .is_dir(),
        "real pi is missing: run `npm ci --prefix tests/oracle` (tests/run.sh does that)"
    );
    dir
}

/// Runs the oracle script and returns pi's snapshot of the session it ends up holding.
fn pi(args: &[&str], agent_dir: &Path) -> Value {
    let out = Command::new("node")
        .arg(oracle().join("session-roundtrip.mjs"))
        .args(args)
        .env("PI_CODING_AGENT_DIR", agent_dir)
        .output()
        .expect("run node (Node.js >= 20 is required)");
    assert!(
        out.status.success(),
        "pi {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("pi printed {stdout}: {e}"))
}

/// Our store, described with the same fields as the oracle script's snapshot.
fn snapshot(s: &mut SessionStore) -> Value {
    let leaf = s.get_leaf_id().map(str::to_owned);
    let ids: Vec<String> = s.get_entries().iter().map(id).collect();
    let mut context_at = Map::new();
    for id in ids {
        s.branch(&id).unwrap();
        context_at.insert(id, s.build_session_context().to_json());
    }
    match leaf {
        Some(leaf) => s.branch(&leaf).unwrap(),
        None => s.reset_leaf(),
    }
    let labels: Map<String, Value> = s
        .get_entries()
        .iter()
        .map(|e| {
            let id = e["id"].as_str().unwrap();
            (id.to_owned(), json!(s.get_label(id)))
        })
        .collect();
    json!({
        "file": s.get_session_file().map(|p| p.to_str().unwrap()),
        "sessionId": s.get_session_id(),
        "header": s.get_header(),
        "entries": s.get_entries(),
        "leafId": s.get_leaf_id(),
        "leafEntry": s.get_leaf_entry(),
        "branch": s.get_branch(None),
        "labels": labels,
        "name": s.get_session_name(),
        "tree": s.get_tree().to_json(),
        "context": s.build_session_context().to_json(),
        "contextAt": context_at,
    })
}

/// Field by field, so a failure names what differs instead of dumping two whole sessions.
fn assert_same(pi: &Value, ours: &Value, what: &str) {
    let keys: Vec<&String> = pi.as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        ours.as_object().unwrap().keys().collect::<Vec<_>>(),
        "{what}: snapshot fields"
    );
    for key in keys {
        assert!(
            pi[key] == ours[key],
            "{what}: `{key}` differs\npi:   {}\nours: {}",
            serde_json::to_string_pretty(&pi[key]).unwrap(),
            serde_json::to_string_pretty(&ours[key]).unwrap()
        );
    }
}

fn id(entry: &Value) -> String {
    entry["id"].as_str().unwrap().to_owned()
}

#[test]
fn a_session_pi_wrote_reads_the_same_in_pichamber_and_back() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("sessions");
    let written = pi(&["write", dir.to_str().unwrap(), "/proj"], tmp.path());
    let file = written["file"].as_str().unwrap();
    let types: Vec<&str> = written["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    for kind in [
        "message",
        "thinking_level_change",
        "model_change",
        "compaction",
        "branch_summary",
        "custom",
        "custom_message",
        "label",
        "session_info",
    ] {
        assert!(types.contains(&kind), "pi's session lacks {kind}");
    }

    let (mut ours, report) = SessionStore::open(file, SyncPolicy::EveryEntry).unwrap();
    assert!(report.is_clean(), "{report}");
    assert_same(
        &written,
        &snapshot(&mut ours),
        "pichamber reading pi's file",
    );
    // The context really went through the compaction and the branch summary.
    let roles: Vec<&str> = written["context"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        [
            "compactionSummary",
            "user",
            "assistant",
            "user",
            "assistant"
        ]
    );

    // Continue pi's file from pichamber; pi reads the result as we see it.
    let leaf = ours.get_leaf_id().unwrap().to_owned();
    ours.append_message(json!({ "role": "user", "content": "from pichamber", "timestamp": 2000 }))
        .unwrap();
    ours.append_label_change(&leaf, Some("pi's last")).unwrap();
    ours.append_session_info("Third name").unwrap();
    let reread = pi(&["read", file], tmp.path());
    assert_same(
        &reread,
        &snapshot(&mut ours),
        "pi reading pi's file continued by pichamber",
    );
}

/// Every entry kind through pichamber's API, with a branch, a branch summary, labels set and
/// cleared, and a compaction.
fn write_every_kind(dir: &Path) -> (SessionStore, String) {
    let mut s = SessionStore::create(dir, "/work/proj", SyncPolicy::EveryEntry).unwrap();
    s.append_thinking_level_change("low").unwrap();
    s.append_model_change("openai", "gpt-a").unwrap();
    let u1 = s
        .append_message(
            json!({ "role": "user", "content": "naïve ✓ \"quoted\"\t\u{1}", "timestamp": 10 }),
        )
        .unwrap();
    let a1 = s
        .append_message(json!({
            "role": "assistant",
            "content": [{ "type": "text", "text": "answer" }, { "type": "toolCall", "id": "c1", "name": "read", "arguments": { "path": "a.txt" } }],
            "api": "openai-responses", "provider": "openai", "model": "gpt-a",
            "usage": { "input": 3, "output": 4, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 7,
                       "cost": { "input": 1.5e-6, "output": 0.00012, "cacheRead": 0, "cacheWrite": 0, "total": 0.0001215 } },
            "stopReason": "toolUse", "timestamp": 11,
        }))
        .unwrap();
    s.append_message(json!({
        "role": "toolResult", "toolCallId": "c1", "toolName": "read",
        "content": [{ "type": "text", "text": "file body" }], "isError": false, "timestamp": 12,
    }))
    .unwrap();
    s.append_custom_entry(
        "ext-state",
        Some(json!({ "nested": { "list": [1, 2.5, null, true] } })),
    )
    .unwrap();
    s.append_custom_entry("ext-empty", None).unwrap();
    s.append_custom_message_entry("ext", json!("shown"), true, Some(json!({ "k": "v" })))
        .unwrap();
    s.append_custom_message_entry(
        "ext",
        json!([{ "type": "text", "text": "hidden" }]),
        false,
        None,
    )
    .unwrap();
    s.append_label_change(&id(&u1), Some("start")).unwrap();
    s.append_label_change(&id(&a1), Some("gone")).unwrap();
    s.append_label_change(&id(&a1), None).unwrap();
    s.append_session_info("  A name  ").unwrap();
    s.append_message(json!({ "role": "user", "content": "abandoned", "timestamp": 13 }))
        .unwrap();
    s.branch_with_summary(
        Some(&id(&a1)),
        "Abandoned path.",
        Some(json!({ "readFiles": [], "modifiedFiles": ["b"] })),
        Some(true),
    )
    .unwrap();
    s.append_model_change("anthropic", "claude-z").unwrap();
    let kept = s
        .append_message(json!({ "role": "user", "content": "kept", "timestamp": 14 }))
        .unwrap();
    s.append_message(json!({
        "role": "assistant", "content": [{ "type": "text", "text": "sure" }],
        "api": "anthropic-messages", "provider": "anthropic", "model": "claude-z",
        "usage": { "input": 1, "output": 1, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 2,
                   "cost": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0 } },
        "stopReason": "stop", "timestamp": 15,
    }))
    .unwrap();
    s.append_compaction("Compacted.", &id(&kept), 777, None, None)
        .unwrap();
    s.append_message(json!({ "role": "user", "content": "after", "timestamp": 16 }))
        .unwrap();
    s.append_thinking_level_change("xhigh").unwrap();
    s.append_session_info("Final name").unwrap();
    // A plain branch that is not at the end of the file: the leaf moves, the file doesn't say.
    s.branch(&id(&kept)).unwrap();
    let fork_point = id(&kept);
    (s, fork_point)
}

#[test]
fn a_session_pichamber_wrote_reads_the_same_in_pi() {
    let tmp = tempfile::tempdir().unwrap();
    let (ours, fork_point) = write_every_kind(&tmp.path().join("sessions"));
    let file = ours
        .get_session_file()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();

    // pi puts the leaf on the last entry when it opens a file; so do we.
    let (mut reopened, report) = SessionStore::open(&file, SyncPolicy::None).unwrap();
    assert!(report.is_clean(), "{report}");
    let read = pi(&["read", &file], tmp.path());
    assert_same(
        &read,
        &snapshot(&mut reopened),
        "pi reading pichamber's file",
    );
    let roles: Vec<&str> = read["context"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["compactionSummary", "user", "assistant", "user"]);
    assert_eq!(read["context"]["thinkingLevel"], "xhigh");

    // /fork and /clone: our branched session, read by pi, is what we hold...
    let mut fork = ours.create_branched_session(&fork_point).unwrap();
    let fork_file = fork.get_session_file().unwrap().to_str().unwrap();
    let fork_read = pi(&["read", fork_file], tmp.path());
    assert_same(
        &fork_read,
        &snapshot(&mut fork),
        "pi reading pichamber's fork",
    );
    assert_eq!(fork_read["header"]["parentSession"], file.as_str());

    // ...and has the same shape as pi's own fork of the same entry (ids of the re-created
    // label entries and the header's id and time are fresh on both sides).
    let pis_fork = pi(&["fork", &file, &fork_point], tmp.path());
    let normalise = |snap: &Value| {
        let mut entries = snap["entries"].as_array().unwrap().clone();
        let mut context_at = snap["contextAt"].as_object().unwrap().clone();
        for e in &entries {
            if e["type"] == "label" {
                context_at.shift_remove(e["id"].as_str().unwrap());
            }
        }
        for e in &mut entries {
            if e["type"] == "label" {
                e["id"] = json!("<label>");
                e["parentId"] = json!("<chain>");
            }
        }
        let mut header = snap["header"].clone();
        header["id"] = json!("<id>");
        header["timestamp"] = json!("<time>");
        json!({ "header": header, "entries": entries, "context": snap["context"], "contextAt": context_at })
    };
    let pis = normalise(&pis_fork);
    let mine = normalise(&fork_read);
    assert_same(&pis, &mine, "pichamber's fork against pi's fork");
    // Labels on the path survive the fork (u1's "start"); the cleared one does not.
    assert!(
        fork_read["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "label" && e["label"] == "start")
    );
}

#[test]
fn older_versions_migrate_as_pi_migrates_them() {
    let tmp = tempfile::tempdir().unwrap();
    let v2 = [
        r#"{"type":"session","version":2,"id":"s-v2","timestamp":"2025-03-01T10:00:00.000Z","cwd":"/old"}"#,
        r#"{"type":"message","id":"aaaa0001","parentId":null,"timestamp":"2025-03-01T10:00:01.000Z","message":{"role":"user","content":"q","timestamp":1}}"#,
        r#"{"type":"message","id":"aaaa0002","parentId":"aaaa0001","timestamp":"2025-03-01T10:00:02.000Z","message":{"role":"hookMessage","customType":"h","content":"hooked","display":true,"timestamp":2}}"#,
        r#"{"type":"label","id":"aaaa0003","parentId":"aaaa0002","timestamp":"2025-03-01T10:00:03.000Z","targetId":"aaaa0001","label":"L"}"#,
    ];
    let v1 = [
        r#"{"type":"session","id":"s-v1","timestamp":"2025-01-01T10:00:00.000Z","cwd":"/older"}"#,
        r#"{"type":"model_change","timestamp":"2025-01-01T10:00:01.000Z","provider":"p","modelId":"m"}"#,
        r#"{"type":"message","timestamp":"2025-01-01T10:00:02.000Z","message":{"role":"user","content":"one","timestamp":1}}"#,
        r#"{"type":"message","timestamp":"2025-01-01T10:00:03.000Z","message":{"role":"user","content":"two","timestamp":2}}"#,
        r#"{"type":"compaction","timestamp":"2025-01-01T10:00:04.000Z","summary":"S","firstKeptEntryIndex":3,"tokensBefore":5}"#,
        r#"{"type":"message","timestamp":"2025-01-01T10:00:05.000Z","message":{"role":"user","content":"three","timestamp":3}}"#,
    ];
    for (name, lines, version) in [("v2", &v2[..], 2), ("v1", &v1[..], 1)] {
        let text = lines.join("\n") + "\n";
        let for_pi = tmp.path().join(format!("{name}-pi.jsonl"));
        let for_us = tmp.path().join(format!("{name}-us.jsonl"));
        fs::write(&for_pi, &text).unwrap();
        fs::write(&for_us, &text).unwrap();
        let theirs = pi(&["read", for_pi.to_str().unwrap()], tmp.path());
        let (mut ours, report) = SessionStore::open(&for_us, SyncPolicy::None).unwrap();
        assert_eq!(report.migrated_from, Some(version));
        let mut ours = snapshot(&mut ours);
        ours["file"] = theirs["file"].clone();
        // v1 entries get random ids: compare with every id replaced by its entry's position.
        let (theirs, ours) = if version == 1 {
            (positional_ids(&theirs), positional_ids(&ours))
        } else {
            (theirs, ours)
        };
        assert_same(&theirs, &ours, &format!("{name} migration"));
        // Both rewrote the file as v3.
        let header = |p: &Path| -> Value {
            serde_json::from_str(fs::read_to_string(p).unwrap().lines().next().unwrap()).unwrap()
        };
        assert_eq!(header(&for_pi), header(&for_us));
        assert_eq!(header(&for_us)["version"], 3);
    }
}

/// Replaces every entry id in a snapshot (as a value of `id`, `parentId`, `targetId`,
/// `firstKeptEntryId`, `fromId`, `leafId`, or a `labels` key) with `#<position>`.
fn positional_ids(snap: &Value) -> Value {
    let ids: Vec<String> = snap["entries"].as_array().unwrap().iter().map(id).collect();
    let rename = |s: &str| {
        ids.iter()
            .position(|i| i == s)
            .map_or(s.to_owned(), |p| format!("#{p}"))
    };
    fn walk(v: &mut Value, rename: &dyn Fn(&str) -> String) {
        match v {
            Value::Object(map) => {
                let renamed: Map<String, Value> = std::mem::take(map)
                    .into_iter()
                    .map(|(k, mut v)| {
                        let id_field = matches!(
                            k.as_str(),
                            "id" | "parentId"
                                | "targetId"
                                | "firstKeptEntryId"
                                | "fromId"
                                | "leafId"
                        );
                        match (&mut v, id_field) {
                            (Value::String(s), true) => *s = rename(s),
                            _ => walk(&mut v, rename),
                        }
                        (rename(&k), v)
                    })
                    .collect();
                *map = renamed;
            }
            Value::Array(items) => items.iter_mut().for_each(|i| walk(i, rename)),
            _ => {}
        }
    }
    let mut out = snap.clone();
    walk(&mut out, &rename);
    out
}

#[test]
fn a_torn_last_line_reads_like_pi_and_is_repaired() {
    let tmp = tempfile::tempdir().unwrap();
    let written = pi(
        &["write", tmp.path().join("s").to_str().unwrap(), "/proj"],
        tmp.path(),
    );
    let original = fs::read(written["file"].as_str().unwrap()).unwrap();
    let mut torn = original.clone();
    torn.extend_from_slice(br#"{"type":"message","id":"deadbeef","parentId":"#);
    let for_pi = tmp.path().join("torn-pi.jsonl");
    let for_us = tmp.path().join("torn-us.jsonl");
    fs::write(&for_pi, &torn).unwrap();
    fs::write(&for_us, &torn).unwrap();

    let theirs = pi(&["read", for_pi.to_str().unwrap()], tmp.path());
    let (mut ours, report) = SessionStore::open(&for_us, SyncPolicy::EveryEntry).unwrap();
    assert!(report.torn_line.is_some(), "{report}");
    let mut ours = snapshot(&mut ours);
    ours["file"] = theirs["file"].clone();
    assert_same(&theirs, &ours, "torn file");
    assert_eq!(
        fs::read(&for_us).unwrap(),
        original,
        "cut back to the last full line"
    );
}
