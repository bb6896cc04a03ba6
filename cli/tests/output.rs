//! What the commands print when there is little to say: `status` with too few nodes to tell.

mod common;

use common::{nodes, redlease, run, stdout};
use redlease_cluster::Cluster;

const DOWN: &str = "redis://127.0.0.1:1,redis://127.0.0.1:2,redis://127.0.0.1:3";

#[test]
fn status_with_too_few_nodes_answering_says_unknown() {
    let out = run(redlease().args(["status", "-k", "job", "-N", DOWN]));
    assert_eq!(out.status.code(), Some(69));
    let text = stdout(&out);
    assert!(text.contains("job: unknown: 0 of 3 nodes answered"), "{text}");
    assert!(!text.contains("free"), "{text}");
    let json = stdout(&run(redlease().args(["status", "-k", "job", "-N", DOWN, "--json"])));
    assert!(json.contains("\"state\":\"unknown\",\"held\":null,\"holder\":null"), "{json}");

    // Every node answers, none holds the key: not held. Then one node of three answers: the
    // other two could hold it.
    let cluster = Cluster::start(3);
    let urls = nodes(&cluster);
    let json = stdout(&run(redlease().args(["status", "-k", "job", "-N", &urls, "--json"])));
    assert!(json.contains("\"state\":\"not_held\",\"held\":false"), "{json}");
    let text = stdout(&run(redlease().args(["status", "-k", "job", "-N", &urls])));
    assert!(text.contains("job: free on every reachable node"), "{text}");
    cluster.node(1).kill();
    cluster.node(2).kill();
    let json = stdout(&run(redlease().args(["status", "-k", "job", "-N", &urls, "--json"])));
    assert!(json.contains("\"reachable\":1,") && json.contains("\"state\":\"unknown\",\"held\":null"), "{json}");
}
