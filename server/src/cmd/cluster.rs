//! The cluster commands of a server that is not in a cluster (ferrokv has no cluster mode):
//! CLUSTER, READONLY, READWRITE and ASKING answer as Redis's do with `cluster-enabled no`.
//! Their subcommands and arities are checked first, from the catalog, as for any command.

use ferrokv::Reply;

use crate::client::Client;
use crate::server::Server;

pub fn cluster_disabled(_: &mut Server, _: &mut Client, _: &[Vec<u8>]) -> Reply {
    Reply::err("ERR This instance has cluster support disabled")
}
