//! `status` given a URL whose scheme does not match the port: it says which setting to check,
//! as the clients do, instead of a bare "connection reset".

#![cfg(feature = "tls")]

mod common;

use common::{redlease, run, stdout};
use redlease_servers::{Listen, Servers};

#[test]
fn status_hints_at_a_scheme_that_does_not_match_the_port() {
    let servers = Servers::builder().nodes(1).listen(Listen::Tls).start();
    let node = servers.node(0);
    let ca = servers.tls().unwrap().ca.display().to_string();
    // redis:// on the TLS port: the server drops what is not TLS.
    let tls_as_plain = format!("redis://{}", node.tls_addr());
    let out = run(redlease().args(["status", "-k", "k", "-N", &tls_as_plain]));
    let text = stdout(&out);
    assert!(text.contains("is this a TLS port? (use rediss:// for it)"), "{text}");
    // rediss:// on the plain port: the server does not answer TLS.
    let plain_as_tls = node.plain_url().replacen("redis://", "rediss://", 1);
    let out = run(redlease().args(["status", "-k", "k", "-N", &plain_as_tls, "--tls-ca", &ca]));
    let text = stdout(&out);
    assert!(text.contains("is it a plain port? (use redis:// for it)") && text.contains("unreachable"), "{text}");
}
