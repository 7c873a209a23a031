//! The web console's sessions against the real binary: signing in exchanges a key for a
//! strict cookie, the cookie authenticates the public API (unsafe methods only with the
//! session's CSRF token and from the console's origin), a revoked key's sessions and a signed-out
//! session end at once, a restart signs everyone out, pages escape what clients wrote and show
//! a key only its team's runs, and every page carries the strict security headers.

use crate::common;

use common::{problem, Server};
use reqwest::header::{HeaderMap, COOKIE, LOCATION, SET_COOKIE};
use serde_json::{json, Value};

const CONFIG: &str = r#"
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
fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

/// The `Set-Cookie` header that sets `name`, whole.
fn set_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with(&format!("{name}=")))
        .map(str::to_string)
}

/// The value a `Set-Cookie` header gives.
fn value(set_cookie: &str) -> String {
    let pair = set_cookie.split(';').next().unwrap_or("");
    pair.split_once('=')
        .map(|(_, v)| v.to_string())
        .unwrap_or_default()
}

/// A signed-in console session.
struct Session {
    /// `name=value`, as a `Cookie` header sends it.
    cookie: String,
    csrf: String,
    /// The whole `Set-Cookie` header of the session.
    set_cookie: String,
}

/// The form's token (and its cookie) of a fresh sign-in page.
async fn signin_token(c: &reqwest::Client, base: &str) -> String {
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
async fn post_signin(c: &reqwest::Client, base: &str, key: &str) -> reqwest::Response {
    let token = signin_token(c, base).await;
    c.post(format!("{base}/signin"))
        .header(COOKIE, format!("runledger_signin={token}"))
        .form(&[("token", token.as_str()), ("key", key)])
        .send()
        .await
        .expect("post signin")
}

async fn sign_in_as(base: &str, key: &str, cookie_name: &str, c: &reqwest::Client) -> Session {
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

async fn sign_in(server: &Server, key: &str) -> Session {
    sign_in_as(&server.base, key, "runledger_session", &client()).await
}

/// `GET path` (an API path under /api/v1 or a page) with the session's cookie: status and body.
async fn get(server: &Server, session: &Session, path: &str) -> (u16, String) {
    let r = client()
        .get(server.url(path))
        .header(COOKIE, &session.cookie)
        .send()
        .await
        .expect("get");
    let status = r.status().as_u16();
    (status, r.text().await.expect("body"))
}

async fn make_key(server: &Server, name: &str, team: &str, admin: bool) -> (String, String) {
    let body = json!({ "name": name, "team": team, "admin": admin });
    let (status, v) = server.post(&server.key, "/admin/keys", body).await;
    assert_eq!(status, 200, "{v}");
    (
        v["key"].as_str().expect("key").to_string(),
        v["id"].as_str().expect("id").to_string(),
    )
}

#[tokio::test]
async fn signing_in_gives_a_strict_cookie_and_pages_a_strict_policy() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let session = sign_in(&server, &server.key).await;
    let set = &session.set_cookie;
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set.contains(attribute), "{attribute} missing: {set}");
    }
    assert!(
        !set.contains("Secure"),
        "plain HTTP cookie marked Secure: {set}"
    );
    // A 256-bit random value, and a different CSRF token.
    assert_eq!(value(set).len(), 43, "{set}");
    assert_eq!(session.csrf.len(), 43);
    assert_ne!(value(set), session.csrf);

    for path in ["/runs", "/new", "/keys", "/signin"] {
        let r = client()
            .get(server.url(path))
            .header(COOKIE, &session.cookie)
            .send()
            .await
            .expect("page");
        let h = r.headers();
        let path_status = (path, r.status().as_u16());
        assert!(
            path_status.1 == 200 || (path == "/signin" && path_status.1 == 303),
            "{path_status:?}"
        );
        if path_status.1 != 200 {
            continue;
        }
        let csp = h["content-security-policy"].to_str().expect("csp");
        for directive in [
            "default-src 'self'",
            "script-src 'self'",
            "frame-ancestors 'none'",
            "object-src 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {csp}");
        }
        assert!(!csp.contains("unsafe-inline"), "{csp}");
        assert_eq!(h["x-frame-options"], "DENY");
        assert_eq!(h["referrer-policy"], "same-origin");
        assert_eq!(h["x-content-type-options"], "nosniff");
        let html = r.text().await.expect("body");
        // No inline script or style, and nothing from elsewhere.
        assert!(!html.contains("<script>"), "{path}: inline script");
        assert!(!html.contains("<style"), "{path}: inline style");
        assert!(
            !html.contains("http://") && !html.contains("https://"),
            "{path}"
        );
        // The assets the page names are served, as their types.
        for (attr, kind) in [
            ("<link rel=\"stylesheet\" href=\"", "text/css"),
            ("<script src=\"", "text/javascript"),
        ] {
            let url = html
                .split(attr)
                .nth(1)
                .and_then(|r| r.split('"').next())
                .expect("asset");
            let a = client().get(server.url(url)).send().await.expect("asset");
            assert_eq!(a.status(), 200, "{url}");
            assert!(a.headers()["content-type"]
                .to_str()
                .expect("type")
                .starts_with(kind));
            assert!(!a.text().await.expect("asset body").is_empty());
        }
    }
    // An asset name that is not the current digest does not exist.
    let r = client()
        .get(server.url("/console/assets/console.js"))
        .send()
        .await
        .expect("asset");
    assert_eq!(r.status(), 404);
}

#[tokio::test]
async fn without_a_live_session_pages_send_to_sign_in_and_the_api_answers_401() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let forged = format!("runledger_session={}", "A".repeat(43));
    for cookie in [None, Some(forged.as_str()), Some("runledger_session=")] {
        for path in [
            "/",
            "/runs",
            "/new",
            "/keys",
            "/runs/01M8AQ7VZ79QE6GE5GMAFQ3AAX",
        ] {
            let mut req = client().get(server.url(path));
            if let Some(c) = cookie {
                req = req.header(COOKIE, c);
            }
            let r = req.send().await.expect("page");
            assert_eq!(r.status(), 303, "{path} with {cookie:?}");
            let to = r.headers()[LOCATION].to_str().expect("location");
            assert!(to == "/signin" || (path == "/" && to == "/runs"), "{to}");
        }
        let mut req = client().get(server.api("/agent/runs"));
        if let Some(c) = cookie {
            req = req.header(COOKIE, c);
        }
        let (status, body) = problem(req.send().await.expect("api")).await;
        assert_eq!(status, 401, "{cookie:?}: {body}");
    }
    // A forged cookie with the right CSRF header is still nobody.
    let r = client()
        .post(server.api("/agent/runs"))
        .header(COOKIE, &forged)
        .header("x-csrf-token", "A".repeat(43))
        .json(&json!({"prompt": "x"}))
        .send()
        .await
        .expect("post");
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn a_wrong_key_or_a_stale_or_cross_site_form_cannot_sign_in() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let c = client();
    for wrong in [
        "rl_wrong",
        "",
        "not even a key",
        &format!("{}x", server.key),
    ] {
        let r = post_signin(&c, &server.base, wrong).await;
        assert_eq!(r.status(), 401, "{wrong:?}");
        assert!(set_cookie(r.headers(), "runledger_session").is_none());
        let html = r.text().await.expect("body");
        assert!(html.contains("not valid or has been revoked"), "{html}");
    }
    // The right key without the form's token (another site's form), or with a token that is
    // not the cookie's, is refused.
    let token = signin_token(&c, &server.base).await;
    for (cookie, given) in [
        (None, token.as_str()),
        (Some(format!("runledger_signin={token}")), "other"),
        (Some("runledger_signin=".to_string()), ""),
    ] {
        let mut req = c.post(server.url("/signin"));
        if let Some(cookie) = cookie {
            req = req.header(COOKIE, cookie);
        }
        let r = req
            .form(&[("token", given), ("key", server.key.as_str())])
            .send()
            .await
            .expect("post");
        assert_eq!(r.status(), 403);
        assert!(set_cookie(r.headers(), "runledger_session").is_none());
    }
    // A cross-site post is refused even with a matching token.
    for (name, value) in [
        ("origin", "https://evil.example"),
        ("sec-fetch-site", "cross-site"),
    ] {
        let r = c
            .post(server.url("/signin"))
            .header(COOKIE, format!("runledger_signin={token}"))
            .header(name, value)
            .form(&[("token", token.as_str()), ("key", server.key.as_str())])
            .send()
            .await
            .expect("post");
        assert_eq!(r.status(), 403, "{name}");
        assert!(set_cookie(r.headers(), "runledger_session").is_none());
    }
}

#[tokio::test]
async fn a_cookie_changes_something_only_with_the_csrf_token_from_its_own_origin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let session = sign_in(&server, &server.key).await;
    let create = |csrf: Option<&str>, extra: Option<(&'static str, String)>| {
        let mut req = client()
            .post(server.api("/agent/runs"))
            .header(COOKIE, &session.cookie)
            .json(&json!({"prompt": "from the console", "config": {"environment_id": "fast"}}));
        if let Some(t) = csrf {
            req = req.header("x-csrf-token", t.to_string());
        }
        if let Some((name, value)) = extra {
            req = req.header(name, value);
        }
        req.send()
    };
    let wrong = "B".repeat(43);
    for csrf in [
        None,
        Some(""),
        Some(wrong.as_str()),
        Some(&session.csrf[..42]),
    ] {
        let (status, body) = problem(create(csrf, None).await.expect("post")).await;
        assert_eq!(status, 403, "{csrf:?}: {body}");
        assert!(
            body["detail"].as_str().expect("detail").contains("CSRF"),
            "{body}"
        );
    }
    let origin = server.base.clone();
    for (name, value) in [
        ("origin", "https://evil.example".to_string()),
        ("origin", "null".to_string()),
        ("sec-fetch-site", "cross-site".to_string()),
        ("sec-fetch-site", "same-site".to_string()),
    ] {
        let (status, body) = problem(
            create(Some(&session.csrf), Some((name, value.clone())))
                .await
                .expect("post"),
        )
        .await;
        assert_eq!(status, 403, "{name}: {value}: {body}");
    }
    // Nothing was created by the refused requests.
    let (status, list) = server.get(&server.key, "/agent/runs").await;
    assert_eq!(status, 200);
    assert_eq!(list["runs"], json!([]), "{list}");

    // With the token, from the same origin (as the browser says it), it works.
    for extra in [
        None,
        Some(("origin", origin.clone())),
        Some(("sec-fetch-site", "same-origin".to_string())),
    ] {
        let r = create(Some(&session.csrf), extra).await.expect("post");
        assert_eq!(r.status(), 200);
    }
    let (status, body) = get(&server, &session, "/api/v1/agent/runs").await;
    assert_eq!(status, 200);
    let list: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(list["runs"].as_array().expect("runs").len(), 3);
    let id = list["runs"][0]["run_id"].as_str().expect("id").to_string();
    let cancel = client()
        .post(server.api(&format!("/agent/runs/{id}/cancel")))
        .header(COOKIE, &session.cookie)
        .send()
        .await
        .expect("cancel");
    assert_eq!(cancel.status(), 403, "cancel without the token");

    // A bearer request is unaffected: no CSRF token, even with a stray cookie.
    let r = server
        .client
        .post(server.api("/agent/runs"))
        .bearer_auth(&server.key)
        .header(COOKIE, "runledger_session=garbage")
        .json(&json!({"prompt": "bearer"}))
        .send()
        .await
        .expect("bearer post");
    assert_eq!(r.status(), 200);
    // A wrong bearer key is not rescued by a good cookie.
    let r = client()
        .get(server.api("/agent/runs"))
        .bearer_auth("rl_wrong")
        .header(COOKIE, &session.cookie)
        .send()
        .await
        .expect("get");
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn a_revoked_keys_sessions_end_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let (secret, id) = make_key(&server, "carol", "default", false).await;
    let first = sign_in(&server, &secret).await;
    let second = sign_in(&server, &secret).await;
    assert_eq!(get(&server, &first, "/api/v1/agent/runs").await.0, 200);
    let (status, v) = server
        .post(&server.key, &format!("/admin/keys/{id}/revoke"), json!({}))
        .await;
    assert_eq!(status, 200, "{v}");
    for session in [&first, &second] {
        let (status, body) = get(&server, session, "/api/v1/agent/runs").await;
        assert_eq!(status, 401, "{body}");
        let (status, _) = get(&server, session, "/runs").await;
        assert_eq!(status, 303);
    }
    // And the key cannot sign in again.
    let r = post_signin(&client(), &server.base, &secret).await;
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn sign_out_ends_the_session_only_with_its_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let session = sign_in(&server, &server.key).await;
    let other = sign_in(&server, &server.key).await;
    let signout = |csrf: &str| {
        client()
            .post(server.url("/signout"))
            .header(COOKIE, &session.cookie)
            .form(&[("csrf", csrf)])
            .send()
    };
    // Another site cannot sign a user out.
    assert_eq!(signout("wrong").await.expect("signout").status(), 403);
    assert_eq!(get(&server, &session, "/api/v1/agent/runs").await.0, 200);

    let r = signout(&session.csrf).await.expect("signout");
    assert_eq!(r.status(), 303);
    assert_eq!(r.headers()[LOCATION], "/signin");
    let removal = set_cookie(r.headers(), "runledger_session").expect("removal");
    assert!(removal.contains("Max-Age=0"), "{removal}");
    assert_eq!(get(&server, &session, "/api/v1/agent/runs").await.0, 401);
    assert_eq!(get(&server, &session, "/runs").await.0, 303);
    // Only that session: the other one of the same key lives on.
    assert_eq!(get(&server, &other, "/api/v1/agent/runs").await.0, 200);
}

#[tokio::test]
async fn a_restart_signs_everyone_out() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = Server::start_in(dir.path(), CONFIG);
    let key = server.key.clone();
    let session = sign_in(&server, &key).await;
    assert_eq!(get(&server, &session, "/api/v1/agent/runs").await.0, 200);
    server.kill();
    let server = Server::start_in(dir.path(), CONFIG);
    assert_eq!(get(&server, &session, "/api/v1/agent/runs").await.0, 401);
    // The key itself still works.
    sign_in(&server, &key).await;
}

#[tokio::test]
async fn pages_show_hostile_text_as_text() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let title = "<script>alert('title')</script>";
    let prompt = "\"><img src=x onerror=alert(1)> & </pre><script>alert(2)</script>";
    let (status, run) = server
        .post(
            &server.key,
            "/agent/runs",
            json!({"title": title, "prompt": prompt, "config": {"environment_id": "fast"},
                   "metadata": {"k": "<b>v</b>"}}),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    let id = run["run_id"].as_str().expect("id");
    let session = sign_in(&server, &server.key).await;
    for path in [
        "/runs".to_string(),
        format!("/runs/{id}"),
        format!("/runs?q={}", "%3Cscript%3E\"x"),
    ] {
        let (status, html) = get(&server, &session, &path).await;
        assert_eq!(status, 200, "{path}");
        assert!(!html.contains("<script>alert"), "{path}: {html}");
        assert!(!html.contains("<img src=x"), "{path}");
        assert!(!html.contains("<b>v</b>"), "{path}");
        assert!(!html.contains("\"x\""), "{path}");
        if path.starts_with("/runs?") {
            assert!(html.contains("value=\"&lt;script&gt;&quot;x\""), "{html}");
        } else {
            assert!(
                html.contains("&lt;script&gt;alert(&#39;title&#39;)&lt;/script&gt;"),
                "{path}"
            );
        }
    }
    let (_, html) = get(&server, &session, &format!("/runs/{id}")).await;
    assert!(html.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt; &amp; &lt;/pre&gt;"));
    // A hostile run id in the path is neither echoed raw nor a server error.
    let (status, html) = get(
        &server,
        &session,
        "/runs/%3Cscript%3Ealert(1)%3C%2Fscript%3E",
    )
    .await;
    assert_eq!(status, 404);
    assert!(!html.contains("<script>alert"), "{html}");
}

#[tokio::test]
async fn a_key_sees_only_its_teams_runs_in_the_console() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    let (status, team) = server
        .post(&server.key, "/admin/teams", json!({ "name": "infra" }))
        .await;
    assert_eq!(status, 201, "{team}");
    let (bob, _) = make_key(&server, "bob", "infra", false).await;
    let (status, run) = server
        .post(
            &server.key,
            "/agent/runs",
            json!({"title": "default's secret", "prompt": "p"}),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    let theirs = run["run_id"].as_str().expect("id").to_string();
    let (status, run) = server
        .post(
            &bob,
            "/agent/runs",
            json!({"title": "infra's own", "prompt": "p"}),
        )
        .await;
    assert_eq!(status, 200, "{run}");
    let own = run["run_id"].as_str().expect("id").to_string();

    let session = sign_in(&server, &bob).await;
    let (status, html) = get(&server, &session, "/runs").await;
    assert_eq!(status, 200);
    assert!(
        html.contains(&own) && html.contains("infra&#39;s own"),
        "{html}"
    );
    assert!(
        !html.contains(&theirs) && !html.contains("secret"),
        "{html}"
    );
    let (status, html) = get(&server, &session, &format!("/runs/{theirs}")).await;
    assert_eq!(status, 404);
    assert!(!html.contains("secret"), "{html}");
    assert_eq!(get(&server, &session, &format!("/runs/{own}")).await.0, 200);
    // Through the API with the cookie, the same.
    let (status, _) = get(&server, &session, &format!("/api/v1/agent/runs/{theirs}")).await;
    assert_eq!(status, 404);
    // A non-admin key has no keys page, and the API refuses it the admin calls.
    assert_eq!(get(&server, &session, "/keys").await.0, 403);
    assert_eq!(get(&server, &session, "/api/v1/admin/keys").await.0, 403);
    let (_, html) = get(&server, &session, "/runs").await;
    assert!(
        !html.contains("href=\"/keys\""),
        "no Keys link for a non-admin key"
    );
}

#[tokio::test]
async fn filters_page_and_bad_filters_say_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = Server::start_in(dir.path(), CONFIG);
    for i in 0..25 {
        let env = if i % 5 == 0 { "slow" } else { "fast" };
        let (status, v) = server
            .post(
                &server.key,
                "/agent/runs",
                json!({"title": format!("run {i}"), "prompt": "p", "config": {"environment_id": env}}),
            )
            .await;
        assert_eq!(status, 200, "{v}");
    }
    let session = sign_in(&server, &server.key).await;
    // By creation time: the fast runs' finishing does not move them between pages.
    let (status, html) = get(&server, &session, "/runs?sort_by=created_at").await;
    assert_eq!(status, 200);
    assert_eq!(html.matches("<tr data-run=").count(), 20);
    let next = html
        .split("id=\"next-page\" rel=\"next\" href=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("next page link")
        .replace("&amp;", "&");
    let (status, html) = get(&server, &session, &next).await;
    assert_eq!(status, 200);
    assert_eq!(html.matches("<tr data-run=").count(), 5);
    assert!(html.contains(">First page</a>"));

    let (status, html) = get(&server, &session, "/runs?environment_id=slow&limit=50").await;
    assert_eq!(status, 200);
    assert_eq!(html.matches("<tr data-run=").count(), 5);
    assert!(html.contains("id=\"f-env\" name=\"environment_id\" list=\"f-envs\" value=\"slow\""));

    let (status, html) = get(&server, &session, "/runs?q=no-such-run-anywhere").await;
    assert_eq!(status, 200);
    assert!(html.contains("No runs match these filters"), "{html}");
    assert!(!html.contains("id=\"runs-empty\" class=\"empty\" hidden"));

    let (status, html) = get(&server, &session, "/runs?created_after=yesterday").await;
    assert_eq!(status, 400);
    assert!(html.contains("These filters cannot be applied"), "{html}");
    assert!(html.contains("created_after"), "{html}");
}

#[tokio::test]
async fn under_tls_the_cookie_is_secure_and_host_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key, pem) = common::self_signed(dir.path());
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\ntls_cert = {cert:?}\ntls_key = {key:?}\n\n\
         [[environments]]\nid = \"fast\"\nharness = \"demo\"\ndemo_duration_ms = 40\n"
    );
    let server = Server::start_in(dir.path(), &config);
    assert!(server.base.starts_with("https://"), "{}", server.base);
    let c = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).expect("cert"))
        .build()
        .expect("client");
    let session = sign_in_as(&server.base, &server.key, "__Host-runledger_session", &c).await;
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/", "Secure"] {
        assert!(
            session.set_cookie.contains(attribute),
            "{}",
            session.set_cookie
        );
    }
    assert!(
        !session.set_cookie.contains("Domain"),
        "{}",
        session.set_cookie
    );
    let r = c
        .get(format!("{}/api/v1/agent/runs", server.base))
        .header(COOKIE, &session.cookie)
        .send()
        .await
        .expect("api");
    assert_eq!(r.status(), 200);
    // The plain-HTTP name means nothing under TLS.
    let r = c
        .get(format!("{}/api/v1/agent/runs", server.base))
        .header(COOKIE, session.cookie.replace("__Host-", ""))
        .send()
        .await
        .expect("api");
    assert_eq!(r.status(), 401);
}

#[tokio::test]
async fn a_session_is_charged_to_its_keys_rate_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = CONFIG.replace("rate_limit = false", "rate_per_sec = 0.5\nburst = 3");
    let server = Server::start_in(dir.path(), &config);
    let session = sign_in(&server, &server.key).await;
    let mut statuses = Vec::new();
    for _ in 0..6 {
        statuses.push(get(&server, &session, "/api/v1/agent/runs").await.0);
    }
    assert!(statuses.contains(&429), "{statuses:?}");
    // The bucket is the key's: the bearer key is limited too now.
    let (status, _) = server.get(&server.key, "/agent/runs").await;
    assert_eq!(status, 429);
    // Pages are charged too, and say what to do.
    let (status, html) = get(&server, &session, "/runs").await;
    assert_eq!(status, 429);
    assert!(html.contains("Wait a moment"), "{html}");
}

#[tokio::test]
async fn the_public_urls_origin_is_the_consoles_own() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = CONFIG.replace(
        "bind = \"127.0.0.1:0\"",
        "bind = \"127.0.0.1:0\"\npublic_url = \"https://console.example.com/\"",
    );
    let server = Server::start_in(dir.path(), &config);
    let session = sign_in(&server, &server.key).await;
    let post = |origin: &'static str| {
        client()
            .post(server.api("/agent/runs"))
            .header(COOKIE, &session.cookie)
            .header("x-csrf-token", &session.csrf)
            .header("origin", origin)
            .json(&json!({"prompt": "behind a proxy"}))
            .send()
    };
    // A proxy in front rewrote the host: the browser's origin is the public URL's.
    assert_eq!(
        post("https://console.example.com")
            .await
            .expect("post")
            .status(),
        200
    );
    for other in [
        "https://console.example.com.evil.example",
        "http://console.example.com",
    ] {
        assert_eq!(post(other).await.expect("post").status(), 403, "{other}");
    }
}
