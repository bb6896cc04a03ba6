//! Why a connection's byte layer failed, as the TLS layer reports it and the connection
//! state machine reads it (with or without the `tls` feature).

/// Why a connection's byte layer (a TLS session) failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(crate) enum LayerError {
    /// The TLS handshake failed in a way no retry fixes: the server's certificate did not
    /// verify, or the server does not speak TLS. The text says which and what to set, for
    /// [`Engine::handle_tls_failed`](redlease_core::Engine::handle_tls_failed).
    Misconfigured(String),
    /// Another failure (an alert from the server, a corrupt record): the whole reason, for a
    /// failed connect attempt or a lost connection.
    Failed(String),
}

impl std::fmt::Display for LayerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LayerError::Misconfigured(why) => write!(f, "TLS handshake failed: {why}"),
            LayerError::Failed(why) => f.write_str(why),
        }
    }
}
