//! The query strings of the endpoints that page or only check: a transcript's `offset` and
//! `limit`, the events' `after_seq` and `limit`, the agents list's accepted-and-ignored
//! options. The runs list's query is `list`.

use super::limits::{
    limit, DEFAULT_EVENTS_LIMIT, DEFAULT_TRANSCRIPT_LIMIT, MAX_EVENTS_LIMIT, MAX_TRANSCRIPT_LIMIT,
};
use crate::problem::ApiError;

/// Parses the transcript query string: `offset` (a byte offset, default 0) and `limit`
/// (entries, default 1,000). Parsed by hand, like `list_query`, so a bad value is refused with
/// a message that names the parameter.
pub fn transcript_query(raw: &str) -> Result<(u64, usize), ApiError> {
    let mut offset = 0;
    let mut entries = DEFAULT_TRANSCRIPT_LIMIT;
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        match key.as_ref() {
            "offset" => {
                // File offsets are signed 64-bit; a larger one names no place in any transcript.
                offset = value
                    .parse::<u64>()
                    .ok()
                    .filter(|&o| o <= i64::MAX as u64)
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "offset must be an integer from 0 to {}: 0, or an offset this endpoint returned",
                            i64::MAX
                        ))
                    })?
            }
            "limit" => entries = limit(&value, MAX_TRANSCRIPT_LIMIT)?,
            _ => {}
        }
    }
    Ok((offset, entries))
}

/// `after_seq` and `limit` of the events endpoint: the first sequence number to answer (0
/// without `after_seq`) and the most events.
pub fn events_query(raw: &str) -> Result<(u64, usize), ApiError> {
    let mut from = 0;
    let mut events = DEFAULT_EVENTS_LIMIT;
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        match key.as_ref() {
            "after_seq" => {
                from = value
                    .parse::<u64>()
                    .ok()
                    .and_then(|seq| seq.checked_add(1))
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "after_seq must be an integer from 0 to {}: the seq of an event, or a `next` this endpoint returned",
                            u64::MAX - 1
                        ))
                    })?
            }
            "limit" => events = limit(&value, MAX_EVENTS_LIMIT)?,
            _ => {}
        }
    }
    Ok((from, events))
}

/// Checks the query of `GET /agent` (the agents list): `repo` (`owner/repo`, GitHub's
/// characters), `sort_by` (`name` or `last_run`), `refresh` and `include_malformed_skills`
/// (`true` or `false`). Each is accepted for the clients' sake and changes nothing: runledger
/// declares no skills to list, sort, refresh or find malformed. Other parameters are ignored,
/// as on every list.
pub fn agents_query(raw: &str) -> Result<(), ApiError> {
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        match key.as_ref() {
            "repo" => {
                let valid = value.split_once('/').is_some_and(|(owner, name)| {
                    let part = |s: &str, extra: &[char]| {
                        !s.is_empty()
                            && s.len() <= 100
                            && s.chars().all(|c| {
                                c.is_ascii_alphanumeric() || c == '-' || extra.contains(&c)
                            })
                    };
                    part(owner, &[]) && part(name, &['.', '_']) && name != "." && name != ".."
                });
                if !valid {
                    return Err(ApiError::bad_request(format!(
                        "repo must be owner/repo (GitHub's letters, digits, '-', and '.' or '_' \
                         in the name), not {:?}",
                        truncated(&value)
                    )));
                }
            }
            "sort_by" if !matches!(value.as_ref(), "name" | "last_run") => {
                return Err(ApiError::bad_request(format!(
                    "sort_by must be name or last_run, not {:?}",
                    truncated(&value)
                )));
            }
            "refresh" | "include_malformed_skills"
                if !matches!(value.as_ref(), "true" | "false") =>
            {
                return Err(ApiError::bad_request(format!(
                    "{key} must be true or false, not {:?}",
                    truncated(&value)
                )));
            }
            _ => {}
        }
    }
    Ok(())
}

/// At most 64 characters of a value, for an error message.
fn truncated(value: &str) -> String {
    value.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::test_support::refusal;

    #[test]
    fn agents_query_accepts_the_documented_values_only() {
        for good in [
            "",
            "repo=acme/tools&sort_by=name&refresh=true&include_malformed_skills=false",
            "repo=a-b/c.d_e&sort_by=last_run&refresh=false&include_malformed_skills=true",
            "other=anything",
        ] {
            assert!(agents_query(good).is_ok(), "{good}");
        }
        for bad in [
            "repo=",
            "repo=acme",
            "repo=acme/",
            "repo=/tools",
            "repo=a/b/c",
            "repo=acme/..",
            "repo=ac%20me/tools",
            "repo=acme/tools%00",
            "sort_by=date",
            "sort_by=",
            "refresh=yes",
            "include_malformed_skills=1",
        ] {
            let e = agents_query(bad).expect_err(bad);
            assert_eq!(e.status.as_u16(), 400, "{bad}");
        }
        let long = format!("repo={}/x", "a".repeat(101));
        assert!(agents_query(&long).is_err());
    }

    #[test]
    fn events_query_defaults_and_limits() {
        assert_eq!(events_query("").expect("valid"), (0, 1000));
        assert_eq!(
            events_query("after_seq=0&limit=10000&other=x").expect("valid"),
            (1, 10_000)
        );
        assert_eq!(
            events_query("after_seq=18446744073709551614").expect("valid"),
            (u64::MAX, 1000)
        );
        for bad in [
            "after_seq=-1",
            "after_seq=x",
            "after_seq=",
            "after_seq=18446744073709551615",
        ] {
            assert!(
                refusal(events_query(bad)).starts_with("after_seq must be"),
                "{bad}"
            );
        }
        for bad in ["limit=0", "limit=10001", "limit=many"] {
            assert_eq!(
                refusal(events_query(bad)),
                "limit must be an integer from 1 to 10000"
            );
        }
    }

    #[test]
    fn transcript_query_defaults_and_limits() {
        assert_eq!(transcript_query("").expect("valid"), (0, 1000));
        assert_eq!(
            transcript_query("offset=48213&limit=10000&other=x").expect("valid"),
            (48213, 10_000)
        );
        for bad in ["offset=-1", "offset=x", "offset="] {
            assert!(
                refusal(transcript_query(bad)).starts_with("offset must be"),
                "{bad}"
            );
        }
        for bad in ["limit=0", "limit=10001", "limit=many"] {
            assert_eq!(
                refusal(transcript_query(bad)),
                "limit must be an integer from 1 to 10000"
            );
        }
    }
}
