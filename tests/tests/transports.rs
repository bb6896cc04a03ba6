//! TLS and Unix sockets on real servers, beyond the conformance suite (which runs whole over
//! both): what goes wrong is a typed failure naming the node and the reason, bounded by the
//! connect timeout, never a panic or a hang — for the tokio client and the blocking mio
//! client. And the embedded mio driver and mutual TLS work.

use std::time::{Duration, Instant};

use redlease_core::{Config, LockOptions, TlsSettings};
use redlease_tests::{Listen, Servers};

const CONNECT: Duration = Duration::from_millis(500);

/// A config for `url` that needs every node ready, with these TLS settings.
fn config(url: &str, tls: TlsSettings) -> Config {
    Config::from_urls([url]).unwrap().tls(tls).connect_timeout(CONNECT).require_all(true)
}

/// Connect with tokio and with the blocking mio client; both must fail naming `place` and
/// saying `reason` (any of the given texts), within a few connect timeouts.
fn refused(config: Config, place: &str, reasons: &[&str]) {
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let tokio = rt.block_on(redlease_tokio::Client::with_config(config.clone())).map(drop).unwrap_err().to_string();
    let mio = redlease_mio::Client::with_config(config).map(drop).unwrap_err().to_string();
    for (who, e) in [("tokio", &tokio), ("mio", &mio)] {
        assert!(e.contains(place), "[{who}] the error names {place}: {e}");
        assert!(reasons.iter().any(|r| e.contains(r)), "[{who}] the error says one of {reasons:?}: {e}");
    }
    assert!(started.elapsed() < 8 * CONNECT, "bounded by the connect timeout: {:?}", started.elapsed());
}

#[test]
fn an_unknown_ca_a_wrong_name_and_a_plaintext_server_are_named_failures() {
    let servers = Servers::builder().nodes(1).listen(Listen::Tls).start();
    let files = servers.tls().unwrap();
    let node = servers.node(0);
    let place = node.tls_addr().to_string();
    // Signed by a CA we do not trust.
    refused(config(&node.tls_url(), TlsSettings::new().ca_file(&files.other_ca)), &place, &["UnknownIssuer"]);
    // Trusted, but for another name.
    let wrong_name = TlsSettings::new().ca_file(&files.ca).server_name("redis.example.com");
    refused(config(&node.tls_url(), wrong_name), &place, &["NotValidForName"]);
    // No CA given: the Web PKI roots do not know our throwaway CA either.
    refused(config(&node.tls_url(), TlsSettings::new()), &place, &["UnknownIssuer"]);
    // A plaintext server behind rediss://: Redis waits for the end of a line that never
    // comes, so the handshake is cut off by the connect timeout.
    let plain = node.plain_url().replacen("redis://", "rediss://", 1);
    refused(config(&plain, TlsSettings::new().ca_file(&files.ca)), &node.addr().to_string(), &["TLS", "timed out"]);
    // A TLS server behind redis://: our plaintext handshake is not TLS to it.
    let tls_as_plain = format!("redis://{}", node.tls_addr());
    refused(config(&tls_as_plain, TlsSettings::new()), &place, &["closed", "silent", "lost", "reset"]);
}

#[test]
fn a_server_that_requires_a_client_certificate_refuses_one_without_and_serves_one_with() {
    let servers = Servers::builder().nodes(1).listen(Listen::TlsClientAuth).start();
    let files = servers.tls().unwrap();
    let node = servers.node(0);
    let place = node.tls_addr().to_string();
    refused(
        config(&node.tls_url(), TlsSettings::new().ca_file(&files.ca)),
        &place,
        &["CertificateRequired", "closed", "alert", "lost"],
    );
    let mutual = TlsSettings::new().ca_file(&files.ca).client_cert_file(&files.client_cert, &files.client_key);
    let client = redlease_mio::Client::with_config(config(&node.tls_url(), mutual)).unwrap();
    let guard = client.lock_with(LockOptions::new("tls:mutual", Duration::from_secs(10))).unwrap();
    guard.release().unwrap();
    client.close();
}

#[test]
fn bad_tls_settings_fail_at_construction_naming_the_node_and_never_the_key() {
    let servers = Servers::builder().nodes(1).listen(Listen::Tls).start();
    let node = servers.node(0);
    let missing = TlsSettings::new().ca_file("/nonexistent/ca.pem");
    let e = redlease_mio::Client::with_config(config(&node.tls_url(), missing)).map(drop).unwrap_err().to_string();
    assert!(e.contains("/nonexistent/ca.pem") && e.contains(&node.tls_addr().to_string()), "{e}");
    let key = "-----BEGIN PRIVATE KEY-----\ntopsecretkeymaterial\n-----END PRIVATE KEY-----\n";
    let files = servers.tls().unwrap();
    let bad_key =
        TlsSettings::new().ca_file(&files.ca).client_cert_pem(std::fs::read(&files.client_cert).unwrap(), key);
    let e = redlease_mio::Client::with_config(config(&node.tls_url(), bad_key.clone())).map(drop).unwrap_err();
    for text in [e.to_string(), format!("{e:?}"), format!("{bad_key:?}")] {
        assert!(!text.contains("topsecret"), "{text}");
    }
}

#[test]
fn the_embedded_driver_locks_over_tls_and_over_a_unix_socket() {
    for listen in [Listen::Tls, Listen::Unix] {
        let servers = Servers::builder().nodes(3).listen(listen).start();
        let mut config = Config::from_urls(servers.urls()).unwrap();
        if let Some(files) = servers.tls() {
            config = config.tls(TlsSettings::new().ca_file(&files.ca));
        }
        let mut poll = redlease_mio::mio::Poll::new().unwrap();
        let mut driver = redlease_mio::Driver::new(config, redlease_mio::mio::Token(0)).unwrap();
        driver.register(poll.registry(), Instant::now()).unwrap();
        let mut events = redlease_mio::mio::Events::with_capacity(64);
        let lock = driver
            .acquire(Instant::now(), &LockOptions::new("embedded:tls", Duration::from_secs(10)), b"embedded-token")
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut acquired = false;
        let mut released = false;
        while !released {
            assert!(Instant::now() < deadline, "{listen:?}: acquired {acquired}, released {released}");
            driver.flush(Instant::now());
            let wait = driver.poll_timeout().map(|t| t.saturating_duration_since(Instant::now()));
            poll.poll(&mut events, Some(wait.unwrap_or(Duration::from_millis(50)).min(Duration::from_millis(50))))
                .unwrap();
            let now = Instant::now();
            for ev in events.iter() {
                driver.handle_event(now, ev);
            }
            driver.handle_timeout(now);
            while let Some(event) = driver.poll_event() {
                match event {
                    redlease_core::Event::Acquired { lock: l, .. } if l == lock => {
                        acquired = true;
                        driver.release(now, lock).unwrap();
                    }
                    redlease_core::Event::Released { lock: l, report } if l == lock => {
                        assert_eq!(report.outcome, redlease_core::ReleaseOutcome::Released, "{listen:?}");
                        released = true;
                    }
                    redlease_core::Event::AcquireFailed { error, .. } => panic!("{listen:?}: {error}"),
                    _ => {}
                }
            }
        }
        servers.assert_no_leaks();
    }
}

#[test]
fn the_ca_as_pem_bytes_a_server_name_override_and_the_danger_mode_each_connect() {
    let servers = Servers::builder().nodes(1).listen(Listen::Tls).start();
    let files = servers.tls().unwrap();
    let node = servers.node(0);
    let ca = std::fs::read(&files.ca).unwrap();
    // Through `localhost` in the URL's place (the certificate names both), the CA given as bytes.
    let by_name = TlsSettings::new().ca_pem(ca).server_name("localhost");
    // Any certificate, unverified: for throwaway test servers only.
    let danger = TlsSettings::new().danger_accept_invalid_certs(true);
    for (what, tls) in [("PEM bytes + server name", by_name), ("danger_accept_invalid_certs", danger)] {
        let client =
            redlease_mio::Client::with_config(config(&node.tls_url(), tls)).unwrap_or_else(|e| panic!("{what}: {e}"));
        let guard = client.lock_with(LockOptions::new("tls:settings", Duration::from_secs(10))).unwrap();
        guard.release().unwrap();
        client.close();
    }
    // A server name the certificate does not carry is refused even with the right CA bytes.
    let wrong = TlsSettings::new().ca_pem(std::fs::read(&files.ca).unwrap()).server_name("elsewhere");
    refused(config(&node.tls_url(), wrong), &node.tls_addr().to_string(), &["NotValidForName"]);
}
