//! One `[[auth.jwt]]` table, checked and typed: the issuer's `iss`, one prepared
//! `Validation` per accepted algorithm (audience, issuer, `exp` required, `nbf`, clock
//! skew) and its key store. Errors name the key (`auth.jwt[0].jwks-file: …`).

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use jsonwebtoken::{Algorithm, Validation};

use super::store::KeyStore;
use crate::auth::table::JwtIssuerTable;

/// Accepted when `algorithms` is not given.
const DEFAULT_ALGORITHMS: [Algorithm; 3] = [Algorithm::RS256, Algorithm::ES256, Algorithm::EdDSA];
const DEFAULT_CLOCK_SKEW: Duration = Duration::from_secs(60);
/// Larger skews are refused: a token would outlive its `exp` by that much.
const MAX_CLOCK_SKEW: Duration = Duration::from_secs(600);
const DEFAULT_REFRESH: Duration = Duration::from_secs(300);
/// Smallest `refresh`: the least interval between two requests to the issuer.
const MIN_REFRESH: Duration = Duration::from_secs(1);

pub(super) struct Issuer {
    pub(super) iss: String,
    /// One per accepted algorithm (jsonwebtoken checks every listed algorithm against the
    /// key's type, so a validation lists exactly one).
    validations: Vec<Validation>,
    pub(super) clock_skew: u64,
    pub(super) keys: Arc<KeyStore>,
}

impl Issuer {
    /// The issuer of table `index`; an error names its key.
    pub(super) fn new(index: usize, table: &JwtIssuerTable) -> Result<Issuer, String> {
        let key = |name: &str, why: String| format!("auth.jwt[{index}].{name}: {why}");
        if table.issuer.is_empty() {
            return Err(key("issuer", "must not be empty".into()));
        }
        if table.audiences.iter().any(String::is_empty) {
            return Err(key("audiences", "an audience must not be empty".into()));
        }
        let algorithms = match &table.algorithms {
            None => DEFAULT_ALGORITHMS.to_vec(),
            Some(names) => algorithms(names).map_err(|why| key("algorithms", why))?,
        };
        let skew = table.clock_skew.unwrap_or(DEFAULT_CLOCK_SKEW);
        if skew > MAX_CLOCK_SKEW {
            return Err(key("clock-skew", format!("at most {MAX_CLOCK_SKEW:?}")));
        }
        let refresh = table.refresh.unwrap_or(DEFAULT_REFRESH);
        if refresh < MIN_REFRESH {
            return Err(key("refresh", format!("at least {MIN_REFRESH:?}")));
        }
        let keys = match (&table.jwks_file, &table.jwks_url) {
            (Some(_), Some(_)) => {
                return Err(key("jwks-url", "give jwks-url or jwks-file, not both".into()))
            }
            (Some(path), None) => {
                KeyStore::from_file(&table.issuer, path).map_err(|why| key("jwks-file", why))?
            }
            (None, Some(url)) => KeyStore::remote(&table.issuer, Some(url), refresh)
                .map_err(|why| key("jwks-url", why))?,
            (None, None) => KeyStore::remote(&table.issuer, None, refresh).map_err(|why| {
                key("issuer", format!("{why} (without jwks-url or jwks-file, the issuer's OIDC discovery names the keys)"))
            })?,
        };
        let clock_skew = skew.as_secs();
        let validations = algorithms
            .into_iter()
            .map(|alg| validation(alg, table, clock_skew))
            .collect();
        Ok(Issuer {
            iss: table.issuer.clone(),
            validations,
            clock_skew,
            keys: Arc::new(keys),
        })
    }

    /// How a token signed with `alg` is validated, if the issuer accepts `alg`.
    pub(super) fn validation(&self, alg: Algorithm) -> Option<&Validation> {
        self.validations.iter().find(|v| v.algorithms[0] == alg)
    }
}

fn validation(alg: Algorithm, table: &JwtIssuerTable, clock_skew: u64) -> Validation {
    let mut validation = Validation::new(alg);
    validation.leeway = clock_skew;
    validation.validate_nbf = true;
    validation.set_issuer(&[&table.issuer]);
    let mut required = vec!["exp", "iss"];
    if table.audiences.is_empty() {
        validation.validate_aud = false;
    } else {
        validation.set_audience(&table.audiences);
        required.push("aud");
    }
    validation.set_required_spec_claims(&required);
    validation
}

/// The `algorithms` setting: asymmetric signature algorithms only.
fn algorithms(names: &[String]) -> Result<Vec<Algorithm>, String> {
    if names.is_empty() {
        return Err("must name at least one algorithm".into());
    }
    names
        .iter()
        .map(|name| {
            if name.eq_ignore_ascii_case("none") {
                return Err("\"none\" is refused: tokens must be signed".to_owned());
            }
            if name.to_ascii_uppercase().starts_with("HS") {
                return Err(format!(
                    "{name:?} is refused: HMAC would make a public key a shared secret"
                ));
            }
            Algorithm::from_str(name).map_err(|_| {
                format!("{name:?} is not one of RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, EdDSA")
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> JwtIssuerTable {
        JwtIssuerTable {
            issuer: "https://login.example.com".into(),
            ..JwtIssuerTable::default()
        }
    }

    fn error(table: JwtIssuerTable) -> String {
        Issuer::new(2, &table).err().expect("refused")
    }

    #[test]
    fn defaults_accept_rs256_es256_eddsa_only() {
        let issuer = Issuer::new(0, &table()).unwrap();
        for alg in DEFAULT_ALGORITHMS {
            assert!(issuer.validation(alg).is_some(), "{alg:?}");
        }
        for alg in [Algorithm::HS256, Algorithm::PS256, Algorithm::ES384] {
            assert!(issuer.validation(alg).is_none(), "{alg:?}");
        }
        assert_eq!(issuer.clock_skew, 60);
        // The bounds themselves are accepted.
        let table = JwtIssuerTable {
            clock_skew: Some(MAX_CLOCK_SKEW),
            refresh: Some(MIN_REFRESH),
            ..table()
        };
        assert_eq!(Issuer::new(0, &table).unwrap().clock_skew, 600);
    }

    #[test]
    fn none_and_hmac_are_refused_at_load() {
        for bad in ["none", "NONE", "HS256", "hs512", "XS1", ""] {
            let err = error(JwtIssuerTable {
                algorithms: Some(vec!["RS256".into(), bad.into()]),
                ..table()
            });
            assert!(err.starts_with("auth.jwt[2].algorithms: "), "{err}");
        }
        let err = error(JwtIssuerTable {
            algorithms: Some(vec![]),
            ..table()
        });
        assert!(err.starts_with("auth.jwt[2].algorithms: "), "{err}");
    }

    #[test]
    fn errors_name_the_key() {
        let cases = [
            ("issuer", JwtIssuerTable::default()),
            (
                "audiences",
                JwtIssuerTable {
                    audiences: vec!["".into()],
                    ..table()
                },
            ),
            (
                "clock-skew",
                JwtIssuerTable {
                    clock_skew: Some(Duration::from_secs(601)),
                    ..table()
                },
            ),
            (
                "refresh",
                JwtIssuerTable {
                    refresh: Some(Duration::from_millis(999)),
                    ..table()
                },
            ),
            (
                "jwks-url",
                JwtIssuerTable {
                    jwks_url: Some("http://keys.example.com/".into()),
                    ..table()
                },
            ),
            (
                "jwks-url",
                JwtIssuerTable {
                    jwks_url: Some("https://k/".into()),
                    jwks_file: Some("/k".into()),
                    ..table()
                },
            ),
            (
                "jwks-file",
                JwtIssuerTable {
                    jwks_file: Some("/nonexistent/jwks.json".into()),
                    ..table()
                },
            ),
            (
                "issuer",
                JwtIssuerTable {
                    issuer: "http://login.example.com".into(),
                    ..table()
                },
            ),
        ];
        for (key, table) in cases {
            let err = error(table);
            assert!(
                err.starts_with(&format!("auth.jwt[2].{key}: ")),
                "{key}: {err}"
            );
        }
    }
}
