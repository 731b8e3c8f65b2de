//! The connection cap of `sitehost serve`, fair to clients that send requests. At the cap,
//! a new connection evicts the open one that has waited longest for a request head (a new
//! connection, or a keep-alive one between requests), so idle sockets cannot lock out a
//! client that sends requests, however many one client opens. A request not admitted yet
//! (a head in, its signature, nonce and budget not yet checked: an unsigned form body
//! arriving) is evictable the same way, by how long it has waited for admission, so
//! requests no key stands behind cannot lock out one whose head authenticates either (a
//! signed request waits for admission for milliseconds, an unsigned body for seconds; and a
//! client's keep-alive connection between requests is not evicted before them).
//! Only when every connection holds an admitted request (or is writing an answer) is a new
//! one refused.
//!
//! The choice never looks at the peer's address, so it works the same behind a proxy.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

use tokio::sync::Notify;

/// The open connections, at most `cap` of them.
pub struct Connections {
    cap: usize,
    open: Mutex<Open>,
}

#[derive(Default)]
struct Open {
    next_id: u64,
    slots: HashMap<u64, Arc<Slot>>,
}

/// One open connection's state, shared by its task and the cap.
pub struct Slot {
    state: Mutex<State>,
    evicted: Notify,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum State {
    /// Waiting for a request head since then: evictable.
    Waiting(Instant),
    /// A request head arrived then, and the request is not admitted yet: evictable.
    Unadmitted(Instant),
    /// The request was admitted, or its answer is being written: kept until it is sent.
    Busy,
    Evicted,
}

impl State {
    /// Since when an evictable connection has waited (for a head, or for its request's
    /// admission): the longest waiting is evicted first. `None` when not evictable.
    fn waiting_since(self) -> Option<Instant> {
        match self {
            State::Waiting(since) | State::Unadmitted(since) => Some(since),
            State::Busy | State::Evicted => None,
        }
    }
}

/// Locks whatever a panicking thread left: every state written is whole.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Connections {
    pub fn new(cap: usize) -> Arc<Self> {
        Arc::new(Connections {
            cap: cap.max(1),
            open: Mutex::new(Open::default()),
        })
    }

    /// Admits a new connection, evicting one at the cap (see the module's comment); `None`
    /// when every open connection holds an admitted request.
    pub fn admit(self: &Arc<Self>, now: Instant) -> Option<Connection> {
        let mut open = lock(&self.open);
        if open.slots.len() >= self.cap {
            let (id, slot) = open.longest_waiting()?;
            open.slots.remove(&id);
            *lock(&slot.state) = State::Evicted;
            // Stored as a permit when the task is not waiting on it yet.
            slot.evicted.notify_one();
        }
        let id = open.next_id;
        open.next_id += 1;
        let slot = Arc::new(Slot {
            state: Mutex::new(State::Waiting(now)),
            evicted: Notify::new(),
        });
        open.slots.insert(id, Arc::clone(&slot));
        Some(Connection {
            id,
            slot,
            connections: Arc::clone(self),
        })
    }

    /// How many connections are open.
    pub fn len(&self) -> usize {
        lock(&self.open).slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Open {
    /// The connection to evict: the one that has waited longest for a request head or for
    /// its request's admission. Its state is read under the
    /// registry's lock, which every eviction holds, so it cannot be evicted twice; it may
    /// turn busy right after, which only means its request was admitted as it was dropped.
    fn longest_waiting(&self) -> Option<(u64, Arc<Slot>)> {
        self.slots
            .iter()
            .filter_map(|(id, slot)| Some((lock(&slot.state).waiting_since()?, *id, slot)))
            .min_by_key(|(since, id, _)| (*since, *id))
            .map(|(_, id, slot)| (id, Arc::clone(slot)))
    }
}

/// An admitted connection: it leaves the count when dropped.
pub struct Connection {
    id: u64,
    slot: Arc<Slot>,
    connections: Arc<Connections>,
}

impl Connection {
    /// Completes once the cap has evicted this connection: its task then drops it.
    pub async fn evicted(&self) {
        self.slot.evicted.notified().await;
    }

    /// The state its requests mark (see [`Slot::request`]).
    pub fn slot(&self) -> Arc<Slot> {
        Arc::clone(&self.slot)
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        lock(&self.connections.open).slots.remove(&self.id);
    }
}

impl Slot {
    /// A request head has arrived: the connection is evicted only when none waits for a
    /// head, until [`Request::admitted`]; then not until the returned guard is dropped,
    /// which the server does when the answer's body is done.
    pub fn request(self: &Arc<Self>) -> Request {
        let mut state = lock(&self.state);
        if *state != State::Evicted {
            *state = State::Unadmitted(Instant::now());
        }
        Request(Arc::clone(self))
    }
}

#[cfg(test)]
impl Slot {
    fn evicted_now(&self) -> bool {
        *lock(&self.state) == State::Evicted
    }
}

/// A request under way on a connection (see [`Slot::request`]).
pub struct Request(Arc<Slot>);

impl Request {
    /// The request is admitted (its signature, nonce and budget checked, or its staged
    /// form's claim taken), or its answer is being written: the connection is kept.
    pub fn admitted(&self) {
        let mut state = lock(&self.0.state);
        if matches!(*state, State::Unadmitted(_)) {
            *state = State::Busy;
        }
    }

    /// Whether [`Request::admitted`] was called (or the connection was evicted meanwhile).
    pub fn is_admitted(&self) -> bool {
        !matches!(*lock(&self.0.state), State::Unadmitted(_))
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        let mut state = lock(&self.0.state);
        if matches!(*state, State::Busy | State::Unadmitted(_)) {
            *state = State::Waiting(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn at_the_cap_the_longest_waiting_connection_is_evicted() {
        let connections = Connections::new(3);
        // Admission times in the past, so that a request ending now is the newest.
        let t0 = Instant::now() - Duration::from_secs(1);
        let at = |ms| t0 + Duration::from_millis(ms);
        let first = connections.admit(at(0)).expect("room");
        let second = connections.admit(at(1)).expect("room");
        let third = connections.admit(at(2)).expect("room");
        // The first is mid-request: the second, the longest waiting, is evicted.
        let request = first.slot().request();
        request.admitted();
        let fourth = connections.admit(at(3)).expect("evicts one");
        assert_eq!(connections.len(), 3);
        tokio::time::timeout(Duration::from_secs(1), second.evicted())
            .await
            .expect("the second was evicted");
        // A connection whose answer is done waits again, from now: newer than the rest.
        drop(request);
        let fifth = connections.admit(Instant::now()).expect("evicts one");
        tokio::time::timeout(Duration::from_secs(1), third.evicted())
            .await
            .expect("the third was evicted");
        // Every connection busy: a new one is refused.
        let busy = [
            first.slot().request(),
            fourth.slot().request(),
            fifth.slot().request(),
        ];
        busy.iter().for_each(Request::admitted);
        assert!(connections.admit(Instant::now()).is_none());
        assert_eq!(connections.len(), 3);
        // A connection closed makes room without evicting anyone.
        drop(fifth);
        assert!(connections.admit(Instant::now()).is_some());
        drop(busy);
    }

    /// Requests not admitted yet (an unsigned body arriving) are evicted as idle
    /// connections are, the longest waiting first; admitted ones never are.
    #[tokio::test]
    async fn unadmitted_requests_are_evicted_like_idle_connections() {
        let connections = Connections::new(3);
        let t0 = Instant::now() - Duration::from_secs(1);
        let at = |ms| t0 + Duration::from_millis(ms);
        let signed = connections.admit(at(0)).expect("room");
        let unsigned = connections.admit(at(1)).expect("room");
        let idle = connections.admit(at(2)).expect("room");
        let admitted = signed.slot().request();
        admitted.admitted();
        let unsigned_request = unsigned.slot().request();
        assert!(!unsigned_request.is_admitted());
        // A keep-alive connection idle since now is newer than the unadmitted request.
        drop(idle.slot().request());
        let _newer = connections
            .admit(Instant::now())
            .expect("evicts the unsigned one");
        tokio::time::timeout(Duration::from_secs(1), unsigned.evicted())
            .await
            .expect("the unadmitted request was evicted");
        assert!(!signed.slot.evicted_now() && !idle.slot.evicted_now());
        drop(unsigned_request);
    }

    #[test]
    fn an_evicted_connection_stays_evicted_when_its_head_arrives() {
        let connections = Connections::new(1);
        let first = connections.admit(Instant::now()).expect("room");
        let _second = connections.admit(Instant::now()).expect("evicts the first");
        let request = first.slot().request();
        drop(request);
        assert_eq!(*lock(&first.slot.state), State::Evicted);
        // Dropping the evicted one leaves the second counted.
        drop(first);
        assert_eq!(connections.len(), 1);
    }
}
