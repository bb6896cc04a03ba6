//! Why a node (or a master of a node that is a Redis Cluster) gave `status` and `scan` no
//! answer, as a kind the tables and `--json` show: refused for a configuration reason (an
//! operator must act) or out of reach.

use std::fmt;

/// The kind of a [`Fault`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FaultKind {
    /// Refused for a configuration reason: a wrong password, user or database, an ACL, a TLS
    /// certificate that does not verify, a key a Redis Cluster cannot place. Retrying does not
    /// help.
    Misconfigured,
    /// Down, paused, timed out, or an answer that could not be used.
    Unreachable,
}

impl FaultKind {
    /// As `--json` says it (`"fault"`).
    pub(super) fn as_str(self) -> &'static str {
        match self {
            FaultKind::Misconfigured => "misconfigured",
            FaultKind::Unreachable => "unreachable",
        }
    }
}

/// Why a node gave no answer: its kind and the message (never a password: the messages come
/// from the connection, not from the URL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Fault {
    kind: FaultKind,
    text: String,
}

impl Fault {
    /// A fault an operator must mend.
    pub(super) fn misconfigured(text: impl Into<String>) -> Self {
        Fault { kind: FaultKind::Misconfigured, text: text.into() }
    }

    /// A node (or master) out of reach, or an answer that could not be used.
    pub(super) fn unreachable(text: impl Into<String>) -> Self {
        Fault { kind: FaultKind::Unreachable, text: text.into() }
    }

    /// An error of the connection or of a command, classed by what the server or the TLS
    /// layer said (`WRONGPASS`, `NOPERM`, a certificate that does not verify, ...).
    pub(super) fn of(error: impl fmt::Display) -> Self {
        let text = error.to_string();
        let kind = if is_config(&text) { FaultKind::Misconfigured } else { FaultKind::Unreachable };
        Fault { kind, text }
    }

    /// The same fault, said of the master `addr` of a node that is a Redis Cluster.
    pub(super) fn at_master(self, addr: &str) -> Self {
        Fault { kind: self.kind, text: format!("master {addr} of the Redis Cluster: {}", self.text) }
    }

    pub(super) fn kind(&self) -> FaultKind {
        self.kind
    }

    /// The message.
    pub(super) fn text(&self) -> &str {
        &self.text
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl From<std::io::Error> for Fault {
    fn from(e: std::io::Error) -> Self {
        Fault::of(e)
    }
}

impl From<String> for Fault {
    fn from(e: String) -> Self {
        Fault::of(e)
    }
}

/// Whether an error's text says the server refused us for a configuration reason.
fn is_config(error: &str) -> bool {
    let e = error.to_ascii_uppercase();
    let config = [
        "WRONGPASS",
        "NOAUTH",
        "NOPERM",
        "INVALID PASSWORD",
        "INVALID DB",
        "DB INDEX",
        "AUTH",
        "INVALID PEER CERTIFICATE",
        "DID NOT ANSWER TLS",
    ];
    config.iter().any(|c| e.contains(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_by_what_the_server_said() {
        assert_eq!(Fault::of("AUTH: WRONGPASS invalid username-password pair").kind(), FaultKind::Misconfigured);
        assert_eq!(Fault::of("GET: NOPERM this user has no permissions").kind(), FaultKind::Misconfigured);
        assert_eq!(Fault::of("Connection refused (os error 111)").kind(), FaultKind::Unreachable);
        let at = Fault::of("Connection refused (os error 111)").at_master("10.0.0.2:7001");
        assert_eq!(at.text(), "master 10.0.0.2:7001 of the Redis Cluster: Connection refused (os error 111)");
        assert_eq!(at.kind().as_str(), "unreachable");
        let at = Fault::of("AUTH: WRONGPASS").at_master("10.0.0.2:7001");
        assert_eq!(at.kind(), FaultKind::Misconfigured, "the kind is the master's");
    }
}
