//! JSON-RPC calls and SSE streams for the case runners (hostile backends, failing agents):
//! every wait is bounded and every failure is a value, so a case reports what went wrong
//! instead of hanging or panicking. Each call is a new connection (`fresh_client`), which
//! the gateway's acceptor deals to its next worker.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A hard bound on any one call, so a hang never blocks the suite.
pub const HARD_LIMIT: Duration = Duration::from_secs(15);

/// A client with no connection reuse: each call is a new connection, which the gateway's
/// acceptor deals to the next worker (round-robin).
pub fn fresh_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

/// `GET /healthz` at `origin`; the latency, or `None` without an answer within `limit`.
pub async fn healthz(origin: &str, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    let get = fresh_client().get(format!("{origin}/healthz")).send();
    match tokio::time::timeout(limit, get).await {
        Ok(Ok(r)) if r.status() == 200 => Some(started.elapsed()),
        _ => None,
    }
}

/// What a JSON-RPC call got, and when.
pub struct Answered {
    pub elapsed: Duration,
    pub reply: Result<Value, String>,
}

impl Answered {
    /// Whether the reply is a `result`.
    pub fn is_result(&self) -> bool {
        self.reply.as_ref().is_ok_and(|r| r.get("result").is_some())
    }

    /// The reply's `summary`, or why there was none.
    pub fn shown(&self) -> String {
        match &self.reply {
            Ok(reply) => summary(reply),
            Err(e) => e.clone(),
        }
    }
}

/// `-32603 BACKEND_X "message"`, or `result`, for people.
pub fn summary(reply: &Value) -> String {
    let error = &reply["error"];
    if error.is_null() {
        return match reply.get("result") {
            Some(_) => "result".into(),
            None => reply.to_string(),
        };
    }
    let reason = error["data"][0]["reason"].as_str().unwrap_or("-");
    let mut message = error["message"].as_str().unwrap_or("").to_owned();
    message.truncate(100);
    format!("{} {reason} {message:?}", error["code"])
}

/// Starts a `method` call with `A2A-Version: 1.0` whose message text is `text`, given up
/// after `limit`; the response head.
async fn open(
    url: &str,
    method: &str,
    text: &str,
    limit: Duration,
) -> Result<reqwest::Response, String> {
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": text}]}},
    });
    let send = fresh_client()
        .post(url)
        .header("content-type", "application/json")
        .header("a2a-version", "1.0")
        .body(body.to_string())
        .send();
    match tokio::time::timeout(limit, send).await {
        Err(_) => Err(format!("no answer within {limit:?}")),
        Ok(Err(e)) => Err(format!("HTTP error: {e}")),
        Ok(Ok(r)) if r.status() != 200 => Err(format!("HTTP status {}", r.status())),
        Ok(Ok(r)) => Ok(r),
    }
}

async fn json_body(response: reqwest::Response, limit: Duration) -> Result<Value, String> {
    let body = tokio::time::timeout(limit, response.bytes())
        .await
        .map_err(|_| format!("body not complete within {limit:?}"))?
        .map_err(|e| format!("body error: {e}"))?;
    serde_json::from_slice(&body)
        .map_err(|e| format!("not JSON ({e}): {:?}", String::from_utf8_lossy(&body)))
}

/// One `SendMessage` whose message text is `text`.
pub async fn unary(url: &str, text: &str) -> Answered {
    unary_within(url, text, HARD_LIMIT).await
}

/// `unary`, given up after `limit`.
pub async fn unary_within(url: &str, text: &str, limit: Duration) -> Answered {
    let started = Instant::now();
    let reply = match open(url, "SendMessage", text, limit).await {
        Ok(response) => json_body(response, limit).await,
        Err(e) => Err(e),
    };
    Answered {
        elapsed: started.elapsed(),
        reply,
    }
}

/// The first answer of a streaming call: a JSON reply (an error before the first event),
/// or the event stream.
pub enum Streamed {
    Json(Value),
    Events(Sse),
}

/// One `SendStreamingMessage` whose message text is `text`.
pub async fn stream(url: &str, text: &str) -> Result<Streamed, String> {
    let response = open(url, "SendStreamingMessage", text, HARD_LIMIT).await?;
    let is_sse = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    if is_sse {
        Ok(Streamed::Events(Sse {
            response,
            buffer: Vec::new(),
        }))
    } else {
        json_body(response, HARD_LIMIT).await.map(Streamed::Json)
    }
}

/// An SSE body read frame by frame (the text between blank lines).
pub struct Sse {
    response: reqwest::Response,
    buffer: Vec<u8>,
}

/// Why no frame came.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum SseError {
    #[error("no frame within {0:?}")]
    Timeout(Duration),
    #[error("body error: {0}")]
    Body(String),
    #[error("trailing bytes {0:?}")]
    Trailing(String),
}

impl Sse {
    /// The next frame; `Ok(None)` at the end, `Err` on a broken body, bytes after the last
    /// frame, or nothing within `limit`.
    pub async fn frame(&mut self, limit: Duration) -> Result<Option<String>, SseError> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(end) = self.buffer.windows(2).position(|w| w == b"\n\n") {
                let frame = String::from_utf8_lossy(&self.buffer[..end]).into_owned();
                self.buffer.drain(..end + 2);
                return Ok(Some(frame));
            }
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Err(_) => return Err(SseError::Timeout(limit)),
                Ok(Err(e)) => return Err(SseError::Body(e.to_string())),
                Ok(Ok(None)) if self.buffer.is_empty() => return Ok(None),
                Ok(Ok(None)) => {
                    let rest = String::from_utf8_lossy(&self.buffer).into_owned();
                    return Err(SseError::Trailing(rest));
                }
                Ok(Ok(Some(chunk))) => self.buffer.extend_from_slice(&chunk),
            }
        }
    }

    /// The JSON of the next data frame, skipping keepalive comments.
    pub async fn data(&mut self, limit: Duration) -> Result<Option<Value>, SseError> {
        loop {
            match self.frame(limit).await? {
                Some(frame) if frame.starts_with(':') => {}
                Some(frame) => return Ok(frame_data(&frame)),
                None => return Ok(None),
            }
        }
    }
}

/// The JSON of a frame's `data:` line.
pub fn frame_data(frame: &str) -> Option<Value> {
    let data = frame.lines().find_map(|l| l.strip_prefix("data: "))?;
    serde_json::from_str(data).ok()
}
