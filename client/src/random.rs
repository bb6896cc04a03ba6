//! What every client supplies to the core from the OS and the process: lock tokens, the jitter
//! seed, the wall clock, and a name unless the config has one.

use std::io;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use redlease_core::Config;

use crate::Error;

/// A lock token: 20 bytes from the OS random source, hex-encoded (40 characters).
///
/// The clients make one per acquisition; a user of the embeddable mio driver passes it to the
/// driver's `acquire` (or of the sans-IO core, to `Engine::acquire`).
pub fn new_token() -> Result<String, Error> {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(format!("no random bytes for a lock token: {e}")))?;
    Ok(redlease_core::token_hex(&bytes))
}

/// A candidate's lock token for `options`: its value in hex, `.`, and 20 bytes from the OS
/// random source in hex ([`ElectionOptions::token`](redlease_core::ElectionOptions::token)).
pub fn campaign_token(options: &redlease_core::ElectionOptions) -> Result<String, Error> {
    let mut bytes = [0u8; 20];
    getrandom::fill(&mut bytes).map_err(|e| io::Error::other(format!("no random bytes for a lock token: {e}")))?;
    Ok(String::from_utf8_lossy(&options.token(&bytes)).into_owned())
}

/// Validate `config` and give it a jitter seed from the OS random source unless it has one,
/// so that two clients never retry or reconnect in step; a name (`client-<n>`, the process's
/// `n`th client) unless it has one, so that two clients' metrics never mix; and the process's
/// one reading of the wall clock unless it has one, so that the semaphore waiters of every
/// client of the process queue in the order they came.
pub fn seeded(mut config: Config) -> Result<Config, Error> {
    config.validate()?;
    if config.wall_clock.is_none() {
        static READING: OnceLock<(Instant, Duration)> = OnceLock::new();
        let reading = READING.get_or_init(|| {
            let since_epoch = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
            (Instant::now(), since_epoch)
        });
        config.wall_clock = Some(*reading);
    }
    if config.name.is_none() {
        static CLIENTS: AtomicU64 = AtomicU64::new(1);
        config.name = Some(format!("client-{}", CLIENTS.fetch_add(1, Ordering::Relaxed)));
    }
    if config.seed.is_none() {
        let seed = getrandom::u64().map_err(|e| io::Error::other(format!("no random bytes for the seed: {e}")))?;
        config.seed = Some(seed);
    }
    Ok(config)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use redlease_core::ConfigError;

    use super::*;

    #[test]
    fn tokens_are_40_distinct_lowercase_hex_chars() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_eq!(a.len(), 40);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()), "{a}");
        assert_ne!(a, b);
    }

    #[test]
    fn seeds_come_from_the_os_unless_given_and_bad_configs_fail_first() {
        let config = Config::from_urls(["redis://127.0.0.1:7000"]).unwrap();
        let (a, b) = (seeded(config.clone()).unwrap(), seeded(config.clone()).unwrap());
        assert!(a.seed.is_some() && a.seed != b.seed);
        let names = [&a, &b].map(|c| c.name.clone().unwrap());
        assert!(names[0].starts_with("client-") && names[0] != names[1], "{names:?}");
        assert_eq!(seeded(config.clone().name("orders")).unwrap().name.as_deref(), Some("orders"));
        assert_eq!(seeded(config.clone().seed(7)).unwrap().seed, Some(7));
        // One reading of the wall clock for every client of the process.
        assert!(a.wall_clock.is_some() && a.wall_clock == b.wall_clock);
        let err = seeded(config.connect_timeout(Duration::ZERO)).unwrap_err();
        assert!(matches!(err, Error::Config(ConfigError::ZeroConnectTimeout)), "{err}");
        assert!(err.to_string().contains("connect_timeout"), "{err}");
    }
}
