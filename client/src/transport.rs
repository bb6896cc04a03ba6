//! Where each node is and which byte layer its connections use, decided once per client:
//! TCP or a Unix socket underneath, plain or TLS ([`tls`](crate::tls), feature `tls`) on top.
//! Both drivers move bytes through a [`Layer`] and never look at TLS themselves.

use std::path::PathBuf;

use redlease_core::{Config, ConfigError, Engine, NodeId, Transport};

use crate::layer_error::LayerError;

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
    /// The node's TLS settings, ready to open sessions with, when it is `rediss://`.
    #[cfg(feature = "tls")]
    pub fn tls(&self) -> Option<&TlsClient> {
        self.tls.as_ref()
    }

    /// Connect to `host:port` from now on (a Sentinel-managed node's link, which goes to a
    /// sentinel or to the master one named): with TLS, that host is the name verified, unless
    /// the settings give a server name.
    pub(crate) fn retarget(&mut self, host: &str, port: u16) {
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            if !matches!(&self.target, Target::Tcp { host: h, .. } if h == host) {
                self.tls = Some(tls.for_host(host));
            }
        }
        self.target = Target::Tcp { host: host.to_owned(), port };
    }

    /// The byte layer of a new connection (a fresh TLS session, whose client hello is then
    /// in [`Layer::next_write`]).
    pub(crate) fn layer(&self) -> Result<Layer, String> {
        #[cfg(feature = "tls")]
        if let Some(client) = &self.tls {
            return Ok(Layer::Tls(Box::new(TlsStream::new(client)?)));
        }
        Ok(Layer::Plain)
    }
}

/// Why a `rediss://` node cannot be reached by a build without TLS, and what to enable: the
/// facade's feature first (what users add), then the runtime crates'.
#[cfg_attr(feature = "tls", allow(dead_code))]
const NO_TLS: &str = "this build has no TLS: enable the `tls` feature of redlease (cargo add redlease \
                      --features tls), or of redlease-tokio, redlease-smol or redlease-mio where you use one \
                      directly";

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
                return Err(ConfigError::Tls { node: node.to_string(), reason: NO_TLS.to_owned() });
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
    pub(crate) fn is_handshaking(&self) -> bool {
        match self {
            Layer::Plain => false,
            #[cfg(feature = "tls")]
            Layer::Tls(t) => t.is_handshaking(),
        }
    }

    /// Bytes read from the socket: hand the plaintext they carry to `deliver` (at once for a
    /// plain connection; after decryption, through `scratch`, for TLS). `Err`: the TLS session
    /// failed, with the reason.
    pub(crate) fn input(
        &mut self,
        bytes: &[u8],
        scratch: &mut Vec<u8>,
        deliver: impl FnOnce(&[u8]),
    ) -> Result<(), LayerError> {
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

    /// The next bytes to write to the socket, and whose they are: for a plain connection the
    /// engine's (`engine.poll_transmit`); for TLS, records — the engine's bytes encrypted into
    /// them first, unless `handshaking` (then only the handshake's own records). `None`:
    /// nothing to write. Report what the socket took with [`wrote`](Self::wrote). Both
    /// drivers write through this one loop.
    #[inline]
    pub(crate) fn next_write<'a>(
        &'a mut self,
        engine: &'a mut Engine,
        node: NodeId,
        handshaking: bool,
    ) -> Option<(&'a [u8], Origin)> {
        match self {
            Layer::Plain if handshaking => None,
            Layer::Plain => engine.poll_transmit(node).map(|bytes| (bytes, Origin::Engine)),
            #[cfg(feature = "tls")]
            Layer::Tls(t) => {
                if !handshaking {
                    while let Some(bytes) = engine.poll_transmit(node) {
                        let n = t.send(bytes);
                        if n == 0 {
                            break;
                        }
                        engine.advance_transmit(node, n);
                    }
                }
                let records = t.ciphertext();
                (!records.is_empty()).then_some((records, Origin::Layer))
            }
        }
    }

    /// The socket took `n` bytes of what [`next_write`](Self::next_write) gave.
    #[inline]
    pub(crate) fn wrote(&mut self, engine: &mut Engine, node: NodeId, from: Origin, n: usize) {
        match from {
            Origin::Engine => engine.advance_transmit(node, n),
            Origin::Layer =>
            {
                #[cfg(feature = "tls")]
                if let Layer::Tls(t) = self {
                    t.advance(n);
                }
            }
        }
    }

    /// Whether the layer holds bytes of its own not yet written (TLS records).
    pub(crate) fn has_pending(&self) -> bool {
        match self {
            Layer::Plain => false,
            #[cfg(feature = "tls")]
            Layer::Tls(t) => !t.ciphertext().is_empty(),
        }
    }
}

/// Whose bytes [`Layer::next_write`] handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(crate) enum Origin {
    /// The engine's, as they are.
    Engine,
    /// The layer's own (TLS records).
    Layer,
}

#[cfg(test)]
mod no_tls_tests {
    /// The facade's feature comes first: it is what a user of `redlease` enables.
    #[test]
    fn the_no_tls_message_names_the_facades_feature() {
        assert!(super::NO_TLS.contains("`tls` feature of redlease (cargo add redlease --features tls)"));
    }

    /// Without the `tls` feature (`cargo test -p redlease-client`), a `rediss://` node is
    /// refused with that message.
    #[cfg(not(feature = "tls"))]
    #[test]
    fn a_tls_node_without_tls_is_refused_naming_the_feature() {
        let config = redlease_core::Config::from_urls(["rediss://127.0.0.1:6380"]).unwrap();
        let e = super::prepare(&config).map(drop).unwrap_err().to_string();
        assert!(e.contains("`tls` feature of redlease") && e.contains("rediss://127.0.0.1:6380"), "{e}");
    }
}
