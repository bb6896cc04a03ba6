//! The README's code is real code: each block marked `<!-- file: PATH -->` is exactly that
//! example file (which `cargo test --all-targets` compiles), and each block marked
//! `<!-- block: PATH -->` appears verbatim in that file (a doc-tested crate README, or an
//! example file the block is an excerpt of).

use std::path::Path;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root")
}

/// The code block following line `at`, without its fences.
fn block_after(lines: &[&str], at: usize) -> (String, String) {
    let open = (at + 1..lines.len()).find(|&i| lines[i].starts_with("```")).expect("a code block after the marker");
    let close = (open + 1..lines.len()).find(|&i| lines[i] == "```").expect("a closing fence");
    (lines[open].to_owned(), lines[open + 1..close].join("\n"))
}

#[test]
fn readme_code_matches_the_compiled_sources() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines: Vec<&str> = readme.lines().collect();
    let mut checked = 0;
    for (i, line) in lines.iter().enumerate() {
        let (kind, path) = match line.strip_prefix("<!-- file: ").or_else(|| line.strip_prefix("<!-- block: ")) {
            Some(rest) => (if line.contains("file:") { "file" } else { "block" }, rest.trim_end_matches(" -->")),
            None => continue,
        };
        let source = std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
        let (fence, code) = block_after(&lines, i);
        if kind == "file" {
            assert_eq!(
                code.trim_end(),
                source.trim_end(),
                "README block for {path} differs from the file: run scripts/sync-readme.py"
            );
        } else {
            // An excerpt of an example file: its lines, in a row; of a crate README: the block.
            let excerpt = if path.ends_with(".rs") { code.clone() } else { format!("{fence}\n{code}\n```") };
            assert!(
                source.contains(&excerpt),
                "README block from {path} is not in that file: run scripts/sync-readme.py"
            );
        }
        checked += 1;
    }
    assert!(checked >= 2, "expected the tokio and blocking examples, found {checked}");
}

/// A tokio program stopped with Ctrl-C without a handler keeps its lock for the TTL: the
/// README's first example and the service example it links wait for `ctrl_c()` and then
/// `close()` the client (`tests/exit.rs` shows both behaviours on real servers).
#[test]
fn the_first_example_and_the_service_example_close_on_ctrl_c() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let first = readme.split("```rust").nth(1).expect("a first Rust example");
    let first = &first[..first.find("```").unwrap()];
    let service = std::fs::read_to_string(root().join("redlease/examples/service.rs")).unwrap();
    let facade = std::fs::read_to_string(root().join("redlease/README.md")).unwrap();
    let facade = facade.split("```rust").nth(1).expect("a first Rust example in the crate README");
    for (what, code) in [
        ("the README's first example", first),
        ("the crate README's first example", facade),
        ("redlease/examples/service.rs", service.as_str()),
    ] {
        let signal = code.find("tokio::signal::ctrl_c()").unwrap_or_else(|| panic!("{what} does not handle Ctrl-C"));
        assert!(code[signal..].contains("client.close().await"), "{what} does not close() after Ctrl-C");
    }
    assert!(readme.contains("(redlease/examples/service.rs)"), "the README links the service example");
}
