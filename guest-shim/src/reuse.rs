//! `__pichamber_reusable(candidate, template, count)`: whether the context object one dispatch
//! made may be handed to the next instead of a new one. Building it is a third of a no-op
//! dispatch (QuickJS adds its properties one at a time); reusing it is safe only when no one
//! could tell: nothing holds it, strongly or weakly, and it is exactly as made.
//!
//! What this reads of an object (the count of references, its shape, property array and weak
//! references) is where quickjs-ng 0.15 keeps it on wasm32 (rquickjs-sys 0.12.2). The prelude
//! checks the answers on objects it has changed in each of those ways before it relies on them,
//! and makes every context anew when one is wrong.

use javy::quickjs::{Ctx, qjs};

/// Offsets in a JSObject: after its 16-byte GC header come the shape (prototype, keys and
/// attributes, shared by every object built alike), the property values, the weak references.
const SHAPE: usize = 16;
const PROPERTIES: usize = 20;
const FIRST_WEAK_REF: usize = 24;
/// The references to the candidate while the prelude asks: the local it took it into and the
/// argument (`takeSpareContext`).
const REFERENCES_WHILE_ASKED: i32 = 2;

pub fn install(ctx: &Ctx<'_>) -> javy::quickjs::Result<()> {
    crate::engine::install_c_function(ctx, "__pichamber_reusable", Some(reusable), 3)
}

/// True when `candidate` has exactly the references the prelude's own call gives it, no weak
/// reference, the template's shape, is extensible (the template is) and holds the very same
/// values, getters and setters in its first `count` properties as the template.
unsafe extern "C" fn reusable(
    ctx: *mut qjs::JSContext,
    _this: qjs::JSValue,
    argc: std::ffi::c_int,
    argv: *mut qjs::JSValue,
) -> qjs::JSValue {
    if argc < 3 {
        return qjs::JS_FALSE;
    }
    // SAFETY: QuickJS passes `argc` live arguments; an object value points at a JSObject whose
    // first field is its reference count (quickjs.h's JSRefCountHeader) and whose other fields
    // are at the offsets above; a property (a value, or a getter and setter pair) is 8 bytes,
    // and the arrays hold at least `count` when the shapes, which record that count, are the
    // same (the caller passes the template's).
    unsafe {
        let (candidate, template, count) = (*argv, *argv.add(1), *argv.add(2));
        let is_object = |v| qjs::JS_VALUE_GET_TAG(v) == qjs::JS_TAG_OBJECT;
        if !is_object(candidate)
            || !is_object(template)
            || qjs::JS_VALUE_GET_TAG(count) != qjs::JS_TAG_INT
        {
            return qjs::JS_FALSE;
        }
        let Ok(count) = usize::try_from(qjs::JS_VALUE_GET_INT(count)) else {
            return qjs::JS_FALSE;
        };
        let (c, t) = (
            qjs::JS_VALUE_GET_PTR(candidate).cast::<u8>(),
            qjs::JS_VALUE_GET_PTR(template).cast::<u8>(),
        );
        let field = |object: *const u8, offset: usize| object.add(offset).cast::<usize>().read();
        let properties = |object: *const u8| {
            std::slice::from_raw_parts(field(object, PROPERTIES) as *const u64, count)
        };
        // Word by word: slice equality would call wasi-libc's memcmp, which goes byte by byte.
        let same_values = |a: &[u64], b: &[u64]| a.iter().zip(b).all(|(x, y)| x == y);
        let same = c.cast::<i32>().read() == REFERENCES_WHILE_ASKED
            && field(c, FIRST_WEAK_REF) == 0
            && field(c, SHAPE) == field(t, SHAPE)
            && qjs::JS_IsExtensible(ctx, candidate) == 1
            && same_values(properties(c), properties(t));
        if same { qjs::JS_TRUE } else { qjs::JS_FALSE }
    }
}
