//! A JavaScript value as `JSON.stringify` would write it, read from the engine's values
//! directly. QuickJS's own stringify builds a wrapper object, a stack array and key arrays on
//! every call: for the few small values of a host call that was half of the call's cost.
//!
//! Only what is plainly data is read here: primitives, arrays and objects of the ordinary class
//! without `toJSON`, no proxy, no cycle, within a count. Anything else (a Date, a Map, a typed
//! array, a boxed primitive, a BigInt, a string with a lone surrogate) makes the caller hand the
//! whole value to `JSON.stringify` instead, so the result is always what that writes; the one
//! difference is that getters read before such a value was met run twice. A value nested past
//! serde's own limit is refused here, before `JSON.stringify` could overflow the guest's stack,
//! when the reader meets the depth before anything it declines (otherwise `JSON.stringify` sees
//! it, as it did before this reader).

use javy::quickjs::{Array, Atom, Object, Type, Value, atom::PredefinedAtom, object::Filter, qjs};
use serde_json::{Map, Number, Value as Json};

/// Objects nested deeper than serde reads (its limit) are refused; more values than
/// [`MAX_VALUES`] are left to `JSON.stringify`.
pub const MAX_DEPTH: usize = 128;
const MAX_VALUES: usize = 100_000;

/// QuickJS's first two classes (its `JS_CLASS_OBJECT` and `JS_CLASS_ARRAY`, not exported).
const CLASS_OBJECT: qjs::JSClassID = 1;
const CLASS_ARRAY: qjs::JSClassID = 2;

/// Why a value was not read.
pub enum NotRead {
    /// Not plainly data: `JSON.stringify` decides.
    NotPlain,
    /// A getter threw: the exception is pending in the context.
    Thrown(javy::quickjs::Error),
    /// Objects nested deeper than [`MAX_DEPTH`].
    TooDeep,
}

/// `value` as JSON; `Ok(None)` where JSON leaves it out (undefined, a function, a symbol).
pub fn read<'js>(value: &Value<'js>) -> Result<Option<Json>, NotRead> {
    Reader {
        path: Vec::new(),
        values: 0,
    }
    .value(value)
}

struct Reader {
    /// The objects being read, innermost last: meeting one again is a cycle.
    path: Vec<usize>,
    values: usize,
}

impl Reader {
    fn value<'js>(&mut self, value: &Value<'js>) -> Result<Option<Json>, NotRead> {
        self.values += 1;
        if self.values > MAX_VALUES {
            return Err(NotRead::NotPlain);
        }
        Ok(Some(match value.type_of() {
            Type::Undefined | Type::Uninitialized | Type::Symbol => return Ok(None),
            Type::Null => Json::Null,
            Type::Bool => Json::Bool(value.as_bool().unwrap_or_default()),
            Type::Int => Json::from(value.as_int().unwrap_or_default()),
            Type::Float => number(value.as_float().unwrap_or(f64::NAN)),
            Type::String => Json::String(
                value
                    .as_string()
                    .and_then(|s| s.to_string().ok())
                    .ok_or(NotRead::NotPlain)?,
            ),
            Type::Array | Type::Object | Type::Function | Type::Constructor => {
                return self.object(value);
            }
            _ => return Err(NotRead::NotPlain),
        }))
    }

    fn object<'js>(&mut self, value: &Value<'js>) -> Result<Option<Json>, NotRead> {
        let object = value.as_object().ok_or(NotRead::NotPlain)?;
        if value.is_proxy() {
            return Err(NotRead::NotPlain);
        }
        let to_json: Value = object
            .get(PredefinedAtom::ToJSON)
            .map_err(NotRead::Thrown)?;
        if to_json.is_function() {
            return Err(NotRead::NotPlain);
        }
        if value.is_function() {
            return Ok(None);
        }
        // SAFETY: reads the class of a live object value.
        let class = unsafe { qjs::JS_GetClassID(value.as_raw()) };
        let is_array = class == CLASS_ARRAY;
        if !is_array && class != CLASS_OBJECT {
            return Err(NotRead::NotPlain);
        }
        // SAFETY: the pointer only identifies the object while it is on the path.
        let id = unsafe { qjs::JS_VALUE_GET_PTR(value.as_raw()) } as usize;
        if self.path.len() >= MAX_DEPTH {
            return Err(NotRead::TooDeep);
        }
        if self.path.contains(&id) {
            return Err(NotRead::NotPlain);
        }
        self.path.push(id);
        let read = if is_array {
            self.array(object.as_array().ok_or(NotRead::NotPlain)?)
        } else {
            self.fields(object)
        };
        self.path.pop();
        read.map(Some)
    }

    fn array<'js>(&mut self, array: &Array<'js>) -> Result<Json, NotRead> {
        let mut items = Vec::with_capacity(array.len());
        for i in 0..array.len() {
            let item: Value = array.get(i).map_err(NotRead::Thrown)?;
            items.push(self.value(&item)?.unwrap_or(Json::Null));
        }
        Ok(Json::Array(items))
    }

    fn fields<'js>(&mut self, object: &Object<'js>) -> Result<Json, NotRead> {
        let mut fields = Map::new();
        for key in object.own_keys::<Atom>(Filter::default()) {
            let key = key.map_err(NotRead::Thrown)?;
            let field: Value = object.get(key.clone()).map_err(NotRead::Thrown)?;
            if let Some(field) = self.value(&field)? {
                fields.insert(key.to_string().map_err(|_| NotRead::NotPlain)?, field);
            }
        }
        Ok(Json::Object(fields))
    }
}

/// A number as its JSON text would give it back to serde: NaN and the infinities are null,
/// -0 is 0, and an integral value below 1e21 is written without an exponent, so it reads as an
/// integer where one holds it. Past 2^53 JavaScript writes the shortest digits that read back
/// as the same double, then zeros (2^60 is 1152921504606847000), as Rust's `Display` does.
fn number(f: f64) -> Json {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if !f.is_finite() {
        return Json::Null;
    }
    if f.fract() != 0.0 || f.abs() >= 1e21 {
        return Number::from_f64(f).map_or(Json::Null, Json::Number);
    }
    if f.abs() < EXACT {
        return Json::from(f as i64);
    }
    serde_json::from_str(&format!("{f}")).unwrap_or(Json::Null)
}
