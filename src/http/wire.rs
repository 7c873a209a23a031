//! JSON wire types of the v1 API (OpenAPI `RunAgentRequest`, `RunItem`, …) and their mapping
//! to and from the domain. Field names and enums follow the OpenAPI document; optional fields
//! are omitted rather than sent as null, because the official clients validate strictly.
//!
//! Each type also carries its schema in our own document (`/openapi.json`): what a handler
//! serialises is what the document describes. String fields that hold a domain enum's wire
//! name say so with `value_type`, pointing at a schema built from that enum's values.

use std::collections::BTreeMap;

use std::borrow::Cow;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;
use utoipa::openapi::schema::{ObjectBuilder, Schema, SchemaType, Type};
use utoipa::openapi::RefOr;
use utoipa::ToSchema;

use crate::domain::{
    AgentConfig, CostSource, Creator, CreatorKind, Event, ExecutionUsage, FollowupMode,
    InferenceCost, McpServer, Run, RunId, RunState, RunUsage, SourceType, StatusMessage, Timestamp,
    Tokens,
};
use crate::store::api_keys::{KeyKind, KeyRecord};

/// A short ASCII string built on the stack and serialised as a JSON string. A list renders
/// the id, times and session id of twenty runs; a heap string for each was a visible share of
/// its CPU.
#[derive(Clone, Copy)]
pub struct Inline<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Inline<N> {
    fn new() -> Self {
        Inline {
            buf: [0; N],
            len: 0,
        }
    }

    /// Appends an ASCII byte. Callers size `N` for their longest output; a byte past it would
    /// be dropped, never written out of bounds.
    fn push(&mut self, byte: u8) {
        debug_assert!(byte.is_ascii() && self.len < N);
        if let Some(slot) = self.buf.get_mut(self.len) {
            *slot = byte;
            self.len += 1;
        }
    }

    fn push_str(&mut self, s: &str) {
        s.bytes().for_each(|b| self.push(b));
    }

    pub fn as_str(&self) -> &str {
        // Only ASCII is ever pushed, so this cannot fail.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

impl<const N: usize> std::ops::Deref for Inline<N> {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl<const N: usize> std::fmt::Display for Inline<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<const N: usize> std::fmt::Debug for Inline<N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const N: usize> Serialize for Inline<N> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// A run id as its 26 ULID characters.
pub fn id_text(id: RunId) -> Inline<{ ulid::ULID_LEN }> {
    let mut out = Inline::new();
    let mut buf = [0u8; ulid::ULID_LEN];
    out.push_str(ulid::Ulid(id.0).array_to_str(&mut buf));
    out
}

/// The longest `time_text`: a sign, up to 20 digits of year, and `-MM-DDTHH:MM:SS.mmmZ`.
const TIME_TEXT: usize = 1 + 20 + 20;

/// RFC 3339, UTC, millisecond precision: `2026-11-21T23:41:29.123Z`. Written by hand (days to
/// civil date, after Howard Hinnant's algorithm): list responses format three times per run.
pub fn time_text(t: Timestamp) -> Inline<TIME_TEXT> {
    let ms = t.0;
    let days = (ms / 86_400_000) as i64;
    let of_day = ms % 86_400_000;
    let (hour, minute, second, milli) = (
        of_day / 3_600_000,
        of_day / 60_000 % 60,
        of_day / 1000 % 60,
        of_day % 1000,
    );
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    // Written digit by digit: `format!` with padding was a visible share of a list's CPU.
    let mut out = Inline::new();
    if year < 0 {
        out.push(b'-');
    }
    push_padded(&mut out, year.unsigned_abs(), 4);
    out.push(b'-');
    push_padded(&mut out, month as u64, 2);
    out.push(b'-');
    push_padded(&mut out, day as u64, 2);
    out.push(b'T');
    push_padded(&mut out, hour, 2);
    out.push(b':');
    push_padded(&mut out, minute, 2);
    out.push(b':');
    push_padded(&mut out, second, 2);
    out.push(b'.');
    push_padded(&mut out, milli, 3);
    out.push(b'Z');
    out
}

/// `time_text` as a `String`.
pub fn format_time(t: Timestamp) -> String {
    time_text(t).as_str().to_string()
}

/// Appends `n` in decimal, zero-padded to at least `width` digits.
fn push_padded<const N: usize>(out: &mut Inline<N>, n: u64, width: usize) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut rest = n;
    loop {
        i -= 1;
        digits[i] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    for _ in (digits.len() - i)..width {
        out.push(b'0');
    }
    for &d in &digits[i..] {
        out.push(d);
    }
}

/// The exact inverse of `format_time`: only its own output is accepted (one spelling per
/// instant), so a value read back renders to the same bytes. For backups, which must restore
/// every event's time to the millisecond.
pub fn parse_exact_time(s: &str) -> Option<Timestamp> {
    fn number(digits: &str, len: std::ops::RangeInclusive<usize>) -> Option<i128> {
        if !len.contains(&digits.len()) || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse().ok()
    }
    let (date, time) = s.strip_suffix('Z')?.split_once('T')?;
    let (year, rest) = date.split_once('-')?;
    let (month, day) = rest.split_once('-')?;
    let (hms, milli) = time.split_once('.')?;
    let mut hms = hms.split(':');
    let (hour, minute, second) = (hms.next()?, hms.next()?, hms.next()?);
    if hms.next().is_some() {
        return None;
    }
    // Years beyond four digits do occur: `format_time` renders any u64 of milliseconds.
    let (year, month, day) = (
        number(year, 4..=12)?,
        number(month, 2..=2)?,
        number(day, 2..=2)?,
    );
    // Days from the civil date (Howard Hinnant's `days_from_civil`, the inverse of the
    // algorithm in `format_time`).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let ms = days * 86_400_000
        + number(hour, 2..=2)? * 3_600_000
        + number(minute, 2..=2)? * 60_000
        + number(second, 2..=2)? * 1000
        + number(milli, 3..=3)?;
    let t = Timestamp(u64::try_from(ms).ok()?);
    // Out-of-range fields (month 13, February 30, 24:00) map to some other instant; only
    // the canonical spelling survives this check.
    (format_time(t) == s).then_some(t)
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX_DIGITS[usize::from(b >> 4)]));
        out.push(char::from(HEX_DIGITS[usize::from(b & 15)]));
    }
    out
}

/// Parses an RFC 3339 time (a missing offset is read as UTC) into nanoseconds since the epoch.
pub fn parse_time(s: &str) -> Option<i128> {
    if let Ok(dt) = OffsetDateTime::parse(s, &Rfc3339) {
        return Some(dt.unix_timestamp_nanos());
    }
    let with_zone = format!("{s}Z");
    OffsetDateTime::parse(&with_zone, &Rfc3339)
        .ok()
        .map(|dt| dt.unix_timestamp_nanos())
}

/// ISO 8601 duration, e.g. `PT2M30.5S`. At most `PT`, 17 digits of hours, `H`, `59M` and
/// `59.999S`.
pub fn format_duration(ms: u64) -> Inline<32> {
    let hours = ms / 3_600_000;
    let minutes = (ms / 60_000) % 60;
    let seconds = (ms % 60_000) / 1000;
    let millis = ms % 1000;
    let mut out = Inline::new();
    out.push_str("PT");
    if hours > 0 {
        push_padded(&mut out, hours, 1);
        out.push(b'H');
    }
    if minutes > 0 {
        push_padded(&mut out, minutes, 1);
        out.push(b'M');
    }
    if millis > 0 {
        push_padded(&mut out, seconds, 1);
        out.push(b'.');
        push_padded(&mut out, millis, 3);
        out.push(b'S');
    } else if seconds > 0 || (hours == 0 && minutes == 0) {
        push_padded(&mut out, seconds, 1);
        out.push(b'S');
    }
    out
}

/// A session id in UUID form, derived from the run id (one session per run).
pub fn session_id(id: RunId) -> Inline<36> {
    let mut out = Inline::new();
    for (i, b) in id.0.to_be_bytes().into_iter().enumerate() {
        if matches!(i, 4 | 6 | 8 | 10) {
            out.push(b'-');
        }
        out.push(HEX_DIGITS[usize::from(b >> 4)]);
        out.push(HEX_DIGITS[usize::from(b & 15)]);
    }
    out
}

/// Tokens remembered per thread by `session_token` before its memo is cleared.
const TOKEN_MEMO: usize = 4096;

/// `session_token`'s memo: the tokens of recently rendered runs under one secret.
struct TokenMemo {
    secret: [u8; 32],
    tokens: crate::memo::Memo<RunId, String>,
}

thread_local! {
    static TOKENS: std::cell::RefCell<TokenMemo> = std::cell::RefCell::new(TokenMemo {
        secret: [0; 32],
        tokens: crate::memo::Memo::new(TOKEN_MEMO),
    });
}

/// The capability token of a run's session page. Every started run in a list or a get carries
/// one, and SHA-256 costs about 0.7 µs here (no SHA instructions on this CPU): a page of 20 runs
/// spent 13 % of a list's CPU on them. Clients poll the same runs over and over, so each
/// thread remembers the tokens of the last few thousand runs it rendered.
pub fn session_token(secret: &[u8; 32], id: RunId) -> String {
    let compute = || {
        let mut h = Sha256::new();
        h.update(secret);
        h.update(b"session-link");
        h.update(id.to_bytes());
        hex(&h.finalize()[..16])
    };
    TOKENS.with(|memo| {
        let Ok(mut memo) = memo.try_borrow_mut() else {
            return compute();
        };
        if memo.secret != *secret {
            memo.secret = *secret;
            memo.tokens.clear();
        }
        memo.tokens.get_or_compute(&id, compute)
    })
}

// ---- schemas of string enums ----

/// A string schema listing `values`.
fn string_enum(description: &str, values: impl IntoIterator<Item = &'static str>) -> Schema {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .enum_values(Some(values))
        .into()
}

/// Declares a type that is never constructed: it only lends a string-enum schema to
/// `#[schema(value_type = ...)]`. The values come from the code that produces or parses them
/// (a domain enum's `ALL` and `as_str`, or a parser's table), so the document cannot list a
/// value the service never sends or refuses.
macro_rules! string_enum_schema {
    ($(#[doc = $doc:literal])+ $ty:ident as $name:literal = $values:expr) => {
        $(#[doc = $doc])+
        pub enum $ty {}

        impl utoipa::PartialSchema for $ty {
            fn schema() -> RefOr<Schema> {
                string_enum(concat!($($doc),+).trim(), $values).into()
            }
        }

        impl ToSchema for $ty {
            fn name() -> Cow<'static, str> {
                Cow::Borrowed($name)
            }
        }
    };
}

string_enum_schema! {
    /// State of a run. runledger's runs take only these states of the OpenAPI `RunState`.
    RunStateSchema as "RunState" = RunState::ALL.map(RunState::as_str)
}

string_enum_schema! {
    /// Source that created the run (OpenAPI `RunSourceType`).
    SourceTypeSchema as "RunSourceType" = SourceType::ALL.map(SourceType::as_str)
}

string_enum_schema! {
    /// How the agent should treat a follow-up message.
    FollowupModeSchema as "FollowupMode" = FollowupMode::ALL.map(FollowupMode::as_str)
}

string_enum_schema! {
    /// Kind of an API key: `personal` keys attribute runs to their user, `agent` keys to a
    /// service account.
    KeyKindSchema as "ApiKeyKind" = KeyKind::ALL.map(KeyKind::as_str)
}

/// The OpenAPI `PlatformErrorCode` values. runledger's failures use `environment_setup_failed`
/// and `internal_error`; its problem responses use the codes in `http/problem.rs`.
pub const PLATFORM_ERROR_CODES: [&str; 16] = [
    "insufficient_credits",
    "feature_not_available",
    "external_authentication_required",
    "not_authorized",
    "invalid_request",
    "resource_not_found",
    "budget_exceeded",
    "integration_disabled",
    "integration_not_configured",
    "operation_not_supported",
    "environment_setup_failed",
    "content_policy_violation",
    "conflict",
    "authentication_required",
    "resource_unavailable",
    "internal_error",
];

string_enum_schema! {
    /// Machine-readable error code (OpenAPI `PlatformErrorCode`).
    PlatformErrorCodeSchema as "PlatformErrorCode" = PLATFORM_ERROR_CODES
}

string_enum_schema! {
    /// Sort field of a list query.
    SortBySchema as "SortBy" = super::validate::SORT_BY.map(|(name, _)| name)
}

string_enum_schema! {
    /// Sort direction of a list query.
    SortOrderSchema as "SortOrder" = super::validate::SORT_ORDER.map(|(name, _)| name)
}

string_enum_schema! {
    /// A `state` filter: runledger's states, and the hosted service's others, which match
    /// nothing.
    StateFilterSchema as "RunStateFilter" = RunState::ALL
        .map(RunState::as_str)
        .into_iter()
        .chain(super::validate::FOREIGN_STATES)
}

/// The `metadata[key]=value` filters of a list query.
pub enum MetadataFilterSchema {}

impl utoipa::PartialSchema for MetadataFilterSchema {
    fn schema() -> RefOr<Schema> {
        metadata_map(ObjectBuilder::new().schema_type(Type::Object))
            .max_properties(Some(super::validate::MAX_METADATA_FILTERS))
            .into()
    }
}

impl ToSchema for MetadataFilterSchema {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("MetadataFilter")
    }
}

// ---- requests ----

/// An MCP server for the agent (OpenAPI `MCPServerConfig`). Exactly one of `warp_id`,
/// `command` and `url` must be set. `args`, `env` and `headers` together hold at most 8192
/// bytes.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = MCPServerConfigRequest)]
pub struct McpServerIn {
    /// Reference to a shared MCP server (passed to the agent as given). At most 2048 bytes.
    #[schema(min_length = 1, max_length = 2048)]
    pub warp_id: Option<String>,
    /// Stdio transport: the command to run. At most 2048 bytes.
    #[schema(min_length = 1, max_length = 2048)]
    pub command: Option<String>,
    /// Stdio transport: the command's arguments.
    pub args: Option<Vec<String>>,
    /// SSE/HTTP transport: an `http://` or `https://` URL without whitespace. At most 2048 bytes.
    #[schema(max_length = 2048, pattern = r"^https?://\S+$")]
    pub url: Option<String>,
    /// Environment variables for the server.
    pub env: Option<BTreeMap<String, String>>,
    /// HTTP headers for the SSE/HTTP transport.
    pub headers: Option<BTreeMap<String, String>>,
}

/// The domain value of a (validated, or exported and so once validated) MCP server.
impl From<McpServerIn> for McpServer {
    fn from(s: McpServerIn) -> McpServer {
        McpServer {
            warp_id: s.warp_id,
            command: s.command,
            args: s.args.unwrap_or_default(),
            url: s.url,
            env: s.env.unwrap_or_default(),
            headers: s.headers.unwrap_or_default(),
        }
    }
}

/// The agent configuration of a create request (OpenAPI `AmbientAgentConfig`). Other fields
/// of the hosted service's config are accepted and ignored.
#[derive(Debug, Deserialize, ToSchema)]
#[schema(as = AgentConfigRequest)]
pub struct AgentConfigIn {
    /// Label for grouping and filtering; set from the skill when absent. 1–256 bytes.
    #[schema(min_length = 1, max_length = 256)]
    pub name: Option<String>,
    /// Model to use; the environment's `model_id` when absent. 1–256 bytes.
    #[schema(min_length = 1, max_length = 256)]
    pub model_id: Option<String>,
    /// Custom base prompt for the agent. At most 16 KiB.
    #[schema(max_length = 16384)]
    pub base_prompt: Option<String>,
    /// A configured environment's id; the first configured environment when absent.
    #[schema(min_length = 1, max_length = 256)]
    pub environment_id: Option<String>,
    /// `owner/repo:skill-name` or `owner/repo:path/to/SKILL.md`. At most 256 bytes. (The
    /// pattern is the shape; `validate::skill_name` checks more, such as no `..` in a path.)
    #[schema(max_length = 256, pattern = r"^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+:\S+$")]
    pub skill_spec: Option<String>,
    /// MCP servers by name (names 1–64 bytes), at most 16.
    pub mcp_servers: Option<BTreeMap<String, McpServerIn>>,
}

/// Metadata of a create request: at most 20 keys of 1–64 characters `[A-Za-z0-9._-]`, each
/// value at most 256 bytes without NUL.
fn metadata_request_schema() -> Schema {
    metadata_map(ObjectBuilder::new())
        .schema_type(SchemaType::from_iter([Type::Object, Type::Null]))
        .description(Some(
            "Free-form labels: at most 20 keys of 1-64 characters [A-Za-z0-9._-], each value \
             at most 256 bytes without NUL.",
        ))
        .max_properties(Some(super::validate::MAX_METADATA_KEYS))
        .into()
}

/// The key and value rules every metadata map shares (checked by `validate::metadata_pair`).
fn metadata_map(object: ObjectBuilder) -> ObjectBuilder {
    object
        .property_names(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some(METADATA_KEY_PATTERN)),
        ))
        .additional_properties(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .max_length(Some(256)),
        ))
}

/// What a metadata key must match (checked by `validate::metadata_pair`).
pub const METADATA_KEY_PATTERN: &str = "^[A-Za-z0-9._-]{1,64}$";

/// Request body of a create (OpenAPI `RunAgentRequest`). Either `prompt` or a skill (`skill`
/// or `config.skill_spec`) is required. Other fields of the hosted service's request are
/// accepted and ignored.
#[derive(Debug, Deserialize, ToSchema)]
pub struct RunAgentRequest {
    /// The instruction for the agent. At most 64 KiB; required unless a skill is given.
    #[schema(max_length = 65536)]
    pub prompt: Option<String>,
    /// Skill to run (`owner/repo:skill-name` or `owner/repo:path/to/SKILL.md`); takes
    /// precedence over `config.skill_spec`. At most 256 bytes.
    #[schema(max_length = 256, pattern = r"^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+:\S+$")]
    pub skill: Option<String>,
    pub config: Option<AgentConfigIn>,
    /// Title of the run (at most 256 characters, not blank); generated from the prompt when
    /// absent.
    #[schema(min_length = 1, max_length = 256)]
    pub title: Option<String>,
    #[schema(schema_with = metadata_request_schema)]
    pub metadata: Option<BTreeMap<String, String>>,
}

/// Request body of a follow-up.
#[derive(Debug, Deserialize, ToSchema)]
pub struct FollowupRequest {
    /// The message for the agent: not blank, at most 64 KiB. (Optional for serde so that a
    /// missing message gets a precise 400.)
    #[schema(value_type = String, required = true, min_length = 1, max_length = 65536,
             pattern = r"\S")]
    pub message: Option<String>,
    /// `normal` when absent.
    #[schema(value_type = Option<FollowupModeSchema>)]
    pub mode: Option<String>,
}

// ---- responses ----

/// Answer of a create (OpenAPI `RunAgentResponse`).
#[derive(Debug, Serialize, ToSchema)]
pub struct RunAgentResponse {
    pub run_id: String,
    /// The same as `run_id`.
    #[schema(deprecated)]
    pub task_id: String,
    #[schema(value_type = RunStateSchema)]
    pub state: &'static str,
    /// Whether the run had to wait for a free slot of its environment when it was queued.
    pub at_capacity: bool,
}

/// An MCP server as stored (OpenAPI `MCPServerConfig`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = MCPServerConfig)]
pub struct McpServerOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub warp_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub command: Option<&'a str>,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    #[schema(value_type = Vec<String>)]
    pub args: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, format = "uri")]
    pub url: Option<&'a str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub env: &'a BTreeMap<String, String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub headers: &'a BTreeMap<String, String>,
}

/// The resolved configuration of a run (OpenAPI `AmbientAgentConfig`): `model_id` and
/// `environment_id` are always filled in.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AmbientAgentConfig)]
pub struct AgentConfigOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub model_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub base_prompt: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub environment_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub skill_spec: Option<&'a str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = BTreeMap<String, McpServerOut>)]
    pub mcp_servers: BTreeMap<&'a str, McpServerOut<'a>>,
}

impl<'a> AgentConfigOut<'a> {
    pub fn from(c: &'a AgentConfig) -> Self {
        AgentConfigOut {
            name: c.name.as_deref(),
            model_id: c.model_id.as_deref(),
            base_prompt: c.base_prompt.as_deref(),
            environment_id: c.environment_id.as_deref(),
            skill_spec: c.skill_spec.as_deref(),
            mcp_servers: c
                .mcp_servers
                .iter()
                .map(|(k, s): (&'a String, &'a McpServer)| {
                    (
                        k.as_str(),
                        McpServerOut {
                            warp_id: s.warp_id.as_deref(),
                            command: s.command.as_deref(),
                            args: &s.args,
                            url: s.url.as_deref(),
                            env: &s.env,
                            headers: &s.headers,
                        },
                    )
                })
                .collect(),
        }
    }
}

/// Who created a run: the kind of its API key.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CreatorType {
    User,
    ServiceAccount,
}

impl From<CreatorKind> for CreatorType {
    fn from(k: CreatorKind) -> CreatorType {
        match k {
            CreatorKind::User => CreatorType::User,
            CreatorKind::ServiceAccount => CreatorType::ServiceAccount,
        }
    }
}

/// The creator of a run (OpenAPI `RunCreatorInfo`): `uid` and `display_name` are the id and
/// name of the API key that created it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RunCreatorInfo)]
pub struct CreatorOut<'a> {
    #[serde(rename = "type")]
    pub kind: CreatorType,
    #[schema(value_type = String)]
    pub uid: &'a str,
    #[schema(value_type = String)]
    pub display_name: &'a str,
}

impl<'a> CreatorOut<'a> {
    pub fn from(c: &'a Creator) -> Self {
        CreatorOut {
            kind: c.kind.into(),
            uid: &c.uid,
            display_name: &c.display_name,
        }
    }
}

/// Why a run failed (OpenAPI `RunStatusMessage`).
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RunStatusMessage)]
pub struct StatusMessageOut<'a> {
    #[schema(value_type = String)]
    pub message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = PlatformErrorCodeSchema)]
    pub error_code: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub retryable: Option<bool>,
}

impl<'a> StatusMessageOut<'a> {
    pub fn from(s: &'a StatusMessage) -> Self {
        StatusMessageOut {
            message: &s.message,
            error_code: s.error_code.as_deref(),
            retryable: s.retryable,
        }
    }
}

/// One run in full (OpenAPI `RunItem`). Absent optional fields are omitted, never null.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunItem<'a> {
    /// A ULID: 26 Crockford base-32 characters whose time part is `created_at`.
    #[schema(value_type = String)]
    pub run_id: Inline<{ ulid::ULID_LEN }>,
    /// The same as `run_id`.
    #[schema(deprecated, value_type = String)]
    pub task_id: Inline<{ ulid::ULID_LEN }>,
    #[schema(value_type = String)]
    pub title: &'a str,
    #[schema(value_type = RunStateSchema)]
    pub state: &'static str,
    #[schema(value_type = String)]
    pub prompt: &'a str,
    #[schema(value_type = String, format = DateTime)]
    pub created_at: Inline<TIME_TEXT>,
    #[schema(value_type = String, format = DateTime)]
    pub updated_at: Inline<TIME_TEXT>,
    /// Start of the first execution.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, format = DateTime)]
    pub started_at: Option<Inline<TIME_TEXT>>,
    #[schema(value_type = SourceTypeSchema)]
    pub source: &'static str,
    pub creator: CreatorOut<'a>,
    pub agent_config: AgentConfigOut<'a>,
    /// The run id's 128 bits as a UUID; set once an execution has started.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, format = "uuid")]
    pub session_id: Option<Inline<36>>,
    /// The run's transcript page, openable without an API key; set once an execution has
    /// started.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String, format = "uri")]
    pub session_link: Option<String>,
    /// Set while the run is `FAILED`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = StatusMessageOut)]
    pub status_message: Option<StatusMessageOut<'a>>,
    /// ISO 8601 duration of all executions so far, e.g. `PT2.004S`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub run_time: Option<Inline<32>>,
    /// What the run's executions cost, summed; present once one of them recorded a cost.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = RequestUsage)]
    pub request_usage: Option<RequestUsage>,
    /// The metadata given at create, when there is any.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    #[schema(value_type = BTreeMap<String, String>)]
    pub metadata: &'a BTreeMap<String, String>,
}

/// What a run cost, in US dollars (OpenAPI `RequestUsage`). A cost nobody could tell (no
/// report from the CLI and no configured price; CPU time not measurable on the host) is
/// omitted, never sent as 0.
#[derive(Debug, Serialize, ToSchema)]
pub struct RequestUsage {
    /// Inference: the CLI's own cost report, otherwise its tokens at the configured prices.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = Double, nullable = false)]
    pub inference_cost: Option<f64>,
    /// Compute: the CPU time of the executions at the configured price.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = Double, nullable = false)]
    pub compute_cost: Option<f64>,
}

/// Nano-dollars as dollars.
pub fn usd(nano_usd: u64) -> f64 {
    nano_usd as f64 / 1e9
}

impl RequestUsage {
    /// `None` while neither cost is known.
    pub fn from(usage: &RunUsage) -> Option<Self> {
        let out = RequestUsage {
            inference_cost: usage.inference_nano_usd.map(usd),
            compute_cost: usage.compute_nano_usd.map(usd),
        };
        (out.inference_cost.is_some() || out.compute_cost.is_some()).then_some(out)
    }
}

/// What a `RunItem` needs beyond the run itself.
pub struct Links<'a> {
    pub public_url: &'a str,
    pub secret: &'a [u8; 32],
    pub now: Timestamp,
}

impl<'a> RunItem<'a> {
    pub fn from(run: &'a Run, links: &Links<'_>) -> Self {
        let id = id_text(run.id);
        let session = run.has_session();
        RunItem {
            task_id: id,
            title: &run.title,
            state: run.state.as_str(),
            prompt: &run.prompt,
            created_at: time_text(run.created_at),
            updated_at: time_text(run.updated_at),
            started_at: run.started_at.map(time_text),
            source: run.source.as_str(),
            creator: CreatorOut::from(&run.creator),
            agent_config: AgentConfigOut::from(&run.config),
            session_id: session.then(|| session_id(run.id)),
            session_link: session.then(|| {
                format!(
                    "{}/sessions/{id}?token={}",
                    links.public_url,
                    session_token(links.secret, run.id)
                )
            }),
            status_message: run.status_message.as_ref().map(StatusMessageOut::from),
            run_time: session.then(|| format_duration(run.run_time_ms(links.now))),
            request_usage: RequestUsage::from(&run.usage),
            metadata: &run.metadata,
            run_id: id,
        }
    }
}

/// Paging state of a list answer (OpenAPI `PageInfo`).
#[derive(Debug, Serialize, ToSchema)]
pub struct PageInfo {
    /// Exact: the server looks one match ahead.
    pub has_next_page: bool,
    /// Opaque; present exactly when `has_next_page` is true. Valid only with the same filters
    /// and sort.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub next_cursor: Option<String>,
}

/// One page of runs (OpenAPI `ListRunsResponse`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ListRunsResponse<'a> {
    pub runs: Vec<RunItem<'a>>,
    pub page_info: PageInfo,
}

/// Answer of a follow-up: the run's state after it (`QUEUED` when it resumed a finished run).
#[derive(Debug, Serialize, ToSchema)]
pub struct FollowupResponse {
    pub run_id: String,
    #[schema(value_type = RunStateSchema)]
    pub state: &'static str,
}

/// The payload of a `Created` event.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedData<'a> {
    #[schema(value_type = String)]
    pub title: &'a str,
    #[schema(value_type = String)]
    pub prompt: &'a str,
    pub config: AgentConfigOut<'a>,
    pub creator: CreatorOut<'a>,
    #[schema(value_type = SourceTypeSchema)]
    pub source: &'static str,
    #[schema(value_type = BTreeMap<String, String>)]
    pub metadata: &'a BTreeMap<String, String>,
}

/// An event's kind (`type`) and payload (`data`).
#[derive(Debug, Serialize, ToSchema)]
#[serde(tag = "type", content = "data")]
pub enum EventData<'a> {
    /// The run was accepted (always sequence 0).
    Created(CreatedData<'a>),
    /// An execution of the agent began; executions count from 1.
    Started { execution: u32 },
    /// A follow-up arrived from the API key `by`.
    FollowupReceived {
        #[schema(value_type = String)]
        message: &'a str,
        #[schema(value_type = FollowupModeSchema)]
        mode: &'static str,
        #[schema(value_type = String)]
        by: &'a str,
    },
    /// The execution ended successfully.
    Succeeded { execution: u32 },
    /// The execution ended in failure.
    Failed {
        execution: u32,
        status_message: StatusMessageOut<'a>,
    },
    /// The run was cancelled by the API key `by`.
    Cancelled {
        #[schema(value_type = String)]
        by: &'a str,
    },
    /// The execution took the next `count` follow-ups owed to it (handed at its start or
    /// received while it ran), oldest first.
    FollowupsDelivered { execution: u32, count: u32 },
    /// The execution ended without taking every follow-up owed to it; the run is queued again
    /// for them (the first resumes it). Follows that execution's `Succeeded` or `Failed`.
    Requeued { execution: u32 },
    /// What an execution used, priced when it was recorded; absent fields were not known.
    UsageRecorded(UsageData<'a>),
}

/// The payload of a `UsageRecorded` event. Costs are integers of nano-dollars (1e-9 USD), as
/// stored, so an export and import keep them exactly.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UsageData<'a> {
    pub execution: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = TokensData)]
    pub tokens: Option<TokensData>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub model: Option<Cow<'a, str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = InferenceCostData)]
    pub inference_cost: Option<InferenceCostData<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub cpu_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub compute_cost_nano_usd: Option<u64>,
}

/// Tokens an execution's CLI reported; `input` includes `cached_input`.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TokensData {
    pub input: u64,
    pub cached_input: u64,
    pub output: u64,
}

/// An inference cost and its source: `cli` (the CLI's own report) or `prices` (the configured
/// per-model prices).
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InferenceCostData<'a> {
    pub nano_usd: u64,
    #[schema(value_type = String)]
    pub source: Cow<'a, str>,
}

impl<'a> UsageData<'a> {
    fn from(execution: u32, u: &'a ExecutionUsage) -> Self {
        UsageData {
            execution,
            tokens: u.tokens.map(|t| TokensData {
                input: t.input,
                cached_input: t.cached_input,
                output: t.output,
            }),
            model: u.model.as_deref().map(Cow::Borrowed),
            inference_cost: u.inference.map(|c| InferenceCostData {
                nano_usd: c.nano_usd,
                source: Cow::Borrowed(c.source.as_str()),
            }),
            cpu_ms: u.cpu_ms,
            compute_cost_nano_usd: u.compute_nano_usd,
        }
    }
}

/// One stored event of a run (the events endpoint, `runledger export` and `events --json`).
#[derive(Debug, Serialize, ToSchema)]
pub struct RunEvent<'a> {
    pub run_id: String,
    /// Position in the run's log, from 0.
    pub seq: u64,
    #[schema(format = DateTime)]
    pub at: String,
    #[serde(flatten)]
    pub event: EventData<'a>,
}

impl<'a> RunEvent<'a> {
    pub fn from(e: &'a crate::store::Envelope) -> Self {
        let event = match &e.event {
            Event::Created(c) => EventData::Created(CreatedData {
                title: &c.title,
                prompt: &c.prompt,
                config: AgentConfigOut::from(&c.config),
                creator: CreatorOut::from(&c.creator),
                source: c.source.as_str(),
                metadata: &c.metadata,
            }),
            Event::Started { execution } => EventData::Started {
                execution: *execution,
            },
            Event::FollowupReceived { message, mode, by } => EventData::FollowupReceived {
                message,
                mode: mode.as_str(),
                by,
            },
            Event::Succeeded { execution } => EventData::Succeeded {
                execution: *execution,
            },
            Event::Failed { execution, status } => EventData::Failed {
                execution: *execution,
                status_message: StatusMessageOut::from(status),
            },
            Event::Cancelled { by } => EventData::Cancelled { by },
            Event::FollowupsDelivered { execution, count } => EventData::FollowupsDelivered {
                execution: *execution,
                count: *count,
            },
            Event::Requeued { execution } => EventData::Requeued {
                execution: *execution,
            },
            Event::UsageRecorded { execution, usage } => {
                EventData::UsageRecorded(UsageData::from(*execution, usage))
            }
        };
        RunEvent {
            run_id: e.run_id.to_string(),
            seq: e.seq,
            at: format_time(e.at),
            event,
        }
    }
}

/// A page of a run's event history, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunEvents<'a> {
    pub run_id: String,
    pub events: Vec<RunEvent<'a>>,
    /// Present when the run has more events after this page: pass it as `after_seq` to get
    /// the next page. It is the `seq` of the page's last event.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<u64>,
}

/// One transcript entry.
#[derive(Debug, Serialize, ToSchema)]
pub struct TranscriptEntry<'a> {
    /// Byte offset of the entry in the transcript.
    pub offset: u64,
    #[schema(format = DateTime)]
    pub at: String,
    /// The execution that wrote it (0 for entries written before any execution).
    pub execution: u32,
    /// `stdout` or `stderr` (of the agent or a setup command), `system` (what the harness
    /// did) or `followup`.
    #[schema(value_type = String)]
    pub stream: &'a str,
    #[schema(value_type = String)]
    pub text: &'a str,
    /// The last line of `text` goes on in the next entry of the same stream and execution:
    /// join the two texts without a newline. Lines longer than 16 KiB are split this way.
    pub continued: bool,
}

/// One page of a run's transcript.
#[derive(Debug, Serialize, ToSchema)]
pub struct TranscriptPage<'a> {
    pub run_id: String,
    /// The run's state when the page was read.
    #[schema(value_type = RunStateSchema)]
    pub state: &'static str,
    pub entries: Vec<TranscriptEntry<'a>>,
    /// The `offset` to ask for next.
    pub next_offset: u64,
    /// Whether the transcript holds more after this page.
    pub has_more: bool,
}

/// What a client learns about an environment (OpenAPI `CloudEnvironmentConfig`).
#[derive(Debug, Serialize, ToSchema)]
pub struct CloudEnvironmentConfig<'a> {
    #[schema(value_type = String)]
    pub name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = String)]
    pub description: Option<&'a str>,
    #[schema(value_type = Vec<String>)]
    pub setup_commands: &'a [String],
}

/// A configured environment (OpenAPI `CloudEnvironment`).
#[derive(Debug, Serialize, ToSchema)]
pub struct CloudEnvironment<'a> {
    /// The id that `config.environment_id` names.
    #[schema(value_type = String)]
    pub uid: &'a str,
    pub config: CloudEnvironmentConfig<'a>,
    /// When the configuration was loaded.
    #[schema(format = DateTime)]
    pub last_updated: String,
    pub setup_failed: bool,
}

/// The configured environments, the default one first (OpenAPI `ListEnvironmentsResponse`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ListEnvironmentsResponse<'a> {
    pub environments: Vec<CloudEnvironment<'a>>,
}

/// An API key, without its secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKey<'a> {
    #[schema(value_type = String)]
    pub id: &'a str,
    #[schema(value_type = String)]
    pub name: &'a str,
    #[schema(value_type = KeyKindSchema)]
    pub kind: &'static str,
    /// Admin keys may call the admin endpoints.
    pub admin: bool,
    #[schema(format = DateTime)]
    pub created_at: String,
    /// Null until the key is revoked.
    #[schema(format = DateTime, required = true)]
    pub revoked_at: Option<String>,
}

impl<'a> ApiKey<'a> {
    pub fn from(k: &'a KeyRecord) -> Self {
        ApiKey {
            id: &k.id,
            name: &k.name,
            kind: k.kind.as_str(),
            admin: k.admin,
            created_at: format_time(k.created_at),
            revoked_at: k.revoked_at.map(format_time),
        }
    }
}

/// Every API key of the instance, revoked ones included.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApiKeyList<'a> {
    pub keys: Vec<ApiKey<'a>>,
}

/// A new API key with its secret, which is shown only here.
#[derive(Debug, Serialize, ToSchema)]
pub struct CreatedApiKey<'a> {
    #[serde(flatten)]
    pub record: ApiKey<'a>,
    /// The secret to send as `Authorization: Bearer <key>`.
    #[schema(value_type = String)]
    pub key: &'a str,
}

/// Request body of a key create.
#[derive(Debug, Deserialize, ToSchema)]
pub struct CreateApiKeyRequest {
    /// 1–128 bytes, not blank.
    #[schema(min_length = 1, max_length = 128, pattern = r"\S")]
    pub name: String,
    /// `personal` when absent.
    #[schema(value_type = Option<KeyKindSchema>)]
    pub kind: Option<String>,
    /// `false` when absent.
    pub admin: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum HealthStatus {
    Ok,
}

/// Answer of `/healthz`: the process serves requests.
#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    pub status: HealthStatus,
}

#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ReadyStatus {
    Ready,
}

/// Answer of `/readyz` once startup recovery is done.
#[derive(Debug, Serialize, ToSchema)]
pub struct Ready {
    pub status: ReadyStatus,
}

/// One stored event as JSON (`runledger export` and `events --json`).
pub fn event_json(e: &crate::store::Envelope) -> serde_json::Value {
    // Plain structs and string-keyed maps always serialise.
    serde_json::to_value(RunEvent::from(e)).unwrap_or(serde_json::Value::Null)
}

/// Why a JSON value is not an event as `event_json` writes it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct EventJsonError(String);

#[derive(Deserialize)]
struct EventIn<'a> {
    #[serde(borrow)]
    run_id: &'a str,
    seq: u64,
    #[serde(borrow)]
    at: &'a str,
    #[serde(rename = "type", borrow)]
    kind: &'a str,
}

#[derive(Deserialize)]
struct CreatedIn {
    title: String,
    prompt: String,
    config: AgentConfigIn,
    creator: CreatorIn,
    source: String,
    metadata: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct CreatorIn {
    #[serde(rename = "type")]
    kind: String,
    uid: String,
    display_name: String,
}

#[derive(Deserialize)]
struct ExecutionIn {
    execution: u32,
}

#[derive(Deserialize)]
struct DeliveredIn {
    execution: u32,
    count: u32,
}

#[derive(Deserialize)]
struct FollowupIn {
    message: String,
    mode: String,
    by: String,
}

#[derive(Deserialize)]
struct FailedIn {
    execution: u32,
    status_message: StatusMessageIn,
}

#[derive(Deserialize)]
struct StatusMessageIn {
    message: String,
    error_code: Option<String>,
    retryable: Option<bool>,
}

#[derive(Deserialize)]
struct CancelledIn {
    by: String,
}

/// The inverse of `event_json`: the envelope an event line was written from (`runledger
/// import`). Only what `event_json` writes is accepted: the envelope is rendered again and
/// must equal the input, so an unknown field, a null or a time in another spelling is refused
/// instead of being silently dropped, and a field that `event_json` stopped writing would fail
/// the round-trip tests rather than vanish from backups.
pub fn event_from_json(
    value: &serde_json::Value,
) -> Result<crate::store::Envelope, EventJsonError> {
    use crate::domain::{Creator, Event, FollowupMode, RunCreated, SourceType};
    use serde::de::DeserializeOwned;
    fn read<T: DeserializeOwned>(
        value: &serde_json::Value,
        what: &str,
    ) -> Result<T, EventJsonError> {
        T::deserialize(value).map_err(|e| EventJsonError(format!("{what}: {e}")))
    }
    let bad = |what: String| EventJsonError(what);
    let head = EventIn::deserialize(value).map_err(|e| bad(format!("not an event: {e}")))?;
    let data = value
        .get("data")
        .ok_or_else(|| bad("not an event: missing field `data`".into()))?;
    let run_id: RunId = head
        .run_id
        .parse()
        .map_err(|_| bad(format!("run_id {:?} is not a run id (a ULID)", head.run_id)))?;
    let at = parse_exact_time(head.at).ok_or_else(|| {
        bad(format!(
            "at {:?} is not a time as runledger writes it (2026-11-21T23:41:29.123Z)",
            head.at
        ))
    })?;
    let what = format!("{} data", head.kind);
    let event = match head.kind {
        "Created" => {
            let c: CreatedIn = read(data, &what)?;
            let kind = match c.creator.kind.as_str() {
                "user" => CreatorKind::User,
                "service_account" => CreatorKind::ServiceAccount,
                other => return Err(bad(format!("creator type {other:?} is unknown"))),
            };
            let source = SourceType::parse(&c.source)
                .ok_or_else(|| bad(format!("source {:?} is unknown", c.source)))?;
            let config = AgentConfig {
                name: c.config.name,
                model_id: c.config.model_id,
                base_prompt: c.config.base_prompt,
                environment_id: c.config.environment_id,
                skill_spec: c.config.skill_spec,
                mcp_servers: c
                    .config
                    .mcp_servers
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(name, s)| (name, McpServer::from(s)))
                    .collect(),
            };
            Event::Created(RunCreated {
                title: c.title,
                prompt: c.prompt,
                config,
                creator: Creator {
                    kind,
                    uid: c.creator.uid,
                    display_name: c.creator.display_name,
                },
                source,
                metadata: c.metadata,
            })
        }
        "Started" => Event::Started {
            execution: read::<ExecutionIn>(data, &what)?.execution,
        },
        "Succeeded" => Event::Succeeded {
            execution: read::<ExecutionIn>(data, &what)?.execution,
        },
        "FollowupReceived" => {
            let f: FollowupIn = read(data, &what)?;
            let mode = FollowupMode::parse(&f.mode)
                .ok_or_else(|| bad(format!("follow-up mode {:?} is unknown", f.mode)))?;
            Event::FollowupReceived {
                message: f.message,
                mode,
                by: f.by,
            }
        }
        "Failed" => {
            let f: FailedIn = read(data, &what)?;
            Event::Failed {
                execution: f.execution,
                status: StatusMessage {
                    message: f.status_message.message,
                    error_code: f.status_message.error_code,
                    retryable: f.status_message.retryable,
                },
            }
        }
        "Cancelled" => Event::Cancelled {
            by: read::<CancelledIn>(data, &what)?.by,
        },
        "FollowupsDelivered" => {
            let d: DeliveredIn = read(data, &what)?;
            Event::FollowupsDelivered {
                execution: d.execution,
                count: d.count,
            }
        }
        "Requeued" => Event::Requeued {
            execution: read::<ExecutionIn>(data, &what)?.execution,
        },
        "UsageRecorded" => {
            let u: UsageData<'static> = read(data, &what)?;
            let inference = match u.inference_cost {
                None => None,
                Some(c) => Some(InferenceCost {
                    nano_usd: c.nano_usd,
                    source: CostSource::parse(&c.source).ok_or_else(|| {
                        bad(format!("inference cost source {:?} is unknown", c.source))
                    })?,
                }),
            };
            Event::UsageRecorded {
                execution: u.execution,
                usage: ExecutionUsage {
                    tokens: u.tokens.map(|t| Tokens {
                        input: t.input,
                        cached_input: t.cached_input,
                        output: t.output,
                    }),
                    model: u.model.map(Cow::into_owned),
                    inference,
                    cpu_ms: u.cpu_ms,
                    compute_nano_usd: u.compute_cost_nano_usd,
                },
            }
        }
        other => return Err(bad(format!("event type {other:?} is unknown"))),
    };
    let envelope = crate::store::Envelope {
        run_id,
        seq: head.seq,
        at,
        event,
    };
    let written = event_json(&envelope);
    if &written != value {
        return Err(bad(first_difference(value, &written, "")));
    }
    Ok(envelope)
}

/// Where `given` (a line read back) differs from `written` (what `event_json` makes of it).
fn first_difference(given: &serde_json::Value, written: &serde_json::Value, at: &str) -> String {
    use serde_json::Value;
    let path = |key: &str| {
        if at.is_empty() {
            key.to_string()
        } else {
            format!("{at}.{key}")
        }
    };
    if let (Value::Object(g), Value::Object(w)) = (given, written) {
        if let Some((key, value)) = g.iter().find(|(k, _)| !w.contains_key(*k)) {
            return if value.is_null() {
                format!("field `{}` is null; runledger leaves it out", path(key))
            } else {
                format!("field `{}` is not part of the event format", path(key))
            };
        }
        if let Some(key) = w.keys().find(|k| !g.contains_key(*k)) {
            return format!("field `{}` is missing", path(key));
        }
        for (key, value) in g {
            if let Some(other) = w.get(key).filter(|other| *other != value) {
                return first_difference(value, other, &path(key));
            }
        }
    }
    let at = if at.is_empty() { "the event" } else { at };
    format!("`{at}` is {given}, which runledger writes as {written}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_utc_millis() {
        assert_eq!(format_time(Timestamp(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_time(Timestamp(951_782_400_000)),
            "2000-02-29T00:00:00.000Z"
        );
        assert_eq!(
            format_time(Timestamp(4_102_444_799_999)),
            "2099-12-31T23:59:59.999Z"
        );
        // Agrees with the time crate across leap years and month ends.
        for ms in (0..4_000_000_000_000u64).step_by(86_399_999_937) {
            let dt = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
                .expect("in range");
            let expected = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                dt.year(),
                u8::from(dt.month()),
                dt.day(),
                dt.hour(),
                dt.minute(),
                dt.second(),
                dt.millisecond()
            );
            assert_eq!(format_time(Timestamp(ms)), expected);
        }
        assert_eq!(
            format_time(Timestamp(1_763_768_489_123)),
            "2025-11-21T23:41:29.123Z"
        );
        assert_eq!(
            parse_time("2025-11-21T23:41:29.123Z"),
            Some(1_763_768_489_123_000_000)
        );
        assert_eq!(
            parse_time("2025-11-21T23:41:29.123+00:00"),
            Some(1_763_768_489_123_000_000)
        );
        assert_eq!(
            parse_time("2025-11-21T23:41:29.123"),
            Some(1_763_768_489_123_000_000)
        );
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn durations_are_iso8601() {
        assert_eq!(&*format_duration(0), "PT0S");
        assert_eq!(&*format_duration(2_004), "PT2.004S");
        assert_eq!(&*format_duration(150_000), "PT2M30S");
        assert_eq!(&*format_duration(3_600_000), "PT1H");
        assert_eq!(&*format_duration(90_005_010), "PT25H5.010S");
        assert_eq!(&*format_duration(61_000), "PT1M1S");
    }

    /// Session links handed out earlier must keep working: the token is the first 16 bytes of
    /// SHA-256(secret ‖ "session-link" ‖ run id), in lowercase hex.
    #[test]
    fn session_tokens_keep_their_derivation() {
        let secret = [7u8; 32];
        let id = RunId(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef);
        let digest = Sha256::new()
            .chain_update(secret)
            .chain_update(b"session-link")
            .chain_update(id.to_bytes())
            .finalize();
        let expected: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(session_token(&secret, id), expected);
        assert_eq!(session_token(&secret, id).len(), 32);
    }

    /// The memo answers per secret: two servers in one process never share tokens, and more
    /// runs than the memo holds still get theirs.
    #[test]
    fn remembered_session_tokens_are_those_of_their_secret() {
        let derive = |secret: &[u8; 32], id: RunId| {
            let digest = Sha256::new()
                .chain_update(secret)
                .chain_update(b"session-link")
                .chain_update(id.to_bytes())
                .finalize();
            hex(&digest[..16])
        };
        let (a, b) = ([1u8; 32], [2u8; 32]);
        for round in 0..2 {
            for i in 0..(TOKEN_MEMO as u128 + 10) {
                let id = RunId(i * 1_000_003 + round);
                assert_eq!(session_token(&a, id), derive(&a, id));
                assert_eq!(session_token(&a, id), derive(&a, id));
            }
        }
        let id = RunId(7);
        assert_eq!(session_token(&b, id), derive(&b, id));
        assert_eq!(session_token(&a, id), derive(&a, id));
    }

    #[test]
    fn session_ids_are_uuid_shaped() {
        let s = session_id(RunId(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef));
        assert_eq!(&*s, "01234567-89ab-cdef-0123-456789abcdef");
        let s = session_id(RunId(u128::MAX));
        assert_eq!(&*s, "ffffffff-ffff-ffff-ffff-ffffffffffff");
    }

    /// The stack-built texts hold their longest possible output whole.
    #[test]
    fn inline_texts_fit_their_longest_values() {
        for id in [
            RunId(0),
            RunId(u128::MAX),
            RunId(0x0123_4567_89ab_cdef_0123_4567_89ab_cdef),
        ] {
            assert_eq!(id_text(id).to_string(), ulid::Ulid(id.0).to_string());
            assert_eq!(id.to_string(), ulid::Ulid(id.0).to_string());
        }
        let latest = format_time(Timestamp(u64::MAX));
        assert_eq!(latest, "584556019-04-03T14:25:51.615Z");
        assert_eq!(parse_exact_time(&latest), Some(Timestamp(u64::MAX)));
        let ms = u64::MAX;
        let expected = format!(
            "PT{}H{}M{}.{:03}S",
            ms / 3_600_000,
            ms / 60_000 % 60,
            ms % 60_000 / 1000,
            ms % 1000
        );
        assert_eq!(&*format_duration(ms), expected);
    }
}
