//! How a delivery reaches a webhook without being turned inward (spec 13.2; issue 23): the
//! URL is checked as the registration guard checks it (`PushPolicy::check_static`: scheme,
//! address spellings, refused names); a name is resolved by the client's own resolver,
//! which checks EVERY address it gets against the guard's table (`refused_address`) and the
//! route's `push-allow`, and hands the connector only checked addresses, so the connection
//! goes to an address that was checked when it was made (DNS rebinding after registration
//! is caught here). Redirects are never followed, no proxy from the environment is used,
//! TLS trusts the platform's roots plus an optional CA file, and connecting (DNS, TCP and
//! TLS), the response head and the whole attempt each have a deadline.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::TokioResolver;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::push::{refused_address, PushPolicy, Refusal, RESOLVE_TIMEOUT};

/// The deadlines of one delivery attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timeouts {
    /// Resolving, the TCP connection and the TLS handshake.
    pub(crate) connect: Duration,
    /// From the start of the attempt to the response's head.
    pub(crate) response: Duration,
    /// The whole attempt, the response body included.
    pub(crate) delivery: Duration,
}

/// Where names are looked up: DNS, or (in tests) a fixed table, the seam that lets a name
/// resolve to loopback without touching the system's resolver.
#[derive(Clone)]
pub(crate) enum Lookup {
    /// The system's resolver, or the DNS server of the route's `--dns-server`.
    Dns(Arc<TokioResolver>),
    /// Names and their addresses, fixed.
    #[cfg(test)]
    Fixed(Arc<std::collections::HashMap<String, Vec<IpAddr>>>),
}

impl Lookup {
    async fn addresses(&self, name: &str) -> Result<Vec<IpAddr>, Refusal> {
        let unresolved = |why| Refusal::Unresolved {
            name: name.to_owned(),
            why,
        };
        match self {
            Lookup::Dns(resolver) => {
                // Absolute: the gateway's search domains (a cluster's own) are not tried.
                let lookup = resolver.lookup_ip(format!("{name}."));
                match tokio::time::timeout(RESOLVE_TIMEOUT, lookup).await {
                    Err(_) => Err(unresolved("no answer within 2 s")),
                    Ok(Err(e)) if e.is_no_records_found() => Err(unresolved("no address")),
                    Ok(Err(_)) => Err(unresolved("DNS failed")),
                    Ok(Ok(found)) => Ok(found.iter().collect()),
                }
            }
            #[cfg(test)]
            Lookup::Fixed(table) => table
                .get(name)
                .cloned()
                .ok_or_else(|| unresolved("no address")),
        }
    }
}

/// The resolver reqwest asks for every new connection: it resolves and returns only
/// addresses the policy admits, or refuses the name whole if any address is refused.
struct CheckedResolver {
    policy: PushPolicy,
    lookup: Lookup,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let (policy, lookup) = (self.policy.clone(), self.lookup.clone());
        let name = name.as_str().trim_end_matches('.').to_ascii_lowercase();
        Box::pin(async move {
            let addresses = checked(&policy, &lookup, &name).await?;
            // The port is the URL's: the connector sets it on each address.
            let addrs: Addrs = Box::new(addresses.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// The addresses of `name`, each checked: one refused address refuses the name (a name
/// with an inner address among public ones would be tried there too). A name the route's
/// `push-allow` vouches for goes wherever it resolves, as the guard admits it.
async fn checked(policy: &PushPolicy, lookup: &Lookup, name: &str) -> Result<Vec<IpAddr>, Refusal> {
    let addresses = lookup.addresses(name).await?;
    if addresses.is_empty() {
        return Err(Refusal::Unresolved {
            name: name.to_owned(),
            why: "no address",
        });
    }
    if policy.admits_name(name) {
        return Ok(addresses);
    }
    for &addr in &addresses {
        if let Some(reason) = refused_address(addr).filter(|_| !policy.admits_address(addr)) {
            let name = name.to_owned();
            return Err(Refusal::Resolves { name, addr, reason });
        }
    }
    Ok(addresses)
}

/// The HTTP client of one route's deliveries: checked names, no proxy, no redirects, the
/// TLS roots of `tls`, the deadlines of `timeouts`.
pub(crate) fn client(
    policy: &PushPolicy,
    lookup: Lookup,
    tls: &rustls::ClientConfig,
    timeouts: Timeouts,
) -> Result<reqwest::Client, String> {
    let resolver = CheckedResolver {
        policy: policy.clone(),
        lookup,
    };
    reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(Arc::new(resolver))
        .use_preconfigured_tls(tls.clone())
        .http1_only()
        .connect_timeout(timeouts.connect)
        .timeout(timeouts.delivery)
        .pool_idle_timeout(Duration::from_secs(30))
        .pool_max_idle_per_host(1)
        .user_agent(concat!("a2a-gateway/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| format!("cannot build the push delivery client: {e}"))
}

/// TLS for webhooks: the platform's roots plus those of `ca_pem` (`--push-ca-file`),
/// HTTP/1.1 by ALPN. The error says what is wrong with `ca_pem`.
pub(crate) fn tls(ca_pem: Option<&[u8]>) -> Result<rustls::ClientConfig, String> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::CertificateDer;
    let mut roots = rustls::RootCertStore::empty();
    // Unreadable system certificates are skipped, as a browser would.
    let (added, _) =
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
    if let Some(pem) = ca_pem {
        let fail = |e: &dyn std::fmt::Display| e.to_string();
        let mut any = false;
        for certificate in CertificateDer::pem_slice_iter(pem) {
            roots
                .add(certificate.map_err(|e| fail(&e))?)
                .map_err(|e| fail(&e))?;
            any = true;
        }
        if !any {
            return Err(fail(&"no certificate in the file"));
        }
    } else if added == 0 {
        tracing::warn!("no system CA certificates found; https:// webhooks need --push-ca-file");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

/// The guard's refusal behind a failed request, if that is why it failed (a refused name
/// surfaces from the resolver, deep in reqwest's error).
pub(crate) fn refusal_of(error: &reqwest::Error) -> Option<&Refusal> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = source {
        if let Some(refusal) = error.downcast_ref::<Refusal>() {
            return Some(refusal);
        }
        source = error.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(rows: &[(&str, &[&str])]) -> Lookup {
        let rows = rows.iter().map(|(name, addresses)| {
            let addresses = addresses.iter().map(|a| a.parse().unwrap()).collect();
            (name.to_string(), addresses)
        });
        Lookup::Fixed(Arc::new(rows.collect()))
    }

    #[tokio::test]
    async fn every_address_of_a_name_is_checked() {
        let policy = PushPolicy::new(false, &["10.1.0.0/16".to_owned()]).unwrap();
        let lookup = table(&[
            ("public.test", &["8.8.8.8", "2606:4700::1111"]),
            ("mixed.test", &["8.8.8.8", "127.0.0.1"]),
            ("mapped.test", &["::ffff:169.254.169.254"]),
            ("vouched.test", &["10.1.2.3"]),
            ("empty.test", &[]),
        ]);
        assert_eq!(
            checked(&policy, &lookup, "public.test")
                .await
                .unwrap()
                .len(),
            2
        );
        assert_eq!(
            checked(&policy, &lookup, "mixed.test")
                .await
                .unwrap_err()
                .to_string(),
            "mixed.test resolves to loopback address 127.0.0.1"
        );
        assert_eq!(
            checked(&policy, &lookup, "mapped.test")
                .await
                .unwrap_err()
                .to_string(),
            "mapped.test resolves to cloud metadata address ::ffff:169.254.169.254"
        );
        assert!(checked(&policy, &lookup, "vouched.test").await.is_ok());
        // A vouched name goes where it resolves; a name under it is not vouched.
        let named = PushPolicy::new(false, &["hooks.internal".to_owned()]).unwrap();
        let lookup = table(&[
            ("hooks.internal", &["10.9.8.7"]),
            ("a.hooks.internal", &["10.9.8.7"]),
        ]);
        assert!(checked(&named, &lookup, "hooks.internal").await.is_ok());
        assert!(checked(&named, &lookup, "a.hooks.internal").await.is_err());
        for name in ["empty.test", "absent.test"] {
            assert_eq!(
                checked(&policy, &lookup, name)
                    .await
                    .unwrap_err()
                    .to_string(),
                format!("{name} does not resolve (no address)")
            );
        }
    }
}
