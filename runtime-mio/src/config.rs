//! Adapter settings (the core's [`Config`]) and the OS randomness the adapter supplies.

use std::ops::{Deref, DerefMut};

use redlease_core::Config;

use crate::Error;

/// Settings of a [`Client`](crate::Client) or a [`Driver`](crate::Driver): the core's
/// [`Config`], which also holds the connection knobs (`connect_timeout`, `reconnect_min`,
/// `reconnect_max`) — the engine applies them, the driver opens the sockets it is told to.
///
/// Build it with [`ClientConfig::from_urls`] (or [`ClientConfig::new`] from a core
/// [`Config`]), then adjust the fields: `config.core.node_timeout`, or directly through
/// `Deref`: `config.reconnect_max = Duration::from_millis(500)`.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The nodes, the algorithm's parameters (node timeout, drift, retry, seed, ...) and the
    /// connect timeout and reconnect backoff.
    ///
    /// If `core.seed` is left at the core's default, the adapter replaces it with a seed
    /// from the OS random source, so that separate clients do not jitter in step.
    pub core: Config,
}

impl ClientConfig {
    /// Settings for this core config.
    pub fn new(core: Config) -> Self {
        ClientConfig { core }
    }

    /// Parse `redis://[user:pass@]host:port[/db]` URLs, with defaults for everything else.
    pub fn from_urls<I, S>(urls: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Ok(ClientConfig::new(Config::from_urls(urls)?))
    }

    /// Check the settings ([`Config::validate`]).
    pub fn validate(&self) -> Result<(), Error> {
        Ok(self.core.validate()?)
    }
}

impl From<Config> for ClientConfig {
    fn from(core: Config) -> Self {
        ClientConfig::new(core)
    }
}

impl Deref for ClientConfig {
    type Target = Config;

    fn deref(&self) -> &Config {
        &self.core
    }
}

impl DerefMut for ClientConfig {
    fn deref_mut(&mut self) -> &mut Config {
        &mut self.core
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
    use std::time::Duration;

    use redlease_core::ConfigError;

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
    fn settings_are_the_core_config_validated_with_the_field_named() {
        let mut c = ClientConfig::from_urls(["redis://127.0.0.1:7000"]).unwrap();
        assert!(c.validate().is_ok());
        c.reconnect_min = Duration::from_secs(5);
        let err = c.validate().unwrap_err().to_string();
        assert!(err.contains("reconnect_min") && err.contains("swap"), "{err}");
        c.core.reconnect_min = Duration::ZERO;
        assert!(matches!(c.validate(), Err(Error::Config(ConfigError::ZeroReconnectMin))));
        c.reconnect_min = Duration::from_millis(50);
        c.connect_timeout = Duration::ZERO;
        assert!(c.validate().unwrap_err().to_string().contains("connect_timeout"));
        let err = ClientConfig::from_urls(["http://x"]).unwrap_err().to_string();
        assert!(err.contains("redis://"), "{err}");
        let err = ClientConfig::from_urls(Vec::<String>::new()).unwrap().validate().unwrap_err().to_string();
        assert!(err.contains("no nodes"), "{err}");
    }
}
