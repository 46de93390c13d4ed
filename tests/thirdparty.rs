//! The compatibility harness on pi extensions that others publish on npm: each package pinned
//! in tests/thirdparty/package.json (installed by `npm ci --prefix tests/thirdparty`, which
//! tests/run.sh does) goes through the scenario of tests/corpus.rs (tests/corpus/scenario.rs):
//! real pi, of the version the package was written for, loads the installed package folder
//! (`pi --mode rpc -e PACKAGE_DIR`); pichamber builds the package (`pichamber build
//! PACKAGE_DIR`: all of its `pi.extensions` in one artifact), then loads the same folder
//! (`pichamber rpc -e PACKAGE_DIR`). The outcome is written to docs/THIRD_PARTY.md.
//!
//! The test fails when the committed docs/THIRD_PARTY.md differs from what it generates;
//! `UPDATE_THIRD_PARTY=1` rewrites it. For working on it: `THIRD_PARTY_ONLY=pi-aliases,...`
//! runs only these packages and prints the table; `CORPUS_VERBOSE=1`, `CORPUS_LOGS=DIR` and
//! `CORPUS_THREADS=N` work as for tests/corpus.rs.

mod common;
#[path = "corpus/normalise.rs"]
mod normalise;
#[path = "corpus/rpc.rs"]
mod rpc;
// The example list and its dependency installs are tests/corpus.rs's only.
#[allow(dead_code)]
#[path = "corpus/scenario.rs"]
mod scenario;
#[path = "corpus/table.rs"]
mod table;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::oracle::Pi;
use normalise::Paths;
use scenario::{Kind, Record};
use serde_json::{Value, json};
use table::{cell, cut, yes_no};

/// What each package is, and why it differs when it does for a reason the harness cannot
/// see (a note written after investigating; shown next to the generated first difference).
/// Monthly downloads are those of the npm registry's listing when the packages were picked
/// (a static note: the test never asks the registry).
struct Package {
    name: &'static str,
    what: &'static str,
    monthly_downloads: u32,
    note: &'static str,
    /// It prints values it draws at random (or from the clock) in each run: pi runs twice more,
    /// and where pi differs from itself is left out of the comparison. (One more run was not
    /// enough: a name drawn from 64 came out the same in both of pi's runs, and CI failed.)
    random_output: bool,
    /// Files its user keeps in pi's agent folder (name, contents), written on every side.
    settings: &'static [(&'static str, &'static str)],
}

const PACKAGES: &[Package] = &[
    Package {
        name: "pi-subagents",
        what: "delegation to sub-agents (pi processes) and multi-agent workflows",
        monthly_downloads: 5009,
        note: "Builds and loads with `node:worker_threads`, `node:vm` and its own package files (its agents, prompts and README, read at `/ext`); granted `/tmp` for its run folders. Remains, by design: its background runs start the host's `node` on its own TypeScript sources through pi's jiti; an extension's code runs only inside its sandbox (its sources are not files a host program could run, SECURITY.md), so it finds no jiti and reports `async support: unavailable` where pi's report says available. Every step that differs differs by that line only.",
        random_output: false,
        settings: &[],
    },
    Package {
        name: "pi-markdown-preview",
        what: "Markdown and LaTeX previews in the terminal, a browser or a PDF",
        monthly_downloads: 2669,
        note: "Builds with `node:tty` (its `debug` dependency asks whether stderr is a terminal) and loads with the two browser scripts it reads as text from its package (`new URL(\"./client/…js\", import.meta.url)`), which the build now packages as files. Granted `pandoc`, which this machine lacks: both sides report it missing, so no preview renders here. Past pandoc, its terminal preview drives a Chromium it launches through puppeteer over a WebSocket, and its watch mode serves the page from a `node:http` server: pichamber refuses both (extensions get no sockets or servers by design, SECURITY.md).",
        random_output: false,
        settings: &[],
    },
    Package {
        name: "pi-web-access",
        what: "web search, URL fetching, PDF and video extraction",
        monthly_downloads: 2477,
        note: "Loads with the guest's `node:sqlite` (Chrome's cookie database), its CommonJS dependencies run in Node's order (cssom resolves a cycle by require order) and its failed requests fail as Node's fetch does (`fetch failed`, the cause's code). It names its stored results by the clock and at random, which pi's further runs leave out. Remains: its curator serves a local web page with a `node:http` server, which pichamber refuses (extensions get no network servers by design, SECURITY.md). It imports pi 1.6.0's `resizeImage`, which the host's image codec serves (tests/pi_api.rs compares it with pi's).",
        random_output: true,
        // Whether pi's `xdg-open` failed within the 100 ms it waits decided pi's output on a
        // machine with no browser; a user there turns the opening off.
        settings: &[("web-search.json", r#"{ "autoOpenBrowser": false }"#)],
    },
    Package {
        name: "@aliou/pi-processes",
        what: "background processes the agent starts and watches (three extensions)",
        monthly_downloads: 2332,
        note: "Its three extensions talk through `pi.events` with payloads carrying reply functions, answered synchronously: they work because a package's extensions share one instance (SECURITY.md, the isolation unit).",
        random_output: false,
        settings: &[],
    },
    Package {
        name: "pi-mcp-adapter",
        what: "MCP servers' tools as pi tools",
        monthly_downloads: 2082,
        note: "Its stdio MCP servers work: tests/thirdparty.rs calls one through its `mcp` tool, as in pi. Its code mode runs scripts in a `node:worker_threads` worker with `node:vm`, and the undici it bundles needs `node:assert`, `node:async_hooks`, `node:diagnostics_channel` and more, all of which pichamber now has; its OAuth callback and UI servers would be refused (`node:http` servers: extensions get no network by design, SECURITY.md).",
        random_output: false,
        settings: &[],
    },
    Package {
        name: "pi-prompt-template-model",
        what: "prompt templates that pick their model",
        monthly_downloads: 746,
        note: "Calls `ctx.isProjectTrusted()`, which pi 1.6.0 added: under pi 0.73.1 (`--pi-version 0.73.1`) both fail to start it.",
        random_output: false,
        settings: &[],
    },
    Package {
        name: "pi-aliases",
        what: "command aliases (/clear, /exit)",
        monthly_downloads: 666,
        note: "",
        random_output: false,
        settings: &[],
    },
    Package {
        name: "pi-mermaid",
        what: "Mermaid diagrams rendered as ASCII",
        monthly_downloads: 645,
        note: "",
        random_output: false,
        settings: &[],
    },
    Package {
        name: "pi-system-theme",
        what: "pi's theme following the system's light or dark appearance",
        monthly_downloads: 618,
        note: "",
        random_output: false,
        settings: &[],
    },
    Package {
        name: "pi-sync-system-theme",
        what: "pi's theme following the terminal's background, also over SSH",
        monthly_downloads: 613,
        note: "",
        random_output: false,
        settings: &[],
    },
    Package {
        name: "@baochunli/pi-collaborating-agents",
        what: "messaging between agents over a local socket",
        monthly_downloads: 516,
        note: "It names itself at random in each run, which pi's further runs leave out. A tool result's own `isError: true` stays in `tool_execution_end`'s result, as in pi, since the boundary carries a result's other fields.",
        random_output: true,
        settings: &[],
    },
];

/// How one package fared.
#[derive(Debug, Clone)]
struct Outcome {
    name: String,
    version: String,
    /// The pi it is compared with: the one it was written for.
    pi: Pi,
    builds: bool,
    loads: bool,
    same: bool,
    reason: String,
    commands: usize,
    tools: usize,
    took: Duration,
    details: Vec<String>,
}

fn thirdparty_dir() -> PathBuf {
    common::repo().join("tests/thirdparty")
}

fn node_modules() -> PathBuf {
    thirdparty_dir().join("node_modules")
}

/// The version tests/thirdparty/package.json pins for `name`.
fn pinned_version(name: &str) -> Option<String> {
    let text = std::fs::read_to_string(thirdparty_dir().join("package.json")).ok()?;
    let manifest: Value = serde_json::from_str(&text).ok()?;
    manifest["dependencies"][name].as_str().map(str::to_owned)
}

const INTRO: &str = r#"# Third-party pi extensions from npm

Generated by `tests/thirdparty.rs` — do not edit the table; regenerate with
`UPDATE_THIRD_PARTY=1 cargo test -p pichamber --test thirdparty`.

Popular pi extension packages that others publish on npm, pinned in
`tests/thirdparty/package.json` (installed with `npm ci --prefix tests/thirdparty`; npm also
installs their peer dependencies, such as the `@earendil-works/pi-*` packages the newer ones
import). Picked by downloads, among real extensions (a `pi.extensions` entry) that are not
TUI games; "downloads/month" is the npm registry's figure when they were picked.

Each goes through the scenario of [COMPATIBILITY.md](COMPATIBILITY.md), unchanged, against
the real pi it was written for ("written for": pi 0.73.1 for a package that depends on
`@mariozechner/pi-*`, or whose sources import it when package.json names no pi package, else
pi 1.6.0; pichamber is not told, it finds the same on its own, README "Which pi"). Real pi
loads the installed package folder (`pi --mode rpc -e PACKAGE_DIR`); pichamber builds the
package (`pichamber build PACKAGE_DIR`: all of its `pi.extensions`, into one artifact) and
loads the same folder (`pichamber rpc -e PACKAGE_DIR`: its extensions, in one instance as
the package is pichamber's isolation unit, and its skills and prompt templates, as pi does),
each against a mock model serving the same script, and what both print and send to the model
is compared step by step after the same normalisation. pichamber runs with the same grants
as for pi's examples (the workspace and pi's agent folder writable, git and a shell allowed,
HOME visible), and what four packages need to do their job: pi-mcp-adapter may run `node`
(the MCP servers it starts), pi-markdown-preview `pandoc` (its converter, which this machine
lacks: both sides find none), pi-subagents may write `/tmp` (its run folders), pi-web-access
may reach the search services it calls (this machine has no network to them, so on both sides
those requests fail, and fail alike) and is set not to open a browser (its `autoOpenBrowser`
setting: this machine has none).
Two packages draw names or ids at random or from the clock: pi runs them three times, and
where pi's runs differ is left out of the comparison (what pichamber lacks or adds still counts).
The "first difference" column ends with what investigating it found.

Running these packages added to pichamber's guest: `node:module` (`createRequire`, whose
`require` returns the built-in modules and fails with `MODULE_NOT_FOUND` for anything else, as
optional-dependency probes expect), `@earendil-works/pi-ai/compat` (the old root API of pi-ai,
which pichamber's pi-ai is), `Intl.Segmenter` (the JavaScript engine has no `Intl`), Node's
`global`; for pi-mcp-adapter web streams, `child_process.spawn` with live stdio and Node's
timer handles; for @aliou/pi-processes a package's extensions in one instance; for
pi-subagents `node:worker_threads`, `node:vm` and the package's own files, readable at
`/ext`; for pi-mcp-adapter 2.36 the modules undici needs (`node:assert`, `node:async_hooks`,
`node:diagnostics_channel`, `node:dns`, `node:tls`, ...), `WeakRef` and `performance`; for
pi-markdown-preview `node:tty` and a package's scripts that it reads as text, not imports.
Versions are the newest the registry offers.

"#;

fn report(outcomes: &[Outcome]) -> String {
    let total = outcomes.len();
    let builds = outcomes.iter().filter(|o| o.builds).count();
    let loads = outcomes.iter().filter(|o| o.loads).count();
    let same = outcomes.iter().filter(|o| o.same).count();
    let mut out = INTRO.to_owned();
    out += &format!(
        "**{total} packages: {builds} build, {loads} load, {same} behave the same as in pi.**\n\n"
    );
    out += "| package | what it does | downloads/month | written for | builds | loads | same behaviour | exercised | first difference |\n";
    out += "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
    for o in outcomes {
        let package = PACKAGES.iter().find(|p| p.name == o.name);
        let exercised = format!(
            "{} command{}, {} tool{}",
            o.commands,
            if o.commands == 1 { "" } else { "s" },
            o.tools,
            if o.tools == 1 { "" } else { "s" }
        );
        let mut reason = o.reason.clone();
        if let Some(note) = package.map(|p| p.note).filter(|n| !n.is_empty()) {
            reason = if reason.is_empty() {
                note.to_owned()
            } else {
                format!("{reason} — {note}")
            };
        }
        out += &format!(
            "| {}@{} | {} | {} | pi {} | {} | {} | {} | {} | {} |\n",
            o.name,
            o.version,
            package.map_or("", |p| p.what),
            package.map_or(0, |p| p.monthly_downloads),
            o.pi.version(),
            yes_no(o.builds),
            yes_no(o.loads),
            yes_no(o.same),
            exercised,
            cell(&reason)
        );
    }
    out
}

/// Per side: its temporary folder, the package and the install folder become placeholders.
fn paths_for(root: &Path, name: &str) -> Paths {
    let modules = node_modules();
    let mut replacements = vec![
        (root.to_string_lossy().into_owned(), "<root>".to_owned()),
        // Where pichamber's extension sees its own package (its files are read-only there).
        ("/ext/".to_owned(), format!("<node_modules>/{name}/")),
        (
            modules.join(name).to_string_lossy().into_owned(),
            format!("<node_modules>/{name}"),
        ),
        (
            modules.to_string_lossy().into_owned(),
            "<node_modules>".to_owned(),
        ),
    ];
    if let Ok(real) = modules.canonicalize() {
        replacements.push((
            real.to_string_lossy().into_owned(),
            "<node_modules>".to_owned(),
        ));
    }
    Paths::new(replacements)
}

fn keep_log(name: &str, side: &str, record: &Record) {
    let Some(dir) = std::env::var_os("CORPUS_LOGS") else {
        return;
    };
    let dir = PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let value = json!({
        "steps": record.steps.iter().map(|(label, lines)| json!({ "label": label, "lines": lines })).collect::<Vec<_>>(),
        "requests": record.requests.iter().map(|(step, r)| json!({ "step": step, "body": r })).collect::<Vec<_>>(),
        "exitSuccess": record.exit_success,
        "stderr": record.stderr,
    });
    std::fs::write(
        dir.join(format!("{}.{side}.json", name.replace('/', "_"))),
        serde_json::to_string_pretty(&value).unwrap(),
    )
    .unwrap();
}

/// The pi a package was written for, by the scope of the pi packages it depends on or, when
/// its package.json names none, its sources import: `@mariozechner/pi-*` is pi 0.73.1's,
/// `@earendil-works/pi-*` (and a package that names neither) current pi's. pichamber is not
/// told: it must find the same on its own.
fn written_for(dir: &Path, installed: &Value) -> Pi {
    let dependencies: Vec<String> = ["peerDependencies", "dependencies", "devDependencies"]
        .iter()
        .filter_map(|kind| installed[kind].as_object())
        .flat_map(|deps| deps.keys().cloned())
        .collect();
    let says = |text: &str| -> Option<Pi> {
        match (
            text.contains("@earendil-works/pi-"),
            text.contains("@mariozechner/pi-"),
        ) {
            (true, _) => Some(Pi::V1_6),
            (false, true) => Some(Pi::V0_73),
            (false, false) => None,
        }
    };
    says(&dependencies.join(" "))
        .or_else(|| {
            let mut sources = Vec::new();
            source_files(dir, &mut sources);
            let text: Vec<String> = sources
                .iter()
                .filter_map(|f| std::fs::read_to_string(f).ok())
                .collect();
            says(&text.join("\n"))
        })
        .unwrap_or(Pi::V1_6)
}

/// A package's own .ts / .js files (not its node_modules).
fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            if entry.file_name() != "node_modules" {
                source_files(&path, out);
            }
        } else if path
            .extension()
            .is_some_and(|e| e == "ts" || e == "js" || e == "mts" || e == "mjs")
        {
            out.push(path);
        }
    }
}

fn run_package(name: &str, builtins: &[(Pi, Vec<Value>)]) -> Outcome {
    let dir = node_modules().join(name);
    let installed: Value = std::fs::read_to_string(dir.join("package.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(Value::Null);
    let pi = written_for(&dir, &installed);
    let builtins = builtins
        .iter()
        .find_map(|(v, tools)| (*v == pi).then_some(tools.as_slice()))
        .unwrap_or_default();
    scenario::with_version(pi, || compare_package(name, &dir, &installed, pi, builtins))
}

fn compare_package(
    name: &str,
    dir: &Path,
    installed: &Value,
    pi: Pi,
    builtins: &[Value],
) -> Outcome {
    let started = Instant::now();
    let mut outcome = Outcome {
        name: name.to_owned(),
        pi,
        version: installed["version"]
            .as_str()
            .unwrap_or("(not installed)")
            .to_owned(),
        builds: false,
        loads: false,
        same: false,
        reason: String::new(),
        commands: 0,
        tools: 0,
        took: Duration::ZERO,
        details: Vec::new(),
    };
    let finish = |mut o: Outcome| {
        o.took = started.elapsed();
        o
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();

    // 1. Build the package: all of its extensions, into one artifact.
    let wasm = root.join("package.wasm");
    let built =
        scenario::pichamber(&["build", dir.to_str().unwrap(), "-o", wasm.to_str().unwrap()]);
    if !built.status.success() {
        let error = normalise::scrub(
            &json!(scenario::first_line(&String::from_utf8_lossy(
                &built.stderr
            ))),
            &paths_for(&root, name),
        );
        outcome.reason = cut(
            &format!("build: {}", error.as_str().unwrap_or_default()),
            300,
        );
        return finish(outcome);
    }
    outcome.builds = true;

    // 2. Discovery, then the scenario on both sides.
    let found = scenario::discover(dir, root.join("discover"), builtins);
    outcome.commands = found.commands.len();
    outcome.tools = found.tools.len();
    let (steps, script) = scenario::scenario(&found);
    let settings = PACKAGES
        .iter()
        .find(|p| p.name == name)
        .map_or(&[][..], |p| p.settings);
    for side in ["side1", "side2", "side3"] {
        let home = root.join(side).join("home");
        std::fs::create_dir_all(&home).unwrap();
        for (file, contents) in settings {
            std::fs::write(home.join(file), contents).unwrap();
        }
    }
    let pi_root = root.join("side1");
    let pi = scenario::run_side(Kind::Pi, dir, pi_root.clone(), &script, &steps);
    keep_log(name, "pi", &pi);
    let our_root = root.join("side2");
    // Like pi, pichamber loads the package folder: its extensions (in one instance), and its
    // skills and prompt templates.
    let ours = scenario::run_side(Kind::Pichamber, dir, our_root.clone(), &script, &steps);
    keep_log(name, "pichamber", &ours);
    let random = PACKAGES.iter().any(|p| p.name == name && p.random_output);
    let agains: Vec<_> = ["side3", "side4"]
        .into_iter()
        .filter(|_| random)
        .map(|side| {
            let again_root = root.join(side);
            let record = scenario::run_side(Kind::Pi, dir, again_root.clone(), &script, &steps);
            (record, paths_for(&again_root, name))
        })
        .collect();

    // 3. Classify, as tests/corpus.rs does.
    let load: &[Value] = ours.steps.first().map_or(&[], |(_, lines)| lines);
    let load_error = load
        .iter()
        .find(|l| l["type"] == "extension_error" && l["event"] == "load");
    outcome.loads = !ours.steps.is_empty()
        && load_error.is_none()
        && !load.iter().any(|l| l["type"] == "<exited>");
    let differences = normalise::compare_beside_noise(
        &pi,
        &paths_for(&pi_root, name),
        &agains
            .iter()
            .map(|(record, paths)| (record, paths))
            .collect::<Vec<_>>(),
        &ours,
        &paths_for(&our_root, name),
    );
    outcome.details = differences
        .iter()
        .map(|(label, d)| format!("{label}: {d}"))
        .collect();
    if let Some(error) = &found.pi_load_error {
        let error = normalise::scrub(&json!(error), &paths_for(&root.join("discover"), name));
        outcome.reason = format!(
            "pi itself does not load it here: {}",
            error.as_str().unwrap_or_default()
        );
    } else if let Some(e) = load_error {
        let e = normalise::scrub(e, &paths_for(&our_root, name));
        outcome.reason = cut(
            &format!("load: {}", e["error"].as_str().unwrap_or_default()),
            300,
        );
    } else if !outcome.loads {
        outcome.reason = cut(
            &format!(
                "load: pichamber exited: {}",
                scenario::first_line(&ours.stderr)
            ),
            300,
        );
    } else if let Some((label, first)) = differences.first() {
        outcome.reason = cut(&format!("{label}: {first}"), 300);
        let others: Vec<&str> = differences[1..].iter().map(|(l, _)| l.as_str()).collect();
        if !others.is_empty() {
            outcome.reason += &format!(" (also differs: {})", others.join(", "));
        }
    } else {
        outcome.same = true;
    }
    finish(outcome)
}

#[test]
fn third_party_table() {
    for pi in Pi::ALL {
        assert!(
            pi.command().is_some(),
            "real pi {} is missing: run tests/setup.sh",
            pi.version()
        );
    }
    for package in PACKAGES {
        assert!(
            pinned_version(package.name).is_some(),
            "{} is not pinned in tests/thirdparty/package.json",
            package.name
        );
        assert!(
            node_modules()
                .join(package.name)
                .join("package.json")
                .exists(),
            "{} is not installed: run `npm ci --prefix tests/thirdparty`",
            package.name
        );
    }
    let only: Option<Vec<String>> = std::env::var("THIRD_PARTY_ONLY")
        .ok()
        .map(|s| s.split(',').map(|n| n.trim().to_owned()).collect());
    let verbose = std::env::var_os("CORPUS_VERBOSE").is_some();
    let threads: usize = std::env::var("CORPUS_THREADS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(4)
        .max(1);
    let names: Vec<&str> = PACKAGES
        .iter()
        .map(|p| p.name)
        .filter(|n| only.as_ref().is_none_or(|o| o.iter().any(|x| x == n)))
        .collect();
    assert!(!names.is_empty(), "no package selected");

    let started = Instant::now();
    let base = tempfile::tempdir().unwrap();
    let _binary = scenario::use_private_binary();
    // pi's own tools, left out of the tool steps: each version's.
    let builtins: Vec<(Pi, Vec<Value>)> = Pi::ALL
        .iter()
        .map(|&pi| {
            let root = base.path().canonicalize().unwrap();
            let root = root.join(format!("builtins-{}", pi.version()));
            (
                pi,
                scenario::with_version(pi, || scenario::builtin_tools(root)),
            )
        })
        .collect();
    let mut outcomes = table::in_parallel(&names, threads, |name| {
        let outcome = run_package(name, &builtins);
        eprintln!(
            "thirdparty: {name}: {} in {:.1}s{}",
            if outcome.same { "same" } else { "differs" },
            outcome.took.as_secs_f64(),
            if outcome.same {
                String::new()
            } else {
                format!(" — {}", outcome.reason)
            }
        );
        if verbose {
            for detail in &outcome.details {
                eprintln!("thirdparty:   {name}: {detail}");
            }
        }
        outcome
    });
    // The table keeps PACKAGES' order (most downloaded first).
    outcomes.sort_by_key(|o| PACKAGES.iter().position(|p| p.name == o.name));
    let table = report(&outcomes);
    eprintln!(
        "thirdparty: {} packages in {:.1}s ({threads} at a time)",
        outcomes.len(),
        started.elapsed().as_secs_f64()
    );
    for o in &outcomes {
        assert_eq!(
            Some(&o.version),
            pinned_version(&o.name).as_ref(),
            "{}: the installed version is not the pinned one: run `npm ci --prefix tests/thirdparty`",
            o.name
        );
    }
    if only.is_some() {
        eprintln!("{table}");
        return;
    }
    let path = common::repo().join("docs/THIRD_PARTY.md");
    if std::env::var_os("UPDATE_THIRD_PARTY").is_some() {
        std::fs::write(&path, &table).unwrap();
        eprintln!("thirdparty: wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != table {
        let diff = similar::TextDiff::from_lines(&committed, &table)
            .unified_diff()
            .header("docs/THIRD_PARTY.md (committed)", "generated")
            .to_string();
        panic!(
            "docs/THIRD_PARTY.md is not what the third-party run generates:\n{diff}\n\
             Run `UPDATE_THIRD_PARTY=1 cargo test -p pichamber --test thirdparty` to regenerate \
             it (and commit it)."
        );
    }
}

/// pi-mcp-adapter end to end: the project's `.mcp.json` names a stdio MCP server
/// (tests/fixtures/mcp/echo-server.mjs, run by node); the model connects through the
/// adapter's `mcp` tool, then calls the server's tool twice. Both sides print and send the
/// same, and the second answer counts two calls: one long-lived server process, spoken to
/// over live pipes, served both.
#[test]
fn mcp_adapter_calls_a_stdio_server() {
    scenario::name_the_version();
    assert!(
        scenario::pi_command().is_some(),
        "real pi is missing: run tests/setup.sh"
    );
    let name = "pi-mcp-adapter";
    let dir = node_modules().join(name);
    assert!(
        dir.join("package.json").exists(),
        "{name} is not installed: run `npm ci --prefix tests/thirdparty`"
    );
    let server = common::repo().join("tests/fixtures/mcp/echo-server.mjs");
    let config =
        json!({ "mcpServers": { "echo": { "command": "node", "args": ["echo-server.mjs"] } } });
    let call = |arguments: Value| json!({ "toolCalls": [{ "name": "mcp", "arguments": arguments }], "usage": { "input": 10, "output": 5 } });
    let text = |text: &str| json!({ "text": text, "usage": { "input": 10, "output": 5 } });
    let script = json!({ "turns": [
        call(json!({ "connect": "echo" })), text("Connected."),
        call(json!({ "tool": "echo_echo", "args": { "text": "hi" } })), text("Done."),
        call(json!({ "tool": "echo_echo", "args": { "text": "again" } })), text("Done."),
    ]});
    let prompt = |label: &str, text: &str| scenario::Step {
        label: label.into(),
        action: scenario::Action::Prompt(text.into()),
    };
    let steps = vec![
        // With no tool metadata cached yet, the adapter connects at start-up to learn the
        // server's tools; the step lasts until it says it has.
        scenario::Step {
            label: "load".into(),
            action: scenario::Action::StartupUntilNotice(
                "MCP: 1 servers connected (1 tools)".into(),
            ),
        },
        prompt("connect", "Connect to the echo server."),
        prompt("call", "Echo hi."),
        prompt("call again", "Echo again."),
    ];

    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let _binary = scenario::use_private_binary();
    let run = |kind: Kind, side: &str| {
        let side_root = root.join(format!("side-{side}"));
        let workspace = side_root.join("workspace");
        std::fs::create_dir_all(&workspace).unwrap();
        // The project's own server, inside the workspace: pichamber's programs read only what
        // is granted.
        std::fs::copy(&server, workspace.join("echo-server.mjs")).unwrap();
        std::fs::write(workspace.join(".mcp.json"), config.to_string()).unwrap();
        let record = scenario::run_side(kind, &dir, side_root.clone(), &script, &steps);
        keep_log("mcp-echo", side, &record);
        (record, paths_for(&side_root, name))
    };
    let (pi, pi_paths) = run(Kind::Pi, "pi");
    let (ours, our_paths) = run(Kind::Pichamber, "pichamber");

    // What the server answered reaches the model, on both sides.
    for (record, side) in [(&pi, "pi"), (&ours, "pichamber")] {
        let results: Vec<String> = record
            .requests
            .iter()
            .filter_map(|(_, body)| body["messages"].as_array()?.last().cloned())
            .filter(|m| m["role"] == "tool")
            .map(|m| match &m["content"] {
                Value::String(text) => text.clone(),
                blocks => common::text_of(blocks),
            })
            .collect();
        for expected in ["echo_echo", "echo #1: hi", "echo #2: again"] {
            assert!(
                results.iter().any(|r| r.contains(expected)),
                "{side}: no tool result says {expected:?}: {results:#?}\nstderr: {}",
                record.stderr
            );
        }
    }
    let differences = normalise::compare(&pi, &pi_paths, &ours, &our_paths);
    assert!(
        differences.is_empty(),
        "pichamber differs from pi:\n{}",
        differences
            .iter()
            .map(|(label, d)| format!("{label}: {d}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
