//! Throwaway certificates for TLS nodes: one CA, a server certificate for `localhost` and
//! `127.0.0.1` signed by it, and a client certificate for mutual TLS, generated at run time
//! and written as PEM files into a temporary directory; and which running node of this process
//! uses which certificates.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType};

use crate::tempdir::TempDir;

/// The PEM files of a set of TLS servers; they live as long as the set.
#[derive(Debug)]
pub struct TlsFiles {
    /// The CA certificate: what a client trusts (`--tls-ca`, `TlsSettings::ca_file`).
    pub ca: PathBuf,
    /// The server certificate (for `localhost` and `127.0.0.1`) and its key.
    pub server_cert: PathBuf,
    /// The server's key.
    pub server_key: PathBuf,
    /// A client certificate signed by the CA, for nodes that require one (mutual TLS).
    pub client_cert: PathBuf,
    /// The client certificate's key.
    pub client_key: PathBuf,
    /// A second CA nobody uses: a client that trusts only it fails to verify the nodes.
    pub other_ca: PathBuf,
    _dir: TempDir,
}

impl TlsFiles {
    /// Generate the CA and the certificates into a new temporary directory.
    pub(crate) fn generate() -> Result<TlsFiles, String> {
        let dir = TempDir::new("redlease-tls").map_err(|e| format!("cannot create a temp dir: {e}"))?;
        let err = |e: rcgen::Error| format!("certificate generation: {e}");
        let ca_key = KeyPair::generate().map_err(err)?;
        let params = ca_params("redlease test CA")?;
        let ca_cert = params.self_signed(&ca_key).map_err(err)?;
        let issuer = Issuer::new(params, ca_key);

        let server_key = KeyPair::generate().map_err(err)?;
        let mut server = CertificateParams::new(vec!["localhost".to_owned()]).map_err(err)?;
        server.subject_alt_names.push(SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()));
        server.distinguished_name.push(DnType::CommonName, "redlease test server");
        let server_cert = server.signed_by(&server_key, &issuer).map_err(err)?;

        let client_key = KeyPair::generate().map_err(err)?;
        let mut client = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        client.distinguished_name.push(DnType::CommonName, "redlease test client");
        let client_cert = client.signed_by(&client_key, &issuer).map_err(err)?;

        let other_key = KeyPair::generate().map_err(err)?;
        let other = ca_params("some other CA")?.self_signed(&other_key).map_err(err)?;

        let write = |name: &str, pem: String| -> Result<PathBuf, String> {
            let path = dir.path().join(name);
            std::fs::write(&path, pem).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            Ok(path)
        };
        Ok(TlsFiles {
            ca: write("ca.pem", ca_cert.pem())?,
            server_cert: write("server.pem", server_cert.pem())?,
            server_key: write("server.key", server_key.serialize_pem())?,
            client_cert: write("client.pem", client_cert.pem())?,
            client_key: write("client.key", client_key.serialize_pem())?,
            other_ca: write("other-ca.pem", other.pem())?,
            _dir: dir,
        })
    }
}

fn ca_params(name: &str) -> Result<CertificateParams, String> {
    let mut params =
        CertificateParams::new(Vec::<String>::new()).map_err(|e| format!("certificate generation: {e}"))?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    params.distinguished_name.push(DnType::CommonName, name);
    Ok(params)
}

/// The TLS ports of the running TLS nodes of this process, with their certificates.
static TLS_NODES: Mutex<Vec<(u16, Arc<TlsFiles>)>> = Mutex::new(Vec::new());

/// The certificates of the TLS node of this process listening on `port`, if there is one: how
/// a test suite that only sees URLs finds the CA to trust.
pub fn tls_files_for(port: u16) -> Option<Arc<TlsFiles>> {
    let nodes = TLS_NODES.lock().unwrap_or_else(|e| e.into_inner());
    nodes.iter().find(|(p, _)| *p == port).map(|(_, t)| Arc::clone(t))
}

/// Record that the node listening with TLS on `port` uses `files`.
pub(crate) fn register(port: u16, files: &Arc<TlsFiles>) {
    TLS_NODES.lock().unwrap_or_else(|e| e.into_inner()).push((port, Arc::clone(files)));
}

/// Forget the node listening with TLS on `port`.
pub(crate) fn unregister(port: u16) {
    TLS_NODES.lock().unwrap_or_else(|e| e.into_inner()).retain(|(p, _)| *p != port);
}
