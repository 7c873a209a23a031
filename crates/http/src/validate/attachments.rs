//! A run create's attachments: their count, file names, media types and sizes checked, and
//! their base64 decoded into the uploads the run stores. Nothing else of the body.

use crate::problem::ApiError;
use crate::wire::AttachmentInput;
use runledger_runs::actor::Upload;

/// How many files one create may attach (the hosted service's limit).
pub const MAX_ATTACHMENTS: usize = 5;
/// The largest attachment, decoded.
pub const MAX_ATTACHMENT_BYTES: usize = 10 * 1024 * 1024;
/// The most a create's attachments may hold together, decoded.
pub const MAX_ATTACHMENTS_TOTAL_BYTES: usize = 20 * 1024 * 1024;
/// The longest attachment file name and media type.
pub const MAX_ATTACHMENT_NAME_BYTES: usize = 255;

/// Whether `name` can name a file in a directory without leaving it: one path component, no
/// control characters, at most `MAX_ATTACHMENT_NAME_BYTES`.
pub fn valid_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_ATTACHMENT_NAME_BYTES
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == '\\' || c.is_control())
}

/// Whether `mime` reads as a media type: `type/subtype` of token characters, then optional
/// `;` parameters of printable ASCII.
fn valid_media_type(mime: &str) -> bool {
    let token = |s: &str| {
        !s.is_empty()
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&^_.+-".contains(&b))
    };
    let (essence, params) = mime.split_once(';').unwrap_or((mime, ""));
    let Some((kind, subtype)) = essence.trim().split_once('/') else {
        return false;
    };
    mime.len() <= MAX_ATTACHMENT_NAME_BYTES
        && token(kind)
        && token(subtype)
        && params.bytes().all(|b| (0x20..0x7f).contains(&b))
}

/// Checks and decodes a create's attachments: count, names, media types, sizes.
pub(super) fn attachments(list: Option<Vec<AttachmentInput>>) -> Result<Vec<Upload>, ApiError> {
    use base64::Engine;
    let list = list.unwrap_or_default();
    if list.len() > MAX_ATTACHMENTS {
        return Err(ApiError::bad_request(format!(
            "attachments: at most {MAX_ATTACHMENTS} files may be attached to a run, not {}",
            list.len()
        )));
    }
    let engine = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new()
            .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
    );
    let mut uploads: Vec<Upload> = Vec::with_capacity(list.len());
    let mut total = 0usize;
    for (i, a) in list.into_iter().enumerate() {
        let at = format!("attachments[{i}]");
        if !valid_file_name(&a.file_name) {
            return Err(ApiError::bad_request(format!(
                "{at}.file_name must be a file name: 1-{MAX_ATTACHMENT_NAME_BYTES} bytes, one \
                 path component (no '/', '\\', control characters), not '.' or '..'"
            )));
        }
        if uploads.iter().any(|u| u.file_name == a.file_name) {
            return Err(ApiError::bad_request(format!(
                "{at}.file_name {:?} is attached twice",
                a.file_name
            )));
        }
        if !valid_media_type(&a.mime_type) {
            return Err(ApiError::bad_request(format!(
                "{at}.mime_type must be a media type such as image/png or text/plain"
            )));
        }
        // Refused before decoding: base64 holds 3 bytes in every 4 characters.
        let too_large = || {
            ApiError::bad_request(format!(
                "{at} ({:?}) is larger than the limit of {MAX_ATTACHMENT_BYTES} bytes per \
                 attachment",
                a.file_name
            ))
        };
        if a.data.len() / 4 * 3 > MAX_ATTACHMENT_BYTES + 3 {
            return Err(too_large());
        }
        let bytes = engine.decode(a.data.as_bytes()).map_err(|e| {
            ApiError::bad_request(format!("{at}.data is not base64 (standard alphabet): {e}"))
        })?;
        if bytes.len() > MAX_ATTACHMENT_BYTES {
            return Err(too_large());
        }
        total += bytes.len();
        if total > MAX_ATTACHMENTS_TOTAL_BYTES {
            return Err(ApiError::bad_request(format!(
                "attachments are larger than the limit of {MAX_ATTACHMENTS_TOTAL_BYTES} bytes \
                 together"
            )));
        }
        uploads.push(Upload {
            file_name: a.file_name,
            mime_type: a.mime_type,
            bytes,
        });
    }
    Ok(uploads)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attachment_names_and_media_types() {
        for good in [
            "a.txt",
            "notes é.md",
            ".hidden",
            "..x",
            "a b",
            &"x".repeat(255),
        ] {
            assert!(valid_file_name(good), "{good:?}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "/etc",
            "a\\b",
            "a\0b",
            "tab\there",
            &"x".repeat(256),
        ] {
            assert!(!valid_file_name(bad), "{bad:?}");
        }
        for good in [
            "image/png",
            "text/plain; charset=utf-8",
            "application/vnd.a+json",
        ] {
            assert!(valid_media_type(good), "{good:?}");
        }
        for bad in [
            "",
            "text",
            "/plain",
            "text/",
            "te xt/plain",
            "text/plain\r\nX: y",
        ] {
            assert!(!valid_media_type(bad), "{bad:?}");
        }
    }

    #[test]
    fn attachments_decode_with_or_without_padding() {
        let input = |data: &str| {
            Some(vec![AttachmentInput {
                file_name: "f".into(),
                mime_type: "text/plain".into(),
                data: data.into(),
            }])
        };
        assert_eq!(attachments(input("aGk=")).expect("padded")[0].bytes, b"hi");
        assert_eq!(attachments(input("aGk")).expect("unpadded")[0].bytes, b"hi");
        assert!(attachments(input("aG k=")).is_err());
        assert!(attachments(None).expect("none").is_empty());
    }
}
