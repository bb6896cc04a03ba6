//! TLS settings as plain data ([`TlsSettings`]): which certificates to trust, which client
//! certificate to show, which name to verify. The core never opens a TLS session; the client
//! layer (`redlease-client`, feature `tls`) builds a rustls configuration from these.

use std::fmt;
use std::path::PathBuf;

/// PEM data: a file to read when the client is built, or the bytes themselves.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Pem {
    /// A PEM file, read when the client is built.
    File(PathBuf),
    /// PEM bytes.
    Bytes(Vec<u8>),
}

impl Pem {
    /// A PEM file.
    pub fn file(path: impl Into<PathBuf>) -> Pem {
        Pem::File(path.into())
    }

    /// PEM bytes.
    pub fn bytes(pem: impl Into<Vec<u8>>) -> Pem {
        Pem::Bytes(pem.into())
    }
}

impl fmt::Debug for Pem {
    /// A file shows its path; bytes only their length (they may be a private key).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pem::File(p) => write!(f, "File({})", p.display()),
            Pem::Bytes(b) => write!(f, "Bytes({} bytes)", b.len()),
        }
    }
}

/// How `rediss://` nodes are verified and what the client shows them.
///
/// The defaults verify the server's certificate against the Web PKI roots (Mozilla's list,
/// compiled in) and its name against the host of the URL — an IP address in the URL is
/// checked against the certificate's IP addresses. Set one for the whole client with
/// [`Config::tls`](crate::Config::tls), or per node with
/// [`NodeConfig::tls`](crate::NodeConfig::tls).
///
/// ```
/// # use redlease_core::TlsSettings;
///
/// let tls = TlsSettings::new()
///     .ca_file("/etc/redis/ca.pem")                               // a private CA
///     .client_cert_file("/etc/redis/client.pem", "/etc/redis/client.key") // mutual TLS
///     .server_name("redis.internal");                             // verify this name instead
/// assert!(!format!("{tls:?}").contains("BEGIN"));
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsSettings {
    /// Certificates to trust, PEM (one or more). `None`: the Web PKI roots.
    pub ca: Option<Pem>,
    /// The client certificate chain, PEM, for servers that require one (`tls-auth-clients`).
    pub client_cert: Option<Pem>,
    /// The client certificate's private key, PEM (PKCS #8, PKCS #1 or SEC1).
    pub client_key: Option<Pem>,
    /// The name to verify in the server's certificate instead of the URL's host (and to send
    /// as SNI): for nodes reached by an address their certificate does not name.
    pub server_name: Option<String>,
    /// Accept any certificate, unverified. For tests against throwaway servers only: anyone
    /// on the path can then read and change the traffic, passwords included.
    pub danger_accept_invalid_certs: bool,
}

impl TlsSettings {
    /// The defaults: Web PKI roots, no client certificate, the URL's host as the name.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trust the certificates in this PEM file (instead of the Web PKI roots).
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca = Some(Pem::file(path));
        self
    }

    /// Trust these PEM certificates (instead of the Web PKI roots).
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca = Some(Pem::bytes(pem));
        self
    }

    /// Show this client certificate chain and key, from PEM files (mutual TLS).
    pub fn client_cert_file(mut self, cert: impl Into<PathBuf>, key: impl Into<PathBuf>) -> Self {
        self.client_cert = Some(Pem::file(cert));
        self.client_key = Some(Pem::file(key));
        self
    }

    /// Show this client certificate chain and key, PEM bytes (mutual TLS).
    pub fn client_cert_pem(mut self, cert: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        self.client_cert = Some(Pem::bytes(cert));
        self.client_key = Some(Pem::bytes(key));
        self
    }

    /// Verify (and send as SNI) this name instead of the URL's host.
    pub fn server_name(mut self, name: impl Into<String>) -> Self {
        self.server_name = Some(name.into());
        self
    }

    /// Accept any server certificate without verifying it. **Tests only**: see the field.
    pub fn danger_accept_invalid_certs(mut self, on: bool) -> Self {
        self.danger_accept_invalid_certs = on;
        self
    }
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSettings")
            .field("ca", &self.ca)
            .field("client_cert", &self.client_cert)
            // A key file's path is no secret; key bytes are never shown (`Pem`'s Debug).
            .field("client_key", &self.client_key)
            .field("server_name", &self.server_name)
            .field("danger_accept_invalid_certs", &self.danger_accept_invalid_certs)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_pem_bytes() {
        let tls =
            TlsSettings::new().client_cert_pem("-----BEGIN CERTIFICATE-----", "-----BEGIN PRIVATE KEY-----secret");
        let text = format!("{tls:?}");
        assert!(!text.contains("secret") && !text.contains("BEGIN"), "{text}");
        assert!(text.contains("bytes"), "{text}");
        let tls = TlsSettings::new().ca_file("/etc/ca.pem");
        assert!(format!("{tls:?}").contains("/etc/ca.pem"));
    }
}
