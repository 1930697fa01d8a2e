//! `[auth.forward]` at the wire (issue 22 item 4): the headers that tell the agent who calls
//! are the gateway's alone. A client's copy never reaches the agent, on either binding,
//! whether the call is authenticated or not, even when `forward-header` names it;
//! `authorization = false` keeps the client's `Authorization` from the agent; a name that
//! cannot carry an identity fails the load, naming the route and key. With API keys, the
//! agent learns the key's name, and an anonymous caller is named nowhere.

use crate::harness;

use a2a_gateway::proto::AgentCard;
use a2a_gateway::protocol::ops::Reply;
use harness::process::TempFile;
use harness::rest_mock::{ok_json, MockAgent};
use harness::*;

const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"GetExtendedAgentCard"}"#;

/// What the client forges: the identity headers, and a credential.
const FORGED: [(&str, &str); 4] = [
    ("a2a-version", "1.0"),
    ("x-principal", "admin"),
    ("x-scope", "a2a:admin"),
    ("authorization", "Bearer s3cret"),
];

/// A route to `backend` whose `[auth.forward]` names the identity headers; `forward-header`
/// names them too (a client's copy must still not pass).
fn config(backend: &str, binding: &str, authorization: bool) -> TempFile {
    TempFile::new(
        "toml",
        &format!(
            r#"
            backend = "{backend}"
            binding = "{binding}"
            forward-header = ["x-principal", "x-scope", "x-other"]

            [auth]
            anonymous = true
            [auth.forward]
            principal-header = "X-Principal"
            claims = {{ "x-scope" = "scope" }}
            authorization = {authorization}
            "#
        ),
    )
}

#[tokio::test]
async fn a_clients_copy_never_reaches_a_grpc_agent() {
    let backend =
        TestBackend::new(|_| Answer::Reply(Reply::GetExtendedAgentCard(AgentCard::default())));
    let url = format!("http://{}", backend.spawn().await);
    for authorization in [true, false] {
        let file = config(&url, "GRPC", authorization);
        let gateway = gateway_from_flags(&["--config", file.path()]).await;
        let mut headers = FORGED.to_vec();
        headers.push(("x-other", "kept"));
        let (status, _, text) = post_with(&gateway, CALL, &headers).await;
        assert_eq!(status, 200, "{text}");
        let md = backend.last().metadata;
        let get = |k: &str| md.get(k).map(|v| v.to_str().unwrap().to_owned());
        assert_eq!(get("x-principal"), None);
        assert_eq!(get("x-scope"), None);
        assert_eq!(get("x-other").as_deref(), Some("kept"));
        let credential = authorization.then_some("Bearer s3cret");
        assert_eq!(get("authorization").as_deref(), credential);
    }
}

#[tokio::test]
async fn a_clients_copy_never_reaches_an_http_json_agent() {
    let agent = MockAgent::start(|_| ok_json(r#"{"name":"Mock agent"}"#)).await;
    for authorization in [true, false] {
        agent.clear();
        let file = config(&agent.url, "HTTP+JSON", authorization);
        let gateway = gateway_from_flags(&["--config", file.path()]).await;
        let (status, _, text) = post_with(&gateway, CALL, &FORGED).await;
        assert_eq!(status, 200, "{text}");
        let seen = agent.single();
        assert_eq!(seen.header("x-principal"), None);
        assert_eq!(seen.header("x-scope"), None);
        let credential = authorization.then_some("Bearer s3cret");
        assert_eq!(seen.header("authorization"), credential);
    }
}

#[test]
fn names_that_cannot_carry_an_identity_fail_the_load() {
    for (table, key) in [
        (
            r#"principal-header = "authorization""#,
            "auth.forward.principal-header",
        ),
        (
            r#"principal-header = "connection""#,
            "auth.forward.principal-header",
        ),
        (
            r#"principal-header = "x who""#,
            "auth.forward.principal-header",
        ),
        (
            r#"claims = { ":path" = "sub" }"#,
            "auth.forward.claims.:path",
        ),
        (
            r#"claims = { "traceparent" = "sub" }"#,
            "auth.forward.claims.traceparent",
        ),
        (
            r#"claims = { "x-groups-bin" = "groups" }"#,
            "auth.forward.claims.x-groups-bin",
        ),
    ] {
        let file = TempFile::new(
            "toml",
            &format!(
                "[[route]]\nname = \"billing\"\npath = \"/billing\"\n\
                 backend = \"http://127.0.0.1:9\"\n[route.auth]\nanonymous = true\n\
                 [route.auth.forward]\n{table}\n"
            ),
        );
        let args = ["a2a-gateway", "--config", file.path()];
        let error = a2a_gateway::settings::Settings::load(args)
            .err()
            .unwrap_or_else(|| panic!("{table} loaded"))
            .to_string();
        assert!(
            error.contains("billing") && error.contains(key),
            "{table}: {error}"
        );
    }
    // Another setting naming an identity header contradicts it.
    let file = TempFile::new(
        "toml",
        "backend = \"http://127.0.0.1:9\"\nset-header = [\"x-principal=fixed\"]\n\
         [auth]\nanonymous = true\n[auth.forward]\nprincipal-header = \"x-principal\"\n",
    );
    let error = a2a_gateway::settings::Settings::load(["a2a-gateway", "--config", file.path()])
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("--set-header") && error.contains("x-principal"),
        "{error}"
    );
}

/// A route to `backend` taking API keys (`alice`) and anonymous callers, telling the agent
/// who calls in `x-principal`.
fn keyed(backend: &str, binding: &str, keys: &TempFile) -> TempFile {
    TempFile::new(
        "toml",
        &format!(
            r#"
            backend = "{backend}"
            binding = "{binding}"
            forward-header = ["x-principal"]

            [auth]
            anonymous = true
            [auth.api-keys]
            file = "{}"
            [auth.forward]
            principal-header = "x-principal"
            claims = {{ "x-scope" = "scope" }}
            "#,
            keys.path()
        ),
    )
}

#[tokio::test]
async fn the_agent_learns_the_key_holders_name_and_nothing_the_client_forged() {
    let keys = TempFile::new("keys", &format!("alice {}\n", key_digest_hex(b"alice-key")));
    let backend =
        TestBackend::new(|_| Answer::Reply(Reply::GetExtendedAgentCard(AgentCard::default())));
    let url = format!("http://{}", backend.spawn().await);
    let file = keyed(&url, "GRPC", &keys);
    let gateway = gateway_from_flags(&["--config", file.path()]).await;
    let forged = [
        ("a2a-version", "1.0"),
        ("x-principal", "admin"),
        ("x-scope", "a2a:admin"),
    ];
    let mut with_key = forged.to_vec();
    with_key.push(("x-api-key", "alice-key"));
    let (status, _, text) = post_with(&gateway, CALL, &with_key).await;
    assert_eq!(status, 200, "{text}");
    let md = backend.last().metadata;
    let values: Vec<_> = md.get_all("x-principal").iter().collect();
    assert_eq!(values, ["alice"], "only the gateway's value");
    assert!(md.get("x-scope").is_none(), "an API key has no claims");
    assert!(md.get("x-api-key").is_none(), "the key is consumed");
    // Anonymous: the forged name goes nowhere, and no name is made up.
    let (status, _, text) = post_with(&gateway, CALL, &forged).await;
    assert_eq!(status, 200, "{text}");
    let md = backend.last().metadata;
    assert!(md.get("x-principal").is_none());
    assert!(md.get("x-scope").is_none());

    // HTTP+JSON: the same header.
    let agent = MockAgent::start(|_| ok_json(r#"{"name":"Mock agent"}"#)).await;
    let file = keyed(&agent.url, "HTTP+JSON", &keys);
    let gateway = gateway_from_flags(&["--config", file.path()]).await;
    let (status, _, text) = post_with(&gateway, CALL, &with_key).await;
    assert_eq!(status, 200, "{text}");
    let seen = agent.single();
    let values: Vec<_> = seen.headers.get_all("x-principal").iter().collect();
    assert_eq!(values, ["alice"]);
    assert_eq!(seen.header("x-scope"), None);
}
