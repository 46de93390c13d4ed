//! Every WIT version a released pichamber built with keeps loading: the artifact in
//! tests/fixtures/wit-0.1.0 was built at WIT 0.1.0 and is never rebuilt; it must behave as its
//! source built today does, through the paths that 0.1.0 carried on reserved names (a built-in
//! tool run by the host, fetch, the theme, clearing the editor, ctx.compact's callbacks) and
//! the plain ones (tools, commands, dialogs, entries, flags, events).

mod common;

use serde_json::Value;

const FIXTURE: &str = "tests/fixtures/wit-0.1.0/extension-0.1.0.wasm";
const SOURCE: &str = "tests/fixtures/wit-0.1.0/extension.ts";

/// The same steps through either artifact, with ids and timestamps blanked, and whether the
/// run succeeded (it does not: /exec fails, as it should).
fn run(extension: &str) -> (bool, Vec<Value>) {
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("hello.txt"), "hi there\n").unwrap();
    let cwd = work.path().to_str().unwrap();
    let (ok, events, stderr) = common::run_json(&[
        extension,
        "--cwd",
        cwd,
        "--allow-read",
        cwd,
        "--flag",
        "greeting=hey",
        "--tool",
        "read-twice",
        "--args",
        r#"{"path":"hello.txt"}"#,
        "--tool",
        "read-twice",
        "--args",
        r#"{"path":"secret.txt"}"#,
        "--command",
        "/hello you",
        "--command",
        "/editor",
        "--command",
        "/fetch",
        "--command",
        "/exec",
        "--command",
        "/compact",
        "--command",
        "/ask",
        "--answer",
        "two",
        "--answer",
        "yes",
    ]);
    assert!(stderr.is_empty(), "{extension}: {stderr}");
    let events = events
        .into_iter()
        .map(|mut e| {
            blank(&mut e);
            e
        })
        .collect();
    (ok, events)
}

fn blank(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, v) in map.iter_mut() {
                if matches!(key.as_str(), "id" | "parentId" | "timestamp") && v.is_string() {
                    *v = Value::from("<blank>");
                } else {
                    blank(v);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(blank),
        _ => {}
    }
}

fn notices(events: &[Value]) -> Vec<String> {
    common::ui_requests(events)
        .into_iter()
        .filter(|(method, _)| method == "notify")
        .map(|(_, e)| e["message"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_artifact_built_at_wit_0_1_0_loads_and_behaves_as_its_source_built_today() {
    let (old_ok, old) = run(&common::path(FIXTURE));
    assert!(!old_ok, "an extension error fails the run");
    // What the 0.1.0 artifact does, said outright, so a change that broke both sides alike
    // still fails here.
    let results = common::of_type(&old, "tool_result");
    assert_eq!(
        common::text_of(&results[0]["content"]),
        "hi there\n|hi there\n"
    );
    assert_eq!(results[1]["isError"], true, "{}", results[1]);
    assert_eq!(common::text_of(&results[1]["content"]), "not that one");
    let notices = notices(&old);
    assert!(
        notices[0].starts_with("\u{1b}[38;") && notices[0].contains("hey you"),
        "the theme's accent: {notices:?}"
    );
    assert!(
        notices.iter().any(|n| n.starts_with("fetch refused:")
            && n.contains("network capability is not granted for example.com")),
        "{notices:?}"
    );
    assert!(
        notices.iter().any(|n| n.starts_with("compaction failed:")),
        "ctx.compact's onError ran: {notices:?}"
    );
    assert!(
        notices.iter().any(|n| n == "entries: 2, name: picked two"),
        "{notices:?}"
    );
    let cleared = common::ui_requests(&old)
        .into_iter()
        .filter(|(m, _)| m == "set_editor_text")
        .map(|(_, e)| e.get("text").cloned())
        .collect::<Vec<_>>();
    assert_eq!(
        cleared,
        [Some(Value::from("draft")), None],
        "set, then cleared"
    );
    let errors = common::of_type(&old, "extension_error");
    assert!(
        errors
            .iter()
            .any(|e| e["error"].as_str().unwrap().contains("exec of 'ls' denied")),
        "{errors:?}"
    );

    let (new_ok, new) = run(&common::path(SOURCE));
    assert_eq!(old_ok, new_ok);
    assert_eq!(
        serde_json::to_string_pretty(&old).unwrap(),
        serde_json::to_string_pretty(&new).unwrap(),
        "the 0.1.0 artifact and today's build of its source differ"
    );
}

#[test]
fn inspect_names_the_wit_version_of_each_artifact() {
    let inspect = |path: &str| -> Value {
        let out = common::pichamber(&["inspect", path, "--json"]);
        assert!(out.status.success(), "{out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    assert_eq!(
        inspect(&common::path(FIXTURE))["manifest"]["witVersion"],
        "0.1.0"
    );
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("today.wasm");
    let out = common::pichamber(&[
        "build",
        &common::path(SOURCE),
        "-o",
        built.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        inspect(built.to_str().unwrap())["manifest"]["witVersion"],
        pichamber_artifact::WIT_VERSION
    );
}

/// WIT 0.2.0 grew while unreleased (commands that wait on session actions), so an artifact an
/// earlier build recorded as 0.2.0 may lack today's exports; it must be told how to cure that.
#[test]
fn an_artifact_from_an_earlier_build_of_0_2_0_is_told_to_rebuild() {
    let bytes = std::fs::read(common::path(FIXTURE)).unwrap();
    let mut artifact = pichamber_artifact::Artifact::from_bytes(&bytes).unwrap();
    artifact.manifest.wit_version = pichamber_artifact::WIT_VERSION.into();
    let dir = tempfile::tempdir().unwrap();
    let stale = dir.path().join("stale.wasm");
    std::fs::write(&stale, artifact.to_bytes().unwrap()).unwrap();
    let out = common::pichamber(&["run", stale.to_str().unwrap(), "--command", "/hello you"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        stderr.contains("does not export pichamber's WIT 0.2.0 interface"),
        "{stderr}"
    );
    assert!(
        stderr.contains("needs rebuilding from its sources (pichamber build SOURCE)"),
        "{stderr}"
    );
}
