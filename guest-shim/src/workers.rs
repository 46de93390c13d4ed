//! Worker threads (WIT `workers`, `node:worker_threads`): `__workers` gives the prelude
//! start / post / terminate and, in a worker, whether its parent port listens; [`deliver`]
//! hands what arrived to the prelude's `__pichamber_loop.workerEvent`. Messages cross as JSON
//! text, made and read by the prelude.

use std::cell::Cell;

use javy::quickjs::{Ctx, Exception, Function, Object, Value};

use crate::bindings::pichamber::extension::workers::{self, WorkerEvent, WorkerSource};

thread_local! {
    /// Workers started whose exit was not delivered yet.
    static CHILDREN: Cell<usize> = const { Cell::new(0) };
    /// In a worker: its parent port has listeners, so the worker waits for messages (Node
    /// keeps a worker alive while its port is referenced).
    static LISTENING: Cell<bool> = const { Cell::new(false) };
}

/// Whether events may still arrive that the event loop must wait for.
pub fn live() -> usize {
    CHILDREN.with(Cell::get) + usize::from(LISTENING.with(Cell::get))
}

pub fn install(ctx: &Ctx<'_>) -> javy::quickjs::Result<()> {
    let api = Object::new(ctx.clone())?;
    // start("module" | "script", text, dataJson) -> handle
    api.set(
        "start",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'_>, kind: String, text: String, data: String| {
                crate::ahead::refuse(&ctx, "a worker")?;
                let source = if kind == "script" {
                    WorkerSource::Script(text)
                } else {
                    WorkerSource::Module(text)
                };
                match workers::start(&source, &data) {
                    Ok(id) => {
                        CHILDREN.with(|c| c.set(c.get() + 1));
                        Ok(id)
                    }
                    Err(message) => Err(Exception::throw_message(&ctx, &message)),
                }
            },
        )?,
    )?;
    api.set(
        "post",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'_>, id: u32, message: String| -> javy::quickjs::Result<()> {
                workers::post(id, &message).map_err(|m| Exception::throw_message(&ctx, &m))
            },
        )?,
    )?;
    api.set(
        "terminate",
        Function::new(ctx.clone(), |id: u32| workers::terminate(id))?,
    )?;
    api.set(
        "listen",
        Function::new(ctx.clone(), |on: bool| LISTENING.with(|l| l.set(on)))?,
    )?;
    ctx.globals().set("__workers", api)
}

/// Hands what arrived since the last call to the prelude; whether anything came.
pub fn deliver(ctx: &Ctx<'_>) -> bool {
    if live() == 0 {
        return false;
    }
    let Ok(event_loop) = ctx.globals().get::<_, Object>("__pichamber_loop") else {
        return false;
    };
    let Ok(handler) = event_loop.get::<_, Function>("workerEvent") else {
        return false;
    };
    let mut any = false;
    loop {
        let items = workers::take_events();
        if items.is_empty() {
            return any;
        }
        any = true;
        for item in items {
            let (kind, payload): (&str, Value) = match item.event {
                WorkerEvent::Message(text) => ("message", string(ctx, &text)),
                WorkerEvent::Error(text) => ("error", string(ctx, &text)),
                WorkerEvent::Exit(code) => {
                    CHILDREN.with(|c| c.set(c.get().saturating_sub(1)));
                    ("exit", Value::new_int(ctx.clone(), code))
                }
            };
            let _ = handler.call::<_, ()>((item.worker, kind, payload));
        }
    }
}

fn string<'js>(ctx: &Ctx<'js>, text: &str) -> Value<'js> {
    javy::quickjs::String::from_str(ctx.clone(), text)
        .map(|s| s.into_value())
        .unwrap_or_else(|_| Value::new_undefined(ctx.clone()))
}
