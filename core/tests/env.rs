//! `Config::from_env` reads the variables the `redlease` command reads. Each case runs this
//! test binary again as a child process with its own environment (the variables of one
//! process are shared by every test thread).

use std::process::Command;

use redlease_core::Config;

/// The child's side: print what `from_env` made of the environment it was given.
#[test]
fn from_env_child() {
    if std::env::var_os("REDLEASE_ENV_CHILD").is_none() {
        return;
    }
    match Config::from_env() {
        Ok(c) => {
            let nodes: Vec<String> = c.nodes.iter().map(|n| n.to_string()).collect();
            println!("RESULT ok {} ca={} prefix={}", nodes.join(" "), c.tls.ca.is_some(), c.key_prefix);
        }
        Err(e) => println!("RESULT err {e}"),
    }
}

/// Run the child with `vars` set (and every other redlease variable unset); its result line.
fn from_env(vars: &[(&str, &str)]) -> String {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "from_env_child", "--nocapture", "--test-threads=1"]).env("REDLEASE_ENV_CHILD", "1");
    for var in ["REDLEASE_NODES", "REDLEASE_TLS_CA", "REDLEASE_TLS_CERT", "REDLEASE_TLS_KEY", "REDLEASE_KEY_PREFIX"] {
        cmd.env_remove(var);
    }
    cmd.envs(vars.iter().copied());
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no result: {stdout}"))
        .to_owned()
}

#[test]
fn from_env_reads_the_nodes_and_the_tls_files_as_the_command_does() {
    let nodes = "redis://:s3cret@10.0.0.1:6379, redis://10.0.0.2:6379,,rediss://10.0.0.3:6380";
    assert_eq!(
        from_env(&[("REDLEASE_NODES", nodes), ("REDLEASE_TLS_CA", "/etc/ca.pem"), ("REDLEASE_KEY_PREFIX", "app1:")]),
        "ok redis://10.0.0.1:6379 redis://10.0.0.2:6379 rediss://10.0.0.3:6380 ca=true prefix=app1:"
    );
    let unset = from_env(&[]);
    assert!(unset.starts_with("err REDLEASE_NODES: not set"), "{unset}");
    let bad = from_env(&[("REDLEASE_NODES", "redis://:s3cret@h:x")]);
    assert!(bad.contains("port") && !bad.contains("s3cret"), "{bad}");
    let half = from_env(&[("REDLEASE_NODES", "redis://h:1"), ("REDLEASE_TLS_CERT", "/c.pem")]);
    assert!(half.starts_with("err REDLEASE_TLS_KEY"), "{half}");
}
