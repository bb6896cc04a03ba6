//! A Sentinel-managed node as `status` and `scan` read it: its sentinels are asked for the
//! service's master (each one, so the report shows what each says), the address a majority of
//! those that answered name is used, and `ROLE` must say it is a master, as the clients check.

use redlease_client::adapter::{NodeTransport, Target};
use redlease_core::{NodeConfig, SentinelConfig};
use redlease_servers::{RedisConn, Reply};

use super::fault::Fault;
use super::json;
use crate::connect::open;

/// What the sentinels of a node said, and the master they named.
pub(super) struct Seen {
    /// The service.
    pub(super) service: String,
    /// Each sentinel, `host:port`, with the master it named or why it named none.
    pub(super) said: Vec<(String, Result<String, String>)>,
    /// The master in use, `host:port`.
    pub(super) master: String,
    /// The failovers the sentinels count for the service (`config-epoch` of `SENTINEL
    /// MASTER`), from the first sentinel that says.
    pub(super) epoch: Option<u64>,
}

/// `host:port`, an IPv6 host in brackets.
fn hostport(host: &str, port: u16) -> String {
    if host.contains(':') { format!("[{host}]:{port}") } else { format!("{host}:{port}") }
}

/// Ask every sentinel of `node` for its master, pick the one a majority of those that answered
/// name, and open a connection to it (as `node` says: credentials, database, TLS) that `ROLE`
/// shows is a master. The connection, and what was seen.
pub(super) fn open_master(
    node: &NodeConfig,
    sentinel: &SentinelConfig,
    how: &NodeTransport,
) -> Result<(RedisConn, Seen), Fault> {
    let (user, password) = match (&sentinel.user, &sentinel.password) {
        (None, None) => (node.user.clone(), node.password.clone()),
        (user, password) => (user.clone(), password.clone()),
    };
    let mut said = Vec::new();
    let mut epoch = None;
    for (host, port) in &sentinel.sentinels {
        let mut at = NodeConfig::new(host.clone(), *port).use_tls(node.transport == redlease_core::Transport::Tls);
        at.user = user.clone();
        at.password = password.clone();
        let mut to = how.clone();
        to.target = Target::Tcp { host: host.clone(), port: *port };
        let answer = open(&at, &to).and_then(|mut conn| {
            if epoch.is_none() {
                epoch = config_epoch(&mut conn, &sentinel.service);
            }
            ask(&mut conn, &sentinel.service)
        });
        said.push((hostport(host, *port), answer));
    }
    let named: Vec<&String> = said.iter().filter_map(|(_, a)| a.as_ref().ok()).collect();
    let each = || {
        said.iter()
            .map(|(s, a)| format!("sentinel {s}: {}", a.as_ref().map_or_else(|e| e.clone(), |m| format!("names {m}"))))
            .collect::<Vec<_>>()
            .join("; ")
    };
    let Some(master) = named.iter().find(|m| named.iter().filter(|n| n == m).count() * 2 > named.len()) else {
        let service = &sentinel.service;
        return Err(if named.is_empty() {
            let misconfigured = said.iter().all(|(_, a)| {
                a.as_ref().is_err_and(|e| e.contains("knows no service") || e.contains("not a sentinel"))
            });
            let text = format!("no sentinel named a master for service {service:?}: {}", each());
            if misconfigured { Fault::misconfigured(text) } else { Fault::unreachable(text) }
        } else {
            Fault::unreachable(format!("the sentinels disagree on the master of service {service:?}: {}", each()))
        });
    };
    let master = (*master).clone();
    let (host, port) = master.rsplit_once(':').map_or((master.as_str(), "0"), |(h, p)| (h, p));
    let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    let port: u16 = port.parse().unwrap_or(0);
    let mut data = node.clone();
    data.sentinel = None;
    data.host.clone_from(&host);
    data.port = port;
    let mut to = how.clone();
    to.target = Target::Tcp { host, port };
    let mut conn = open(&data, &to).map_err(|e| Fault::of(format!("the master {master} the sentinels named: {e}")))?;
    match conn.cmd(&["ROLE"])? {
        Reply::Array(Some(items)) if items.first().and_then(Reply::as_text).as_deref() == Some("master") => {}
        other => {
            return Err(Fault::unreachable(format!(
                "the master {master} the sentinels named for service {:?} is not one (ROLE: {other:?})",
                sentinel.service
            )));
        }
    }
    Ok((conn, Seen { service: sentinel.service.clone(), said, master, epoch }))
}

/// `SENTINEL get-master-addr-by-name service` on one sentinel: the master's `host:port`, or why
/// it names none.
fn ask(conn: &mut RedisConn, service: &str) -> Result<String, String> {
    match conn.cmd(&["SENTINEL", "get-master-addr-by-name", service]).map_err(|e| e.to_string())? {
        Reply::Array(Some(parts)) => match parts.iter().filter_map(Reply::as_text).collect::<Vec<_>>().as_slice() {
            [host, port] => Ok(hostport(host, port.parse().unwrap_or(0))),
            other => Err(format!("answered {other:?}, not an address")),
        },
        Reply::Array(None) | Reply::Bulk(None) => Err(format!("knows no service named {service:?}")),
        Reply::Error(e) if e.contains("unknown command") => {
            Err(format!("answers as a data node, not a sentinel ({e})"))
        }
        Reply::Error(e) => Err(format!("refused: {e}")),
        other => Err(format!("answered {other:?}, not an address")),
    }
}

/// The `config-epoch` a sentinel reports for `service` (`SENTINEL MASTER`): it counts the
/// failovers.
fn config_epoch(conn: &mut RedisConn, service: &str) -> Option<u64> {
    let Ok(Reply::Array(Some(fields))) = conn.cmd(&["SENTINEL", "MASTER", service]) else { return None };
    let texts: Vec<String> = fields.iter().filter_map(Reply::as_text).collect();
    texts.chunks(2).find(|kv| kv[0] == "config-epoch").and_then(|kv| kv.get(1)?.parse().ok())
}

impl Seen {
    /// What `status` prints after the node's line.
    pub(super) fn text(&self) -> String {
        let said: Vec<String> = self
            .said
            .iter()
            .map(|(s, a)| match a {
                Ok(m) => format!("{s} names {m}"),
                Err(e) => format!("{s}: {e}"),
            })
            .collect();
        let epoch = self.epoch.map_or_else(String::new, |e| format!(", config-epoch {e} (failovers)"));
        format!("Sentinel service {:?}: master {}{epoch}; sentinels: {}", self.service, self.master, said.join(", "))
    }

    /// `status --json`'s `sentinel` member.
    pub(super) fn json(&self) -> String {
        let said: Vec<String> = self
            .said
            .iter()
            .map(|(s, a)| match a {
                Ok(m) => format!("{{\"sentinel\":{},\"master\":{}}}", json::string(s), json::string(m)),
                Err(e) => format!("{{\"sentinel\":{},\"error\":{}}}", json::string(s), json::string(e)),
            })
            .collect();
        format!(
            "{{\"service\":{},\"master\":{},\"config_epoch\":{},\"sentinels\":[{}]}}",
            json::string(&self.service),
            json::string(&self.master),
            json::opt_number(self.epoch.and_then(|e| i64::try_from(e).ok())),
            said.join(",")
        )
    }
}
