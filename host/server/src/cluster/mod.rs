//! `serve` past one machine (docs/CLUSTER.md): every node of a cluster reads the same config
//! and keeps what outlives a node on NATS JetStream, never on its own disk.
//!
//! - a session's entries go to the `PICHAMBER_LOG` stream, one subject per session, each
//!   written only after the one before it (JetStream's expected-last-subject-sequence), so a
//!   node that lost a session cannot add to it behind its new owner ([`outlet`]);
//! - a user's events go to `PICHAMBER_EVENTS`, one subject per user; a stream's sequence
//!   number is the SSE event id on every node ([`events`]);
//! - the `pichamber_sessions` bucket says which sessions exist and whose they are; the
//!   `pichamber_owners` bucket holds each running session's lease: the node that runs it,
//!   created if absent, refreshed by revision, gone when the node stops refreshing it;
//! - a request for a session another node runs is carried to it over NATS request/reply
//!   ([`forward`]); one for a session nobody runs claims it and rebuilds it from its log.

pub mod events;
pub mod forward;
pub mod outlet;

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use async_nats::jetstream::{self, kv, stream};
use futures::StreamExt;
use serde_json::Value;

pub use outlet::Outlet;

const LOG_STREAM: &str = "PICHAMBER_LOG";
const EVENT_STREAM: &str = "PICHAMBER_EVENTS";
const OWNERS: &str = "pichamber_owners";
const REGISTRY: &str = "pichamber_sessions";
const APPROVALS: &str = "pichamber_approvals";
/// How long a user's events stay on the stream for clients that resume.
const EVENTS_KEPT: Duration = Duration::from_secs(3600);

/// `[cluster]` of serve's config.
#[derive(Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The NATS server (JetStream on), e.g. "nats://127.0.0.1:4222".
    pub nats: String,
    /// This node's name, unique in the cluster: letters, digits, `-` and `_`.
    pub node: String,
    /// How long a session stays with a node that stopped answering [default: 10s]. Every
    /// node must say the same (the first node to start sets it on NATS).
    #[serde(default)]
    pub lease: Option<String>,
}

impl ClusterConfig {
    pub fn lease(&self) -> Result<Duration> {
        let lease = match &self.lease {
            None => Duration::from_secs(10),
            Some(text) => humantime::parse_duration(text)
                .with_context(|| format!("[cluster] lease {text:?} is not a duration (\"10s\")"))?,
        };
        if !(Duration::from_secs(1)..=Duration::from_secs(300)).contains(&lease) {
            bail!("[cluster] lease must be between 1s and 5m");
        }
        Ok(lease)
    }

    pub fn check(&self) -> Result<()> {
        let node_ok = !self.node.is_empty()
            && self.node.len() <= 32
            && self
                .node
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !node_ok {
            bail!(
                "[cluster] node {:?} must be 1-32 letters, digits, '-' or '_'",
                self.node
            );
        }
        self.lease().map(drop)
    }
}

/// This node's connection to the cluster's store.
pub struct Cluster {
    pub node: String,
    pub lease: Duration,
    client: async_nats::Client,
    js: jetstream::Context,
    owners: kv::Store,
    registry: kv::Store,
    /// Each user's "always" approvals (their approvals.json), shared by every node.
    approvals: kv::Store,
    /// The server's router, for requests other nodes carry here.
    router: OnceLock<axum::Router>,
    /// One placement at a time per session on this node: two requests for a session nobody
    /// runs must not both start it here (requests for other sessions do not wait).
    placing: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// The session id as it names a subject or a key: the server's ids are UUIDs, anything else
/// is refused here rather than trusted into a subject.
pub fn checked_id(id: &str) -> Option<&str> {
    (!id.is_empty() && id.len() <= 64 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
        .then_some(id)
}

/// A user as a subject token: a digest of the name (names may hold any character).
pub fn user_key(name: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(name.as_bytes())
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn registry_key(user: &str, id: &str) -> String {
    format!("{}.{id}", user_key(user))
}

impl Cluster {
    /// Connects and makes sure the streams and buckets exist.
    pub async fn connect(config: &ClusterConfig) -> Result<Arc<Self>> {
        config.check()?;
        let lease = config.lease()?;
        let client = async_nats::ConnectOptions::new()
            .name(format!("pichamber node {}", config.node))
            .connection_timeout(Duration::from_secs(5))
            .connect(config.nats.as_str())
            .await
            .with_context(|| {
                format!(
                    "cannot reach NATS at {}: start nats-server with JetStream on (`nats-server -js`), or fix [cluster] nats",
                    without_credentials(&config.nats)
                )
            })?;
        let js = jetstream::new(client.clone());
        let setup =
            "cannot set up pichamber's streams on NATS (is JetStream on? `nats-server -js`)";
        js.get_or_create_stream(stream::Config {
            name: LOG_STREAM.into(),
            subjects: vec!["pichamber.log.*".into()],
            storage: stream::StorageType::File,
            ..Default::default()
        })
        .await
        .context(setup)?;
        js.get_or_create_stream(stream::Config {
            name: EVENT_STREAM.into(),
            subjects: vec!["pichamber.events.*".into()],
            storage: stream::StorageType::File,
            max_age: EVENTS_KEPT,
            max_bytes: 1 << 30,
            ..Default::default()
        })
        .await
        .context(setup)?;
        let owners = bucket(
            &js,
            kv::Config {
                bucket: OWNERS.into(),
                history: 1,
                max_age: lease,
                storage: stream::StorageType::File,
                ..Default::default()
            },
        )
        .await
        .context(setup)?;
        let registry = bucket(
            &js,
            kv::Config {
                bucket: REGISTRY.into(),
                history: 1,
                storage: stream::StorageType::File,
                ..Default::default()
            },
        )
        .await
        .context(setup)?;
        let approvals = bucket(
            &js,
            kv::Config {
                bucket: APPROVALS.into(),
                history: 1,
                storage: stream::StorageType::File,
                ..Default::default()
            },
        )
        .await
        .context(setup)?;
        Ok(Arc::new(Self {
            node: config.node.clone(),
            lease,
            client,
            js,
            owners,
            registry,
            approvals,
            router: OnceLock::new(),
            placing: std::sync::Mutex::new(HashMap::new()),
        }))
    }

    /// Waits until no other request on this node is placing session `id`; placing it is
    /// this request's until the guard drops.
    pub async fn placing(&self, id: &str) -> tokio::sync::OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.placing.lock().unwrap();
            if locks.len() > 4096 {
                locks.retain(|_, lock| Arc::strong_count(lock) > 1);
            }
            locks.entry(id.to_owned()).or_default().clone()
        };
        lock.lock_owned().await
    }

    /// Whether NATS is reachable now (when it is not, nothing is written or served as
    /// current).
    pub fn connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    // ----- the registry: which sessions exist and whose they are -----

    /// Records a session of `user`: `{extensions, createdAt}`.
    pub async fn register(&self, user: &str, id: &str, meta: &Value) -> Result<()> {
        self.registry
            .put(registry_key(user, id), meta.to_string().into())
            .await
            .context("cannot record the session on NATS")?;
        Ok(())
    }

    /// The session's record, if `user` has it.
    pub async fn registered(&self, user: &str, id: &str) -> Result<Option<Value>> {
        let Some(id) = checked_id(id) else {
            return Ok(None);
        };
        let value = self
            .registry
            .get(registry_key(user, id))
            .await
            .context("cannot read the session's record on NATS")?;
        Ok(value.and_then(|v| serde_json::from_slice(&v).ok()))
    }

    /// Every session `user` has, with its record.
    pub async fn sessions_of(&self, user: &str) -> Result<Vec<(String, Value)>> {
        let prefix = format!("{}.", user_key(user));
        let mut keys = self
            .registry
            .keys()
            .await
            .context("cannot list sessions on NATS")?;
        let mut ids = Vec::new();
        while let Some(key) = keys.next().await {
            let key = key.context("cannot list sessions on NATS")?;
            if let Some(id) = key.strip_prefix(&prefix) {
                ids.push(id.to_owned());
            }
        }
        let mut out = Vec::new();
        for id in ids {
            if let Some(meta) = self.registered(user, &id).await? {
                out.push((id, meta));
            }
        }
        Ok(out)
    }

    /// Forgets a closed session (its log stays on the stream).
    pub async fn unregister(&self, user: &str, id: &str) -> Result<()> {
        self.registry
            .delete(registry_key(user, id))
            .await
            .context("cannot remove the session's record on NATS")?;
        let _ = self.owners.delete(id).await;
        Ok(())
    }

    // ----- "always" approvals, per user -----

    /// The user's approvals as the cluster holds them (JSON), if any were given.
    pub async fn approvals_of(&self, user: &str) -> Result<Option<axum::body::Bytes>> {
        self.approvals
            .get(user_key(user))
            .await
            .context("cannot read the user's approvals on NATS")
    }

    /// Stores the user's approvals (JSON) for every node.
    pub async fn share_approvals(&self, user: &str, json: String) -> Result<()> {
        self.approvals
            .put(user_key(user), json.into())
            .await
            .context("cannot store the user's approvals on NATS")?;
        Ok(())
    }

    /// Calls `changed` with (user key, JSON) whenever a node stores a user's approvals.
    pub async fn watch_approvals(&self, changed: impl Fn(&str, &[u8])) -> Result<()> {
        let mut updates = self
            .approvals
            .watch_all()
            .await
            .context("cannot watch approvals on NATS")?;
        while let Some(update) = updates.next().await {
            match update {
                Ok(entry) if entry.operation == kv::Operation::Put => {
                    changed(&entry.key, &entry.value)
                }
                Ok(_) => {}
                Err(e) => tracing::debug!("approvals watch: {e}"),
            }
        }
        Ok(())
    }

    // ----- leases: which node runs a session -----

    /// The node running the session and its lease's revision.
    pub async fn owner(&self, id: &str) -> Result<Option<(String, u64)>> {
        let entry = self
            .owners
            .entry(id)
            .await
            .context("cannot read the session's lease on NATS")?;
        Ok(entry
            .filter(|e| e.operation == kv::Operation::Put)
            .map(|e| (String::from_utf8_lossy(&e.value).into_owned(), e.revision)))
    }

    /// Takes the lease of a session nobody runs: its revision, or `None` when another node
    /// took it first.
    pub async fn claim(&self, id: &str) -> Result<Option<u64>> {
        match self.owners.create(id, self.node.clone().into()).await {
            Ok(revision) => Ok(Some(revision)),
            Err(e) if e.kind() == kv::CreateErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(e).context("cannot claim the session's lease on NATS"),
        }
    }

    /// Renews a lease this node holds at `revision`: the new revision, or an error when it
    /// is no longer this node's (it lapsed and another node took it) or NATS is unreachable.
    pub async fn refresh(&self, id: &str, revision: u64) -> Result<u64> {
        self.owners
            .update(id, self.node.clone().into(), revision)
            .await
            .map_err(|e| anyhow::anyhow!("the lease could not be renewed: {}", innermost(&e)))
    }

    // ----- the log -----

    /// The session's records as JSON lines, and the sequence of the last one (0: none).
    pub async fn read_log(&self, id: &str) -> Result<(Vec<u8>, u64)> {
        let subject = outlet::log_subject(id);
        let context = "cannot read the session's log on NATS";
        let stream = self.js.get_stream(LOG_STREAM).await.context(context)?;
        let last = match stream.get_last_raw_message_by_subject(&subject).await {
            Ok(message) => message.sequence,
            Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => {
                return Ok((Vec::new(), 0));
            }
            Err(e) => return Err(e).context(context),
        };
        let consumer = stream
            .create_consumer(jetstream::consumer::pull::OrderedConfig {
                filter_subject: subject,
                ..Default::default()
            })
            .await
            .context(context)?;
        let mut messages = consumer.messages().await.context(context)?;
        let mut records = Vec::new();
        while let Some(message) = messages.next().await {
            let message = message.context(context)?;
            records.extend_from_slice(&message.payload);
            records.push(b'\n');
            let sequence = message
                .info()
                .map_err(|e| anyhow::anyhow!("{e}"))?
                .stream_sequence;
            if sequence >= last {
                break;
            }
        }
        Ok((records, last))
    }

    /// The outlet a session of `user` writes its entries and events through; `last` is the
    /// sequence of its log's last record (0 for a new session). `lost` hears why it failed.
    pub fn outlet(
        &self,
        id: &str,
        user: &str,
        last: u64,
        lost: Box<dyn Fn(String) + Send + Sync>,
    ) -> Outlet {
        Outlet::start(self.js.clone(), id, &user_key(user), last, self.lease, lost)
    }

    /// The server's router, for requests carried here from other nodes; also starts
    /// answering them.
    pub fn serve_forwarded(self: &Arc<Self>, router: axum::Router) -> Result<()> {
        let _ = self.router.set(router);
        let cluster = self.clone();
        tokio::spawn(async move {
            if let Err(e) = forward::answer(cluster).await {
                tracing::error!("forwarded requests are not answered: {e:#}");
            }
        });
        Ok(())
    }

    fn router(&self) -> Option<axum::Router> {
        self.router.get().cloned()
    }
}

/// The innermost cause of an error (the NATS client's errors repeat their sources in their
/// own messages).
fn innermost(error: &(dyn std::error::Error + 'static)) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

/// A NATS URL as it may be shown: `user:password@` left out.
fn without_credentials(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            format!("{}{}", &url[..scheme + 3], &url[at + 1..])
        }
        (None, Some(at)) => url[at + 1..].to_owned(),
        _ => url.to_owned(),
    }
}

/// Opens a bucket, creating it when it does not exist yet.
async fn bucket(js: &jetstream::Context, config: kv::Config) -> Result<kv::Store> {
    match js.get_key_value(&config.bucket).await {
        Ok(store) => Ok(store),
        Err(_) => Ok(js.create_key_value(config).await?),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_nats_url_is_shown_without_its_credentials() {
        assert_eq!(
            without_credentials("nats://ada:secret@10.0.0.1:4222"),
            "nats://10.0.0.1:4222"
        );
        assert_eq!(without_credentials("tok@host:4222"), "host:4222");
        assert_eq!(
            without_credentials("nats://127.0.0.1:4222"),
            "nats://127.0.0.1:4222"
        );
    }

    #[test]
    fn only_a_plain_id_names_a_subject_or_a_key() {
        assert_eq!(checked_id("01a23c58-58d6-7a2b"), Some("01a23c58-58d6-7a2b"));
        for bad in ["", "a.b", "a*", ">", "a b", &"x".repeat(65)] {
            assert_eq!(checked_id(bad), None, "{bad:?}");
        }
    }
}
