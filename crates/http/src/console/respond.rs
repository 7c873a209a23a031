//! How the console answers: an HTML page with its security headers (CSP, no framing, no
//! caching), or a 303 redirect. It owns those headers; what a page says is `pages`'.

use actix_web::http::header;
use actix_web::HttpResponse;

/// The Content-Security-Policy of the console's pages: only the server's own stylesheet and
/// script, no inline code, nothing framed or framing, forms posted only here.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; \
                       img-src 'self'; object-src 'none'; base-uri 'none'; \
                       form-action 'self'; frame-ancestors 'none'";

/// An HTML answer of the console, with its security headers.
pub(super) fn html(status: actix_web::http::StatusCode, body: String) -> HttpResponse {
    HttpResponse::build(status)
        .content_type("text/html; charset=utf-8")
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .insert_header((header::CONTENT_SECURITY_POLICY, CSP))
        .insert_header((header::X_FRAME_OPTIONS, "DENY"))
        .insert_header((header::REFERRER_POLICY, "same-origin"))
        .body(body)
}

/// A redirect after a form post or to the sign-in page (303: the next request is a GET).
pub(super) fn see_other(to: &str) -> HttpResponse {
    HttpResponse::SeeOther()
        .insert_header((header::LOCATION, to))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .finish()
}
