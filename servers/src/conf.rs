//! A node's directory and its `redis.conf`: `redis.conf`, `redis.log`, the `data/` directory
//! and the Unix socket `redis.sock` all live in the node's own temporary directory.

use std::fmt::Write as _;
use std::io;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// The certificates of a set of TLS servers, shared by its nodes.
#[cfg(feature = "tls")]
pub(crate) type TlsHandle = std::sync::Arc<crate::tls::TlsFiles>;

/// Without the `tls` feature no node has certificates: a handle that cannot exist (not `Copy`,
/// so the code that clones the real handle reads the same in both builds).
#[cfg(not(feature = "tls"))]
#[derive(Clone, Debug)]
pub(crate) enum TlsHandle {}

/// The certificates of a set of servers that listen with TLS (`tls`), generated now; `None`
/// without TLS, and an error without the `tls` feature.
pub(crate) fn tls_files(tls: bool) -> Result<Option<TlsHandle>, String> {
    match tls {
        #[cfg(feature = "tls")]
        true => Ok(Some(std::sync::Arc::new(crate::tls::TlsFiles::generate()?))),
        #[cfg(not(feature = "tls"))]
        true => Err("TLS nodes need the `tls` feature of redlease-servers".to_owned()),
        false => Ok(None),
    }
}

/// The directory the server keeps its data in (RDB and AOF files).
pub(crate) fn data_dir(dir: &Path) -> PathBuf {
    dir.join("data")
}

/// The server's log file.
pub(crate) fn log_path(dir: &Path) -> PathBuf {
    dir.join("redis.log")
}

/// The cluster configuration file of a Redis Cluster node: in the node's directory, not in
/// `data/`, so that a restart without its data keeps the node's identity in the cluster.
pub(crate) fn nodes_conf_path(dir: &Path) -> PathBuf {
    dir.join("nodes.conf")
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
    /// A Redis Cluster node (`cluster-enabled yes`) instead of a standalone server.
    pub(crate) cluster: bool,
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
            if user != "default" {
                // (A config naming a user twice does not load.)
                let _ = writeln!(conf, "user default off");
            }
            let _ = writeln!(conf, "user {user} on >{pass} ~* &* +@all");
            if self.cluster {
                // A replica of a cluster node logs in to its master as that user.
                let _ = writeln!(conf, "masteruser {user}");
                let _ = writeln!(conf, "masterauth {pass}");
            }
        }
        if self.cluster {
            // The cluster bus listens on port + 10000. A short node timeout makes failure
            // detection (and automatic failover) take seconds; replicas never move to another
            // master on their own (a huge migration barrier), so each shard keeps its replicas;
            // a replica's first sync starts at once and goes over the socket.
            let _ = writeln!(conf, "cluster-enabled yes");
            let _ = writeln!(conf, "cluster-config-file {}", nodes_conf_path(self.dir).display());
            let _ = writeln!(conf, "cluster-node-timeout 2000");
            let _ = writeln!(conf, "cluster-migration-barrier 999");
            // Nor does a master that gives its last slot away become a replica of the node that
            // took it (since Redis 6.2; older servers know no such setting, and do).
            if crate::process::server_version().is_some_and(|v| v >= (6, 2)) {
                let _ = writeln!(conf, "cluster-allow-replica-migration no");
            }
            let _ = writeln!(conf, "repl-diskless-sync yes");
            let _ = writeln!(conf, "repl-diskless-sync-delay 0");
            // Other nodes list a replica (CLUSTER SLOTS) once its replication offset is not 0:
            // after the master's first write or ping to it, which comes after 10 s by default.
            let _ = writeln!(conf, "repl-ping-replica-period 1");
        }
        conf
    }
}
