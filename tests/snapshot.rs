//! Pre-initialised guests (host/runtime/src/snapshot.rs): an artifact built today starts from
//! the shim's snapshot, and from its own (its modules compiled in) once a process has
//! instantiated it twice; one built before pre-initialisation existed starts as built. An
//! instance started from either shares nothing with another: its factory runs afresh, the
//! global scope and the modules evaluated in the snapshot are its own, Math.random is seeded
//! per instance (the snapshot was taken with a fixed clock, from which QuickJS seeds it), and
//! the prelude, evaluated in the snapshot, and the extension's modules, compiled in its own,
//! take their load context (extension, cwd, environment, pi release) from each instance's load.

mod common;

use serde_json::Value;

const PROBE: &str = "tests/fixtures/snapshot/probe.ts";
const PROBE_0_73: &str = "tests/fixtures/snapshot/probe-0.73.ts";
const WIT_0_1_0: &str = "tests/fixtures/wit-0.1.0/extension-0.1.0.wasm";

fn inspect(path: &str, preinit: Option<&str>) -> Value {
    inspect_with_cache(path, preinit, &common::cache_dir())
}

fn inspect_with_cache(path: &str, preinit: Option<&str>, cache: &std::path::Path) -> Value {
    let mut command = std::process::Command::new(common::bin());
    command
        .args(["inspect", path, "--json"])
        .env("PICHAMBER_CACHE_DIR", cache);
    if let Some(value) = preinit {
        command.env("PICHAMBER_PREINIT", value);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Runs /probe `times` times in one instance; what each reported.
fn probe(times: usize, preinit: Option<&str>) -> Vec<Value> {
    probe_in(PROBE, std::env::temp_dir().as_path(), times, preinit)
}

fn probe_in(
    fixture: &str,
    cwd: &std::path::Path,
    times: usize,
    preinit: Option<&str>,
) -> Vec<Value> {
    let mut args = vec!["run".to_owned(), common::path(fixture), "--json".into()];
    for _ in 0..times {
        args.extend(["--command".into(), "/probe".into()]);
    }
    let mut command = std::process::Command::new(common::bin());
    command
        .args(&args)
        .current_dir(cwd)
        .env("PICHAMBER_CACHE_DIR", common::cache_dir());
    if let Some(value) = preinit {
        command.env("PICHAMBER_PREINIT", value);
    }
    let out = command.output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let reports: Vec<Value> = common::of_type(&events, "entry")
        .into_iter()
        .filter(|e| e["entry"]["customType"] == "probe")
        .map(|e| e["entry"]["data"].clone())
        .collect();
    assert_eq!(reports.len(), times, "{events:?}");
    reports
}

fn randoms(report: &Value) -> Vec<f64> {
    let values: Vec<f64> = report["random"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!(values.iter().all(|v| (0.0..1.0).contains(v)), "{values:?}");
    values
}

#[test]
fn an_artifact_built_today_starts_from_the_snapshot_and_an_older_one_as_built() {
    let dir = tempfile::tempdir().unwrap();
    let built = dir.path().join("probe.wasm");
    let out = common::pichamber(&["build", &common::path(PROBE), "-o", built.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let built = built.to_str().unwrap();

    let today = inspect(built, None);
    // (Whether from its own snapshot depends on what other tests left in the shared cache:
    // an_extensions_own_snapshot_is_made_once_and_kept_in_the_cache has a cache of its own.)
    assert_eq!(today["preInitialized"], true, "{today}");
    assert_eq!(today["loaded"], true, "{today}");
    assert_eq!(today["commands"][0]["name"], "probe", "{today}");
    // The baseline the benchmarks compare with.
    assert_eq!(inspect(built, Some("off"))["preInitialized"], false);
    // The 0.1.0 artifact carries the shim of its day, which has nothing to pre-initialise.
    let old = inspect(&common::path(WIT_0_1_0), None);
    assert_eq!(old["preInitialized"], false, "{old}");
    assert_eq!(old["loaded"], true, "{old}");
}

/// A one-shot command instantiates an extension once: it starts from the shim's snapshot, or
/// from the extension's own when an earlier process made it (the compile cache keeps it).
#[test]
fn an_extensions_own_snapshot_is_made_once_and_kept_in_the_cache() {
    let cache = tempfile::tempdir().unwrap();
    let probe = common::path(PROBE);
    let first = inspect_with_cache(&probe, None, cache.path());
    assert_eq!(first["extensionSnapshot"], false, "{first}");
    let made = inspect_with_cache(&probe, Some("extension"), cache.path());
    assert_eq!(made["extensionSnapshot"], true, "{made}");
    assert_eq!(made["loaded"], true, "{made}");
    assert_eq!(made["commands"][0]["name"], "probe", "{made}");
    let later = inspect_with_cache(&probe, None, cache.path());
    assert_eq!(later["extensionSnapshot"], true, "{later}");
    // Other modules, another snapshot.
    let other = inspect_with_cache(&common::path(PROBE_0_73), None, cache.path());
    assert_eq!(other["extensionSnapshot"], false, "{other}");
    assert_eq!(
        inspect_with_cache(&probe, Some("shim"), cache.path())["extensionSnapshot"],
        false
    );
}

#[test]
fn instances_started_from_the_snapshot_share_nothing() {
    for preinit in [None, Some("extension")] {
        instances_share_nothing(preinit);
    }
}

fn instances_share_nothing(preinit: Option<&str>) {
    // One instance: the state is its own to keep (so the probe can see state at all).
    let same = probe(2, preinit);
    assert_eq!(same[0]["loads"], 1);
    assert_eq!(same[0]["seen"], "nothing");
    assert_eq!(same[1]["seen"], "a value");
    assert_eq!(same[1]["seenInModule"], "a value");
    assert_eq!(same[1]["loads"], 1);
    let first = randoms(&same[0]);
    assert_ne!(first[0], first[1]);

    // Two instances from the same snapshot: nothing of the other, and other random numbers.
    let other = probe(1, preinit);
    assert_eq!(other[0]["loads"], 1);
    assert_eq!(other[0]["seen"], "nothing");
    // pi-tui was evaluated in the snapshot: what one instance did to it is its own.
    assert_eq!(other[0]["seenInModule"], "nothing");
    let second = randoms(&other[0]);
    assert!(
        first.iter().all(|v| !second.contains(v)),
        "two instances drew the same numbers: {first:?} {second:?}"
    );
    // The module's top level ran in each instance, not once for the snapshot.
    assert!(
        other[0]["atTopLevel"]["time"].as_f64() > same[0]["atTopLevel"]["time"].as_f64(),
        "{same:?} {other:?}"
    );

    // And the same behaviour from a guest that initialises itself.
    let unsnapshotted = probe(2, Some("off"));
    assert_eq!(unsnapshotted[0]["seen"], "nothing");
    assert_eq!(unsnapshotted[1]["seen"], "a value");
    assert!(
        randoms(&unsnapshotted[0])
            .iter()
            .all(|v| !first.contains(v))
    );
}

#[test]
fn the_prelude_in_the_snapshot_takes_each_instances_load_context() {
    for preinit in [None, Some("extension"), Some("off")] {
        let here = tempfile::tempdir().unwrap();
        let cwd = here.path().canonicalize().unwrap();
        let current = &probe_in(PROBE, &cwd, 1, preinit)[0];
        assert_eq!(current["argv"], serde_json::json!(["pichamber", "probe"]));
        assert_eq!(current["cwd"], cwd.to_str().unwrap(), "{current}");
        assert_eq!(current["marker"], "1");
        assert_eq!(
            current["atTopLevel"]["cwd"],
            cwd.to_str().unwrap(),
            "{current}"
        );
        assert_eq!(current["atTopLevel"]["marker"], "1", "{current}");
        assert_eq!(current["virtualModels"], "function", "{current}");

        // Written for pi 0.73.1: the snapshot's prelude holds 1.6.0's API, unapplied.
        let old = &probe_in(PROBE_0_73, &cwd, 1, preinit)[0];
        assert_eq!(old["argv"], serde_json::json!(["pichamber", "probe-0.73"]));
        assert_eq!(old["virtualModels"], "undefined", "{old}");
    }
}

/// `pichamber rpc` with the probe loaded, keeping its sessions in `dir/sessions`.
struct RpcProbe {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
    sessions: std::path::PathBuf,
}

impl RpcProbe {
    fn start(dir: &std::path::Path, cache: &std::path::Path, stderr: std::process::Stdio) -> Self {
        use std::io::BufRead;
        let sessions = dir.join("sessions");
        let mut child = std::process::Command::new(common::bin())
            .args(["rpc", "-e", &common::path(PROBE), "--session-dir"])
            .arg(&sessions)
            .current_dir(dir)
            .env("PICHAMBER_CACHE_DIR", cache)
            .env("PICHAMBER_LOG", "info")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            stdout,
            sessions,
        }
    }

    fn request(&mut self, id: &str, command: Value) {
        use std::io::Write;
        let mut command = command;
        command["id"] = id.into();
        writeln!(self.stdin, "{command}").unwrap();
        for line in self.stdout.by_ref() {
            let record: Value = serde_json::from_str(&line.unwrap()).unwrap();
            if record["type"] == "response" && record["id"] == id {
                assert_eq!(record["success"], true, "{record}");
                return;
            }
        }
        panic!("rpc ended before answering {id}");
    }

    fn probe(&mut self, id: &str) {
        self.request(
            id,
            serde_json::json!({"type": "prompt", "message": "/probe"}),
        );
    }

    fn new_session(&mut self, id: &str) {
        self.request(id, serde_json::json!({"type": "new_session"}));
    }

    /// Ends the process; what /probe reported in each session that ran it, oldest first
    /// (session files' names start with the time they were made).
    fn finish(mut self) -> Vec<Vec<Value>> {
        drop(self.stdin);
        assert!(self.child.wait().unwrap().success());
        let mut files: Vec<_> = std::fs::read_dir(&self.sessions)
            .unwrap()
            .map(|f| f.unwrap().path())
            .collect();
        files.sort();
        files
            .iter()
            .map(|f| {
                std::fs::read_to_string(f)
                    .unwrap()
                    .lines()
                    .map(|l| serde_json::from_str::<Value>(l).unwrap())
                    .filter(|e| e["customType"] == "probe")
                    .map(|e| e["data"].clone())
                    .collect::<Vec<_>>()
            })
            .filter(|r| !r.is_empty())
            .collect()
    }
}

/// `rpc` reuses instance slots: a new session's instance starts in the slot the last one
/// left, whose pages wasmtime resets to the snapshot. Nothing the last instance wrote may
/// survive that reset.
#[test]
fn an_instance_in_a_reused_slot_sees_nothing_of_the_last_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut rpc = RpcProbe::start(
        dir.path(),
        &common::cache_dir(),
        std::process::Stdio::null(),
    );
    rpc.probe("a");
    rpc.probe("b");
    // Twice: whether a new session's instance starts before or after the last one is dropped,
    // the third lands in a slot an earlier one used.
    rpc.new_session("new");
    rpc.probe("c");
    rpc.new_session("newer");
    rpc.probe("d");
    let reports = rpc.finish();
    assert_eq!(reports.len(), 3, "{reports:?}");
    assert_eq!(reports[0][1]["seen"], "a value");
    let mut earlier: Vec<f64> = reports[0].iter().flat_map(randoms).collect();
    for fresh in [&reports[1][0], &reports[2][0]] {
        assert_eq!(fresh["loads"], 1, "{fresh}");
        assert_eq!(fresh["seen"], "nothing", "{fresh}");
        assert_eq!(fresh["seenInModule"], "nothing", "{fresh}");
        let drawn = randoms(fresh);
        assert!(drawn.iter().all(|v| !earlier.contains(v)), "{drawn:?}");
        earlier.extend(drawn);
    }
}

/// `rpc` makes an extension's own snapshot in the background once it instantiates it a second
/// time; the sessions after start from it, and see nothing of the ones before.
#[test]
fn rpc_starts_later_sessions_from_the_extensions_own_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let log_path = dir.path().join("stderr.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut rpc = RpcProbe::start(dir.path(), &cache, log.into());
    rpc.probe("a");
    rpc.probe("b");
    rpc.new_session("new");
    let ready = "new instances start from the extension's own snapshot";
    let waited = std::time::Instant::now();
    while !std::fs::read_to_string(&log_path).unwrap().contains(ready) {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(300),
            "no own snapshot after 5 minutes: {}",
            std::fs::read_to_string(&log_path).unwrap()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    rpc.new_session("newer");
    rpc.probe("c");
    rpc.probe("d");
    let reports = rpc.finish();
    assert_eq!(reports.len(), 2, "{reports:?}");
    let (before, after) = (&reports[0], &reports[1]);
    assert_eq!(before[1]["seen"], "a value");
    assert_eq!(after[0]["loads"], 1, "{after:?}");
    assert_eq!(after[0]["seen"], "nothing", "{after:?}");
    assert_eq!(after[0]["seenInModule"], "nothing", "{after:?}");
    assert_eq!(after[1]["seen"], "a value", "{after:?}");
    let cwd = dir.path().canonicalize().unwrap();
    assert_eq!(after[0]["atTopLevel"]["cwd"], cwd.to_str().unwrap());
    let earlier: Vec<f64> = before.iter().flat_map(randoms).collect();
    assert!(randoms(&after[0]).iter().all(|v| !earlier.contains(v)));
    // Made once: a later process finds it in the cache.
    assert_eq!(
        inspect_with_cache(&common::path(PROBE), None, &cache)["extensionSnapshot"],
        true
    );
}

/// An extension's own snapshot is cached under the component hash the manifest claims and the
/// modules' digest, where every artifact with those modules and that claim finds it. An
/// artifact whose component is not the one its manifest names must not leave an image there:
/// it would run its code in another artifact's sessions.
#[test]
fn an_artifact_whose_component_is_not_the_one_it_claims_leaves_no_snapshot_for_others() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let honest = dir.path().join("probe.wasm");
    let out = common::pichamber(&[
        "build",
        &common::path(PROBE),
        "-o",
        honest.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{out:?}");
    // The same manifest and modules, the component changed: a custom section of its own
    // right after the preamble keeps it valid and changes its hash.
    let bytes = std::fs::read(&honest).unwrap();
    let name = b"tampered";
    let mut section = vec![0u8, (1 + name.len() + 4) as u8, name.len() as u8];
    section.extend_from_slice(name);
    section.extend_from_slice(b"evil");
    let mut tampered_bytes = bytes[..8].to_vec();
    tampered_bytes.extend_from_slice(&section);
    tampered_bytes.extend_from_slice(&bytes[8..]);
    let tampered = dir.path().join("tampered.wasm");
    std::fs::write(&tampered, tampered_bytes).unwrap();

    let lied = inspect_with_cache(tampered.to_str().unwrap(), Some("extension"), &cache);
    assert_eq!(lied["loaded"], true, "{lied}");
    assert_eq!(lied["extensionSnapshot"], false, "{lied}");
    let honest = honest.to_str().unwrap();
    assert_eq!(
        inspect_with_cache(honest, None, &cache)["extensionSnapshot"],
        false
    );
    assert_eq!(
        inspect_with_cache(honest, Some("extension"), &cache)["extensionSnapshot"],
        true
    );
}

const AHEAD: &str = "tests/fixtures/snapshot/ahead/index.ts";

/// Runs /ahead once in a process of its own; what it reported, and the process's stdout and
/// stderr.
fn ahead_run(preinit: &str, cache: &std::path::Path, value: &str) -> (Value, String) {
    ahead_run_granting(preinit, cache, value, &["--allow-env", "AHEAD_VALUE"])
}

const AHEAD_LAZY: [&str; 3] = ["pure-lazy", "env-lazy", "version-lazy"];

fn ahead_run_granting(
    preinit: &str,
    cache: &std::path::Path,
    value: &str,
    grants: &[&str],
) -> (Value, String) {
    let out = std::process::Command::new(common::bin())
        .args(["run", &common::path(AHEAD), "--json", "--command", "/ahead"])
        .args(grants)
        .env("AHEAD_VALUE", value)
        .env("AHEAD_UNGRANTED", "present, but not granted")
        .env("PICHAMBER_CACHE_DIR", cache)
        .env("PICHAMBER_PREINIT", preinit)
        .env("PICHAMBER_LOG", "info")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let events: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let report = common::of_type(&events, "entry")
        .into_iter()
        .find(|e| e["entry"]["customType"] == "ahead")
        .map(|e| e["entry"]["data"].clone())
        .unwrap_or_else(|| panic!("no report: {events:?}"));
    (report, stdout + &String::from_utf8_lossy(&out.stderr))
}

/// An extension's own snapshot holds its modules evaluated, but for those whose top level
/// touches a session (here: Math.random, a granted environment variable even when the refusal
/// is caught, a timer, the console, a built-in) or imports one that does: those run in each
/// instance, as without it. Reading a variable the sessions are not granted touches nothing.
#[test]
fn modules_evaluated_into_the_snapshot_are_those_that_touch_no_session() {
    let cache = tempfile::tempdir().unwrap();
    let (first, output) = ahead_run("extension", cache.path(), "first");
    assert!(
        output.contains("modules evaluated into the extension's snapshot"),
        "{output}"
    );
    let (second, output_again) = ahead_run("extension", cache.path(), "second");
    let (unsnapshotted, _) = ahead_run("shim", cache.path(), "third");

    // Only a dynamic import names the lazy ones: the factory sees they ran only when they were
    // evaluated ahead. Every other module ran at load, in each instance.
    for report in [&first, &second] {
        let at_factory = report["atFactory"].as_array().unwrap();
        for module in AHEAD_LAZY {
            assert!(at_factory.contains(&module.into()), "{module}: {report}");
        }
        for module in ["random", "through-dependency", "caught", "timer", "console"] {
            assert!(at_factory.contains(&module.into()), "{module}: {report}");
        }
    }
    let at_factory = unsnapshotted["atFactory"].as_array().unwrap();
    for module in AHEAD_LAZY {
        assert!(!at_factory.contains(&module.into()), "{unsnapshotted}");
    }

    for (report, value) in [
        (&first, "first"),
        (&second, "second"),
        (&unsnapshotted, "third"),
    ] {
        assert_eq!(report["lazyTable"], 256, "{report}");
        assert_eq!(report["ungranted"], "absent", "{report}");
        let shared = serde_json::json!({"version": "1.6.0", "name": "ahead"});
        assert_eq!(report["shared"], shared, "{report}");
        // The built-in it changes is changed when it is imported, not before.
        assert_eq!(report["markedBefore"], false, "{report}");
        assert_eq!(report["markedAfter"], true, "{report}");
        assert_eq!(report["seen"], value, "the session's environment: {report}");
        assert!(
            report["order"]
                .as_array()
                .unwrap()
                .contains(&"timer fired".into()),
            "{report}"
        );
        let (via, drawn) = (report["viaDependency"].as_f64(), report["drawn"].as_f64());
        assert!(
            (via.unwrap() - drawn.unwrap() * 2.0).abs() < 1e-9,
            "{report}"
        );
    }
    // What each instance drew is its own, whether drawn at the top level or through a
    // Math.random kept by a module evaluated ahead.
    assert_ne!(first["drawn"], second["drawn"]);
    assert_ne!(first["captured"], second["captured"]);
    assert_ne!(first["captured"][0], first["captured"][1]);
    for output in [&output, &output_again] {
        assert!(output.contains("console.ts ran its top level"), "{output}");
    }
}

/// An extension's image is made for the environment variables its sessions are granted: one
/// granted another set starts from another image, never from one in which a module read as
/// absent a variable this session is given.
#[test]
fn sessions_granted_other_environment_variables_start_from_another_image() {
    let cache = tempfile::tempdir().unwrap();
    // Not granted: caught.ts reads nothing of a session and is evaluated ahead.
    let (ungranted, _) = ahead_run_granting("extension", cache.path(), "hidden", &[]);
    assert_eq!(ungranted["seen"], "nothing", "{ungranted}");
    let (granted, _) = ahead_run("extension", cache.path(), "given");
    assert_eq!(granted["seen"], "given", "{granted}");
    let (again, _) = ahead_run_granting("extension", cache.path(), "hidden", &[]);
    assert_eq!(again["seen"], "nothing", "{again}");
}

/// An extension's image is made for the pi release its sessions follow: a module evaluated
/// ahead reads the session's, and a session following the other release starts from another
/// image.
#[test]
fn sessions_following_another_pi_release_start_from_another_image() {
    let cache = tempfile::tempdir().unwrap();
    let (current, _) = ahead_run("extension", cache.path(), "a");
    assert_eq!(current["shared"]["version"], "1.6.0", "{current}");
    let (old, _) = ahead_run_granting(
        "extension",
        cache.path(),
        "a",
        &["--allow-env", "AHEAD_VALUE", "--pi-version", "0.73.1"],
    );
    assert!(
        old["atFactory"]
            .as_array()
            .unwrap()
            .contains(&"version-lazy".into()),
        "{old}"
    );
    assert_eq!(old["shared"]["version"], "0.73.1", "{old}");
}

/// The size of the largest compiled image a cache holds (not its compiled functions).
fn image_bytes(cache: &std::path::Path) -> u64 {
    std::fs::read_dir(cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "cwasm"))
        .map(|path| std::fs::metadata(path).unwrap().len())
        .max()
        .unwrap_or_else(|| panic!("no image in {cache:?}"))
}

/// Before an image is kept the guest fills its allocator's holes, so that instances allocate
/// past the image (guest-shim/src/heap.rs), and it does so after evaluating each module, not
/// knowing which is the last. It must leave the heap's free top alone: each filling would
/// otherwise keep what the last one grew, and an extension of many modules find its image,
/// and every session's memory, megabytes larger.
#[test]
fn an_extensions_image_grows_with_what_its_modules_hold_not_with_their_number() {
    let package = tempfile::tempdir().unwrap();
    let mut index = String::new();
    for i in 0..64 {
        std::fs::write(
            package.path().join(format!("m{i}.ts")),
            format!("export const value{i} = {i};\n"),
        )
        .unwrap();
        index.push_str(&format!("import {{ value{i} }} from \"./m{i}.ts\";\n"));
    }
    let sum = (0..64).map(|i| format!("value{i}")).collect::<Vec<_>>();
    index.push_str(&format!(
        "export default function (pi: any) {{\n  const sum = {};\n  pi.registerCommand(\"sum\", {{ handler: async () => void sum }});\n}}\n",
        sum.join(" + ")
    ));
    let entry = package.path().join("index.ts");
    std::fs::write(&entry, index).unwrap();
    let entry = entry.to_string_lossy();

    let shim_only = tempfile::tempdir().unwrap();
    let guest = inspect_with_cache(&entry, Some("shim"), shim_only.path());
    assert_eq!(guest["extensionSnapshot"], false, "{guest}");
    let own = tempfile::tempdir().unwrap();
    let made = inspect_with_cache(&entry, Some("extension"), own.path());
    assert_eq!(made["extensionSnapshot"], true, "{made}");
    assert_eq!(made["commands"][0]["name"], "sum", "{made}");
    let (guest, own) = (image_bytes(shim_only.path()), image_bytes(own.path()));
    assert!(
        own < guest + (1 << 20),
        "64 one-line modules grew the image from {guest} to {own} bytes"
    );
}
