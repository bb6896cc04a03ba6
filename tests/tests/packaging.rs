//! Every crate meant for crates.io packages, with the metadata crates.io shows, its README and
//! both license files; the rest say `publish = false`. Offline and fast: `cargo package
//! --no-verify --offline` builds nothing and only needs the dependencies already fetched by the
//! build that runs this test.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The published crates: (folder, package name).
const PUBLISHED: &[(&str, &str)] = &[
    ("redlease", "redlease"),
    ("core", "redlease-core"),
    ("client", "redlease-client"),
    ("runtime-tokio", "redlease-tokio"),
    ("runtime-smol", "redlease-smol"),
    ("runtime-mio", "redlease-mio"),
    ("servers", "redlease-servers"),
    ("cli", "redlease-cli"),
];

/// Workspace members that are not published (they must say so).
const UNPUBLISHED: &[&str] = &["tests", "benches"];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("workspace root").to_path_buf()
}

fn manifest(folder: &str) -> String {
    std::fs::read_to_string(root().join(folder).join("Cargo.toml")).unwrap_or_else(|e| panic!("{folder}: {e}"))
}

/// The `[workspace] members` list of the root manifest.
fn members() -> Vec<String> {
    let text = manifest(".");
    let line = text.lines().find(|l| l.starts_with("members")).expect("a members line");
    line.split('"').skip(1).step_by(2).map(str::to_owned).collect()
}

#[test]
fn every_member_is_either_published_or_marked_unpublished() {
    for member in members() {
        let text = manifest(&member);
        let published = PUBLISHED.iter().any(|(f, _)| *f == member);
        let unpublished = UNPUBLISHED.contains(&member.as_str());
        assert!(published ^ unpublished, "{member}: add it to PUBLISHED or UNPUBLISHED in this test");
        assert_eq!(text.contains("publish = false"), unpublished, "{member}/Cargo.toml: publish setting");
    }
}

#[test]
fn published_crates_carry_full_metadata_a_readme_and_both_licenses() {
    let workspace = manifest(".");
    for key in ["license = \"MIT OR Apache-2.0\"", "repository = \"https://", "rust-version = \""] {
        assert!(workspace.contains(key), "the workspace manifest lacks {key}");
    }
    assert!(!workspace.contains("example.invalid"), "the workspace manifest has a placeholder URL");
    for (folder, name) in PUBLISHED {
        let text = manifest(folder);
        assert!(text.contains(&format!("name = \"{name}\"")), "{folder}: package name");
        for key in [
            "description = \"",
            "license.workspace = true",
            "repository.workspace = true",
            "rust-version.workspace = true",
            "readme = \"README.md\"",
            "keywords = [\"",
            "categories = [\"",
        ] {
            assert!(text.contains(key), "{folder}/Cargo.toml lacks {key}");
        }
        for file in ["README.md", "LICENSE-MIT", "LICENSE-APACHE"] {
            let path = root().join(folder).join(file);
            let body = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(body.len() > 200, "{} is nearly empty", path.display());
        }
        // A dev-dependency on an unpublished crate must be path-only (cargo drops it when
        // packaging); a versioned one (`workspace = true` inherits a version) cannot be packaged.
        for unpublished in ["redlease-tests", "redlease-benches"] {
            for line in text.lines().filter(|l| l.starts_with(unpublished)) {
                assert!(
                    line.contains("path = ") && !line.contains("version") && !line.contains("workspace"),
                    "{folder}/Cargo.toml: `{line}` must be a path-only dependency"
                );
            }
        }
    }
    let apache = std::fs::read_to_string(root().join("LICENSE-APACHE")).unwrap();
    assert!(apache.contains("Apache License") && apache.contains("Version 2.0, January 2004"));
    let mit = std::fs::read_to_string(root().join("LICENSE-MIT")).unwrap();
    assert!(mit.contains("Permission is hereby granted, free of charge"));
}

#[test]
fn the_msrv_check_builds_every_published_crate() {
    let script = std::fs::read_to_string(root().join("scripts/msrv.sh")).unwrap();
    let line = script.lines().find(|l| l.starts_with("packages=(")).expect("a packages=(...) line in scripts/msrv.sh");
    let listed: Vec<&str> = line.trim_start_matches("packages=(").trim_end_matches(')').split_whitespace().collect();
    for (folder, name) in PUBLISHED {
        assert!(listed.contains(name), "{folder}: {name} is not in scripts/msrv.sh");
    }
    let test_sh = std::fs::read_to_string(root().join("scripts/test.sh")).unwrap();
    assert!(test_sh.contains("scripts/msrv.sh"), "scripts/test.sh does not run the MSRV check");
}

#[test]
fn cargo_package_succeeds_for_every_published_crate() {
    // All in one command: cargo then resolves the crates' dependencies on each other against
    // the packages it has just made, as `cargo publish --workspace` would.
    let target = std::env::temp_dir().join(format!("redlease-package-check-{}", std::process::id()));
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(root()).env("CARGO_TARGET_DIR", &target).args([
        "package",
        "--no-verify",
        "--offline",
        "--allow-dirty",
        "--quiet",
    ]);
    for (_, name) in PUBLISHED {
        cmd.args(["-p", name]);
    }
    let out = cmd.output().expect("run cargo package");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let made: Vec<String> = std::fs::read_dir(target.join("package"))
        .map(|dir| dir.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    let _ = std::fs::remove_dir_all(&target);
    assert!(out.status.success(), "cargo package failed:\n{stderr}");
    for (_, name) in PUBLISHED {
        let file = format!("{name}-{}.crate", env!("CARGO_PKG_VERSION"));
        assert!(made.contains(&file), "{file} was not made; cargo said:\n{stderr}");
    }
}
