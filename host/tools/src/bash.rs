//! The bash tool (pi's core/tools/bash.js): `bash -c COMMAND` in the workspace root, stdout
//! and stderr interleaved as they arrive, partial results at most every 100 ms, the last
//! 2000 lines / 50 KB kept (the rest in a temp file), an optional timeout, and the whole
//! process group killed on timeout or abort.
//!
//! Not confined for the agent: the command runs as the host user with the host's environment;
//! the workspace root is only its working directory. For an extension it runs with the
//! extension's scrubbed environment and in its confinement ([`ExecOptions`]).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use futures::FutureExt;
use serde_json::{Map, Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::watch;
use tokio::time::Instant;

use super::args::{Args, js_number};
use super::output::{OutputAccumulator, Snapshot};
use super::truncate::{DEFAULT_MAX_BYTES, LineCount, format_size};
use super::workspace::{Workspace, node_code};
use super::{ExecOptions, ToolOutput, cancelled};

/// pi throttles partial results to one per 100 ms.
const UPDATE_THROTTLE: Duration = Duration::from_millis(100);
/// After the shell exits, how long to wait for descendants still holding its pipes.
const EXIT_STDIO_GRACE: Duration = Duration::from_millis(100);

fn shell() -> &'static str {
    if Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "bash"
    }
}

/// Kills a process group started with `process_group(0)` (its id is the leader's pid).
/// Without a signal API at hand, bash's `kill` builtin sends the SIGKILL.
fn kill_group_blocking(pid: u32) {
    let _ = std::process::Command::new(shell())
        .args(["-c", &format!("kill -KILL -- -{pid} 2>/dev/null")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Kills the group if the call is dropped before the command ends.
struct GroupGuard(Option<u32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pid) = self.0 {
            kill_group_blocking(pid);
        }
    }
}

pub(crate) async fn execute(
    args: &Value,
    ws: &Workspace,
    options: &ExecOptions,
    cancel: watch::Receiver<bool>,
    on_update: &(dyn Fn(Value) + Send + Sync),
) -> Result<ToolOutput, String> {
    let a = Args::new("bash", args)?;
    let command = a.string("command")?;
    let timeout = a.opt_number("timeout")?;
    let cwd = ws.root();
    if !cwd.exists() {
        return Err(format!(
            "Working directory does not exist: {}\nCannot execute bash commands.",
            cwd.display()
        ));
    }

    let mut output = OutputAccumulator::new("pi-bash", LineCount::of(options.pi));
    let started = Instant::now();
    on_update(json!({"content": []}));

    let shell = shell();
    let mut child = tokio::process::Command::new(shell);
    if let Some(env) = &options.env {
        child.env_clear().envs(env.iter().cloned());
    }
    // pi 1.6.0 tells the command which session and model it runs for, never an outer pi's.
    if options.pi.is_1_6() {
        for name in super::SESSION_ENV {
            child.env_remove(name);
        }
        child.envs(options.session_env.iter().cloned());
    }
    if let Some(confinement) = &options.confinement {
        confinement.apply(&mut child);
    }
    let mut child = child
        .arg("-c")
        .arg(&command)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("spawn {shell} {}", node_code(&e)))?;
    let pid = child.id();
    let mut guard = GroupGuard(pid);
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let (mut out_buf, mut err_buf) = (vec![0u8; 8192], vec![0u8; 8192]);

    let timeout_at = timeout
        .filter(|t| *t > 0.0)
        .map(|t| Instant::now() + Duration::from_secs_f64(t.min(1e9)));
    let mut timed_out = false;
    let mut aborted = false;
    let mut exited: Option<Option<i32>> = None;
    let mut grace_until: Option<Instant> = None;

    let mut dirty = false;
    let mut last_update: Option<Instant> = None;
    let mut update_at: Option<Instant> = None;
    let emit = |output: &mut OutputAccumulator, dirty: &mut bool, last: &mut Option<Instant>| {
        if !*dirty {
            return;
        }
        *dirty = false;
        *last = Some(Instant::now());
        let snap = output.snapshot(true);
        let mut details = Map::new();
        if snap.truncation.truncated {
            details.insert("truncation".into(), snap.truncation.to_json());
        }
        if let Some(p) = &snap.full_output_path {
            details.insert("fullOutputPath".into(), json!(p.to_string_lossy()));
        }
        on_update(json!({
            "content": [{"type": "text", "text": snap.content}],
            "details": details,
        }));
    };
    let far = || Instant::now() + Duration::from_secs(86_400 * 365);

    let mut cancel_fut = Box::pin(cancelled(cancel));
    loop {
        if exited.is_some() && stdout.is_none() && stderr.is_none() {
            break;
        }
        let mut data: Option<usize> = None;
        let mut from_stdout = false;
        tokio::select! {
            n = read_some(&mut stdout, &mut out_buf) => {
                match n { Some(n) => { data = Some(n); from_stdout = true; } None => stdout = None }
            }
            n = read_some(&mut stderr, &mut err_buf) => {
                match n { Some(n) => data = Some(n), None => stderr = None }
            }
            status = child.wait(), if exited.is_none() => {
                exited = Some(status.ok().and_then(|s| s.code()));
                grace_until = Some(Instant::now() + EXIT_STDIO_GRACE);
            }
            () = tokio::time::sleep_until(grace_until.unwrap_or_else(far)), if grace_until.is_some() => {
                // Output already waiting in the pipes still counts; only what descendants
                // might write later is given up on.
                while let Some(Some(n)) = read_some(&mut stdout, &mut out_buf).now_or_never() {
                    output.append(&out_buf[..n]);
                    dirty = true;
                }
                while let Some(Some(n)) = read_some(&mut stderr, &mut err_buf).now_or_never() {
                    output.append(&err_buf[..n]);
                    dirty = true;
                }
                break;
            }
            () = tokio::time::sleep_until(timeout_at.unwrap_or_else(far)), if timeout_at.is_some() && !timed_out && exited.is_none() => {
                timed_out = true;
                if let Some(pid) = pid { kill_group(pid).await } else { let _ = child.start_kill(); }
            }
            () = &mut cancel_fut, if !aborted && exited.is_none() => {
                aborted = true;
                if let Some(pid) = pid { kill_group(pid).await } else { let _ = child.start_kill(); }
            }
            () = tokio::time::sleep_until(update_at.unwrap_or_else(far)), if update_at.is_some() => {
                update_at = None;
                emit(&mut output, &mut dirty, &mut last_update);
            }
        }
        if let Some(n) = data {
            let buf = if from_stdout { &out_buf } else { &err_buf };
            output.append(&buf[..n]);
            dirty = true;
            let now = Instant::now();
            let due = last_update.map(|t| t + UPDATE_THROTTLE);
            match due {
                Some(due) if due > now => {
                    update_at.get_or_insert(due);
                }
                _ => {
                    update_at = None;
                    emit(&mut output, &mut dirty, &mut last_update);
                }
            }
        }
    }
    // The shell is gone; descendants that kept its pipes open are left alone (as in pi)
    // unless the call was aborted or timed out, when the whole group was killed.
    guard.0 = None;

    output.finish();
    emit(&mut output, &mut dirty, &mut last_update);
    let snapshot = output.snapshot(true);
    output.close_temp_file();

    if aborted || timed_out {
        let (text, _) = format_output(&snapshot, &output, "");
        let status = if aborted {
            "Command aborted".to_owned()
        } else {
            format!(
                "Command timed out after {} seconds",
                js_number(timeout.unwrap_or(0.0))
            )
        };
        return Err(append_status(&text, &status));
    }
    let (text, details) = format_output(&snapshot, &output, "(no output)");
    if !options.pi.is_1_6() {
        if let Some(Some(code)) = exited
            && code != 0
        {
            return Err(append_status(
                &text,
                &format!("Command exited with code {code}"),
            ));
        }
        return Ok(ToolOutput::text(text, details));
    }
    // pi 1.6.0: a failed command is an error result, not a thrown error, and every result
    // carries the whole output for programmatic callers (codemode's `structuredContent`).
    let Some(Some(code)) = exited else {
        return Err(append_status(
            &text,
            "Command terminated without an exit code",
        ));
    };
    let (full, cut) = output.read_full_output(STRUCTURED_OUTPUT_MAX_BYTES);
    let mut structured = json!({ "output": full, "truncated": cut });
    if cut && let Some(path) = &snapshot.full_output_path {
        structured["full_output_path"] = json!(path.to_string_lossy());
    }
    structured["exit_code"] = json!(code);
    let tenths = (started.elapsed().as_secs_f64() * 10.0).round() / 10.0;
    structured["wall_time_seconds"] = super::js_json_number(tenths);
    let failed = code != 0;
    let text = if failed {
        append_status(&text, &format!("Command exited with code {code}"))
    } else {
        text
    };
    Ok(ToolOutput {
        structured_content: Some(structured),
        is_error: failed,
        ..ToolOutput::text(text, details)
    })
}

/// What `structuredContent.output` holds at most (pi 1.6.0's `STRUCTURED_OUTPUT_MAX_BYTES`).
const STRUCTURED_OUTPUT_MAX_BYTES: usize = 1024 * 1024;

async fn read_some(
    pipe: &mut Option<impl tokio::io::AsyncRead + Unpin>,
    buf: &mut [u8],
) -> Option<usize> {
    match pipe {
        Some(p) => match p.read(buf).await {
            Ok(0) | Err(_) => None,
            Ok(n) => Some(n),
        },
        None => std::future::pending().await,
    }
}

async fn kill_group(pid: u32) {
    let _ = tokio::process::Command::new(shell())
        .args(["-c", &format!("kill -KILL -- -{pid} 2>/dev/null")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
}

fn append_status(text: &str, status: &str) -> String {
    if text.is_empty() {
        status.to_owned()
    } else {
        format!("{text}\n\n{status}")
    }
}

/// pi's `formatOutput`: the kept tail, or `empty`, plus the truncation notice.
fn format_output(snapshot: &Snapshot, output: &OutputAccumulator, empty: &str) -> (String, Value) {
    let t = &snapshot.truncation;
    let mut text = if snapshot.content.is_empty() {
        empty.to_owned()
    } else {
        snapshot.content.clone()
    };
    if !t.truncated {
        return (text, Value::Null);
    }
    let path = snapshot
        .full_output_path
        .as_ref()
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|| "undefined".into());
    let mut details = Map::new();
    details.insert("truncation".into(), t.to_json());
    if let Some(p) = &snapshot.full_output_path {
        details.insert("fullOutputPath".into(), json!(p.to_string_lossy()));
    }
    let start = t.total_lines - t.output_lines + 1;
    let end = t.total_lines;
    if t.last_line_partial {
        text.push_str(&format!(
            "\n\n[Showing last {} of line {end} (line is {}). Full output: {path}]",
            format_size(t.output_bytes),
            format_size(output.last_line_bytes())
        ));
    } else if t.truncated_by == Some("lines") {
        text.push_str(&format!(
            "\n\n[Showing lines {start}-{end} of {}. Full output: {path}]",
            t.total_lines
        ));
    } else {
        text.push_str(&format!(
            "\n\n[Showing lines {start}-{end} of {} ({} limit). Full output: {path}]",
            t.total_lines,
            format_size(DEFAULT_MAX_BYTES)
        ));
    }
    (text, Value::Object(details))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pichamber_pi::PiVersion;
    use std::sync::Mutex;

    fn setup() -> (tempfile::TempDir, Workspace) {
        let tmp = tempfile::tempdir().unwrap();
        let ws = Workspace::open(tmp.path()).unwrap();
        (tmp, ws)
    }

    async fn bash(ws: &Workspace, args: Value) -> (Result<ToolOutput, String>, Vec<Value>) {
        bash_as(ws, args, PiVersion::V0_73).await
    }

    async fn bash_as(
        ws: &Workspace,
        args: Value,
        pi: PiVersion,
    ) -> (Result<ToolOutput, String>, Vec<Value>) {
        let updates = Mutex::new(Vec::new());
        let (_tx, rx) = watch::channel(false);
        let options = ExecOptions {
            pi,
            ..ExecOptions::default()
        };
        let result = execute(&args, ws, &options, rx, &|v| {
            updates.lock().unwrap().push(v)
        })
        .await;
        (result, updates.into_inner().unwrap())
    }

    fn text(out: &ToolOutput) -> &str {
        out.content[0]["text"].as_str().unwrap()
    }

    #[tokio::test]
    async fn runs_in_the_root_with_both_streams() {
        let (tmp, ws) = setup();
        std::fs::write(tmp.path().join("marker"), "").unwrap();
        let (out, updates) = bash(&ws, json!({"command": "ls; echo err >&2"})).await;
        let out = out.unwrap();
        assert_eq!(text(&out), "marker\nerr\n");
        assert_eq!(out.details, Value::Null);
        assert_eq!(updates[0], json!({"content": []}));
        let last = updates.last().unwrap();
        assert_eq!(last["content"][0]["text"], "marker\nerr\n");
        assert_eq!(last["details"], json!({}));

        let (out, _) = bash(&ws, json!({"command": "true"})).await;
        assert_eq!(text(&out.unwrap()), "(no output)");
    }

    #[tokio::test]
    async fn exit_codes_and_timeouts_are_errors() {
        let (_tmp, ws) = setup();
        let (out, _) = bash(&ws, json!({"command": "echo out; exit 3"})).await;
        assert_eq!(out.unwrap_err(), "out\n\n\nCommand exited with code 3");
        let (out, _) = bash(&ws, json!({"command": "exit 4"})).await;
        assert_eq!(
            out.unwrap_err(),
            "(no output)\n\nCommand exited with code 4"
        );
        let (out, _) = bash(
            &ws,
            json!({"command": "echo start; sleep 30", "timeout": 0.5}),
        )
        .await;
        assert_eq!(
            out.unwrap_err(),
            "start\n\n\nCommand timed out after 0.5 seconds"
        );
    }

    #[tokio::test]
    async fn pi_1_6_reports_a_failed_command_as_an_error_result() {
        let (_tmp, ws) = setup();
        let (out, _) = bash_as(&ws, json!({"command": "echo out; exit 3"}), PiVersion::V1_6).await;
        let out = out.unwrap();
        assert!(out.is_error);
        assert_eq!(text(&out), "out\n\n\nCommand exited with code 3");
        let structured = out.structured_content.unwrap();
        assert_eq!(structured["output"], "out\n");
        assert_eq!(structured["exit_code"], 3);
        assert_eq!(structured["truncated"], false);
        assert!(structured["wall_time_seconds"].is_number());
        // No line after the last newline: 3000 lines, the last 2000 shown.
        let (out, _) = bash_as(&ws, json!({"command": "seq 1 3000"}), PiVersion::V1_6).await;
        let out = out.unwrap();
        assert!(!out.is_error);
        assert!(text(&out).contains("[Showing lines 1001-3000 of 3000."));
        let path = out.details["fullOutputPath"].as_str().unwrap().to_owned();
        std::fs::remove_file(path).unwrap();
    }

    #[tokio::test]
    async fn abort_kills_the_process_group() {
        let (tmp, ws) = setup();
        let (tx, rx) = watch::channel(false);
        let pidfile = tmp.path().join("pid");
        let cmd = format!("sleep 30 & echo $! > {}; wait", pidfile.display());
        let task = {
            let ws = ws.clone();
            tokio::spawn(async move {
                let options = ExecOptions::default();
                execute(&json!({"command": cmd}), &ws, &options, rx, &|_| {}).await
            })
        };
        while !pidfile.exists() || std::fs::read_to_string(&pidfile).unwrap().trim().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        tx.send(true).unwrap();
        let err = task.await.unwrap().unwrap_err();
        assert_eq!(err, "Command aborted");
        let pid = std::fs::read_to_string(&pidfile).unwrap().trim().to_owned();
        // The background sleep was in the group and is gone (or a zombie nobody reaped). A
        // killed process is torn down when it is next scheduled, so on a busy machine it may
        // still run for a moment: a live one is given two seconds to die, not thirty.
        let state = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .chars()
                .next();
            (state, stat)
        };
        let dead = |s: Option<char>| matches!(s, None | Some('Z') | Some('X'));
        for _ in 0..200 {
            if dead(state().0) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (last, stat) = state();
        assert!(dead(last), "sleep {pid} survived the abort: {stat}");
    }

    #[tokio::test]
    async fn long_output_is_tail_truncated_with_a_full_output_file() {
        let (_tmp, ws) = setup();
        let (out, _) = bash(&ws, json!({"command": "seq 1 3000"})).await;
        let out = out.unwrap();
        let t = text(&out);
        let path = out.details["fullOutputPath"].as_str().unwrap().to_owned();
        assert!(path.contains("pi-bash-"), "{path}");
        assert!(
            t.ends_with(&format!(
                "3000\n\n\n[Showing lines 1002-3001 of 3001. Full output: {path}]"
            )),
            "{}",
            &t[t.len() - 120..]
        );
        assert_eq!(out.details["truncation"]["truncatedBy"], "lines");
        let full = std::fs::read_to_string(&path).unwrap();
        assert_eq!(full.lines().count(), 3000);
        std::fs::remove_file(path).unwrap();
    }
}
