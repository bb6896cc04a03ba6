//! A node's directory and its `redis.conf`: `redis.conf`, `redis.log`, the `data/` directory
//! and the Unix socket `redis.sock` all live in the node's own temporary directory.

use std::fmt::Write as _;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The certificates of a TLS cluster, shared by its nodes.
#[cfg(feature = "tls")]
pub(crate) type TlsHandle = std::sync::Arc<crate::tls::TlsFiles>;

/// Without the `tls` feature no node has certificates: a handle that cannot exist (not `Copy`,
/// so the code that clones the real handle reads the same in both builds).
#[cfg(not(feature = "tls"))]
#[derive(Clone, Debug)]
pub(crate) enum TlsHandle {}

/// The directory the server keeps its data in (RDB and AOF files).
pub(crate) fn data_dir(dir: &Path) -> PathBuf {
    dir.join("data")
}

/// The server's log file.
pub(crate) fn log_path(dir: &Path) -> PathBuf {
    dir.join("redis.log")
}

/// The server's Unix socket.
pub(crate) fn socket_path(dir: &Path) -> PathBuf {
    dir.join("redis.sock")
}

/// What a node's `redis.conf` says.
pub(crate) struct RedisConf<'a> {
    /// The node's directory.
    pub(crate) dir: &'a Path,
    pub(crate) ip: IpAddr,
    pub(crate) port: u16,
    /// `appendonly yes` + `appendfsync always`, instead of no persistence at all.
    pub(crate) persist: bool,
    /// The TLS port, the certificates, and whether clients must present a certificate.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) tls: Option<(u16, &'a TlsHandle, bool)>,
    /// The only user that may log in, with its password.
    pub(crate) acl: Option<&'a (String, String)>,
}

impl RedisConf<'_> {
    /// Write `redis.conf` into the node's directory; its path.
    pub(crate) fn write(&self) -> io::Result<PathBuf> {
        let path = self.dir.join("redis.conf");
        std::fs::write(&path, self.text())?;
        Ok(path)
    }

    fn text(&self) -> String {
        let mut conf = String::new();
        let _ = writeln!(conf, "port {}", self.port);
        let _ = writeln!(conf, "bind {}", self.ip);
        if !self.ip.is_loopback() {
            // Protected mode refuses clients from other addresses when no password is set; a
            // placement elsewhere (a private namespace) is meant to be reached that way.
            let _ = writeln!(conf, "protected-mode no");
        }
        let _ = writeln!(conf, "daemonize no");
        let _ = writeln!(conf, "dir {}", data_dir(self.dir).display());
        let _ = writeln!(conf, "logfile {}", log_path(self.dir).display());
        let _ = writeln!(conf, "save \"\"");
        if self.persist {
            let _ = writeln!(conf, "appendonly yes");
            let _ = writeln!(conf, "appendfsync always");
        } else {
            let _ = writeln!(conf, "appendonly no");
        }
        let _ = writeln!(conf, "unixsocket {}", socket_path(self.dir).display());
        let _ = writeln!(conf, "unixsocketperm 700");
        #[cfg(feature = "tls")]
        if let Some((tls_port, tls, client_auth)) = self.tls {
            let _ = writeln!(conf, "tls-port {tls_port}");
            let _ = writeln!(conf, "tls-cert-file {}", tls.server_cert.display());
            let _ = writeln!(conf, "tls-key-file {}", tls.server_key.display());
            let _ = writeln!(conf, "tls-ca-cert-file {}", tls.ca.display());
            let auth = if client_auth { "yes" } else { "optional" };
            let _ = writeln!(conf, "tls-auth-clients {auth}");
        }
        if let Some((user, pass)) = self.acl {
            let _ = writeln!(conf, "user default off");
            let _ = writeln!(conf, "user {user} on >{pass} ~* &* +@all");
        }
        conf
    }
}
