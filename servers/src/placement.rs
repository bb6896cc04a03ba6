//! Where a node runs ([`Placement`]) and how clients reach it ([`Listen`]).

use std::cell::Cell;
use std::ffi::OsString;
use std::net::IpAddr;

/// Where and how one node runs, for [`ServersBuilder::placements`]: the address it binds,
/// and optionally a command it is started through (e.g. `ip netns exec NAME`, which execs
/// `redis-server` in a network namespace, so the process id is still the server's) and extra
/// environment variables (e.g. `LD_PRELOAD`).
///
/// The default placement, used when none is given, is `127.0.0.1` on a free port, started
/// directly.
///
/// [`ServersBuilder::placements`]: crate::ServersBuilder::placements
#[derive(Clone, Debug)]
pub struct Placement {
    pub(crate) ip: IpAddr,
    pub(crate) port: u16,
    pub(crate) prefix: Vec<OsString>,
    pub(crate) env: Vec<(OsString, OsString)>,
}

impl Placement {
    /// Bind `ip:port` (the address must exist where the server runs): the port clients
    /// reach, so a TLS node ([`Listen::Tls`]) serves TLS on it, and keeps its plain TCP port
    /// for inspection on a port the OS reports free.
    pub fn new(ip: IpAddr, port: u16) -> Placement {
        Placement { ip, port, prefix: Vec::new(), env: Vec::new() }
    }

    /// `127.0.0.1` on port `base + offset`, for a set started from a base port (`None`
    /// without one: a free port); an error past port 65535.
    pub(crate) fn local(base: Option<u16>, offset: usize) -> Result<Option<Placement>, String> {
        let Some(base) = base else { return Ok(None) };
        let port =
            u16::try_from(usize::from(base) + offset).map_err(|_| format!("port {base} + {offset} past 65535"))?;
        Ok(Some(Placement::new(std::net::Ipv4Addr::LOCALHOST.into(), port)))
    }

    /// Start the server as `PREFIX... redis-server redis.conf`; the prefix must exec the
    /// server (not fork it), so that pausing and killing reach the server itself.
    pub fn command_prefix<I, S>(mut self, prefix: I) -> Placement
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.prefix = prefix.into_iter().map(Into::into).collect();
        self
    }

    /// Set an environment variable for the server (and the prefix command).
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Placement {
        self.env.push((key.into(), value.into()));
        self
    }
}

/// How clients reach the nodes of a [`Servers`] (what [`Servers::urls`] gives). Every node
/// also keeps a plain TCP port for inspection ([`Node::conn`], [`Node::plain_url`]).
///
/// [`Servers`]: crate::Servers
/// [`Servers::urls`]: crate::Servers::urls
/// [`Node::conn`]: crate::Node::conn
/// [`Node::plain_url`]: crate::Node::plain_url
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum Listen {
    /// Plain TCP: `redis://127.0.0.1:PORT`.
    #[default]
    Tcp,
    /// TLS on a port of its own (`rediss://127.0.0.1:PORT`), with a generated CA (its files:
    /// `Servers::tls`); a client certificate is optional. Needs the `tls` feature.
    Tls,
    /// Like [`Tls`](Self::Tls), but the nodes require a client certificate (mutual TLS).
    TlsClientAuth,
    /// A Unix socket in the node's directory: `redis+unix:///…/redis.sock`.
    Unix,
}

impl Listen {
    pub(crate) fn is_tls(self) -> bool {
        matches!(self, Listen::Tls | Listen::TlsClientAuth)
    }
}

thread_local! {
    static DEFAULT_LISTEN: Cell<Listen> = const { Cell::new(Listen::Tcp) };
}

/// How the servers built on this thread listen unless told: TCP, or what [`with_listen`] set.
pub(crate) fn default_listen() -> Listen {
    DEFAULT_LISTEN.with(Cell::get)
}

/// Run `f` with `listen` as the default of the servers built on this thread
/// ([`Servers::builder`], [`Servers::start`]): how a test suite written against TCP runs
/// over TLS or Unix sockets unchanged.
///
/// [`Servers::builder`]: crate::Servers::builder
/// [`Servers::start`]: crate::Servers::start
pub fn with_listen<T>(listen: Listen, f: impl FnOnce() -> T) -> T {
    struct Restore(Listen);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEFAULT_LISTEN.with(|l| l.set(self.0));
        }
    }
    let _restore = Restore(DEFAULT_LISTEN.with(|l| l.replace(listen)));
    f()
}
