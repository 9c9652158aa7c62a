//! Transactions: MULTI EXEC DISCARD WATCH UNWATCH.

use ferrokv::Reply;

use super::lookup;
use crate::client::Client;
use crate::server::Server;

pub fn multi(_: &mut Server, c: &mut Client, _: &[Vec<u8>]) -> Reply {
    if c.multi.is_some() {
        return Reply::err("ERR MULTI calls can not be nested");
    }
    c.multi = Some(Vec::new());
    c.multi_error = false;
    Reply::ok()
}

pub fn discard(s: &mut Server, c: &mut Client, _: &[Vec<u8>]) -> Reply {
    if c.multi.is_none() {
        return Reply::err("ERR DISCARD without MULTI");
    }
    c.reset_multi();
    s.unwatch_all(c);
    Reply::ok()
}

pub fn exec(s: &mut Server, c: &mut Client, _: &[Vec<u8>]) -> Reply {
    let Some(queue) = c.multi.take() else {
        return Reply::err("ERR EXEC without MULTI");
    };
    if c.multi_error {
        c.reset_multi();
        s.unwatch_all(c);
        return Reply::err("EXECABORT Transaction discarded because of previous errors.");
    }
    // A watched key that changed, or that expired since WATCH, fails the transaction.
    let expired = c.watched.iter().any(|(db, key, was_expired)| !was_expired && s.key_is_expired(*db, key));
    if c.watch_dirty || expired {
        c.reset_multi();
        s.unwatch_all(c);
        return Reply::NilArray;
    }
    // Keys the transaction itself writes no longer concern its own watch.
    s.unwatch_all(c);
    c.in_exec = true;
    let mut replies = Vec::with_capacity(queue.len());
    // Replies commands wrote themselves (SUBSCRIBE's notices), by position.
    let mut raw: Vec<(usize, Vec<u8>)> = Vec::new();
    for argv in &queue {
        let mark = c.out.len();
        let r = match lookup(&argv[0]) {
            Some(found) => match s.acl_exec_refusal(c, found, argv) {
                Some(refused) => refused,
                None => s.call(c, found, argv),
            },
            None => ferrokv::command::unknown_command(argv, crate::version::version()),
        };
        if std::mem::take(&mut c.raw_reply) {
            raw.push((replies.len(), c.out.split_off(mark)));
        }
        // Each error inside the transaction is a reply of its own to INFO errorstats.
        s.count_reply(&r);
        replies.push(r);
    }
    c.in_exec = false;
    // The transaction's writes go to the AOF as one unit.
    s.engine.flush();
    // A BGSAVE or BGREWRITEAOF it asked for starts now, on the dataset it left (Redis: at
    // its next timer tick).
    if s.jobs.bgsave_scheduled || s.jobs.rewrite_scheduled {
        s.start_scheduled_jobs();
    }
    s.touch_modified(c);
    c.reset_multi();
    if raw.is_empty() {
        return Reply::Array(replies);
    }
    c.out.extend_from_slice(format!("*{}\r\n", replies.len()).as_bytes());
    let mut raw = raw.into_iter().peekable();
    for (i, r) in replies.iter().enumerate() {
        match raw.next_if(|(at, _)| *at == i) {
            Some((_, bytes)) => c.out.extend_from_slice(&bytes),
            None => c.reply(r),
        }
    }
    c.raw_reply = true;
    Reply::Nil
}

pub fn watch(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    if c.multi.is_some() {
        return Reply::err("ERR WATCH inside MULTI is not allowed");
    }
    for key in &a[1..] {
        s.watch_key(c, key);
    }
    Reply::ok()
}

pub fn unwatch(s: &mut Server, c: &mut Client, _: &[Vec<u8>]) -> Reply {
    s.unwatch_all(c);
    Reply::ok()
}
