//! Validation of request bodies and query strings into domain values, with error messages that
//! name the offending field. The limits bound the size of every stored event and so of each
//! run's state, which keeps the log, the read index and memory per run small.

use std::collections::BTreeMap;

use super::problem::ApiError;
use super::wire::{
    parse_time, AgentConfigIn, AttachmentInput, FollowupRequest, McpServerIn, RunAgentRequest,
    FOREIGN_STATES, MAX_METADATA_FILTERS, MAX_METADATA_KEYS, SORT_BY, SORT_ORDER,
};
use runledger_config::Config;
use runledger_domain::{
    AgentConfig, Creator, FollowupMode, McpServer, RunCreated, RunState, SourceType, Timestamp,
};
use runledger_runs::actor::Upload;
use runledger_runs::query::{Cursor, Query};

pub const MAX_PROMPT_BYTES: usize = 64 * 1024;
pub const MAX_BASE_PROMPT_BYTES: usize = 16 * 1024;
pub const MAX_TITLE_CHARS: usize = 256;
pub const MAX_FIELD_BYTES: usize = 256;
pub const MAX_MCP_SERVERS: usize = 16;
pub const MAX_MCP_VALUE_BYTES: usize = 2048;
pub const MAX_FOLLOWUP_BYTES: usize = 64 * 1024;
/// `q` searches titles (256 characters) and prompts (64 KiB); longer search text is not a
/// search a person makes, and each listed run is scanned for it.
pub const MAX_QUERY_TEXT_BYTES: usize = 1024;
pub const MAX_LIST_LIMIT: usize = 500;
pub const MAX_TRANSCRIPT_LIMIT: usize = 10_000;
pub const DEFAULT_TRANSCRIPT_LIMIT: usize = 1000;
pub const MAX_EVENTS_LIMIT: usize = 10_000;
pub const DEFAULT_EVENTS_LIMIT: usize = 1000;
const TITLE_FROM_PROMPT_CHARS: usize = 80;

/// List filters of the hosted service that name things runledger runs never have (parent runs,
/// automations): with any of them, whatever its value, nothing matches.
pub const MATCH_NOTHING_PARAMS: [&str; 3] = ["ancestor_run_id", "factory_uid", "automation_id"];

/// Artifact types of the hosted service that runledger's agents never report. As
/// `artifact_type` filters they are accepted and match nothing, like `FOREIGN_STATES`.
pub const FOREIGN_ARTIFACT_TYPES: [&str; 1] = ["EXTERNAL_REFERENCE"];

fn check_len(field: &str, value: &str, max: usize) -> Result<(), ApiError> {
    if value.len() > max {
        return Err(ApiError::bad_request(format!(
            "{field} is longer than {max} bytes"
        )));
    }
    // Values reach agents as environment variables and arguments, which cannot hold NUL.
    if value.contains('\0') {
        return Err(ApiError::bad_request(format!(
            "{field} must not contain NUL characters"
        )));
    }
    Ok(())
}

fn short_field(field: &str, value: Option<String>) -> Result<Option<String>, ApiError> {
    match value {
        Some(v) if v.is_empty() => Err(ApiError::bad_request(format!("{field} must not be empty"))),
        Some(v) => {
            check_len(field, &v, MAX_FIELD_BYTES)?;
            Ok(Some(v))
        }
        None => Ok(None),
    }
}

/// The skill's name, if `spec` is `owner/repo:skill-name` or `owner/repo:path/to/SKILL.md`.
pub fn skill_name(spec: &str) -> Option<String> {
    let (repo, skill) = spec.split_once(':')?;
    let (owner, name) = repo.split_once('/')?;
    let part_ok = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    };
    if !part_ok(owner)
        || !part_ok(name)
        || skill.is_empty()
        || skill.chars().any(char::is_whitespace)
    {
        return None;
    }
    if let Some(dir) = skill.strip_suffix("SKILL.md") {
        let dir = dir.trim_end_matches('/');
        if dir.split('/').any(|seg| seg == "..") {
            return None;
        }
        // `owner/repo:SKILL.md` names the repository's own skill.
        return Some(
            dir.rsplit('/')
                .next()
                .filter(|s| !s.is_empty())
                .unwrap_or(name)
                .to_string(),
        );
    }
    skill
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
        .then(|| skill.to_string())
}

fn mcp_server(name: &str, s: McpServerIn) -> Result<McpServer, ApiError> {
    let field = format!("config.mcp_servers.{name}");
    let set = [s.warp_id.is_some(), s.command.is_some(), s.url.is_some()]
        .iter()
        .filter(|b| **b)
        .count();
    if set != 1 {
        return Err(ApiError::bad_request(format!(
            "{field} must have exactly one of warp_id, command or url"
        )));
    }
    for (what, v) in [
        ("command", &s.command),
        ("url", &s.url),
        ("warp_id", &s.warp_id),
    ] {
        if let Some(v) = v {
            check_len(&format!("{field}.{what}"), v, MAX_MCP_VALUE_BYTES)?;
        }
    }
    let args_len: usize = s.args.iter().flatten().map(String::len).sum();
    let maps = s.env.iter().chain(s.headers.iter()).flatten();
    let maps_len: usize = maps.map(|(k, v)| k.len() + v.len()).sum();
    if args_len + maps_len > MAX_MCP_VALUE_BYTES * 4 {
        return Err(ApiError::bad_request(format!(
            "{field}: args, env and headers together exceed {} bytes",
            MAX_MCP_VALUE_BYTES * 4
        )));
    }
    if let Some(url) = &s.url {
        let ok = (url.starts_with("https://") || url.starts_with("http://"))
            && url.len() > "https://".len()
            && !url.chars().any(char::is_whitespace);
        if !ok {
            return Err(ApiError::bad_request(format!(
                "{field}.url must be an http(s) URL"
            )));
        }
    }
    for (what, v) in [("warp_id", &s.warp_id), ("command", &s.command)] {
        if v.as_deref() == Some("") {
            return Err(ApiError::bad_request(format!(
                "{field}.{what} must not be empty"
            )));
        }
    }
    Ok(McpServer::from(s))
}

fn resolve_config(
    input: Option<AgentConfigIn>,
    skill: Option<String>,
    config: &Config,
) -> Result<AgentConfig, ApiError> {
    let input = input.unwrap_or(AgentConfigIn {
        name: None,
        model_id: None,
        base_prompt: None,
        environment_id: None,
        skill_spec: None,
        mcp_servers: None,
    });
    // The top-level `skill` takes precedence over `config.skill_spec` (OpenAPI).
    let (skill_field, skill_spec) = match skill {
        Some(s) if s.len() > MAX_FIELD_BYTES => {
            return Err(ApiError::bad_request(format!(
                "skill is longer than {MAX_FIELD_BYTES} bytes"
            )))
        }
        Some(s) => ("skill", Some(s)),
        None => (
            "config.skill_spec",
            short_field("config.skill_spec", input.skill_spec)?,
        ),
    };
    let skill_named = match &skill_spec {
        Some(spec) => Some(skill_name(spec).ok_or_else(|| {
            ApiError::bad_request(format!(
                "{skill_field} must be owner/repo:skill-name or owner/repo:path/to/SKILL.md"
            ))
        })?),
        None => None,
    };
    let environment = match short_field("config.environment_id", input.environment_id)? {
        Some(id) => config.environment(&id).ok_or_else(|| {
            ApiError::bad_request(format!(
                "config.environment_id: no environment named {id:?} is configured"
            ))
        })?,
        None => config.default_environment(),
    };
    if let Some(base) = &input.base_prompt {
        check_len("config.base_prompt", base, MAX_BASE_PROMPT_BYTES)?;
    }
    let servers = input.mcp_servers.unwrap_or_default();
    if servers.len() > MAX_MCP_SERVERS {
        return Err(ApiError::bad_request(format!(
            "config.mcp_servers has more than {MAX_MCP_SERVERS} entries"
        )));
    }
    let mut mcp_servers = BTreeMap::new();
    for (name, server) in servers {
        if name.is_empty() || name.len() > 64 {
            return Err(ApiError::bad_request(
                "config.mcp_servers names must be 1-64 bytes",
            ));
        }
        let server = mcp_server(&name, server)?;
        mcp_servers.insert(name, server);
    }
    Ok(AgentConfig {
        name: short_field("config.name", input.name)?.or(skill_named),
        // An environment without a model leaves it to the agent (a CLI's own default).
        model_id: short_field("config.model_id", input.model_id)?
            .or_else(|| Some(environment.model_id.clone()).filter(|m| !m.is_empty())),
        base_prompt: input.base_prompt,
        environment_id: Some(environment.id.clone()),
        skill_spec,
        mcp_servers,
    })
}

pub fn metadata(
    input: Option<BTreeMap<String, String>>,
) -> Result<BTreeMap<String, String>, ApiError> {
    let input = input.unwrap_or_default();
    if input.len() > MAX_METADATA_KEYS {
        return Err(ApiError::bad_request(format!(
            "metadata has more than {MAX_METADATA_KEYS} keys"
        )));
    }
    for (k, v) in &input {
        metadata_pair(k, v)?;
    }
    Ok(input)
}

fn metadata_pair(k: &str, v: &str) -> Result<(), ApiError> {
    // A refused key is quoted only when short: a 1 MiB key must not come back in the error.
    let shown = || {
        if k.len() <= 64 {
            format!("{k:?}")
        } else {
            format!("of {} bytes", k.len())
        }
    };
    if k.is_empty()
        || k.len() > 64
        || !k
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(ApiError::bad_request(format!(
            "metadata key {} must be 1-64 characters of [a-zA-Z0-9._-]",
            shown()
        )));
    }
    if v.len() > 256 || v.contains('\0') {
        return Err(ApiError::bad_request(format!(
            "metadata value of {} must be at most 256 bytes without NUL",
            shown()
        )));
    }
    Ok(())
}

/// A title from the prompt's first non-empty line, shortened at a character boundary.
pub fn title_from(prompt: &str) -> String {
    let line = prompt
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() <= TITLE_FROM_PROMPT_CHARS {
        return line.to_string();
    }
    let cut: String = line.chars().take(TITLE_FROM_PROMPT_CHARS - 1).collect();
    format!("{}…", cut.trim_end())
}

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
fn attachments(list: Option<Vec<AttachmentInput>>) -> Result<Vec<Upload>, ApiError> {
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

/// Validates a create request into the `Created` event's payload and the attachments to store.
pub fn create(
    body: &[u8],
    config: &Config,
    creator: Creator,
) -> Result<(RunCreated, Vec<Upload>), ApiError> {
    super::fields::check(body, &super::fields::RUN)?;
    let request: RunAgentRequest = parse_json(body)?;
    let uploads = attachments(request.attachments)?;
    let prompt = request.prompt.unwrap_or_default();
    check_len("prompt", &prompt, MAX_PROMPT_BYTES)?;
    let has_skill = request.skill.is_some()
        || request
            .config
            .as_ref()
            .is_some_and(|c| c.skill_spec.is_some());
    if prompt.trim().is_empty() && !has_skill {
        return Err(ApiError::bad_request(
            "prompt is required (or a skill to run)",
        ));
    }
    let config = resolve_config(request.config, request.skill, config)?;
    let title = match request.title {
        Some(t) if t.trim().is_empty() => {
            return Err(ApiError::bad_request("title must not be empty"))
        }
        Some(t) if t.contains('\0') => {
            return Err(ApiError::bad_request(
                "title must not contain NUL characters",
            ))
        }
        Some(t) if t.chars().count() > MAX_TITLE_CHARS => {
            return Err(ApiError::bad_request(format!(
                "title is longer than {MAX_TITLE_CHARS} characters"
            )))
        }
        Some(t) => t,
        None if !prompt.trim().is_empty() => title_from(&prompt),
        None => config.name.clone().unwrap_or_else(|| "Skill run".into()),
    };
    let created = RunCreated {
        title,
        prompt,
        config,
        creator,
        source: SourceType::Api,
        metadata: metadata(request.metadata)?,
    };
    Ok((created, uploads))
}

/// A schedule's create or update, validated: what the `ScheduleSpec` needs but the sealing.
/// `config` and `metadata` are `None` when an update leaves them as they are.
#[derive(Debug)]
pub struct ScheduleInput {
    pub name: String,
    pub cron: String,
    pub time_zone: String,
    pub prompt: String,
    pub enabled: bool,
    pub config: Option<AgentConfig>,
    pub metadata: Option<BTreeMap<String, String>>,
}

/// Validates a schedule's create (`creating`) or update request; `seconds` allows the test
/// mode's 6-field expressions.
pub fn schedule(
    body: &[u8],
    config: &Config,
    creating: bool,
    seconds: bool,
) -> Result<ScheduleInput, ApiError> {
    let known = if creating {
        &super::fields::SCHEDULE_CREATE
    } else {
        &super::fields::SCHEDULE_UPDATE
    };
    super::fields::check(body, known)?;
    let fields = if creating {
        let r: super::wire::CreateScheduledAgentRequest = parse_json(body)?;
        if r.team == Some(false) {
            return Err(ApiError::bad_request(
                "team: personal schedules are not supported; every schedule belongs to its \
                 key's team",
            ));
        }
        super::wire::UpdateScheduledAgentRequest {
            enabled: Some(r.fields.enabled.unwrap_or(true)),
            ..r.fields
        }
    } else {
        parse_json::<super::wire::UpdateScheduledAgentRequest>(body)?
    };
    let name = fields
        .name
        .ok_or_else(|| ApiError::bad_request("name is required"))?;
    if name.trim().is_empty() {
        return Err(ApiError::bad_request("name must not be blank"));
    }
    if name.contains('\0') || name.chars().count() > MAX_TITLE_CHARS {
        return Err(ApiError::bad_request(format!(
            "name must be at most {MAX_TITLE_CHARS} characters without NUL"
        )));
    }
    let enabled = fields
        .enabled
        .ok_or_else(|| ApiError::bad_request("enabled is required"))?;
    let cron = fields
        .cron_schedule
        .ok_or_else(|| ApiError::bad_request("cron_schedule is required"))?;
    let time_zone = schedule_zone(&cron, fields.time_zone.as_deref(), seconds)?;
    match fields.mode.as_deref() {
        None | Some("normal") => {}
        Some("plan" | "orchestrate") => {
            return Err(ApiError::bad_request(
                "mode: scheduled runs support only the normal mode",
            ))
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "mode must be one of normal, plan, orchestrate",
            ))
        }
    }
    if fields.agent_uid.is_some() {
        return Err(ApiError::bad_request(
            "agent_uid: agent identities are not supported; a schedule's runs are made as the \
             key that created the schedule",
        ));
    }
    let prompt = fields.prompt.unwrap_or_default();
    check_len("prompt", &prompt, MAX_PROMPT_BYTES)?;
    let has_skill = fields
        .agent_config
        .as_ref()
        .is_some_and(|c| c.skill_spec.is_some());
    if prompt.trim().is_empty() && !has_skill {
        return Err(ApiError::bad_request(
            "prompt is required (or agent_config.skill_spec)",
        ));
    }
    let resolved = match fields.agent_config {
        Some(c) => Some(resolve_config(Some(c), None, config)?),
        None if creating => Some(resolve_config(None, None, config)?),
        None => None,
    };
    let metadata = match fields.metadata {
        Some(m) => Some(metadata(Some(m))?),
        None if creating => Some(BTreeMap::new()),
        None => None,
    };
    Ok(ScheduleInput {
        name,
        cron: cron.trim().to_string(),
        time_zone,
        prompt,
        enabled,
        config: resolved,
        metadata,
    })
}

/// The zone of `cron_schedule` (from its `CRON_TZ=` prefix, if any, or the request's
/// `time_zone`), with the expression checked in it: a clear 400 naming the problem otherwise.
fn schedule_zone(cron: &str, time_zone: Option<&str>, seconds: bool) -> Result<String, ApiError> {
    use runledger_runs::schedules::cron::{split_zone, When};
    let (prefixed, expression) = split_zone(cron);
    let zone = match (prefixed, time_zone) {
        (Some(a), Some(b)) if a != b => {
            return Err(ApiError::bad_request(format!(
                "cron_schedule names the time zone {a:?} and time_zone {b:?}; give one"
            )))
        }
        (Some(z), _) | (None, Some(z)) => z.to_string(),
        (None, None) => "UTC".to_string(),
    };
    When::parse(expression, &zone, seconds).map_err(|why| {
        let field = if why.contains("IANA") && prefixed.is_none() {
            "time_zone"
        } else {
            "cron_schedule"
        };
        ApiError::bad_request(format!("{field}: {why}"))
    })?;
    Ok(zone)
}

pub fn followup(body: &[u8]) -> Result<(String, FollowupMode), ApiError> {
    let request: FollowupRequest = parse_json(body)?;
    let message = request.message.unwrap_or_default();
    if message.trim().is_empty() {
        return Err(ApiError::bad_request(
            "message is required and must not be empty",
        ));
    }
    check_len("message", &message, MAX_FOLLOWUP_BYTES)?;
    let mode = match request.mode.as_deref() {
        None => FollowupMode::Normal,
        Some(m) => FollowupMode::parse(m).ok_or_else(|| {
            ApiError::bad_request("mode must be one of normal, plan, orchestrate")
        })?,
    };
    Ok((message, mode))
}

pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("the request needs a JSON body"));
    }
    serde_json::from_slice(body).map_err(|e| {
        let what = match e.classify() {
            serde_json::error::Category::Data => "wrong type or value",
            _ => "malformed JSON",
        };
        ApiError::bad_request(format!("{what}: {e}"))
    })
}

fn lookup<T: Copy>(table: &[(&str, T)], name: &str) -> Option<T> {
    table.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
}

/// Parses the list query string (`state` repeats; `metadata[key]=value`).
pub fn list_query(raw: &str) -> Result<Query, ApiError> {
    let mut list = ListParams::default();
    for (key, value) in form_urlencoded::parse(raw.as_bytes()) {
        list.apply(&key, value.into_owned())?;
    }
    list.finish()
}

/// A list query as its parameters are read, with what only the whole query decides.
struct ListParams {
    q: Query,
    /// The raw cursor, decoded once the filters are known.
    cursor: Option<String>,
    /// Whether a `state` of the hosted service's that runledger never takes was asked for.
    foreign_state: bool,
    /// The last `schedule_id` given, read once every parameter is (`schedule_filter`).
    schedule_id: Option<String>,
}

impl Default for ListParams {
    fn default() -> ListParams {
        ListParams {
            q: Query {
                limit: 20,
                ..Query::default()
            },
            cursor: None,
            foreign_state: false,
            schedule_id: None,
        }
    }
}

impl ListParams {
    /// Reads one parameter.
    fn apply(&mut self, key: &str, value: String) -> Result<(), ApiError> {
        let q = &mut self.q;
        match key {
            "limit" => q.limit = limit(&value, MAX_LIST_LIMIT)?,
            "cursor" => self.cursor = Some(value),
            "sort_by" => {
                q.sort_by = lookup(&SORT_BY, &value).ok_or_else(|| {
                    ApiError::bad_request("sort_by must be one of updated_at, created_at, title")
                })?;
            }
            "sort_order" => {
                q.order = lookup(&SORT_ORDER, &value)
                    .ok_or_else(|| ApiError::bad_request("sort_order must be asc or desc"))?;
            }
            "state" if FOREIGN_STATES.contains(&value.as_str()) => {
                self.foreign_state = true;
            }
            "state" => {
                let state = RunState::parse(&value).ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "state {value:?} is not one of QUEUED, INPROGRESS, SUCCEEDED, FAILED, CANCELLED"
                    ))
                })?;
                if !q.states.contains(&state) {
                    q.states.push(state);
                }
            }
            "name" | "config_name" => q.name = Some(exact_filter(key, value)?),
            "model_id" => q.model_id = Some(exact_filter(key, value)?),
            "creator" => q.creator = Some(exact_filter(key, value)?),
            "environment_id" => q.environment_id = Some(exact_filter(key, value)?),
            "schedule_id" => self.schedule_id = Some(exact_filter(key, value)?),
            "source" => {
                q.source = Some(SourceType::parse(&value).ok_or_else(|| {
                    ApiError::bad_request(format!("source {value:?} is not a known source type"))
                })?)
            }
            "created_after" => q.created_after = Some(time_filter(key, &value, false)?),
            "created_before" => q.created_before = Some(time_filter(key, &value, true)?),
            "updated_after" => q.updated_after = Some(time_filter(key, &value, false)?),
            "q" if value.len() > MAX_QUERY_TEXT_BYTES => {
                return Err(ApiError::bad_request(format!(
                    "q is longer than {MAX_QUERY_TEXT_BYTES} bytes"
                )))
            }
            "q" => q.q = Some(value).filter(|v| !v.is_empty()),
            "skill" | "skill_spec" => q.skill_spec = Some(exact_filter(key, value)?),
            "artifact_type" if FOREIGN_ARTIFACT_TYPES.contains(&value.as_str()) => {
                q.matches_nothing = true;
            }
            "artifact_type" => {
                let known = runledger_domain::ArtifactKind::TYPE_NAMES;
                q.artifact_type =
                    Some(known.into_iter().find(|t| *t == value).ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "artifact_type {value:?} is not one of {}",
                            known.join(", ")
                        ))
                    })?);
            }
            k if MATCH_NOTHING_PARAMS.contains(&k) => {
                q.matches_nothing = true;
            }
            other => {
                if let Some(k) = other
                    .strip_prefix("metadata[")
                    .and_then(|r| r.strip_suffix(']'))
                {
                    metadata_filter(q, k, value)?;
                }
                // Remaining parameters of the hosted API (`execution_location`, `executor`)
                // do not narrow runledger's runs; they are ignored.
            }
        }
        Ok(())
    }

    /// The query, once every parameter is read.
    fn finish(self) -> Result<Query, ApiError> {
        let mut q = self.q;
        q.metadata.sort();
        q.states.sort();
        if self.foreign_state && q.states.is_empty() {
            q.matches_nothing = true;
        }
        if let Some(schedule_id) = &self.schedule_id {
            schedule_filter(&mut q, schedule_id);
        }
        if let Some(c) = self.cursor {
            q.cursor = Some(
                Cursor::decode(&c)
                    .map_err(|_| ApiError::bad_request("cursor is not valid for this server"))?,
            );
        }
        Ok(q)
    }
}

/// The value of an exact-match filter. Filters compare with stored values of at most
/// `MAX_FIELD_BYTES`, so a longer one is refused rather than matching nothing.
fn exact_filter(key: &str, v: String) -> Result<String, ApiError> {
    if v.is_empty() {
        Err(ApiError::bad_request(format!("{key} must not be empty")))
    } else if v.len() > MAX_FIELD_BYTES {
        Err(ApiError::bad_request(format!(
            "{key} is longer than {MAX_FIELD_BYTES} bytes"
        )))
    } else {
        Ok(v)
    }
}

/// Sets the filter `schedule_id=value`. A schedule id is a ULID, kept in its canonical text so
/// that any spelling the id parser accepts (lower case) finds the schedule's runs. A value that
/// is no ULID names no schedule of this server (the hosted service's ids, say): like an
/// exact-match filter that no run has, it matches nothing, rather than refusing the list; an
/// empty or overlong value is refused like any other filter's.
fn schedule_filter(q: &mut Query, value: &str) {
    let canonical = value
        .parse::<runledger_domain::RunId>()
        .map(runledger_runs::query::schedule_value)
        // The ULID parser takes a 26th character beyond 128 bits and drops the excess: such a
        // text is not one this server writes for any id.
        .ok()
        .filter(|id| id.eq_ignore_ascii_case(value));
    match canonical {
        Some(id) => q.schedule_id = Some(id),
        None => q.matches_nothing = true,
    }
}

/// A time filter in milliseconds: rounded up (`ceil`) for an exclusive upper bound, so that a
/// sub-millisecond bound excludes nothing it should keep.
fn time_filter(key: &str, value: &str, ceil: bool) -> Result<Timestamp, ApiError> {
    let nanos = parse_time(value)
        .ok_or_else(|| ApiError::bad_request(format!("{key} must be an RFC 3339 timestamp")))?;
    if nanos < 0 {
        return Err(ApiError::bad_request(format!("{key} is before 1970")));
    }
    let ms = nanos / 1_000_000;
    let ms = if ceil && nanos % 1_000_000 != 0 {
        ms + 1
    } else {
        ms
    };
    Ok(Timestamp(ms as u64))
}

/// Adds the filter `metadata[key]=value`; a repeated key keeps its last value.
fn metadata_filter(q: &mut Query, key: &str, value: String) -> Result<(), ApiError> {
    metadata_pair(key, &value)?;
    q.metadata.retain(|(existing, _)| existing != key);
    q.metadata.push((key.to_string(), value));
    if q.metadata.len() > MAX_METADATA_FILTERS {
        return Err(ApiError::bad_request(format!(
            "at most {MAX_METADATA_FILTERS} metadata filters"
        )));
    }
    Ok(())
}

fn limit(value: &str, max: usize) -> Result<usize, ApiError> {
    value
        .parse()
        .ok()
        .filter(|n| (1..=max).contains(n))
        .ok_or_else(|| ApiError::bad_request(format!("limit must be an integer from 1 to {max}")))
}

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
    use runledger_runs::query::{Order, SortBy};

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
    fn skill_names() {
        assert_eq!(skill_name("acme/tools:deploy").as_deref(), Some("deploy"));
        assert_eq!(
            skill_name("acme/tools:.claude/skills/deploy/SKILL.md").as_deref(),
            Some("deploy")
        );
        assert_eq!(skill_name("acme/tools:SKILL.md").as_deref(), Some("tools"));
        assert_eq!(skill_name("tools:deploy"), None);
        assert_eq!(skill_name("acme/tools:"), None);
        assert_eq!(skill_name("acme/tools:two words"), None);
        assert_eq!(skill_name("acme/tools:../SKILL.md"), None);
    }

    #[test]
    fn titles_come_from_the_first_line() {
        assert_eq!(title_from("\n  Fix the bug  \nmore"), "Fix the bug");
        let long = "x".repeat(200);
        let t = title_from(&long);
        assert_eq!(t.chars().count(), TITLE_FROM_PROMPT_CHARS);
        assert!(t.ends_with('…'));
    }

    #[test]
    fn list_query_parses_every_filter() {
        let q = list_query(
            "state=QUEUED&state=FAILED&config_name=n&model_id=m&creator=c&source=API&environment_id=e\
             &created_after=2026-01-01T00:00:00Z&created_before=2026-01-02T00:00:00.0005Z\
             &updated_after=2026-01-01T00:00:00Z&q=bug&metadata%5Bteam%5D=core&sort_by=title&sort_order=asc&limit=7",
        )
        .expect("valid");
        assert_eq!(q.states, vec![RunState::Queued, RunState::Failed]);
        assert_eq!(q.name.as_deref(), Some("n"));
        assert_eq!(q.source, Some(SourceType::Api));
        assert_eq!(q.metadata, vec![("team".to_string(), "core".to_string())]);
        assert_eq!(q.created_before, Some(Timestamp(1_767_312_000_001)));
        assert_eq!(q.sort_by, SortBy::Title);
        assert_eq!(q.order, Order::Asc);
        assert_eq!(q.limit, 7);
    }

    /// `schedule_id` is a filter on the runs a schedule's firings made, by the schedule's id
    /// in canonical text; a value that is no schedule id of this server matches nothing, and
    /// an empty or overlong one is refused like any filter's.
    #[test]
    fn schedule_id_filters_by_the_canonical_id_and_a_foreign_one_matches_nothing() {
        let id = runledger_domain::RunId::new(Timestamp(1_763_700_000_000), 9).to_string();
        let q = list_query(&format!("schedule_id={id}")).expect("valid");
        assert_eq!(q.schedule_id.as_deref(), Some(id.as_str()));
        assert!(!q.matches_nothing);
        let lower = list_query(&format!("schedule_id={}", id.to_lowercase())).expect("valid");
        assert_eq!(lower.schedule_id.as_deref(), Some(id.as_str()));
        assert_eq!(lower, q);
        for foreign in [
            "7f7c2b1e-8a0a-4c1e-9d35-2f0f3c7b9a10",
            "not-a-schedule",
            "0123456789ABCDEFGHJKMNPQRSTV",
            "81ZZZZZZZZZZZZZZZZZZZZZZZZ",
        ] {
            let q = list_query(&format!("schedule_id={foreign}")).expect("accepted");
            assert!(q.matches_nothing, "{foreign}");
            assert_eq!(q.schedule_id, None);
        }
        // The last value counts, as for every filter.
        let q = list_query(&format!("schedule_id=nope&schedule_id={id}")).expect("valid");
        assert!(!q.matches_nothing);
        let q = list_query(&format!("schedule_id={id}&schedule_id=nope")).expect("valid");
        assert!(q.matches_nothing);
        // With a foreign parameter too, still nothing.
        let q = list_query(&format!("schedule_id={id}&ancestor_run_id=x")).expect("valid");
        assert!(q.matches_nothing);
        assert_eq!(
            refusal(list_query("schedule_id=")),
            "schedule_id must not be empty"
        );
        assert_eq!(
            refusal(list_query(&format!("schedule_id={}", "x".repeat(257)))),
            "schedule_id is longer than 256 bytes"
        );
    }

    #[test]
    fn list_query_refuses_bad_values() {
        for bad in [
            "limit=0",
            "limit=501",
            "limit=ten",
            "state=DONE",
            "sort_by=agent",
            "sort_order=up",
            "source=EMAIL",
            "created_after=yesterday",
            "cursor=xyz",
            "metadata%5Bbad%20key%5D=1",
            "name=",
        ] {
            assert!(list_query(bad).is_err(), "{bad} accepted");
        }
    }

    /// The detail of the 400 `validate` gives for `input`.
    fn refusal<T: std::fmt::Debug>(result: Result<T, ApiError>) -> String {
        let e = result.expect_err("refused");
        assert_eq!(e.status.as_u16(), 400, "{e}");
        e.detail
    }

    #[test]
    fn list_query_limits_name_the_parameter_and_the_limit() {
        let at = |n: usize| "x".repeat(n);
        assert!(list_query(&format!("name={}", at(256))).is_ok());
        for key in [
            "name",
            "config_name",
            "model_id",
            "creator",
            "environment_id",
            "skill",
        ] {
            let detail = refusal(list_query(&format!("{key}={}", at(257))));
            assert_eq!(detail, format!("{key} is longer than 256 bytes"));
        }
        assert!(list_query(&format!("q={}", at(1024))).is_ok());
        assert_eq!(
            refusal(list_query(&format!("q={}", at(1025)))),
            "q is longer than 1024 bytes"
        );
        for bad in ["limit=0", "limit=501", "limit=-1", "limit=1.5", "limit="] {
            assert_eq!(
                refusal(list_query(bad)),
                "limit must be an integer from 1 to 500"
            );
        }
        assert!(list_query("limit=500").is_ok() && list_query("limit=1").is_ok());
        let six: String = (0..6).map(|i| format!("metadata%5Bk{i}%5D=v&")).collect();
        assert_eq!(refusal(list_query(&six)), "at most 5 metadata filters");
        assert!(refusal(list_query("created_after=2026-13-01")).starts_with("created_after"));
        assert!(refusal(list_query("updated_after=")).starts_with("updated_after"));
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

    #[test]
    fn body_field_limits_name_the_field_and_the_limit() {
        let config = Config::load(None, &Default::default()).expect("defaults");
        let creator = || Creator {
            kind: runledger_domain::CreatorKind::User,
            uid: "k".into(),
            display_name: "k".into(),
        };
        let create = |body: serde_json::Value| {
            super::create(body.to_string().as_bytes(), &config, creator())
        };
        let at = |n: usize| "x".repeat(n);
        assert!(create(serde_json::json!({"prompt": at(MAX_PROMPT_BYTES)})).is_ok());
        for (body, want) in [
            (
                serde_json::json!({"prompt": at(MAX_PROMPT_BYTES + 1)}),
                "prompt is longer than 65536 bytes",
            ),
            (
                serde_json::json!({"prompt": "p", "title": "é".repeat(257)}),
                "title is longer than 256 characters",
            ),
            (
                serde_json::json!({"prompt": "p", "config": {"base_prompt": at(16 * 1024 + 1)}}),
                "config.base_prompt is longer than 16384 bytes",
            ),
            (
                serde_json::json!({"prompt": "p", "config": {"model_id": at(257)}}),
                "config.model_id is longer than 256 bytes",
            ),
            (
                serde_json::json!({"prompt": "p", "metadata": {at(65): "v"}}),
                "metadata key of 65 bytes must be 1-64 characters of [a-zA-Z0-9._-]",
            ),
            (
                serde_json::json!({"prompt": "p", "metadata": {"k": at(257)}}),
                "metadata value of \"k\" must be at most 256 bytes without NUL",
            ),
        ] {
            assert_eq!(refusal(create(body)), want);
        }
        assert!(create(serde_json::json!({"prompt": "p", "title": "é".repeat(256)})).is_ok());
        assert_eq!(
            refusal(followup(
                serde_json::json!({"message": at(MAX_FOLLOWUP_BYTES + 1)})
                    .to_string()
                    .as_bytes()
            )),
            "message is longer than 65536 bytes"
        );
    }

    #[test]
    fn metadata_rules() {
        let mut ok = BTreeMap::new();
        ok.insert("team.name-1_x".to_string(), "v".to_string());
        assert!(metadata(Some(ok)).is_ok());
        let too_many: BTreeMap<_, _> = (0..21).map(|i| (format!("k{i}"), String::new())).collect();
        assert!(metadata(Some(too_many)).is_err());
        let nul: BTreeMap<_, _> = [("k".to_string(), "a\0b".to_string())].into();
        assert!(metadata(Some(nul)).is_err());
        let long: BTreeMap<_, _> = [("k".to_string(), "x".repeat(257))].into();
        assert!(metadata(Some(long)).is_err());
    }
}

/// Property tests: any input is parsed or refused with a 400 (never a panic, never another
/// status), and what a valid request says comes back unchanged in the parsed value.
#[cfg(test)]
mod properties {
    use actix_web::http::StatusCode;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    use super::*;
    use crate::wire::format_time;
    use runledger_config::{Environment, Overrides};
    use runledger_domain::CreatorKind;

    fn config() -> Config {
        let mut config = Config::load(None, &Overrides::default()).expect("defaults");
        config.environments.push(Environment {
            id: "other".into(),
            model_id: "other-model".into(),
            ..Environment::demo()
        });
        config
    }

    fn creator() -> Creator {
        Creator {
            kind: CreatorKind::User,
            uid: "key".into(),
            display_name: "key".into(),
        }
    }

    fn refused_with_400<T>(result: Result<T, ApiError>) -> Result<(), TestCaseError> {
        if let Err(e) = result {
            prop_assert_eq!(e.status, StatusCode::BAD_REQUEST, "{}", e);
        }
        Ok(())
    }

    /// A non-blank string without NUL.
    fn text(max: usize) -> impl Strategy<Value = String> {
        proptest::string::string_regex(&format!("[^\\x00]{{0,{max}}}"))
            .expect("regex")
            .prop_filter("blank", |s| !s.trim().is_empty())
    }

    /// A short string without NUL (possibly blank).
    fn short() -> impl Strategy<Value = String> {
        proptest::string::string_regex("[^\\x00]{1,24}").expect("regex")
    }

    fn metadata_key() -> impl Strategy<Value = String> {
        proptest::string::string_regex("[A-Za-z0-9._-]{1,64}").expect("regex")
    }

    fn metadata_value() -> impl Strategy<Value = String> {
        proptest::string::string_regex("[^\\x00]{0,60}").expect("regex")
    }

    /// Arbitrary JSON whose object keys are mostly the fields the parsers read, so the values
    /// reach the checks behind the type checks.
    fn json_value() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            4 => proptest::sample::select(vec![
                "prompt", "skill", "config", "title", "metadata", "name", "model_id",
                "base_prompt", "environment_id", "skill_spec", "mcp_servers", "warp_id",
                "command", "args", "url", "env", "headers", "message", "mode", "kind", "admin",
            ])
            .prop_map(String::from),
            1 => ".{0,8}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".{0,30}".prop_map(Value::from),
            Just(Value::from("demo")),
            Just(Value::from("acme/tools:deploy")),
            Just(Value::from("https://mcp.example.com")),
        ];
        leaf.prop_recursive(4, 48, 8, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
                proptest::collection::btree_map(key.clone(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    #[derive(Debug, Clone)]
    struct QuerySpec {
        states: Vec<RunState>,
        foreign: Option<&'static str>,
        name: Option<String>,
        model_id: Option<String>,
        creator: Option<String>,
        environment_id: Option<String>,
        source: Option<SourceType>,
        skill_spec: Option<String>,
        created_after: Option<u64>,
        created_before: Option<u64>,
        updated_after: Option<u64>,
        q: Option<String>,
        metadata: BTreeMap<String, String>,
        sort: usize,
        order: usize,
        limit: usize,
        artifact_type: Option<&'static str>,
        /// A schedule id (a ULID of any time and randomness).
        schedule_id: Option<runledger_domain::RunId>,
    }

    fn query_spec() -> impl Strategy<Value = QuerySpec> {
        // Up to the last millisecond of 9999, the last year RFC 3339 can write.
        let ms = || proptest::option::of(0u64..=253_402_300_799_999);
        (
            (
                proptest::sample::subsequence(RunState::ALL.to_vec(), 0..=5),
                proptest::option::of(proptest::sample::select(FOREIGN_STATES.to_vec())),
                proptest::option::of(short()),
                proptest::option::of(short()),
                proptest::option::of(short()),
                proptest::option::of(short()),
                proptest::option::of(proptest::sample::select(SourceType::ALL.to_vec())),
                proptest::option::of(short()),
            ),
            (
                ms(),
                ms(),
                ms(),
                proptest::option::of(short()),
                proptest::collection::btree_map(metadata_key(), metadata_value(), 0..=5),
                0..SORT_BY.len(),
                0..SORT_ORDER.len(),
                1usize..=500,
                proptest::option::of(proptest::sample::select(
                    runledger_domain::ArtifactKind::TYPE_NAMES.to_vec(),
                )),
                proptest::option::of(any::<u128>().prop_map(runledger_domain::RunId)),
            ),
        )
            .prop_map(
                |(
                    (states, foreign, name, model_id, creator, environment_id, source, skill_spec),
                    (
                        created_after,
                        created_before,
                        updated_after,
                        q,
                        metadata,
                        sort,
                        order,
                        limit,
                        artifact_type,
                        schedule_id,
                    ),
                )| QuerySpec {
                    states,
                    foreign,
                    name,
                    model_id,
                    creator,
                    environment_id,
                    source,
                    skill_spec,
                    created_after,
                    created_before,
                    updated_after,
                    q,
                    metadata,
                    sort,
                    order,
                    limit,
                    artifact_type,
                    schedule_id,
                },
            )
    }

    fn query_string(spec: &QuerySpec) -> String {
        let mut pairs: Vec<(String, String)> = Vec::new();
        let mut add = |k: &str, v: String| pairs.push((k.to_string(), v));
        for s in &spec.states {
            add("state", s.as_str().into());
        }
        if let Some(f) = spec.foreign {
            add("state", f.into());
        }
        let strings = [
            ("config_name", &spec.name),
            ("model_id", &spec.model_id),
            ("creator", &spec.creator),
            ("environment_id", &spec.environment_id),
            ("skill_spec", &spec.skill_spec),
            ("q", &spec.q),
        ];
        for (k, v) in strings {
            if let Some(v) = v {
                add(k, v.clone());
            }
        }
        if let Some(s) = spec.source {
            add("source", s.as_str().into());
        }
        if let Some(t) = spec.artifact_type {
            add("artifact_type", t.into());
        }
        if let Some(id) = spec.schedule_id {
            add("schedule_id", id.to_string());
        }
        let times = [
            ("created_after", spec.created_after),
            ("created_before", spec.created_before),
            ("updated_after", spec.updated_after),
        ];
        for (k, v) in times {
            if let Some(ms) = v {
                add(k, format_time(Timestamp(ms)));
            }
        }
        for (k, v) in &spec.metadata {
            add(&format!("metadata[{k}]"), v.clone());
        }
        add("sort_by", SORT_BY[spec.sort].0.into());
        add("sort_order", SORT_ORDER[spec.order].0.into());
        add("limit", spec.limit.to_string());
        form_urlencoded::Serializer::new(String::new())
            .extend_pairs(&pairs)
            .finish()
    }

    proptest! {
        #[test]
        fn any_query_string_is_parsed_or_refused(raw in ".{0,200}") {
            refused_with_400(list_query(&raw))?;
        }

        #[test]
        fn known_parameters_with_any_values_are_parsed_or_refused(
            pairs in proptest::collection::vec(
                (
                    prop_oneof![
                        3 => proptest::sample::select(vec![
                            "limit", "cursor", "sort_by", "sort_order", "state", "name",
                            "config_name", "model_id", "creator", "source", "environment_id",
                            "created_after", "created_before", "updated_after", "q", "skill",
                            "skill_spec", "schedule_id", "execution_location", "artifact_type", "metadata[k]",
                            "metadata[]", "metadata[a b]", "metadata[",
                        ])
                        .prop_map(String::from),
                        1 => ".{0,12}",
                    ],
                    prop_oneof![".{0,40}", "[0-9+-]{1,22}", "[0-9T:.Z+-]{10,35}"],
                ),
                0..12,
            )
        ) {
            let raw = form_urlencoded::Serializer::new(String::new())
                .extend_pairs(&pairs)
                .finish();
            refused_with_400(list_query(&raw))?;
        }

        #[test]
        fn valid_queries_round_trip(spec in query_spec()) {
            let raw = query_string(&spec);
            let q = list_query(&raw).map_err(|e| TestCaseError::fail(format!("{raw}: {e}")))?;
            let mut states = spec.states.clone();
            states.sort();
            let mut metadata: Vec<_> = spec.metadata.clone().into_iter().collect();
            metadata.sort();
            let expected = Query {
                matches_nothing: spec.foreign.is_some() && spec.states.is_empty(),
                states,
                name: spec.name.clone(),
                model_id: spec.model_id.clone(),
                creator: spec.creator.clone(),
                environment_id: spec.environment_id.clone(),
                source: spec.source,
                skill_spec: spec.skill_spec.clone(),
                created_after: spec.created_after.map(Timestamp),
                created_before: spec.created_before.map(Timestamp),
                updated_after: spec.updated_after.map(Timestamp),
                q: spec.q.clone(),
                metadata,
                sort_by: SORT_BY[spec.sort].1,
                order: SORT_ORDER[spec.order].1,
                limit: spec.limit,
                cursor: None,
                // Set by the handler from the key, never from the query string.
                team: String::new(),
                every_team: false,
                artifact_type: spec.artifact_type,
                schedule_id: spec.schedule_id.map(|id| id.to_string()),
            };
            prop_assert_eq!(q, expected);
        }

        #[test]
        fn any_body_is_parsed_or_refused(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            refused_with_400(create(&body, &config(), creator()))?;
            refused_with_400(followup(&body))?;
        }

        #[test]
        fn any_json_is_parsed_or_refused(value in json_value()) {
            let body = serde_json::to_vec(&value).expect("json");
            refused_with_400(create(&body, &config(), creator()))?;
            refused_with_400(followup(&body))?;
        }

        #[test]
        fn valid_creates_round_trip(
            prompt in text(300),
            title in proptest::option::of(text(40)),
            metadata in proptest::collection::btree_map(metadata_key(), metadata_value(), 0..=20),
            environment in proptest::option::of(proptest::sample::select(vec!["demo", "other"])),
            model_id in proptest::option::of(short()),
            name in proptest::option::of(short()),
            base_prompt in proptest::option::of(short()),
            servers in proptest::collection::btree_map(
                "[a-z0-9_-]{1,64}",
                (0usize..3, "[a-z0-9./-]{1,40}"),
                0..=16,
            ),
        ) {
            let mut config_in = serde_json::Map::new();
            for (k, v) in [
                ("environment_id", environment.map(String::from)),
                ("model_id", model_id.clone()),
                ("name", name.clone()),
                ("base_prompt", base_prompt.clone()),
            ] {
                if let Some(v) = v {
                    config_in.insert(k.into(), v.into());
                }
            }
            let field = |kind: usize| ["warp_id", "command", "url"][kind];
            let value = |kind: usize, v: &str| if kind == 2 { format!("https://{v}") } else { v.to_string() };
            config_in.insert(
                "mcp_servers".into(),
                servers
                    .iter()
                    .map(|(n, (kind, v))| (n.clone(), json!({ field(*kind): value(*kind, v) })))
                    .collect::<serde_json::Map<_, _>>()
                    .into(),
            );
            let mut body = json!({"prompt": prompt, "metadata": metadata, "config": config_in});
            if let Some(t) = &title {
                body["title"] = t.clone().into();
            }
            let body = serde_json::to_vec(&body).expect("json");
            let (created, uploads) = create(&body, &config(), creator())
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert!(uploads.is_empty());
            let environment = environment.unwrap_or("demo");
            prop_assert_eq!(&created.prompt, &prompt);
            prop_assert_eq!(created.title, title.unwrap_or_else(|| title_from(&prompt)));
            prop_assert_eq!(created.metadata, metadata);
            prop_assert_eq!(created.config.environment_id.as_deref(), Some(environment));
            let default_model = if environment == "demo" { "demo" } else { "other-model" };
            prop_assert_eq!(
                created.config.model_id.as_deref(),
                Some(model_id.as_deref().unwrap_or(default_model))
            );
            prop_assert_eq!(created.config.name, name);
            prop_assert_eq!(created.config.base_prompt, base_prompt);
            prop_assert_eq!(created.config.mcp_servers.len(), servers.len());
            for (n, (kind, v)) in &servers {
                let s = &created.config.mcp_servers[n];
                let got = [&s.warp_id, &s.command, &s.url][*kind];
                prop_assert_eq!(got.clone(), Some(value(*kind, v)));
            }
        }

        #[test]
        fn valid_followups_round_trip(
            message in text(300),
            mode in proptest::option::of(proptest::sample::select(FollowupMode::ALL.to_vec())),
        ) {
            let mut body = json!({"message": message});
            if let Some(m) = mode {
                body["mode"] = m.as_str().into();
            }
            let body = serde_json::to_vec(&body).expect("json");
            let (got, got_mode) = followup(&body).map_err(|e| TestCaseError::fail(e.to_string()))?;
            prop_assert_eq!(got, message);
            prop_assert_eq!(got_mode, mode.unwrap_or_default());
        }
    }
}
