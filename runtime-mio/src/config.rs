//! Adapter settings: the core's [`Config`] plus the socket knobs.

use std::time::Duration;

use redlease_core::Config;

use crate::Error;

/// Settings of a [`Client`](crate::Client) or a [`Driver`](crate::Driver).
///
/// Build it with [`ClientConfig::from_urls`] (or [`ClientConfig::new`] from a core
/// [`Config`]), then adjust the public fields.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The nodes and the algorithm's parameters (node timeout, drift, retry, seed, ...).
    ///
    /// If `core.seed` is left at the core's default, the adapter replaces it with a seed
    /// from the OS random source, so that separate clients do not jitter in step.
    pub core: Config,
    /// How long one TCP connect attempt may take before it counts as failed (default 1 s).
    pub connect_timeout: Duration,
    /// First delay before reconnecting a lost node (default 50 ms); it doubles per failure.
    pub reconnect_min: Duration,
    /// Longest delay between reconnect attempts (default 2 s).
    pub reconnect_max: Duration,
}

impl ClientConfig {
    /// Adapter defaults around this core config.
    pub fn new(core: Config) -> Self {
        ClientConfig {
            core,
            connect_timeout: Duration::from_secs(1),
            reconnect_min: Duration::from_millis(50),
            reconnect_max: Duration::from_secs(2),
        }
    }

    /// Parse `redis://[user:pass@]host:port[/db]` URLs, with defaults for everything else.
    pub fn from_urls<I, S>(urls: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Ok(ClientConfig::new(Config::from_urls(urls)?))
    }

    /// Check the settings (the core config and the socket knobs).
    pub fn validate(&self) -> Result<(), Error> {
        self.core.validate()?;
        if self.connect_timeout.is_zero() {
            return Err(Error::Setting {
                field: "connect_timeout",
                reason: "it is zero: give a TCP connect attempt some time, e.g. 1s".into(),
            });
        }
        if self.reconnect_min.is_zero() {
            return Err(Error::Setting {
                field: "reconnect_min",
                reason: "it is zero, which would reconnect in a busy loop: use e.g. 50ms".into(),
            });
        }
        if self.reconnect_min > self.reconnect_max {
            return Err(Error::Setting {
                field: "reconnect_min",
                reason: format!("{:?} is above reconnect_max {:?}: swap them", self.reconnect_min, self.reconnect_max),
            });
        }
        Ok(())
    }
}

impl From<Config> for ClientConfig {
    /// [`ClientConfig::new`]: adapter defaults around this core config.
    fn from(core: Config) -> Self {
        ClientConfig::new(core)
    }
}

/// A lock token: 20 bytes from the OS random source, hex-encoded (40 characters).
///
/// The [`Client`](crate::Client) makes one per acquisition; a [`Driver`](crate::Driver) user
/// passes it to [`AcquireRequest::new`](redlease_core::AcquireRequest::new).
pub fn new_token() -> Result<String, Error> {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(format!("no random bytes for a lock token: {e}")))?;
    Ok(hex(&bytes))
}

/// A seed for the core's jitter generator from the OS random source.
pub(crate) fn random_seed() -> Result<u64, Error> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(format!("no random bytes for the seed: {e}")))?;
    Ok(u64::from_le_bytes(bytes))
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[(b >> 4) as usize] as char);
        s.push(DIGITS[(b & 15) as usize] as char);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_40_hex_chars_and_differ() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_eq!(a.len(), 40);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{a}");
        assert_ne!(a, b);
        assert_eq!(hex(&[0x00, 0xff, 0x1a]), "00ff1a");
    }

    #[test]
    fn settings_are_validated_with_the_field_named() {
        let mut c = ClientConfig::from_urls(["redis://127.0.0.1:7000"]).unwrap();
        assert!(c.validate().is_ok());
        c.reconnect_min = Duration::from_secs(5);
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("reconnect_min") && err.contains("swap"), "{err}");
        c.reconnect_min = Duration::ZERO;
        assert!(c.validate().unwrap_err().to_string().contains("reconnect_min"));
        c.reconnect_min = Duration::from_millis(50);
        c.connect_timeout = Duration::ZERO;
        assert!(c.validate().unwrap_err().to_string().contains("connect_timeout"));
        let err = ClientConfig::from_urls(["http://x"]).unwrap_err().to_string();
        assert!(err.contains("redis://"), "{err}");
        let err = ClientConfig::from_urls(Vec::<String>::new()).unwrap().validate().unwrap_err().to_string();
        assert!(err.contains("no nodes"), "{err}");
    }
}
