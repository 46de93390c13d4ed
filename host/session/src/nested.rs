//! pi 1.6.0's `ctx.executeTool`: a running tool calls another tool through the session's
//! pipeline (argument validation, `tool_call` and `tool_result` handlers, execution events
//! with `parentToolCallId`) as the call `<parent>/<n>`; the calls are recorded as `nestedCalls`
//! on the calling tool's result message (pi's `NestedToolCallRunner`).
//!
//! An extension instance runs one call at a time, so the one whose tool is running is lent to
//! that call ([`Slot`]) while the session answers its nested calls: those reach built-in tools
//! and other extensions' tools, and the other extensions' handlers; never the calling
//! extension itself, whose handlers miss its own nested calls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pichamber_access::Grants;

use pichamber_runtime::ExtensionInstance;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// Nesting levels a call may reach (`a/1/1/...`).
pub const MAX_DEPTH: usize = 8;

/// pi's `NESTED_CALL_LIMITS` of the record on a tool result.
const MAX_RECORDED_CALLS: usize = 256;
const MAX_ARGUMENT_BYTES_PER_CALL: usize = 8 * 1024;
const MAX_ARGUMENT_BYTES_TOTAL: usize = 32 * 1024;
const MAX_ERROR_CHARS: usize = 500;

/// A nested call a port passes to the session, and where its outcome goes.
pub struct NestedCall {
    pub parent: String,
    pub tool: String,
    pub arguments: Value,
    pub respond: oneshot::Sender<Value>,
}

/// A running tool call that may make nested calls.
#[derive(Debug, Clone)]
pub struct Open {
    /// The extension whose tool it is, and its grants: what its nested calls may reach.
    pub owner: usize,
    pub grants: Arc<Grants>,
    /// The model-issued (or `run --tool`) call the chain started from.
    pub root: String,
    pub depth: usize,
}

/// Where ports send nested calls, and which running calls may make them.
pub struct NestedCalls {
    sender: mpsc::UnboundedSender<NestedCall>,
    open: Mutex<HashMap<String, Open>>,
}

impl NestedCalls {
    pub fn new() -> (Self, mpsc::UnboundedReceiver<NestedCall>) {
        let (sender, receiver) = mpsc::unbounded_channel();
        let calls = Self {
            sender,
            open: Mutex::new(HashMap::new()),
        };
        (calls, receiver)
    }

    /// A nested call from extension `owner`: refused unless `parent` is one of its tool calls
    /// that is running now (an extension cannot call on another's behalf, nor from outside a
    /// tool).
    pub fn request(
        &self,
        owner: usize,
        parent: String,
        tool: String,
        arguments: Value,
    ) -> Result<oneshot::Receiver<Value>, String> {
        let open = self.open.lock().unwrap();
        match open.get(&parent) {
            Some(call) if call.owner == owner => {}
            _ => {
                return Err(format!(
                    "ctx.executeTool: {parent:?} is not a running call of this extension's tools"
                ));
            }
        }
        drop(open);
        let (respond, outcome) = oneshot::channel();
        self.sender
            .send(NestedCall {
                parent,
                tool,
                arguments,
                respond,
            })
            .map_err(|_| "ctx.executeTool: the session has ended".to_owned())?;
        Ok(outcome)
    }

    /// `id`, a call of extension `owner`'s tool, starts running; `parent` is the call it is
    /// nested in.
    pub(crate) fn open(&self, id: &str, owner: usize, grants: Arc<Grants>, parent: Option<&str>) {
        let mut open = self.open.lock().unwrap();
        let (root, depth) = match parent.and_then(|p| open.get(p)) {
            Some(p) => (p.root.clone(), p.depth + 1),
            None => (id.to_owned(), 0),
        };
        let call = Open {
            owner,
            grants,
            root,
            depth,
        };
        open.insert(id.to_owned(), call);
    }

    pub(crate) fn close(&self, id: &str) {
        self.open.lock().unwrap().remove(id);
    }

    /// A running call that may make nested calls.
    pub(crate) fn running(&self, id: &str) -> Option<Open> {
        self.open.lock().unwrap().get(id).cloned()
    }
}

/// pi's `NestedCallRecorder`: the nested calls of one model-issued call, bounded.
#[derive(Debug)]
pub struct Record {
    calls: Vec<Value>,
    complete: bool,
    argument_bytes: usize,
}

impl Default for Record {
    fn default() -> Self {
        Self {
            calls: Vec::new(),
            complete: true,
            argument_bytes: 0,
        }
    }
}

impl Record {
    /// Records a call as it starts; `None` when the record is full.
    pub fn start(&mut self, call: &Value) -> Option<usize> {
        if self.calls.len() >= MAX_RECORDED_CALLS {
            self.complete = false;
            return None;
        }
        let mut record = json!({ "id": call["id"], "name": call["name"], "status": "unfinished" });
        let arguments = &call["arguments"];
        let bytes = arguments.to_string().len();
        if bytes > MAX_ARGUMENT_BYTES_PER_CALL
            || self.argument_bytes + bytes > MAX_ARGUMENT_BYTES_TOTAL
        {
            record["argumentsBytes"] = json!(bytes);
            self.complete = false;
        } else {
            record["arguments"] = arguments.clone();
            self.argument_bytes += bytes;
        }
        self.calls.push(record);
        Some(self.calls.len() - 1)
    }

    pub fn finish(&mut self, at: Option<usize>, is_error: bool, text: &str, duration_ms: u64) {
        let Some(record) = at.and_then(|i| self.calls.get_mut(i)) else {
            return;
        };
        record["status"] = json!(if is_error { "error" } else { "ok" });
        record["durationMs"] = json!(duration_ms);
        if is_error && !text.is_empty() {
            record["error"] = json!(text.chars().take(MAX_ERROR_CHARS).collect::<String>());
        }
    }

    /// pi's `nestedCalls` (`{calls, complete}`), or `None` when no call was made.
    pub fn snapshot(&self) -> Option<Value> {
        if self.calls.is_empty() && self.complete {
            return None;
        }
        let complete = self.complete && self.calls.iter().all(|c| c["status"] != "unfinished");
        Some(json!({ "calls": self.calls, "complete": complete }))
    }
}

/// An extension instance in the session's list, or its place while it is lent to one of its
/// running tool calls. `name` stays readable either way.
pub struct Slot {
    pub name: String,
    instance: Option<ExtensionInstance>,
}

impl Slot {
    pub fn new(instance: ExtensionInstance) -> Self {
        Self {
            name: instance.name.clone(),
            instance: Some(instance),
        }
    }

    /// Lent to a running call: nothing else may call into it until it is back.
    pub fn is_lent(&self) -> bool {
        self.instance.is_none()
    }

    pub fn lend(&mut self) -> Option<ExtensionInstance> {
        self.instance.take()
    }

    pub fn give_back(&mut self, instance: ExtensionInstance) {
        self.instance = Some(instance);
    }
}

impl std::ops::Deref for Slot {
    type Target = ExtensionInstance;
    fn deref(&self) -> &ExtensionInstance {
        self.instance
            .as_ref()
            .expect("an extension lent to its running tool call is not called meanwhile")
    }
}

impl std::ops::DerefMut for Slot {
    fn deref_mut(&mut self) -> &mut ExtensionInstance {
        self.instance
            .as_mut()
            .expect("an extension lent to its running tool call is not called meanwhile")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_running_call_of_the_same_extension_may_nest() {
        let (calls, mut receiver) = NestedCalls::new();
        let ask = |owner, parent: &str| {
            calls
                .request(owner, parent.into(), "read".into(), json!({}))
                .map(|_| ())
        };
        let none = Arc::new(Grants::default());
        assert!(ask(0, "call_1").is_err());
        calls.open("call_1", 0, none.clone(), None);
        assert!(ask(1, "call_1").is_err(), "another extension's call");
        assert!(ask(0, "call_1").is_ok());
        assert_eq!(receiver.try_recv().unwrap().parent, "call_1");
        calls.open("call_1/1", 1, none, Some("call_1"));
        let nested = calls.running("call_1/1").unwrap();
        assert_eq!((nested.root.as_str(), nested.depth), ("call_1", 1));
        calls.close("call_1");
        assert!(ask(0, "call_1").is_err(), "a call that ended");
    }

    #[test]
    fn the_record_is_bounded_as_pi_bounds_it() {
        let mut record = Record::default();
        assert_eq!(record.snapshot(), None);
        let big = json!({ "id": "a/1", "name": "t", "arguments": { "x": "y".repeat(9000) } });
        let at = record.start(&big);
        record.finish(at, true, &"e".repeat(600), 3);
        let snapshot = record.snapshot().unwrap();
        assert_eq!(snapshot["complete"], false);
        assert!(snapshot["calls"][0]["arguments"].is_null());
        assert!(snapshot["calls"][0]["argumentsBytes"].as_u64().unwrap() > 9000);
        assert_eq!(snapshot["calls"][0]["error"].as_str().unwrap().len(), 500);
    }
}
