//! CLIENT TRACKING, CACHING, GETREDIR and TRACKINGINFO: a client's side of client-side
//! caching (the state and the messages are crate::tracking's).

use ferrokv::command::eq_ic;
use ferrokv::Reply;

use crate::client::Client;
use crate::server::Server;
use crate::tracking::{check_on, ClientTracking};

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p]... [BCAST] [OPTIN] [OPTOUT] [NOLOOP]
pub fn client_tracking(s: &mut Server, c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let mut new = ClientTracking::default();
    let mut prefixes: Vec<Vec<u8>> = Vec::new();
    let mut j = 3;
    while j < a.len() {
        let more = j + 1 < a.len();
        let opt = &a[j];
        if eq_ic(opt, "redirect") && more {
            j += 1;
            if new.redirect != 0 {
                return Reply::err("ERR A client can only redirect to a single other client");
            }
            let Some(id) = std::str::from_utf8(&a[j]).ok().and_then(|t| t.parse::<i64>().ok()) else {
                return Reply::err("ERR value is not an integer or out of range");
            };
            let exists = id as u64 == c.id || s.clients.contains_key(&(id as u64));
            if !exists {
                return Reply::err("ERR The client ID you want redirect to does not exist");
            }
            new.redirect = id as u64;
        } else if eq_ic(opt, "bcast") {
            new.bcast = true;
        } else if eq_ic(opt, "optin") {
            new.optin = true;
        } else if eq_ic(opt, "optout") {
            new.optout = true;
        } else if eq_ic(opt, "noloop") {
            new.noloop = true;
        } else if eq_ic(opt, "prefix") && more {
            j += 1;
            prefixes.push(a[j].clone());
        } else {
            return Reply::syntax();
        }
        j += 1;
    }
    if eq_ic(&a[2], "on") {
        if let Err(e) = check_on(c.tracking.as_ref(), &new, &prefixes) {
            return Reply::error(e);
        }
        s.tracking_on(c, new, prefixes);
    } else if eq_ic(&a[2], "off") {
        s.tracking_off(c);
    } else {
        return Reply::syntax();
    }
    Reply::ok()
}

/// CLIENT CACHING YES|NO: whether the next command's keys are remembered (OPTIN / OPTOUT).
pub fn client_caching(c: &mut Client, a: &[Vec<u8>]) -> Reply {
    let Some(t) = c.tracking.as_mut() else {
        return Reply::err(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode \
             enabled",
        );
    };
    if eq_ic(&a[2], "yes") {
        if !t.optin {
            return Reply::err("ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.");
        }
    } else if eq_ic(&a[2], "no") {
        if !t.optout {
            return Reply::err("ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.");
        }
    } else {
        return Reply::syntax();
    }
    t.caching = true;
    Reply::ok()
}

/// CLIENT GETREDIR: -1 when not tracking, 0 without a redirect.
pub fn client_getredir(c: &Client) -> Reply {
    Reply::Int(c.tracking.as_ref().map_or(-1, |t| t.redirect as i64))
}

/// CLIENT TRACKINGINFO: flags, redirect, prefixes.
pub fn client_trackinginfo(c: &Client) -> Reply {
    let b = |s: &str| Reply::Bulk(s.as_bytes().to_vec());
    let mut flags = Vec::new();
    let (redirect, prefixes) = match &c.tracking {
        None => {
            flags.push(b("off"));
            (-1, Vec::new())
        }
        Some(t) => {
            flags.push(b("on"));
            if t.bcast {
                flags.push(b("bcast"));
            }
            if t.optin {
                flags.push(b("optin"));
                if t.caching {
                    flags.push(b("caching-yes"));
                }
            }
            if t.optout {
                flags.push(b("optout"));
                if t.caching {
                    flags.push(b("caching-no"));
                }
            }
            if t.noloop {
                flags.push(b("noloop"));
            }
            if t.broken_redirect {
                flags.push(b("broken_redirect"));
            }
            (t.redirect as i64, t.prefixes.iter().map(|p| Reply::Bulk(p.clone())).collect())
        }
    };
    Reply::Map(vec![
        (b("flags"), Reply::Set(flags)),
        (b("redirect"), Reply::Int(redirect)),
        (b("prefixes"), Reply::Array(prefixes)),
    ])
}
