//! Artifacts: `GET /api/v1/agent/artifacts/{artifactUid}` (OpenAPI `ArtifactResponse`) and the
//! capability download link it hands out for files and screenshots.
//!
//! An artifact is found through the index's artifact lookup (`Artifacts::artifact_run`, one
//! seek) and shown only to a key of its run's team: another team's artifact is the same 404 as
//! an unknown uid. A pull request has no `ArtifactResponse` shape; it is answered 404 with a
//! detail that says so (its url and branch are in the run's `artifacts`).
//!
//! `download_url` is `<public_url>/artifacts/{uid}/download?expires=<unix seconds>&token=…`,
//! the token a capability of the session secret over the uid and the expiry (the same signing
//! as session links, with a purpose of its own). It is valid for `limits.artifact_link_secs`
//! and needs no API key. The bytes are streamed from the content store with the artifact's
//! media type, as an attachment, with `Content-Security-Policy: sandbox` and `nosniff`: an
//! agent may report an HTML or SVG file, and it must never run script in the server's origin.

use actix_web::http::header::{self, HeaderValue};
use actix_web::{web, HttpRequest, HttpResponse};
use serde::Serialize;
use subtle::ConstantTimeEq;
use utoipa::ToSchema;

use super::error_responses::{InternalError, NotFound, Unauthorized};
use super::problem::ApiError;
use super::wire::{capability, file_name, format_time};
use super::{AppState, Principal};
use runledger_domain::{ArtifactKind, ReportedArtifact, Run, Timestamp};

/// The purpose a download token is signed for (`wire::capability`).
const DOWNLOAD: &[u8] = b"artifact-download";

/// Most bytes of an artifact uid looked up: a UUID has 36; anything longer is no artifact.
const MAX_UID_BYTES: usize = 64;

/// An artifact with a way to its contents (OpenAPI `ArtifactResponse`, discriminated by
/// `artifact_type`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "artifact_type")]
pub enum ArtifactResponse {
    #[serde(rename = "PLAN")]
    #[schema(title = "PlanArtifactResponse")]
    Plan {
        artifact_uid: String,
        #[schema(value_type = String, format = DateTime)]
        created_at: String,
        data: PlanArtifactResponseData,
    },
    #[serde(rename = "SCREENSHOT")]
    #[schema(title = "ScreenshotArtifactResponse")]
    Screenshot {
        artifact_uid: String,
        #[schema(value_type = String, format = DateTime)]
        created_at: String,
        data: ScreenshotArtifactResponseData,
    },
    #[serde(rename = "FILE")]
    #[schema(title = "FileArtifactResponse")]
    File {
        artifact_uid: String,
        #[schema(value_type = String, format = DateTime)]
        created_at: String,
        data: FileArtifactResponseData,
    },
}

/// A plan with its Markdown inline (OpenAPI `PlanArtifactResponseData`); the plan is its own
/// document and notebook, so both uids are the artifact's.
#[derive(Debug, Serialize, ToSchema)]
pub struct PlanArtifactResponseData {
    pub document_uid: String,
    pub notebook_uid: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The plan's Markdown.
    pub content: String,
    /// `text/markdown`.
    pub content_type: String,
}

/// A screenshot's download link (OpenAPI `ScreenshotArtifactResponseData`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ScreenshotArtifactResponseData {
    /// A capability URL, usable without an API key until `expires_at`.
    #[schema(format = "uri")]
    pub download_url: String,
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: String,
    pub content_type: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// A file's download link (OpenAPI `FileArtifactResponseData`).
#[derive(Debug, Serialize, ToSchema)]
pub struct FileArtifactResponseData {
    /// A capability URL, usable without an API key until `expires_at`.
    #[schema(format = "uri")]
    pub download_url: String,
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: String,
    pub content_type: String,
    /// The file's path relative to the run's workspace.
    pub filepath: String,
    pub filename: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub size_bytes: u64,
}

/// The token of a download link of artifact `uid` valid until `expires` (Unix seconds).
fn download_token(secret: &[u8; 32], uid: &str, expires: u64) -> String {
    capability(secret, DOWNLOAD, &[&expires.to_be_bytes(), uid.as_bytes()])
}

/// The run holding `uid` and the artifact, if the caller's team may see it.
async fn find(
    state: &AppState,
    team: Option<&str>,
    uid: &str,
) -> Result<Option<(Run, ReportedArtifact)>, ApiError> {
    if uid.is_empty() || uid.len() > MAX_UID_BYTES {
        return Ok(None);
    }
    let Some(run) = state.artifacts.artifact_run(uid).await? else {
        return Ok(None);
    };
    if team.is_some_and(|t| t != run.team) {
        return Ok(None);
    }
    let found = run
        .artifacts
        .iter()
        .find(|a| a.artifact.uid == uid)
        .cloned();
    Ok(found.map(|a| (run, a)))
}

fn unknown(uid: &str) -> ApiError {
    ApiError::not_found(format!("no artifact with uid {uid:?}"))
}

/// One artifact: a plan with its Markdown, a file or screenshot with a download link valid
/// for `limits.artifact_link_secs`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/artifacts/{artifactUid}",
    tag = "runs",
    operation_id = "getArtifact",
    params(
        ("artifactUid" = String, Path, description = "The artifact's uid (a UUID), from the run's `artifacts`."),
    ),
    responses(
        (status = 200, description = "The artifact", body = ArtifactResponse),
        (status = 401, response = Unauthorized),
        (status = 404, description = "No such artifact for this key's team, or a pull request (which has no `ArtifactResponse` shape: its url and branch are in the run's `artifacts`)", content_type = "application/problem+json", body = super::problem::Problem),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn get(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let uid = path.into_inner();
    let (_, reported) = find(&state, Some(&key.team), &uid)
        .await?
        .ok_or_else(|| unknown(&uid))?;
    let created_at = format_time(reported.at);
    let link_secs = state.config.artifacts.link_secs;
    let link = |uid: &str| {
        let expires = runledger_base::clock::now().0 / 1000 + link_secs;
        let token = download_token(&state.session_secret, uid, expires);
        let url = format!(
            "{}/artifacts/{uid}/download?expires={expires}&token={token}",
            state.public_url
        );
        (url, format_time(Timestamp(expires.saturating_mul(1000))))
    };
    let body = match reported.artifact.kind {
        ArtifactKind::PullRequest { .. } => {
            return Err(ApiError::not_found(format!(
                "artifact {uid:?} is a pull request, which has no artifact response: its url \
                 and branch are in the run's artifacts"
            )))
        }
        ArtifactKind::Plan { title, content } => {
            let bytes = state.artifacts.read_content(&content)?;
            ArtifactResponse::Plan {
                created_at,
                data: PlanArtifactResponseData {
                    document_uid: uid.clone(),
                    notebook_uid: uid.clone(),
                    title,
                    content: String::from_utf8_lossy(&bytes).into_owned(),
                    content_type: content.mime_type,
                },
                artifact_uid: uid,
            }
        }
        ArtifactKind::Screenshot {
            description,
            content,
            ..
        } => {
            let (download_url, expires_at) = link(&uid);
            ArtifactResponse::Screenshot {
                created_at,
                data: ScreenshotArtifactResponseData {
                    download_url,
                    expires_at,
                    content_type: content.mime_type,
                    description,
                },
                artifact_uid: uid,
            }
        }
        ArtifactKind::File {
            path,
            description,
            content,
        } => {
            let (download_url, expires_at) = link(&uid);
            ArtifactResponse::File {
                created_at,
                data: FileArtifactResponseData {
                    download_url,
                    expires_at,
                    content_type: content.mime_type,
                    filename: file_name(&path).to_string(),
                    filepath: path,
                    description,
                    size_bytes: content.size,
                },
                artifact_uid: uid,
            }
        }
    };
    Ok(HttpResponse::Ok().json(body))
}

/// The one value of query parameter `name`, if it is there once.
fn query_param(query: &str, name: &str) -> Option<String> {
    let pairs = web::Query::<Vec<(String, String)>>::from_query(query)
        .ok()?
        .into_inner();
    let mut values = pairs.into_iter().filter(|(k, _)| k == name).map(|(_, v)| v);
    let value = values.next()?;
    values.next().is_none().then_some(value)
}

/// A file name for `Content-Disposition`: the last path component with control characters,
/// quotes, backslashes and path separators replaced, never empty.
fn download_name(path: &str) -> String {
    let cleaned: String = file_name(path)
        .chars()
        .map(|c| {
            if c.is_control() || matches!(c, '"' | '\\' | '/' | ';') {
                '_'
            } else {
                c
            }
        })
        .collect();
    if cleaned.trim_matches('.').is_empty() {
        "artifact".into()
    } else {
        cleaned
    }
}

/// The bytes of an artifact, through the capability link `GET /agent/artifacts/{uid}` handed
/// out. No API key: the token is the permission.
#[utoipa::path(
    get,
    path = "/artifacts/{artifactUid}/download",
    tag = "service",
    operation_id = "downloadArtifact",
    params(
        ("artifactUid" = String, Path, description = "The artifact's uid."),
        ("expires" = u64, Query, description = "Unix seconds the link is valid until, as handed out."),
        ("token" = String, Query, description = "The link's capability token."),
    ),
    responses(
        (status = 200, description = "The bytes, as an attachment, with the artifact's media type",
         body = Vec<u8>, content_type = "application/octet-stream"),
        (status = 403, description = "The link expired: ask the artifact endpoint for a new one",
         content_type = "application/problem+json", body = super::problem::Problem),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    )
)]
pub async fn download(
    req: HttpRequest,
    path: web::Path<String>,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let uid = path.into_inner();
    // A forged or altered link is indistinguishable from no link at all.
    let missing = || ApiError::not_found("no such download");
    let query = req.query_string();
    let expires: u64 = query_param(query, "expires")
        .and_then(|e| e.parse().ok())
        .ok_or_else(missing)?;
    let given = query_param(query, "token").unwrap_or_default();
    let expected = download_token(&state.session_secret, &uid, expires);
    if !bool::from(expected.as_bytes().ct_eq(given.as_bytes())) {
        return Err(missing());
    }
    if runledger_base::clock::now().0 / 1000 > expires {
        return Err(ApiError::forbidden(
            "this download link expired; ask GET /api/v1/agent/artifacts/{artifactUid} for a new one",
        ));
    }
    let (_, reported) = find(&state, None, &uid).await?.ok_or_else(missing)?;
    let (name, content) = match &reported.artifact.kind {
        ArtifactKind::File { path, content, .. }
        | ArtifactKind::Screenshot { path, content, .. } => (download_name(path), content.clone()),
        ArtifactKind::Plan { content, .. } => ("plan.md".to_string(), content.clone()),
        ArtifactKind::PullRequest { .. } => return Err(missing()),
    };
    let file = state.artifacts.open_content(&content)?;
    let mime: mime_guess::mime::Mime = content
        .mime_type
        .parse()
        .unwrap_or(mime_guess::mime::APPLICATION_OCTET_STREAM);
    let named = actix_files::NamedFile::from_file(file, &name)
        .map_err(|e| ApiError::internal(&e))?
        .set_content_type(mime)
        .set_content_disposition(header::ContentDisposition {
            disposition: header::DispositionType::Attachment,
            parameters: vec![header::DispositionParam::FilenameExt(
                header::ExtendedValue {
                    charset: header::Charset::Ext("UTF-8".into()),
                    language_tag: None,
                    value: name.into_bytes(),
                },
            )],
        })
        .use_etag(true)
        .use_last_modified(false);
    let mut response = named.into_response(&req);
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'; frame-ancestors 'none'"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, no-store"),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn download_names_cannot_break_the_header_or_name_a_path() {
        assert_eq!(download_name("dir/report.pdf"), "report.pdf");
        assert_eq!(download_name("a/x\"y\r\n.txt"), "x_y__.txt");
        assert_eq!(download_name("d/.."), "artifact");
        assert_eq!(download_name("résumé €.txt"), "résumé €.txt");
    }

    #[test]
    fn a_download_token_is_bound_to_its_uid_and_expiry() {
        let secret = [3u8; 32];
        let t = download_token(&secret, "u1", 100);
        assert_eq!(t.len(), 32);
        assert_ne!(t, download_token(&secret, "u1", 101));
        assert_ne!(t, download_token(&secret, "u2", 100));
        assert_ne!(t, download_token(&[4u8; 32], "u1", 100));
        // Never a session token: another purpose.
        assert_ne!(
            t,
            capability(&secret, b"session-link", &[&100u64.to_be_bytes(), b"u1"])
        );
    }
}
