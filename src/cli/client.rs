//! A minimal blocking HTTP/1.1 client for the admin API of a server on this machine (the
//! command line's only network use), so the CLI needs no async runtime. Over `https://` it
//! trusts exactly the certificate chain of the config it was given (`tls::connect`): the CLI
//! talks to its own server, whose certificate is often self-signed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context as _};

pub fn request(
    method: &str,
    url: &str,
    key: &str,
    body: Option<&serde_json::Value>,
    trusted_chain: Option<&Path>,
) -> anyhow::Result<serde_json::Value> {
    let (tls, rest) = match (url.strip_prefix("http://"), url.strip_prefix("https://")) {
        (Some(rest), _) => (false, rest),
        (_, Some(rest)) => (true, rest),
        _ => bail!("{url}: the admin API URL must start with http:// or https://"),
    };
    let (host, path) = rest
        .split_once('/')
        .map(|(h, p)| (h, format!("/{p}")))
        .unwrap_or((rest, "/".into()));
    let stream = TcpStream::connect(host).with_context(|| format!("cannot connect to {host}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    if !tls {
        return exchange(stream, method, host, &path, key, body);
    }
    let chain = trusted_chain.context(
        "the server speaks https; give the command the server's config (--config), whose \
         server.tls_cert it then trusts",
    )?;
    // The name the certificate must carry: the URL's host without its port.
    let name = host
        .rsplit_once(':')
        .map_or(host, |(name, _)| name)
        .trim_start_matches('[')
        .trim_end_matches(']');
    let stream = crate::tls::connect(chain, name, stream)?;
    exchange(stream, method, host, &path, key, body)
}

fn exchange(
    mut stream: impl Read + Write,
    method: &str,
    host: &str,
    path: &str,
    key: &str,
    body: Option<&serde_json::Value>,
) -> anyhow::Result<serde_json::Value> {
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()?;
    let mut raw = Vec::new();
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        // A server that closes without TLS's close_notify after a complete response (actix
        // does with `Connection: close`): what was read is the whole answer.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => return Err(e).context("cannot read the answer"),
    }
    let text = String::from_utf8_lossy(&raw);
    let (head, payload) = text
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let status: u16 = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .context("malformed HTTP status line")?;
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    let payload = if chunked {
        dechunk(payload)
    } else {
        payload.to_string()
    };
    let json: serde_json::Value = serde_json::from_str(&payload).unwrap_or(serde_json::Value::Null);
    if !(200..300).contains(&status) {
        let detail = json["error"].as_str().unwrap_or(payload.trim());
        bail!("the server answered {status}: {detail}");
    }
    Ok(json)
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    while let Some((size, rest)) = s.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || rest.len() < n {
            break;
        }
        out.push_str(&rest[..n]);
        s = rest[n..].trim_start_matches("\r\n");
    }
    out
}
