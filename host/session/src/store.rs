//! The session store: a conversation kept as pi 0.73.1's session file (JSONL, format v3, see
//! pi-coding-agent's docs/session-format.md), so pi and pichamber can open each other's
//! sessions. Entries stay `serde_json::Value` in pi's exact shapes and key order (extensions
//! receive them as JSON), but only this module builds them.
//!
//! The file is a header line followed by entries that form a tree through `id`/`parentId`; the
//! leaf is the entry the next append hangs under. Appends only ever add a line.
//!
//! Differences from pi (core/session-manager.js), all deliberate:
//! - pi holds a new session in memory until the first assistant message and then writes it;
//!   we write every entry (and the header on creation) before `append` returns, because an
//!   entry must be durable before it is reported. See [`SyncPolicy`].
//! - A last line cut off mid-write (no newline, not JSON) is removed from the file and reported;
//!   pi skips it in memory and appends after it, which glues the next entry onto the torn text.
//! - A non-empty file whose first entry is not a session header is an error; pi silently
//!   replaces such a file with a fresh session.
//! - Rewrites (migration, initialising an empty file) go through a temporary file and a rename;
//!   pi overwrites in place.
//! - Reading a file never panics or loops: malformed lines are skipped (as pi does) and listed
//!   in the [`LoadReport`]; parent cycles end a walk.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, anyhow, bail};
use serde::Serialize;
use serde_json::{Map, Value, json};

/// The format version this store writes (pi's `CURRENT_SESSION_VERSION`).
pub const CURRENT_SESSION_VERSION: u64 = 3;

/// How hard an append works to make an entry durable before it returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncPolicy {
    /// `File::sync_data` after every entry, and the directory after creating or replacing a
    /// file: an entry that was reported as appended survives a crash or a power loss.
    #[default]
    EveryEntry,
    /// Write only and leave flushing to the OS: for tests and benchmarks.
    None,
}

/// What opening a file found and repaired.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// A last line cut off mid-write that was truncated away.
    pub torn_line: Option<TornLine>,
    /// The last line was complete but had no newline; one was added.
    pub added_final_newline: bool,
    /// Lines that were not entries and were ignored (pi skips malformed lines too).
    pub skipped_lines: Vec<SkippedLine>,
    /// The file had this older format version and was migrated to v3 (and rewritten).
    pub migrated_from: Option<u64>,
    /// The file held no entries at all (empty, or only a torn line) and was given a fresh
    /// session header, as pi does.
    pub initialized: bool,
}

/// A torn last line: its 1-based line number and how many bytes were dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornLine {
    pub line: usize,
    pub bytes: u64,
}

/// A line that was ignored: its 1-based number and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedLine {
    pub line: usize,
    pub reason: String,
}

impl LoadReport {
    /// True when the file was read as it was, with nothing skipped or changed.
    pub fn is_clean(&self) -> bool {
        *self == Self::default()
    }
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(t) = &self.torn_line {
            parts.push(format!(
                "removed torn last line {} ({} bytes, cut off mid-write)",
                t.line, t.bytes
            ));
        }
        if self.added_final_newline {
            parts.push("added the missing final newline".to_owned());
        }
        for s in &self.skipped_lines {
            parts.push(format!("skipped line {}: {}", s.line, s.reason));
        }
        if let Some(v) = self.migrated_from {
            parts.push(format!(
                "migrated from version {v} to {CURRENT_SESSION_VERSION}"
            ));
        }
        if self.initialized {
            parts.push("file held no session; wrote a fresh header".to_owned());
        }
        if parts.is_empty() {
            f.write_str("clean")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

/// The model a context was last using (`{provider, modelId}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ModelRef {
    pub provider: String,
    #[serde(rename = "modelId")]
    pub model_id: String,
}

/// What `buildSessionContext` gives the agent: the messages for the LLM along the current
/// branch, and the thinking level and model in effect at the leaf.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionContext {
    pub messages: Vec<Value>,
    pub thinking_level: String,
    pub model: Option<ModelRef>,
}

impl SessionContext {
    fn empty() -> Self {
        Self {
            messages: Vec::new(),
            thinking_level: "off".to_owned(),
            model: None,
        }
    }

    /// pi's JSON shape: `{messages, thinkingLevel, model}`.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The whole session as a tree (pi's `getTree`), flat: nodes refer to children by index, so a
/// long conversation (one chain thousands deep) costs no recursion.
#[derive(Debug, Clone)]
pub struct SessionTree<'a> {
    pub nodes: Vec<TreeNode<'a>>,
    /// Entries without a parent in the file (one in a well-formed session), in file order.
    pub roots: Vec<usize>,
}

#[derive(Debug, Clone)]
pub struct TreeNode<'a> {
    pub entry: &'a Value,
    /// Oldest first, by entry timestamp.
    pub children: Vec<usize>,
    pub label: Option<&'a str>,
    pub label_timestamp: Option<&'a Value>,
}

impl SessionTree<'_> {
    /// pi's nested shape: `[{entry, children: [...], label?, labelTimestamp?}]`. Built without
    /// recursion, but the result nests as deep as the longest chain; serialising or dropping
    /// a very deep one recurses, so prefer the flat form for big sessions.
    pub fn to_json(&self) -> Value {
        let mut preorder = Vec::with_capacity(self.nodes.len());
        let mut stack: Vec<usize> = self.roots.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            preorder.push(i);
            stack.extend(self.nodes[i].children.iter().rev());
        }
        let mut built: Vec<Option<Value>> = vec![None; self.nodes.len()];
        for &i in preorder.iter().rev() {
            let node = &self.nodes[i];
            let children: Vec<Value> = node
                .children
                .iter()
                .map(|&c| built[c].take().unwrap_or(Value::Null))
                .collect();
            let mut obj = Map::new();
            obj.insert("entry".into(), node.entry.clone());
            obj.insert("children".into(), Value::Array(children));
            if let Some(label) = node.label {
                obj.insert("label".into(), Value::String(label.to_owned()));
            }
            if let Some(ts) = node.label_timestamp {
                obj.insert("labelTimestamp".into(), ts.clone());
            }
            built[i] = Some(Value::Object(obj));
        }
        Value::Array(
            self.roots
                .iter()
                .map(|&r| built[r].take().unwrap_or(Value::Null))
                .collect(),
        )
    }
}

/// One session file in a listing (pi's `SessionInfo`, used by `/resume`).
#[derive(Debug, Clone, PartialEq)]
pub struct SessionInfo {
    pub path: PathBuf,
    pub id: String,
    pub cwd: String,
    /// From the latest `session_info` entry in the file; an empty name clears it.
    pub name: Option<String>,
    pub parent_session_path: Option<String>,
    /// The header timestamp, in ms since the epoch.
    pub created_ms: Option<i64>,
    /// Last user/assistant activity, else the header time, else the file's mtime (ms).
    pub modified_ms: i64,
    pub message_count: usize,
    /// The first user message's text, or `(no messages)`.
    pub first_message: String,
    pub all_messages_text: String,
}

/// pi's default session directory for `cwd`: `<agent dir>/sessions/--<cwd, / \ : as ->--`.
/// Pure: the directory is created when a session is created in it.
pub fn default_session_dir(agent_dir: &Path, cwd: &str) -> PathBuf {
    let trimmed = cwd
        .strip_prefix('/')
        .or_else(|| cwd.strip_prefix('\\'))
        .unwrap_or(cwd);
    let safe: String = trimmed
        .chars()
        .map(|c| {
            if matches!(c, '/' | '\\' | ':') {
                '-'
            } else {
                c
            }
        })
        .collect();
    agent_dir.join("sessions").join(format!("--{safe}--"))
}

struct Backing {
    path: PathBuf,
    file: File,
    len: u64,
    policy: SyncPolicy,
    /// Set when a failed write or sync left the file in a state we cannot vouch for.
    poisoned: Option<String>,
}

impl Backing {
    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        if let Some(reason) = &self.poisoned {
            bail!(
                "session file {} is not writable after an earlier failure: {reason}",
                self.path.display()
            );
        }
        if let Err(e) = self.file.write_all(bytes) {
            // Take back a partial line so the next append starts on a fresh line.
            if let Err(e2) = self.file.set_len(self.len) {
                self.poisoned = Some(format!("write failed ({e}) and could not be undone ({e2})"));
            }
            return Err(e).with_context(|| format!("cannot append to {}", self.path.display()));
        }
        if self.policy == SyncPolicy::EveryEntry
            && let Err(e) = self.file.sync_data()
        {
            // After a failed fsync the kernel may have dropped the pages: nothing is known.
            self.poisoned = Some(format!("fsync failed: {e}"));
            return Err(e).with_context(|| format!("cannot fsync {}", self.path.display()));
        }
        self.len += bytes.len() as u64;
        Ok(())
    }
}

/// Where a session's entries are kept when it has no file: a log elsewhere (serve's cluster
/// mode keeps it on NATS JetStream). `append` gets each record as its JSON text, the header
/// first; an error refuses the entry, as a failed write to a file does.
pub trait Journal: Send {
    fn append(&mut self, line: &str) -> Result<()>;
}

struct LabelState {
    target: String,
    label: String,
    timestamp: Option<Value>,
}

/// One session: its header, its entries in file order, and the current leaf.
pub struct SessionStore {
    header: Value,
    entries: Vec<Value>,
    by_id: HashMap<String, usize>,
    /// Current labels in the insertion order of pi's `labelsById` map (forks copy them in it).
    labels: Vec<LabelState>,
    leaf: Option<String>,
    cwd: String,
    session_dir: Option<PathBuf>,
    backing: Option<Backing>,
    journal: Option<Box<dyn Journal>>,
}

impl std::fmt::Debug for SessionStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionStore")
            .field("id", &self.get_session_id())
            .field("file", &self.get_session_file())
            .field("entries", &self.entries.len())
            .field("leaf", &self.leaf)
            .finish()
    }
}

impl SessionStore {
    /// A new session file `<timestamp>_<uuidv7>.jsonl` in `dir` (created if missing), with
    /// its header already on disk. pi creates the file only with the first assistant message;
    /// we write at once because every append must be durable before it is reported.
    pub fn create(dir: impl AsRef<Path>, cwd: &str, policy: SyncPolicy) -> Result<Self> {
        Self::create_with_parent(dir, cwd, None, policy)
    }

    /// Like [`SessionStore::create`], recording `parentSession` in the header (pi's
    /// `newSession({ parentSession })`).
    pub fn create_with_parent(
        dir: impl AsRef<Path>,
        cwd: &str,
        parent_session: Option<&str>,
        policy: SyncPolicy,
    ) -> Result<Self> {
        let header = new_header(cwd, parent_session);
        Self::write_new(dir.as_ref(), header, Vec::new(), cwd, policy)
    }

    /// A session kept only in memory (pi's `--no-session`).
    pub fn in_memory(cwd: &str) -> Self {
        Self::assemble(
            new_header(cwd, None),
            Vec::new(),
            cwd.to_owned(),
            None,
            None,
        )
    }

    /// A new session kept in the journal `open` makes for its id, its header written there
    /// first.
    pub fn journaled(cwd: &str, open: impl FnOnce(&str) -> Box<dyn Journal>) -> Result<Self> {
        let header = new_header(cwd, None);
        let mut journal = open(header["id"].as_str().unwrap_or_default());
        journal.append(&header.to_string())?;
        let mut store = Self::assemble(header, Vec::new(), cwd.to_owned(), None, None);
        store.journal = Some(journal);
        Ok(store)
    }

    /// The entries of a pi session file's text (older formats migrated): what a session moved
    /// in from another store holds. Refused when the text does not begin with a header.
    pub fn entries_of(bytes: &[u8]) -> Result<Vec<Value>> {
        let mut records = parse_session_bytes(bytes).records;
        match records.first() {
            Some((_, header)) => check_header(header)?,
            None => bail!("no session: the text holds no complete JSON line"),
        }
        let version = records[0].1["version"].as_f64().unwrap_or(1.0);
        if version < CURRENT_SESSION_VERSION as f64 {
            migrate(&mut records, version);
        }
        Ok(split_records(records).1)
    }

    /// Writes `entries` (as [`SessionStore::entries_of`] gives them) into this new, empty
    /// session, each as it is: a session moved in from another store.
    pub fn import_entries(&mut self, entries: Vec<Value>) -> Result<()> {
        if !self.entries.is_empty() {
            bail!("entries are imported only into a new session");
        }
        for entry in entries {
            if entry_id(&entry).is_some_and(|id| self.by_id.contains_key(&id)) {
                bail!("the session holds two entries with the id {}", entry["id"]);
            }
            self.append_entry(entry)?;
        }
        Ok(())
    }

    /// The session as pi's JSONL file holds it: the header, then each entry, a line each.
    pub fn to_jsonl(&self) -> String {
        let mut out = String::new();
        for record in std::iter::once(&self.header).chain(&self.entries) {
            out.push_str(&record.to_string());
            out.push('\n');
        }
        out
    }

    /// A session read back from its journal's records (JSON lines, the header first);
    /// appends go on to `journal`. A torn or foreign record is skipped, as in a file.
    pub fn from_journal(records: &[u8], journal: Box<dyn Journal>) -> Result<Self> {
        let records = parse_session_bytes(records).records;
        if records.first().is_none_or(|(_, h)| h["type"] != "session") {
            bail!("the session's log does not begin with a session header");
        }
        let (header, entries, cwd) = split_records(records);
        let mut store = Self::assemble(header, entries, cwd, None, None);
        store.journal = Some(journal);
        Ok(store)
    }

    /// Opens an existing session file: migrates v1/v2 files to v3 (rewriting them, as pi does),
    /// repairs a torn last line, and puts the leaf on the last entry.
    pub fn open(path: impl AsRef<Path>, policy: SyncPolicy) -> Result<(Self, LoadReport)> {
        let path = std::path::absolute(path.as_ref())
            .with_context(|| format!("bad session path {}", path.as_ref().display()))?;
        let bytes = fs::read(&path)
            .with_context(|| format!("cannot read session file {}", path.display()))?;
        let parsed = parse_session_bytes(&bytes);
        let mut report = LoadReport {
            torn_line: parsed.torn.clone(),
            skipped_lines: parsed.skipped,
            ..LoadReport::default()
        };
        let mut records = parsed.records;
        let dir = path.parent().map(Path::to_path_buf);

        if records.is_empty() && report.skipped_lines.is_empty() && !is_torn_header(&bytes) {
            // No complete line, and what is there is not the start of a session header (pi
            // writes `{"type":"session",...` first): a file of something else, such as a
            // one-line note without a final newline. It is left as it is.
            bail!(
                "{} is not a pi session file: it holds no complete line and does not begin with a session header; nothing was changed",
                path.display()
            );
        }
        if records.is_empty() && report.skipped_lines.is_empty() {
            // Nothing to keep: start a fresh session in this very file, as pi does.
            let cwd = current_dir_string();
            let header = new_header(&cwd, None);
            let backing = write_file_atomically(&path, std::slice::from_ref(&header), policy)?;
            report.initialized = true;
            return Ok((
                Self::assemble(header, Vec::new(), cwd, dir, Some(backing)),
                report,
            ));
        }
        let version = header_version(&path, &records)?;
        let backing = if version < CURRENT_SESSION_VERSION as f64 {
            migrate(&mut records, version);
            report.migrated_from = Some(version as u64);
            let values: Vec<Value> = records.iter().map(|(_, v)| v.clone()).collect();
            write_file_atomically(&path, &values, policy)?
        } else {
            let mut file = OpenOptions::new()
                .append(true)
                .open(&path)
                .with_context(|| format!("cannot open {} for appending", path.display()))?;
            let mut len = bytes.len() as u64;
            if parsed.torn.is_some() {
                file.set_len(parsed.keep_len)
                    .with_context(|| format!("cannot truncate torn line in {}", path.display()))?;
                len = parsed.keep_len;
            } else if parsed.missing_newline {
                file.write_all(b"\n")
                    .with_context(|| format!("cannot add final newline to {}", path.display()))?;
                len += 1;
                report.added_final_newline = true;
            }
            if (parsed.torn.is_some() || parsed.missing_newline) && policy == SyncPolicy::EveryEntry
            {
                file.sync_data()
                    .with_context(|| format!("cannot fsync {}", path.display()))?;
            }
            Backing {
                path: path.clone(),
                file,
                len,
                policy,
                poisoned: None,
            }
        };

        let mut records = records.into_iter();
        let (_, header) = records.next().expect("checked non-empty");
        let mut entries = Vec::new();
        for (line, record) in records {
            if record["type"] == "session" {
                continue; // a repeated header: pi ignores it too
            }
            if !record.get("id").is_some_and(Value::is_string) {
                report.skipped_lines.push(SkippedLine {
                    line,
                    reason: "entry has no string id".to_owned(),
                });
                continue;
            }
            entries.push(record);
        }
        report.skipped_lines.sort_by_key(|s| s.line);
        let cwd = header["cwd"]
            .as_str()
            .map(str::to_owned)
            .unwrap_or_else(current_dir_string);
        Ok((
            Self::assemble(header, entries, cwd, dir, Some(backing)),
            report,
        ))
    }

    /// Reads a session file without touching it (an export, a viewer): older formats are
    /// migrated in memory, a torn last line is left out; the store is not backed by the file
    /// (appends stay in memory).
    pub fn read_only(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let bytes = fs::read(path)
            .with_context(|| format!("cannot read session file {}", path.display()))?;
        let mut records = parse_session_bytes(&bytes).records;
        let version = header_version(path, &records)?;
        if version < CURRENT_SESSION_VERSION as f64 {
            migrate(&mut records, version);
        }
        let (header, entries, cwd) = split_records(records);
        Ok(Self::assemble(header, entries, cwd, None, None))
    }

    /// pi's `--session <path>`: opens the file if it exists, else starts a new session stored
    /// at exactly that path.
    pub fn open_or_create(
        path: impl AsRef<Path>,
        cwd: &str,
        policy: SyncPolicy,
    ) -> Result<(Self, LoadReport)> {
        let path = path.as_ref();
        if path.exists() {
            return Self::open(path, policy);
        }
        let path = std::path::absolute(path)
            .with_context(|| format!("bad session path {}", path.display()))?;
        let dir = path
            .parent()
            .ok_or_else(|| anyhow!("session path {} has no parent", path.display()))?;
        create_dir_durable(dir, policy)?;
        let header = new_header(cwd, None);
        let backing = write_file_atomically(&path, std::slice::from_ref(&header), policy)?;
        Ok((
            Self::assemble(
                header,
                Vec::new(),
                cwd.to_owned(),
                Some(dir.to_path_buf()),
                Some(backing),
            ),
            LoadReport::default(),
        ))
    }

    /// pi's `forkFrom`: a new session in `dir` for `target_cwd` holding every entry of the
    /// session at `source` (which is only read), with `parentSession` pointing at it.
    pub fn fork_from(
        source: impl AsRef<Path>,
        target_cwd: &str,
        dir: impl AsRef<Path>,
        policy: SyncPolicy,
    ) -> Result<Self> {
        let source = std::path::absolute(source.as_ref())
            .with_context(|| format!("bad session path {}", source.as_ref().display()))?;
        let bytes = fs::read(&source)
            .with_context(|| format!("cannot read session file {}", source.display()))?;
        let mut records = parse_session_bytes(&bytes).records;
        if records.is_empty() || check_header(&records[0].1).is_err() {
            bail!(
                "Cannot fork: source session file is empty or invalid: {}",
                source.display()
            );
        }
        let version = records[0].1.get("version").and_then(Value::as_f64);
        let version = version.unwrap_or(1.0);
        if version < CURRENT_SESSION_VERSION as f64 {
            migrate(&mut records, version);
        }
        let entries: Vec<Value> = records
            .into_iter()
            .map(|(_, v)| v)
            .filter(|v| v["type"] != "session" && v.get("id").is_some_and(Value::is_string))
            .collect();
        let header = new_header(target_cwd, Some(&source.to_string_lossy()));
        Self::write_new(dir.as_ref(), header, entries, target_cwd, policy)
    }

    /// pi's `createBranchedSession(leafId)` (what `/fork` and `/clone` use): a new session in
    /// the same directory holding the path from the root to `leaf_id`, with the labels of
    /// those entries re-applied by fresh label entries at the end, and `parentSession` set to
    /// this file. Unlike pi, this store is left as it was; the new one is returned. An
    /// in-memory store gives an in-memory copy.
    pub fn create_branched_session(&self, leaf_id: &str) -> Result<Self> {
        let path = self.get_branch(Some(leaf_id));
        if path.is_empty() {
            bail!("Entry {leaf_id} not found");
        }
        let mut entries: Vec<Value> = path
            .into_iter()
            .filter(|e| e["type"] != "label")
            .cloned()
            .collect();
        let mut taken: HashSet<String> = entries.iter().filter_map(entry_id).collect();
        let mut parent = entries.last().and_then(entry_id);
        let mut label_entries = Vec::new();
        for label in &self.labels {
            if !taken.contains(&label.target) {
                continue;
            }
            let id = generate_id(|c| taken.contains(c));
            taken.insert(id.clone());
            let mut entry = Map::new();
            entry.insert("type".into(), "label".into());
            entry.insert("id".into(), id.clone().into());
            entry.insert("parentId".into(), parent.map_or(Value::Null, Value::String));
            if let Some(ts) = &label.timestamp {
                entry.insert("timestamp".into(), ts.clone());
            }
            entry.insert("targetId".into(), label.target.clone().into());
            entry.insert("label".into(), label.label.clone().into());
            label_entries.push(Value::Object(entry));
            parent = Some(id);
        }
        entries.extend(label_entries);
        match (&self.backing, &self.session_dir) {
            (Some(backing), Some(dir)) => {
                let header = new_header(&self.cwd, Some(&backing.path.to_string_lossy()));
                Self::write_new(dir, header, entries, &self.cwd, backing.policy)
            }
            _ => Ok(Self::assemble(
                new_header(&self.cwd, None),
                entries,
                self.cwd.clone(),
                self.session_dir.clone(),
                None,
            )),
        }
    }

    fn write_new(
        dir: &Path,
        header: Value,
        entries: Vec<Value>,
        cwd: &str,
        policy: SyncPolicy,
    ) -> Result<Self> {
        create_dir_durable(dir, policy)?;
        let dir = std::path::absolute(dir)
            .with_context(|| format!("bad session directory {}", dir.display()))?;
        let file_timestamp = header["timestamp"]
            .as_str()
            .unwrap_or_default()
            .replace([':', '.'], "-");
        let id = header["id"].as_str().unwrap_or_default();
        let path = dir.join(format!("{file_timestamp}_{id}.jsonl"));
        if path.exists() {
            bail!("session file {} already exists", path.display());
        }
        let mut lines = Vec::with_capacity(entries.len() + 1);
        lines.push(header.clone());
        lines.extend(entries.iter().cloned());
        let backing = write_file_atomically(&path, &lines, policy)?;
        Ok(Self::assemble(
            header,
            entries,
            cwd.to_owned(),
            Some(dir),
            Some(backing),
        ))
    }

    fn assemble(
        header: Value,
        entries: Vec<Value>,
        cwd: String,
        session_dir: Option<PathBuf>,
        backing: Option<Backing>,
    ) -> Self {
        let mut store = Self {
            header,
            entries: Vec::with_capacity(entries.len()),
            by_id: HashMap::new(),
            labels: Vec::new(),
            leaf: None,
            cwd,
            session_dir,
            backing,
            journal: None,
        };
        for entry in entries {
            store.index(entry);
        }
        store
    }

    /// Adds an entry to the in-memory view: the id index, the leaf, and labels (pi's
    /// `_buildIndex` and `_appendEntry` share these rules).
    fn index(&mut self, entry: Value) {
        let Some(id) = entry_id(&entry) else {
            return;
        };
        if entry["type"] == "label"
            && let Some(target) = entry["targetId"].as_str()
        {
            let existing = self.labels.iter().position(|l| l.target == target);
            match entry["label"].as_str().filter(|l| !l.is_empty()) {
                Some(label) => {
                    let timestamp = entry.get("timestamp").cloned();
                    match existing {
                        // A JS Map keeps a key's place when its value changes.
                        Some(i) => {
                            self.labels[i].label = label.to_owned();
                            self.labels[i].timestamp = timestamp;
                        }
                        None => self.labels.push(LabelState {
                            target: target.to_owned(),
                            label: label.to_owned(),
                            timestamp,
                        }),
                    }
                }
                None => {
                    if let Some(i) = existing {
                        self.labels.remove(i);
                    }
                }
            }
        }
        self.by_id.insert(id.clone(), self.entries.len());
        self.leaf = Some(id);
        self.entries.push(entry);
    }

    /// Writes the entry (durably, per the policy) and only then adds it to the session, so a
    /// failed write leaves the session as it was. (pi adds first and writes later.)
    fn append_entry(&mut self, entry: Value) -> Result<Value> {
        if let Some(backing) = &mut self.backing {
            let mut line = serde_json::to_string(&entry).context("cannot serialise entry")?;
            line.push('\n');
            backing.append(line.as_bytes())?;
        }
        if let Some(journal) = &mut self.journal {
            journal.append(&serde_json::to_string(&entry).context("cannot serialise entry")?)?;
        }
        self.index(entry.clone());
        Ok(entry)
    }

    fn new_id(&self) -> String {
        generate_id(|c| self.by_id.contains_key(c))
    }

    /// `type`, `id`, `parentId` (the leaf), `timestamp`: how most entries begin.
    fn entry_base(&self, kind: &str) -> Map<String, Value> {
        let mut entry = Map::new();
        entry.insert("type".into(), kind.into());
        entry.insert("id".into(), self.new_id().into());
        entry.insert("parentId".into(), self.leaf_value());
        entry.insert("timestamp".into(), now_iso().into());
        entry
    }

    fn leaf_value(&self) -> Value {
        self.leaf.clone().map_or(Value::Null, Value::String)
    }

    // ----- writes -----

    /// A message (`AgentMessage` JSON) as a child of the leaf. As in pi, compaction and
    /// branch summaries belong in their own entry kinds, not here.
    pub fn append_message(&mut self, message: Value) -> Result<Value> {
        let mut entry = self.entry_base("message");
        entry.insert("message".into(), message);
        self.append_entry(Value::Object(entry))
    }

    pub fn append_thinking_level_change(&mut self, thinking_level: &str) -> Result<Value> {
        let mut entry = self.entry_base("thinking_level_change");
        entry.insert("thinkingLevel".into(), thinking_level.into());
        self.append_entry(Value::Object(entry))
    }

    pub fn append_model_change(&mut self, provider: &str, model_id: &str) -> Result<Value> {
        let mut entry = self.entry_base("model_change");
        entry.insert("provider".into(), provider.into());
        entry.insert("modelId".into(), model_id.into());
        self.append_entry(Value::Object(entry))
    }

    /// A compaction: context built through it starts with `summary`, then the entries from
    /// `first_kept_entry_id` on.
    pub fn append_compaction(
        &mut self,
        summary: &str,
        first_kept_entry_id: &str,
        tokens_before: u64,
        details: Option<Value>,
        from_hook: Option<bool>,
    ) -> Result<Value> {
        let mut entry = self.entry_base("compaction");
        entry.insert("summary".into(), summary.into());
        entry.insert("firstKeptEntryId".into(), first_kept_entry_id.into());
        entry.insert("tokensBefore".into(), tokens_before.into());
        if let Some(details) = details {
            entry.insert("details".into(), details);
        }
        if let Some(from_hook) = from_hook {
            entry.insert("fromHook".into(), from_hook.into());
        }
        self.append_entry(Value::Object(entry))
    }

    /// A compaction an extension proposed at a boundary (pi 1.6.0): `fromHook`, its usage,
    /// and with no first kept entry one that keeps nothing before it (its own id).
    pub fn append_draft_compaction(
        &mut self,
        summary: &str,
        first_kept_entry_id: Option<&str>,
        tokens_before: u64,
        details: Option<Value>,
        usage: Option<Value>,
    ) -> Result<Value> {
        let mut entry = self.entry_base("compaction");
        let id = entry["id"].clone();
        entry.insert("summary".into(), summary.into());
        entry.insert(
            "firstKeptEntryId".into(),
            first_kept_entry_id.map_or(id, Value::from),
        );
        entry.insert("tokensBefore".into(), tokens_before.into());
        if let Some(details) = details {
            entry.insert("details".into(), details);
        }
        if let Some(usage) = usage {
            entry.insert("usage".into(), usage);
        }
        entry.insert("fromHook".into(), true.into());
        self.append_entry(Value::Object(entry))
    }

    /// Extension state that stays out of the LLM context.
    pub fn append_custom_entry(&mut self, custom_type: &str, data: Option<Value>) -> Result<Value> {
        self.append_owned_custom_entry(custom_type, data, None)
    }

    /// [`Self::append_custom_entry`] with the `owner` the host records beside the data (which
    /// extension wrote it, for entries whose owner matters to the host: see the GUI protocol).
    pub fn append_owned_custom_entry(
        &mut self,
        custom_type: &str,
        data: Option<Value>,
        owner: Option<&str>,
    ) -> Result<Value> {
        let mut entry = Map::new();
        entry.insert("type".into(), "custom".into());
        entry.insert("customType".into(), custom_type.into());
        if let Some(data) = data {
            entry.insert("data".into(), data);
        }
        if let Some(owner) = owner {
            entry.insert("owner".into(), owner.into());
        }
        self.finish_custom(entry)
    }

    /// An extension message that takes part in the LLM context (as a `custom` message).
    pub fn append_custom_message_entry(
        &mut self,
        custom_type: &str,
        content: Value,
        display: bool,
        details: Option<Value>,
    ) -> Result<Value> {
        let mut entry = Map::new();
        entry.insert("type".into(), "custom_message".into());
        // A message sent without a customType has none in pi's entry either.
        if !custom_type.is_empty() {
            entry.insert("customType".into(), custom_type.into());
        }
        entry.insert("content".into(), content);
        entry.insert("display".into(), display.into());
        if let Some(details) = details {
            entry.insert("details".into(), details);
        }
        self.finish_custom(entry)
    }

    /// pi 1.6.0's `context_edit`: from here on the branch's LLM context leaves out the target
    /// entry's messages (`replacement` null) or replaces their content (`{content}`); the
    /// target itself stays as it was. Only user, assistant, tool-result and custom-message
    /// entries on the current branch can be edited (pi's checks and messages).
    pub fn append_context_edit(&mut self, target_id: &str, replacement: &Value) -> Result<Value> {
        let content_ok = |c: &Value| c.is_string() || c.is_array();
        if !replacement.is_null() && !replacement.get("content").is_some_and(content_ok) {
            bail!("Context edit replacement must be null or contain string/array content");
        }
        let Some(target) = self.get_entry(target_id) else {
            bail!("Entry {target_id} not found");
        };
        if !self.get_branch(None).iter().any(|e| e["id"] == target_id) {
            bail!("Entry {target_id} is not on the active branch");
        }
        let role = match target["type"].as_str() {
            Some("custom_message") => "custom",
            Some("message") => target["message"]["role"].as_str().unwrap_or_default(),
            _ => "",
        };
        if !matches!(role, "custom" | "user" | "assistant" | "toolResult") {
            bail!("Entry {target_id} does not contribute editable model content");
        }
        let replacement = match &replacement["content"] {
            Value::String(text) if matches!(role, "assistant" | "toolResult") => {
                json!({ "content": [{ "type": "text", "text": text }] })
            }
            _ => replacement.clone(),
        };
        let mut entry = self.entry_base("context_edit");
        entry.insert("targetId".into(), target_id.into());
        entry.insert("replacement".into(), replacement);
        self.append_entry(Value::Object(entry))
    }

    /// pi writes the tree fields of the two custom kinds after their payload.
    fn finish_custom(&mut self, mut entry: Map<String, Value>) -> Result<Value> {
        entry.insert("id".into(), self.new_id().into());
        entry.insert("parentId".into(), self.leaf_value());
        entry.insert("timestamp".into(), now_iso().into());
        self.append_entry(Value::Object(entry))
    }

    /// Sets (or with `None`/empty, clears) the label of an existing entry.
    pub fn append_label_change(&mut self, target_id: &str, label: Option<&str>) -> Result<Value> {
        if !self.by_id.contains_key(target_id) {
            bail!("Entry {target_id} not found");
        }
        let mut entry = self.entry_base("label");
        entry.insert("targetId".into(), target_id.into());
        if let Some(label) = label {
            entry.insert("label".into(), label.into());
        }
        self.append_entry(Value::Object(entry))
    }

    /// Names the session (trimmed; an empty name clears it).
    pub fn append_session_info(&mut self, name: &str) -> Result<Value> {
        let mut entry = self.entry_base("session_info");
        entry.insert("name".into(), name.trim().into());
        self.append_entry(Value::Object(entry))
    }

    /// Moves the leaf to `entry_id`: the next append starts a new branch there.
    pub fn branch(&mut self, entry_id: &str) -> Result<()> {
        if !self.by_id.contains_key(entry_id) {
            bail!("Entry {entry_id} not found");
        }
        self.leaf = Some(entry_id.to_owned());
        Ok(())
    }

    /// Moves the leaf before the first entry: the next append is a new root.
    pub fn reset_leaf(&mut self) {
        self.leaf = None;
    }

    /// pi's `branchWithSummary`: moves the leaf to `branch_from_id` (`None`: before the first
    /// entry) and appends a `branch_summary` of the path that was left there.
    pub fn branch_with_summary(
        &mut self,
        branch_from_id: Option<&str>,
        summary: &str,
        details: Option<Value>,
        from_hook: Option<bool>,
    ) -> Result<Value> {
        if let Some(id) = branch_from_id
            && !self.by_id.contains_key(id)
        {
            bail!("Entry {id} not found");
        }
        self.leaf = branch_from_id.map(str::to_owned);
        let mut entry = self.entry_base("branch_summary");
        entry.insert("fromId".into(), branch_from_id.unwrap_or("root").into());
        entry.insert("summary".into(), summary.into());
        if let Some(details) = details {
            entry.insert("details".into(), details);
        }
        if let Some(from_hook) = from_hook {
            entry.insert("fromHook".into(), from_hook.into());
        }
        self.append_entry(Value::Object(entry))
    }

    // ----- reads (ctx.sessionManager) -----

    pub fn get_header(&self) -> &Value {
        &self.header
    }

    pub fn get_session_id(&self) -> &str {
        self.header["id"].as_str().unwrap_or_default()
    }

    /// The absolute path of the file; `None` in memory.
    pub fn get_session_file(&self) -> Option<&Path> {
        self.backing.as_ref().map(|b| b.path.as_path())
    }

    /// Where forks of this session go; `None` in memory.
    pub fn get_session_dir(&self) -> Option<&Path> {
        self.session_dir.as_deref()
    }

    pub fn get_cwd(&self) -> &str {
        &self.cwd
    }

    pub fn is_persisted(&self) -> bool {
        self.backing.is_some() || self.journal.is_some()
    }

    /// Every entry in file order (the header excluded).
    pub fn get_entries(&self) -> &[Value] {
        &self.entries
    }

    pub fn get_entry(&self, id: &str) -> Option<&Value> {
        self.by_id.get(id).map(|&i| &self.entries[i])
    }

    pub fn get_leaf_id(&self) -> Option<&str> {
        self.leaf.as_deref()
    }

    pub fn get_leaf_entry(&self) -> Option<&Value> {
        self.leaf.as_deref().and_then(|id| self.get_entry(id))
    }

    pub fn get_label(&self, id: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|l| l.target == id)
            .map(|l| l.label.as_str())
    }

    pub fn get_children(&self, parent_id: &str) -> Vec<&Value> {
        let mut children: Vec<(usize, &Value)> = self
            .by_id
            .values()
            .map(|&i| (i, &self.entries[i]))
            .filter(|(_, e)| e["parentId"].as_str() == Some(parent_id))
            .collect();
        children.sort_by_key(|(i, _)| *i);
        children.into_iter().map(|(_, e)| e).collect()
    }

    /// The name from the latest `session_info` entry in the file (an empty name clears it).
    pub fn get_session_name(&self) -> Option<String> {
        latest_session_name(&self.entries)
    }

    /// The path from the root to `from_id` (default: the leaf), root first; empty if the entry
    /// is unknown or the leaf is reset.
    pub fn get_branch(&self, from_id: Option<&str>) -> Vec<&Value> {
        let Some(start) = from_id.or(self.leaf.as_deref()) else {
            return Vec::new();
        };
        let mut path = Vec::new();
        let mut current = self.get_entry(start);
        // A file with a parent cycle would otherwise loop forever.
        while let Some(entry) = current
            && path.len() < self.entries.len()
        {
            path.push(entry);
            current = entry["parentId"]
                .as_str()
                .filter(|p| !p.is_empty())
                .and_then(|p| self.get_entry(p));
        }
        path.reverse();
        path
    }

    /// pi's `getTree`: every entry under its parent, children oldest first; entries whose
    /// parent is missing are roots. Serving it whole is for sessions of at most
    /// [`MAX_TREE_ENTRIES`] entries.
    pub fn get_tree(&self) -> SessionTree<'_> {
        let mut nodes = Vec::new();
        let mut node_of: HashMap<&str, usize> = HashMap::new();
        for (i, entry) in self.entries.iter().enumerate() {
            let Some(id) = entry["id"].as_str() else {
                continue;
            };
            if self.by_id.get(id) != Some(&i) {
                continue; // a duplicate id: the later entry stands for it
            }
            let label = self.labels.iter().find(|l| l.target == id);
            node_of.insert(id, nodes.len());
            nodes.push(TreeNode {
                entry,
                children: Vec::new(),
                label: label.map(|l| l.label.as_str()),
                label_timestamp: label.and_then(|l| l.timestamp.as_ref()),
            });
        }
        let mut roots = Vec::new();
        for n in 0..nodes.len() {
            let entry = nodes[n].entry;
            let parent = entry["parentId"]
                .as_str()
                .filter(|p| Some(*p) != entry["id"].as_str());
            match parent.map(|p| node_of.get(p)) {
                Some(Some(&p)) => nodes[p].children.push(n),
                _ => roots.push(n),
            }
        }
        for n in 0..nodes.len() {
            let mut children = std::mem::take(&mut nodes[n].children);
            children.sort_by_key(|&c| iso_ms(&nodes[c].entry["timestamp"]).unwrap_or(i64::MIN));
            nodes[n].children = children;
        }
        SessionTree { nodes, roots }
    }

    /// pi's `buildSessionContext`: the LLM messages along the path to the leaf (see
    /// [`Self::build_session_projection`]). Model and thinking level are the last ones set on
    /// the path (an assistant message sets the model too).
    pub fn build_session_context(&self) -> SessionContext {
        if self.leaf.is_none() {
            return SessionContext::empty();
        }
        let mut context = SessionContext::empty();
        for entry in self.get_branch(None) {
            match entry["type"].as_str() {
                Some("thinking_level_change") => {
                    if let Some(level) = entry["thinkingLevel"].as_str() {
                        context.thinking_level = level.to_owned();
                    }
                }
                Some("model_change") => {
                    if let Some(model) = model_ref(&entry["provider"], &entry["modelId"]) {
                        context.model = Some(model);
                    }
                }
                Some("message") if entry["message"]["role"] == "assistant" => {
                    let message = &entry["message"];
                    if let Some(model) = model_ref(&message["provider"], &message["model"]) {
                        context.model = Some(model);
                    }
                }
                _ => {}
            }
        }
        context.messages = self
            .build_session_projection()
            .into_iter()
            .flat_map(|(_, messages)| messages)
            .collect();
        context
    }

    /// pi's `buildSessionProjection`: the entries the LLM context is built from, each with the
    /// messages it contributes. The latest compaction on the path replaces everything before
    /// its `firstKeptEntryId` with a `compactionSummary` message; `custom_message` entries
    /// become `custom` messages and `branch_summary` entries `branchSummary` messages; the
    /// latest `context_edit` of an entry (pi 1.6.0) leaves its messages out or replaces their
    /// content.
    pub fn build_session_projection(&self) -> Vec<(&Value, Vec<Value>)> {
        if self.leaf.is_none() {
            return Vec::new();
        }
        let path = self.get_branch(None);
        let compaction = path.iter().rposition(|e| e["type"] == "compaction");
        let mut entries: Vec<(&Value, Vec<Value>)> = Vec::with_capacity(path.len());
        match compaction {
            Some(c) => {
                let entry = path[c];
                let mut summary = Map::new();
                summary.insert("role".into(), "compactionSummary".into());
                copy_fields(&mut summary, entry, &["summary", "tokensBefore"]);
                summary.insert("timestamp".into(), js_time(&entry["timestamp"]));
                entries.push((entry, vec![Value::Object(summary)]));
                let first_kept = &entry["firstKeptEntryId"];
                let kept_from = path[..c]
                    .iter()
                    .position(|e| !first_kept.is_null() && e["id"] == *first_kept);
                if let Some(k) = kept_from {
                    entries.extend(path[k..c].iter().map(|e| (*e, context_messages(e))));
                }
                entries.extend(path[c + 1..].iter().map(|e| (*e, context_messages(e))));
            }
            None => entries.extend(path.iter().map(|e| (*e, context_messages(e)))),
        }
        let mut edits: HashMap<&str, &Value> = HashMap::new();
        for (entry, _) in &entries {
            if entry["type"] == "context_edit"
                && let Some(target) = entry["targetId"].as_str()
            {
                edits.insert(target, &entry["replacement"]);
            }
        }
        if !edits.is_empty() {
            for (entry, messages) in &mut entries {
                let Some(replacement) = entry["id"].as_str().and_then(|id| edits.get(id)) else {
                    continue;
                };
                match replacement.get("content") {
                    None => messages.clear(),
                    Some(content) => {
                        for message in messages.iter_mut() {
                            let role = message["role"].as_str().unwrap_or_default();
                            if !matches!(role, "user" | "assistant" | "toolResult" | "custom") {
                                continue;
                            }
                            let content = match content {
                                Value::String(text)
                                    if matches!(role, "assistant" | "toolResult") =>
                                {
                                    json!([{ "type": "text", "text": text }])
                                }
                                other => other.clone(),
                            };
                            message["content"] = content;
                        }
                    }
                }
            }
        }
        entries
    }

    /// The branch to the leaf in a session of its own, kept in memory: what a preview may
    /// append to without touching this one.
    pub fn scratch_copy(&self) -> Self {
        let branch = self.get_branch(None).into_iter().cloned().collect();
        Self::assemble(self.header.clone(), branch, self.cwd.clone(), None, None)
    }
}

/// The messages one entry contributes to the LLM context (pi's messages.js builders).
fn context_messages(entry: &Value) -> Vec<Value> {
    let mut messages = Vec::new();
    push_context_message(&mut messages, entry);
    messages
}

/// How one entry on the path contributes to the LLM context (pi's messages.js builders).
fn push_context_message(messages: &mut Vec<Value>, entry: &Value) {
    match entry["type"].as_str() {
        Some("message") => messages.push(entry.get("message").cloned().unwrap_or(Value::Null)),
        Some("custom_message") => {
            let mut message = Map::new();
            message.insert("role".into(), "custom".into());
            copy_fields(
                &mut message,
                entry,
                &["customType", "content", "display", "details"],
            );
            message.insert("timestamp".into(), js_time(&entry["timestamp"]));
            messages.push(Value::Object(message));
        }
        Some("branch_summary") if js_truthy(&entry["summary"]) => {
            let mut message = Map::new();
            message.insert("role".into(), "branchSummary".into());
            copy_fields(&mut message, entry, &["summary", "fromId"]);
            message.insert("timestamp".into(), js_time(&entry["timestamp"]));
            messages.push(Value::Object(message));
        }
        _ => {}
    }
}

/// Copies the fields `from` has; a missing one stays missing, as `undefined` does in JSON.
fn copy_fields(to: &mut Map<String, Value>, from: &Value, keys: &[&str]) {
    for &key in keys {
        if let Some(v) = from.get(key) {
            to.insert(key.into(), v.clone());
        }
    }
}

fn model_ref(provider: &Value, model_id: &Value) -> Option<ModelRef> {
    Some(ModelRef {
        provider: provider.as_str()?.to_owned(),
        model_id: model_id.as_str()?.to_owned(),
    })
}

fn js_truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

fn entry_id(entry: &Value) -> Option<String> {
    entry["id"].as_str().map(str::to_owned)
}

fn latest_session_name(entries: &[Value]) -> Option<String> {
    let info = entries.iter().rev().find(|e| e["type"] == "session_info")?;
    info["name"]
        .as_str()
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
}

/// pi's entry ids: the first 8 hex digits of a random UUID, redrawn until unused (up to 100
/// times, then a whole UUID).
fn generate_id(taken: impl Fn(&str) -> bool) -> String {
    generate_id_from(taken, || {
        uuid::Uuid::new_v4().simple().to_string()[..8].to_owned()
    })
}

fn generate_id_from(taken: impl Fn(&str) -> bool, mut draw: impl FnMut() -> String) -> String {
    for _ in 0..100 {
        let id = draw();
        if !taken(&id) {
            return id;
        }
    }
    uuid::Uuid::new_v4().hyphenated().to_string()
}

/// A session id as pi makes them: a UUID v7 (time-ordered).
fn new_session_id() -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let random = uuid::Uuid::new_v4();
    let mut bytes = [0u8; 10];
    bytes.copy_from_slice(&random.as_bytes()[..10]);
    uuid::Builder::from_unix_timestamp_millis(millis, &bytes)
        .into_uuid()
        .hyphenated()
        .to_string()
}

fn new_header(cwd: &str, parent_session: Option<&str>) -> Value {
    let mut header = Map::new();
    header.insert("type".into(), "session".into());
    header.insert("version".into(), CURRENT_SESSION_VERSION.into());
    header.insert("id".into(), new_session_id().into());
    header.insert("timestamp".into(), now_iso().into());
    header.insert("cwd".into(), cwd.into());
    if let Some(parent) = parent_session {
        header.insert("parentSession".into(), parent.into());
    }
    Value::Object(header)
}

/// The format version of a session file whose records were parsed, after checking that the
/// first record is a session header.
/// Whether a file with no complete line is empty or a session header cut off while it was
/// written (a prefix of `{"type":"session"`, or longer and starting with it).
fn is_torn_header(bytes: &[u8]) -> bool {
    const HEADER_START: &[u8] = br#"{"type":"session""#;
    let text = bytes.trim_ascii();
    text.is_empty() || HEADER_START.starts_with(text) || text.starts_with(HEADER_START)
}

fn header_version(path: &Path, records: &[(usize, Value)]) -> Result<f64> {
    let Some((first_line, first)) = records.first() else {
        bail!(
            "{} is not a pi session file: no line is a JSON object",
            path.display()
        );
    };
    check_header(first).with_context(|| {
        format!(
            "{} is not a pi session file: line {first_line}",
            path.display()
        )
    })?;
    Ok(first.get("version").and_then(Value::as_f64).unwrap_or(1.0))
}

/// A session's records (the header first, checked by the caller) as its header, its entries
/// (a repeated header or a record without a string id left out) and its cwd.
fn split_records(records: Vec<(usize, Value)>) -> (Value, Vec<Value>, String) {
    let mut records = records.into_iter().map(|(_, r)| r);
    let header = records.next().unwrap_or(Value::Null);
    let entries = records
        .filter(|r| r["type"] != "session" && r.get("id").is_some_and(Value::is_string))
        .collect();
    let cwd = header["cwd"]
        .as_str()
        .map(str::to_owned)
        .unwrap_or_else(current_dir_string);
    (header, entries, cwd)
}

fn check_header(record: &Value) -> Result<()> {
    if record["type"] != "session" || !record["id"].is_string() {
        bail!("the first entry is not a session header (type \"session\" with a string id)");
    }
    Ok(())
}

/// JavaScript's `new Date().toISOString()`.
fn now_iso() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

/// Milliseconds since the epoch of an ISO timestamp (or of a number, as `new Date(n)` takes).
fn iso_ms(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_f64().filter(|f| f.is_finite()).map(|f| f as i64),
        Value::String(s) => {
            let t = humantime::parse_rfc3339_weak(s).ok()?;
            let d = t.duration_since(UNIX_EPOCH).ok()?;
            i64::try_from(d.as_millis()).ok()
        }
        _ => None,
    }
}

/// `new Date(timestamp).getTime()` as JSON: an invalid date is NaN, which JSON writes as null.
fn js_time(v: &Value) -> Value {
    iso_ms(v).map_or(Value::Null, Value::from)
}

fn current_dir_string() -> String {
    std::env::current_dir()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default()
}

struct ParsedFile {
    /// JSON objects in file order, with their 1-based line numbers.
    records: Vec<(usize, Value)>,
    skipped: Vec<SkippedLine>,
    torn: Option<TornLine>,
    /// The file's length without its torn line.
    keep_len: u64,
    /// The last line is complete but lacks its newline.
    missing_newline: bool,
}

enum Line {
    Blank,
    Object(Value),
    /// Valid JSON, but not an object.
    NotObject,
    Malformed(String),
}

fn parse_line(raw: &[u8]) -> Line {
    let text = String::from_utf8_lossy(raw);
    // JavaScript's trim also drops a byte-order mark.
    let text = text.trim_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    if text.is_empty() {
        return Line::Blank;
    }
    match serde_json::from_str::<Value>(text) {
        Ok(v @ Value::Object(_)) => Line::Object(v),
        Ok(_) => Line::NotObject,
        Err(e) => Line::Malformed(e.to_string()),
    }
}

/// Splits a session file into entries the way pi reads it, and spots a torn last line: text
/// after the last newline that is not JSON can only be a write cut short.
fn parse_session_bytes(bytes: &[u8]) -> ParsedFile {
    let complete_end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    let tail = &bytes[complete_end..];
    let mut torn = None;
    let mut missing_newline = false;
    let mut keep_len = bytes.len() as u64;
    match parse_line(tail) {
        Line::Blank => {}
        Line::Malformed(_) => {
            let line = bytes[..complete_end]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1;
            torn = Some(TornLine {
                line,
                bytes: tail.len() as u64,
            });
            keep_len = complete_end as u64;
        }
        _ => missing_newline = true,
    }
    let mut records = Vec::new();
    let mut skipped = Vec::new();
    for (i, raw) in bytes[..keep_len as usize]
        .split(|&b| b == b'\n')
        .enumerate()
    {
        match parse_line(raw) {
            Line::Blank => {}
            Line::Object(v) => records.push((i + 1, v)),
            Line::NotObject => skipped.push(SkippedLine {
                line: i + 1,
                reason: "not a JSON object".to_owned(),
            }),
            Line::Malformed(e) => skipped.push(SkippedLine {
                line: i + 1,
                reason: format!("malformed JSON: {e}"),
            }),
        }
    }
    ParsedFile {
        records,
        skipped,
        torn,
        keep_len,
        missing_newline,
    }
}

/// Brings records of format `version` (1 or 2) up to v3, as pi's migrations do.
fn migrate(records: &mut [(usize, Value)], version: f64) {
    if version < 2.0 {
        migrate_v1_to_v2(records);
    }
    if version < 3.0 {
        for (_, record) in records.iter_mut() {
            if record["type"] == "session" {
                record["version"] = 3.into();
            } else if record["type"] == "message" && record["message"]["role"] == "hookMessage" {
                record["message"]["role"] = "custom".into();
            }
        }
    }
}

/// v1 files are a plain list: each entry gets an id and its predecessor as parent, and a
/// compaction's `firstKeptEntryIndex` (an index into the file's entries, header included)
/// becomes `firstKeptEntryId`.
fn migrate_v1_to_v2(records: &mut [(usize, Value)]) {
    let mut taken = HashSet::new();
    let mut previous: Option<String> = None;
    for i in 0..records.len() {
        if records[i].1["type"] == "session" {
            records[i].1["version"] = 2.into();
            continue;
        }
        let id = generate_id(|c| taken.contains(c));
        taken.insert(id.clone());
        let first_kept = records[i].1.get("firstKeptEntryIndex").cloned();
        let Some(entry) = records[i].1.as_object_mut() else {
            continue;
        };
        entry.insert("id".into(), id.clone().into());
        entry.insert(
            "parentId".into(),
            previous.clone().map_or(Value::Null, Value::String),
        );
        previous = Some(id);
        if entry.get("type").and_then(Value::as_str) != Some("compaction") {
            continue;
        }
        let Some(index) = first_kept.as_ref().and_then(Value::as_f64) else {
            continue;
        };
        let target = if index >= 0.0 && index.fract() == 0.0 {
            records.get(index as usize).map(|(_, v)| v)
        } else {
            None
        };
        let target_id = target
            .filter(|t| t["type"] != "session")
            .and_then(|t| t.get("id").cloned());
        let entry = records[i].1.as_object_mut().expect("checked object");
        if let Some(target_id) = target_id {
            entry.insert("firstKeptEntryId".into(), target_id);
        }
        entry.shift_remove("firstKeptEntryIndex");
    }
}

/// Replaces (or creates) `path` with these lines: written to a temporary sibling, synced,
/// renamed over, and the directory synced, so a crash leaves the old file or the new one.
fn write_file_atomically(path: &Path, lines: &[Value], policy: SyncPolicy) -> Result<Backing> {
    let dir = path
        .parent()
        .ok_or_else(|| anyhow!("session path {} has no parent", path.display()))?;
    let name = path
        .file_name()
        .ok_or_else(|| anyhow!("session path {} has no file name", path.display()))?;
    let tmp = dir.join(format!(".{}.tmp", name.to_string_lossy()));
    let mut content = String::new();
    for line in lines {
        content.push_str(&serde_json::to_string(line).context("cannot serialise entry")?);
        content.push('\n');
    }
    let written = (|| -> std::io::Result<()> {
        let mut file = File::create(&tmp)?;
        file.write_all(content.as_bytes())?;
        if policy == SyncPolicy::EveryEntry {
            file.sync_data()?;
        }
        fs::rename(&tmp, path)
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write session file {}", path.display()));
    }
    if policy == SyncPolicy::EveryEntry {
        sync_dir(dir)?;
    }
    let file = OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open {} for appending", path.display()))?;
    Ok(Backing {
        path: path.to_path_buf(),
        file,
        len: content.len() as u64,
        policy,
        poisoned: None,
    })
}

/// `create_dir_all`, then (per the policy) syncs the parent of every directory it made, so
/// the new directories survive a crash along with the files in them.
fn create_dir_durable(dir: &Path, policy: SyncPolicy) -> Result<()> {
    let mut missing = Vec::new();
    let mut current = Some(dir);
    while let Some(d) = current
        && !d.as_os_str().is_empty()
        && !d.exists()
    {
        missing.push(d);
        current = d.parent();
    }
    fs::create_dir_all(dir)
        .with_context(|| format!("cannot create session directory {}", dir.display()))?;
    if policy == SyncPolicy::EveryEntry {
        for d in missing.iter().rev() {
            if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
                sync_dir(parent)?;
            }
        }
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<()> {
    #[cfg(unix)]
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot fsync directory {}", dir.display()))?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

// ----- finding sessions (resume) -----

/// The session file in `dir` that was modified last (pi's `--continue`): `.jsonl` files whose
/// first line is a session header, by mtime. pi looks only at the first 512 bytes, so it
/// misses headers with very long paths; we read the whole first line.
pub fn find_most_recent_session(dir: &Path) -> Option<PathBuf> {
    let mut candidates: Vec<(PathBuf, SystemTime)> = jsonl_files(dir)
        .into_iter()
        .filter(|p| has_session_header(p))
        .filter_map(|p| {
            let mtime = fs::metadata(&p).and_then(|m| m.modified()).ok()?;
            Some((p, mtime))
        })
        .collect();
    candidates.sort_by_key(|c| std::cmp::Reverse(c.1));
    candidates.into_iter().next().map(|(p, _)| p)
}

/// Largest session whose tree is served as JSON (it nests one level per entry of a chain, and
/// building and serialising it recurses as deep).
pub const MAX_TREE_ENTRIES: usize = 2000;

/// The sessions in `dir`, most recently active first (pi's `SessionManager.list`).
/// Unreadable files and files without a header are left out.
pub fn list_sessions(dir: &Path) -> Vec<SessionInfo> {
    let mut sessions: Vec<SessionInfo> = jsonl_files(dir)
        .iter()
        .filter_map(|p| session_info(p))
        .collect();
    sessions.sort_by_key(|s| std::cmp::Reverse(s.modified_ms));
    sessions
}

/// The sessions of every project under `<agent dir>/sessions` (pi's `listAll`).
pub fn list_all_sessions(agent_dir: &Path) -> Vec<SessionInfo> {
    let Ok(dirs) = fs::read_dir(agent_dir.join("sessions")) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = dirs
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .collect();
    dirs.sort();
    let mut sessions: Vec<SessionInfo> = dirs
        .iter()
        .flat_map(|d| jsonl_files(d))
        .filter_map(|p| session_info(&p))
        .collect();
    sessions.sort_by_key(|s| std::cmp::Reverse(s.modified_ms));
    sessions
}

/// `.jsonl` files in `dir`, sorted by name so ties sort the same way every time.
fn jsonl_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(read) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = read
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl") && p.is_file())
        .collect();
    files.sort();
    files
}

fn has_session_header(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return false;
    };
    let mut first = Vec::new();
    // A header is a few hundred bytes; the cap keeps a huge garbage file from being read.
    if BufReader::new(file)
        .take(1 << 20)
        .read_until(b'\n', &mut first)
        .is_err()
    {
        return false;
    }
    matches!(parse_line(&first), Line::Object(h) if check_header(&h).is_ok())
}

fn session_info(path: &Path) -> Option<SessionInfo> {
    let bytes = fs::read(path).ok()?;
    let records: Vec<Value> = parse_session_bytes(&bytes)
        .records
        .into_iter()
        .map(|(_, v)| v)
        .collect();
    let header = records.first()?;
    if header["type"] != "session" {
        return None;
    }
    let id = header["id"].as_str()?.to_owned();
    let mut message_count = 0;
    let mut first_message = String::new();
    let mut texts = Vec::new();
    let mut last_activity: Option<i64> = None;
    for entry in &records {
        if entry["type"] != "message" {
            continue;
        }
        message_count += 1;
        let message = &entry["message"];
        let role = message["role"].as_str();
        if !matches!(role, Some("user" | "assistant")) || message.get("content").is_none() {
            continue;
        }
        let activity = match &message["timestamp"] {
            Value::Number(n) => n.as_f64().map(|f| f as i64),
            _ => iso_ms(&entry["timestamp"]),
        };
        if let Some(t) = activity {
            last_activity = Some(last_activity.map_or(t, |l| l.max(t)));
        }
        let text = match &message["content"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect::<Vec<_>>()
                .join(" "),
            _ => String::new(),
        };
        if text.is_empty() {
            continue;
        }
        if first_message.is_empty() && role == Some("user") {
            first_message = text.clone();
        }
        texts.push(text);
    }
    let created_ms = iso_ms(&header["timestamp"]);
    let mtime_ms = || {
        fs::metadata(path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64)
    };
    let modified_ms = last_activity
        .filter(|t| *t > 0)
        .or(created_ms)
        .unwrap_or_else(mtime_ms);
    Some(SessionInfo {
        path: path.to_path_buf(),
        id,
        cwd: header["cwd"].as_str().unwrap_or_default().to_owned(),
        name: latest_session_name(&records),
        parent_session_path: header["parentSession"].as_str().map(str::to_owned),
        created_ms,
        modified_ms,
        message_count,
        first_message: if first_message.is_empty() {
            "(no messages)".to_owned()
        } else {
            first_message
        },
        all_messages_text: texts.join(" "),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn user(text: &str) -> Value {
        json!({ "role": "user", "content": text, "timestamp": 1 })
    }

    fn assistant(text: &str, model: &str) -> Value {
        json!({
            "role": "assistant", "content": [{ "type": "text", "text": text }],
            "api": "anthropic-messages", "provider": "anthropic", "model": model,
            "stopReason": "stop", "timestamp": 2,
        })
    }

    fn id(entry: &Value) -> String {
        entry["id"].as_str().unwrap().to_owned()
    }

    #[test]
    fn a_session_moves_to_another_store_with_its_entries_as_they_were() {
        let mut from = SessionStore::in_memory("/w");
        let first = from.append_message(user("one")).unwrap();
        from.append_label_change(&id(&first), Some("kept")).unwrap();
        let text = from.to_jsonl();
        assert_eq!(text.lines().count(), 3);
        let entries = SessionStore::entries_of(text.as_bytes()).unwrap();
        let mut to = SessionStore::in_memory("/elsewhere");
        to.import_entries(entries.clone()).unwrap();
        assert_ne!(to.get_session_id(), from.get_session_id(), "a new session");
        assert_eq!(to.get_entries(), from.get_entries());
        assert_eq!(to.get_label(&id(&first)), Some("kept"));
        assert!(
            to.import_entries(entries).is_err(),
            "only into a new session"
        );
        let refused = SessionStore::entries_of(b"{\"type\":\"message\"}\n").unwrap_err();
        assert!(format!("{refused}").contains("session header"), "{refused}");
        assert!(SessionStore::entries_of(b"").is_err());
    }

    /// A journal that keeps lines in a shared buffer and refuses once `fail` is set.
    struct Lines(std::sync::Arc<std::sync::Mutex<(Vec<String>, bool)>>);

    impl Journal for Lines {
        fn append(&mut self, line: &str) -> Result<()> {
            let mut lines = self.0.lock().unwrap();
            if lines.1 {
                bail!("the log is unavailable");
            }
            lines.0.push(line.to_owned());
            Ok(())
        }
    }

    #[test]
    fn a_journaled_session_reads_back_from_its_records_and_a_refused_entry_is_not_added() {
        let shared = std::sync::Arc::new(std::sync::Mutex::new((Vec::new(), false)));
        let journal = Lines(shared.clone());
        let mut opened_for = String::new();
        let mut store = SessionStore::journaled("/w", |id| {
            opened_for = id.to_owned();
            Box::new(journal)
        })
        .unwrap();
        assert_eq!(opened_for, store.get_session_id());
        assert!(store.is_persisted() && store.get_session_file().is_none());
        let first = store.append_message(user("one")).unwrap();
        store.append_session_info("named").unwrap();
        shared.lock().unwrap().1 = true;
        assert!(store.append_message(user("lost")).is_err());
        assert_eq!(store.get_entries().len(), 2, "a refused entry stays out");

        let records = shared.lock().unwrap().0.join("\n") + "\n";
        assert_eq!(
            shared.lock().unwrap().0.len(),
            3,
            "the header, then each entry"
        );
        let again = SessionStore::from_journal(
            records.as_bytes(),
            Box::new(Lines(std::sync::Arc::new(Default::default()))),
        )
        .unwrap();
        assert_eq!(again.get_session_id(), store.get_session_id());
        assert_eq!(again.get_cwd(), "/w");
        assert_eq!(again.get_entries()[0], first);
        assert_eq!(again.get_session_name().as_deref(), Some("named"));
        assert!(
            SessionStore::from_journal(
                b"{\"type\":\"message\",\"id\":\"a\"}\n",
                Box::new(Lines(Default::default()))
            )
            .is_err()
        );
    }

    fn ids(entries: &[&Value]) -> Vec<String> {
        entries.iter().map(|e| id(e)).collect()
    }

    fn file_lines(path: &Path) -> Vec<Value> {
        fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    #[test]
    fn context_edits_leave_out_or_replace_a_message_on_their_branch_only() {
        let mut s = SessionStore::in_memory("/p");
        let a = s.append_message(user("a")).unwrap();
        let b = s.append_message(assistant("b", "m1")).unwrap();
        let texts = |s: &SessionStore| -> Vec<Value> {
            s.build_session_context()
                .messages
                .iter()
                .map(|m| m["content"].clone())
                .collect()
        };
        s.append_context_edit(&id(&b), &json!({ "content": "b2" }))
            .unwrap();
        // A string replaces an assistant's content as one text block.
        assert_eq!(
            texts(&s),
            vec![json!("a"), json!([{ "type": "text", "text": "b2" }])]
        );
        // The latest edit of an entry wins; the entry itself is unchanged.
        let edit = s.append_context_edit(&id(&a), &Value::Null).unwrap();
        assert_eq!(texts(&s), vec![json!([{ "type": "text", "text": "b2" }])]);
        assert_eq!(s.get_entry(&id(&a)).unwrap()["message"], user("a"));
        let projection = s.build_session_projection();
        assert_eq!(projection.len(), 4);
        assert!(projection[0].1.is_empty());
        // Before the edits the branch sees the original context again.
        s.branch(&id(&b)).unwrap();
        assert_eq!(
            texts(&s),
            vec![json!("a"), json!([{ "type": "text", "text": "b" }])]
        );
        // pi's checks, with its messages.
        let refused = |s: &mut SessionStore, target: &str, replacement: Value| {
            s.append_context_edit(target, &replacement)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(refused(&mut s, "nope", Value::Null), "Entry nope not found");
        assert_eq!(
            refused(&mut s, &id(&edit), Value::Null),
            format!("Entry {} is not on the active branch", id(&edit))
        );
        assert_eq!(
            refused(&mut s, &id(&a), json!({ "content": 3 })),
            "Context edit replacement must be null or contain string/array content"
        );
        let change = s.append_model_change("p", "m").unwrap();
        assert_eq!(
            refused(&mut s, &id(&change), Value::Null),
            format!(
                "Entry {} does not contribute editable model content",
                id(&change)
            )
        );
    }

    #[test]
    fn appends_chain_under_the_leaf_and_branch_moves_it() {
        let mut s = SessionStore::in_memory("/p");
        let a = s.append_message(user("a")).unwrap();
        let b = s.append_message(assistant("b", "m1")).unwrap();
        let c = s.append_message(user("c")).unwrap();
        assert_eq!(a["parentId"], Value::Null);
        assert_eq!(b["parentId"], a["id"]);
        assert_eq!(c["parentId"], b["id"]);
        assert_eq!(s.get_leaf_id(), Some(id(&c).as_str()));
        assert_eq!(s.get_leaf_entry(), Some(&c));

        s.branch(&id(&a)).unwrap();
        let d = s.append_message(user("d")).unwrap();
        assert_eq!(d["parentId"], a["id"]);
        assert_eq!(ids(&s.get_branch(None)), vec![id(&a), id(&d)]);
        assert_eq!(
            ids(&s.get_branch(Some(&id(&c)))),
            vec![id(&a), id(&b), id(&c)]
        );
        assert_eq!(ids(&s.get_children(&id(&a))), vec![id(&b), id(&d)]);
        assert!(s.get_branch(Some("nope")).is_empty());
        assert_eq!(s.get_entries().len(), 4);

        let err = s.branch("nope").unwrap_err().to_string();
        assert_eq!(err, "Entry nope not found");

        s.reset_leaf();
        assert_eq!(s.get_leaf_id(), None);
        assert!(s.build_session_context().messages.is_empty());
        let root = s.append_message(user("again")).unwrap();
        assert_eq!(root["parentId"], Value::Null);
    }

    #[test]
    fn tree_puts_children_under_parents_oldest_first() {
        let mut s = SessionStore::in_memory("/p");
        let a = s.append_message(user("a")).unwrap();
        let b = s.append_message(user("b")).unwrap();
        s.branch(&id(&a)).unwrap();
        let c = s.append_message(user("c")).unwrap();
        s.append_label_change(&id(&c), Some("here")).unwrap();
        let tree = s.get_tree();
        assert_eq!(tree.roots.len(), 1);
        let root = &tree.nodes[tree.roots[0]];
        assert_eq!(root.entry, &a);
        let children: Vec<&Value> = root.children.iter().map(|&i| tree.nodes[i].entry).collect();
        // b and c; the label entry hangs under c (the leaf when it was appended).
        assert_eq!(children, vec![&b, &c]);
        let json = tree.to_json();
        assert_eq!(json[0]["entry"], a);
        assert_eq!(json[0]["children"][1]["entry"], c);
        assert_eq!(json[0]["children"][1]["label"], "here");
        assert!(json[0]["children"][1]["labelTimestamp"].is_string());
        assert_eq!(
            json[0]["children"][1]["children"][0]["entry"]["type"],
            "label"
        );
        assert!(json[0]["children"][0].get("label").is_none());
    }

    #[test]
    fn labels_set_change_and_clear() {
        let mut s = SessionStore::in_memory("/p");
        let a = id(&s.append_message(user("a")).unwrap());
        let b = id(&s.append_message(user("b")).unwrap());
        let l = s.append_label_change(&a, Some("one")).unwrap();
        assert_eq!(l["targetId"], a.as_str());
        assert_eq!(l["label"], "one");
        assert_eq!(
            s.get_leaf_id(),
            l["id"].as_str(),
            "a label entry becomes the leaf"
        );
        s.append_label_change(&b, Some("two")).unwrap();
        s.append_label_change(&a, Some("uno")).unwrap();
        assert_eq!(s.get_label(&a), Some("uno"));
        let cleared = s.append_label_change(&b, None).unwrap();
        assert!(cleared.get("label").is_none());
        assert_eq!(s.get_label(&b), None);
        s.append_label_change(&a, Some("")).unwrap();
        assert_eq!(s.get_label(&a), None);
        assert_eq!(
            s.append_label_change("zzzzzzzz", Some("x"))
                .unwrap_err()
                .to_string(),
            "Entry zzzzzzzz not found"
        );
    }

    #[test]
    fn context_takes_latest_model_and_thinking_level_on_the_path() {
        let mut s = SessionStore::in_memory("/p");
        assert_eq!(s.build_session_context(), SessionContext::empty());
        s.append_thinking_level_change("high").unwrap();
        s.append_model_change("openai", "gpt-x").unwrap();
        let u = s.append_message(user("hi")).unwrap();
        let ctx = s.build_session_context();
        assert_eq!(ctx.thinking_level, "high");
        assert_eq!(
            ctx.model,
            Some(ModelRef {
                provider: "openai".into(),
                model_id: "gpt-x".into()
            })
        );
        s.append_message(assistant("yo", "claude-y")).unwrap();
        s.append_custom_entry("state", Some(json!({ "n": 1 })))
            .unwrap();
        s.append_session_info("named").unwrap();
        let ctx = s.build_session_context();
        assert_eq!(ctx.model.unwrap().model_id, "claude-y");
        assert_eq!(ctx.messages, vec![user("hi"), assistant("yo", "claude-y")]);
        assert_eq!(
            s.build_session_context().to_json()["model"],
            json!({ "provider": "anthropic", "modelId": "claude-y" })
        );
        // Another branch has neither the assistant's model nor later changes.
        s.branch(&id(&u)).unwrap();
        s.append_thinking_level_change("low").unwrap();
        let ctx = s.build_session_context();
        assert_eq!(ctx.thinking_level, "low");
        assert_eq!(ctx.model.unwrap().model_id, "gpt-x");
    }

    #[test]
    fn context_converts_custom_messages_and_branch_summaries() {
        let mut s = SessionStore::in_memory("/p");
        let a = s.append_message(user("a")).unwrap();
        s.append_message(user("abandoned")).unwrap();
        let summary = s
            .branch_with_summary(Some(&id(&a)), "tried X", Some(json!({ "f": 1 })), None)
            .unwrap();
        assert_eq!(summary["parentId"], a["id"]);
        assert_eq!(summary["fromId"], a["id"]);
        assert!(summary.get("fromHook").is_none());
        let cm = s
            .append_custom_message_entry("ext", json!("note"), true, Some(json!({ "d": 2 })))
            .unwrap();
        s.append_custom_message_entry("ext", json!([{ "type": "text", "text": "t" }]), false, None)
            .unwrap();
        let ctx = s.build_session_context();
        assert_eq!(ctx.messages.len(), 4);
        assert_eq!(ctx.messages[0], user("a"));
        let ts = iso_ms(&summary["timestamp"]).unwrap();
        assert_eq!(
            ctx.messages[1],
            json!({ "role": "branchSummary", "summary": "tried X", "fromId": id(&a), "timestamp": ts })
        );
        assert_eq!(
            ctx.messages[2],
            json!({
                "role": "custom", "customType": "ext", "content": "note", "display": true,
                "details": { "d": 2 }, "timestamp": iso_ms(&cm["timestamp"]).unwrap(),
            })
        );
        assert!(ctx.messages[3].get("details").is_none());

        // From the root: fromId "root", parent null; an empty summary adds no message.
        let root = s.branch_with_summary(None, "", None, Some(true)).unwrap();
        assert_eq!(root["fromId"], "root");
        assert_eq!(root["parentId"], Value::Null);
        assert_eq!(root["fromHook"], true);
        assert!(s.build_session_context().messages.is_empty());
        assert!(
            s.branch_with_summary(Some("nope"), "x", None, None)
                .is_err()
        );
    }

    #[test]
    fn context_after_compaction_starts_with_summary_then_kept_entries() {
        let mut s = SessionStore::in_memory("/p");
        s.append_message(user("old1")).unwrap();
        s.append_message(assistant("old2", "m")).unwrap();
        let kept = s.append_message(user("kept1")).unwrap();
        s.append_message(assistant("kept2", "m")).unwrap();
        let c = s
            .append_compaction(
                "the summary",
                &id(&kept),
                1234,
                Some(json!({ "readFiles": [] })),
                None,
            )
            .unwrap();
        assert_eq!(c["tokensBefore"], 1234);
        assert!(c.get("fromHook").is_none());
        s.append_message(user("after")).unwrap();
        let ctx = s.build_session_context();
        let texts: Vec<Value> = ctx.messages.iter().map(|m| m["content"].clone()).collect();
        assert_eq!(
            ctx.messages[0],
            json!({
                "role": "compactionSummary", "summary": "the summary", "tokensBefore": 1234,
                "timestamp": iso_ms(&c["timestamp"]).unwrap(),
            })
        );
        assert_eq!(texts[1], json!("kept1"));
        assert_eq!(texts[2][0]["text"], "kept2");
        assert_eq!(texts[3], json!("after"));
        assert_eq!(ctx.messages.len(), 4);

        // A second compaction wins; the first one's summary is gone.
        let after2 = s.append_message(user("x")).unwrap();
        s.append_compaction("second", &id(&after2), 5, None, Some(false))
            .unwrap();
        let ctx = s.build_session_context();
        assert_eq!(ctx.messages[0]["summary"], "second");
        assert_eq!(ctx.messages[1]["content"], "x");
        assert_eq!(ctx.messages.len(), 2);
    }

    #[test]
    fn file_round_trip_keeps_entries_leaf_labels_and_name() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SessionStore::create(dir.path(), "/proj", SyncPolicy::EveryEntry).unwrap();
        let path = s.get_session_file().unwrap().to_path_buf();
        // Written before anything else: pi would wait for an assistant message.
        assert_eq!(file_lines(&path), vec![s.get_header().clone()]);
        let header = s.get_header();
        assert_eq!(header["version"], 3);
        assert_eq!(header["cwd"], "/proj");
        assert!(header.get("parentSession").is_none());
        let name = path.file_name().unwrap().to_str().unwrap();
        let stamp = header["timestamp"]
            .as_str()
            .unwrap()
            .replace([':', '.'], "-");
        assert_eq!(name, format!("{stamp}_{}.jsonl", s.get_session_id()));
        assert_eq!(
            uuid::Uuid::parse_str(s.get_session_id())
                .unwrap()
                .get_version_num(),
            7
        );

        let a = s.append_message(user("a")).unwrap();
        assert_eq!(
            file_lines(&path).last(),
            Some(&a),
            "durable before it is reported"
        );
        s.append_label_change(&id(&a), Some("start")).unwrap();
        s.append_session_info("  first  ").unwrap();
        s.append_session_info("second").unwrap();
        let b = s.append_message(assistant("b", "m")).unwrap();
        s.branch(&id(&a)).unwrap();
        assert_eq!(s.get_session_name().as_deref(), Some("second"));

        let (r, report) = SessionStore::open(&path, SyncPolicy::EveryEntry).unwrap();
        assert!(report.is_clean(), "{report}");
        assert_eq!(r.get_entries(), s.get_entries());
        assert_eq!(r.get_header(), s.get_header());
        // Reopening puts the leaf on the last entry, not where navigation left it.
        assert_eq!(r.get_leaf_id(), Some(id(&b).as_str()));
        assert_eq!(r.get_label(&id(&a)), Some("start"));
        assert_eq!(r.get_session_name().as_deref(), Some("second"));
        assert_eq!(r.get_cwd(), "/proj");
        assert_eq!(r.get_session_dir(), Some(dir.path()));

        let mut r = r;
        r.append_session_info("").unwrap();
        assert_eq!(r.get_session_name(), None, "an empty name clears it");
    }

    #[test]
    fn torn_last_line_is_truncated_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SessionStore::create(dir.path(), "/p", SyncPolicy::None).unwrap();
        s.append_message(user("a")).unwrap();
        s.append_message(user("b")).unwrap();
        let path = s.get_session_file().unwrap().to_path_buf();
        let good = fs::read(&path).unwrap();
        let mut torn = good.clone();
        torn.extend_from_slice(br#"{"type":"message","id":"abcd1234","parentId":"#);
        fs::write(&path, &torn).unwrap();

        let (mut r, report) = SessionStore::open(&path, SyncPolicy::EveryEntry).unwrap();
        assert_eq!(
            report.torn_line,
            Some(TornLine {
                line: 4,
                bytes: (torn.len() - good.len()) as u64
            })
        );
        assert!(report.skipped_lines.is_empty());
        assert!(report.to_string().contains("torn last line 4"));
        assert_eq!(r.get_entries(), s.get_entries());
        assert_eq!(
            fs::read(&path).unwrap(),
            good,
            "file cut back to the last full line"
        );

        let c = r.append_message(user("c")).unwrap();
        let (again, report) = SessionStore::open(&path, SyncPolicy::None).unwrap();
        assert!(report.is_clean(), "{report}");
        assert_eq!(again.get_entries().last(), Some(&c));
    }

    #[test]
    fn complete_last_line_without_newline_gets_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SessionStore::create(dir.path(), "/p", SyncPolicy::None).unwrap();
        s.append_message(user("a")).unwrap();
        let path = s.get_session_file().unwrap().to_path_buf();
        let mut bytes = fs::read(&path).unwrap();
        bytes.pop();
        fs::write(&path, &bytes).unwrap();
        let (mut r, report) = SessionStore::open(&path, SyncPolicy::None).unwrap();
        assert!(report.added_final_newline);
        assert_eq!(r.get_entries().len(), 1);
        r.append_message(user("b")).unwrap();
        assert_eq!(file_lines(&path).len(), 3);
    }

    #[test]
    fn empty_or_torn_header_file_starts_a_fresh_session() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        fs::write(&path, br#"{"type":"session","vers"#).unwrap();
        let (mut s, report) = SessionStore::open(&path, SyncPolicy::None).unwrap();
        assert!(report.initialized);
        assert!(report.torn_line.is_some());
        assert!(s.get_entries().is_empty());
        s.append_message(user("a")).unwrap();
        let lines = file_lines(&path);
        assert_eq!(lines[0]["type"], "session");
        assert_eq!(lines.len(), 2);
    }

    #[test]
    fn a_one_line_file_that_is_not_a_session_header_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        for text in ["my notes, no final newline", "{\"hello\":1", "42"] {
            let path = dir.path().join("notes.txt");
            fs::write(&path, text).unwrap();
            let error = SessionStore::open(&path, SyncPolicy::None).unwrap_err();
            assert!(
                format!("{error:#}").contains("is not a pi session file"),
                "{text}: {error:#}"
            );
            assert_eq!(fs::read_to_string(&path).unwrap(), text, "left as it was");
        }
    }

    #[test]
    fn malformed_lines_in_the_middle_are_skipped_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let text = [
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}"#,
            r#"{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"a","timestamp":1}}"#,
            r#"{"type":"message","id":"bbbb"#,
            "",
            "42",
            r#"{"type":"custom","customType":"x"}"#,
            r#"{"type":"message","id":"cccccccc","parentId":"aaaaaaaa","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"user","content":"c","timestamp":2}}"#,
        ]
        .join("\n")
            + "\n";
        fs::write(&path, &text).unwrap();
        let (s, report) = SessionStore::open(&path, SyncPolicy::None).unwrap();
        let lines: Vec<usize> = report.skipped_lines.iter().map(|l| l.line).collect();
        assert_eq!(lines, vec![3, 5, 6]);
        assert!(report.torn_line.is_none());
        assert_eq!(s.get_leaf_id(), Some("cccccccc"));
        assert_eq!(s.build_session_context().messages.len(), 2);
        assert_eq!(fs::read_to_string(&path).unwrap(), text, "left as it was");
    }

    #[test]
    fn a_file_that_is_not_a_session_is_an_error_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.jsonl");
        fs::write(&path, "{\"hello\":1}\n").unwrap();
        let err = format!(
            "{:#}",
            SessionStore::open(&path, SyncPolicy::None).unwrap_err()
        );
        assert!(
            err.contains("notes.jsonl is not a pi session file: line 1"),
            "{err}"
        );
        fs::write(&path, "garbage\n").unwrap();
        assert!(SessionStore::open(&path, SyncPolicy::None).is_err());
        assert_eq!(fs::read_to_string(&path).unwrap(), "garbage\n");
        let missing = dir.path().join("missing.jsonl");
        let err = format!(
            "{:#}",
            SessionStore::open(&missing, SyncPolicy::None).unwrap_err()
        );
        assert!(err.contains("missing.jsonl"), "{err}");
    }

    #[test]
    fn parent_cycles_do_not_hang() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let text = [
            r#"{"type":"session","version":3,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}"#,
            r#"{"type":"message","id":"aaaaaaaa","parentId":"bbbbbbbb","timestamp":"x","message":{"role":"user","content":"a"}}"#,
            r#"{"type":"message","id":"bbbbbbbb","parentId":"aaaaaaaa","timestamp":"x","message":{"role":"user","content":"b"}}"#,
        ]
        .join("\n");
        fs::write(&path, text).unwrap();
        let (s, _) = SessionStore::open(&path, SyncPolicy::None).unwrap();
        assert_eq!(s.get_branch(None).len(), 2);
        assert_eq!(s.build_session_context().messages.len(), 2);
        assert_eq!(s.get_tree().roots.len(), 0);
    }

    #[test]
    fn ids_are_eight_hex_digits_and_unique() {
        let mut s = SessionStore::in_memory("/p");
        let mut seen = HashSet::new();
        for i in 0..2000 {
            let e = s.append_custom_entry("n", Some(json!(i))).unwrap();
            let id = id(&e);
            assert_eq!(id.len(), 8);
            assert!(
                id.bytes()
                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
            );
            assert!(seen.insert(id));
        }
        // A drawn id that is taken is redrawn...
        let mut draws = ["aaaaaaaa", "aaaaaaaa", "bbbbbbbb"].into_iter();
        let got = generate_id_from(|c| c == "aaaaaaaa", || draws.next().unwrap().to_owned());
        assert_eq!(got, "bbbbbbbb");
        // ...and after 100 collisions a whole UUID is used.
        let got = generate_id_from(|_| true, || "aaaaaaaa".to_owned());
        assert_eq!(got.len(), 36);
    }

    #[test]
    fn entry_shapes_have_pis_fields_in_pis_order() {
        let mut s = SessionStore::in_memory("/p");
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        let m = s.append_message(user("a")).unwrap();
        assert_eq!(keys(&m), ["type", "id", "parentId", "timestamp", "message"]);
        let c = s.append_custom_entry("t", Some(json!(1))).unwrap();
        assert_eq!(
            keys(&c),
            ["type", "customType", "data", "id", "parentId", "timestamp"]
        );
        let cm = s
            .append_custom_message_entry("t", json!("x"), false, Some(json!(1)))
            .unwrap();
        assert_eq!(
            keys(&cm),
            [
                "type",
                "customType",
                "content",
                "display",
                "details",
                "id",
                "parentId",
                "timestamp"
            ]
        );
        let mc = s.append_model_change("p", "m").unwrap();
        assert_eq!(keys(&mc)[4..], ["provider", "modelId"]);
        let comp = s
            .append_compaction("s", &id(&m), 1, Some(json!({})), Some(true))
            .unwrap();
        assert_eq!(
            keys(&comp)[4..],
            [
                "summary",
                "firstKeptEntryId",
                "tokensBefore",
                "details",
                "fromHook"
            ]
        );
        let ts = m["timestamp"].as_str().unwrap();
        assert_eq!(ts.len(), "2025-01-01T00:00:00.000Z".len());
        assert!(ts.ends_with('Z'));
    }

    #[test]
    fn branched_session_holds_the_path_and_its_labels() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SessionStore::create(dir.path(), "/p", SyncPolicy::None).unwrap();
        let a = id(&s.append_message(user("a")).unwrap());
        let b = id(&s.append_message(assistant("b", "m")).unwrap());
        let c = id(&s.append_message(user("c")).unwrap());
        s.append_label_change(&c, Some("off-path")).unwrap();
        s.append_label_change(&b, Some("bee")).unwrap();
        s.append_label_change(&a, Some("ay")).unwrap();
        s.append_label_change(&b, Some("bee2")).unwrap();

        let f = s.create_branched_session(&b).unwrap();
        let path = f.get_session_file().unwrap();
        assert_eq!(path.parent(), Some(dir.path()));
        assert_eq!(
            f.get_header()["parentSession"],
            s.get_session_file().unwrap().to_str().unwrap()
        );
        let types: Vec<&str> = f
            .get_entries()
            .iter()
            .map(|e| e["type"].as_str().unwrap())
            .collect();
        assert_eq!(types, ["message", "message", "label", "label"]);
        // Labels in first-set order, chained after the path.
        let labels = &f.get_entries()[2..];
        assert_eq!(labels[0]["targetId"], b.as_str());
        assert_eq!(labels[0]["label"], "bee2");
        assert_eq!(labels[0]["parentId"], b.as_str());
        assert_eq!(labels[1]["targetId"], a.as_str());
        assert_eq!(labels[1]["parentId"], labels[0]["id"]);
        assert_eq!(f.get_label(&b), Some("bee2"));
        assert_eq!(f.get_label(&c), None);
        assert_eq!(f.get_leaf_id(), labels[1]["id"].as_str());
        let (reopened, report) = SessionStore::open(path, SyncPolicy::None).unwrap();
        assert!(report.is_clean());
        assert_eq!(reopened.get_entries(), f.get_entries());
        assert_ne!(f.get_session_id(), s.get_session_id());
        assert!(s.create_branched_session("nope").is_err());

        let mem = SessionStore::in_memory("/p");
        assert!(mem.create_branched_session("x").is_err());
        let mut mem = mem;
        let x = id(&mem.append_message(user("x")).unwrap());
        let copy = mem.create_branched_session(&x).unwrap();
        assert!(!copy.is_persisted());
        assert!(copy.get_header().get("parentSession").is_none());
        assert_eq!(copy.get_entries(), mem.get_entries());
    }

    #[test]
    fn fork_from_copies_every_entry_into_the_target_project() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = SessionStore::create(dir.path().join("a"), "/a", SyncPolicy::None).unwrap();
        s.append_message(user("a")).unwrap();
        let b = s.append_message(user("b")).unwrap();
        let src = s.get_session_file().unwrap();
        let f = SessionStore::fork_from(src, "/b", dir.path().join("b"), SyncPolicy::None).unwrap();
        assert_eq!(f.get_entries(), s.get_entries());
        assert_eq!(f.get_cwd(), "/b");
        assert_eq!(f.get_header()["parentSession"], src.to_str().unwrap());
        assert_eq!(f.get_leaf_id(), b["id"].as_str());
        let empty = dir.path().join("empty.jsonl");
        fs::write(&empty, "").unwrap();
        let err = SessionStore::fork_from(&empty, "/b", dir.path(), SyncPolicy::None)
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("Cannot fork: source session file is empty or invalid"));
    }

    #[test]
    fn v1_files_get_ids_parents_and_compaction_targets() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.jsonl");
        let text = [
            r#"{"type":"session","id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}"#,
            r#"{"type":"message","timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"user","content":"a","timestamp":1}}"#,
            r#"{"type":"message","timestamp":"2025-01-01T00:00:02.000Z","message":{"role":"user","content":"b","timestamp":2}}"#,
            r#"{"type":"compaction","timestamp":"2025-01-01T00:00:03.000Z","summary":"S","firstKeptEntryIndex":2,"tokensBefore":9}"#,
            r#"{"type":"message","timestamp":"2025-01-01T00:00:04.000Z","message":{"role":"hookMessage","customType":"x","content":"h","display":true,"timestamp":4}}"#,
        ]
        .join("\n")
            + "\n";
        fs::write(&path, text).unwrap();
        let (s, report) = SessionStore::open(&path, SyncPolicy::None).unwrap();
        assert_eq!(report.migrated_from, Some(1));
        let e = s.get_entries();
        assert_eq!(e[0]["parentId"], Value::Null);
        assert_eq!(e[1]["parentId"], e[0]["id"]);
        assert_eq!(e[2]["firstKeptEntryId"], e[1]["id"]);
        assert!(e[2].get("firstKeptEntryIndex").is_none());
        assert_eq!(e[3]["message"]["role"], "custom");
        let ctx = s.build_session_context();
        let contents: Vec<&Value> = ctx.messages.iter().map(|m| &m["content"]).collect();
        assert_eq!(ctx.messages[0]["summary"], "S");
        assert_eq!(contents[1..], [&json!("b"), &json!("h")]);
        // The file was rewritten as v3 with the new ids.
        let lines = file_lines(&path);
        assert_eq!(lines[0]["version"], 3);
        assert_eq!(&lines[1..], e);
        let (_, report) = SessionStore::open(&path, SyncPolicy::None).unwrap();
        assert!(report.is_clean());
    }

    #[test]
    fn v2_files_rename_hook_messages() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v2.jsonl");
        let text = [
            r#"{"type":"session","version":2,"id":"s1","timestamp":"2025-01-01T00:00:00.000Z","cwd":"/p"}"#,
            r#"{"type":"message","id":"aaaaaaaa","parentId":null,"timestamp":"2025-01-01T00:00:01.000Z","message":{"role":"hookMessage","customType":"x","content":"h","display":true,"timestamp":4}}"#,
        ]
        .join("\n")
            + "\n";
        fs::write(&path, text).unwrap();
        let (s, report) = SessionStore::open(&path, SyncPolicy::None).unwrap();
        assert_eq!(report.migrated_from, Some(2));
        assert_eq!(s.get_entries()[0]["id"], "aaaaaaaa");
        assert_eq!(s.get_entries()[0]["message"]["role"], "custom");
        assert_eq!(file_lines(&path)[0]["version"], 3);
    }

    #[test]
    fn default_session_dir_encodes_the_cwd_like_pi() {
        let agent = Path::new("/home/u/.pi/agent");
        assert_eq!(
            default_session_dir(agent, "/home/u/my proj"),
            agent.join("sessions/--home-u-my proj--")
        );
        assert_eq!(
            default_session_dir(agent, "C:\\work\\x"),
            agent.join("sessions/--C--work-x--")
        );
        assert_eq!(
            default_session_dir(agent, "//srv"),
            agent.join("sessions/---srv--")
        );
    }

    #[test]
    fn most_recent_and_listing_follow_pi() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(find_most_recent_session(dir.path()), None);
        let mut old = SessionStore::create(dir.path(), "/p", SyncPolicy::None).unwrap();
        old.append_message(
            json!({ "role": "user", "content": "first question", "timestamp": 1000 }),
        )
        .unwrap();
        old.append_session_info("Old one").unwrap();
        let mut new = SessionStore::create(dir.path(), "/p", SyncPolicy::None).unwrap();
        new.append_message(json!({ "role": "user", "content": [{ "type": "text", "text": "x" }, { "type": "text", "text": "y" }], "timestamp": 5000 }))
            .unwrap();
        new.append_message(assistant("z", "m")).unwrap();
        fs::write(dir.path().join("junk.jsonl"), "not json\n").unwrap();
        let set_mtime = |p: &Path, secs: u64| {
            let f = File::options().write(true).open(p).unwrap();
            f.set_modified(UNIX_EPOCH + std::time::Duration::from_secs(secs))
                .unwrap();
        };
        set_mtime(old.get_session_file().unwrap(), 2_000_000_000);
        set_mtime(new.get_session_file().unwrap(), 1_000_000_000);
        set_mtime(&dir.path().join("junk.jsonl"), 2_100_000_000);
        assert_eq!(
            find_most_recent_session(dir.path()).as_deref(),
            old.get_session_file()
        );

        let list = list_sessions(dir.path());
        assert_eq!(list.len(), 2);
        // Sorted by last activity (message timestamps), not by mtime.
        assert_eq!(list[0].id, new.get_session_id());
        assert_eq!(list[0].modified_ms, 5000);
        assert_eq!(list[0].message_count, 2);
        assert_eq!(list[0].first_message, "x y");
        assert_eq!(list[0].all_messages_text, "x y z");
        assert_eq!(list[0].name, None);
        assert_eq!(list[1].name.as_deref(), Some("Old one"));
        assert_eq!(list[1].first_message, "first question");
        assert_eq!(list[1].cwd, "/p");

        let agent = tempfile::tempdir().unwrap();
        let d = default_session_dir(agent.path(), "/p");
        SessionStore::create(&d, "/p", SyncPolicy::None).unwrap();
        let all = list_all_sessions(agent.path());
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].first_message, "(no messages)");
    }

    #[test]
    fn open_or_create_uses_the_exact_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/mine.jsonl");
        let (mut s, _) = SessionStore::open_or_create(&path, "/p", SyncPolicy::EveryEntry).unwrap();
        assert_eq!(s.get_session_file(), Some(path.as_path()));
        s.append_message(user("a")).unwrap();
        let (r, report) = SessionStore::open_or_create(&path, "/other", SyncPolicy::None).unwrap();
        assert!(report.is_clean());
        assert_eq!(r.get_cwd(), "/p");
        assert_eq!(r.get_entries().len(), 1);
    }
}
