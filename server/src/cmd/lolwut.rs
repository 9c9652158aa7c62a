//! LOLWUT [VERSION v] [...]: the text Redis 7.0 answers for its own version and for any
//! version without a drawing of its own (`Redis ver. <version>`). The drawings Redis makes
//! for VERSION 5 and 6 (random art) are not made: those versions get the text too.

use ferrokv::command::{eq_ic, parse_i64};
use ferrokv::Reply;

use crate::client::Client;
use crate::server::Server;

pub fn lolwut(_: &mut Server, _: &mut Client, a: &[Vec<u8>]) -> Reply {
    if a.len() >= 3 && eq_ic(&a[1], "version") && parse_i64(&a[2]).is_none() {
        return Reply::not_integer();
    }
    Reply::Verbatim(format!("Redis ver. {}\n", crate::version::release()).into_bytes())
}
