//! Worker threads (WIT `workers`, `node:worker_threads`). A worker is a sibling instance of the
//! extension's own component in a store of its own (its own memory, the extension's grants and
//! per-call CPU limit), driven by one task that runs its `load` until the worker ends. The two
//! ends exchange JSON messages through each other's inbox; what arrives wakes the guest's
//! `wait`, or, between calls, the session (which then polls the guest), as programs' output
//! does. Bounded: workers per instance, bytes queued unread per end. A worker may not start
//! workers. Dropping the instance stops its workers.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// Workers one instance may have running at once.
pub const MAX_WORKERS: usize = 8;
/// Bytes of messages one end has not taken yet; posting past it fails.
const MAX_QUEUED: usize = 16 << 20;
/// The most one `take-events` hands over (one message may be larger).
const MAX_TAKE: usize = 1 << 20;
/// The handle by which a worker names its parent.
pub const PARENT: u32 = 0;

/// What arrives at one end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Message(String),
    /// The worker threw and did not catch it; its exit follows.
    Error(String),
    Exit(i32),
}

impl Event {
    fn bytes(&self) -> usize {
        match self {
            Event::Message(text) | Event::Error(text) => text.len(),
            Event::Exit(_) => 0,
        }
    }
}

/// Where one end's events wait for its guest.
pub struct Inbox {
    queue: Mutex<VecDeque<(u32, Event)>>,
    queued: AtomicUsize,
    /// Wakes a guest suspended in `wait` (shared with its programs' inbox).
    arrived: Arc<Notify>,
    /// The session was asked to poll and the guest has not taken events since.
    session_asked: AtomicBool,
    wake_session: Box<dyn Fn() + Send + Sync>,
}

impl Inbox {
    pub fn new(arrived: Arc<Notify>, wake_session: Box<dyn Fn() + Send + Sync>) -> Arc<Self> {
        Arc::new(Self {
            queue: Mutex::new(VecDeque::new()),
            queued: AtomicUsize::new(0),
            arrived,
            session_asked: AtomicBool::new(false),
            wake_session,
        })
    }

    pub fn arrival(&self) -> Arc<Notify> {
        self.arrived.clone()
    }

    /// Queues an event from `from`; a message is refused when too much is unread.
    pub fn deliver(&self, from: u32, event: Event) -> Result<(), String> {
        let size = event.bytes();
        if matches!(event, Event::Message(_))
            && self.queued.load(Ordering::Acquire) + size > MAX_QUEUED
        {
            return Err(format!(
                "the other end has not read {MAX_QUEUED} bytes of messages yet; the message is refused"
            ));
        }
        self.queued.fetch_add(size, Ordering::AcqRel);
        self.queue.lock().unwrap().push_back((from, event));
        self.arrived.notify_one();
        if !self.session_asked.swap(true, Ordering::AcqRel) {
            (self.wake_session)();
        }
        Ok(())
    }

    fn take(&self) -> Vec<(u32, Event)> {
        self.session_asked.store(false, Ordering::Release);
        let mut queue = self.queue.lock().unwrap();
        let mut taken = Vec::new();
        let mut bytes = 0;
        while bytes < MAX_TAKE {
            let Some((from, event)) = queue.pop_front() else {
                break;
            };
            bytes += event.bytes();
            self.queued.fetch_sub(event.bytes(), Ordering::AcqRel);
            taken.push((from, event));
        }
        if !queue.is_empty() {
            self.arrived.notify_one();
        }
        taken
    }
}

/// A worker's link to its parent: where its messages go, and where the parent's arrive.
pub struct ParentLink {
    /// The parent's inbox.
    pub parent: Arc<Inbox>,
    /// This worker's handle in the parent.
    pub id: u32,
}

/// What a worker is started from (WIT `worker-source`).
#[derive(Debug, Clone)]
pub enum Source {
    Module(String),
    Script(String),
}

/// Starts a worker's task: the instance layer provides it (it owns the component). Given the
/// source, the `workerData` JSON, the worker's own inbox and its link to the parent; the task
/// ends when the worker does and reports its end to the parent itself.
pub type Spawn = Arc<
    dyn Fn(Source, String, Arc<Inbox>, ParentLink) -> Pin<Box<dyn Future<Output = ()> + Send>>
        + Send
        + Sync,
>;

struct Child {
    inbox: Arc<Inbox>,
    task: JoinHandle<()>,
}

/// One instance's workers, or a worker's side of its parent.
pub struct Workers {
    inbox: Arc<Inbox>,
    /// In a worker: its parent.
    parent: Option<ParentLink>,
    /// Workers this instance started whose exit it has not taken.
    children: HashMap<u32, Child>,
    next: u32,
    /// How to start one; `None` in a worker (workers do not start workers).
    spawn: Option<Spawn>,
}

impl Workers {
    /// The extension's side: it may start workers with `spawn`.
    pub fn new(inbox: Arc<Inbox>, spawn: Spawn) -> Self {
        Self {
            inbox,
            parent: None,
            children: HashMap::new(),
            next: PARENT,
            spawn: Some(spawn),
        }
    }

    /// A worker's side: it talks to its parent only.
    pub fn in_worker(inbox: Arc<Inbox>, parent: ParentLink) -> Self {
        Self {
            inbox,
            parent: Some(parent),
            children: HashMap::new(),
            next: PARENT,
            spawn: None,
        }
    }

    /// Whether events may still arrive: a worker runs, or (in a worker) the parent may post.
    pub fn pending(&self) -> bool {
        !self.children.is_empty() || self.parent.is_some()
    }

    /// Notified when an event arrives.
    #[cfg(test)]
    fn arrival(&self) -> Arc<Notify> {
        self.inbox.arrival()
    }

    pub fn start(&mut self, source: Source, data: String) -> Result<u32, String> {
        let Some(spawn) = self.spawn.clone() else {
            return Err("a worker may not start workers inside pichamber".into());
        };
        if self.children.len() >= MAX_WORKERS {
            return Err(format!(
                "too many workers running (limit {MAX_WORKERS}): terminate one or wait for one to exit"
            ));
        }
        self.next = self.next.wrapping_add(1).max(1);
        let id = self.next;
        // The worker's task drives it: nothing but its own `wait` needs waking.
        let inbox = Inbox::new(Arc::new(Notify::new()), Box::new(|| {}));
        let link = ParentLink {
            parent: self.inbox.clone(),
            id,
        };
        let task = tokio::spawn(spawn(source, data, inbox.clone(), link));
        self.children.insert(id, Child { inbox, task });
        Ok(id)
    }

    pub fn post(&mut self, to: u32, message: String) -> Result<(), String> {
        if to == PARENT {
            let Some(link) = &self.parent else {
                return Err("only a worker has a parent to post to".into());
            };
            return link.parent.deliver(link.id, Event::Message(message));
        }
        match self.children.get(&to) {
            Some(child) if !child.task.is_finished() => {
                child.inbox.deliver(PARENT, Event::Message(message))
            }
            _ => Err(format!("worker {to} has exited")),
        }
    }

    /// Stops a worker now; its exit (code 1) is reported as the worker's own end would be.
    pub fn terminate(&mut self, worker: u32) {
        if let Some(child) = self.children.get(&worker)
            && !child.task.is_finished()
        {
            child.task.abort();
            let _ = self.inbox.deliver(worker, Event::Exit(1));
        }
    }

    /// What arrived since the last call; a worker whose exit is taken is forgotten.
    pub fn take_events(&mut self) -> Vec<(u32, Event)> {
        let taken = self.inbox.take();
        for (from, event) in &taken {
            if matches!(event, Event::Exit(_)) {
                self.children.remove(from);
            }
        }
        taken
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for child in self.children.values() {
            child.task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inbox() -> Arc<Inbox> {
        Inbox::new(Arc::new(Notify::new()), Box::new(|| {}))
    }

    /// A "worker" that echoes each message back doubled, and exits after "bye".
    fn echo_spawn() -> Spawn {
        Arc::new(|_source, data, own: Arc<Inbox>, link: ParentLink| {
            Box::pin(async move {
                link.parent
                    .deliver(link.id, Event::Message(format!("data {data}")))
                    .unwrap();
                loop {
                    own.arrived.notified().await;
                    for (_, event) in own.take() {
                        let Event::Message(text) = event else {
                            continue;
                        };
                        if text == "bye" {
                            link.parent.deliver(link.id, Event::Exit(0)).unwrap();
                            return;
                        }
                        link.parent
                            .deliver(link.id, Event::Message(format!("{text}{text}")))
                            .unwrap();
                    }
                }
            })
        })
    }

    async fn next_events(workers: &mut Workers) -> Vec<(u32, Event)> {
        loop {
            let events = workers.take_events();
            if !events.is_empty() {
                return events;
            }
            workers.arrival().notified().await;
        }
    }

    #[tokio::test]
    async fn messages_cross_both_ways_and_an_exit_forgets_the_worker() {
        let mut workers = Workers::new(inbox(), echo_spawn());
        let id = workers
            .start(Source::Module("/ext/w.mjs".into()), "7".into())
            .unwrap();
        assert_eq!(
            next_events(&mut workers).await,
            [(id, Event::Message("data 7".into()))]
        );
        workers.post(id, "ab".into()).unwrap();
        assert_eq!(
            next_events(&mut workers).await,
            [(id, Event::Message("abab".into()))]
        );
        assert!(workers.pending());
        workers.post(id, "bye".into()).unwrap();
        assert_eq!(next_events(&mut workers).await, [(id, Event::Exit(0))]);
        assert!(!workers.pending());
        assert_eq!(
            workers.post(id, "x".into()).unwrap_err(),
            format!("worker {id} has exited")
        );
    }

    #[tokio::test]
    async fn terminate_stops_a_worker_and_reports_exit_code_1() {
        let mut workers = Workers::new(inbox(), echo_spawn());
        let id = workers
            .start(Source::Script("".into()), "null".into())
            .unwrap();
        next_events(&mut workers).await;
        workers.terminate(id);
        assert_eq!(next_events(&mut workers).await, [(id, Event::Exit(1))]);
    }

    #[tokio::test]
    async fn limits_hold_and_a_worker_cannot_start_workers() {
        let mut workers = Workers::new(inbox(), echo_spawn());
        for _ in 0..MAX_WORKERS {
            workers
                .start(Source::Script(String::new()), "null".into())
                .unwrap();
        }
        let refused = workers.start(Source::Script(String::new()), "null".into());
        assert!(refused.unwrap_err().starts_with("too many workers running"));

        let parent = inbox();
        let mut worker = Workers::in_worker(
            inbox(),
            ParentLink {
                parent: parent.clone(),
                id: 3,
            },
        );
        let refused = worker.start(Source::Script(String::new()), "null".into());
        assert_eq!(
            refused.unwrap_err(),
            "a worker may not start workers inside pichamber"
        );
        worker.post(PARENT, "hi".into()).unwrap();
        assert_eq!(parent.take(), [(3, Event::Message("hi".into()))]);

        let big = "x".repeat(MAX_QUEUED);
        worker.post(PARENT, big).unwrap();
        assert!(
            worker
                .post(PARENT, "more".into())
                .unwrap_err()
                .contains("has not read")
        );
    }
}
