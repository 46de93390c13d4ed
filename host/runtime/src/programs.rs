//! Programs an extension runs with live stdio (WIT `programs`, `child_process.spawn`): an MCP
//! stdio server, a language server. Each is started under the instance's grants as `exec` is
//! (pichamber_access), and driven by one task that reads its output into the instance's inbox
//! and sends it signals; a second feeds its stdin. What arrives wakes the guest's `wait`, or,
//! between calls, the session (which then polls the guest). Bounded everywhere: programs per
//! instance, unread output per program (past it the program's pipe fills and it blocks, as on
//! a terminal nobody reads), stdin queued per program. Dropping the instance kills them all.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Child;
use tokio::sync::{Notify, mpsc};

/// Programs one instance may have running at once.
pub const MAX_PROGRAMS: usize = 16;
/// Output of one program the guest has not taken yet; its pipes are left unread past it.
const MAX_UNREAD: usize = 1 << 20;
/// Bytes queued for one program's stdin that it has not read yet.
const MAX_STDIN_QUEUED: usize = 1 << 20;
/// The most one `take-output` hands over (one item may be larger: a read is at most
/// `READ_CHUNK`).
const MAX_TAKE: usize = 256 << 10;
const READ_CHUNK: usize = 64 << 10;

/// What arrived from a program.
#[derive(Debug, PartialEq, Eq)]
pub enum Output {
    Stdout(Vec<u8>),
    Stderr(Vec<u8>),
    /// It exited: the code, or the signal that ended it. Output may still follow (a
    /// program it started may hold its pipes).
    Exit {
        code: Option<i32>,
        signal: Option<String>,
    },
    /// Its output ended and it exited: nothing more comes.
    Closed,
}

/// Where output waits for the guest, shared with the programs' tasks.
struct Inbox {
    queue: Mutex<VecDeque<(u32, Output)>>,
    /// Wakes a guest suspended in `wait`.
    arrived: Arc<Notify>,
    /// The session was asked to poll and the guest has not taken output since: one request
    /// is enough however much arrives meanwhile.
    session_asked: AtomicBool,
    wake_session: Box<dyn Fn() + Send + Sync>,
}

impl Inbox {
    fn deliver(&self, program: u32, output: Output) {
        self.queue.lock().unwrap().push_back((program, output));
        self.arrived.notify_one();
        if !self.session_asked.swap(true, Ordering::AcqRel) {
            (self.wake_session)();
        }
    }
}

/// The unread output of one program, and the signal that the guest took some.
#[derive(Default)]
struct Unread {
    bytes: AtomicUsize,
    taken: Notify,
}

struct Running {
    /// None once stdin was closed (or the program stopped reading it).
    stdin: Option<mpsc::UnboundedSender<Vec<u8>>>,
    stdin_queued: Arc<AtomicUsize>,
    /// Signals for the task that owns the child (the only one that may reap it, so a signal
    /// never reaches a process that reused its pid).
    signals: mpsc::UnboundedSender<i32>,
    unread: Arc<Unread>,
    exited: Arc<AtomicBool>,
}

/// One instance's programs.
pub struct Programs {
    next: u32,
    running: HashMap<u32, Running>,
    inbox: Arc<Inbox>,
}

impl Programs {
    /// `wake_session` asks the session to poll the instance (output arrived between calls).
    #[cfg(test)]
    pub fn new(wake_session: Box<dyn Fn() + Send + Sync>) -> Self {
        Self::with_arrival(Arc::new(Notify::new()), wake_session)
    }

    /// [`Programs::new`] notifying `arrived` (shared with the instance's workers, so that one
    /// `wait` wakes for either).
    pub fn with_arrival(arrived: Arc<Notify>, wake_session: Box<dyn Fn() + Send + Sync>) -> Self {
        Self {
            next: 0,
            running: HashMap::new(),
            inbox: Arc::new(Inbox {
                queue: Mutex::new(VecDeque::new()),
                arrived,
                session_asked: AtomicBool::new(false),
                wake_session,
            }),
        }
    }

    /// Programs whose end the guest has not taken yet.
    pub fn running(&self) -> usize {
        self.running.len()
    }

    /// Notified when output arrives (the guest's `wait` returns for it).
    pub fn arrival(&self) -> Arc<Notify> {
        self.inbox.arrived.clone()
    }

    /// Whether there is a free place for another program (checked before it is started).
    pub fn check_room(&self) -> Result<(), String> {
        if self.running.len() >= MAX_PROGRAMS {
            return Err(format!(
                "too many programs running (limit {MAX_PROGRAMS}): wait for one to exit or kill one"
            ));
        }
        Ok(())
    }

    /// Takes over a started child (stdin, stdout and stderr piped); its handle.
    pub fn adopt(&mut self, mut child: Child) -> Result<u32, String> {
        self.check_room()?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err("internal: the program's stdio is not piped".into());
        };
        self.next = self.next.wrapping_add(1).max(1);
        let id = self.next;
        let (stdin_tx, stdin_rx) = mpsc::unbounded_channel();
        let (signals_tx, signals_rx) = mpsc::unbounded_channel();
        let stdin_queued = Arc::new(AtomicUsize::new(0));
        let unread = Arc::new(Unread::default());
        let exited = Arc::new(AtomicBool::new(false));
        tokio::spawn(feed_stdin(stdin, stdin_rx, stdin_queued.clone()));
        tokio::spawn(
            Drive {
                id,
                child,
                stdout,
                stderr,
                signals: signals_rx,
                unread: unread.clone(),
                exited: exited.clone(),
                inbox: self.inbox.clone(),
            }
            .run(),
        );
        self.running.insert(
            id,
            Running {
                stdin: Some(stdin_tx),
                stdin_queued,
                signals: signals_tx,
                unread,
                exited,
            },
        );
        Ok(id)
    }

    pub fn write(&mut self, program: u32, data: Vec<u8>) -> Result<(), String> {
        let running = self.get(program)?;
        let Some(stdin) = &running.stdin else {
            return Err("the program's stdin is closed".into());
        };
        let queued = running.stdin_queued.load(Ordering::Acquire);
        if queued + data.len() > MAX_STDIN_QUEUED {
            return Err(format!(
                "the program has {queued} bytes of stdin it has not read yet (limit {MAX_STDIN_QUEUED}): wait for 'drain'"
            ));
        }
        running.stdin_queued.fetch_add(data.len(), Ordering::AcqRel);
        stdin
            .send(data)
            .map_err(|_| "the program stopped reading its stdin".to_owned())
    }

    pub fn close_stdin(&mut self, program: u32) {
        if let Some(running) = self.running.get_mut(&program) {
            running.stdin = None;
        }
    }

    pub fn kill(&mut self, program: u32, signal: &str) -> bool {
        let Some(number) = signal_number(signal) else {
            return false;
        };
        match self.running.get(&program) {
            Some(running) if !running.exited.load(Ordering::Acquire) => {
                running.signals.send(number).is_ok()
            }
            _ => false,
        }
    }

    /// What arrived since the last call, oldest first, about [`MAX_TAKE`] bytes at most; a
    /// program whose end is taken is forgotten.
    pub fn take_output(&mut self) -> Vec<(u32, Output)> {
        self.inbox.session_asked.store(false, Ordering::Release);
        let mut taken = Vec::new();
        let mut bytes = 0;
        let mut queue = self.inbox.queue.lock().unwrap();
        while bytes < MAX_TAKE {
            let Some((program, output)) = queue.pop_front() else {
                break;
            };
            match &output {
                Output::Stdout(data) | Output::Stderr(data) => {
                    bytes += data.len();
                    if let Some(running) = self.running.get(&program) {
                        running.unread.bytes.fetch_sub(data.len(), Ordering::AcqRel);
                        running.unread.taken.notify_one();
                    }
                }
                Output::Exit { .. } => {}
                Output::Closed => {
                    self.running.remove(&program);
                }
            }
            taken.push((program, output));
        }
        if !queue.is_empty() {
            // More is waiting: the guest's next wait returns at once.
            self.inbox.arrived.notify_one();
        }
        taken
    }

    fn get(&self, program: u32) -> Result<&Running, String> {
        self.running
            .get(&program)
            .ok_or_else(|| format!("there is no running program {program}"))
    }
}

/// The signals an extension may send, as Node names them.
fn signal_number(name: &str) -> Option<i32> {
    Some(match name {
        "SIGTERM" => libc::SIGTERM,
        "SIGKILL" => libc::SIGKILL,
        "SIGINT" => libc::SIGINT,
        "SIGHUP" => libc::SIGHUP,
        "SIGQUIT" => libc::SIGQUIT,
        "SIGUSR1" => libc::SIGUSR1,
        "SIGUSR2" => libc::SIGUSR2,
        _ => return None,
    })
}

fn signal_name(number: i32) -> String {
    match number {
        libc::SIGTERM => "SIGTERM".into(),
        libc::SIGKILL => "SIGKILL".into(),
        libc::SIGINT => "SIGINT".into(),
        libc::SIGHUP => "SIGHUP".into(),
        libc::SIGQUIT => "SIGQUIT".into(),
        libc::SIGUSR1 => "SIGUSR1".into(),
        libc::SIGUSR2 => "SIGUSR2".into(),
        libc::SIGPIPE => "SIGPIPE".into(),
        libc::SIGSEGV => "SIGSEGV".into(),
        libc::SIGABRT => "SIGABRT".into(),
        other => format!("SIG{other}"),
    }
}

/// Writes what the guest queued to the program's stdin, in order; ends (closing stdin) when
/// the guest closes it, the instance goes, or the program stops reading.
async fn feed_stdin(
    mut stdin: tokio::process::ChildStdin,
    mut queue: mpsc::UnboundedReceiver<Vec<u8>>,
    queued: Arc<AtomicUsize>,
) {
    while let Some(data) = queue.recv().await {
        let written = stdin.write_all(&data).await.and(stdin.flush().await);
        queued.fetch_sub(data.len(), Ordering::AcqRel);
        if written.is_err() {
            break;
        }
    }
}

/// The task that owns one child: reads its output while the guest keeps up, sends the
/// signals the guest asks for, reaps it (reporting the exit), and reports when its output
/// has ended too.
struct Drive {
    id: u32,
    child: Child,
    stdout: tokio::process::ChildStdout,
    stderr: tokio::process::ChildStderr,
    signals: mpsc::UnboundedReceiver<i32>,
    unread: Arc<Unread>,
    exited: Arc<AtomicBool>,
    inbox: Arc<Inbox>,
}

impl Drive {
    async fn run(mut self) {
        let pid = self.child.id();
        let (mut out_open, mut err_open, mut exited) = (true, true, false);
        let mut out_buf = vec![0u8; READ_CHUNK];
        let mut err_buf = vec![0u8; READ_CHUNK];
        while out_open || err_open || !exited {
            let room = self.unread.bytes.load(Ordering::Acquire) < MAX_UNREAD;
            let streams_open = out_open || err_open;
            tokio::select! {
                read = self.stdout.read(&mut out_buf), if out_open && room => match read {
                    Ok(n) if n > 0 => self.deliver(Output::Stdout(out_buf[..n].to_vec())),
                    _ => out_open = false,
                },
                read = self.stderr.read(&mut err_buf), if err_open && room => match read {
                    Ok(n) if n > 0 => self.deliver(Output::Stderr(err_buf[..n].to_vec())),
                    _ => err_open = false,
                },
                () = self.unread.taken.notified(), if streams_open && !room => {}
                status = self.child.wait(), if !exited => {
                    exited = true;
                    self.exited.store(true, Ordering::Release);
                    let (code, signal) = match status {
                        Ok(status) => {
                            use std::os::unix::process::ExitStatusExt;
                            (status.code(), status.signal().map(signal_name))
                        }
                        Err(_) => (None, None),
                    };
                    self.deliver(Output::Exit { code, signal });
                }
                signal = self.signals.recv() => match (signal, pid) {
                    // SAFETY: kill(2) takes plain integers. The pid is still the child's: it is
                    // not reaped yet (only this task reaps it, and sets `exited` when it does).
                    (Some(signal), Some(pid)) if !exited => unsafe {
                        libc::kill(pid as libc::pid_t, signal);
                    },
                    (Some(_), _) => {}
                    // The instance is gone: so is its program (kill_on_drop).
                    (None, _) => return,
                },
            }
        }
        self.deliver(Output::Closed);
    }

    fn deliver(&self, output: Output) {
        if let Output::Stdout(data) | Output::Stderr(data) = &output {
            self.unread.bytes.fetch_add(data.len(), Ordering::AcqRel);
        }
        self.inbox.deliver(self.id, output);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Stdio;
    use std::time::Duration;

    /// `program` with piped stdio, as the grants start one.
    fn spawn(program: &str, args: &[&str]) -> Child {
        tokio::process::Command::new(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    }

    fn start(programs: &mut Programs, script: &str) -> u32 {
        programs.adopt(spawn("sh", &["-c", script])).unwrap()
    }

    /// Everything a program sends until it is closed, taken as the guest takes it.
    async fn collect(programs: &mut Programs, id: u32) -> Vec<Output> {
        let arrival = programs.arrival();
        let mut got = Vec::new();
        loop {
            for (program, output) in programs.take_output() {
                assert_eq!(program, id);
                let closed = output == Output::Closed;
                got.push(output);
                if closed {
                    return got;
                }
            }
            tokio::time::timeout(Duration::from_secs(10), arrival.notified())
                .await
                .expect("the program sent nothing for 10 s");
        }
    }

    fn stdout_of(outputs: &[Output]) -> Vec<u8> {
        outputs
            .iter()
            .filter_map(|o| match o {
                Output::Stdout(data) => Some(data.as_slice()),
                _ => None,
            })
            .flatten()
            .copied()
            .collect()
    }

    #[tokio::test]
    async fn stdin_goes_in_and_output_comes_back_before_the_exit_then_closed() {
        let woken = Arc::new(AtomicUsize::new(0));
        let counter = woken.clone();
        let mut programs = Programs::new(Box::new(move || {
            counter.fetch_add(1, Ordering::Relaxed);
        }));
        let id = start(&mut programs, "cat; echo done >&2; exit 7");
        programs.write(id, b"hello ".to_vec()).unwrap();
        programs.write(id, b"world".to_vec()).unwrap();
        programs.close_stdin(id);
        assert!(programs.write(id, b"late".to_vec()).is_err());
        let outputs = collect(&mut programs, id).await;
        assert_eq!(stdout_of(&outputs), b"hello world");
        assert!(outputs.contains(&Output::Stderr(b"done\n".to_vec())));
        let exit = outputs
            .iter()
            .position(|o| matches!(o, Output::Exit { .. }));
        assert_eq!(
            outputs[exit.unwrap()],
            Output::Exit {
                code: Some(7),
                signal: None
            }
        );
        assert_eq!(outputs.last(), Some(&Output::Closed));
        assert_eq!(programs.running(), 0, "a closed program is forgotten");
        assert!(
            woken.load(Ordering::Relaxed) >= 1,
            "the session was asked to poll"
        );
    }

    #[tokio::test]
    async fn a_signal_ends_the_program_and_none_is_sent_after_it_exited() {
        let mut programs = Programs::new(Box::new(|| {}));
        let id = start(&mut programs, "exec sleep 30");
        assert!(!programs.kill(id, "SIGBOGUS"), "only the listed signals");
        assert!(programs.kill(id, "SIGTERM"));
        let outputs = collect(&mut programs, id).await;
        assert_eq!(
            outputs[0],
            Output::Exit {
                code: None,
                signal: Some("SIGTERM".into())
            }
        );
        assert!(!programs.kill(id, "SIGKILL"), "it is gone");
    }

    #[tokio::test]
    async fn the_exit_is_reported_while_something_it_started_still_holds_its_output() {
        let mut programs = Programs::new(Box::new(|| {}));
        let id = start(&mut programs, "(sleep 0.3; echo late) & exit 0");
        let outputs = collect(&mut programs, id).await;
        assert_eq!(
            outputs,
            vec![
                Output::Exit {
                    code: Some(0),
                    signal: None
                },
                Output::Stdout(b"late\n".to_vec()),
                Output::Closed,
            ]
        );
    }

    #[tokio::test]
    async fn output_nobody_takes_stops_being_read_past_its_cap() {
        let mut programs = Programs::new(Box::new(|| {}));
        // 4 MiB, four times what may wait unread.
        let id = start(&mut programs, "head -c 4194304 /dev/zero");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let waiting: usize = programs
            .inbox
            .queue
            .lock()
            .unwrap()
            .iter()
            .map(|(_, o)| match o {
                Output::Stdout(d) => d.len(),
                _ => 0,
            })
            .sum();
        assert!(
            (MAX_UNREAD..MAX_UNREAD + READ_CHUNK).contains(&waiting),
            "{waiting} bytes read ahead of the guest"
        );
        let outputs = collect(&mut programs, id).await;
        assert_eq!(stdout_of(&outputs).len(), 4 << 20, "nothing lost");
    }

    #[tokio::test]
    async fn an_instance_runs_a_bounded_number_of_programs_and_dropping_it_kills_them() {
        let mut programs = Programs::new(Box::new(|| {}));
        let pids: Vec<u32> = (0..MAX_PROGRAMS)
            .map(|_| {
                let child = spawn("sleep", &["30"]);
                let pid = child.id().unwrap();
                programs.adopt(child).unwrap();
                pid
            })
            .collect();
        let refused = programs.check_room().unwrap_err();
        assert!(refused.contains("too many programs running"), "{refused}");
        drop(programs);
        tokio::time::sleep(Duration::from_millis(300)).await;
        for pid in pids {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // Gone, or a zombie waiting for tokio's reaper.
            assert!(
                state.is_empty() || state.contains(") Z "),
                "sleep {pid} still runs: {state}"
            );
        }
    }
}
