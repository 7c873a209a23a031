//! The terminal client's side of HTTP: one `reqwest` client that talks to a runledger server's
//! public API (`/api/v1/...`) with a bearer key, reads answers with a size bound, and turns every
//! way a request can fail into an `Error` that says what went wrong in one line and chooses the
//! process's exit code. It knows URLs, status codes and problem+json; it knows nothing of what
//! the commands print (`runs`) or where the server and key come from (`profile`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::Value;

/// The largest JSON answer read: a page of 500 runs with long prompts is a few MiB; more than
/// this is not an answer of runledger's, and reading it whole would be a memory sink.
pub const MAX_ANSWER_BYTES: usize = 16 * 1024 * 1024;

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a JSON request may take altogether.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a stream may stay silent: the server sends a keep-alive comment every 15 s, so a
/// minute of silence means the connection is gone and the follower reconnects.
const STREAM_READ_TIMEOUT: Duration = Duration::from_secs(60);

/// Exit codes of the commands that talk to a server (`sysexits.h` values), chosen so that none
/// can be mistaken for a run's outcome (0 `SUCCEEDED`, 1 `FAILED`, 2 `CANCELLED`).
pub mod exit {
    /// The command line is wrong (EX_USAGE).
    pub const USAGE: u8 = 64;
    /// The server refused the request as it stands: a bad value, an unknown run, a conflict
    /// (EX_DATAERR).
    pub const REFUSED: u8 = 65;
    /// The server cannot be reached, or answered that it cannot serve now: 429, 5xx
    /// (EX_UNAVAILABLE).
    pub const UNAVAILABLE: u8 = 69;
    /// Anything else: a local error such as a failed write to stdout (EX_SOFTWARE).
    pub const SOFTWARE: u8 = 70;
    /// The server's answer is not one runledger gives: not JSON, too large, a broken stream
    /// (EX_PROTOCOL).
    pub const PROTOCOL: u8 = 76;
    /// The key was refused: 401 or 403 (EX_NOPERM).
    pub const NO_PERMISSION: u8 = 77;
    /// No server or key to use, or an unreadable profile or CA certificate (EX_CONFIG).
    pub const CONFIG: u8 = 78;
}

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// What the command needs is not configured, or its configuration cannot be read.
    #[error("{0}")]
    Config(String),
    /// No answer: the connection failed, timed out or broke.
    #[error("cannot reach {url}: {reason}")]
    Unreachable { url: String, reason: String },
    /// The server answered with an error status; `detail` is its problem detail.
    #[error("the server answered {status}: {detail}")]
    Refused { status: u16, detail: String },
    /// The answer is not what runledger sends.
    #[error("{0}")]
    Protocol(String),
}

impl Error {
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Config(_) => exit::CONFIG,
            Error::Unreachable { .. } => exit::UNAVAILABLE,
            Error::Refused { status, .. } => match status {
                401 | 403 => exit::NO_PERMISSION,
                429 | 500.. => exit::UNAVAILABLE,
                _ => exit::REFUSED,
            },
            Error::Protocol(_) => exit::PROTOCOL,
        }
    }

    /// Whether trying again later may help: the server was not reached or could not serve.
    pub fn is_transient(&self) -> bool {
        self.exit_code() == exit::UNAVAILABLE
    }
}

/// Where the commands send their requests, and with which key.
#[derive(Debug, Clone)]
pub struct Target {
    /// The server's base URL, as `https://runs.example.com` (no `/api/v1`).
    pub server: String,
    pub key: String,
    /// A PEM file of certificates to trust besides the public CAs (a self-signed server).
    pub ca_cert: Option<PathBuf>,
}

/// A transcript request's answer: server-sent events, or (from a server without the transcript
/// stream) one JSON page.
pub enum Transcript {
    Events(reqwest::Response),
    Page(Value),
}

/// The header that names the `runledger` command line as a request's client (the server's
/// `http::CLIENT_HEADER`; the CLI does not depend on the server's crates).
pub const CLIENT_HEADER: &str = "x-runledger-client";

pub struct Remote {
    client: reqwest::Client,
    base: String,
    key: String,
}

impl Remote {
    pub fn new(target: &Target) -> Result<Remote, Error> {
        let url = url::Url::parse(&target.server).map_err(|e| {
            Error::Config(format!(
                "{:?} is not a server URL ({e}); give one like https://runs.example.com",
                target.server
            ))
        })?;
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
            return Err(Error::Config(format!(
                "{:?} is not a server URL; it must start with http:// or https://",
                target.server
            )));
        }
        // The server records the channel of what a request causes; this header claims `cli`
        // (a claim, as any client could send it: the record keeps it apart from `api`, and
        // trusts nothing on it).
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert(
            CLIENT_HEADER,
            reqwest::header::HeaderValue::from_static("cli"),
        );
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("runledger-cli/", env!("CARGO_PKG_VERSION")))
            .default_headers(headers)
            .connect_timeout(CONNECT_TIMEOUT)
            .read_timeout(STREAM_READ_TIMEOUT);
        if let Some(path) = &target.ca_cert {
            for cert in load_certificates(path)? {
                builder = builder.add_root_certificate(cert);
            }
        }
        let client = builder
            .build()
            .map_err(|e| Error::Config(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Remote {
            client,
            base: target.server.trim_end_matches('/').to_string(),
            key: target.key.clone(),
        })
    }

    /// The absolute URL of `path` (which starts with `/`), with `query` encoded onto it.
    pub fn url(&self, path: &str, query: &[(&str, String)]) -> String {
        let mut url = format!("{}{path}", self.base);
        if !query.is_empty() {
            url.push('?');
            url.push_str(
                &form_urlencoded::Serializer::new(String::new())
                    .extend_pairs(query.iter().map(|(k, v)| (*k, v.as_str())))
                    .finish(),
            );
        }
        url
    }

    pub async fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, Error> {
        let url = self.url(path, query);
        let request = self.client.get(&url);
        self.send(&url, request).await
    }

    /// GETs `path` for its bytes as they are (a patch), refused answers read as errors;
    /// the caller reads the body, a chunk at a time.
    pub async fn get_bytes(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> Result<reqwest::Response, Error> {
        let url = self.url(path, query);
        let response = self
            .client
            .get(&url)
            .bearer_auth(&self.key)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .map_err(|e| unreachable(&url, &e))?;
        let status = response.status();
        if !status.is_success() {
            let body = read_bounded(&url, response).await?;
            return Err(refusal(status.as_u16(), &body));
        }
        Ok(response)
    }

    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, Error> {
        let url = self.url(path, &[]);
        let request = self
            .client
            .post(&url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body.to_string());
        self.send(&url, request).await
    }

    async fn send(&self, url: &str, request: reqwest::RequestBuilder) -> Result<Value, Error> {
        let response = request
            .bearer_auth(&self.key)
            .timeout(REQUEST_TIMEOUT)
            .send()
            .await
            .map_err(|e| unreachable(url, &e))?;
        let status = response.status();
        let body = read_bounded(url, response).await?;
        if !status.is_success() {
            return Err(refusal(status.as_u16(), &body));
        }
        serde_json::from_slice(&body).map_err(|_| {
            Error::Protocol(format!(
                "the answer of {url} is not JSON (it starts {:?}); is this a runledger server?",
                preview(&body)
            ))
        })
    }

    /// GETs `url` asking for server-sent events, resuming after `last_event_id` if given.
    async fn ask_for_events(
        &self,
        url: &str,
        last_event_id: Option<&str>,
    ) -> Result<reqwest::Response, Error> {
        let mut request = self
            .client
            .get(url)
            .bearer_auth(&self.key)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        request.send().await.map_err(|e| unreachable(url, &e))
    }

    /// Opens `path` as server-sent events (`Accept: text/event-stream`), resuming after
    /// `last_event_id` if given. An answer that is not a stream is an error.
    pub async fn event_stream(
        &self,
        path: &str,
        query: &[(&str, String)],
        last_event_id: Option<&str>,
    ) -> Result<reqwest::Response, Error> {
        let url = self.url(path, query);
        let response = self.ask_for_events(&url, last_event_id).await?;
        let status = response.status();
        let stream = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"));
        if status.is_success() && stream {
            return Ok(response);
        }
        let body = read_bounded(&url, response).await?;
        if !status.is_success() {
            return Err(refusal(status.as_u16(), &body));
        }
        Err(Error::Protocol(format!(
            "the answer of {url} is not an event stream (it starts {:?})",
            preview(&body)
        )))
    }

    /// Opens a run's transcript as server-sent events, from the entry after `last_event_id`, or
    /// from byte `offset` without one.
    pub async fn transcript(
        &self,
        run_id: &str,
        offset: u64,
        last_event_id: Option<&str>,
    ) -> Result<Transcript, Error> {
        let url = self.url(
            &format!("/api/v1/agent/runs/{run_id}/transcript"),
            &[("offset", offset.to_string())],
        );
        let response = self.ask_for_events(&url, last_event_id).await?;
        let status = response.status();
        let media = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if status.is_success() && media.starts_with("text/event-stream") {
            return Ok(Transcript::Events(response));
        }
        let body = read_bounded(&url, response).await?;
        if !status.is_success() {
            return Err(refusal(status.as_u16(), &body));
        }
        serde_json::from_slice(&body)
            .map(Transcript::Page)
            .map_err(|_| {
                Error::Protocol(format!(
                    "the answer of {url} is neither an event stream nor JSON (it starts {:?})",
                    preview(&body)
                ))
            })
    }
}

/// The certificates of a PEM file (one or a bundle).
fn load_certificates(path: &Path) -> Result<Vec<reqwest::Certificate>, Error> {
    let pem = std::fs::read(path).map_err(|e| {
        Error::Config(format!(
            "cannot read the CA certificate {}: {e}",
            path.display()
        ))
    })?;
    let certs = reqwest::Certificate::from_pem_bundle(&pem)
        .map_err(|e| Error::Config(format!("{} holds no PEM certificate: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(Error::Config(format!(
            "{} holds no PEM certificate",
            path.display()
        )));
    }
    Ok(certs)
}

/// Reads a body up to `MAX_ANSWER_BYTES`, failing beyond it without reading the rest.
async fn read_bounded(url: &str, response: reqwest::Response) -> Result<Vec<u8>, Error> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
    {
        return Err(too_large(url));
    }
    let mut body = Vec::new();
    let mut chunks = response.bytes_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|e| unreachable(url, &e))?;
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(too_large(url));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn too_large(url: &str) -> Error {
    Error::Protocol(format!(
        "the answer of {url} is larger than {} MiB; is this a runledger server?",
        MAX_ANSWER_BYTES / (1024 * 1024)
    ))
}

/// A failed answer in one line: the problem's `detail` (else its `title`, else the body's
/// first characters).
fn refusal(status: u16, body: &[u8]) -> Error {
    let problem: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let text = |field: &str| {
        problem[field]
            .as_str()
            .filter(|s| !s.trim().is_empty())
            .map(str::to_string)
    };
    let detail = match (text("title"), text("detail")) {
        (Some(title), Some(detail)) => format!("{title}: {detail}"),
        (None, Some(detail)) => detail,
        (Some(title), None) => title,
        (None, None) => {
            let start = preview(body);
            if start.is_empty() {
                "no detail".to_string()
            } else {
                format!("{start:?}")
            }
        }
    };
    Error::Refused {
        status,
        detail: one_line(&detail),
    }
}

/// The first 80 characters of a body, for an error message.
fn preview(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(320)]);
    one_line(&text.chars().take(80).collect::<String>())
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A transport error in one line: reqwest's own message is "error sending request for url
/// (…)"; its innermost cause says why (refused, timed out, certificate unknown).
pub fn unreachable(url: &str, error: &reqwest::Error) -> Error {
    let mut cause: &dyn std::error::Error = error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let reason = if error.is_timeout() {
        "timed out".to_string()
    } else {
        cause.to_string()
    };
    Error::Unreachable {
        url: url.to_string(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_problem_answer_becomes_one_line_with_its_title_and_detail() {
        let body = br#"{"type":"x","title":"Not found","status":404,"detail":"no run\n01M"}"#;
        let e = refusal(404, body);
        assert_eq!(
            e.to_string(),
            "the server answered 404: Not found: no run 01M"
        );
        assert_eq!(e.exit_code(), exit::REFUSED);
        let html = refusal(502, b"<html>\n<body>Bad gateway</body></html>");
        assert_eq!(
            html.to_string(),
            "the server answered 502: \"<html> <body>Bad gateway</body></html>\""
        );
        assert_eq!(html.exit_code(), exit::UNAVAILABLE);
        assert_eq!(refusal(401, b"").exit_code(), exit::NO_PERMISSION);
        assert_eq!(
            refusal(403, b"").to_string(),
            "the server answered 403: no detail"
        );
        assert_eq!(
            refusal(409, b"{}").to_string(),
            "the server answered 409: \"{}\""
        );
    }

    #[test]
    fn queries_are_encoded() {
        let remote = Remote::new(&Target {
            server: "http://127.0.0.1:1/".into(),
            key: "k".into(),
            ca_cert: None,
        })
        .expect("remote");
        assert_eq!(
            remote.url("/p", &[("q", "a b&c".into()), ("state", "X".into())]),
            "http://127.0.0.1:1/p?q=a+b%26c&state=X"
        );
    }

    #[test]
    fn a_server_that_is_no_url_is_a_configuration_error() {
        for server in ["localhost:8080", "ftp://x", "not a url"] {
            let e = Remote::new(&Target {
                server: server.into(),
                key: "k".into(),
                ca_cert: None,
            })
            .err()
            .expect("refused");
            assert_eq!(e.exit_code(), exit::CONFIG, "{server}: {e}");
        }
    }
}
