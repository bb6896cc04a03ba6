//! `redlease elect`: run a command only while this process leads an election, and `redlease
//! leader`: who leads one.
//!
//! `elect` campaigns (standing by, without a bound, while another candidate leads), then runs
//! the command with `REDLEASE_ELECTION` and `REDLEASE_EPOCH` (the leadership's fencing token),
//! keeping the leadership extended; like `run`, the command never outlives it: signals are
//! passed on, a lost leadership stops it (SIGTERM, SIGKILL after `--grace`; exit 70), and on
//! Linux the kernel kills it if redlease dies. When the command exits, redlease resigns (the
//! next candidate in line leads at once) and exits with the command's status.

use std::process::Stdio;
use std::time::Duration;

use redlease_tokio::{Config, ElectionOptions, Leader};
use tokio::process::{Child, Command};

use crate::acquire::exit_code_of;
use crate::duration::Bound;
use crate::inspect::json;
use crate::out::outln;
use crate::run::{die_with_parent, hide_secret_nodes, status_code, supervise};
use crate::say::{note, step, warn};
use crate::signals::{Early, Signals, signal_name};
use crate::{EXIT_LOST, Usage, node_urls};

/// Exit status of `redlease leader` when nobody leads.
pub(crate) const EXIT_NO_LEADER: u8 = 3;

/// What `redlease elect` was asked to do.
#[derive(Debug)]
pub(crate) struct ElectArgs {
    pub(crate) name: String,
    pub(crate) nodes: Option<String>,
    pub(crate) tls: redlease_core::TlsSettings,
    pub(crate) key_prefix: String,
    pub(crate) ttl: Duration,
    /// The candidate's value; `None`: `HOST:PID`.
    pub(crate) value: Option<String>,
    pub(crate) wait_nodes: Option<Bound>,
    pub(crate) grace: Duration,
    pub(crate) argv: Vec<String>,
}

/// Campaign, run the command while leading, resign; the exit code.
///
/// Must run on the thread that stays alive until the process exits (`main`'s `block_on`): the
/// kernel sends the parent-death signal when the *thread* that spawned the child ends.
pub(crate) async fn elect(args: ElectArgs) -> Result<u8, Usage> {
    match lead_and_run(args).await {
        Ok(code) | Err(Early::Exit(code)) => Ok(code),
        Err(Early::Usage(usage)) => Err(usage),
    }
}

async fn lead_and_run(args: ElectArgs) -> Result<u8, Early> {
    let ElectArgs { name, nodes, tls, key_prefix, ttl, value, wait_nodes, grace, argv } = args;
    let value = value.unwrap_or_else(default_value);
    let options = ElectionOptions::new(name.clone(), value.clone()).ttl(ttl);
    if let Err(e) = options.check() {
        let flag = match e {
            redlease_tokio::Misuse::Election { field: "value", .. } => "--value",
            _ => "--key",
        };
        return Err(Usage(format!("{flag}: {e}")).into());
    }
    if ttl.is_zero() {
        return Err(Usage("--ttl is zero: give the leadership a time to live, e.g. --ttl 10s".into()).into());
    }
    let nodes = node_urls(nodes.as_deref())?;
    let mut signals = Signals::install()?;
    let config = Config::new(nodes).tls(tls).key_prefix(key_prefix);
    let client = crate::acquire::connect(config, wait_nodes, &mut signals, 1).await?;
    note(&format!("standing by in election {name:?} as {value:?}"));
    let elected = tokio::select! {
        elected = client.campaign(options) => elected,
        sig = signals.recv() => {
            note(&format!("got {} while standing by: giving up", signal_name(sig)));
            client.close().await;
            return Err(Early::Exit(128 + sig as u8));
        }
    };
    let leadership = match elected {
        Ok(l) => l,
        Err(redlease_tokio::Error::Misuse(e)) => return Err(Usage(format!("--ttl: {e}")).into()),
        Err(e) => {
            warn(&format!("cannot campaign in {name:?}: {e}"));
            return Err(Early::Exit(exit_code_of(&e, 1)));
        }
    };
    let epoch = leadership.epoch();
    step(&format!("leading {name:?} in epoch {epoch}"));
    let held = format!("the leadership of {name:?}");
    let mut child = match spawn(&argv, &name, epoch) {
        Ok(child) => child,
        Err(code) => {
            let _ = leadership.resign().await;
            return Ok(code);
        }
    };
    let Some(status) = supervise(&mut child, &leadership.lost(), None, &mut signals, &held, grace).await else {
        let _ = leadership.resign().await;
        return Ok(EXIT_LOST);
    };
    match leadership.resign().await {
        Ok(_) => step(&format!("resigned {held}")),
        Err(e) => warn(&format!("resigning {held} failed: {e} (it expires with its TTL)")),
    }
    match status {
        Ok(s) => Ok(status_code(s)),
        Err(e) => {
            warn(&format!("waiting for the command failed: {e}"));
            Ok(1)
        }
    }
}

/// `HOST:PID`, the default candidate value.
fn default_value() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned());
    format!("{host}:{}", std::process::id())
}

/// Start the command with `REDLEASE_ELECTION` and `REDLEASE_EPOCH`, and `REDLEASE_NODES` only if
/// it holds no password ([`hide_secret_nodes`]), to die with redlease. If it cannot be started, the exit code: 127 not found, 126 not
/// executable.
fn spawn(argv: &[String], name: &str, epoch: u64) -> Result<Child, u8> {
    let mut command = Command::new(&argv[0]);
    command
        .args(&argv[1..])
        .env("REDLEASE_ELECTION", name)
        .env("REDLEASE_EPOCH", epoch.to_string())
        .stdin(Stdio::inherit())
        .kill_on_drop(true);
    hide_secret_nodes(&mut command);
    die_with_parent(&mut command);
    step(&format!("running {argv:?} with REDLEASE_EPOCH={epoch}"));
    command.spawn().map_err(|e| {
        warn(&format!("cannot run {:?}: {e}", argv[0]));
        if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 }
    })
}

/// `redlease leader`: print who leads `name` (its value and epoch), exit 0; or exit 3 when
/// nobody does.
pub(crate) async fn leader(
    name: &str,
    nodes: Option<&str>,
    tls: redlease_core::TlsSettings,
    key_prefix: &str,
    json: bool,
) -> Result<u8, Usage> {
    if let Err(e) = ElectionOptions::new(name, Vec::new()).check() {
        return Err(Usage(format!("--key: {e}")));
    }
    let nodes = node_urls(nodes)?;
    let mut signals = Signals::install()?;
    let config = Config::new(nodes).tls(tls).key_prefix(key_prefix);
    let client = match crate::acquire::connect(config, None, &mut signals, 1).await {
        Ok(client) => client,
        Err(Early::Exit(code)) => return Ok(code),
        Err(Early::Usage(usage)) => return Err(usage),
    };
    let read = client.leader(name).await;
    client.close().await;
    let leader = match read {
        Ok(leader) => leader,
        Err(e) => {
            warn(&format!("cannot read the leader of {name:?}: {e}"));
            return Ok(exit_code_of(&e, 1));
        }
    };
    print(name, leader.as_ref(), json);
    Ok(if leader.is_some() { 0 } else { EXIT_NO_LEADER })
}

/// The leader as a line (`VALUE EPOCH`, or nothing) or a JSON object.
fn print(name: &str, leader: Option<&Leader>, as_json: bool) {
    let value = leader.map(|l| String::from_utf8_lossy(&l.value).into_owned());
    match (leader, as_json) {
        (Some(l), false) => outln!("{} {}", value.unwrap_or_default(), l.epoch),
        (None, false) => {}
        (Some(l), true) => outln!(
            "{{\"election\":{},\"leader\":{{\"value\":{},\"epoch\":{}}}}}",
            json::string(name),
            json::string(&value.unwrap_or_default()),
            l.epoch
        ),
        (None, true) => outln!("{{\"election\":{},\"leader\":null}}", json::string(name)),
    }
}
