//! Realms for `node:vm`: `__vm.create(sandbox)` makes a QuickJS context of its own (fresh
//! built-ins, its own global object) whose global inherits from the sandbox object, so the
//! code run there reads the sandbox's properties as globals; `__vm.run(realm, code, filename)`
//! evaluates a script there; `__vm.global(realm)` is its global object (the prelude copies
//! what a script defined back to the sandbox). Realms live as long as the instance: a script's
//! functions and promises may run later. A realm is not a security boundary (nor is Node's):
//! the instance is.

use std::cell::RefCell;
use std::ffi::CString;

use javy::quickjs::{Ctx, Exception, Function, Object, Value, qjs};

thread_local! {
    static REALMS: RefCell<Vec<usize>> = const { RefCell::new(Vec::new()) };
}

/// Realms one instance may create (each holds a full set of built-ins).
const MAX_REALMS: usize = 256;

fn realm(ctx: &Ctx<'_>, id: u32) -> javy::quickjs::Result<*mut qjs::JSContext> {
    REALMS
        .with(|r| r.borrow().get(id as usize).copied())
        .map(|p| p as *mut qjs::JSContext)
        .ok_or_else(|| Exception::throw_type(ctx, "not a vm context"))
}

pub fn install(ctx: &Ctx<'_>) -> javy::quickjs::Result<()> {
    let api = Object::new(ctx.clone())?;
    api.set(
        "create",
        Function::new(
            ctx.clone(),
            |ctx: Ctx<'_>, sandbox: Object<'_>| -> javy::quickjs::Result<u32> {
                if REALMS.with(|r| r.borrow().len()) >= MAX_REALMS {
                    return Err(Exception::throw_range(
                        &ctx,
                        &format!("too many vm contexts (limit {MAX_REALMS} per extension)"),
                    ));
                }
                unsafe {
                    let rt = qjs::JS_GetRuntime(ctx.as_raw().as_ptr());
                    let realm = qjs::JS_NewContext(rt);
                    if realm.is_null() {
                        return Err(Exception::throw_internal(
                            &ctx,
                            "cannot create a vm context",
                        ));
                    }
                    let global = qjs::JS_GetGlobalObject(realm);
                    qjs::JS_SetPrototype(realm, global, sandbox.as_raw());
                    qjs::JS_FreeValue(realm, global);
                    Ok(REALMS.with(|r| {
                        let mut r = r.borrow_mut();
                        r.push(realm as usize);
                        (r.len() - 1) as u32
                    }))
                }
            },
        )?,
    )?;
    api.set("run", Function::new(ctx.clone(), run)?)?;
    api.set("global", Function::new(ctx.clone(), global)?)?;
    ctx.globals().set("__vm", api)
}

/// Evaluates `code` as a script in realm `id`; what it threw is thrown on in the caller's realm.
fn run<'js>(
    ctx: Ctx<'js>,
    id: u32,
    code: String,
    filename: String,
) -> javy::quickjs::Result<Value<'js>> {
    let realm = realm(&ctx, id)?;
    let (Ok(code), Ok(filename)) = (CString::new(code), CString::new(filename)) else {
        return Err(Exception::throw_syntax(
            &ctx,
            "the script contains a NUL byte",
        ));
    };
    unsafe {
        let value = qjs::JS_Eval(
            realm,
            code.as_ptr(),
            code.as_bytes().len() as _,
            filename.as_ptr(),
            qjs::JS_EVAL_TYPE_GLOBAL as i32,
        );
        if qjs::JS_VALUE_GET_TAG(value) == qjs::JS_TAG_EXCEPTION {
            let thrown = qjs::JS_GetException(realm);
            qjs::JS_Throw(ctx.as_raw().as_ptr(), thrown);
            return Err(javy::quickjs::Error::Exception);
        }
        Ok(Value::from_raw(ctx, value))
    }
}

/// The global object of realm `id`.
fn global<'js>(ctx: Ctx<'js>, id: u32) -> javy::quickjs::Result<Value<'js>> {
    let realm = realm(&ctx, id)?;
    unsafe { Ok(Value::from_raw(ctx.clone(), qjs::JS_GetGlobalObject(realm))) }
}
