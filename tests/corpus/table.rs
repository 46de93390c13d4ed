//! Markdown-table helpers shared by the generated compatibility documents
//! (docs/COMPATIBILITY.md from tests/corpus.rs, docs/THIRD_PARTY.md from tests/thirdparty.rs).

/// `text` cut to `max` characters.
pub fn cut(text: &str, max: usize) -> String {
    if text.chars().count() > max {
        format!("{}…", text.chars().take(max).collect::<String>())
    } else {
        text.to_owned()
    }
}

/// Markdown table cell text: one line, no pipes.
pub fn cell(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    one_line.replace('|', "\\|")
}

pub fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// Runs `run` on every item, `threads` at a time (most of an item's time is spent waiting for
/// its processes, so a few more than the cores), and returns the results in finishing order.
pub fn in_parallel<I: Sync, T: Send>(
    items: &[I],
    threads: usize,
    run: impl Fn(&I) -> T + Sync,
) -> Vec<T> {
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    let results = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads.max(1) {
            scope.spawn(|| {
                while let Some(item) = items.get(next.fetch_add(1, Ordering::SeqCst)) {
                    let result = run(item);
                    results.lock().unwrap().push(result);
                }
            });
        }
    });
    results.into_inner().unwrap()
}
