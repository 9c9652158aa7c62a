//! Persistence as the server runs it: the bookkeeping of saves and rewrites, starting and
//! collecting them, and the AOF's write status. The formats and the write path are the
//! engine's (ferrokv::persist).

mod dataset;
mod jobs;
mod schedule;

pub(crate) use dataset::ServerAsLoadHost;
pub use jobs::{AofLog, SaveJobs, BGSAVE_RETRY_DELAY_SECS};
