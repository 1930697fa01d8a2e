//! Small wire-level clients of the gateway: JSON-RPC bodies POSTed over real sockets, and
//! SSE bodies read frame by frame as they arrive.

use serde_json::Value;

pub fn client() -> reqwest::Client {
    reqwest::Client::builder().build().unwrap()
}

/// The `/metrics` text of the gateway at `origin`.
pub async fn metrics_text(origin: &str) -> String {
    let response = client().get(format!("{origin}/metrics")).send().await;
    response.unwrap().text().await.unwrap()
}

/// The hex SHA-256 of an API key, as a key file (`[auth.api-keys]`) holds it.
pub fn key_digest_hex(key: &[u8]) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, key);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// POSTs raw bytes with `A2A-Version: 1.0`; returns status, headers and body text.
pub async fn post(
    url: &str,
    body: impl Into<reqwest::Body>,
) -> (u16, reqwest::header::HeaderMap, String) {
    post_with(url, body, &[("a2a-version", "1.0")]).await
}

pub async fn post_with(
    url: &str,
    body: impl Into<reqwest::Body>,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, String) {
    let mut request = client()
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.text().await.unwrap())
}

/// POSTs and parses a JSON reply, asserting HTTP 200 and `application/json`.
pub async fn rpc(url: &str, body: &str) -> Value {
    let (status, headers, text) = post(url, body.to_owned()).await;
    assert_eq!(status, 200, "{text}");
    assert_eq!(headers["content-type"], "application/json", "{text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// A JSON-RPC request body.
pub fn request(id: Value, method: &str, params: Value) -> String {
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
}

/// A minimal valid SendMessageRequest as JSON params.
pub fn message_params(text: &str) -> Value {
    serde_json::json!({"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}})
}

/// Reads an SSE body into frames (text between blank lines), as they arrive.
pub struct SseReader {
    response: reqwest::Response,
    buffer: String,
}

impl SseReader {
    pub async fn open(url: &str, body: String) -> (reqwest::header::HeaderMap, SseReader) {
        SseReader::open_with(&client(), url, body).await
    }

    /// As `open`, over `client` (one with its own TLS settings).
    pub async fn open_with(
        client: &reqwest::Client,
        url: &str,
        body: String,
    ) -> (reqwest::header::HeaderMap, SseReader) {
        let response = client
            .post(url)
            .header("content-type", "application/json")
            .header("a2a-version", "1.0")
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        (response.headers().clone(), SseReader::new(response))
    }

    /// Reads the body of `response`, an event stream.
    pub fn new(response: reqwest::Response) -> SseReader {
        SseReader {
            response,
            buffer: String::new(),
        }
    }

    /// The next frame, or `None` at the end of the stream.
    pub async fn frame(&mut self) -> Option<String> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame = self.buffer[..end].to_owned();
                self.buffer.drain(..end + 2);
                return Some(frame);
            }
            match self.response.chunk().await.unwrap() {
                Some(chunk) => self.buffer.push_str(std::str::from_utf8(&chunk).unwrap()),
                None => {
                    assert!(self.buffer.is_empty(), "trailing bytes: {:?}", self.buffer);
                    return None;
                }
            }
        }
    }

    /// The JSON of the next `data:` frame (skipping keepalive comments).
    pub async fn data(&mut self) -> Option<Value> {
        loop {
            let frame = self.frame().await?;
            if frame.starts_with(':') {
                continue;
            }
            let data = frame
                .lines()
                .find_map(|l| l.strip_prefix("data: "))
                .unwrap_or_else(|| panic!("no data line in {frame:?}"));
            return Some(serde_json::from_str(data).unwrap());
        }
    }
}
