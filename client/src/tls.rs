//! TLS as a byte layer between a socket and the engine, written once for every adapter.
//!
//! rustls's [`ClientConnection`] is itself a sans-IO state machine: ciphertext in, plaintext
//! out and the other way round. [`TlsStream`] wraps one so that a driver only moves bytes:
//! what it reads from the socket goes to [`TlsStream::feed`] (plaintext comes back for the
//! engine), what the engine wants sent goes to [`TlsStream::send`], and
//! [`TlsStream::ciphertext`] is what to write to the socket. The handshake runs before the
//! engine hears of the connection (the drivers call `handle_connected` once
//! [`TlsStream::is_handshaking`] turns false), so the engine's connect timeout bounds it and a
//! failed handshake is a failed connect attempt, retried with the usual backoff.
//!
//! Crypto: rustls with the *ring* provider (portable C and assembly built by `cc`; the
//! aws-lc-rs provider would need cmake and a much larger build for no gain here). Trust: the
//! settings' CA bundle when given, else the Web PKI roots compiled in from `webpki-roots`
//! (Mozilla's list: managed Redis services present publicly trusted certificates, and a
//! compiled-in list behaves the same in a scratch container as on a desktop).
//!
//! [`Blocking`] runs the same session over a blocking socket as `Read + Write`, for tools that
//! talk to a node outside the engine (the CLI's `status` and `scan`).

use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::sync::Arc;

use redlease_core::{Pem, TlsSettings};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::layer_error::LayerError;

/// What opening a TLS session to one node needs: the rustls configuration (shared by the
/// nodes with the same settings) and the name to verify.
#[derive(Clone)]
pub struct TlsClient {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    /// The name was given in the settings (`TlsSettings::server_name`), not taken from the host.
    fixed: bool,
}

impl std::fmt::Debug for TlsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsClient").field("name", &self.name).finish_non_exhaustive()
    }
}

/// Build the rustls configuration of `settings`, for clients that reach nodes by `host`.
/// `Err` says what is wrong (a file that cannot be read, no certificate in it, a bad key),
/// never with key material in it.
pub(crate) fn client(settings: &TlsSettings, host: &str) -> Result<TlsClient, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let builder = if settings.danger_accept_invalid_certs {
        builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAnything(provider)))
    } else {
        let mut roots = RootCertStore::empty();
        match &settings.ca {
            Some(pem) => {
                let bytes = read(pem, "CA bundle")?;
                let mut any = false;
                for cert in CertificateDer::pem_slice_iter(&bytes) {
                    let cert = cert.map_err(|e| format!("CA bundle {}: {e}", name_of(pem)))?;
                    roots.add(cert).map_err(|e| format!("CA bundle {}: {e}", name_of(pem)))?;
                    any = true;
                }
                if !any {
                    return Err(format!("CA bundle {}: no certificate in it", name_of(pem)));
                }
            }
            None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        }
        builder.with_root_certificates(roots)
    };
    let config = match (&settings.client_cert, &settings.client_key) {
        (Some(cert), Some(key)) => {
            let bytes = read(cert, "client certificate")?;
            let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&bytes)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("client certificate {}: {e}", name_of(cert)))?;
            if chain.is_empty() {
                return Err(format!("client certificate {}: no certificate in it", name_of(cert)));
            }
            let key_bytes = read(key, "client key")?;
            // The parse error of a key says nothing of its content.
            let key = PrivateKeyDer::from_pem_slice(&key_bytes)
                .map_err(|_| format!("client key {}: no PKCS #8, PKCS #1 or SEC1 private key in it", name_of(key)))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| format!("client certificate and key: {e}"))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => return Err("a client certificate needs its key, and a key its certificate".to_owned()),
    };
    let name = settings.server_name.as_deref().unwrap_or(host);
    let name = match name.parse::<IpAddr>() {
        Ok(ip) => ServerName::IpAddress(ip.into()),
        Err(_) => ServerName::try_from(name.to_owned()).map_err(|e| format!("server name {name:?}: {e}"))?,
    };
    Ok(TlsClient { config: Arc::new(config), name, fixed: settings.server_name.is_some() })
}

impl TlsClient {
    /// The same settings for a connection to `host` (a Sentinel-managed node's sentinels and
    /// masters): its name is the one verified, unless the settings give a server name.
    pub(crate) fn for_host(&self, host: &str) -> TlsClient {
        let name = match host.parse::<IpAddr>() {
            Ok(ip) => Some(ServerName::IpAddress(ip.into())),
            Err(_) => ServerName::try_from(host.to_owned()).ok(),
        };
        match name {
            Some(name) if !self.fixed => TlsClient { config: Arc::clone(&self.config), name, fixed: false },
            _ => self.clone(),
        }
    }
}

fn read(pem: &Pem, what: &str) -> Result<Vec<u8>, String> {
    match pem {
        Pem::File(path) => std::fs::read(path).map_err(|e| format!("cannot read the {what} {}: {e}", path.display())),
        Pem::Bytes(b) => Ok(b.clone()),
        _ => Err(format!("unsupported {what} source")),
    }
}

fn name_of(pem: &Pem) -> String {
    match pem {
        Pem::File(path) => path.display().to_string(),
        _ => "(PEM bytes)".to_owned(),
    }
}

/// One TLS session over one connection: see the module documentation.
pub struct TlsStream {
    conn: ClientConnection,
    /// Ciphertext not yet taken by the socket, from `sent` on.
    out: Vec<u8>,
    sent: usize,
}

impl std::fmt::Debug for TlsStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsStream")
            .field("handshaking", &self.conn.is_handshaking())
            .field("unsent", &(self.out.len() - self.sent))
            .finish()
    }
}

impl TlsStream {
    /// Start a session: the client hello is ready in [`ciphertext`](Self::ciphertext).
    pub(crate) fn new(client: &TlsClient) -> Result<Self, String> {
        let conn = ClientConnection::new(Arc::clone(&client.config), client.name.clone())
            .map_err(|e| format!("TLS setup: {e}"))?;
        let mut stream = TlsStream { conn, out: Vec::new(), sent: 0 };
        stream.collect_ciphertext();
        Ok(stream)
    }

    /// Whether the handshake is still going on (nothing may be sent for the engine yet).
    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// Ciphertext read from the socket: decrypt it, append the plaintext to `plain`.
    /// `Err` with the reason when the session fails: a misconfiguration (a certificate that
    /// does not verify, a server that does not speak TLS), or another failure (an alert, a
    /// corrupt record).
    pub(crate) fn feed(&mut self, mut cipher: &[u8], plain: &mut Vec<u8>) -> Result<(), LayerError> {
        while !cipher.is_empty() {
            match self.conn.read_tls(&mut cipher) {
                Ok(_) => {}
                Err(e) => return Err(LayerError::Failed(format!("TLS: {e}"))),
            }
            let state = self.conn.process_new_packets().map_err(|e| {
                // Send the alert that says why, if the socket still takes it.
                self.collect_ciphertext();
                describe(&e)
            })?;
            let ready = state.plaintext_bytes_to_read();
            if ready > 0 {
                let start = plain.len();
                plain.resize(start + ready, 0);
                let n = self.conn.reader().read(&mut plain[start..]).unwrap_or(0);
                plain.truncate(start + n);
            }
        }
        self.collect_ciphertext();
        Ok(())
    }

    /// Plaintext for the server: encrypt as much of it as the session takes (all of it once
    /// the handshake is done); returns how much it took.
    pub(crate) fn send(&mut self, plain: &[u8]) -> usize {
        let n = self.conn.writer().write(plain).unwrap_or(0);
        self.collect_ciphertext();
        n
    }

    /// Ciphertext waiting for the socket.
    pub(crate) fn ciphertext(&self) -> &[u8] {
        &self.out[self.sent..]
    }

    /// The socket took `n` bytes of [`ciphertext`](Self::ciphertext).
    pub(crate) fn advance(&mut self, n: usize) {
        self.sent = (self.sent + n).min(self.out.len());
        if self.sent == self.out.len() {
            self.out.clear();
            self.sent = 0;
        }
    }

    fn collect_ciphertext(&mut self) {
        while self.conn.wants_write() {
            if self.conn.write_tls(&mut self.out).is_err() {
                break;
            }
        }
    }
}

/// A TLS session over a blocking socket, as `Read + Write`: for tools that send their own
/// commands to a node (the CLI's `status` and `scan`), with the same trust and verification
/// as the clients. The socket's own timeouts bound every step, the handshake included.
pub struct Blocking<S> {
    session: TlsStream,
    socket: S,
    /// Decrypted bytes not yet read, from `taken` on.
    plain: Vec<u8>,
    taken: usize,
}

impl<S: std::fmt::Debug> std::fmt::Debug for Blocking<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blocking").field("socket", &self.socket).field("session", &self.session).finish()
    }
}

impl<S: Read + Write> Blocking<S> {
    /// Run the handshake with `client`'s settings over `socket`. A failed handshake is an
    /// error of kind `InvalidData` whose text says why (as the clients report it), or the
    /// socket's own error (a timeout, a reset).
    pub fn connect(client: &TlsClient, socket: S) -> io::Result<Self> {
        let session = TlsStream::new(client).map_err(io::Error::other)?;
        let mut stream = Blocking { session, socket, plain: Vec::new(), taken: 0 };
        while stream.session.is_handshaking() {
            stream.push()?;
            if !stream.pull()? {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "TLS handshake failed: the server closed the connection",
                ));
            }
        }
        stream.push()?;
        Ok(stream)
    }

    /// The socket underneath.
    pub fn get_ref(&self) -> &S {
        &self.socket
    }

    /// Write every pending ciphertext byte to the socket.
    fn push(&mut self) -> io::Result<()> {
        while !self.session.ciphertext().is_empty() {
            let n = self.socket.write(self.session.ciphertext())?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.session.advance(n);
        }
        self.socket.flush()
    }

    /// Read once from the socket and decrypt what came; `false` at the end of the stream.
    fn pull(&mut self) -> io::Result<bool> {
        let mut buf = [0u8; 16 * 1024];
        let n = self.socket.read(&mut buf)?;
        if n == 0 {
            return Ok(false);
        }
        if self.taken == self.plain.len() {
            self.plain.clear();
            self.taken = 0;
        }
        let fed = self.session.feed(&buf[..n], &mut self.plain);
        // Whatever the session answers (a key update, or the alert that says why it failed).
        let pushed = self.push();
        fed.map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        pushed?;
        Ok(true)
    }
}

impl<S: Read + Write> Read for Blocking<S> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.taken == self.plain.len() {
            if !self.pull()? {
                return Ok(0);
            }
        }
        let n = out.len().min(self.plain.len() - self.taken);
        out[..n].copy_from_slice(&self.plain[self.taken..self.taken + n]);
        self.taken += n;
        Ok(n)
    }
}

impl<S: Read + Write> Write for Blocking<S> {
    fn write(&mut self, plain: &[u8]) -> io::Result<usize> {
        let n = self.session.send(plain);
        self.push()?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.push()
    }
}

/// A rustls error as a reason a person can act on: a certificate that does not verify and a
/// server that does not speak TLS are misconfigurations, named with the setting to check.
fn describe(e: &rustls::Error) -> LayerError {
    use rustls::CertificateError as C;
    match e {
        rustls::Error::InvalidCertificate(why) => {
            let hint = match why {
                C::NotValidForName | C::NotValidForNameContext { .. } => {
                    "the certificate does not name the host it was checked against: connect by a name it has, or \
                     set TlsSettings::server_name to one"
                }
                C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. } => {
                    "check the certificate's dates and this machine's clock"
                }
                _ => {
                    "trust the CA that signed the server's certificate: TlsSettings::ca_file (command line: \
                     --tls-ca or REDLEASE_TLS_CA)"
                }
            };
            LayerError::Misconfigured(format!("invalid peer certificate: {why:?}: {hint}"))
        }
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => LayerError::Misconfigured(
            format!("the server did not answer TLS: is it a plain port? (use redis:// for it) ({e})"),
        ),
        rustls::Error::AlertReceived(alert) => {
            LayerError::Failed(format!("TLS handshake failed: the server sent alert {alert:?}"))
        }
        other => LayerError::Failed(format!("TLS handshake failed: {other}")),
    }
}

/// The verifier of `danger_accept_invalid_certs`: accepts any certificate, still checks the
/// handshake signatures (so the session keys are the server's, whoever it is).
#[derive(Debug)]
struct AcceptAnything(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use redlease_core::TlsSettings;

    /// A Sentinel-managed node's connections verify the host they go to, unless the settings
    /// name the server.
    #[test]
    fn another_host_is_verified_by_its_own_name_unless_one_is_set() {
        let first = super::client(&TlsSettings::new(), "sentinel-1.example").unwrap();
        let moved = format!("{:?}", first.for_host("10.0.0.7"));
        assert!(moved.contains("[10, 0, 0, 7]") && !moved.contains("sentinel-1"), "{moved}");
        let named = super::client(&TlsSettings::new().server_name("redis.example"), "sentinel-1.example").unwrap();
        let kept = format!("{:?}", named.for_host("master-2.example"));
        assert!(kept.contains("redis.example") && !kept.contains("master-2"), "{kept}");
    }
}
