//! Where each node is and which byte layer its connections use, decided once per client:
//! TCP or a Unix socket underneath, plain or TLS ([`tls`](crate::tls), feature `tls`) on top.
//! Both drivers move bytes through a [`Layer`] and never look at TLS themselves.

use std::path::PathBuf;

use redlease_core::{Config, ConfigError, Transport};

#[cfg(feature = "tls")]
use crate::tls::{TlsClient, TlsStream};

/// Where a node's socket connects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// TCP to `host:port`.
    Tcp {
        /// Host name or address.
        host: String,
        /// Port.
        port: u16,
    },
    /// A Unix domain socket.
    Unix(PathBuf),
}

/// How to reach one node: the socket's target, and the TLS client when it is `rediss://`.
#[derive(Clone, Debug)]
pub struct NodeTransport {
    /// Where the socket connects.
    pub target: Target,
    #[cfg(feature = "tls")]
    tls: Option<TlsClient>,
}

impl NodeTransport {
    /// Whether connections to this node are TLS sessions.
    pub fn is_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    /// The byte layer of a new connection (a fresh TLS session, whose client hello is then
    /// in [`Layer::ciphertext`]).
    pub fn layer(&self) -> Result<Layer, String> {
        #[cfg(feature = "tls")]
        if let Some(client) = &self.tls {
            return Ok(Layer::Tls(Box::new(TlsStream::new(client)?)));
        }
        Ok(Layer::Plain)
    }
}

/// Every node's transport, in config order. Reads the TLS files now, so that a missing CA
/// file or a bad key fails the client's construction with an error naming the node, not every
/// connect attempt later.
pub fn prepare(config: &Config) -> Result<Vec<NodeTransport>, ConfigError> {
    #[cfg(feature = "tls")]
    let mut built: Vec<(redlease_core::TlsSettings, String, TlsClient)> = Vec::new();
    let mut out = Vec::with_capacity(config.nodes.len());
    for (i, node) in config.nodes.iter().enumerate() {
        let target = match &node.transport {
            Transport::Unix(path) => {
                if !cfg!(unix) {
                    return Err(ConfigError::UnixUnsupported { node: node.to_string() });
                }
                Target::Unix(path.clone())
            }
            _ => Target::Tcp { host: node.host.clone(), port: node.port },
        };
        let tls = node.transport == Transport::Tls;
        #[cfg(feature = "tls")]
        {
            let client = if tls {
                let settings = config.tls_of(i);
                let cached = built.iter().find(|(s, h, _)| s == settings && *h == node.host).map(|(_, _, c)| c.clone());
                Some(match cached {
                    Some(c) => c,
                    None => {
                        let c = crate::tls::client(settings, &node.host)
                            .map_err(|reason| ConfigError::Tls { node: node.to_string(), reason })?;
                        built.push((settings.clone(), node.host.clone(), c.clone()));
                        c
                    }
                })
            } else {
                None
            };
            out.push(NodeTransport { target, tls: client });
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = i;
            if tls {
                return Err(ConfigError::Tls {
                    node: node.to_string(),
                    reason: "this build has no TLS: enable the `tls` feature of the adapter crate \
                             (redlease-tokio, redlease-smol or redlease-mio)"
                        .to_owned(),
                });
            }
            out.push(NodeTransport { target });
        }
    }
    Ok(out)
}

/// Bytes on their way between a socket and the engine: as they are, or through TLS.
#[derive(Debug)]
pub enum Layer {
    /// Plain TCP or a Unix socket.
    Plain,
    /// A TLS session.
    #[cfg(feature = "tls")]
    Tls(Box<TlsStream>),
}

impl Layer {
    /// Whether the connection is still in its TLS handshake (the engine must not hear of it
    /// yet). Always `false` for plain connections.
    pub fn is_handshaking(&self) -> bool {
        match self {
            Layer::Plain => false,
            #[cfg(feature = "tls")]
            Layer::Tls(t) => t.is_handshaking(),
        }
    }

    /// Bytes read from the socket: hand the plaintext they carry to `deliver` (at once for a
    /// plain connection; after decryption, through `scratch`, for TLS). `Err`: the TLS session
    /// failed, with the reason.
    pub fn input(&mut self, bytes: &[u8], scratch: &mut Vec<u8>, deliver: impl FnOnce(&[u8])) -> Result<(), String> {
        match self {
            Layer::Plain => {
                let _ = scratch;
                deliver(bytes);
                Ok(())
            }
            #[cfg(feature = "tls")]
            Layer::Tls(t) => {
                scratch.clear();
                t.feed(bytes, scratch)?;
                if !scratch.is_empty() {
                    deliver(scratch);
                }
                Ok(())
            }
        }
    }

    /// Bytes the layer itself must write before anything else (TLS records); empty for a
    /// plain connection.
    pub fn ciphertext(&self) -> &[u8] {
        match self {
            Layer::Plain => &[],
            #[cfg(feature = "tls")]
            Layer::Tls(t) => t.ciphertext(),
        }
    }

    /// The socket took `n` bytes of [`ciphertext`](Self::ciphertext).
    pub fn advance(&mut self, n: usize) {
        match self {
            Layer::Plain => {
                let _ = n;
            }
            #[cfg(feature = "tls")]
            Layer::Tls(t) => t.advance(n),
        }
    }

    /// For TLS: encrypt engine bytes into [`ciphertext`](Self::ciphertext), returning how many
    /// were taken. `None` for a plain connection: write them to the socket yourself.
    pub fn encrypt(&mut self, plain: &[u8]) -> Option<usize> {
        match self {
            Layer::Plain => {
                let _ = plain;
                None
            }
            #[cfg(feature = "tls")]
            Layer::Tls(t) => Some(t.send(plain)),
        }
    }
}
