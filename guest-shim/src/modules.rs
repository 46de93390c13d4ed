//! Module sources by canonical id: the prelude and virtual modules compiled into the shim, and
//! the extension's own modules handed over by the host at load.

use std::cell::RefCell;
use std::collections::HashMap;

use crate::bindings::pichamber::extension::types::ModuleSource;

include!(concat!(env!("OUT_DIR"), "/virtual_modules.rs"));

pub const PRELUDE_ID: &str = "pichamber:prelude";

thread_local! {
    static EXTENSION_MODULES: RefCell<HashMap<String, String>> = RefCell::new(HashMap::new());
}

pub fn set_extension_modules(sources: Vec<ModuleSource>) {
    EXTENSION_MODULES.with(|m| {
        let mut m = m.borrow_mut();
        for source in sources {
            match source.id.strip_prefix(crate::package_files::FILE_ID_PREFIX) {
                Some(path) => crate::package_files::add(path.to_owned(), source.source),
                None => {
                    m.insert(source.id, source.source);
                }
            }
        }
    });
}

/// The ids of the extension's modules not compiled yet.
pub fn extension_module_ids() -> Vec<String> {
    EXTENSION_MODULES.with(|m| m.borrow().keys().cloned().collect())
}

/// Hands a module's source back (its compilation failed: importing it reports why).
pub fn restore_source(id: String, source: String) {
    EXTENSION_MODULES.with(|m| m.borrow_mut().insert(id, source));
}

/// The source of a module, handed out once: QuickJS keeps the compiled module, so the text
/// can be freed.
pub fn take_source(id: &str) -> Option<String> {
    if let Some((_, source)) = VIRTUAL_MODULES.iter().find(|(name, _)| *name == id) {
        return Some((*source).to_owned());
    }
    EXTENSION_MODULES.with(|m| m.borrow_mut().remove(id))
}
