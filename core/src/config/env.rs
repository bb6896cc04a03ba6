//! [`Config::from_env`]: the variables the `redlease` command reads.

use super::Config;
use crate::error::ConfigError;

impl Config {
    /// A config from the environment, read as the `redlease` command reads it:
    /// `REDLEASE_NODES` holds the node URLs, comma-separated (required; an item without a
    /// `scheme://` continues the host list of the `redis+sentinel://` URL before it, see
    /// [`split_node_list`](crate::split_node_list)), and
    /// `REDLEASE_TLS_CA`, `REDLEASE_TLS_CERT` / `REDLEASE_TLS_KEY` the CA certificates and the
    /// client certificate for `rediss://` nodes (optional, PEM files), `REDLEASE_KEY_PREFIX` the
    /// [`key_prefix`](Config::key_prefix) (optional). Everything else has its default; chain
    /// the setters to change it.
    ///
    /// ```no_run
    /// # use redlease_core::Config;
    /// // REDLEASE_NODES=redis://10.0.0.1:6379,redis://10.0.0.2:6379,redis://10.0.0.3:6379
    /// let config = Config::from_env()?;
    /// # Ok::<(), redlease_core::ConfigError>(())
    /// ```
    pub fn from_env() -> Result<Self, ConfigError> {
        let var = |name: &'static str| match std::env::var(name) {
            Ok(v) if !v.trim().is_empty() => Ok(Some(v)),
            Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(ConfigError::Env { var: name, reason: "not UTF-8".into() }),
        };
        let nodes = var("REDLEASE_NODES")?.ok_or(ConfigError::Env {
            var: "REDLEASE_NODES",
            reason: "not set: give the node URLs, comma-separated (redis://host:port,...)".into(),
        })?;
        let mut config = Config::from_urls(crate::split_node_list(&nodes))?;
        if let Some(prefix) = var("REDLEASE_KEY_PREFIX")? {
            config.key_prefix = prefix;
        }
        if let Some(ca) = var("REDLEASE_TLS_CA")? {
            config.tls = config.tls.ca_file(ca);
        }
        match (var("REDLEASE_TLS_CERT")?, var("REDLEASE_TLS_KEY")?) {
            (Some(cert), Some(key)) => config.tls = config.tls.client_cert_file(cert, key),
            (None, None) => {}
            (Some(_), None) => {
                return Err(ConfigError::Env {
                    var: "REDLEASE_TLS_KEY",
                    reason: "not set, but REDLEASE_TLS_CERT is: give both".into(),
                });
            }
            (None, Some(_)) => {
                return Err(ConfigError::Env {
                    var: "REDLEASE_TLS_CERT",
                    reason: "not set, but REDLEASE_TLS_KEY is: give both".into(),
                });
            }
        }
        Ok(config)
    }
}
