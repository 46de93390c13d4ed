//! Confining a program run for an extension (`pi.exec` of a granted program, the bash tool an
//! extension creates) to that extension's grants, with Landlock.
//!
//! The parent builds a Landlock ruleset from the grants ([`Policy`], [`Confinement::prepare`]);
//! the child enters it between fork and exec ([`Confinement::apply`]) with two system calls on
//! the ruleset's descriptor, `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self`: no
//! allocation, no lock, nothing but async-signal-safe work. The domain is inherited by
//! everything the program starts and cannot be left.
//!
//! What a confined program reaches:
//! - the extension's `--allow-read` trees: read and execute; its `--allow-write` trees: read,
//!   write, create, remove, rename;
//! - the system trees programs run from ([`SYSTEM_TREES`]): read and execute;
//! - from `/etc`, only what the loader and common tools read ([`ETC_ENTRIES`]), never
//!   `passwd`, `shadow`, `group` or anything else;
//! - `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`;
//! - no other file: `/proc`, `/sys`, `/tmp`, `/home`, the session folder are out of reach
//!   (opening, listing, executing, writing answer EACCES) unless a grant covers them;
//! - TCP (Landlock ABI 4 and later): no `bind`, and `connect` only to the ports of the
//!   extension's `--allow-net` grants (`host:8443` gives 8443; a grant without a port gives 443
//!   and 80). Landlock filters TCP by port only: a program granted `example.com` may connect to
//!   port 443 of any host, which is coarser than `fetch`'s host check;
//! - signals and abstract unix sockets (ABI 6 and later): only within its own domain (the
//!   program and its children), not to other processes of the user.
//!
//! Not covered: UDP (DNS queries included), named unix sockets, `stat` and other metadata of
//! paths outside the grants (Landlock restricts opening, not looking up), resource use beyond
//! the callers' timeout and output caps. A kernel with an older Landlock ABI enforces what it
//! knows (the crate's best-effort compatibility); a kernel without Landlock cannot confine at
//! all, and [`Confinement::prepare`] then answers `None`, for the caller to refuse.

use std::collections::BTreeSet;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use landlock::{
    ABI, Access, AccessFs, AccessNet, NetPort, Ruleset, RulesetAttr, RulesetCreated,
    RulesetCreatedAttr, RulesetError, Scope, path_beneath_rules,
};

use crate::Grants;

/// The Landlock ABI whose access rights are asked for (the newest this was tested on). A
/// kernel with an older one enforces the rights it knows.
const TARGET_ABI: ABI = ABI::V7;

/// Trees programs are run from, readable and executable when they exist.
pub const SYSTEM_TREES: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// What a confined program may read under `/etc`: the dynamic loader's configuration, time
/// zone and locale, name resolution, TLS trust anchors and a few tools' system-wide settings.
pub const ETC_ENTRIES: &[&str] = &[
    // The dynamic loader.
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "ld.so.preload",
    // Time and locale.
    "localtime",
    "timezone",
    "locale.alias",
    "locale.conf",
    // Name resolution and services.
    "nsswitch.conf",
    "host.conf",
    "hosts",
    "resolv.conf",
    "gai.conf",
    "services",
    "protocols",
    // TLS trust anchors.
    "ssl/certs",
    "ssl/openssl.cnf",
    "ca-certificates",
    "ca-certificates.conf",
    "pki/tls/certs",
    "pki/ca-trust",
    // Tools.
    "gitconfig",
    "mime.types",
    "magic",
    "magic.mime",
    "terminfo",
];

/// Devices a confined program may read and write.
pub const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// What one extension's programs may reach beyond the system's fixed share.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Trees readable (and executable).
    pub read: Vec<PathBuf>,
    /// Trees readable and writable.
    pub write: Vec<PathBuf>,
    /// TCP ports the program may connect to.
    pub connect_ports: BTreeSet<u16>,
}

impl Policy {
    /// The policy of an extension's grants: its trees, and the ports of its network grants
    /// (443 and 80 for a host granted without a port).
    pub fn for_grants(grants: &Grants) -> Policy {
        let mut connect_ports = BTreeSet::new();
        // A range grant (`10.0.0.0/8`) is no host: it opens no port.
        for host in grants.net.iter().filter(|h| !h.contains('/')) {
            match crate::net::split_grant(host).1 {
                Some(port) => {
                    connect_ports.insert(port);
                }
                None => connect_ports.extend([443, 80]),
            }
        }
        Policy {
            read: grants.read.clone(),
            write: grants.write.clone(),
            connect_ports,
        }
    }
}

/// A prepared Landlock ruleset, entered by the children it is applied to.
#[derive(Debug)]
pub struct Confinement {
    ruleset: OwnedFd,
}

impl Confinement {
    /// Builds the ruleset of `policy`. `Ok(None)` when the kernel has no Landlock (not built
    /// in, or not enabled at boot): nothing can be confined. Paths that do not exist are left
    /// out (they grant nothing).
    pub fn prepare(policy: &Policy) -> Result<Option<Confinement>, String> {
        let ruleset =
            build(policy).map_err(|e| format!("cannot prepare the program's confinement: {e}"))?;
        Ok(Option::<OwnedFd>::from(ruleset).map(|ruleset| Confinement { ruleset }))
    }

    /// Makes `command`'s child enter the confinement just before it executes the program.
    pub fn apply(self: &Arc<Self>, command: &mut tokio::process::Command) {
        let confinement = Arc::clone(self);
        // SAFETY: the closure runs in the forked child before exec; `enter` makes two system
        // calls on a descriptor the parent keeps open (the Arc lives in the command) and reads
        // errno: no allocation, no lock, async-signal-safe.
        unsafe {
            command.pre_exec(move || confinement.enter());
        }
    }

    /// Restricts the calling process (the child) to the ruleset.
    fn enter(&self) -> io::Result<()> {
        // SAFETY: plain system calls with integer arguments.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1 as libc::c_ulong, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0 as libc::c_uint,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// The Landlock ABI version of the running kernel, `None` without Landlock.
pub fn kernel_abi() -> Option<i32> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: the version query takes no attribute (null, size 0) and returns an integer.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    (version > 0).then_some(version as i32)
}

fn build(policy: &Policy) -> Result<RulesetCreated, RulesetError> {
    let read = AccessFs::from_read(TARGET_ABI);
    let all = AccessFs::from_all(TARGET_ABI);
    let device = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev;
    let etc = ETC_ENTRIES.iter().map(|e| Path::new("/etc").join(e));
    let ports = policy
        .connect_ports
        .iter()
        .map(|&port| Ok::<_, RulesetError>(NetPort::new(port, AccessNet::ConnectTcp)));
    Ruleset::default()
        .handle_access(all)?
        .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)?
        .scope(Scope::AbstractUnixSocket | Scope::Signal)?
        .create()?
        .add_rules(path_beneath_rules(SYSTEM_TREES, read))?
        .add_rules(path_beneath_rules(
            etc,
            AccessFs::ReadFile | AccessFs::ReadDir,
        ))?
        .add_rules(path_beneath_rules(DEVICES, device))?
        .add_rules(path_beneath_rules(&policy.read, read))?
        .add_rules(path_beneath_rules(&policy.write, all))?
        .add_rules(ports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;

    struct Run {
        code: i32,
        stdout: String,
        stderr: String,
    }

    /// Runs `program args` in `cwd` confined to `policy`; `None` on a kernel without Landlock
    /// (after checking that nothing was prepared there).
    async fn confined(policy: &Policy, cwd: &Path, program: &str, args: &[&str]) -> Option<Run> {
        let Some(confinement) = Confinement::prepare(policy).unwrap() else {
            assert_eq!(
                kernel_abi(),
                None,
                "Landlock is there but nothing was prepared"
            );
            return None;
        };
        let mut command = tokio::process::Command::new(program);
        Arc::new(confinement).apply(&mut command);
        let out = command
            .args(args)
            .current_dir(cwd)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(Stdio::null())
            .output()
            .await
            .unwrap();
        Some(Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }

    /// A temporary folder with `granted/` (holding `inside.txt`) and `outside/` (holding
    /// `secret.txt`).
    fn trees() -> (tempfile::TempDir, PathBuf, PathBuf) {
        let tmp = tempfile::tempdir().unwrap();
        let granted = tmp.path().join("granted");
        let outside = tmp.path().join("outside");
        std::fs::create_dir(&granted).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(granted.join("inside.txt"), "inside\n").unwrap();
        std::fs::write(outside.join("secret.txt"), "secret\n").unwrap();
        (tmp, granted, outside)
    }

    fn denied(run: &Run) -> bool {
        run.code != 0 && run.stderr.contains("Permission denied")
    }

    #[tokio::test]
    async fn a_program_reads_its_read_trees_and_the_system_but_nothing_else() {
        let (_tmp, granted, outside) = trees();
        let policy = Policy {
            read: vec![granted.clone()],
            ..Policy::default()
        };
        let Some(run) = confined(&policy, &granted, "cat", &["inside.txt"]).await else {
            return;
        };
        assert_eq!(
            (run.code, run.stdout.as_str()),
            (0, "inside\n"),
            "{}",
            run.stderr
        );
        let run = confined(&policy, &granted, "ls", &[]).await.unwrap();
        assert_eq!(run.stdout, "inside.txt\n", "{}", run.stderr);

        let secret = outside.join("secret.txt");
        for (program, arg) in [
            ("cat", secret.to_str().unwrap()),
            ("ls", outside.to_str().unwrap()),
            ("cat", "/etc/passwd"),
            ("cat", "/etc/shadow"),
            ("cat", "/proc/self/environ"),
            ("ls", "/tmp"),
        ] {
            let run = confined(&policy, &granted, program, &[arg]).await.unwrap();
            assert!(
                denied(&run),
                "{program} {arg}: {} {}",
                run.stdout,
                run.stderr
            );
            assert!(!run.stdout.contains("secret"));
        }
        // The unconfined program reads the same file: the confinement made the difference.
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret\n");
    }

    #[tokio::test]
    async fn a_program_writes_only_in_its_write_trees() {
        let (tmp, granted, outside) = trees();
        let written = tmp.path().join("written");
        std::fs::create_dir(&written).unwrap();
        let policy = Policy {
            read: vec![granted.clone()],
            write: vec![written.clone()],
            ..Policy::default()
        };
        let bash = |script: String| {
            let policy = policy.clone();
            let cwd = granted.clone();
            async move {
                confined(&policy, &cwd, "bash", &["-c", &script])
                    .await
                    .unwrap()
            }
        };
        let Some(_) = confined(&policy, &granted, "true", &[]).await else {
            return;
        };
        let w = written.display();
        let run = bash(format!(
            "echo new > {w}/new.txt && mkdir {w}/sub && mv {w}/new.txt {w}/sub/ && echo >/dev/null"
        ))
        .await;
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert_eq!(
            std::fs::read_to_string(written.join("sub/new.txt")).unwrap(),
            "new\n"
        );
        for script in [
            format!("echo x > {}/planted.txt", granted.display()),
            format!("echo x >> {}/inside.txt", granted.display()),
            format!("rm {}/inside.txt", granted.display()),
            format!("echo x > {}/planted.txt", outside.display()),
            format!("mkdir {}/planted", outside.display()),
            "echo x > /tmp/pichamber-sandbox-planted".to_owned(),
        ] {
            let run = bash(script.clone()).await;
            assert!(denied(&run), "{script}: {}", run.stderr);
        }
        assert_eq!(
            std::fs::read_to_string(granted.join("inside.txt")).unwrap(),
            "inside\n"
        );
        assert!(!granted.join("planted.txt").exists());
        assert!(!outside.join("planted.txt").exists());
        assert!(!outside.join("planted").exists());
        assert!(!Path::new("/tmp/pichamber-sandbox-planted").exists());
    }

    #[tokio::test]
    async fn tcp_connects_only_to_the_granted_ports() {
        if kernel_abi().is_none_or(|abi| abi < 4) {
            eprintln!(
                "skipped: Landlock ABI {:?} does not filter TCP",
                kernel_abi()
            );
            return;
        }
        let (_tmp, granted, _) = trees();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let connect = format!("exec 3<>/dev/tcp/127.0.0.1/{port}");
        let without = Policy {
            connect_ports: BTreeSet::from([443, 80]),
            ..Policy::default()
        };
        let run = confined(&without, &granted, "bash", &["-c", &connect])
            .await
            .unwrap();
        assert!(denied(&run), "{}", run.stderr);
        assert!(listener.accept().is_err(), "a connection came through");

        let with = Policy {
            connect_ports: BTreeSet::from([port]),
            ..Policy::default()
        };
        let run = confined(&with, &granted, "bash", &["-c", &connect])
            .await
            .unwrap();
        assert_eq!(run.code, 0, "{}", run.stderr);
        assert!(
            listener.accept().is_ok(),
            "the granted port saw no connection"
        );
    }

    #[tokio::test]
    async fn signals_stay_inside_the_confinement() {
        if kernel_abi().is_none_or(|abi| abi < 6) {
            eprintln!(
                "skipped: Landlock ABI {:?} does not scope signals",
                kernel_abi()
            );
            return;
        }
        let (_tmp, granted, _) = trees();
        let me = std::process::id();
        let script = format!("kill -0 $$ && kill -0 {me}");
        let run = confined(&Policy::default(), &granted, "bash", &["-c", &script])
            .await
            .unwrap();
        assert_ne!(run.code, 0);
        assert!(
            run.stderr.contains("Operation not permitted"),
            "{}",
            run.stderr
        );
    }

    #[test]
    fn network_grants_give_their_ports() {
        let grants = Grants {
            net: vec![
                "example.com".into(),
                "*.example.org:8443".into(),
                "127.0.0.1:9000".into(),
            ],
            ..Grants::default()
        };
        assert_eq!(
            Policy::for_grants(&grants).connect_ports,
            BTreeSet::from([80, 443, 8443, 9000])
        );
        assert!(
            Policy::for_grants(&Grants::default())
                .connect_ports
                .is_empty()
        );
    }
}
