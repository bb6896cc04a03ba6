//! TLS (`rediss://`) and a Unix socket (`redis+unix://`): the same client, other URLs.
//!
//! `cargo run -p redlease-tokio --features tls --example tls -- rediss://host:6380 ...`
//! (with `REDLEASE_TLS_CA=/path/to/ca.pem` for a private CA).

use std::time::Duration;

use redlease_tokio::{Client, Config, TlsSettings};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // e.g. rediss://default:PASSWORD@my-cache.example.com:6380, or
    // redis+unix:///run/redis/redis.sock?db=0 (a mix works too).
    let urls: Vec<String> = std::env::args().skip(1).collect();
    let mut tls = TlsSettings::new(); // default: the Web PKI roots, the URL's host verified
    if let Ok(ca) = std::env::var("REDLEASE_TLS_CA") {
        tls = tls.ca_file(ca); // a private CA instead
    }
    // For servers that require a client certificate (mutual TLS):
    // tls = tls.client_cert_file("client.pem", "client.key");
    let client = Client::with_config(Config::from_urls(&urls)?.tls(tls)).await?;
    let guard = client.lock("orders:42", Duration::from_secs(10)).await?;
    println!("locked over {} nodes until {:?}", urls.len(), guard.valid_until());
    guard.release().await?;
    client.close().await;
    Ok(())
}
