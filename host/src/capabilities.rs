//! What an extension may touch outside its sandbox. Deny by default: no directory, program or
//! environment variable is reachable unless the operator granted it (`--allow-read=PATH`,
//! `--allow-write=PATH`, `--allow-run=PROG`, `--allow-env=VAR`). Directories are WASI preopens
//! mounted at their host path so `path.resolve(ctx.cwd, p)` keeps working; programs are run by
//! the host, never through a shell unless `sh` itself was granted.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::io::AsyncReadExt;
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use crate::runtime::wit::{ExecRequest, ExecResult};

/// A guest whose clock starts at a fixed instant and whose randomness comes from a seed, so
/// the same run gives the same dates and the same "random" values on any machine (the prelude
/// seeds `Math.random` from the guest's random source).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Determinism {
    /// What `Date.now()` reads when the instance starts, in ms since the Unix epoch; it then
    /// advances in real time, so timers keep working.
    pub start_unix_ms: u64,
    pub seed: u64,
}

/// A wall clock that starts at a given instant.
struct StartedClock {
    start: Duration,
    began: std::time::Instant,
}

impl wasmtime_wasi::HostWallClock for StartedClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
    fn now(&self) -> Duration {
        self.start + self.began.elapsed()
    }
}

#[derive(Debug, Clone, Default)]
pub struct Grants {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub run: Vec<String>,
    pub env: Vec<String>,
    /// Hosts `fetch` may reach (`example.com`, `*.example.com`, with an optional `:port`).
    pub net: Vec<String>,
}

/// Per-call caps on a program run for an extension.
pub const EXEC_DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
pub const EXEC_MAX_OUTPUT: usize = 1 << 20;

impl Grants {
    /// The WASI context of one instance: the granted trees, nothing else (no stdin, no
    /// inherited environment; guest stdout/stderr are discarded, console goes through the host).
    pub fn wasi_ctx(&self, determinism: Option<&Determinism>) -> Result<WasiCtx> {
        let mut builder = WasiCtxBuilder::new();
        if let Some(d) = determinism {
            use rand::SeedableRng;
            builder
                .wall_clock(StartedClock {
                    start: Duration::from_millis(d.start_unix_ms),
                    began: std::time::Instant::now(),
                })
                .secure_random(rand::rngs::StdRng::seed_from_u64(d.seed))
                .insecure_random(rand::rngs::StdRng::seed_from_u64(d.seed ^ 0x5eed))
                .insecure_random_seed(u128::from(d.seed));
        }
        for dir in &self.write {
            let path = dir
                .canonicalize()
                .with_context(|| format!("--allow-write={}: cannot open", dir.display()))?;
            builder.preopened_dir(&path, path.to_string_lossy(), FsPerms::ReadWrite)?;
        }
        for dir in &self.read {
            let path = dir
                .canonicalize()
                .with_context(|| format!("--allow-read={}: cannot open", dir.display()))?;
            if self
                .write
                .iter()
                .any(|w| w.canonicalize().ok().as_ref() == Some(&path))
            {
                continue;
            }
            builder.preopened_dir(&path, path.to_string_lossy(), FsPerms::ReadOnly)?;
        }
        Ok(builder.build())
    }

    /// Granted environment variables with their host values (`process.env`).
    pub fn env_pairs(&self) -> Vec<(String, String)> {
        self.env
            .iter()
            .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)))
            .collect()
    }

    fn check_run(&self, program: &str) -> Result<(), String> {
        if program.is_empty() {
            return Err("exec: empty program name".into());
        }
        if program.contains('/') {
            return Err(format!(
                "exec of '{program}' denied: give a program name, not a path (grant it with --allow-run=NAME)"
            ));
        }
        if self.run.iter().any(|p| p == program) {
            Ok(())
        } else {
            Err(format!(
                "exec of '{program}' denied: the run capability is not granted (grant it with --allow-run={program})"
            ))
        }
    }

    /// The scrubbed environment a program runs with: a fixed PATH and the granted variables.
    fn program_env(&self) -> Vec<(String, String)> {
        let mut env = vec![("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned())];
        env.extend(self.env_pairs());
        env
    }

    /// Whether the granted trees let a built-in tool work in `cwd`: the file tools need the
    /// folder readable (edit and write: writable), bash needs `bash` granted as a program.
    fn check_builtin_tool(&self, tool: &str, cwd: &Path) -> Result<(), String> {
        let covered = |grants: &[PathBuf]| {
            let Ok(cwd) = cwd.canonicalize() else {
                return false;
            };
            grants
                .iter()
                .filter_map(|g| g.canonicalize().ok())
                .any(|g| cwd.starts_with(g))
        };
        let (allowed, flag) = match tool {
            "read" | "grep" | "find" | "ls" => (
                covered(&self.read) || covered(&self.write),
                format!("--allow-read={}", cwd.display()),
            ),
            "edit" | "write" => (
                covered(&self.write),
                format!("--allow-write={}", cwd.display()),
            ),
            "bash" => (
                self.run.iter().any(|p| p == "bash"),
                "--allow-run=bash".into(),
            ),
            other => return Err(format!("there is no built-in tool named '{other}'")),
        };
        if allowed {
            Ok(())
        } else {
            Err(format!(
                "the built-in {tool} tool is not allowed in {} for this extension (grant it with {flag})",
                cwd.display()
            ))
        }
    }

    /// Runs one of pi's built-in tools for the extension (`createReadTool(cwd).execute`...),
    /// with the extension's grants rather than the agent's: confined to `cwd`, which a grant
    /// must cover, and bash with the scrubbed environment. `request.args` holds the JSON
    /// arguments. Answers the tool's `{ content, details }` as JSON, or its error.
    pub async fn run_builtin_tool(
        &self,
        tool: &str,
        request: &ExecRequest,
        default_cwd: &str,
        on_update: &(dyn Fn(serde_json::Value) + Send + Sync),
    ) -> Result<ExecResult, String> {
        let cwd = PathBuf::from(request.cwd.as_deref().unwrap_or(default_cwd));
        self.check_builtin_tool(tool, &cwd)?;
        let args: serde_json::Value = request
            .args
            .first()
            .and_then(|a| serde_json::from_str(a).ok())
            .ok_or_else(|| format!("the built-in {tool} tool got no JSON arguments"))?;
        let workspace = crate::tools::Workspace::open(&cwd).map_err(|e| {
            format!(
                "the built-in {tool} tool cannot open {}: {e}",
                cwd.display()
            )
        })?;
        let options = crate::tools::ExecOptions {
            model_accepts_images: None,
            env: Some(self.program_env()),
        };
        let (_never, cancel) = tokio::sync::watch::channel(false);
        let args = crate::tools::prepare_arguments(tool, args);
        let output =
            crate::tools::execute_with(tool, &args, &workspace, &options, cancel, on_update)
                .await?;
        let mut result = serde_json::json!({ "content": output.content });
        if !output.details.is_null() {
            result["details"] = output.details;
        }
        Ok(ExecResult {
            stdout: result.to_string(),
            stderr: String::new(),
            code: 0,
            killed: false,
        })
    }

    /// Runs a granted program: no shell, scrubbed environment, timeout, capped output.
    pub async fn run_program(
        &self,
        request: ExecRequest,
        default_cwd: String,
    ) -> Result<ExecResult, String> {
        self.check_run(&request.command)?;
        let mut command = tokio::process::Command::new(&request.command);
        command
            .args(&request.args)
            .current_dir(request.cwd.unwrap_or(default_cwd))
            .env_clear()
            .envs(self.program_env())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("exec {}: {e}", request.command))?;
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = child.stderr.take().unwrap();
        let timeout = request
            .timeout_ms
            .map(|ms| Duration::from_millis(ms.into()))
            .unwrap_or(EXEC_DEFAULT_TIMEOUT);
        let collect = async {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let read_out = read_capped(&mut stdout, &mut out);
            let read_err = read_capped(&mut stderr, &mut err);
            let _ = tokio::join!(read_out, read_err);
            let status = child.wait().await;
            (out, err, status)
        };
        match tokio::time::timeout(timeout, collect).await {
            Ok((out, err, status)) => Ok(ExecResult {
                stdout: String::from_utf8_lossy(&out).into_owned(),
                stderr: String::from_utf8_lossy(&err).into_owned(),
                code: status.ok().and_then(|s| s.code()).unwrap_or(1),
                killed: false,
            }),
            Err(_) => Ok(ExecResult {
                stdout: String::new(),
                stderr: String::new(),
                code: 1,
                killed: true,
            }),
        }
    }
}

async fn read_capped(reader: &mut (impl AsyncReadExt + Unpin), out: &mut Vec<u8>) {
    let mut buf = [0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let room = EXEC_MAX_OUTPUT.saturating_sub(out.len());
                out.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
}
