//! The OS randomness the adapter supplies: lock tokens and the jitter seed.

use crate::Error;

/// A lock token: 20 bytes from the OS random source, hex-encoded (40 characters).
///
/// The [`Client`](crate::Client) makes one per acquisition; a [`Driver`](crate::Driver) user
/// passes it to [`AcquireRequest::new`](redlease_core::AcquireRequest::new).
pub fn new_token() -> Result<String, Error> {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(format!("no random bytes for a lock token: {e}")))?;
    Ok(redlease_core::token_hex(&bytes))
}

/// A seed for the core's jitter generator from the OS random source.
pub(crate) fn random_seed() -> Result<u64, Error> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| std::io::Error::other(format!("no random bytes for the seed: {e}")))?;
    Ok(u64::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mio::Token;
    use redlease_core::{Config, ConfigError};

    use super::*;
    use crate::{Client, Driver};

    #[test]
    fn tokens_are_40_hex_chars_and_differ() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_eq!(a.len(), 40);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn a_bad_config_fails_as_a_config_error_naming_the_field_before_any_socket() {
        let mut c = Config::from_urls(["redis://127.0.0.1:7000"]).unwrap();
        assert!(Driver::new(c.clone(), Token(0)).is_ok());
        c.reconnect_min = Duration::from_secs(5);
        let err = Driver::new(c.clone(), Token(0)).unwrap_err().to_string();
        assert!(err.contains("reconnect_min") && err.contains("swap"), "{err}");
        c.reconnect_min = Duration::ZERO;
        assert!(matches!(Driver::new(c.clone(), Token(0)), Err(Error::Config(ConfigError::ZeroReconnectMin))));
        c.reconnect_min = Duration::from_millis(50);
        c.connect_timeout = Duration::ZERO;
        let err = Client::with_config(c).unwrap_err();
        assert!(matches!(err, Error::Config(ConfigError::ZeroConnectTimeout)), "{err}");
        assert!(err.to_string().contains("connect_timeout"), "{err}");
        let err = Client::connect(["http://x"]).unwrap_err();
        assert!(matches!(err, Error::Config(_)) && err.to_string().contains("redis://"), "{err}");
        let err = Driver::new(Config::new(Vec::new()), Token(0)).unwrap_err().to_string();
        assert!(err.contains("no nodes"), "{err}");
    }
}
