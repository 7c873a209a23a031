//! What the `console` tests share: fixtures, servers and helpers.

use crate::common;
use common::Server;
use reqwest::header::{HeaderMap, COOKIE, LOCATION, SET_COOKIE};
use serde_json::json;

pub(super) const CONFIG: &str = r#"
[server]
bind = "127.0.0.1:0"

[limits]
rate_limit = false

[[environments]]
id = "fast"
harness = "demo"
demo_duration_ms = 100

[[environments]]
id = "slow"
harness = "demo"
demo_duration_ms = 60000
"#;

/// A client that shows redirects instead of following them.
pub(super) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// The `Set-Cookie` header that sets `name`, whole.
pub(super) fn set_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_string)
}

/// The value a `Set-Cookie` header gives.
pub(super) fn value(set_cookie: &str) -> String {
    let pair = set_cookie.split(';').next().unwrap_or("");
    pair.split_once('=')
        .map(|(_, v)| v.to_string())
        .unwrap_or_default()
}

/// A signed-in console session.
pub(super) struct Session {
    /// `name=value`, as a `Cookie` header sends it.
    pub(super) cookie: String,
    pub(super) csrf: String,
    /// The whole `Set-Cookie` header of the session.
    pub(super) set_cookie: String,
}

/// The form's token (and its cookie) of a fresh sign-in page.
pub(super) async fn signin_token(c: &reqwest::Client, base: &str) -> String {
    let page = c
        .get(format!("{base}/signin"))
        .send()
        .await
        .expect("signin");
    assert_eq!(page.status(), 200);
    let set = set_cookie(page.headers(), "runledger_signin").expect("signin cookie");
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    let token = value(&set);
    let html = page.text().await.expect("body");
    assert!(
        html.contains(&format!("name=\"token\" value=\"{token}\"")),
        "{html}"
    );
    token
}

/// Posts the sign-in form with `key`; the answer.
pub(super) async fn post_signin(c: &reqwest::Client, base: &str, key: &str) -> reqwest::Response {
    let token = signin_token(c, base).await;
    c.post(format!("{base}/signin"))
        .header(COOKIE, format!("runledger_signin={token}"))
        .form(&[("token", token.as_str()), ("key", key)])
        .send()
        .await
        .expect("post signin")
}

pub(super) async fn sign_in_as(
    base: &str,
    key: &str,
    cookie_name: &str,
    c: &reqwest::Client,
) -> Session {
    let r = post_signin(c, base, key).await;
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()[LOCATION], "/runs");
    let set = set_cookie(r.headers(), cookie_name).expect("session cookie");
    let cookie = format!("{cookie_name}={}", value(&set));
    let page = c
        .get(format!("{base}/runs"))
        .header(COOKIE, &cookie)
        .send()
        .await
        .expect("runs");
    assert_eq!(page.status(), 200);
    let html = page.text().await.expect("body");
    let csrf = html
        .split("<meta name=\"csrf-token\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("csrf meta")
        .to_string();
    Session {
        cookie,
        csrf,
        set_cookie: set,
    }
}

pub(super) async fn sign_in(server: &Server, key: &str) -> Session {
    sign_in_as(&server.base, key, "runledger_session", &client()).await
}

/// `GET path` (an API path under /api/v1 or a page) with the session's cookie: status and body.
pub(super) async fn get(server: &Server, session: &Session, path: &str) -> (u16, String) {
    let r = client()
        .get(server.url(path))
        .header(COOKIE, &session.cookie)
        .send()
        .await
        .expect("get");
    let status = r.status().as_u16();
    (status, r.text().await.expect("body"))
}

pub(super) async fn make_key(
    server: &Server,
    name: &str,
    team: &str,
    admin: bool,
) -> (String, String) {
    let body = json!({ "name": name, "team": team, "admin": admin });
    let (status, v) = server.post(&server.key, "/admin/keys", body).await;
    assert_eq!(status, 200, "{v}");
    (
        v["key"].as_str().expect("key").to_string(),
        v["id"].as_str().expect("id").to_string(),
    )
}
