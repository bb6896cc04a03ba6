//! `redis+sentinel://` URLs and the node lists that hold them: any input parses or is refused
//! without a panic and without showing a password; lists of well-formed URLs split back into
//! them.

use proptest::prelude::*;
use redlease_core::{Config, NodeConfig, split_node_list};

/// A host: a name, an IPv4 or a bracketed IPv6 address.
fn host() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z][a-z0-9-]{0,8}", "10\\.[0-9]{1,3}\\.[0-9]{1,3}\\.[0-9]{1,3}", Just("[::1]".to_owned())]
}

/// A well-formed sentinel URL, and the number of sentinels it lists.
fn sentinel_url() -> impl Strategy<Value = (String, usize)> {
    let hosts = proptest::collection::vec((host(), proptest::option::of(1u16..)), 1..5);
    (any::<bool>(), hosts, "[a-z][a-z0-9_.-]{0,10}", proptest::option::of(0u32..16)).prop_map(
        |(tls, hosts, service, db)| {
            let scheme = if tls { "rediss+sentinel" } else { "redis+sentinel" };
            let list: Vec<String> =
                hosts.iter().map(|(h, p)| p.map_or_else(|| h.clone(), |p| format!("{h}:{p}"))).collect();
            let db = db.map_or_else(String::new, |d| format!("/{d}"));
            (format!("{scheme}://u:topsecret@{}/{service}{db}?min_replicas=1", list.join(",")), hosts.len())
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any text after the scheme: parsed or refused, never a panic; a refusal never shows the
    /// password.
    #[test]
    fn any_sentinel_url_parses_or_is_refused_without_its_password(
        tls in any::<bool>(),
        rest in "[a-z0-9:/,@?&=%.\\[\\]#_-]{0,40}",
    ) {
        let scheme = if tls { "rediss+sentinel://" } else { "redis+sentinel://" };
        let url = format!("{scheme}u:topsecret@{rest}");
        match NodeConfig::from_url(&url) {
            Ok(node) => {
                let shown = format!("{node} {node:?}");
                prop_assert!(!shown.contains("topsecret"), "{}", shown);
            }
            Err(e) => {
                for text in [e.to_string(), format!("{e:?}")] {
                    prop_assert!(!text.contains("topsecret"), "{}", text);
                }
            }
        }
    }

    /// A list of well-formed sentinel and plain URLs, comma-separated, splits back into them,
    /// and each parses to its node.
    #[test]
    fn node_lists_split_back_into_their_urls(
        urls in proptest::collection::vec(
            prop_oneof![
                sentinel_url(),
                (host(), 1u16..).prop_map(|(h, p)| (format!("redis://{h}:{p}"), 0)),
            ],
            1..5,
        ),
    ) {
        let list = urls.iter().map(|(u, _)| u.as_str()).collect::<Vec<_>>().join(",");
        let split = split_node_list(&list);
        prop_assert_eq!(split.iter().map(String::as_str).collect::<Vec<_>>(), urls.iter().map(|(u, _)| u.as_str()).collect::<Vec<_>>());
        let config = Config::from_urls(&split).unwrap();
        for (node, (_, sentinels)) in config.nodes.iter().zip(&urls) {
            prop_assert_eq!(node.sentinel.as_ref().map_or(0, |s| s.sentinels.len()), *sentinels);
            let shown = format!("{node} {node:?}");
            prop_assert!(!shown.contains("topsecret"), "{}", shown);
        }
        prop_assert_eq!(config.validate(), Ok(()));
    }
}
