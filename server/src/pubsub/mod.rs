//! Pub/sub state and delivery: who listens to which channel or pattern, and the
//! messages (RESP2 arrays, RESP3 pushes) written into the listeners' output buffers.
//! Keyspace notifications (crate::notify) publish through the same path.

mod deliver;
mod state;

pub use state::{write_push, ClientSubs, Part, PubSub};
