//! Work a guest started (dialogs, exec, fetch) and collects with `wait`: futures owned by the
//! instance's store, polled only while the guest is suspended in `wait`, so thousands of idle
//! sessions cost no threads. Each is marked by whether it waits on a person (a dialog), whose
//! time the call's wall-clock budget does not count.

use std::collections::HashMap;
use std::time::Duration;

use futures::future::{AbortHandle, Abortable, BoxFuture};
use futures::stream::{FuturesUnordered, StreamExt};

use tokio::sync::Notify;

use super::wit::{Completion, Outcome};

/// How a [`Operations::wait`] ended.
pub enum Waited {
    Completed(Completion),
    TimedOut,
    Woken,
}

type Running = BoxFuture<'static, (u32, Result<Outcome, futures::future::Aborted>)>;

/// Upper bound on concurrently pending operations per instance.
pub const MAX_PENDING: usize = 256;

#[derive(Default)]
pub struct Operations {
    next_id: u32,
    running: FuturesUnordered<Running>,
    /// The abort handle of each pending operation, and whether it waits on a person.
    handles: HashMap<u32, (AbortHandle, bool)>,
}

impl Operations {
    pub fn pending(&self) -> usize {
        self.handles.len()
    }

    /// Whether a pending operation waits on a person (a dialog).
    pub fn person_pending(&self) -> bool {
        self.handles.values().any(|(_, person)| *person)
    }

    pub fn start(
        &mut self,
        work: BoxFuture<'static, Outcome>,
        waits_on_person: bool,
    ) -> Result<u32, String> {
        if self.handles.len() >= MAX_PENDING {
            return Err(format!("too many pending operations (limit {MAX_PENDING})"));
        }
        self.next_id = self.next_id.wrapping_add(1).max(1);
        let id = self.next_id;
        let (handle, registration) = AbortHandle::new_pair();
        let work = Abortable::new(work, registration);
        self.running.push(Box::pin(async move { (id, work.await) }));
        self.handles.insert(id, (handle, waits_on_person));
        Ok(id)
    }

    pub fn cancel(&mut self, id: u32) {
        if let Some((handle, _)) = self.handles.remove(&id) {
            handle.abort();
        }
    }

    /// The next completed operation, or why there is none: `timeout` passed (at once when
    /// nothing is pending and there is no timeout), or `woken` was notified (a program's
    /// output arrived, which the guest collects itself). `woken` counts as pending work.
    pub async fn wait(&mut self, timeout: Option<Duration>, woken: Option<&Notify>) -> Waited {
        if timeout == Some(Duration::ZERO) {
            // The guest's poll between calls: what is done now, without a timer, whose
            // resolution (a millisecond) would make every poll cost a whole tick.
            return self.done_now().map_or(Waited::TimedOut, Waited::Completed);
        }
        let deadline = timeout.map(|t| tokio::time::Instant::now() + t);
        let wakeable = woken.is_some();
        let woken = async {
            match woken {
                Some(notify) => notify.notified().await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(woken);
        loop {
            let idle = self.running.is_empty();
            if idle && deadline.is_none() && !wakeable {
                return Waited::TimedOut;
            }
            let sleep = async {
                match deadline {
                    Some(deadline) => tokio::time::sleep_until(deadline).await,
                    None => std::future::pending().await,
                }
            };
            let next = async {
                if idle {
                    std::future::pending().await
                } else {
                    self.running.next().await
                }
            };
            let next = tokio::select! {
                next = next => next,
                () = sleep => return Waited::TimedOut,
                () = &mut woken => return Waited::Woken,
            };
            match next {
                Some((id, Ok(outcome))) => {
                    self.handles.remove(&id);
                    return Waited::Completed(Completion { id, outcome });
                }
                Some((_, Err(_aborted))) => continue,
                None => return Waited::TimedOut,
            }
        }
    }

    fn done_now(&mut self) -> Option<Completion> {
        use futures::FutureExt;
        loop {
            match self.running.next().now_or_never()?? {
                (id, Ok(outcome)) => {
                    self.handles.remove(&id);
                    return Some(Completion { id, outcome });
                }
                (_, Err(_aborted)) => continue,
            }
        }
    }

    pub fn cancel_all(&mut self) {
        for (_, (handle, _)) in self.handles.drain() {
            handle.abort();
        }
    }
}
