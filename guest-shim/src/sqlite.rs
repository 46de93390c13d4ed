//! node:sqlite's `DatabaseSync` and `StatementSync`, over a SQLite compiled into the guest
//! (rusqlite's bundled amalgamation; its unix file layer over wasi-libc, in `unix-none` mode).
//! A database file is opened through WASI like any other file, so the extension's read and
//! write grants decide which databases exist for it; nothing crosses to the host.
//!
//! WASI has no file locks: SQLite cannot keep two connections from writing one file at once,
//! so a database another program writes concurrently may be read torn.
//!
//! Statements are kept by their SQL text in JavaScript and prepared from the connection's
//! statement cache on each call, so no borrow of a connection outlives a call.
//!
//! Values cross as JSON: an integer beyond 2^53 as `{"i": "digits"}`, a blob as
//! `{"b": base64}`, a real that JSON cannot hold as `{"r": "NaN" | "Infinity" | "-Infinity"}`.
//! Errors are `code\u{1}errcode\u{1}errstr\u{1}message`, which the module turns into Node's.

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Duration;

use base64::Engine as _;
use rusqlite::types::{Value as Sql, ValueRef};
use rusqlite::{Connection, OpenFlags, Statement, ffi};
use serde_json::{Map, Value, json};

use crate::hostcall::Args;

/// Open databases per instance; each holds a page cache, so a loop that never closes its
/// databases stops here instead of at the instance's memory limit.
const MAX_DATABASES: usize = 64;
/// Prepared statements kept per database (the rest are prepared again when used).
const STATEMENT_CACHE: usize = 64;
/// JavaScript's largest integer that converts exactly.
const MAX_SAFE: i64 = (1 << 53) - 1;

thread_local! {
    static DATABASES: RefCell<HashMap<u32, Connection>> = RefCell::new(HashMap::new());
    static NEXT_ID: RefCell<u32> = const { RefCell::new(1) };
}

pub fn call(op: &str, a: &Args) -> Result<Value, String> {
    if op == "open" {
        return open(a);
    }
    let id = a.value(0).as_u64().unwrap_or(0) as u32;
    if op == "close" {
        return match DATABASES.with(|d| d.borrow_mut().remove(&id)) {
            Some(db) => db.close().map(|()| Value::Null).map_err(|(_, e)| error(e)),
            None => Err(not_open()),
        };
    }
    DATABASES.with(|d| {
        let databases = d.borrow();
        let db = databases.get(&id).ok_or_else(not_open)?;
        let sql = a.str(1);
        match op {
            "exec" => db.execute_batch(&sql).map(|()| Value::Null).map_err(error),
            "prepare" => db.prepare_cached(&sql).map(|_| Value::Null).map_err(error),
            "run" | "all" | "get" | "expandedSQL" => {
                let mut statement = db.prepare_cached(&sql).map_err(error)?;
                bind(&mut statement, a.value(2), a.value(3), a.value(4))?;
                match op {
                    "run" => run(db, &mut statement),
                    "expandedSQL" => Ok(json!(statement.expanded_sql())),
                    _ => rows(&mut statement, op == "get"),
                }
            }
            "columns" => columns(&*db.prepare_cached(&sql).map_err(error)?),
            "isTransaction" => Ok(json!(!db.is_autocommit())),
            "location" => {
                let name = std::ffi::CString::new(a.opt_str(1).unwrap_or_else(|| "main".into()))
                    .map_err(|_| state("a database name cannot hold NUL"))?;
                // SAFETY: the handle is this open connection's; SQLite returns null or a
                // string it owns until the database is detached, copied at once.
                let path = unsafe {
                    let p = ffi::sqlite3_db_filename(db.handle(), name.as_ptr());
                    (!p.is_null())
                        .then(|| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned())
                };
                Ok(json!(path.filter(|p| !p.is_empty())))
            }
            other => Err(state(&format!("unknown sqlite operation {other:?}"))),
        }
    })
}

/// `open(path, {readOnly, enableForeignKeyConstraints, enableDoubleQuotedStringLiterals,
/// timeout})` → the database's id.
fn open(a: &Args) -> Result<Value, String> {
    if DATABASES.with(|d| d.borrow().len()) >= MAX_DATABASES {
        return Err(state(&format!(
            "too many open databases (limit {MAX_DATABASES}): close one first"
        )));
    }
    let path = a.str(0);
    let options = a.value(1);
    let flag =
        |key: &str, default: bool| options.get(key).and_then(Value::as_bool).unwrap_or(default);
    let read_only = flag("readOnly", false);
    let mut flags = OpenFlags::SQLITE_OPEN_URI | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    flags |= if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_CREATE
    };
    // unix-none: POSIX locks do not exist under WASI (fcntl fails, which the default unix
    // VFS reports as SQLITE_PERM on a read-only grant), so SQLite takes none.
    let db = Connection::open_with_flags_and_vfs(&path, flags, c"unix-none").map_err(|e| {
        // rusqlite names the file after SQLite's message; SQLite (and Node) do not.
        let suffix = format!(": {path}");
        let text = error(e);
        let text = text.strip_suffix(&suffix).unwrap_or(&text).to_owned();
        match crate::fs::capability_hint(&path, !read_only, false) {
            Some(hint) => format!("{text} — {hint}"),
            None => text,
        }
    })?;
    db.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    let setting = |sql: &str| db.execute_batch(sql).map_err(error);
    setting(if flag("enableForeignKeyConstraints", true) {
        "PRAGMA foreign_keys = ON"
    } else {
        "PRAGMA foreign_keys = OFF"
    })?;
    db.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_DQS_DML,
        flag("enableDoubleQuotedStringLiterals", false),
    )
    .map_err(error)?;
    db.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_DQS_DDL,
        flag("enableDoubleQuotedStringLiterals", false),
    )
    .map_err(error)?;
    if let Some(ms) = options.get("timeout").and_then(Value::as_u64) {
        db.busy_timeout(Duration::from_millis(ms)).map_err(error)?;
    }
    let id = NEXT_ID.with(|n| {
        let mut n = n.borrow_mut();
        *n += 1;
        *n - 1
    });
    DATABASES.with(|d| d.borrow_mut().insert(id, db));
    Ok(json!(id))
}

/// Binds as Node does: the keys of `named` to the parameters of that name (a bare key to
/// `$key`, `:key` or `@key` when `allowBare`), then each of `positional` to the next
/// parameter that has no name.
fn bind(
    statement: &mut Statement<'_>,
    named: &Value,
    positional: &Value,
    options: &Value,
) -> Result<(), String> {
    let option =
        |key: &str, default: bool| options.get(key).and_then(Value::as_bool).unwrap_or(default);
    if let Value::Object(named) = named {
        let count = statement.parameter_count();
        for (key, value) in named {
            let mut index = statement.parameter_index(key).map_err(error)?;
            if index.is_none() && option("allowBareNamedParameters", true) {
                let mut found: Option<(usize, String)> = None;
                for i in 1..=count {
                    let Some(name) = statement.parameter_name(i) else {
                        continue;
                    };
                    if name.len() > 1 && name[1..] == *key && !name.starts_with('?') {
                        if let Some((_, first)) = &found {
                            return Err(state(&format!(
                                "Cannot create bare named parameter '{key}' because of conflicting names '{first}' and '{name}'."
                            )));
                        }
                        found = Some((i, name.to_owned()));
                    }
                }
                index = found.map(|(i, _)| i);
            }
            match index {
                Some(i) => bind_one(statement, i, value)?,
                None if option("allowUnknownNamedParameters", false) => {}
                None => return Err(state(&format!("Unknown named parameter '{key}'"))),
            }
        }
    }
    let mut next = 1;
    for value in positional.as_array().into_iter().flatten() {
        while next <= statement.parameter_count() && statement.parameter_name(next).is_some() {
            next += 1;
        }
        bind_one(statement, next, value)?;
        next += 1;
    }
    Ok(())
}

fn bind_one(statement: &mut Statement<'_>, index: usize, value: &Value) -> Result<(), String> {
    let invalid = || {
        format!(
            "ERR_INVALID_ARG_TYPE\u{1}\u{1}\u{1}Provided value cannot be bound to SQLite parameter {index}."
        )
    };
    let sql = match value {
        Value::Null => Sql::Null,
        // JavaScript numbers are doubles, and Node binds them so.
        Value::Number(n) => Sql::Real(n.as_f64().ok_or_else(invalid)?),
        Value::String(s) => Sql::Text(s.clone()),
        Value::Object(o) => match o.iter().next() {
            Some((k, Value::String(s))) if k == "i" => Sql::Integer(s.parse().map_err(|_| {
                format!("ERR_INVALID_ARG_VALUE\u{1}\u{1}\u{1}BigInt value is too large to bind.")
            })?),
            Some((k, Value::String(s))) if k == "b" => Sql::Blob(
                base64::engine::general_purpose::STANDARD
                    .decode(s)
                    .map_err(|_| invalid())?,
            ),
            Some((k, Value::String(s))) if k == "r" => Sql::Real(match s.as_str() {
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                _ => f64::NAN,
            }),
            _ => return Err(invalid()),
        },
        Value::Bool(_) | Value::Array(_) => return Err(invalid()),
    };
    statement
        .raw_bind_parameter(index, sql)
        .map_err(|e| match e {
            rusqlite::Error::InvalidParameterCount(..) => format!(
                "ERR_SQLITE_ERROR\u{1}25\u{1}column index out of range\u{1}column index out of range"
            ),
            e => error(e),
        })
}

/// Steps the statement to its end, as Node's `run()` does (rows of a query are skipped).
fn run(db: &Connection, statement: &mut Statement<'_>) -> Result<Value, String> {
    let mut rows = statement.raw_query();
    while rows.next().map_err(error)?.is_some() {}
    Ok(json!({
        "changes": integer(db.changes() as i64),
        "lastInsertRowid": integer(db.last_insert_rowid()),
    }))
}

/// `{names, rows: [[cell]]}`; only the first row for `get`.
fn rows(statement: &mut Statement<'_>, first_only: bool) -> Result<Value, String> {
    let names: Vec<String> = statement
        .column_names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let width = names.len();
    let mut out = Vec::new();
    let mut rows = statement.raw_query();
    while let Some(row) = rows.next().map_err(error)? {
        let mut cells = Vec::with_capacity(width);
        for i in 0..width {
            cells.push(cell(row.get_ref(i).map_err(error)?));
        }
        out.push(Value::Array(cells));
        if first_only {
            break;
        }
    }
    Ok(json!({ "names": names, "rows": out }))
}

fn cell(value: ValueRef<'_>) -> Value {
    match value {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => integer(i),
        ValueRef::Real(f) if f.is_finite() => json!(f),
        ValueRef::Real(f) => {
            json!({ "r": if f.is_nan() { "NaN" } else if f > 0.0 { "Infinity" } else { "-Infinity" } })
        }
        ValueRef::Text(t) => Value::String(String::from_utf8_lossy(t).into_owned()),
        ValueRef::Blob(b) => json!({ "b": base64::engine::general_purpose::STANDARD.encode(b) }),
    }
}

fn integer(i: i64) -> Value {
    if (-MAX_SAFE..=MAX_SAFE).contains(&i) {
        json!(i)
    } else {
        json!({ "i": i.to_string() })
    }
}

/// `columns()`: where each result column comes from (null for an expression).
fn columns(statement: &Statement<'_>) -> Result<Value, String> {
    let types: Vec<Option<String>> = statement
        .columns()
        .map(|c| c.decl_type().map(str::to_owned))
        .collect();
    Ok(Value::Array(
        statement
            .columns_with_metadata()
            .zip(types)
            .map(|(c, declared)| {
                let mut column = Map::new();
                column.insert("column".into(), json!(c.origin_name()));
                column.insert("database".into(), json!(c.database_name()));
                column.insert("name".into(), json!(c.name()));
                column.insert("table".into(), json!(c.table_name()));
                column.insert("type".into(), json!(declared));
                Value::Object(column)
            })
            .collect(),
    ))
}

fn error(e: rusqlite::Error) -> String {
    match e {
        rusqlite::Error::SqliteFailure(failure, message) => {
            // SAFETY: sqlite3_errstr returns a static string for any code.
            let errstr =
                unsafe { std::ffi::CStr::from_ptr(ffi::sqlite3_errstr(failure.extended_code)) }
                    .to_string_lossy()
                    .into_owned();
            let message = message.unwrap_or_else(|| errstr.clone());
            format!(
                "ERR_SQLITE_ERROR\u{1}{}\u{1}{errstr}\u{1}{message}",
                failure.extended_code
            )
        }
        // A syntax error: SQLite's message, without the statement rusqlite adds to it.
        rusqlite::Error::SqlInputError {
            error: failure,
            msg,
            ..
        } => error(rusqlite::Error::SqliteFailure(failure, Some(msg))),
        other => format!("ERR_SQLITE_ERROR\u{1}1\u{1}SQL logic error\u{1}{other}"),
    }
}

fn state(message: &str) -> String {
    format!("ERR_INVALID_STATE\u{1}\u{1}\u{1}{message}")
}

fn not_open() -> String {
    state("database is not open")
}
