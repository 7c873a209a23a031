//! Console sessions: the strict cookie, sign-in refusals, CSRF and origin rules, revocation, sign-
//! out, restart, TLS, the rate limit and the public URL origin.

use super::support::*;
use crate::common;
use common::{problem, Server};
use reqwest::header::{COOKIE, LOCATION};
use serde_json::{json, Value};

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
