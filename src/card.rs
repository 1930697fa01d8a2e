//! Agent cards served per route (spec 8): where a route's card comes from and how it is
//! served. The settings are read here from the route's `card` table.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::config::duration_text;

/// Per-route card settings: the TOML table `[route.card]` (top-level `[card]` for the
/// one-route shorthand, whose `--card*` flags override it).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct CardSettings {
    /// A file path, an `http://`/`https://` URL, or `backend` (the agent's
    /// GetExtendedAgentCard); none: the route serves no card.
    pub source: Option<String>,
    /// Background refresh interval.
    #[serde(default, deserialize_with = "duration_text")]
    pub refresh: Option<Duration>,
    /// `Cache-Control: max-age` of the served card.
    #[serde(default, deserialize_with = "duration_text")]
    pub max_age: Option<Duration>,
    /// Keep the agent's own interfaces after the gateway's.
    #[serde(default)]
    pub keep_interfaces: bool,
    /// What happens to the agent's signatures.
    pub signatures: Option<SignaturePolicy>,
    /// PEM private key that re-signs the card.
    pub sign_key: Option<PathBuf>,
    /// `kid` of the re-signing key.
    pub sign_kid: Option<String>,
    /// `jku` of the re-signing key.
    pub sign_jku: Option<String>,
    /// Only these skill ids are published.
    pub skills: Option<Vec<String>>,
    /// Environment variable holding the `Authorization` value for fetching the card.
    pub authorization_env: Option<String>,
    /// File holding the `Authorization` value for fetching the card.
    pub authorization_file: Option<PathBuf>,
}

/// What a rewritten card does with the agent's signatures (spec 8.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SignaturePolicy {
    Strip,
    Resign,
    Preserve,
}
