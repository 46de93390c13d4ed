//! Evaluating an extension's modules ahead, into its snapshot (`pre-evaluate`): while it runs,
//! every way out of the guest that belongs to a session is refused and remembered, so that
//! the host keeps such a module out of the snapshot. The prelude refuses what is JavaScript's
//! (the load context, `process.env`, timers, `Math.random`, the globals); this refuses the
//! natives that reach the host, whatever module holds a reference to them.

use std::cell::{Cell, RefCell};

use javy::quickjs::{Ctx, Exception};

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
    static TOUCHED: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
}

pub fn begin() {
    TOUCHED.with(|t| t.borrow_mut().clear());
    ON.with(|on| on.set(true));
}

/// Ends the evaluation; what it touched.
pub fn end() -> Vec<String> {
    ON.with(|on| on.set(false));
    TOUCHED.with(|t| std::mem::take(&mut *t.borrow_mut()))
}

/// A thrown error when evaluating ahead (`what` is remembered), nothing otherwise: `what` is
/// only formatted then, not on every call to the host.
pub fn refuse(ctx: &Ctx<'_>, what: impl std::fmt::Display) -> javy::quickjs::Result<()> {
    if !ON.with(Cell::get) {
        return Ok(());
    }
    TOUCHED.with(|t| t.borrow_mut().push(what.to_string()));
    Err(Exception::throw_message(
        ctx,
        &format!("{what} belongs to a session, not to the extension's snapshot"),
    ))
}
