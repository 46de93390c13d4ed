//! The command line as a user meets it: help, bad input with clear errors, the terminal
//! dialog path, the manifest of a built component, the compile cache.

mod common;

use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn write(dir: &tempfile::TempDir, name: &str, text: &str) -> String {
    let path = dir.path().join(name);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).unwrap();
    }
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

const ASKER: &str = r#"
export default function (pi) {
  pi.registerCommand("ask", {
    description: "asks two things",
    handler: async (args, ctx) => {
      const pick = await ctx.ui.select("Pick one", ["red", "green"]);
      const sure = await ctx.ui.confirm("Sure?", `you picked ${pick}`);
      ctx.ui.notify(`answer: ${pick} ${sure} ${args}`, "info");
    },
  });
}
"#;

#[test]
fn every_command_has_help() {
    for sub in [
        &["--help"][..],
        &["build", "--help"],
        &["run", "--help"],
        &["inspect", "--help"],
        &["export", "--help"],
    ] {
        let out = common::pichamber(sub);
        assert!(out.status.success());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("Usage:"), "{sub:?}: {text}");
    }
    let run_help =
        String::from_utf8_lossy(&common::pichamber(&["run", "--help"]).stdout).into_owned();
    for flag in [
        "--tool",
        "--command",
        "--event",
        "--answer",
        "--json",
        "--allow-read",
        "--allow-unconfined-run",
        "--call-timeout",
    ] {
        assert!(
            run_help.contains(flag),
            "run --help does not mention {flag}"
        );
    }
}

#[test]
fn bad_input_gives_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let ext = write(&dir, "asker.js", ASKER);
    let notes = write(&dir, "notes.txt", "hello");
    let junk = write(&dir, "junk.wasm", "not wasm");
    let missing = dir.path().join("missing").to_string_lossy().into_owned();
    let read_missing = format!("--allow-read=.,{missing}");
    let missing_said = format!(
        "'{missing}' for '--allow-read <PATH>': the folder {missing} does not exist: grant a folder that exists"
    );
    let missing_write_said =
        format!("'{missing}' for '--allow-write <PATH>': the folder {missing}");
    let file_said = format!(
        "'{notes}' for '--allow-read <PATH>': {notes} is a file, and a grant is a folder tree: give the folder that holds it ({})",
        dir.path().display()
    );
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["run", "/nonexistent/ext.ts"],
            "cannot open the extension",
        ),
        (
            vec!["run", &ext, "--tool", "x", "--args", "{bad"],
            "--args \"{bad\" is not valid JSON",
        ),
        (
            vec!["run", &ext, "--command", "/nope"],
            "unknown command /nope (registered: /ask)",
        ),
        (vec!["run", &notes], "not an extension source"),
        (vec!["inspect", &junk], "not a WebAssembly file"),
        (
            vec!["run", &ext, "--args", "{}"],
            "each --args belongs to a --tool",
        ),
        (
            vec![
                "run",
                &ext,
                "--command",
                "/ask",
                "--answer",
                "blue",
                "--answer",
                "yes",
            ],
            "'blue' is not one of the options",
        ),
        (
            vec!["run", &ext, "--event", "input", "--payload", "[1]"],
            "must be a JSON object",
        ),
        // Limits and flags are refused with what to give instead, not silently changed.
        (
            vec!["run", &ext, "--memory-limit", "0", "--command", "/ask"],
            "'0' for '--memory-limit <MIB>': 0 MiB is too little for an extension instance: give 16 to 4096",
        ),
        (
            vec!["run", &ext, "--memory-limit=1", "--command", "/ask"],
            "1 MiB is too little for an extension instance: give 16 to 4096",
        ),
        (
            vec!["rpc", &ext, "--memory-limit", "5000"],
            "cannot grow past 4096 MiB (4 GiB): give 16 to 4096",
        ),
        (
            vec!["run", &ext, "--flag", "noequals", "--command", "/ask"],
            "'noequals' for '--flag <NAME=VALUE>': no value: give NAME=VALUE (--flag noequals=true for a boolean flag)",
        ),
        // A grant of a folder that is not there is refused at start, naming flag and path
        // (it used to stop every extension at load: "the extension was stopped").
        (
            vec!["run", &ext, &read_missing, "--command", "/ask"],
            &missing_said,
        ),
        (
            vec!["rpc", &ext, "--allow-write", &missing],
            &missing_write_said,
        ),
        (
            vec!["run", &ext, "--allow-read", &notes, "--command", "/ask"],
            &file_said,
        ),
    ];
    for (args, expected) in cases {
        let out = common::pichamber(&args);
        assert!(!out.status.success(), "{args:?} should fail");
        assert!(
            stderr(&out).contains(expected),
            "{args:?}: expected {expected:?} in:\n{}",
            stderr(&out)
        );
    }
    // A one-line file without a final newline is not taken for a torn session and replaced.
    for text in ["one line of notes", "{\"not\": \"a session"] {
        let notes = write(&dir, "one-line.txt", text);
        let out = common::pichamber(&["run", &ext, "--session", &notes, "--command", "/ask"]);
        assert!(!out.status.success(), "{text:?}: the run went on");
        assert!(
            stderr(&out).contains("is not a pi session file"),
            "{text:?}: {}",
            stderr(&out)
        );
        assert_eq!(std::fs::read_to_string(&notes).unwrap(), text, "left alone");
    }
}

#[test]
fn unknown_tool_lists_the_registered_ones() {
    let dir = tempfile::tempdir().unwrap();
    let ext = write(
        &dir,
        "t.ts",
        r#"export default (pi: any) => pi.registerTool({ name: "real", description: "", parameters: { type: "object" },
             execute: async () => ({ content: [], details: {} }) });"#,
    );
    let (ok, events, _) = common::run_json(&[&ext, "--tool", "fake"]);
    assert!(!ok);
    let result = common::of_type(&events, "tool_result")[0];
    assert_eq!(result["isError"], json!(true));
    assert_eq!(
        common::text_of(&result["content"]),
        "Tool fake not found (registered tools: read, bash, edit, write, grep, find, ls, real)"
    );
}

#[test]
fn dialogs_are_asked_on_a_terminal() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!(
            "SKIPPED: util-linux `script` is not installed (it provides the pseudo-terminal)"
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let ext = write(&dir, "asker.js", ASKER);
    let line = format!(
        "{} run {ext} --command '/ask from-tty'",
        common::bin().display()
    );
    let mut child = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .env("PICHAMBER_CACHE_DIR", common::cache_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    child.stdin.take().unwrap().write_all(b"2\ny\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert!(text.contains("? Pick one\n  1. red\n  2. green"), "{text}");
    assert!(
        text.contains("[info] answer: green true from-tty"),
        "{text}"
    );
}

#[test]
fn without_answers_or_terminal_there_is_no_ui() {
    let dir = tempfile::tempdir().unwrap();
    let ext = write(
        &dir,
        "ui.js",
        r#"export default (pi) => pi.registerCommand("check", { handler: async (_a, ctx) => {
             const v = await ctx.ui.select("never shown", ["a"]);
             pi.appendEntry("seen", { hasUI: ctx.hasUI, mode: ctx.mode, v: v ?? null });
           } });"#,
    );
    let (ok, events, stderr) = common::run_json(&[&ext, "--command", "/check"]);
    assert!(ok, "{stderr}");
    assert!(common::ui_requests(&events).is_empty());
    let entry = &common::of_type(&events, "entry")[0]["entry"];
    assert_eq!(
        entry["data"],
        json!({ "hasUI": false, "mode": "rpc", "v": null })
    );
}

#[test]
fn build_records_the_manifest_and_inspect_shows_registrations() {
    let dir = tempfile::tempdir().unwrap();
    write(
        &dir,
        "pkg/package.json",
        r#"{ "name": "demo-pkg", "version": "1.2.3", "type": "module",
             "pi": { "extensions": ["./src/main.ts"] },
             "pichamber": { "capabilities": { "read": ["./data"], "run": ["git"] } } }"#,
    );
    write(
        &dir,
        "pkg/src/util.ts",
        "export const shout = (s: string): string => s.toUpperCase();\n",
    );
    write(
        &dir,
        "pkg/src/main.ts",
        r#"import { shout } from "./util";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
export default function (pi: ExtensionAPI) {
  pi.registerTool({ name: "shout", label: "Shout", description: "Upper-cases", parameters: { type: "object" } as never,
    async execute(_id, p: any) { return { content: [{ type: "text", text: shout(p.text) }], details: {} }; } });
  pi.registerCommand("hi", { description: "says hi", handler: async () => {} });
  pi.on("session_start", () => {});
  pi.registerFlag("verbose", { type: "boolean", default: false });
  pi.registerShortcut("ctrl+h", { description: "inert", handler: () => {} });
}
"#,
    );
    let out_path = dir.path().join("demo.wasm");
    let built = common::pichamber(&[
        "build",
        dir.path().join("pkg").to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
    ]);
    assert!(built.status.success(), "{}", stderr(&built));
    let inspected = common::pichamber(&["inspect", out_path.to_str().unwrap(), "--json"]);
    assert!(inspected.status.success(), "{}", stderr(&inspected));
    let report: Value = serde_json::from_slice(&inspected.stdout).unwrap();
    let manifest = &report["manifest"];
    assert_eq!(manifest["name"], "demo-pkg");
    assert_eq!(manifest["version"], "1.2.3");
    assert_eq!(manifest["witVersion"], "0.2.0");
    assert_eq!(manifest["entry"], "/ext/src/main.ts");
    assert_eq!(manifest["modules"], 2);
    assert_eq!(
        manifest["capabilities"],
        json!({ "read": ["./data"], "run": ["git"] })
    );
    assert!(
        manifest["sourceHash"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(report["tools"][0]["name"], "shout");
    assert_eq!(report["commands"][0]["name"], "hi");
    assert_eq!(report["events"], json!(["session_start"]));
    assert_eq!(report["flags"][0]["name"], "verbose");
    assert_eq!(report["shortcuts"][0]["shortcut"], "ctrl+h");

    // The same sources give the same source hash; a change gives another.
    let again = dir.path().join("again.wasm");
    assert!(
        common::pichamber(&[
            "build",
            dir.path().join("pkg").to_str().unwrap(),
            "-o",
            again.to_str().unwrap()
        ])
        .status
        .success()
    );
    let hash = |p: &std::path::Path| -> Value {
        let r: Value = serde_json::from_slice(
            &common::pichamber(&["inspect", p.to_str().unwrap(), "--json"]).stdout,
        )
        .unwrap();
        r["manifest"]["sourceHash"].clone()
    };
    assert_eq!(hash(&out_path), hash(&again));
    write(
        &dir,
        "pkg/src/util.ts",
        "export const shout = (s: string): string => s.toUpperCase() + '!';\n",
    );
    assert!(
        common::pichamber(&[
            "build",
            dir.path().join("pkg").to_str().unwrap(),
            "-o",
            again.to_str().unwrap()
        ])
        .status
        .success()
    );
    assert_ne!(hash(&out_path), hash(&again));
}

#[test]
fn compiled_components_are_cached_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let ext = write(&dir, "asker.js", ASKER);
    let run = || {
        Command::new(common::bin())
            .args(["run", &ext, "--no-ui", "--json"])
            .env("PICHAMBER_CACHE_DIR", &cache)
            .output()
            .unwrap()
    };
    let listing = || {
        let mut entries: Vec<_> = std::fs::read_dir(&cache)
            .unwrap()
            .map(|e| {
                let path = e.unwrap().path();
                let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
                (path, modified)
            })
            .collect();
        entries.sort();
        entries
    };
    assert!(run().status.success());
    let first = listing();
    let names: Vec<String> = first
        .iter()
        .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    // The guest's snapshot the run starts from, the shim as instrumented to make it (kept
    // for every extension's own image), and the functions compiled for them.
    assert_eq!(
        names.iter().filter(|n| n.ends_with(".cwasm")).count(),
        2,
        "{names:?}"
    );
    assert!(names.contains(&"functions-1.bin".to_owned()), "{names:?}");
    assert!(run().status.success());
    assert_eq!(
        listing(),
        first,
        "the cache entries were reused, not rewritten"
    );
}

#[test]
fn oversized_values_from_an_extension_are_refused_and_the_session_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let ext = write(
        &dir,
        "big.js",
        r#"export default (pi) => {
             pi.registerTool({ name: "big", description: "", parameters: { type: "object" },
               execute: async () => ({ content: [{ type: "text", text: "x".repeat(5 << 20) }], details: {} }) });
             pi.registerTool({ name: "small", description: "", parameters: { type: "object" },
               execute: async () => ({ content: [{ type: "text", text: "fine" }], details: {} }) });
             pi.registerCommand("entry", { handler: async () => pi.appendEntry("huge", { s: "y".repeat(5 << 20) }) });
           };"#,
    );
    let (ok, events, _) = common::run_json(&[
        &ext,
        "--tool",
        "big",
        "--command",
        "/entry",
        "--tool",
        "small",
    ]);
    assert!(!ok);
    let results = common::of_type(&events, "tool_result");
    assert_eq!(results[0]["isError"], json!(true));
    assert!(
        common::text_of(&results[0]["content"]).contains("the limit is 4194304"),
        "{:?}",
        results[0]
    );
    let errors = common::of_type(&events, "extension_error");
    assert!(
        errors
            .iter()
            .any(|e| e["error"].as_str().unwrap().contains("entry data is")),
        "{errors:?}"
    );
    assert!(common::of_type(&events, "entry").is_empty());
    assert_eq!(common::text_of(&results[1]["content"]), "fine");
}

#[test]
fn node_globals_and_import_meta_are_there() {
    let dir = tempfile::tempdir().unwrap();
    let ext = write(
        &dir,
        "src/meta.ts",
        r#"export default function (pi: any) {
  pi.registerCommand("meta", { handler: async () => {
    const u = new URL("../c?x=1", "https://example.com/a/b");
    pi.appendEntry("meta", {
      url: import.meta.url, dirname: import.meta.dirname, filename: import.meta.filename,
      href: u.href, x: u.searchParams.get("x"),
      b64: btoa("hi"), back: atob("aGk="), hex: Buffer.from("hi").toString("hex"),
      env: process.env.PICHAMBER, marker: (globalThis as any).__PICHAMBER__,
    });
  } });
}"#,
    );
    let (ok, events, stderr) = common::run_json(&[&ext, "--command", "/meta"]);
    assert!(ok, "{stderr}");
    assert_eq!(
        common::of_type(&events, "entry")[0]["entry"]["data"],
        json!({
            "url": "file:///ext/meta.ts", "dirname": "/ext", "filename": "/ext/meta.ts",
            "href": "https://example.com/c?x=1", "x": "1",
            "b64": "aGk=", "back": "hi", "hex": "6869",
            "env": "1", "marker": { "version": 1 },
        })
    );
}

/// node:zlib and node:readline run inside the guest (tests/fixtures/node/platform.ts): Node's
/// own gzip and deflate output decodes, what the guest compresses decodes again, bad input
/// and a bomb past `maxOutputLength` fail as in Node, and readline splits a file's lines;
/// node:stream, web streams and node:timers work there too.
#[test]
fn zlib_readline_and_streams_work_inside_the_guest() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("lines.txt"),
        "one\r\ntwo\n\nfour\rfive €\nlast",
    )
    .unwrap();
    let cwd = dir.path().to_str().unwrap();
    let (ok, events, stderr) = common::run_json(&[
        &common::path("tests/fixtures/node/platform.ts"),
        "--cwd",
        cwd,
        "--allow-read",
        cwd,
        "--command",
        "/zlib",
        "--command",
        "/readline lines.txt",
        "--command",
        "/stream",
        "--command",
        "/webstreams",
        "--command",
        "/timers",
    ]);
    assert!(ok, "{stderr}");
    let entries = common::of_type(&events, "entry");
    assert_eq!(
        entries[0]["entry"]["data"],
        json!({
            "gunzipNode": "pichamber\npichamber\npichamber\n",
            "inflateNode": "€uro",
            "gzipMagic": [31, 139],
            "smaller": true,
            "roundTrip": true,
            "raw": "raw!",
            "unzip": "either",
            "callback": "async",
            "badInput": { "code": "Z_DATA_ERROR", "errno": -3, "message": "incorrect header check" },
            "tooLarge": { "code": "ERR_BUFFER_TOO_LARGE", "name": "RangeError" },
        })
    );
    // As Node splits them: \r\n, \n and a lone \r end a line; the last line needs no break.
    assert_eq!(
        entries[1]["entry"]["data"]["lines"],
        json!(["one", "two", "", "four", "five €", "last"])
    );
    // node:stream in the guest: a pipeline through a generator stage and a Transform into a
    // slow Writable, readline over a PassThrough, a character cut across chunks.
    assert_eq!(
        entries[2]["entry"]["data"],
        json!({ "seen": ["AA", "BB", "CC", "!"], "lines": ["one", "two"], "decoded": "|€" })
    );
    // Web streams in the guest: a TransformStream subclass after a TextDecoderStream fed
    // characters cut in two, tee and pipeTo, Readable.fromWeb, a loop's break cancelling, a
    // surrogate pair split across TextEncoderStream's chunks.
    assert_eq!(
        entries[3]["entry"]["data"],
        json!({
            "streamed": ["", "€\u{feff}", ""],
            "lines": ["data: héllo", "data: €uro", "last"],
            "written": ["x", "y", "z"],
            "viaNode": "xyz",
            "cancelled": "yes",
            "encoded": [240, 159, 152, 128],
            "sameGlobal": true,
        })
    );
    // Timers return Node's Timeout handles (pi-mcp-adapter unrefs its health check), and
    // node:timers/promises waits, yields interval ticks and rejects on abort.
    assert_eq!(
        entries[4]["entry"]["data"],
        json!({
            "fired": ["once", "tick", "tick", "once"],
            "chained": true,
            "idIsNumber": true,
            "value": "slept",
            "aborted": "AbortError ABORT_ERR",
            "ticks": [7, 7, 7],
            "immediate": "function",
        })
    );
}

/// process.memoryUsage() and node:v8's heap statistics are the guest engine's own figures:
/// they grow with what the extension allocates, and the heap's limit is the one the instance
/// gives QuickJS (three quarters of `--memory-limit`).
#[test]
fn memory_figures_are_the_guest_engines_own() {
    let (ok, events, stderr) = common::run_json(&[
        &common::path("tests/fixtures/node/platform.ts"),
        "--memory-limit",
        "64",
        "--command",
        "/memory",
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(
        common::of_type(&events, "entry")[0]["entry"]["data"],
        json!({
            "grew": true,
            "kept": 100_000,
            "linearHoldsTheHeap": true,
            "limit": 48 << 20,
            "available": true,
            "space": true,
        })
    );
}

/// pi loads extensions with jiti, so an ES module may call `require`; Node would not let it.
#[test]
fn an_es_module_may_require_as_under_pis_loader() {
    let (ok, events, stderr) = common::run_json(&[
        &common::path("tests/fixtures/node/esm-require"),
        "--command",
        "/req",
    ]);
    assert!(ok, "{stderr}");
    assert_eq!(
        common::of_type(&events, "entry")[0]["entry"]["data"],
        json!({ "greet": "hello Ada", "base": "c.txt", "esm": 42, "missing": "MODULE_NOT_FOUND" })
    );
}

/// pi 1.6.0 compacts nothing when nothing precedes the kept messages (its system message is
/// prompt state, not conversation) and tells extensions with `session_compact_failed`;
/// 0.73.1 compacted such a session and has no such event.
#[test]
fn a_compaction_with_nothing_to_compact_fails_as_pi_1_6_fails_it() {
    let dir = tempfile::tempdir().unwrap();
    let ext = write(
        &dir,
        "failed.ts",
        r#"export default function (pi: any) {
  pi.on("session_compact_failed", (event: any) => { pi.appendEntry("failed", event); });
  pi.registerCommand("c", { handler: async (_a: string, ctx: any) => ctx.compact() });
}"#,
    );
    let script = write(
        &dir,
        "s.json",
        r#"{"turns":[{"text":"hello"},{"text":"a summary"}]}"#,
    );
    let run = |pi: &str| {
        let (ok, events, stderr) = common::run_json(&[
            &ext,
            "--pi-version",
            pi,
            "--script",
            &script,
            "-p",
            "hi",
            "--command",
            "/c",
        ]);
        assert!(ok, "{stderr}");
        events
    };
    let events = run("1.6.0");
    let end = common::of_type(&events, "compaction_end")[0].clone();
    assert_eq!(
        end["errorMessage"],
        "Compaction failed: Nothing to compact (session too small)"
    );
    let failed: Vec<_> = common::of_type(&events, "entry")
        .into_iter()
        .filter(|e| e["entry"]["customType"] == "failed")
        .map(|e| e["entry"]["data"].clone())
        .collect();
    assert_eq!(
        failed,
        [json!({
            "type": "session_compact_failed", "reason": "manual",
            "errorMessage": "Compaction failed: Nothing to compact (session too small)",
            "aborted": false, "willRetry": false, "fromExtension": false,
        })]
    );
    let events = run("0.73.1");
    assert!(common::of_type(&events, "compaction_end")[0]["errorMessage"].is_null());
    assert!(
        common::of_type(&events, "entry")
            .iter()
            .all(|e| e["entry"]["customType"] != "failed")
    );
}

#[test]
fn work_left_running_by_a_handler_runs_between_steps() {
    let dir = tempfile::tempdir().unwrap();
    let ext = write(
        &dir,
        "later.js",
        r#"export default (pi) => {
             pi.registerCommand("later", { handler: async (_a, ctx) => {
               setTimeout(() => pi.appendEntry("timer", { fired: true }), 0);
               // A dialog nobody awaits: its answer arrives after the handler returned.
               ctx.ui.confirm("Later?", "answered after the handler").then((ok) => pi.appendEntry("late-answer", { ok }));
             } });
             pi.registerCommand("next", { handler: async () => pi.appendEntry("next", {}) });
           };"#,
    );
    let (ok, events, stderr) = common::run_json(&[
        &ext,
        "--command",
        "/later",
        "--answer",
        "yes",
        "--command",
        "/next",
    ]);
    assert!(ok, "{stderr}");
    let kinds: Vec<&str> = common::of_type(&events, "entry")
        .iter()
        .map(|e| e["entry"]["customType"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"timer") && kinds.contains(&"late-answer"),
        "{kinds:?}"
    );
    assert_eq!(
        kinds.last(),
        Some(&"next"),
        "background work ran before the next step: {kinds:?}"
    );
    let late = common::of_type(&events, "entry")
        .into_iter()
        .find(|e| e["entry"]["customType"] == "late-answer")
        .unwrap();
    assert_eq!(late["entry"]["data"], json!({ "ok": true }));
}

#[test]
fn files_outside_the_grants_are_denied_with_the_flag_that_grants_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let ro = root.join("ro");
    let rw = root.join("rw");
    std::fs::create_dir_all(&ro).unwrap();
    std::fs::create_dir_all(&rw).unwrap();
    std::fs::write(ro.join("a.txt"), "secret").unwrap();
    std::fs::write(root.join("outside.txt"), "not yours").unwrap();
    std::fs::create_dir_all(root.join("other")).unwrap();
    std::fs::create_dir_all(ro.join("sub")).unwrap();
    let ext = write(
        &dir,
        "ext/fsx.ts",
        &format!(
            r#"import {{ readFileSync, readdirSync, writeFileSync }} from "node:fs";
export default function (pi: any) {{
  pi.registerCommand("fs", {{ handler: async () => {{
    const out: Record<string, string> = {{}};
    const attempt = (name: string, f: () => unknown) => {{
      try {{ out[name] = String(f()); }} catch (e: any) {{ out[name] = `${{e.code}} | ${{e.message}}`; }}
    }};
    attempt("read-granted", () => readFileSync("{ro}/a.txt", "utf8"));
    attempt("read-outside", () => readFileSync("{root}/outside.txt", "utf8"));
    attempt("escape", () => readFileSync("{ro}/../outside.txt", "utf8"));
    attempt("write-read-only", () => writeFileSync("{ro}/b.txt", "x"));
    attempt("write-granted", () => {{ writeFileSync("{rw}/b.txt", "written"); return "ok"; }});
    attempt("missing", () => readFileSync("{ro}/nope.txt", "utf8"));
    attempt("list-outside", () => readdirSync("{root}/other"));
    attempt("write-read-only-sub", () => writeFileSync("{ro}/sub/c.txt", "x"));
    pi.appendEntry("fs", out);
  }} }});
}}"#,
            ro = ro.display(),
            rw = rw.display(),
            root = root.display()
        ),
    );
    let ro_flag = format!("--allow-read={}", ro.display());
    let rw_flag = format!("--allow-write={}", rw.display());
    let (ok, events, stderr) = common::run_json(&[&ext, &ro_flag, &rw_flag, "--command", "/fs"]);
    assert!(ok, "{stderr}");
    let out = &common::of_type(&events, "entry")[0]["entry"]["data"];
    assert_eq!(out["read-granted"], "secret");
    let outside = format!(
        "EACCES | EACCES: permission denied, open '{0}/outside.txt' — {0}/outside.txt is outside the directories this extension may read: grant it with --allow-read={0}",
        root.display()
    );
    assert_eq!(out["read-outside"], json!(outside));
    assert!(
        out["escape"].as_str().unwrap().contains("--allow-read="),
        "{out}"
    );
    assert_eq!(
        out["write-read-only"],
        json!(format!(
            "EACCES | EACCES: permission denied, open '{0}/b.txt' — {0} is granted read-only: grant writing with --allow-write={0}",
            ro.display()
        ))
    );
    // The narrowest grant that would do: a folder listed is granted itself (not the folder
    // holding it), a file written is granted its own folder (not the whole read-only tree).
    assert_eq!(
        out["list-outside"],
        json!(format!(
            "EACCES | EACCES: permission denied, scandir '{0}/other' — {0}/other is outside the directories this extension may read: grant it with --allow-read={0}/other",
            root.display()
        ))
    );
    assert_eq!(
        out["write-read-only-sub"],
        json!(format!(
            "EACCES | EACCES: permission denied, open '{0}/sub/c.txt' — {0} is granted read-only: grant writing with --allow-write={0}/sub",
            ro.display()
        ))
    );
    assert_eq!(out["write-granted"], "ok");
    assert_eq!(
        std::fs::read_to_string(rw.join("b.txt")).unwrap(),
        "written"
    );
    assert!(!ro.join("b.txt").exists());
    assert!(
        out["missing"]
            .as_str()
            .unwrap()
            .starts_with("ENOENT | ENOENT: no such file or directory"),
        "{out}"
    );
}

#[test]
fn memory_and_stack_exhaustion_stop_only_the_offending_extension() {
    let dir = tempfile::tempdir().unwrap();
    let hostile = write(
        &dir,
        "hostile.js",
        r#"export default (pi) => {
             pi.registerCommand("bomb", { handler: async () => { const a = []; for (;;) a.push(new Array(1e6).fill(1)); } });
             pi.registerCommand("recurse", { handler: async () => { const f = (n) => f(n + 1) + 1; f(0); } });
             pi.registerCommand("strbomb", { handler: async () => { let s = "x"; for (;;) s += s; } });
             pi.registerCommand("still", { handler: async () => pi.appendEntry("hostile-alive", {}) });
           };"#,
    );
    let bystander = write(
        &dir,
        "bystander.js",
        r#"export default (pi) => pi.registerCommand("ok", { handler: async () => pi.appendEntry("bystander-alive", {}) });"#,
    );
    let errors_of = |events: &[Value]| -> Vec<String> {
        common::of_type(events, "extension_error")
            .iter()
            .map(|e| e["error"].as_str().unwrap().to_owned())
            .collect()
    };
    let alive = |events: &[Value], kind: &str| {
        common::of_type(events, "entry")
            .iter()
            .any(|e| e["entry"]["customType"] == kind)
    };

    // Memory: the instance limit stops it, the message names the flag; the other extension goes on.
    let (ok, events, _) = common::run_json(&[
        &hostile,
        &bystander,
        "--memory-limit",
        "64",
        "--command",
        "/bomb",
        "--command",
        "/ok",
    ]);
    assert!(!ok);
    assert_eq!(
        errors_of(&events)[0],
        "the extension was stopped: exceeded its memory limit (raise it with --memory-limit=MIB); it restarts on its next use (failure 1 of 3)"
    );
    assert!(alive(&events, "bystander-alive"));

    // Unbounded recursion: stopped, reported, the other extension goes on.
    let (_, events, _) = common::run_json(&[
        &hostile,
        &bystander,
        "--command",
        "/recurse",
        "--command",
        "/ok",
    ]);
    assert!(
        errors_of(&events)[0].contains("unbounded recursion"),
        "{:?}",
        errors_of(&events)
    );
    assert!(alive(&events, "bystander-alive"));

    // A string that outgrows QuickJS is an ordinary exception: the extension itself goes on.
    let (_, events, _) =
        common::run_json(&[&hostile, "--command", "/strbomb", "--command", "/still"]);
    assert!(
        errors_of(&events)[0].starts_with("string too long"),
        "{:?}",
        errors_of(&events)
    );
    assert!(alive(&events, "hostile-alive"));
}

/// With no extension argument, pichamber loads what pi would find, except a project's own
/// extensions, which wait for --trust-project.
#[test]
fn without_an_extension_argument_extensions_are_found_where_pi_finds_them() {
    let root = tempfile::tempdir().unwrap();
    let agent = root.path().join("agent");
    let project = root.path().join("project");
    let tool = |name: &str| {
        format!(
            r#"export default (pi: any) => {{ pi.registerTool({{ name: "{name}", description: "", parameters: {{ type: "object" }},
                 execute: async () => ({{ content: [{{ type: "text", text: "{name} ran" }}] }}) }});
               pi.registerCommand("where_{name}", {{ handler: async () => pi.appendEntry("where",
                 pi.getCommands().map((c: any) => [c.name, c.sourceInfo])) }}); }};"#
        )
    };
    std::fs::create_dir_all(agent.join("extensions")).unwrap();
    std::fs::create_dir_all(project.join(".pi/extensions")).unwrap();
    std::fs::write(agent.join("extensions/global.ts"), tool("global_tool")).unwrap();
    std::fs::write(project.join(".pi/extensions/local.ts"), tool("local_tool")).unwrap();
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(common::bin())
            .args([
                "run",
                "--json",
                "--tool",
                "global_tool",
                "--tool",
                "local_tool",
                "--command",
                "/where_global_tool",
            ])
            .args(extra)
            .current_dir(&project)
            .env("PI_CODING_AGENT_DIR", &agent)
            .env("PICHAMBER_CACHE_DIR", common::cache_dir())
            .output()
            .unwrap();
        let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let results: Vec<(String, bool)> = common::of_type(&events, "tool_result")
            .iter()
            .map(|r| (common::text_of(&r["content"]), r["isError"] == json!(true)))
            .collect();
        let sources = common::of_type(&events, "entry")
            .iter()
            .find(|e| e["entry"]["customType"] == "where")
            .map(|e| e["entry"]["data"].clone());
        (
            results,
            String::from_utf8_lossy(&out.stderr).into_owned(),
            sources,
        )
    };
    let (results, stderr, _) = run(&[]);
    assert_eq!(results[0], ("global_tool ran".into(), false));
    assert!(
        results[1].1,
        "the project's tool is not loaded: {results:?}"
    );
    assert!(stderr.contains("--trust-project"), "{stderr}");
    let (results, _, sources) = run(&["--trust-project"]);
    assert_eq!(results[1], ("local_tool ran".into(), false));
    // How pi labels what it found: the project's, then the user's (the path is the
    // extension's name, not its file).
    let found = |path: &str, scope: &str| json!({ "path": path, "source": "auto", "scope": scope, "origin": "top-level" });
    assert_eq!(
        sources,
        Some(json!([
            ["where_local_tool", found("extension:local", "project")],
            ["where_global_tool", found("extension:global", "user")],
        ]))
    );
    let (results, _, _) = run(&["--no-extensions"]);
    assert!(results.iter().all(|(_, error)| *error));
    // Given on the command line: pi's `-e`.
    let (_, _, sources) = run(&[agent.join("extensions/global.ts").to_str().unwrap()]);
    assert_eq!(
        sources,
        Some(json!([[
            "where_global_tool",
            { "path": "extension:global", "source": "cli", "scope": "temporary", "origin": "top-level" }
        ]]))
    );
}

/// One extension found where pi looks that does not build (a syntax error, an import of a
/// missing module) is skipped with one line on stderr naming it and why; the others load and
/// the steps run, and `run` then exits 1 as for any extension that failed to load. One given
/// on the command line still stops the run.
#[test]
fn a_found_extension_that_does_not_build_is_skipped_and_the_others_load() {
    let root = tempfile::tempdir().unwrap();
    let agent = root.path().join("agent");
    let extensions = agent.join("extensions");
    std::fs::create_dir_all(&extensions).unwrap();
    std::fs::write(
        extensions.join("good.ts"),
        r#"export default (pi: any) => pi.registerCommand("good", { handler: async () => pi.appendEntry("good-ran", {}) });"#,
    )
    .unwrap();
    std::fs::write(
        extensions.join("broken.ts"),
        r#"export default (pi: any) => { pi.registerCommand("broken" { handler: async () => 1 }); };"#,
    )
    .unwrap();
    std::fs::write(
        extensions.join("lost.ts"),
        "import { x } from \"./nowhere\";\nexport default (pi: any) => pi.registerCommand(\"lost\", { handler: async () => x });",
    )
    .unwrap();
    let pichamber = |args: &[&str], stdin: &str| {
        common::output_with_stdin(
            Command::new(common::bin())
                .args(args)
                .current_dir(root.path())
                .env("PI_CODING_AGENT_DIR", &agent)
                .env("PICHAMBER_CACHE_DIR", common::cache_dir()),
            stdin,
        )
    };
    let said = |path: &str, why: &str| {
        format!(
            "warning: skipped the extension {}, which does not build: {why}\n",
            extensions.join(path).display()
        )
    };
    let broken = said(
        "broken.ts",
        "agent/extensions/broken.ts:1:59: Expected `,` or `)` but found `{`",
    );
    let lost = said(
        "lost.ts",
        "agent/extensions/lost.ts:1:19: cannot resolve './nowhere': Cannot find module './nowhere'",
    );

    let out = pichamber(&["run", "--command", "/good", "--json"], "");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(stderr(&out), format!("{broken}{lost}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains(r#""customType":"good-ran""#), "{stdout}");

    let out = pichamber(&["rpc"], "{\"id\":\"1\",\"type\":\"get_commands\"}\n");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stderr(&out), format!("{broken}{lost}"));
    let response: Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    let names: Vec<&str> = response["data"]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    // Then the commands of pi 1.6.0's built-in llama.cpp and mcp extensions, as pi lists them.
    assert_eq!(names, ["good", "llama", "mcp"]);

    let given = extensions.join("broken.ts");
    let out = pichamber(&["run", given.to_str().unwrap(), "--command", "/good"], "");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with("error: agent/extensions/broken.ts:1:59:"),
        "{}",
        stderr(&out)
    );
}

/// A prompt to a model whose key is missing says which environment variable to set: the one
/// `--api-key-env` names (OPENAI_API_KEY by default), or the built-in provider's.
#[test]
fn a_missing_api_key_names_the_variable_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let ext = write(&dir, "asker.js", ASKER);
    let models = write(
        &dir,
        "models.json",
        r#"{"providers": {"openai": {"baseUrl": "http://127.0.0.1:9/v1", "api": "openai-completions", "models": [{"id": "gpt-4o-mini"}]}}}"#,
    );
    let prompt = |args: &[&str]| {
        let out = Command::new(common::bin())
            .arg("run")
            .arg(&ext)
            .args(args)
            .args(["--prompt", "hi"])
            .env("PICHAMBER_CACHE_DIR", common::cache_dir())
            .env_remove("OPENAI_API_KEY")
            .env_remove("PICHAMBER_TEST_NO_SUCH_KEY")
            .output()
            .unwrap();
        assert!(!out.status.success());
        stderr(&out)
    };
    let base_url = ["--model", "m", "--base-url", "http://127.0.0.1:9/v1"];
    assert!(
        prompt(&base_url).contains(
            "error: No API key found for openai-compatible. Set the environment variable OPENAI_API_KEY to the key.\n"
        ),
        "{}",
        prompt(&base_url)
    );
    let other = [
        &base_url[..],
        &["--api-key-env", "PICHAMBER_TEST_NO_SUCH_KEY"],
    ]
    .concat();
    assert!(
        prompt(&other).contains(
            "error: No API key found for openai-compatible. Set the environment variable PICHAMBER_TEST_NO_SUCH_KEY to the key.\n"
        ),
        "{}",
        prompt(&other)
    );
    let from_models = ["--models", &models, "--model", "gpt-4o-mini"];
    assert!(
        prompt(&from_models).contains(
            "error: No API key found for openai. Set the environment variable OPENAI_API_KEY to the key.\n"
        ),
        "{}",
        prompt(&from_models)
    );
}

/// The readable transcript of a prompt is what was said: not the session's bookkeeping (the
/// model and thinking level it starts with, pi 1.6.0's context edits) as `entry ...` lines.
#[test]
fn the_readable_transcript_leaves_out_the_sessions_bookkeeping() {
    let dir = tempfile::tempdir().unwrap();
    let ext = write(&dir, "asker.js", ASKER);
    let script = write(
        &dir,
        "turns.json",
        r#"{"turns": [{"text": "Hello there."}]}"#,
    );
    let out = common::pichamber(&["run", &ext, "--script", &script, "--prompt", "hi"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "> hi\nHello there.\n");
    // --json keeps every entry.
    let (_, events, _) = common::run_json(&[&ext, "--script", &script, "--prompt", "hi"]);
    let kinds: Vec<&str> = common::of_type(&events, "entry")
        .iter()
        .filter_map(|e| e["entry"]["type"].as_str())
        .collect();
    assert!(
        kinds.contains(&"model_change") && kinds.contains(&"thinking_level_change"),
        "{kinds:?}"
    );
}

/// `run --command` without --json prints the cards a command appends (and the ones it sends
/// as custom messages) as text: title, then the content, then the actions; whatever came from
/// the extension has its control characters made visible and cannot start a line of its own.
/// --json keeps printing the entries as they are.
#[test]
fn cards_print_as_readable_text() {
    let out = common::pichamber(&[
        "run",
        &common::path("extensions/card-demo"),
        "--command",
        "/cards",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "About
  **PiChamber** renders these cards from plain JSON.
  actions: Open README (/cards-open README.md)
Summary
  Files: 12
  Errors: 0
  Warnings: 2
  actions: Refresh (/cards)
Folders
  - src/: 42 files
  - tests/: 7 files
  actions: Open folder… (/cards-open <Folder>)
Files
  File  Status
  ----  -------
  a.ts  done
  b.ts  running
  actions: Open a.ts (/cards-open a.ts)
Build
  Compiling 10/100
  actions: Cancel (/cards-cancel)
Build
  Linking 60/100
  actions: Cancel (/cards-cancel)
Build
  Done 100/100
  actions: Cancel (/cards-cancel)
Checks
  [passing] [3 skipped] [1 flaky]
  actions: Re-run (/cards-open checks, disabled)
Snippet (ts)
  pi.appendEntry(\"pichamber.ui\", { component: \"code\" });
  actions: Open source (/cards-open index.ts)
panel cards-build removed
"
    );
    let (ok, events, _) =
        common::run_json(&[&common::path("extensions/card-demo"), "--command", "/cards"]);
    assert!(ok);
    let first = &common::of_type(&events, "entry")[0]["entry"];
    assert_eq!(first["customType"], "pichamber.ui");
    assert_eq!(
        first["data"]["props"]["body"],
        "**PiChamber** renders these cards from plain JSON."
    );

    let dir = tempfile::tempdir().unwrap();
    let ext = write(
        &dir,
        "hostile-cards.js",
        r#"export default (pi) => pi.registerCommand("c", { handler: async () => {
  pi.appendEntry("pichamber.ui", { title: "Report\u001b]52;c;aGk=\u0007", component: "table",
    props: { columns: ["name", "state"], rows: [["\u001b[2Jx", "ok\nerror: forged"]] } });
  pi.sendMessage({ customType: "pichamber.ui", display: true, content: JSON.stringify({
    title: "Sent", component: "markdown", props: { body: "line\nerror: forged too\u001b[31m" } }) });
} });"#,
    );
    let out = common::pichamber(&["run", &ext, "--command", "/c"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "Report\\u{1b}]52;c;aGk=\\u{7}
  name        state
  ----------  ----------------
  \\u{1b}[2Jx  ok error: forged
Sent
  line
  error: forged too\\u{1b}[31m
"
    );
}

/// `pichamber export` reads a session file (without changing it) and writes the page where
/// -o says, or pi's default name in the current folder.
#[test]
fn export_writes_a_page_and_leaves_the_session_alone() {
    let dir = tempfile::tempdir().unwrap();
    let session = dir.path().join("talk.jsonl");
    // A version-2 file (pi migrates these on open) with a torn last line.
    let text = [
        r#"{"type":"session","version":2,"id":"s-1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/tmp"}"#,
        r#"{"type":"message","id":"a","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"Export me <script>x()</script>","timestamp":1}}"#,
        r#"{"type":"message","id":"b","parentId":"a","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"assistant","content":[{"type":"text","text":"Sure: *done*"}],"stopReason":"stop","timestamp":2}}"#,
        r#"{"type":"message","id":"c","par"#,
    ]
    .join("\n");
    std::fs::write(&session, &text).unwrap();
    let out = common::pichamber(&[
        "export",
        session.to_str().unwrap(),
        "-o",
        dir.path().join("x.html").to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        dir.path().join("x.html").display().to_string()
    );
    let page = std::fs::read_to_string(dir.path().join("x.html")).unwrap();
    assert!(
        page.contains("Export me") && page.contains("<em>done</em>"),
        "{page}"
    );
    assert!(!page.contains("<script"), "{page}");
    assert_eq!(
        std::fs::read_to_string(&session).unwrap(),
        text,
        "the session file changed"
    );

    let out = std::process::Command::new(common::bin())
        .args(["export", "talk.jsonl"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(dir.path().join("pi-session-talk.html").is_file());

    let out = common::pichamber(&["export", dir.path().join("missing.jsonl").to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("File not found"), "{}", stderr(&out));
    let out = common::pichamber(&[
        "export",
        session.to_str().unwrap(),
        "-o",
        dir.path().to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));
}

#[test]
fn a_single_file_requests_capabilities_in_a_comment_and_runs_without_until_granted() {
    let dir = tempfile::tempdir().unwrap();
    let ext = write(
        &dir,
        "asks.ts",
        r#"// pichamber.capabilities: {"run": ["git"], "env": ["ASKS_TOKEN"], "reason": "to say hello"}
export default function (pi: any) {
  pi.registerCommand("hi", { handler: async () => {} });
}
"#,
    );
    let wasm = dir.path().join("asks.wasm");
    let built = common::pichamber(&["build", &ext, "-o", wasm.to_str().unwrap()]);
    assert!(built.status.success(), "{}", stderr(&built));
    let inspected = common::pichamber(&["inspect", wasm.to_str().unwrap(), "--json"]);
    let report: Value = serde_json::from_slice(&inspected.stdout).unwrap();
    assert_eq!(
        report["manifest"]["capabilities"],
        json!({ "run": ["git"], "env": ["ASKS_TOKEN"], "reason": "to say hello" })
    );
    let text = common::pichamber(&["inspect", wasm.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(
        text.contains(r#"capabilities: run git, env ASKS_TOKEN — "to say hello" (grant with --allow-run=git --allow-env=ASKS_TOKEN)"#),
        "{text}"
    );

    // Without the GUI nothing is asked: the run says what is missing and how to grant it.
    let run = common::pichamber(&[
        "run",
        wasm.to_str().unwrap(),
        "--allow-run=git",
        "--command",
        "/hi",
    ]);
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(
        stderr(&run).contains(
            "asks requests env ASKS_TOKEN, not granted: it runs without (grant with --allow-env=ASKS_TOKEN)"
        ),
        "{}",
        stderr(&run)
    );
    let granted = common::pichamber(&[
        "run",
        wasm.to_str().unwrap(),
        "--allow-run=git",
        "--allow-env=ASKS_TOKEN",
        "--command",
        "/hi",
    ]);
    assert!(
        !stderr(&granted).contains("not granted"),
        "{}",
        stderr(&granted)
    );

    // A malformed request stops the build at its line.
    let bad = write(
        &dir,
        "bad.ts",
        "export default function () {}\n// pichamber.capabilities: {\"run\": [\"/bin/sh\"]}\n",
    );
    let out = common::pichamber(&[
        "build",
        &bad,
        "-o",
        dir.path().join("bad.wasm").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("bad.ts:2:1:") && stderr(&out).contains("is a path"),
        "{}",
        stderr(&out)
    );

    // --deny-all says the default explicitly, and cannot be mixed with a grant.
    let out = common::pichamber(&[
        "run",
        &ext,
        "--deny-all",
        "--allow-run=git",
        "--command",
        "/hi",
    ]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--deny-all"), "{}", stderr(&out));
}

/// A program that spawns `pi --mode rpc ...` gets pichamber when a `pi` that is pichamber
/// comes first on PATH: pi's flags are taken as pi means them, the session is kept where pi
/// keeps it (`--no-session` keeps it in memory), and what pichamber cannot do is refused by
/// name.
#[test]
fn the_binary_answers_to_pis_name_with_pis_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    let agent = dir.path().join("agent");
    let ws = dir.path().join("ws");
    for d in [&bin, &agent, &ws] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::os::unix::fs::symlink(common::bin(), bin.join("pi")).unwrap();
    let ws = ws.canonicalize().unwrap();
    let pi = |args: &[&str], input: &str| {
        common::output_with_stdin(
            Command::new(bin.join("pi"))
                .args(args)
                .current_dir(&ws)
                .env("PI_CODING_AGENT_DIR", &agent)
                .env("PICHAMBER_CACHE_DIR", common::cache_dir()),
            input,
        )
    };
    let state = |out: &std::process::Output| -> Value {
        let line = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.contains("get_state"))
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("no get_state response: {}", stderr(out)));
        serde_json::from_str(&line).unwrap()
    };
    let get_state = "{\"id\":\"1\",\"type\":\"get_state\"}\n";

    let out = pi(&["--mode", "rpc", "-ne", "--no-themes"], get_state);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("--no-themes ignored"),
        "{}",
        stderr(&out)
    );
    let file = state(&out)["data"]["sessionFile"]
        .as_str()
        .unwrap()
        .to_owned();
    let expected = agent.join("sessions").join(format!(
        "--{}--",
        ws.to_string_lossy()
            .trim_start_matches('/')
            .replace('/', "-")
    ));
    assert_eq!(std::path::Path::new(&file).parent().unwrap(), expected);

    let out = pi(&["--mode", "rpc", "-ne", "--no-session"], get_state);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(state(&out)["data"]["sessionFile"].is_null());

    let out = pi(&["--mode", "rpc", "--fork", "abc"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("pi option --fork is not supported"),
        "{}",
        stderr(&out)
    );
    let out = pi(&["--mode", "tui"], "");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("pi's modes are rpc, json and text"),
        "{}",
        stderr(&out)
    );
    // No mode with stdout redirected is print mode, as in pi; here no model is configured.
    let out = pi(&["-ne", "--no-session", "hello"], "");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("No model configured"),
        "{}",
        stderr(&out)
    );
}

/// A provider's API key reaches an extension only under `--allow-model-key=PROVIDER`; without
/// it both of `ctx.modelRegistry`'s ways to read it are refused naming that flag.
#[test]
fn a_model_key_is_read_only_when_granted() {
    let dir = tempfile::tempdir().unwrap();
    let models = dir.path().join("models.json");
    std::fs::write(
        &models,
        json!({ "providers": { "mock": {
            "baseUrl": "http://127.0.0.1:9/v1",
            "api": "openai-completions",
            "apiKey": "test-key",
            "headers": { "X-Team": "blue" },
            "models": [{ "id": "mock-model" }],
        }}})
        .to_string(),
    )
    .unwrap();
    let keys = |grant: &[&str]| {
        let mut args = vec![
            common::path("tests/fixtures/grants/model-key.ts"),
            "--models".into(),
            models.to_string_lossy().into_owned(),
        ];
        args.extend(grant.iter().map(|g| g.to_string()));
        args.extend(["--command".into(), "/keys".into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (ok, events, stderr) = common::run_json(&args);
        assert!(ok, "{stderr}");
        common::of_type(&events, "entry")[0]["entry"]["data"].clone()
    };
    let refused = keys(&[]);
    let error = refused["key"]["error"].as_str().unwrap_or_default();
    assert!(error.contains("--allow-model-key=mock"), "{refused}");
    assert_eq!(refused["auth"]["ok"], json!(false), "{refused}");
    assert!(
        refused["auth"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("--allow-model-key=mock")),
        "{refused}"
    );
    let granted = keys(&["--allow-model-key=mock"]);
    assert_eq!(
        granted,
        json!({
            "key": { "ok": "test-key" },
            "auth": { "ok": true, "apiKey": "test-key", "headers": { "X-Team": "blue" } },
            "unknown": { "ok": true },
        })
    );
    // Another provider's grant gives nothing.
    let other = keys(&["--allow-model-key=openai"]);
    assert!(other["key"]["error"].is_string(), "{other}");
    // The flag checks what it is given.
    let out = common::pichamber(&["run", "x.ts", "--allow-model-key=open ai"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a provider name"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
