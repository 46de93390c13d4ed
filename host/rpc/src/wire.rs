//! pi 1.6.0's wire form of agent events (modes/json-event.js): `message_update` is delta-only.
//! The cumulative `message` and every `assistantMessageEvent.partial` are left out so the
//! stream grows linearly; the usage so far rides at the top, and `toolcall_start` names the
//! call it starts. Every other event goes out as the session emits it.

use serde_json::{Value, json};

/// `event` as pi 1.6.0 writes it.
pub fn for_1_6(event: &Value) -> Value {
    if event["type"] != "message_update" {
        return event.clone();
    }
    let mut inner = event["assistantMessageEvent"].clone();
    let partial = inner
        .as_object_mut()
        .and_then(|m| m.remove("partial"))
        .unwrap_or(Value::Null);
    if inner["type"] == "toolcall_start" {
        let index = inner["contentIndex"].as_u64().unwrap_or(0) as usize;
        let call = &partial["content"][index];
        inner["id"] = call["id"].clone();
        inner["toolName"] = call["name"].clone();
    }
    json!({
        "type": "message_update",
        "usage": partial["usage"],
        "assistantMessageEvent": inner,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_updates_lose_their_snapshots_and_keep_the_usage() {
        let partial = json!({"role": "assistant", "usage": {"input": 1},
            "content": [{"type": "toolCall", "id": "c1", "name": "read", "arguments": {}}]});
        let event = json!({
            "type": "message_update",
            "assistantMessageEvent": {"type": "toolcall_start", "contentIndex": 0, "partial": partial},
            "message": partial,
        });
        assert_eq!(
            for_1_6(&event),
            json!({"type": "message_update", "usage": {"input": 1},
                   "assistantMessageEvent": {"type": "toolcall_start", "contentIndex": 0, "id": "c1", "toolName": "read"}})
        );
        let other = json!({"type": "turn_start"});
        assert_eq!(for_1_6(&other), other);
    }
}
