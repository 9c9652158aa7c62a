//! A script past busy-reply-threshold: the BUSY refusals other clients get, and SCRIPT
//! KILL / FUNCTION KILL.

use ferrokv::command::eq_ic;
use ferrokv::Reply;

use super::vm::{BUSY_EVAL, BUSY_FUNCTION};
use crate::server::Server;

/// SCRIPT KILL (`eval`) or FUNCTION KILL of the script running past its threshold.
pub(super) fn kill(s: &mut Server, eval: bool) -> Reply {
    let (e, f) = (&s.scripts.eval.run, &s.scripts.func.run);
    let running = if e.busy.get() {
        e
    } else if f.busy.get() {
        f
    } else {
        return Reply::err("NOTBUSY No scripts in execution right now.");
    };
    if running.wrote.get() {
        return Reply::err(
            "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either \
             wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.",
        );
    }
    if eval && !e.busy.get() {
        return Reply::err(BUSY_FUNCTION);
    }
    if !eval && !f.busy.get() {
        return Reply::err(BUSY_EVAL);
    }
    running.killed.set(true);
    Reply::ok()
}

/// While a script runs past its threshold, the reply to any other client's command but
/// those Redis allows then (SCRIPT/FUNCTION KILL, SHUTDOWN, AUTH, HELLO ...).
pub fn busy_refusal(s: &Server, argv: &[Vec<u8>]) -> Option<Reply> {
    if !s.scripts.busy() {
        return None;
    }
    let eval_busy = s.scripts.eval.run.busy.get();
    let name = argv.first().map(|n| n.to_ascii_lowercase()).unwrap_or_default();
    let sub_is = |what: &str| argv.get(1).is_some_and(|x| eq_ic(x, what));
    let allowed = match name.as_slice() {
        // Redis 7.0's allow-busy commands.
        b"auth" | b"hello" | b"shutdown" | b"quit" | b"reset" | b"multi" | b"discard" | b"watch" | b"unwatch" => true,
        b"script" => sub_is("kill"),
        b"function" => sub_is("kill") || sub_is("stats"),
        _ => false,
    };
    if allowed {
        return None;
    }
    Some(Reply::err(if eval_busy { BUSY_EVAL } else { BUSY_FUNCTION }))
}

/// EXEC refused while busy: the transaction is discarded with the refusal's text.
pub fn exec_abort(refusal: &Reply) -> Reply {
    match refusal {
        Reply::Error(text) => Reply::error(format!("EXECABORT Transaction discarded because of: {text}")),
        other => other.clone(),
    }
}
