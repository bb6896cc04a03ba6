//! Network namespaces the suite creates itself: one per lock node, each joined to the root
//! namespace by its own veth pair on a private /24, and partitions made with `iptables` inside
//! a node's namespace.
//!
//! Names carry the suite's process id (`rlf<PID>n<I>` for namespaces, `rlf<PID>h<I>` /
//! `rlf<PID>p<I>` for the two ends of a veth pair), so that parallel runs never touch each
//! other's, and leftovers of a run that died can be told apart and removed
//! ([`NetLab::remove_leftovers`]). Addresses are `10.213.X.1` (root side) and `10.213.X.2`
//! (node side), with a block of X values no interface of the machine uses; traffic never
//! leaves the machine.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use super::sys::{run, signal};

/// Prefix of every name the suite creates.
const PREFIX: &str = "rlf";
/// The second octet of every address the suite uses.
const NET: u8 = 213;
/// The port the nodes listen on inside their namespaces.
pub const NODE_PORT: u16 = 6379;

/// How a partition cuts a node off.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// Drop every packet in and out: connections go silent, connects time out (a cable pulled,
    /// a switch down). After healing, stalled connections recover at TCP's retransmission
    /// pace.
    Drop,
    /// Answer every incoming TCP segment with a reset: connections fail at once, connects are
    /// refused (a firewall rejecting). After healing, clients reconnect at their own pace.
    Reset,
}

/// One node's namespace and link.
#[derive(Clone, Debug)]
pub struct NsNode {
    /// The namespace.
    pub ns: String,
    /// The veth end in the root namespace.
    pub host_if: String,
    /// The veth end inside the namespace.
    pub peer_if: String,
    /// The root side's address.
    pub host_ip: Ipv4Addr,
    /// The node's address (inside the namespace).
    pub ip: Ipv4Addr,
    partitioned: bool,
}

impl NsNode {
    /// The node's `ip:6379`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((self.ip, NODE_PORT))
    }
}

/// The namespaces of one run; removed on drop (also while unwinding from a panic).
#[derive(Debug)]
pub struct NetLab {
    nodes: Vec<NsNode>,
}

fn ip(args: &[&str]) -> Result<String, String> {
    run("ip", args)
}

fn in_ns(ns: &str, program: &str, args: &[&str]) -> Result<String, String> {
    let mut all = vec!["netns", "exec", ns, program];
    all.extend_from_slice(args);
    ip(&all)
}

/// The process id of the run that made `name`, if it is one of ours: `rlf<PID><n|h|p><index>`.
fn parse_name(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(PREFIX)?;
    let digits = rest.find(|c: char| !c.is_ascii_digit())?;
    let (pid, tail) = rest.split_at(digits);
    let mut tail = tail.chars();
    let kind = tail.next()?;
    let index = tail.as_str();
    let ok = matches!(kind, 'n' | 'h' | 'p') && !index.is_empty() && index.chars().all(|c| c.is_ascii_digit());
    ok.then(|| pid.parse().ok()).flatten()
}

/// Whether the run that created names with `pid` is still going.
fn run_alive(pid: u32) -> bool {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    comm.trim() == "redlease-faults"
}

impl NetLab {
    /// Create `n` namespaces, each with a veth pair to the root namespace.
    pub fn create(n: usize) -> Result<NetLab, String> {
        let pid = std::process::id();
        let used = ip(&["-o", "-4", "addr", "show"])? + &ip(&["-4", "route", "show", "table", "all"])?;
        let blocks = 250 / n.max(1);
        let start = pid as usize % blocks;
        let base = (0..blocks)
            .map(|k| (start + k) % blocks * n)
            .find(|&b| (b..b + n).all(|x| !used.contains(&format!("10.{NET}.{x}."))))
            .ok_or_else(|| format!("no free block of {n} addresses in 10.{NET}.0.0/16"))?;
        let mut lab = NetLab { nodes: Vec::new() };
        for i in 0..n {
            let x = (base + i) as u8;
            let node = NsNode {
                ns: format!("{PREFIX}{pid}n{i}"),
                host_if: format!("{PREFIX}{pid}h{i}"),
                peer_if: format!("{PREFIX}{pid}p{i}"),
                host_ip: Ipv4Addr::new(10, NET, x, 1),
                ip: Ipv4Addr::new(10, NET, x, 2),
                partitioned: false,
            };
            ip(&["netns", "add", &node.ns])?;
            lab.nodes.push(node.clone());
            ip(&["link", "add", &node.host_if, "type", "veth", "peer", "name", &node.peer_if])?;
            ip(&["link", "set", &node.peer_if, "netns", &node.ns])?;
            ip(&["addr", "add", &format!("{}/24", node.host_ip), "dev", &node.host_if])?;
            ip(&["link", "set", &node.host_if, "up"])?;
            ip(&["-n", &node.ns, "addr", "add", &format!("{}/24", node.ip), "dev", &node.peer_if])?;
            ip(&["-n", &node.ns, "link", "set", &node.peer_if, "up"])?;
            ip(&["-n", &node.ns, "link", "set", "lo", "up"])?;
        }
        // Another run may have picked the same block at the same instant: each address must
        // exist exactly once.
        let now = ip(&["-o", "-4", "addr", "show"])?;
        for node in &lab.nodes {
            let count = now.matches(&format!("inet {}/", node.host_ip)).count();
            if count != 1 {
                return Err(format!(
                    "address {} is on {count} interfaces: another run took the same block",
                    node.host_ip
                ));
            }
        }
        Ok(lab)
    }

    /// The nodes' namespaces.
    pub fn nodes(&self) -> &[NsNode] {
        &self.nodes
    }

    /// The command prefix that runs a program in node `i`'s namespace (`ip netns exec` execs
    /// it: the process id is the program's).
    pub fn exec_prefix(&self, i: usize) -> Vec<String> {
        vec!["ip".into(), "netns".into(), "exec".into(), self.nodes[i].ns.clone()]
    }

    /// Cut node `i` off with `iptables` rules inside its namespace, on its link only
    /// ([`Cut`]: drop everything, or reset TCP). Checked: a connect to the node must then
    /// fail.
    pub fn partition(&mut self, i: usize, cut: Cut) -> Result<(), String> {
        let node = &mut self.nodes[i];
        if node.partitioned {
            return Ok(());
        }
        let peer = node.peer_if.as_str();
        match cut {
            Cut::Drop => {
                in_ns(&node.ns, "iptables", &["-w", "-A", "INPUT", "-i", peer, "-j", "DROP"])?;
                in_ns(&node.ns, "iptables", &["-w", "-A", "OUTPUT", "-o", peer, "-j", "DROP"])?;
            }
            Cut::Reset => {
                // Only inbound: the resets themselves go out through OUTPUT.
                let reject =
                    ["-w", "-A", "INPUT", "-i", peer, "-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"];
                in_ns(&node.ns, "iptables", &reject)?;
                in_ns(&node.ns, "iptables", &["-w", "-A", "INPUT", "-i", peer, "-j", "DROP"])?;
            }
        }
        node.partitioned = true;
        if TcpStream::connect_timeout(&node.addr(), Duration::from_millis(200)).is_ok() {
            return Err(format!("node {i} ({}) still accepts connections after the DROP rules", node.addr()));
        }
        Ok(())
    }

    /// Heal node `i`'s partition (flush its namespace's rules).
    pub fn heal(&mut self, i: usize) -> Result<(), String> {
        let node = &mut self.nodes[i];
        if !node.partitioned {
            return Ok(());
        }
        in_ns(&node.ns, "iptables", &["-w", "-F", "INPUT"])?;
        in_ns(&node.ns, "iptables", &["-w", "-F", "OUTPUT"])?;
        node.partitioned = false;
        Ok(())
    }

    /// Heal every partition.
    pub fn heal_all(&mut self) -> Result<(), String> {
        (0..self.nodes.len()).try_for_each(|i| self.heal(i))
    }

    /// Whether node `i` is partitioned.
    pub fn is_partitioned(&self, i: usize) -> bool {
        self.nodes[i].partitioned
    }

    /// Remove what runs that are no longer alive left behind: namespaces (and the servers
    /// still running in them) and veth ends named `rlf<PID>…`. Returns what was removed.
    pub fn remove_leftovers() -> Result<Vec<String>, String> {
        let mut removed = Vec::new();
        let names = ip(&["netns", "list"])?;
        for ns in names.lines().filter_map(|l| l.split_whitespace().next()) {
            let Some(pid) = parse_name(ns) else { continue };
            if run_alive(pid) {
                continue;
            }
            remove_ns(ns);
            removed.push(format!("namespace {ns}"));
        }
        let links = ip(&["-o", "link", "show"])?;
        for line in links.lines() {
            let Some(name) = line.split(": ").nth(1).map(|n| n.split('@').next().unwrap_or(n)) else { continue };
            let Some(pid) = parse_name(name) else { continue };
            if run_alive(pid) {
                continue;
            }
            let _ = ip(&["link", "del", name]);
            removed.push(format!("link {name}"));
        }
        Ok(removed)
    }
}

/// Kill whatever still runs in our namespace `ns` (servers a dead run started there), then
/// delete it, which also deletes its veth pair.
fn remove_ns(ns: &str) {
    if let Ok(pids) = ip(&["netns", "pids", ns]) {
        for pid in pids.lines().filter_map(|p| p.trim().parse::<u32>().ok()) {
            let _ = signal(pid, libc::SIGKILL);
        }
    }
    for _ in 0..50 {
        if ip(&["netns", "pids", ns]).is_ok_and(|p| p.trim().is_empty()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = ip(&["netns", "del", ns]);
}

impl Drop for NetLab {
    fn drop(&mut self) {
        for node in &self.nodes {
            remove_ns(&node.ns);
            // Gone with the namespace's end of the pair; in case the pair was never moved.
            let _ = ip(&["link", "del", &node.host_if]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_names_are_recognised() {
        assert_eq!(parse_name("rlf1234n0"), Some(1234));
        assert_eq!(parse_name("rlf99h12"), Some(99));
        assert_eq!(parse_name("rlf7p3"), Some(7));
        assert_eq!(parse_name("rlf1234"), None);
        assert_eq!(parse_name("rlf12x3"), None);
        assert_eq!(parse_name("rlfn0"), None);
        assert_eq!(parse_name("eth0"), None);
        assert_eq!(parse_name("rlf12n"), None);
    }
}
