//! The read-only mode of `runledger inspect` (`Config::read_only`): every request that could
//! change something is answered 405 problem+json before any handler runs, whatever its path,
//! so a route added later is covered without knowing of it. GET, HEAD and OPTIONS pass, and
//! so do the console's sign-in and sign-out, which change only the browser's session.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{header, Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::web;

use super::problem::ApiError;
use super::AppState;

/// The console's forms that only sign a browser in or out.
const SESSION_FORMS: [&str; 2] = ["/signin", "/signout"];

pub(super) async fn refuse_writes(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<actix_web::body::BoxBody>, actix_web::Error> {
    let read_only = req
        .app_data::<web::Data<AppState>>()
        .is_some_and(|s| s.config.read_only);
    let reads = matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    if !read_only || reads || SESSION_FORMS.contains(&req.path()) {
        return Ok(next.call(req).await?.map_into_boxed_body());
    }
    let error = ApiError::client_error(
        StatusCode::METHOD_NOT_ALLOWED,
        "this server is read-only (runledger inspect serves a run's bundle): it answers GET \
         only, runs no agents and records nothing; import the bundle into a store with \
         `runledger import --run FILE` to work with the run",
    );
    let mut answer = actix_web::ResponseError::error_response(&error);
    answer
        .headers_mut()
        .insert(header::ALLOW, header::HeaderValue::from_static("GET, HEAD"));
    let (req, _) = req.into_parts();
    Ok(ServiceResponse::new(req, answer))
}
