//! The client config every redlease subject builds from a cluster's URLs.

use redlease_core::{Config, TlsSettings, Transport};

/// The config for `urls`; TLS nodes of the benchmark's clusters trust the CA that signed them.
pub(crate) fn config(urls: &[String]) -> Result<Config, String> {
    let mut config = Config::from_urls(urls).map_err(|e| e.to_string())?;
    for node in &mut config.nodes {
        if node.transport == Transport::Tls {
            if let Some(files) = redlease_cluster::tls_files_for(node.port) {
                node.tls = Some(TlsSettings::new().ca_file(&files.ca));
            }
        }
    }
    Ok(config)
}
