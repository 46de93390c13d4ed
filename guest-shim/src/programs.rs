//! Programs with live stdio (WIT `programs`, `child_process.spawn`): `__programs` gives the
//! prelude spawn / write / closeStdin / kill, with bytes crossing as Uint8Arrays rather than
//! JSON; [`deliver`] hands what arrived to the prelude's `__pichamber_loop.programOutput`.

use std::cell::Cell;

use javy::quickjs::{Ctx, Exception, Function, Object, TypedArray, Value};

use crate::bindings::pichamber::extension::programs::{self, ProgramOutput, SpawnRequest};

thread_local! {
    /// Programs spawned whose end was not delivered yet: while there are any, the event loop
    /// has work pending and collects their output.
    static LIVE: Cell<usize> = const { Cell::new(0) };
}

pub fn live() -> usize {
    LIVE.with(Cell::get)
}

pub fn install(ctx: &Ctx<'_>) -> javy::quickjs::Result<()> {
    let api = Object::new(ctx.clone())?;
    // spawn(command, args, cwd, env): env is [[name, value], ...].
    api.set(
        "spawn",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'_>,
             command: String,
             args: Vec<String>,
             cwd: Option<String>,
             env: Vec<Vec<String>>|
             -> javy::quickjs::Result<u32> {
                crate::ahead::refuse(&ctx, "a program")?;
                let env = env
                    .into_iter()
                    .filter_map(|pair| match <[String; 2]>::try_from(pair) {
                        Ok([name, value]) => Some((name, value)),
                        Err(_) => None,
                    })
                    .collect();
                let request = SpawnRequest {
                    command,
                    args,
                    cwd,
                    env,
                };
                match programs::spawn(&request) {
                    Ok(id) => {
                        LIVE.with(|live| live.set(live.get() + 1));
                        Ok(id)
                    }
                    Err(message) => Err(Exception::throw_message(&ctx, &message)),
                }
            },
        )?,
    )?;
    api.set(
        "write",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'_>, id: u32, data: TypedArray<'_, u8>| -> javy::quickjs::Result<()> {
                let bytes = data.as_bytes().unwrap_or_default().to_vec();
                programs::write(id, &bytes).map_err(|m| Exception::throw_message(&ctx, &m))
            },
        )?,
    )?;
    api.set(
        "closeStdin",
        Function::new(ctx.clone(), |id: u32| programs::close_stdin(id))?,
    )?;
    api.set(
        "kill",
        Function::new(ctx.clone(), |id: u32, signal: String| {
            programs::kill(id, &signal)
        })?,
    )?;
    ctx.globals().set("__programs", api)
}

/// Hands what the programs sent since the last call to the prelude; whether anything came.
pub fn deliver(ctx: &Ctx<'_>) -> bool {
    if live() == 0 {
        return false;
    }
    let Ok(event_loop) = ctx.globals().get::<_, Object>("__pichamber_loop") else {
        return false;
    };
    let Ok(handler) = event_loop.get::<_, Function>("programOutput") else {
        return false;
    };
    let mut any = false;
    loop {
        let items = programs::take_output();
        if items.is_empty() {
            return any;
        }
        any = true;
        for item in items {
            let (kind, payload): (&str, Value) = match item.output {
                ProgramOutput::Stdout(data) => ("stdout", bytes(ctx, data)),
                ProgramOutput::Stderr(data) => ("stderr", bytes(ctx, data)),
                ProgramOutput::Exit(exit) => ("exit", exit_value(ctx, exit.code, exit.signal)),
                ProgramOutput::Closed => {
                    LIVE.with(|live| live.set(live.get().saturating_sub(1)));
                    ("closed", Value::new_undefined(ctx.clone()))
                }
            };
            let _ = handler.call::<_, ()>((item.program, kind, payload));
        }
    }
}

/// `{code, signal}`, each null when absent (as Node's 'exit' arguments).
fn exit_value<'js>(ctx: &Ctx<'js>, code: Option<i32>, signal: Option<String>) -> Value<'js> {
    let Ok(object) = Object::new(ctx.clone()) else {
        return Value::new_undefined(ctx.clone());
    };
    let _ = object.set("code", code);
    let _ = object.set("signal", signal);
    object.into_value()
}

fn bytes<'js>(ctx: &Ctx<'js>, data: Vec<u8>) -> Value<'js> {
    TypedArray::<u8>::new(ctx.clone(), data)
        .map(|array| array.into_value())
        .unwrap_or_else(|_| Value::new_undefined(ctx.clone()))
}
