//! Replies and argument text shared by the command files.

use ferrokv::Reply;

/// Redis's reply to an unknown subcommand.
pub fn unknown_subcommand(sub: &[u8], cmd: &str) -> Reply {
    Reply::error(format!(
        "ERR unknown subcommand '{}'. Try {} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)]),
        cmd.to_ascii_uppercase()
    ))
}

/// The wrong-arity error for a subcommand (`config|get`).
pub fn sub_arity(cmd: &str, sub: &[u8]) -> Reply {
    Reply::error(format!(
        "ERR wrong number of arguments for '{}|{}' command",
        cmd,
        String::from_utf8_lossy(sub).to_ascii_lowercase()
    ))
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}
