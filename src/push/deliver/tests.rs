//! Deliveries to real webhooks on loopback: what they receive, in which order, how often,
//! and what never reaches them (redirects, names resolving inward, proxies).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Semaphore};

use super::*;

/// One request a webhook received.
#[derive(Debug)]
struct Seen {
    path: String,
    headers: http::HeaderMap,
    body: Bytes,
}

/// How a webhook answers its `n`th request (from 0).
enum Reply {
    Status(u16, Vec<(&'static str, String)>),
    /// Holds the request until it gets a permit, then answers 200.
    HoldUntil(Arc<Semaphore>),
    /// Never answers.
    Never,
}

type Script = Arc<dyn Fn(usize) -> Reply + Send + Sync>;

/// A webhook on loopback: every request it gets, in order.
struct Webhook {
    addr: SocketAddr,
    seen: mpsc::UnboundedReceiver<Seen>,
}

impl Webhook {
    async fn start(script: impl Fn(usize) -> Reply + Send + Sync + 'static) -> Webhook {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        Webhook::on(listener, Arc::new(script))
    }

    fn on(listener: TcpListener, script: Script) -> Webhook {
        Webhook::serving(listener, script, None)
    }

    /// A webhook answering over TLS with `tls`.
    async fn https(tls: rustls::ServerConfig) -> Webhook {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
        Webhook::serving(listener, Arc::new(|_| ok()), Some(acceptor))
    }

    fn serving(
        listener: TcpListener,
        script: Script,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> Webhook {
        let addr = listener.local_addr().unwrap();
        let (tx, seen) = mpsc::unbounded_channel();
        let count = Arc::new(AtomicUsize::new(0));
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (tx, script, count) = (tx.clone(), script.clone(), count.clone());
                let service = service_fn(move |request: http::Request<hyper::body::Incoming>| {
                    let (tx, script, count) = (tx.clone(), script.clone(), count.clone());
                    async move {
                        let (parts, body) = request.into_parts();
                        let body = body.collect().await.unwrap().to_bytes();
                        let n = count.fetch_add(1, Ordering::SeqCst);
                        let _ = tx.send(Seen {
                            path: parts.uri.path().to_owned(),
                            headers: parts.headers,
                            body,
                        });
                        let (status, headers) = match script(n) {
                            Reply::Status(status, headers) => (status, headers),
                            Reply::HoldUntil(release) => {
                                release.acquire().await.unwrap().forget();
                                (200, Vec::new())
                            }
                            Reply::Never => std::future::pending().await,
                        };
                        let mut response = http::Response::new(Full::new(Bytes::new()));
                        *response.status_mut() = http::StatusCode::from_u16(status).unwrap();
                        for (name, value) in headers {
                            response.headers_mut().insert(name, value.parse().unwrap());
                        }
                        Ok::<_, Infallible>(response)
                    }
                });
                let tls = tls.clone();
                tokio::spawn(async move {
                    let http = hyper::server::conn::http1::Builder::new();
                    match tls {
                        None => {
                            let _ = http.serve_connection(TokioIo::new(stream), service).await;
                        }
                        Some(tls) => {
                            let Ok(stream) = tls.accept(stream).await else {
                                return;
                            };
                            let _ = http.serve_connection(TokioIo::new(stream), service).await;
                        }
                    }
                });
            }
        });
        Webhook { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn next(&mut self) -> Seen {
        tokio::time::timeout(Duration::from_secs(20), self.seen.recv())
            .await
            .expect("the webhook got a request in time")
            .unwrap()
    }

    fn nothing_more(&mut self) {
        assert!(self.seen.try_recv().is_err(), "an unexpected request");
    }
}

fn ok() -> Reply {
    Reply::Status(200, Vec::new())
}

fn settings() -> DeliverySettings {
    DeliverySettings {
        queue: 100,
        per_destination: 100,
        queue_bytes: 1 << 20,
        drop: PushDrop::Oldest,
        max_attempts: 5,
        max_age: Duration::from_secs(60),
        timeouts: Timeouts {
            connect: Duration::from_secs(5),
            response: Duration::from_secs(5),
            delivery: Duration::from_secs(10),
        },
        backoff: Backoff {
            base: Duration::from_millis(20),
            cap: Duration::from_millis(200),
        },
        tls: Arc::new(connect::tls(None).unwrap()),
        signer: None,
    }
}

const ROUTE: &str = "hooks";

/// A deliverer of the route `hooks`, which admits `http` and loopback (the webhooks').
fn deliverer(settings: DeliverySettings) -> (Deliverer, Arc<DeliveryMetrics>) {
    deliverer_with(settings, &["127.0.0.1"], Vec::new())
}

fn deliverer_with(
    settings: DeliverySettings,
    allow: &[&str],
    names: Vec<(&str, Vec<std::net::IpAddr>)>,
) -> (Deliverer, Arc<DeliveryMetrics>) {
    let allow: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
    deliverer_of(settings, PushPolicy::new(true, &allow).unwrap(), names)
}

fn deliverer_of(
    settings: DeliverySettings,
    policy: PushPolicy,
    names: Vec<(&str, Vec<std::net::IpAddr>)>,
) -> (Deliverer, Arc<DeliveryMetrics>) {
    let names = names.into_iter().map(|(n, a)| (n.to_owned(), a)).collect();
    let route = DeliveryRoute {
        name: ROUTE.to_owned(),
        policy,
        lookup: Lookup::Fixed(Arc::new(names)),
    };
    let metrics = Arc::new(DeliveryMetrics::new([ROUTE]));
    let deliverer = Deliverer::new(settings, vec![route], &metrics).unwrap();
    (deliverer, metrics)
}

/// A deliverer of the route `hooks` (loopback allowed) counting into `metrics`, as a
/// reload's is built.
fn deliverer_counting(settings: DeliverySettings, metrics: &DeliveryMetrics) -> Deliverer {
    let allow = ["127.0.0.1".to_owned()];
    let route = DeliveryRoute {
        name: ROUTE.to_owned(),
        policy: PushPolicy::new(true, &allow).unwrap(),
        lookup: Lookup::Fixed(Arc::default()),
    };
    Deliverer::new(settings, vec![route], metrics).unwrap()
}

fn delivery(url: &str, task: &str, n: u8) -> Delivery {
    let body = format!(r#"{{"statusUpdate":{{"taskId":"{task}","n":{n}}}}}"#);
    let mut event_key = [0u8; 32];
    event_key[0] = n;
    event_key[1..1 + task.len().min(31)].copy_from_slice(&task.as_bytes()[..task.len().min(31)]);
    Delivery {
        route: ROUTE.into(),
        task_id: task.to_owned(),
        event_key,
        url: url.to_owned(),
        token: None,
        authentication: None,
        body: body.into(),
        traceparent: None,
    }
}

/// The value of one series of `/metrics` (0 when absent).
fn series(metrics: &DeliveryMetrics, name: &str) -> u64 {
    let mut text = String::new();
    metrics.render(&mut text);
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0)
}

fn outcome(outcome: &str) -> String {
    format!("a2a_gateway_push_deliveries_total{{route=\"{ROUTE}\",outcome=\"{outcome}\"}}")
}

fn dropped(reason: &str) -> String {
    format!("a2a_gateway_push_delivery_drops_total{{route=\"{ROUTE}\",reason=\"{reason}\"}}")
}

const RETRIES: &str = "a2a_gateway_push_delivery_retries_total{route=\"hooks\"}";
const DEPTH: &str = "a2a_gateway_push_queue_depth{route=\"hooks\"}";

/// Waits until the series reaches `at_least` (the deliverer's thread counts it).
async fn reaches(metrics: &DeliveryMetrics, name: &str, at_least: u64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while series(metrics, name) < at_least {
        assert!(Instant::now() < deadline, "{name} stayed below {at_least}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_delivery_carries_the_clients_token_authentication_and_a_verifiable_signature() {
    let mut hook = Webhook::start(|_| ok()).await;
    let mut settings = settings();
    let signer = Arc::new(PushSigner::from_pem(&crate::push::sign::tests::ec_pem()).unwrap());
    settings.signer = Some(signer.clone());
    let (deliverer, metrics) = deliverer(settings);
    let mut one = delivery(&hook.url("/a2a/hook?x=1"), "t-1", 1);
    one.token = Some("client-token".into());
    one.authentication = Some(("Bearer".into(), "client-credentials".into()));
    deliverer.enqueue(one.clone()).unwrap();
    let seen = hook.next().await;
    assert_eq!(seen.path, "/a2a/hook");
    assert_eq!(seen.body, one.body);
    let header = |name: &str| seen.headers.get(name).unwrap().to_str().unwrap().to_owned();
    assert_eq!(header("x-a2a-notification-token"), "client-token");
    assert_eq!(header("authorization"), "Bearer client-credentials");
    assert_eq!(header("content-type"), "application/a2a+json");
    let jws = header("x-a2a-signature");
    assert!(crate::push::sign::tests::verify(
        &signer.jwks(),
        &jws,
        &seen.body
    ));
    assert!(!crate::push::sign::tests::verify(
        &signer.jwks(),
        &jws,
        b"{}"
    ));
    reaches(&metrics, &outcome("delivered"), 1).await;
    assert_eq!(series(&metrics, RETRIES), 0);
    assert_eq!(series(&metrics, DEPTH), 0);
}

#[tokio::test]
async fn the_events_of_a_task_arrive_in_order_through_retries() {
    // The third event's first attempt fails: the ones after it wait for it.
    let mut hook = Webhook::start(|n| match n {
        2 => Reply::Status(503, Vec::new()),
        _ => ok(),
    })
    .await;
    let (deliverer, metrics) = deliverer(settings());
    let url = hook.url("/hook");
    for n in 0..10 {
        deliverer.enqueue(delivery(&url, "t-1", n)).unwrap();
    }
    let mut bodies = Vec::new();
    for _ in 0..11 {
        bodies.push(hook.next().await.body);
    }
    let expected: Vec<Bytes> = [0, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9]
        .into_iter()
        .map(|n| delivery(&url, "t-1", n).body)
        .collect();
    assert_eq!(bodies, expected);
    reaches(&metrics, &outcome("delivered"), 10).await;
    assert_eq!(series(&metrics, RETRIES), 1);
}

#[tokio::test]
async fn a_duplicate_event_is_delivered_once_to_each_registration() {
    let mut hook = Webhook::start(|_| ok()).await;
    let (deliverer, metrics) = deliverer(settings());
    let (a, b) = (hook.url("/a"), hook.url("/b"));
    deliverer.enqueue(delivery(&a, "t-1", 1)).unwrap();
    deliverer.enqueue(delivery(&a, "t-1", 1)).unwrap();
    // The same event for another webhook of the task is not a duplicate.
    deliverer.enqueue(delivery(&b, "t-1", 1)).unwrap();
    deliverer.enqueue(delivery(&a, "t-1", 2)).unwrap();
    // Nor for another config (token, authentication) on the same webhook: another caller's.
    let other_token = Delivery {
        token: Some("tok-2".into()),
        ..delivery(&a, "t-1", 1)
    };
    deliverer.enqueue(other_token).unwrap();
    let other_credentials = Delivery {
        authentication: Some(("Bearer".into(), "s-2".into())),
        ..delivery(&a, "t-1", 1)
    };
    deliverer.enqueue(other_credentials).unwrap();
    // The same credentials with the scheme in another case are the same registration.
    let same_credentials = Delivery {
        authentication: Some(("bearer".into(), "s-2".into())),
        ..delivery(&a, "t-1", 1)
    };
    deliverer.enqueue(same_credentials).unwrap();
    let mut paths = Vec::new();
    for _ in 0..5 {
        paths.push(hook.next().await.path);
    }
    assert_eq!(paths, ["/a", "/b", "/a", "/a", "/a"]);
    reaches(&metrics, &outcome("delivered"), 5).await;
    assert_eq!(series(&metrics, &dropped("duplicate")), 2);
    hook.nothing_more();
}

#[tokio::test]
async fn server_errors_and_429_are_retried_until_delivered() {
    let mut hook = Webhook::start(|n| match n {
        0 => Reply::Status(500, Vec::new()),
        // A day, which the back-off cap (200 ms here) bounds.
        1 => Reply::Status(429, vec![("retry-after", "86400".into())]),
        2 => Reply::Status(503, Vec::new()),
        _ => ok(),
    })
    .await;
    let (deliverer, metrics) = deliverer(settings());
    deliverer.enqueue(delivery(&hook.url("/"), "t", 1)).unwrap();
    for _ in 0..4 {
        hook.next().await;
    }
    reaches(&metrics, &outcome("delivered"), 1).await;
    assert_eq!(series(&metrics, RETRIES), 3);
    hook.nothing_more();
}

#[tokio::test]
async fn other_client_errors_and_redirects_are_final() {
    let mut elsewhere = Webhook::start(|_| ok()).await;
    let to = elsewhere.url("/inner");
    let mut hook = Webhook::start(move |n| match n {
        0 => Reply::Status(400, Vec::new()),
        1 => Reply::Status(404, Vec::new()),
        _ => Reply::Status(302, vec![("location", to.clone())]),
    })
    .await;
    let (deliverer, metrics) = deliverer(settings());
    for n in 0..3 {
        deliverer.enqueue(delivery(&hook.url("/"), "t", n)).unwrap();
    }
    for _ in 0..3 {
        hook.next().await;
    }
    reaches(&metrics, &outcome("rejected"), 2).await;
    reaches(&metrics, &outcome("redirected"), 1).await;
    assert_eq!(series(&metrics, RETRIES), 0);
    hook.nothing_more();
    elsewhere.nothing_more();
}

#[tokio::test]
async fn a_webhook_down_then_up_gets_the_delivery() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut settings = settings();
    settings.max_attempts = 1000;
    let (deliverer, metrics) = deliverer(settings);
    deliverer
        .enqueue(delivery(&format!("http://{addr}/"), "t", 1))
        .unwrap();
    reaches(&metrics, RETRIES, 2).await;
    let listener = TcpListener::bind(addr).await.unwrap();
    let mut hook = Webhook::on(listener, Arc::new(|_| ok()));
    hook.next().await;
    reaches(&metrics, &outcome("delivered"), 1).await;
}

#[tokio::test]
async fn a_slow_webhook_costs_at_most_the_deadlines() {
    let mut hook = Webhook::start(|_| Reply::Never).await;
    let mut settings = settings();
    settings.max_attempts = 2;
    settings.timeouts.response = Duration::from_millis(300);
    let (deliverer, metrics) = deliverer(settings);
    let started = Instant::now();
    deliverer.enqueue(delivery(&hook.url("/"), "t", 1)).unwrap();
    hook.next().await;
    hook.next().await;
    reaches(&metrics, &outcome("exhausted"), 1).await;
    // Two deadlines and a back-off of at most 20 ms; ten times that on a loaded machine.
    assert!(
        started.elapsed() < Duration::from_secs(7),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(series(&metrics, RETRIES), 1);
}

/// Fills one destination to its bound of 3 (one being sent, two waiting) and goes one
/// past, with `drop`.
async fn one_past_the_destination_bound(
    drop: PushDrop,
) -> (Vec<Bytes>, Arc<DeliveryMetrics>, Vec<Result<(), Refused>>) {
    let release = Arc::new(Semaphore::new(0));
    let hold = release.clone();
    let mut hook = Webhook::start(move |n| match n {
        0 => Reply::HoldUntil(hold.clone()),
        _ => ok(),
    })
    .await;
    let mut settings = settings();
    settings.per_destination = 3;
    settings.drop = drop;
    let (deliverer, metrics) = deliverer(settings);
    let url = hook.url("/");
    deliverer.enqueue(delivery(&url, "t", 0)).unwrap();
    let mut bodies = vec![hook.next().await.body];
    let results: Vec<_> = (1..4)
        .map(|n| deliverer.enqueue(delivery(&url, "t", n)))
        .collect();
    release.add_permits(1);
    let delivered = 3;
    for _ in 1..delivered {
        bodies.push(hook.next().await.body);
    }
    reaches(&metrics, &outcome("delivered"), delivered as u64).await;
    hook.nothing_more();
    (bodies, metrics, results)
}

#[tokio::test]
async fn past_the_destination_bound_the_newest_is_refused() {
    let (bodies, metrics, results) = one_past_the_destination_bound(PushDrop::Newest).await;
    assert_eq!(results, [Ok(()), Ok(()), Err(Refused::Full)]);
    let body = |n| delivery("", "t", n).body;
    assert_eq!(bodies, [body(0), body(1), body(2)]);
    assert_eq!(series(&metrics, &dropped("queue_full")), 1);
}

#[tokio::test]
async fn past_the_destination_bound_the_oldest_waiting_is_dropped() {
    let (bodies, metrics, results) = one_past_the_destination_bound(PushDrop::Oldest).await;
    assert_eq!(results, [Ok(()), Ok(()), Ok(())]);
    let body = |n| delivery("", "t", n).body;
    assert_eq!(bodies, [body(0), body(2), body(3)]);
    assert_eq!(series(&metrics, &dropped("queue_full")), 1);
}

#[tokio::test]
async fn past_the_overall_bound_the_oldest_of_any_destination_is_dropped() {
    let release = Arc::new(Semaphore::new(0));
    let (hold_a, hold_b) = (release.clone(), release.clone());
    let mut a = Webhook::start(move |_| Reply::HoldUntil(hold_a.clone())).await;
    let mut b = Webhook::start(move |_| Reply::HoldUntil(hold_b.clone())).await;
    let mut settings = settings();
    settings.queue = 4;
    let (deliverer, metrics) = deliverer(settings);
    deliverer.enqueue(delivery(&a.url("/"), "a", 0)).unwrap();
    deliverer.enqueue(delivery(&b.url("/"), "b", 0)).unwrap();
    a.next().await;
    b.next().await;
    // Two being sent, two waiting: the bound.
    deliverer.enqueue(delivery(&a.url("/"), "a", 1)).unwrap();
    deliverer.enqueue(delivery(&b.url("/"), "b", 1)).unwrap();
    assert_eq!(series(&metrics, DEPTH), 2);
    assert_eq!(series(&metrics, &dropped("queue_full")), 0);
    // One past: `a`'s waiting delivery came first and goes.
    deliverer.enqueue(delivery(&b.url("/"), "b", 2)).unwrap();
    assert_eq!(series(&metrics, &dropped("queue_full")), 1);
    assert_eq!(series(&metrics, DEPTH), 2);
    release.add_permits(10);
    let later = [b.next().await.body, b.next().await.body];
    assert_eq!(
        later,
        [delivery("", "b", 1).body, delivery("", "b", 2).body]
    );
    reaches(&metrics, &outcome("delivered"), 4).await;
    a.nothing_more();
}

#[tokio::test]
async fn names_and_spellings_of_inner_addresses_are_refused_before_connecting() {
    let mut hook = Webhook::start(|_| ok()).await;
    let port = hook.addr.port();
    let loopback: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let names = vec![
        ("hooks.test", vec![loopback]),
        ("mapped.test", vec!["::ffff:127.0.0.1".parse().unwrap()]),
    ];
    // Nothing is vouched for: the webhook's own address is refused in every spelling.
    let (deliverer, metrics) = deliverer_with(settings(), &[], names);
    let urls = [
        format!("http://hooks.test:{port}/"),
        format!("http://mapped.test:{port}/"),
        format!("http://localhost:{port}/"),
        format!("http://127.1:{port}/"),
        format!("http://0x7f.1:{port}/"),
        format!("http://[::ffff:127.0.0.1]:{port}/"),
        format!("http://2130706433:{port}/"),
        format!("ftp://hooks.test:{port}/"),
    ];
    for (n, url) in urls.iter().enumerate() {
        deliverer.enqueue(delivery(url, "t", n as u8)).unwrap();
    }
    reaches(&metrics, &outcome("refused"), urls.len() as u64).await;
    hook.nothing_more();
    assert_eq!(series(&metrics, RETRIES), 0);
}

#[tokio::test]
async fn a_name_that_does_not_resolve_is_retried() {
    let mut settings = settings();
    settings.max_attempts = 3;
    let (deliverer, metrics) = deliverer_with(settings, &[], Vec::new());
    deliverer
        .enqueue(delivery("http://absent.test/", "t", 1))
        .unwrap();
    reaches(&metrics, &outcome("exhausted"), 1).await;
    assert_eq!(series(&metrics, RETRIES), 2);
}

#[tokio::test]
async fn names_are_resolved_by_dns_within_its_deadline() {
    // A DNS server that never answers: the name is unresolved after 2 s, not refused.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let server = silent.local_addr().unwrap();
    let resolver = crate::backend::endpoints::resolve::resolver(Some(server)).unwrap();
    let mut settings = settings();
    settings.max_attempts = 1;
    let route = DeliveryRoute {
        name: ROUTE.to_owned(),
        policy: PushPolicy::new(true, &[]).unwrap(),
        lookup: Lookup::Dns(Arc::new(resolver)),
    };
    let metrics = Arc::new(DeliveryMetrics::new([ROUTE]));
    let deliverer = Deliverer::new(settings, vec![route], &metrics).unwrap();
    let started = Instant::now();
    deliverer
        .enqueue(delivery("http://hooks.example.com/", "t", 1))
        .unwrap();
    reaches(&metrics, &outcome("exhausted"), 1).await;
    assert!(started.elapsed() >= crate::push::RESOLVE_TIMEOUT);
}

#[tokio::test]
async fn shutdown_sends_what_is_held_within_the_grace() {
    let mut hook = Webhook::start(|_| ok()).await;
    let (deliverer, metrics) = deliverer(settings());
    for n in 0..3 {
        deliverer.enqueue(delivery(&hook.url("/"), "t", n)).unwrap();
    }
    deliverer.shutdown(Duration::from_secs(20)).await;
    assert_eq!(series(&metrics, &outcome("delivered")), 3);
    for _ in 0..3 {
        hook.next().await;
    }
    assert_eq!(
        deliverer.enqueue(delivery(&hook.url("/"), "t", 9)),
        Err(Refused::Closed)
    );
    assert_eq!(series(&metrics, &dropped("shutdown")), 1);
}

#[tokio::test]
async fn shutdown_drops_and_counts_what_the_grace_does_not_cover() {
    let mut hook = Webhook::start(|_| Reply::Never).await;
    let (deliverer, metrics) = deliverer(settings());
    for n in 0..3 {
        deliverer.enqueue(delivery(&hook.url("/"), "t", n)).unwrap();
    }
    hook.next().await;
    deliverer.shutdown(Duration::from_millis(100)).await;
    // Two waiting, one being sent.
    reaches(&metrics, &dropped("shutdown"), 3).await;
    assert_eq!(series(&metrics, DEPTH), 0);
    assert_eq!(series(&metrics, &outcome("delivered")), 0);
}

/// A CA's certificate (PEM) and a server config with a certificate it signed for
/// `127.0.0.1`.
fn pki() -> (String, rustls::ServerConfig) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_owned()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der());
    let server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key.into())
        .unwrap();
    (ca.pem(), server)
}

#[tokio::test]
async fn https_webhooks_are_verified_and_http_needs_the_routes_consent() {
    let (ca, server) = pki();
    let mut hook = Webhook::https(server).await;
    let url = format!("https://{}/", hook.addr);
    let strict = || PushPolicy::new(false, &["127.0.0.1".to_owned()]).unwrap();
    // Trusting the webhook's CA: delivered.
    let mut trusting = settings();
    trusting.tls = Arc::new(connect::tls(Some(ca.as_bytes())).unwrap());
    let (deliverer, metrics) = deliverer_of(trusting, strict(), Vec::new());
    deliverer.enqueue(delivery(&url, "t", 1)).unwrap();
    hook.next().await;
    reaches(&metrics, &outcome("delivered"), 1).await;
    // With the platform's roots only, the handshake fails: never delivered.
    let mut untrusting = settings();
    untrusting.max_attempts = 2;
    let (deliverer, metrics) = deliverer_of(untrusting, strict(), Vec::new());
    deliverer.enqueue(delivery(&url, "t", 2)).unwrap();
    reaches(&metrics, &outcome("exhausted"), 1).await;
    hook.nothing_more();
    // `http` where the route does not allow it: refused without connecting.
    let mut plain = Webhook::start(|_| ok()).await;
    let (deliverer, metrics) = deliverer_of(settings(), strict(), Vec::new());
    deliverer
        .enqueue(delivery(&plain.url("/"), "t", 3))
        .unwrap();
    reaches(&metrics, &outcome("refused"), 1).await;
    plain.nothing_more();
}

/// Set in the child process `proxies_in_the_environment_are_not_used` starts.
const PROXY_CHILD: &str = "A2A_TEST_PUSH_PROXY_CHILD";

#[tokio::test]
async fn proxies_in_the_environment_are_not_used() {
    if std::env::var_os(PROXY_CHILD).is_some() {
        // The child: the proxy variables are set; the delivery still goes straight there.
        let mut hook = Webhook::start(|_| ok()).await;
        let (deliverer, metrics) = deliverer(settings());
        deliverer.enqueue(delivery(&hook.url("/"), "t", 1)).unwrap();
        hook.next().await;
        reaches(&metrics, &outcome("delivered"), 1).await;
        return;
    }
    // A recording proxy: any connection to it is a delivery that went through it.
    let proxy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let mut child = std::process::Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            "push::deliver::tests::proxies_in_the_environment_are_not_used",
        ])
        .env(PROXY_CHILD, "1")
        .env_remove("NO_PROXY")
        .env_remove("no_proxy");
    for name in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        child.env(name, &proxy_url);
    }
    let output = child.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}");
    assert!(stdout.contains("1 passed"), "{stdout}");
    proxy.set_nonblocking(true).unwrap();
    assert_eq!(
        proxy.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock,
        "a connection went through the proxy"
    );
}

/// Set in the child process `a_delivery_continues_the_agents_trace` starts.
const TRACE_CHILD: &str = "A2A_TEST_PUSH_TRACE_CHILD";

#[test]
fn a_delivery_continues_the_agents_trace() {
    if std::env::var_os(TRACE_CHILD).is_none() {
        // The tracer is the process's: set it in a process of its own.
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "push::deliver::tests::a_delivery_continues_the_agents_trace",
            ])
            .env(TRACE_CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        assert!(stdout.contains("1 passed"), "{stdout}");
        return;
    }
    // Spans go to an exporter that reaches nobody: what is checked is the webhook's head.
    let flags = crate::telemetry::trace::TraceFlags {
        endpoint: Some("http://127.0.0.1:9"),
        protocol: None,
        sampler: None,
        sampler_arg: None,
    };
    let traces = crate::telemetry::trace::TraceSettings::resolve(flags, &|_| None)
        .unwrap()
        .unwrap();
    let _tracing = crate::telemetry::trace::Tracing::start(&traces).unwrap();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut hook = Webhook::start(|_| ok()).await;
        let (deliverer, _metrics) = deliverer(settings());
        let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
        let agent_span = "00f067aa0ba902b7";
        let mut one = delivery(&hook.url("/"), "t", 1);
        one.traceparent = Some(format!("00-{trace_id}-{agent_span}-01"));
        deliverer.enqueue(one).unwrap();
        let seen = hook.next().await;
        let traceparent = seen.headers["traceparent"].to_str().unwrap();
        let parts: Vec<&str> = traceparent.split('-').collect();
        assert_eq!(parts.len(), 4, "{traceparent}");
        assert_eq!(parts[1], trace_id);
        assert_ne!(parts[2], agent_span);
        assert_eq!(parts[3], "01");
        // Without the agent's context the delivery starts a trace of its own.
        deliverer.enqueue(delivery(&hook.url("/"), "t", 2)).unwrap();
        let seen = hook.next().await;
        let traceparent = seen.headers["traceparent"].to_str().unwrap();
        assert!(!traceparent.contains(trace_id), "{traceparent}");
    });
}

/// Set in the child process `one_line_per_delivery_names_the_host_never_the_secrets` starts.
const LOG_CHILD: &str = "A2A_TEST_PUSH_LOG_CHILD";

/// What the process logs, kept.
#[derive(Clone, Default)]
struct Kept(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Kept {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn one_line_per_delivery_names_the_host_never_the_secrets() {
    if std::env::var_os(LOG_CHILD).is_none() {
        // The log is the process's: set it in a process of its own.
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "push::deliver::tests::one_line_per_delivery_names_the_host_never_the_secrets",
            ])
            .env(LOG_CHILD, "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(output.status.success(), "{stdout}");
        assert!(stdout.contains("1 passed"), "{stdout}");
        return;
    }
    let kept = Kept::default();
    let writer = kept.clone();
    tracing_subscriber::fmt()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let mut hook = Webhook::start(|_| ok()).await;
    let (deliverer, metrics) = deliverer(settings());
    let mut one = delivery(&hook.url("/hooks/secret-path?key=secret-query"), "t-7", 1);
    one.token = Some("secret-token".into());
    one.authentication = Some(("Bearer".into(), "secret-credentials".into()));
    deliverer.enqueue(one).unwrap();
    hook.next().await;
    // A token that cannot be a header value is not sent, and says so.
    let mut bad = delivery(&hook.url("/"), "t-8", 2);
    bad.token = Some("line\nbreak".into());
    deliverer.enqueue(bad).unwrap();
    reaches(&metrics, &outcome("delivered"), 1).await;
    reaches(&metrics, &outcome("invalid"), 1).await;
    hook.nothing_more();
    let log = String::from_utf8(kept.0.lock().unwrap().clone()).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("push delivery"))
        .collect();
    assert_eq!(lines.len(), 2, "{log}");
    for (line, task, outcome) in [(lines[0], "t-7", "delivered"), (lines[1], "t-8", "invalid")] {
        for part in [
            "route=hooks",
            "destination=127.0.0.1",
            &format!("task={task}"),
            &format!("outcome=\"{outcome}\""),
        ] {
            assert!(line.contains(part), "{part} not in {line}");
        }
    }
    assert!(
        lines[0].contains("status=200") && lines[0].contains("attempts=1"),
        "{}",
        lines[0]
    );
    assert!(!log.contains("secret"), "{log}");
}

#[test]
fn backoff_is_capped_and_retry_after_is_read_as_seconds() {
    let backoff = Backoff {
        base: Duration::from_millis(100),
        cap: Duration::from_secs(2),
    };
    assert_eq!(backoff.ceiling(1), Duration::from_millis(100));
    assert_eq!(backoff.ceiling(3), Duration::from_millis(400));
    assert_eq!(backoff.ceiling(40), Duration::from_secs(2));
    for attempt in 1..50 {
        assert!(backoff.wait(attempt) <= backoff.ceiling(attempt));
    }
    let mut headers = http::HeaderMap::new();
    headers.insert("retry-after", "7".parse().unwrap());
    assert_eq!(retry_after(&headers), Some(Duration::from_secs(7)));
    headers.insert(
        "retry-after",
        "Fri, 31 Dec 1999 23:59:59 GMT".parse().unwrap(),
    );
    assert_eq!(retry_after(&headers), None);
}

/// A reload's new deliverer takes over what the replaced one holds waiting, in order, and
/// knows what it accepted (a repeat is still a duplicate); what the replaced one is sending
/// stays with it and is delivered once.
#[tokio::test]
async fn a_reload_hands_the_waiting_deliveries_to_the_new_deliverer() {
    let permit = Arc::new(Semaphore::new(0));
    let held = permit.clone();
    let mut hook = Webhook::start(move |n| match n {
        0 => Reply::HoldUntil(held.clone()),
        _ => ok(),
    })
    .await;
    let (old, old_metrics) = deliverer(settings());
    let url = hook.url("/hook");
    for n in 0..6 {
        old.enqueue(delivery(&url, "t-1", n)).unwrap();
    }
    // The first is being sent (held by the webhook); five wait.
    assert_eq!(hook.next().await.body, delivery(&url, "t-1", 0).body);
    assert_eq!(series(&old_metrics, DEPTH), 5);

    let (new, new_metrics) = deliverer(settings());
    new.adopt(&old);
    assert_eq!(
        series(&old_metrics, DEPTH),
        0,
        "nothing waits in the replaced one"
    );
    let bodies: Vec<Bytes> = [
        hook.next().await,
        hook.next().await,
        hook.next().await,
        hook.next().await,
        hook.next().await,
    ]
    .into_iter()
    .map(|seen| seen.body)
    .collect();
    let expected: Vec<Bytes> = (1..6).map(|n| delivery(&url, "t-1", n).body).collect();
    assert_eq!(bodies, expected);
    reaches(&new_metrics, &outcome("delivered"), 5).await;
    // The replaced deliverer finishes what it was sending.
    permit.add_permits(1);
    old.shutdown(Duration::from_secs(10)).await;
    reaches(&old_metrics, &outcome("delivered"), 1).await;
    assert_eq!(series(&old_metrics, &dropped("shutdown")), 0);
    // An agent's repeat of an event the replaced deliverer accepted is a duplicate here.
    new.enqueue(delivery(&url, "t-1", 3)).unwrap();
    assert_eq!(series(&new_metrics, &dropped("duplicate")), 1);
    hook.nothing_more();
}

/// The notifications' bytes are bounded too (`--push-queue-bytes`): at the bound the
/// deliveries are held; one byte past, the oldest waiting is dropped (or the newest refused);
/// one notification larger than the whole bound is refused.
#[tokio::test]
async fn past_the_byte_bound_the_oldest_waiting_is_dropped_or_the_newest_refused() {
    for drop in [PushDrop::Oldest, PushDrop::Newest] {
        let release = Arc::new(Semaphore::new(0));
        let hold = release.clone();
        let mut hook = Webhook::start(move |n| match n {
            0 => Reply::HoldUntil(hold.clone()),
            _ => ok(),
        })
        .await;
        let size = delivery("", "t", 0).body.len();
        let mut settings = settings();
        settings.queue_bytes = 3 * size;
        settings.drop = drop;
        let (deliverer, metrics) = deliverer(settings);
        let url = hook.url("/");
        deliverer.enqueue(delivery(&url, "t", 0)).unwrap();
        let mut bodies = vec![hook.next().await.body];
        // One being sent and two waiting: three notifications' bytes, the bound.
        deliverer.enqueue(delivery(&url, "t", 1)).unwrap();
        deliverer.enqueue(delivery(&url, "t", 2)).unwrap();
        assert_eq!(series(&metrics, &dropped("queue_full")), 0, "{drop:?}");
        let past = deliverer.enqueue(delivery(&url, "t", 3));
        let mut huge = delivery(&url, "t", 4);
        huge.body = vec![b' '; 3 * size + 1].into();
        assert_eq!(deliverer.enqueue(huge), Err(Refused::Full), "{drop:?}");
        release.add_permits(1);
        for _ in 0..2 {
            bodies.push(hook.next().await.body);
        }
        reaches(&metrics, &outcome("delivered"), 3).await;
        hook.nothing_more();
        let body = |n| delivery("", "t", n).body;
        match drop {
            PushDrop::Oldest => {
                assert_eq!(past, Ok(()));
                assert_eq!(bodies, [body(0), body(2), body(3)]);
            }
            PushDrop::Newest => {
                assert_eq!(past, Err(Refused::Full));
                assert_eq!(bodies, [body(0), body(1), body(2)]);
            }
        }
        assert_eq!(series(&metrics, &dropped("queue_full")), 2, "{drop:?}");
    }
}

/// A reload loses no count and no delivery: the new table goes on from the replaced one's
/// counts, and the delivery the replaced deliverer is sending at the reload is sent to the
/// end (no grace cuts it) and counted in the new table.
#[tokio::test]
async fn a_reload_keeps_the_counts_and_finishes_the_delivery_being_sent() {
    let permit = Arc::new(Semaphore::new(0));
    let held = permit.clone();
    let mut hook = Webhook::start(move |n| match n {
        1 => Reply::HoldUntil(held.clone()),
        _ => ok(),
    })
    .await;
    let (old, old_metrics) = deliverer(settings());
    let url = hook.url("/hook");
    old.enqueue(delivery(&url, "t-1", 0)).unwrap();
    hook.next().await;
    reaches(&old_metrics, &outcome("delivered"), 1).await;
    // The second is being sent (held by the webhook) at the reload; the third waits.
    old.enqueue(delivery(&url, "t-1", 1)).unwrap();
    old.enqueue(delivery(&url, "t-1", 2)).unwrap();
    assert_eq!(hook.next().await.body, delivery(&url, "t-1", 1).body);

    let new_metrics = DeliveryMetrics::carrying([ROUTE], &old_metrics);
    let new = deliverer_counting(settings(), &new_metrics);
    assert_eq!(
        series(&new_metrics, &outcome("delivered")),
        1,
        "the count goes on"
    );
    new.adopt(&old);
    let old = Arc::new(old);
    let retiring = tokio::spawn({
        let old = old.clone();
        async move { old.retire().await }
    });
    assert_eq!(hook.next().await.body, delivery(&url, "t-1", 2).body);
    reaches(&new_metrics, &outcome("delivered"), 2).await;
    permit.add_permits(1);
    retiring.await.unwrap();
    assert_eq!(series(&new_metrics, &outcome("delivered")), 3);
    assert_eq!(series(&new_metrics, &dropped("shutdown")), 0);
    assert_eq!(series(&new_metrics, DEPTH), 0);
    // A post that reaches the replaced deliverer after the reload (the callback began it
    // before) goes to the new one, and is sent and counted there.
    old.enqueue(delivery(&url, "t-1", 9)).unwrap();
    assert_eq!(hook.next().await.body, delivery(&url, "t-1", 9).body);
    reaches(&new_metrics, &outcome("delivered"), 4).await;
    assert_eq!(series(&new_metrics, &dropped("shutdown")), 0);
    // Once the new one stops too, nothing takes it.
    new.shutdown(Duration::from_millis(100)).await;
    assert_eq!(
        old.enqueue(delivery(&url, "t-1", 10)),
        Err(Refused::Closed),
        "a stopped gateway takes no more"
    );
    hook.nothing_more();
}

/// A shutdown while a replaced deliverer still sends gives it the same grace, then drops
/// what it holds and counts it where the routes' counts are.
#[tokio::test]
async fn a_shutdown_gives_a_replaced_deliverer_its_grace_and_counts_its_drop() {
    let mut hook = Webhook::start(|_| Reply::Never).await;
    let (old, old_metrics) = deliverer(settings());
    old.enqueue(delivery(&hook.url("/"), "t", 0)).unwrap();
    hook.next().await;
    let new_metrics = DeliveryMetrics::carrying([ROUTE], &old_metrics);
    let new = deliverer_counting(settings(), &new_metrics);
    new.adopt(&old);
    let old = Arc::new(old);
    let retiring = tokio::spawn({
        let old = old.clone();
        async move { old.retire().await }
    });
    new.shutdown(Duration::from_millis(100)).await;
    retiring.await.unwrap();
    assert_eq!(series(&new_metrics, &dropped("shutdown")), 1);
    assert_eq!(series(&new_metrics, &outcome("delivered")), 0);
}

/// Reloads while a webhook holds every delivery: four replaced deliverers go on sending,
/// and the next reload drops what the oldest sends (counted as `replaced`), so reloads in
/// quick succession cannot pile up threads.
#[tokio::test]
async fn at_most_four_replaced_deliverers_go_on_sending() {
    let mut hook = Webhook::start(|_| Reply::Never).await;
    let url = hook.url("/");
    let (first, metrics) = deliverer(settings());
    let mut running = Arc::new(first);
    let mut replaced = Vec::new();
    for reload in 0..=MAX_REPLACED_SENDING {
        running
            .enqueue(delivery(&url, &format!("t-{reload}"), 0))
            .unwrap();
        hook.next().await;
        let next = Arc::new(deliverer_counting(
            settings(),
            &DeliveryMetrics::carrying([ROUTE], &metrics),
        ));
        next.adopt(&running);
        let old = std::mem::replace(&mut running, next);
        replaced.push(tokio::spawn(async move { old.retire().await }));
        let expected = u64::from(reload == MAX_REPLACED_SENDING);
        assert_eq!(
            series(&metrics, &dropped("replaced")),
            expected,
            "reload {reload}"
        );
    }
    // The oldest's retire ended with its drop; the other four still send.
    replaced.remove(0).await.unwrap();
    assert!(replaced.iter().all(|r| !r.is_finished()));
    running.shutdown(Duration::from_millis(100)).await;
    for retiring in replaced {
        retiring.await.unwrap();
    }
    assert_eq!(series(&metrics, &dropped("shutdown")), 4);
}
