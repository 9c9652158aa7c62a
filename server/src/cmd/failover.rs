//! FAILOVER [TO host port [FORCE]] [ABORT] [TIMEOUT ms]: Redis 7.0's argument checks and
//! refusals, in its order. The handover itself (writes paused until the target replica has
//! caught up, then PSYNC FAILOVER to it) needs partial resynchronisation, which ferrokv's
//! replication does not have yet: with replicas attached it says so.

use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::Reply;

use crate::client::Client;
use crate::server::Server;

pub fn failover(s: &mut Server, _: &mut Client, a: &[Vec<u8>]) -> Reply {
    if a.len() == 2 && eq_ic(&a[1], "abort") {
        return Reply::err("ERR No failover in progress.");
    }
    let (mut timeout, mut force, mut host) = (0i64, false, false);
    let mut j = 1;
    while j < a.len() {
        if eq_ic(&a[j], "timeout") && j + 1 < a.len() && timeout == 0 {
            timeout = match parse_i64(&a[j + 1]) {
                Some(t) => t,
                None => return Reply::not_integer(),
            };
            if timeout <= 0 {
                return Reply::err("ERR FAILOVER timeout must be greater than 0");
            }
            j += 2;
        } else if eq_ic(&a[j], "to") && j + 2 < a.len() && !host {
            if parse_i64(&a[j + 2]).is_none() {
                return Reply::not_integer();
            }
            host = true;
            j += 3;
        } else if eq_ic(&a[j], "force") && !force {
            force = true;
            j += 1;
        } else {
            return Reply::syntax();
        }
    }
    if s.link.is_some() {
        return Reply::err("ERR FAILOVER is not valid when server is a replica.");
    }
    if s.replicas.is_empty() {
        return Reply::err("ERR FAILOVER requires connected replicas.");
    }
    if force && (timeout == 0 || !host) {
        return Reply::err("ERR FAILOVER with force option requires both a timeout and target HOST and IP.");
    }
    Reply::err("ERR FAILOVER is not supported by ferrokv yet: it needs partial resynchronisation")
}
