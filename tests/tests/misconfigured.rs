//! Nodes that can never serve, on real servers: a TLS certificate the client does not trust,
//! a URL whose scheme does not match the port (`redis://` on a TLS port, `rediss://` on a
//! plain one), and a Redis Cluster node given as a node. The health view says which, with a
//! hint naming the setting, and a lock attempt fails as misconfigured, never as a grant.

use std::time::Duration;

use redlease_client::Error;
use redlease_core::{Config, Health, LockOptions, TlsSettings};
use redlease_tests::{ClusterModeNode, Listen, Servers};

const CONNECT: Duration = Duration::from_millis(500);

/// A config for one node at `url` that needs it ready, with these TLS settings.
fn config(url: &str, tls: TlsSettings) -> Config {
    Config::from_urls([url]).unwrap().tls(tls).connect_timeout(CONNECT).require_all(true)
}

/// The health view each client (tokio, blocking mio) reports when `config`'s node does not
/// become ready.
fn unready(config: &Config) -> Vec<(&'static str, Health)> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let tokio = rt.block_on(redlease_tokio::Client::with_config(config.clone())).map(drop).unwrap_err();
    let mio = redlease_mio::Client::with_config(config.clone()).map(drop).unwrap_err();
    [("tokio", tokio), ("mio", mio)]
        .into_iter()
        .map(|(who, e)| match e {
            Error::Unhealthy(health) => (who, *health),
            other => panic!("[{who}] expected the health view, got {other}"),
        })
        .collect()
}

/// The node's last error, for each client; none doubles its context.
fn last_errors(config: &Config) -> Vec<(&'static str, Health, String)> {
    unready(config)
        .into_iter()
        .map(|(who, health)| {
            let e = health.nodes[0].last_error.clone().unwrap_or_default();
            assert!(!e.contains("connection lost: connection lost") && !e.contains("failed: connect failed"), "{e}");
            (who, health, e)
        })
        .collect()
}

#[test]
fn a_certificate_from_an_unknown_ca_is_misconfigured_and_names_the_setting() {
    let servers = Servers::builder().nodes(1).listen(Listen::Tls).start();
    let files = servers.tls().unwrap();
    let untrusted = config(&servers.node(0).tls_url(), TlsSettings::new().ca_file(&files.other_ca));
    for (who, health, e) in last_errors(&untrusted) {
        assert!(health.nodes[0].is_misconfigured() && health.misconfigured(), "[{who}] {health}");
        assert!(health.to_string().contains("MISCONFIGURED"), "[{who}] {health}");
        assert!(e.starts_with("TLS handshake failed: invalid peer certificate: UnknownIssuer"), "[{who}] {e}");
        assert!(e.contains("ca_file") && e.contains("REDLEASE_TLS_CA"), "[{who}] {e}");
    }
    // Trusted, but for another name: the hint names the other setting.
    let wrong_name = TlsSettings::new().ca_file(&files.ca).server_name("redis.example.com");
    for (who, health, e) in last_errors(&config(&servers.node(0).tls_url(), wrong_name)) {
        assert!(health.nodes[0].is_misconfigured(), "[{who}] {health}");
        assert!(e.contains("NotValidForName") && e.contains("server_name"), "[{who}] {e}");
    }
    // Without require_all too: no quorum can be ready, so connecting fails as misconfigured.
    match redlease_mio::Client::with_config(untrusted.require_all(false)) {
        Err(e @ Error::Unhealthy(_)) => assert!(e.is_misconfigured() && e.to_string().contains("UnknownIssuer"), "{e}"),
        other => panic!("{:?}", other.map(drop)),
    }
}

#[test]
fn a_scheme_that_does_not_match_the_port_gets_a_hint() {
    let servers = Servers::builder().nodes(1).listen(Listen::Tls).start();
    let files = servers.tls().unwrap();
    let node = servers.node(0);
    // A TLS server behind redis://: it drops our plaintext handshake at once.
    let tls_as_plain = format!("redis://{}", node.tls_addr());
    for (who, health, e) in last_errors(&config(&tls_as_plain, TlsSettings::new())) {
        assert!(e.contains("is this a TLS port? (use rediss:// for it)"), "[{who}] {e}\n{health}");
    }
    // A plain server behind rediss://: it waits for a line end (or answers an error), never TLS.
    let plain_as_tls = node.plain_url().replacen("redis://", "rediss://", 1);
    for (who, health, e) in last_errors(&config(&plain_as_tls, TlsSettings::new().ca_file(&files.ca))) {
        assert!(e.contains("the server did not answer TLS: is it a plain port? (use redis:// for it)"), "[{who}] {e}");
        assert!(!e.contains("connect timed out"), "[{who}] {e}\n{health}");
    }
}

#[test]
fn a_redis_cluster_node_given_as_a_node_is_used_as_one() {
    let node = ClusterModeNode::start();
    let url = node.url();
    // HELLO 3 says cluster: the node reads its map and locks in the keys' cluster form.
    let client = redlease_mio::Client::with_config(Config::from_urls([url.clone()]).unwrap()).unwrap();
    let health = client.health();
    assert!(health.nodes[0].cluster.is_some() && health.nodes[0].is_ready(), "{health}");
    let guard = client.lock_with(LockOptions::new("cluster:node", Duration::from_secs(10)).fencing(true)).unwrap();
    assert!(node.conn().unwrap().get("{cluster:node}").unwrap().is_some());
    guard.release().unwrap();
    client.close();
    // With wake-ups off the handshake still asks HELLO 3: its answer shows the cluster before
    // any request goes out, and the first attempt already takes the cluster form.
    let config = Config::from_urls([url]).unwrap().wake(false);
    let client = redlease_mio::Client::with_config(config).unwrap();
    let options = LockOptions::new("cluster:resp2", Duration::from_secs(10)).fencing(true).attempts(1);
    let guard = client.lock_with(options).unwrap();
    assert!(client.health().nodes[0].cluster.is_some());
    guard.release().unwrap();
    client.close();
}
