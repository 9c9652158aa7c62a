//! Lua scripting, as Redis 7.0: EVAL EVALSHA EVAL_RO EVALSHA_RO and SCRIPT, on Lua 5.1
//! (mlua, vendored). Scripting lives in the server, beside the other commands that
//! need a client: a script's `redis.call` runs commands through [`Server::call`], so it
//! reaches the engine's commands and the server's (PING, INFO, TIME ...) alike.
//!
//! A script is atomic: it runs to its end on the event loop's thread. Its effects are
//! what propagates (Redis 7.0's effects replication): the write commands it ran, as one
//! unit, so several are wrapped in MULTI/EXEC; nothing when it wrote nothing. ferrokv's
//! AOF never holds EVAL; one written by a Redis before 7.0 may, and its loader has the
//! server run those scripts (persistence/dataset.rs). Lua runs only scripts that clients
//! sent or that such an AOF logged; no other file is parsed by it.

mod bridge;
mod busy;
pub mod cjson;
pub mod cmsgpack;
pub mod convert;
mod eval;
pub mod functions;
pub mod libs;
pub mod lstruct;
mod registry;
mod vm;

pub use busy::{busy_refusal, exec_abort};
pub use eval::{eval, eval_keys, eval_ro, evalsha, evalsha_ro, script};
pub use vm::{declared_flags, info_memory, script_flags, Scripts};
