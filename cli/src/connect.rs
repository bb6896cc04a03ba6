//! Blocking connections to the nodes for `status` and `scan`, made the way the clients make
//! theirs: the same URLs, transports, trust and verification.

use std::net::{SocketAddr, ToSocketAddrs};
#[cfg(feature = "tls")]
use std::time::Duration;

use redlease_client::adapter::{NodeTransport, Target};
use redlease_core::{Config, NodeConfig, TlsSettings, Transport};
use redlease_servers::{Duplex, RedisConn};

use crate::{Usage, node_urls};

/// The first address `host` resolves to.
fn resolve(host: &str, port: u16) -> Result<SocketAddr, String> {
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .next()
        .ok_or_else(|| format!("{host} resolves to no address"))
}

/// The nodes of `--nodes` with the TLS flags applied, and how to reach each: the clients' own
/// transport code, so `status` and `scan` take every URL `run` takes (`rediss://`, Unix
/// sockets) and trust the same certificates. A CA file that cannot be read is bad usage.
pub(crate) fn nodes_of(urls: Option<&str>, tls: TlsSettings) -> Result<Vec<(NodeConfig, NodeTransport)>, Usage> {
    let config = Config::new(node_urls(urls)?).tls(tls);
    let transports = redlease_client::adapter::prepare(&config).map_err(|e| Usage(format!("--nodes: {e}")))?;
    Ok(config.nodes.into_iter().zip(transports).collect())
}

/// Open a connection to `node` over its transport (TCP or a Unix socket, TLS on top for
/// `rediss://`), log in and select its database. Connecting takes at most 1 s, each reply at
/// most 5 s (the TLS handshake included).
pub(crate) fn open(node: &NodeConfig, how: &NodeTransport) -> Result<RedisConn, String> {
    let socket: Box<dyn Duplex> = match &how.target {
        Target::Tcp { host, port } => {
            Box::new(redlease_servers::tcp(resolve(host, *port)?).map_err(|e| e.to_string())?)
        }
        Target::Unix(path) => Box::new(unix(path)?),
    };
    #[cfg(feature = "tls")]
    let socket: Box<dyn Duplex> = match how.tls() {
        Some(client) => {
            Box::new(Tls(redlease_client::adapter::BlockingTls::connect(client, socket).map_err(tls_hint)?))
        }
        None => socket,
    };
    let plain_tcp = node.transport == Transport::Tcp;
    let first_reply = |e: std::io::Error| if plain_tcp { plain_hint(e) } else { e.to_string() };
    let user = node.user.as_deref().unwrap_or("default");
    let auth = node.password.as_deref().map(|p| (user, p));
    let mut conn = RedisConn::over(socket, auth).map_err(first_reply)?;
    if plain_tcp && auth.is_none() {
        // The first reply tells a TLS port from a plain one, before any report reads it.
        // Any reply, an error (NOPERM, NOAUTH) included, shows the port speaks plain RESP.
        conn.cmd(&["PING"]).map_err(first_reply)?;
    }
    if node.db != 0 {
        conn.ok(&["SELECT", &node.db.to_string()]).map_err(|e| e.to_string())?;
    }
    Ok(conn)
}

/// A TLS handshake that got no answer: usually a plain port behind a `rediss://` URL (the
/// server waits for a line end that TLS never sends), so say so.
#[cfg(feature = "tls")]
fn tls_hint(e: std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        // Out of reach, not misconfigured: a paused TLS node looks the same.
        K::WouldBlock | K::TimedOut => {
            format!("TLS handshake got no answer ({e}): is it a plain port? (use redis:// for it)")
        }
        _ => e.to_string(),
    }
}

/// A plain connection that ended before its first reply: usually a TLS port behind a
/// `redis://` URL (the server drops what is not TLS), so say so.
fn plain_hint(e: std::io::Error) -> String {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionReset | K::ConnectionAborted | K::UnexpectedEof | K::BrokenPipe => {
            format!("{e}, before any reply: is this a TLS port? (use rediss:// for it)")
        }
        _ => e.to_string(),
    }
}

#[cfg(unix)]
fn unix(path: &std::path::Path) -> Result<std::os::unix::net::UnixStream, String> {
    redlease_servers::unix(path).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(not(unix))]
fn unix(path: &std::path::Path) -> Result<std::net::TcpStream, String> {
    Err(format!("{}: Unix sockets are not supported on this system", path.display()))
}

/// A TLS session over a node's socket, as a stream [`RedisConn`] talks over.
#[cfg(feature = "tls")]
#[derive(Debug)]
struct Tls(redlease_client::adapter::BlockingTls<Box<dyn Duplex>>);

#[cfg(feature = "tls")]
impl std::io::Read for Tls {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

#[cfg(feature = "tls")]
impl std::io::Write for Tls {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(feature = "tls")]
impl Duplex for Tls {
    fn set_read_timeout(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.0.get_ref().set_read_timeout(timeout)
    }
}
