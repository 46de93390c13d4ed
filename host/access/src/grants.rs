//! What an extension may touch outside its sandbox. Deny by default: no directory, program or
//! environment variable is reachable unless the operator granted it (`--allow-read=PATH`,
//! `--allow-write=PATH`, `--allow-run=PROG`, `--allow-env=VAR`, `--allow-model-key=PROVIDER`).
//! Directories are WASI preopens
//! mounted at their host path so `path.resolve(ctx.cwd, p)` keeps working; programs are run by
//! the host, never through a shell unless `sh` itself was granted, confined to the same grants
//! (see [`crate::sandbox`]); where the kernel cannot confine them they are refused unless the
//! operator accepted the risk (`--allow-unconfined-run`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use crate::sandbox::{Confinement, Policy};

#[derive(Debug, Clone, Default)]
pub struct Grants {
    pub read: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub run: Vec<String>,
    pub env: Vec<String>,
    /// Hosts `fetch` may reach (`example.com`, `*.example.com`, with an optional `:port`).
    /// Granted programs may connect to their TCP ports (443 and 80 when none is named).
    pub net: Vec<String>,
    /// Model providers whose API key `ctx.modelRegistry` hands the extension. Without it the
    /// host still calls models for the extension with the key; only reading it is granted.
    pub model_keys: Vec<String>,
    /// Run granted programs even where the kernel cannot confine them to the grants (no
    /// Landlock): they then have the user's full authority. Without it they are refused
    /// there. Where the kernel can confine, programs are confined whatever this says.
    pub allow_unconfined_run: bool,
    /// Secrets by reference (`--secret NAME=HOST`): the extension sees a placeholder, the
    /// host sends the value to that host only (see [`crate::secrets`]).
    pub secrets: Vec<crate::secrets::Secret>,
}

/// A program an extension asks to run (`pi.exec(command, args, { cwd, timeout })`,
/// `child_process.spawn(command, args, { cwd, env })`).
#[derive(Debug, Clone, Default)]
pub struct ProgramRequest {
    pub command: String,
    pub args: Vec<String>,
    pub cwd: Option<String>,
    pub timeout_ms: Option<u32>,
    /// Variables the extension sets, over the granted ones; see [`Grants::program_env`].
    pub env: Vec<(String, String)>,
}

/// What a program run for an extension left: its capped output and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramOutput {
    pub stdout: String,
    pub stderr: String,
    pub code: i32,
    /// Stopped at its timeout.
    pub killed: bool,
}

/// Per-call caps on a program run for an extension.
pub const EXEC_DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
pub const EXEC_MAX_OUTPUT: usize = 1 << 20;

impl Grants {
    /// Granted environment variables with their host values (`process.env`), and each
    /// secret whose value the host has, as its placeholder.
    pub fn env_pairs(&self) -> Vec<(String, String)> {
        let mut pairs: Vec<(String, String)> = self
            .env
            .iter()
            .filter(|name| !self.secrets.iter().any(|s| &s.name == *name))
            .filter_map(|name| std::env::var(name).ok().map(|v| (name.clone(), v)))
            .collect();
        for secret in &self.secrets {
            if secret.value().is_some() {
                pairs.push((secret.name.clone(), secret.placeholder()));
            }
        }
        pairs
    }

    /// Whether the extension may read `provider`'s API key; the refusal names the flag.
    pub fn check_model_key(&self, provider: &str) -> Result<(), String> {
        if self.model_keys.iter().any(|p| p == provider) {
            Ok(())
        } else if crate::request::is_provider_name(provider) {
            Err(format!(
                "the API key of provider \"{provider}\" is not granted to this extension (grant it with --allow-model-key={provider}); models are called for it without one: ctx.modelRegistry.complete()"
            ))
        } else {
            Err(format!("{provider:?} is not a provider name"))
        }
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

    /// A working directory a program is asked to run in must be the session's own or lie in a
    /// granted tree: the directory a program starts in is entered before its confinement.
    fn check_program_cwd(
        &self,
        program: &str,
        cwd: &Path,
        default_cwd: &Path,
    ) -> Result<(), String> {
        if cwd == default_cwd || covers(&self.read, cwd) || covers(&self.write, cwd) {
            Ok(())
        } else {
            Err(format!(
                "exec of '{program}' in {} denied: the working directory is outside the granted trees (grant it with --allow-read={})",
                cwd.display(),
                cwd.display()
            ))
        }
    }

    /// The confinement a program run for this extension enters: its grants (see
    /// [`crate::sandbox`]). `None` (unconfined) only where the kernel cannot confine and the
    /// operator accepted that; otherwise such a kernel refuses the program.
    pub fn program_confinement(&self, program: &str) -> Result<Option<Arc<Confinement>>, String> {
        let prepared = Confinement::prepare(&Policy::for_grants(self))
            .map_err(|e| format!("exec of '{program}' refused: {e}"))?;
        confined_or_refused(prepared, self.allow_unconfined_run, program)
    }

    /// The scrubbed environment a program runs with: a fixed PATH, the granted variables,
    /// then what the extension set itself. PATH and the dynamic loader's variables (`LD_*`)
    /// stay the host's whatever the extension sets: they decide which file a granted program
    /// name runs and what it loads, which is the operator's grant, not the extension's.
    pub fn program_env(&self, set: &[(String, String)]) -> Vec<(String, String)> {
        let mut env = vec![("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned())];
        env.extend(self.env_pairs());
        let settable = |name: &str, value: &str| {
            !name.is_empty()
                && name != "PATH"
                && !name.starts_with("LD_")
                && !name.contains(['=', '\0'])
                && !value.contains('\0')
        };
        for (name, value) in set.iter().filter(|(n, v)| settable(n, v)) {
            env.retain(|(n, _)| n != name);
            env.push((name.clone(), value.clone()));
        }
        env
    }

    /// Whether the granted trees let a built-in tool work in `cwd`: the file tools need the
    /// folder readable (edit and write: writable), bash needs `bash` granted as a program.
    pub fn check_builtin_tool(&self, tool: &str, cwd: &Path) -> Result<(), String> {
        let covered = |grants: &[PathBuf]| covers(grants, cwd);
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

    /// A granted program, ready to start: no shell, scrubbed environment, confined to the
    /// grants, in a granted tree or the session's folder, killed when its handle drops.
    fn program_command(
        &self,
        request: &ProgramRequest,
        default_cwd: &str,
    ) -> Result<tokio::process::Command, String> {
        self.check_run(&request.command)?;
        let cwd = PathBuf::from(request.cwd.as_deref().unwrap_or(default_cwd));
        self.check_program_cwd(&request.command, &cwd, Path::new(default_cwd))?;
        let confinement = self.program_confinement(&request.command)?;
        let mut command = tokio::process::Command::new(&request.command);
        if let Some(confinement) = &confinement {
            confinement.apply(&mut command);
        }
        command
            .args(&request.args)
            .current_dir(cwd)
            .env_clear()
            .envs(self.program_env(&request.env))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        Ok(command)
    }

    /// Starts a granted program with live stdio (`child_process.spawn`): its stdin, stdout
    /// and stderr are pipes the caller drives; it runs until it ends or the handle drops.
    pub fn spawn_program(
        &self,
        request: &ProgramRequest,
        default_cwd: &str,
    ) -> Result<tokio::process::Child, String> {
        let mut command = self.program_command(request, default_cwd)?;
        command.stdin(Stdio::piped());
        command
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", request.command))
    }

    /// Runs a granted program to its end ([`Self::program_command`]): timeout, capped output.
    pub async fn run_program(
        &self,
        request: ProgramRequest,
        default_cwd: String,
    ) -> Result<ProgramOutput, String> {
        let mut command = self.program_command(&request, &default_cwd)?;
        let mut child = command
            .stdin(Stdio::null())
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
            Ok((out, err, status)) => Ok(ProgramOutput {
                stdout: String::from_utf8_lossy(&out).into_owned(),
                stderr: String::from_utf8_lossy(&err).into_owned(),
                code: status.ok().and_then(|s| s.code()).unwrap_or(1),
                killed: false,
            }),
            Err(_) => Ok(ProgramOutput {
                stdout: String::new(),
                stderr: String::new(),
                code: 1,
                killed: true,
            }),
        }
    }
}

/// Whether one of the granted `trees` holds `path` (both as they are on disk now).
fn covers(trees: &[PathBuf], path: &Path) -> bool {
    let Ok(path) = path.canonicalize() else {
        return false;
    };
    trees
        .iter()
        .filter_map(|t| t.canonicalize().ok())
        .any(|t| path.starts_with(t))
}

/// A prepared confinement, or where there is none (no Landlock) the operator's acceptance of
/// unconfined programs, or a refusal saying why and how to accept the risk.
fn confined_or_refused(
    prepared: Option<Confinement>,
    allow_unconfined_run: bool,
    program: &str,
) -> Result<Option<Arc<Confinement>>, String> {
    match prepared {
        Some(confinement) => Ok(Some(Arc::new(confinement))),
        None if allow_unconfined_run => Ok(None),
        None => Err(format!(
            "exec of '{program}' refused: this kernel cannot confine programs to the granted trees (Landlock is not available), so '{program}' would run with your full authority; to accept that risk, add --allow-unconfined-run (in a serve config, unconfined_run = true in the extension's grants)"
        )),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_landlock_a_program_is_refused_unless_the_operator_accepts_the_risk() {
        let refusal = confined_or_refused(None, false, "cat").unwrap_err();
        for part in [
            "exec of 'cat' refused",
            "Landlock is not available",
            "full authority",
            "--allow-unconfined-run",
            "unconfined_run = true",
        ] {
            assert!(refusal.contains(part), "{part:?} missing from {refusal:?}");
        }
        assert!(confined_or_refused(None, true, "cat").unwrap().is_none());
    }

    #[test]
    fn where_landlock_is_there_programs_are_confined_even_with_the_opt_out() {
        let grants = Grants {
            allow_unconfined_run: true,
            ..Grants::default()
        };
        let confined = grants.program_confinement("cat").unwrap();
        assert_eq!(confined.is_some(), crate::sandbox::kernel_abi().is_some());
    }

    #[test]
    fn a_program_starts_only_in_the_session_folder_or_a_granted_tree() {
        let tmp = tempfile::tempdir().unwrap();
        let (session, granted, outside) = (
            tmp.path().join("ws"),
            tmp.path().join("granted"),
            tmp.path().join("outside"),
        );
        for dir in [&session, &granted.join("sub"), &outside] {
            std::fs::create_dir_all(dir).unwrap();
        }
        let grants = Grants {
            write: vec![granted.clone()],
            ..Grants::default()
        };
        for cwd in [&session, &granted, &granted.join("sub")] {
            assert_eq!(
                grants.check_program_cwd("pwd", cwd, &session),
                Ok(()),
                "{}",
                cwd.display()
            );
        }
        for cwd in [
            outside.clone(),
            granted.join("sub/../../outside"),
            tmp.path().to_owned(),
        ] {
            let refusal = grants.check_program_cwd("pwd", &cwd, &session).unwrap_err();
            assert!(refusal.contains("outside the granted trees"), "{refusal}");
        }
    }
}
