//! The session-file parser on any bytes: opening gives a session or a clear error, never a
//! panic; a file it refuses is left exactly as it was, and a read-only open never writes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pichamber_session::store::{SessionStore, SyncPolicy};

fuzz_target!(|data: &[u8]| {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    std::fs::write(&path, data).unwrap();
    let _ = SessionStore::read_only(&path);
    assert_eq!(std::fs::read(&path).unwrap(), data, "a read-only open wrote");
    if let Err(error) = SessionStore::open(&path, SyncPolicy::None) {
        assert!(!format!("{error:#}").is_empty());
        assert_eq!(std::fs::read(&path).unwrap(), data, "a refused file was changed");
    }
});
