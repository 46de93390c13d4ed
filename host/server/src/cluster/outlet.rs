//! A running session's way out to JetStream: its entries (the pi JSONL records) to its log
//! subject and its events to its user's subject, in the order the session made them, from
//! one task. Each entry is written only if the log's last record is the one this node wrote
//! before it, so a node that lost the session cannot write behind its new owner; an event
//! leaves only after the entries before it were stored, so what a client saw is never lost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use async_nats::jetstream;
use tokio::sync::mpsc;

/// Headers of an event message: which session, its number in the session, its name.
pub const SESSION_HEADER: &str = "Pichamber-Session";
pub const NUMBER_HEADER: &str = "Pichamber-N";
pub const EVENT_HEADER: &str = "Pichamber-Event";

pub fn log_subject(id: &str) -> String {
    format!("pichamber.log.{id}")
}

pub fn events_subject(user_key: &str) -> String {
    format!("pichamber.events.{user_key}")
}

enum Out {
    Entry(String),
    /// Answered once everything queued before it is stored.
    Flush(tokio::sync::oneshot::Sender<Result<(), String>>),
    Event {
        name: &'static str,
        data: String,
        number: u64,
    },
}

struct Shared {
    send: mpsc::UnboundedSender<Out>,
    /// Why the outlet stopped (then nothing more leaves).
    failed: Mutex<Option<String>>,
    /// Events this session numbered so far (a snapshot says how many it covers).
    events: AtomicU64,
    lost: Box<dyn Fn(String) + Send + Sync>,
    /// Until when this node surely holds the session's lease, by its own clock: a renewal
    /// asked for at T lasts until T + lease on NATS or later, so past this nothing leaves
    /// (a node frozen past its lease writes nothing when it wakes, not even an event).
    lease_until: Mutex<Instant>,
}

#[derive(Clone)]
pub struct Outlet(Arc<Shared>);

impl Outlet {
    pub(super) fn start(
        js: jetstream::Context,
        id: &str,
        user_key: &str,
        last: u64,
        lease: Duration,
        lost: Box<dyn Fn(String) + Send + Sync>,
    ) -> Self {
        let (send, receive) = mpsc::unbounded_channel();
        let outlet = Self(Arc::new(Shared {
            send,
            failed: Mutex::new(None),
            events: AtomicU64::new(0),
            lost,
            lease_until: Mutex::new(Instant::now() + lease),
        }));
        tokio::spawn(publish(
            js,
            log_subject(id),
            events_subject(user_key),
            id.to_owned(),
            last,
            receive,
            Arc::downgrade(&outlet.0),
        ));
        outlet
    }

    /// Queues an entry; refused once the outlet has failed.
    pub fn entry(&self, line: &str) -> Result<()> {
        if let Some(reason) = self.failure() {
            return Err(anyhow!(
                "the session's log on NATS is not writable: {reason}"
            ));
        }
        self.0
            .send
            .send(Out::Entry(line.to_owned()))
            .map_err(|_| anyhow!("the session's log on NATS is closed"))
    }

    /// Numbers and queues an event (dropped once the outlet has failed).
    pub fn event(&self, name: &'static str, data: String) {
        let number = self.0.events.fetch_add(1, Ordering::SeqCst) + 1;
        if self.failure().is_none() {
            let _ = self.0.send.send(Out::Event { name, data, number });
        }
    }

    /// Waits until everything the session made so far is stored: a response showing the
    /// session's state (a snapshot, its file) leaves only after it, so what a client saw
    /// survives the node.
    pub async fn flushed(&self) -> Result<(), String> {
        if let Some(reason) = self.failure() {
            return Err(reason);
        }
        let (done, stored) = tokio::sync::oneshot::channel();
        self.0
            .send
            .send(Out::Flush(done))
            .map_err(|_| "the session's log on NATS is closed".to_owned())?;
        stored
            .await
            .unwrap_or_else(|_| Err("the session's log on NATS is closed".into()))
    }

    /// The lease was renewed by a request sent at `asked`: it holds until `asked + lease`.
    pub fn renewed(&self, asked: Instant, lease: Duration) {
        *self.0.lease_until.lock().unwrap() = asked + lease;
    }

    /// How many events were numbered so far.
    pub fn events(&self) -> u64 {
        self.0.events.load(Ordering::SeqCst)
    }

    pub fn failure(&self) -> Option<String> {
        self.0.failed.lock().unwrap().clone()
    }

    /// Stops everything from leaving, at once (the session was lost or is closing).
    pub fn fail(&self, reason: &str) {
        let mut failed = self.0.failed.lock().unwrap();
        if failed.is_none() {
            *failed = Some(reason.to_owned());
        }
    }
}

/// The session's store writes its entries through the outlet.
pub struct LogJournal(pub Outlet);

impl pichamber_session::store::Journal for LogJournal {
    fn append(&mut self, line: &str) -> Result<()> {
        self.0.entry(line)
    }
}

async fn publish(
    js: jetstream::Context,
    log: String,
    events: String,
    session: String,
    mut last: u64,
    mut receive: mpsc::UnboundedReceiver<Out>,
    outlet: std::sync::Weak<Shared>,
) {
    while let Some(out) = receive.recv().await {
        let Some(shared) = outlet.upgrade() else {
            return;
        };
        let failed = shared.failed.lock().unwrap().clone();
        if let Out::Flush(done) = out {
            let _ = done.send(failed.map_or(Ok(()), Err));
            continue;
        }
        if failed.is_some() {
            continue;
        }
        if Instant::now() > *shared.lease_until.lock().unwrap() {
            let reason = "its lease was not renewed in time".to_owned();
            *shared.failed.lock().unwrap() = Some(reason.clone());
            (shared.lost)(reason);
            continue;
        }
        let mut headers = async_nats::HeaderMap::new();
        let (subject, payload) = match out {
            Out::Flush(_) => continue,
            Out::Entry(line) => {
                headers.insert(
                    async_nats::header::NATS_EXPECTED_LAST_SUBJECT_SEQUENCE,
                    last.to_string().as_str(),
                );
                (log.clone(), line)
            }
            Out::Event { name, data, number } => {
                headers.insert(SESSION_HEADER, session.as_str());
                headers.insert(NUMBER_HEADER, number.to_string().as_str());
                headers.insert(EVENT_HEADER, name);
                (events.clone(), data)
            }
        };
        let is_entry = subject == log;
        let stored = match js
            .publish_with_headers(subject, headers, payload.into())
            .await
        {
            Ok(ack) => ack.await.map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        match stored {
            Ok(ack) if is_entry => last = ack.sequence,
            Ok(_) => {}
            Err(e) => {
                let reason = if is_entry {
                    format!("an entry was not stored ({e})")
                } else {
                    format!("an event was not stored ({e})")
                };
                *shared.failed.lock().unwrap() = Some(reason.clone());
                (shared.lost)(reason);
            }
        }
    }
}
