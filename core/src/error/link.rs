//! What failed on one node's link, and what kind of trouble a node is in.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::NodeId;

/// A problem on one node's connection or connect attempt, carried by
/// [`Event::LinkFailed`](crate::Event::LinkFailed).
///
/// The engine has already taken the link down and scheduled the next connect attempt
/// (see [`Engine::poll_connect`](crate::Engine::poll_connect)); where the driver still holds
/// the connection or attempt, [`Engine::poll_close`](crate::Engine::poll_close) hands the node
/// out for it to drop. The text names the node once, by index and address
/// (never the password): `node #0 (redis://127.0.0.1:7000): AUTH failed: WRONGPASS ...`;
/// [`reason`](Self::reason) is the same without the node, as that node's votes carry it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LinkError {
    /// The bytes from the node are not valid RESP.
    Malformed {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// What the parser said.
        detail: String,
    },
    /// A reply of a type the request cannot produce (e.g. a string where a number belongs).
    Unexpected {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// The request being answered.
        request: &'static str,
        /// A short rendering of the reply.
        reply: String,
    },
    /// A reply arrived while no request was pending.
    Unsolicited {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// A short rendering of the reply.
        reply: String,
    },
    /// A step of the connection handshake was refused (wrong password, unknown database...).
    Handshake {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// `AUTH`, `SELECT` or `SCRIPT LOAD`.
        step: &'static str,
        /// The server's error text.
        message: String,
    },
    /// The connection is up but the node did not answer its oldest request in time (it is
    /// paused, behind a black hole, or half-open): within
    /// [`Config::liveness_timeout`](crate::Config::liveness_timeout), or within the connect
    /// timeout for the handshake.
    Silent {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// How long the oldest request had waited.
        waited: Duration,
        /// The unanswered request was part of the handshake.
        handshake: bool,
    },
    /// The driver reported a connect attempt failed
    /// ([`Engine::handle_connect_failed`](crate::Engine::handle_connect_failed)).
    ConnectFailed {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// Why, as the driver said (e.g. `Connection refused (os error 111)`).
        reason: String,
    },
    /// The driver reported the connection lost
    /// ([`Engine::handle_disconnected`](crate::Engine::handle_disconnected)): end of stream, a
    /// socket error.
    Lost {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// Why, as the driver said.
        reason: String,
    },
    /// A connect attempt handed out by [`Engine::poll_connect`](crate::Engine::poll_connect)
    /// did not connect within [`Config::connect_timeout`](crate::Config::connect_timeout).
    ConnectTimeout {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// The connect timeout that passed.
        after: Duration,
    },
    /// A node with [`min_replicas`](crate::NodeConfig::min_replicas) has fewer replicas online
    /// than its grants wait for, as `ROLE` says at the handshake and at every check after
    /// ([`REPLICAS_CHECK`](crate::REPLICAS_CHECK)), or is a replica itself: none of its grants
    /// could count, so it is not used ([`Fault::Misconfigured`]) until it has them.
    Replicas {
        /// The node.
        node: NodeId,
        /// The node's address, `redis://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// The replicas its grants wait for.
        min_replicas: u32,
        /// The replicas it reports online (0 when it is a replica itself).
        online: u32,
        /// It is a replica, not a primary.
        is_replica: bool,
    },
    /// The TLS handshake of a `rediss://` node failed: the driver reported a certificate that
    /// does not verify or a server that does not speak TLS
    /// ([`Engine::handle_tls_failed`](crate::Engine::handle_tls_failed), a misconfiguration),
    /// or the server did not answer it within the connect timeout (out of reach, or a plain
    /// port).
    Tls {
        /// The node.
        node: NodeId,
        /// The node's address, `rediss://[user@]host:port[/db]`.
        addr: Arc<str>,
        /// What failed, and what to check.
        reason: String,
        /// [`Fault::Misconfigured`] for a failure the driver reported, [`Fault::Unreachable`]
        /// for a handshake left unanswered.
        fault: Fault,
    },
    /// A Sentinel-managed node ([`NodeConfig::sentinel`](crate::NodeConfig::sentinel)) has no
    /// master to vote with: its sentinels are all out of reach, disagree, know no such
    /// service, or are not sentinels; or the master they named is not one (`ROLE`, a
    /// `READONLY` answer). The node asks its sentinels again at its next connect attempt.
    Sentinel {
        /// The node.
        node: NodeId,
        /// The node's address, `redis+sentinel://[user@]host:port,…/service`.
        addr: Arc<str>,
        /// What the sentinels (or the master they named) said, naming each sentinel.
        reason: String,
        /// [`Fault::Misconfigured`] for an unknown service or a sentinel that is not one,
        /// [`Fault::Unreachable`] for the rest (it heals by itself).
        fault: Fault,
    },
}

impl LinkError {
    /// The node whose connection failed.
    pub fn node(&self) -> NodeId {
        match self {
            LinkError::Malformed { node, .. }
            | LinkError::Unexpected { node, .. }
            | LinkError::Unsolicited { node, .. }
            | LinkError::Handshake { node, .. }
            | LinkError::Silent { node, .. }
            | LinkError::ConnectFailed { node, .. }
            | LinkError::Lost { node, .. }
            | LinkError::ConnectTimeout { node, .. }
            | LinkError::Replicas { node, .. }
            | LinkError::Tls { node, .. }
            | LinkError::Sentinel { node, .. } => *node,
        }
    }

    /// The node's address as a URL without its password, e.g. `redis://127.0.0.1:7000`.
    pub fn addr(&self) -> &str {
        match self {
            LinkError::Malformed { addr, .. }
            | LinkError::Unexpected { addr, .. }
            | LinkError::Unsolicited { addr, .. }
            | LinkError::Handshake { addr, .. }
            | LinkError::Silent { addr, .. }
            | LinkError::ConnectFailed { addr, .. }
            | LinkError::Lost { addr, .. }
            | LinkError::ConnectTimeout { addr, .. }
            | LinkError::Replicas { addr, .. }
            | LinkError::Tls { addr, .. }
            | LinkError::Sentinel { addr, .. } => addr,
        }
    }

    /// What went wrong, without naming the node: the text of the node's
    /// [`Vote::Error`] while it stays down.
    ///
    /// [`Vote::Error`]: crate::Vote::Error
    pub fn reason(&self) -> String {
        Reason(self).to_string()
    }

    /// What kind of failure it is: the node refused us for a configuration reason (a wrong
    /// password or user, a database it does not have, an ACL), it is out of reach, or it
    /// spoke something other than what our requests can produce.
    pub fn fault(&self) -> Fault {
        match self {
            LinkError::Handshake { message, .. } if is_transient(message) => Fault::Unreachable,
            LinkError::Handshake { step, message, .. } => {
                let setup = ["AUTH", "SELECT", "the lock format check"].contains(step);
                if setup || Fault::of_server_error(message) == Fault::Misconfigured {
                    Fault::Misconfigured
                } else {
                    Fault::Protocol
                }
            }
            LinkError::Malformed { .. } | LinkError::Unexpected { .. } | LinkError::Unsolicited { .. } => {
                Fault::Protocol
            }
            LinkError::Tls { fault, .. } | LinkError::Sentinel { fault, .. } => *fault,
            LinkError::Replicas { .. } => Fault::Misconfigured,
            LinkError::Silent { .. }
            | LinkError::ConnectFailed { .. }
            | LinkError::Lost { .. }
            | LinkError::ConnectTimeout { .. } => Fault::Unreachable,
        }
    }
}

/// What kind of trouble a node is in; see [`LinkError::fault`] and [`Vote::fault`].
///
/// [`Vote::fault`]: crate::Vote::fault
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Fault {
    /// Out of reach: down, refusing connections, timed out, silent.
    Unreachable,
    /// Refused for a configuration reason: a wrong password or user (`WRONGPASS`, `NOAUTH`),
    /// a database it does not have (`SELECT`), an ACL that forbids a command (`NOPERM`), a key
    /// of another type (`WRONGTYPE`), a Redis Cluster node given as a node (`MOVED`,
    /// `CROSSSLOT`...), a TLS certificate that does not verify, a node with fewer replicas
    /// than its `min_replicas` ([`LinkError::Replicas`]). Retrying does not help; an operator
    /// must.
    Misconfigured,
    /// It answered something our requests cannot produce (garbage, a wrong type, an error).
    Protocol,
}

impl Fault {
    /// The kind of a server error reply (`-WRONGPASS ...`, `-NOPERM ...`, `-MOVED ...`,
    /// `-ERR ...`).
    ///
    /// A server that cannot serve for a while — loading its data after a restart (`LOADING`),
    /// busy with a script (`BUSY`), a replica without its master (`MASTERDOWN`), a Redis
    /// Cluster that is down or moving the slot (`CLUSTERDOWN`, `TRYAGAIN`, a redirect not
    /// followed) — is out of reach for now, never misconfigured: it heals by itself. Keys in
    /// several slots of a cluster (`CROSSSLOT`) are misconfigured.
    pub fn of_server_error(text: &str) -> Fault {
        const CONFIG: [&str; 6] = ["WRONGPASS", "NOAUTH", "NOPERM", "WRONGTYPE", "WRONGLIMIT", "ERR DB index"];
        if is_transient(text) {
            Fault::Unreachable
        } else if CONFIG.iter().any(|p| text.starts_with(p))
            || text.starts_with("CROSSSLOT ")
            // A script's command the ACL refuses (Redis 7.0 says so; later servers say NOPERM).
            || text.starts_with("ERR The user executing the script can't run this command")
        {
            Fault::Misconfigured
        } else {
            Fault::Protocol
        }
    }
}

/// Whether a server error reply says the server cannot serve for a while.
fn is_transient(text: &str) -> bool {
    ["LOADING ", "BUSY ", "MASTERDOWN ", "CLUSTERDOWN ", "TRYAGAIN ", "MOVED ", "ASK "]
        .iter()
        .any(|p| text.starts_with(p))
}

/// Whether a server error reply is one only a Redis Cluster node gives: a redirection
/// (`MOVED`, `ASK`), keys of several hash slots (`CROSSSLOT`), a cluster that is down
/// (`CLUSTERDOWN`).
pub(crate) fn is_cluster_error(text: &str) -> bool {
    ["MOVED ", "ASK ", "CROSSSLOT ", "CLUSTERDOWN ", "TRYAGAIN "].iter().any(|p| text.starts_with(p))
}

/// The part of a [`LinkError`]'s text after the node.
struct Reason<'a>(&'a LinkError);

impl fmt::Display for Reason<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            LinkError::Malformed { detail, .. } => write!(f, "malformed RESP from server: {detail}"),
            LinkError::Unexpected { request, reply, .. } => write!(f, "unexpected reply to {request}: {reply}"),
            LinkError::Unsolicited { reply, .. } => write!(f, "reply with no pending request: {reply}"),
            // Asked before any password was given (the URL has none): say so, not which step.
            LinkError::Handshake { message, .. } if message.starts_with("NOAUTH") => write!(
                f,
                "authentication required: the node wants a password; give one in its URL, \
                 redis://[user:]password@host:port ({message})"
            ),
            LinkError::Handshake { step, message, .. } => write!(f, "{step} failed: {message}"),
            LinkError::Silent { waited, handshake: true, .. } => {
                write!(f, "no answer to the connection handshake within {waited:?}")
            }
            LinkError::Silent { waited, handshake: false, .. } => {
                write!(f, "silent: no answer to a request within {waited:?}")
            }
            LinkError::ConnectFailed { reason, .. } => write!(f, "connect failed: {reason}"),
            LinkError::Lost { reason, .. } => write!(f, "connection lost: {reason}"),
            LinkError::ConnectTimeout { after, .. } => write!(f, "connect timed out after {after:?}"),
            LinkError::Tls { reason, .. } => write!(f, "TLS handshake failed: {reason}"),
            LinkError::Sentinel { reason, .. } => write!(f, "{reason}"),
            LinkError::Replicas { min_replicas, is_replica: true, .. } => write!(
                f,
                "min_replicas={min_replicas}, but the node is a replica, not a primary: its grants could never \
                 count (give the primary's URL)"
            ),
            LinkError::Replicas { min_replicas, online, .. } => write!(
                f,
                "min_replicas={min_replicas}, but the primary has {online} replica(s) online: its grants could \
                 never count (give it replicas, or lower min_replicas in its URL)"
            ),
        }
    }
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "node {} ({}): {}", self.node(), self.addr(), Reason(self))
    }
}

impl std::error::Error for LinkError {}
