//! Dialogs answered by the RPC client: each `extension_ui_request` waits for the
//! `extension_ui_response` with its id (pi's value / confirmed / cancelled shapes). The
//! dialog's own timeout is applied by the host; an answer for an unknown or expired id is
//! ignored, as pi ignores it.

use std::collections::HashMap;
use std::sync::Mutex;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::Value;
use tokio::sync::oneshot;

use pichamber_session::DialogResponder;
use pichamber_session::events::{DialogAnswer, UiRequest};

/// Dialogs waiting for an answer at once; more are cancelled (a client that never answers
/// must not grow the host without bound).
const MAX_PENDING: usize = 256;

#[derive(Default)]
pub struct RpcDialogs {
    pending: Mutex<HashMap<String, oneshot::Sender<DialogAnswer>>>,
}

impl RpcDialogs {
    /// Hands a client's `extension_ui_response` to the dialog waiting for it.
    pub fn resolve(&self, response: &Value) {
        let Some(id) = response["id"].as_str() else {
            return;
        };
        let Some(waiting) = self.pending.lock().unwrap().remove(id) else {
            return;
        };
        let answer = if response["cancelled"] == Value::Bool(true) {
            DialogAnswer::cancelled()
        } else if let Some(confirmed) = response["confirmed"].as_bool() {
            DialogAnswer::Confirmed { confirmed }
        } else if let Some(value) = response["value"].as_str() {
            DialogAnswer::Value {
                value: value.to_owned(),
            }
        } else if response["value"].is_object() {
            // A form answered with an object of values.
            DialogAnswer::Value {
                value: response["value"].to_string(),
            }
        } else {
            DialogAnswer::cancelled()
        };
        let _ = waiting.send(answer);
    }
}

impl DialogResponder for RpcDialogs {
    fn answer(&self, id: &str, _request: &UiRequest) -> BoxFuture<'static, DialogAnswer> {
        let (send, receive) = oneshot::channel();
        {
            let mut pending = self.pending.lock().unwrap();
            // Dialogs that timed out leave a closed sender behind: drop those first.
            pending.retain(|_, waiting| !waiting.is_closed());
            if pending.len() >= MAX_PENDING {
                return futures::future::ready(DialogAnswer::cancelled()).boxed();
            }
            pending.insert(id.to_owned(), send);
        }
        async move { receive.await.unwrap_or_else(|_| DialogAnswer::cancelled()) }.boxed()
    }
}
