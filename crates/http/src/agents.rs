//! Handlers of the Oz read endpoints beside runs that the official clients call: the agents
//! (skills) list, the models list, a run's conversation (`GET /agent/runs/{id}/conversation`,
//! and the same by conversation id), the session and conversation redirect checks, a run's
//! handoff attachments, and the agent identities, which runledger does not have and answers
//! `422 operation_not_supported`. What each answers, and why, is in docs/api.md ("Agents,
//! models and conversations"). Runs are read through the `RunHandle` and the
//! `TranscriptReader`, with the same team scoping as `GET /agent/runs/{id}`.

use std::collections::{BTreeMap, HashMap};

use actix_web::{web, HttpRequest, HttpResponse};

use super::access::{run_id, visible};
use super::error_responses::{BadRequest, InternalError, NotFound, NotSupported, Unauthorized};
use super::problem::ApiError;
use super::wire::{
    format_time, session_id, ConversationContentBlock, ConversationMessage,
    ConversationMessageRole, ConversationRedirect, ConversationResponse, ConversationStep,
    HandoffAttachments, ListAgentsResponse, ListModelsResponse, ModelInfo, ModelProvider,
    SessionRedirect,
};
use super::{validate, AppState, MaybePrincipal, Principal};
use runledger_domain::harness::Harness;
use runledger_domain::{Run, RunId, Timestamp};
use runledger_runs::transcript::Entry;

/// The most of a transcript one conversation holds (its latest 1 MiB), and the most of the
/// follow-ups' messages. Earlier output is left out (and said to be), so the answer stays
/// bounded whatever the agent printed or was sent.
pub const CONVERSATION_MAX_BYTES: u64 = 1024 * 1024;

/// The agents (skills) that can run here: none, since environments declare no skills
/// (docs/api.md). The query parameters are validated and change nothing.
#[utoipa::path(
    get,
    path = "/api/v1/agent",
    tag = "agents",
    operation_id = "listAgents",
    params(
        ("repo" = Option<String>, Query, pattern = r"^[A-Za-z0-9-]{1,100}/(?!\.\.?$)[A-Za-z0-9._-]{1,100}$",
         description = "`owner/repo`; validated, lists nothing more."),
        ("sort_by" = Option<String>, Query, pattern = "^(name|last_run)$",
         description = "`name` or `last_run`."),
        ("refresh" = Option<bool>, Query, description = "`true` or `false`; nothing is cached."),
        ("include_malformed_skills" = Option<bool>, Query, description = "`true` or `false`."),
    ),
    responses(
        (status = 200, description = "The agents: always an empty list", body = ListAgentsResponse),
        (status = 400, response = BadRequest),
        (status = 401, response = Unauthorized),
    ),
    security(("bearerAuth" = []))
)]
pub async fn list(req: HttpRequest, _: Principal) -> Result<HttpResponse, ApiError> {
    validate::agents_query(req.query_string())?;
    Ok(HttpResponse::Ok().json(ListAgentsResponse { agents: Vec::new() }))
}

/// The provider of the models a harness runs.
fn provider(harness: Harness) -> ModelProvider {
    match harness {
        Harness::Claude => ModelProvider::Anthropic,
        Harness::Codex => ModelProvider::Openai,
        Harness::Gemini => ModelProvider::Google,
        Harness::Demo | Harness::Command => ModelProvider::Unknown,
    }
}

/// The models the environments the key's team may use declare (`model_id`), each once, in
/// order of id. An environment that leaves the model to its CLI declares none.
#[utoipa::path(
    get,
    path = "/api/v1/agent/models",
    tag = "agents",
    operation_id = "listModels",
    responses(
        (status = 200, description = "The declared models", body = ListModelsResponse),
        (status = 401, response = Unauthorized),
    ),
    security(("bearerAuth" = []))
)]
pub async fn models(
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let config = &state.config;
    // By model id: the providers and environments that declare it.
    let mut declared: BTreeMap<&str, (ModelProvider, Vec<&str>)> = BTreeMap::new();
    for env in config
        .environments
        .iter()
        .filter(|e| e.open_to(&key.team))
        .filter(|e| !e.model_id.is_empty())
    {
        let entry = declared
            .entry(&env.model_id)
            .or_insert((provider(env.harness), Vec::new()));
        // One id under two harnesses of different providers names no one provider.
        if entry.0 != provider(env.harness) {
            entry.0 = ModelProvider::Unknown;
        }
        entry.1.push(&env.id);
    }
    let default_model_id = config
        .environments
        .first()
        .filter(|e| e.open_to(&key.team))
        .map_or("", |e| e.model_id.as_str());
    Ok(HttpResponse::Ok().json(ListModelsResponse {
        default_model_id,
        models: declared
            .into_iter()
            .map(|(id, (provider, environments))| ModelInfo {
                id,
                display_name: id,
                provider,
                vision_supported: false,
                description: format!("declared by the environments {}", environments.join(", ")),
            })
            .collect(),
    }))
}

/// A follow-up as the run's events record it, with the execution it went to: the one in
/// progress when it arrived, or else the next one (which it starts or waits for).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    /// The sequence number of its `FollowupReceived` event.
    pub seq: u64,
    pub at: Timestamp,
    pub execution: u32,
    pub message: String,
}

/// The follow-ups of a run's history received at `since` or later: the latest of them, at most
/// `CONVERSATION_MAX_BYTES` of messages, oldest first.
fn followups(
    events: impl Iterator<Item = Result<runledger_runs::actor::Envelope, runledger_runs::actor::Error>>,
    since: Timestamp,
) -> Result<Vec<Asked>, ApiError> {
    use runledger_domain::Event;
    let mut asked = std::collections::VecDeque::new();
    let mut bytes = 0;
    let (mut started, mut running) = (0, false);
    for envelope in events {
        let envelope = envelope?;
        match envelope.event {
            Event::Started { execution } | Event::StartedOn { execution, .. } => {
                (started, running) = (execution, true)
            }
            Event::Succeeded { .. }
            | Event::Failed { .. }
            | Event::Cancelled { .. }
            | Event::Lost { .. } => running = false,
            Event::FollowupReceived { message, .. } if envelope.at >= since => {
                bytes += message.len();
                asked.push_back(Asked {
                    seq: envelope.seq,
                    at: envelope.at,
                    execution: if running { started } else { started + 1 },
                    message,
                });
                while bytes > CONVERSATION_MAX_BYTES as usize {
                    match asked.pop_front() {
                        Some(old) => bytes -= old.message.len(),
                        None => break,
                    }
                }
            }
            _ => {}
        }
    }
    Ok(asked.into())
}

/// A run's conversation: its prompt, then the latest `CONVERSATION_MAX_BYTES` of its
/// transcript (`entries`, from byte `start`) with the follow-ups of its history (`asked`), one
/// step per execution. Follow-ups are user messages, placed by when they arrived among the
/// output of the execution they went to; the agent's readable output (its `agent` entries, or
/// its stdout when it has none) is assistant text, the harness's notes system text and stderr
/// system events. The transcript's own `followup` entries (where the agent took a follow-up)
/// are left out, as the history's record stands for them. Consecutive blocks of one role make
/// one message, and the pieces of a long line are joined.
pub fn conversation(
    run: &Run,
    entries: &[(u64, Entry)],
    start: u64,
    asked: &[Asked],
) -> ConversationResponse {
    let readable = entries.iter().any(|(_, e)| e.stream == "agent");
    // Pieces of long lines joined: (offsets, entry with the whole text).
    let mut lines: Vec<(Vec<u64>, Entry)> = Vec::new();
    let mut open: HashMap<(u32, &str), usize> = HashMap::new();
    for (offset, e) in entries {
        if e.stream == "followup" || readable && e.stream == "stdout" {
            continue;
        }
        let key = (e.execution, e.stream.as_str());
        let index = match open.remove(&key) {
            Some(i) => {
                lines[i].0.push(*offset);
                lines[i].1.text.push_str(&e.text);
                i
            }
            None => {
                lines.push((vec![*offset], e.clone()));
                lines.len() - 1
            }
        };
        if e.continued {
            open.insert(key, index);
        }
    }
    let first_execution = match (lines.first(), asked.first()) {
        (Some((_, e)), Some(a)) => e.execution.min(a.execution),
        (Some((_, e)), None) => e.execution,
        (None, Some(a)) => a.execution,
        (None, None) => 1,
    };
    let mut first = Step::new(first_execution);
    first.push(
        ConversationMessageRole::User,
        "prompt".into(),
        run.created_at,
        ConversationContentBlock::Text {
            message_id: "prompt".into(),
            text: run.prompt.clone(),
        },
    );
    let mut steps = vec![first];
    if start > 0 {
        if let Some(step) = steps.last_mut() {
            let mut data = serde_json::Map::new();
            data.insert("omitted_bytes".into(), start.into());
            step.push(
                ConversationMessageRole::System,
                "truncated".into(),
                entries.first().map_or(run.created_at, |(_, e)| e.at),
                ConversationContentBlock::Event {
                    message_id: "truncated".into(),
                    name: "transcript_truncated".into(),
                    data,
                },
            );
        }
    }
    let mut asked = asked.iter().peekable();
    let mut lines = lines.into_iter().peekable();
    loop {
        // A follow-up goes before the first output of a later execution, or of its own
        // execution written after it arrived.
        let next_asked = match (asked.peek(), lines.peek()) {
            (Some(a), Some((_, e))) => {
                a.execution < e.execution || a.execution == e.execution && a.at <= e.at
            }
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        // The message's block, and the transcript entries beyond the first that it joins.
        let (execution, role, id, at, block, joined) = if next_asked {
            let Some(a) = asked.next() else { break };
            let id = format!("followup-{}", a.seq);
            let block = ConversationContentBlock::Text {
                message_id: id.clone(),
                text: a.message.clone(),
            };
            let role = ConversationMessageRole::User;
            (a.execution, role, id, a.at, block, Vec::new())
        } else {
            let Some((offsets, entry)) = lines.next() else {
                break;
            };
            let id = offsets.first().copied().unwrap_or_default().to_string();
            let (role, block) = block_of(id.clone(), entry.stream, entry.text);
            let joined = offsets.get(1..).unwrap_or_default().to_vec();
            (entry.execution, role, id, entry.at, block, joined)
        };
        if steps.last().is_none_or(|s| s.execution != execution) {
            steps.push(Step::new(execution));
        }
        if let Some(step) = steps.last_mut() {
            step.push(role, id, at, block);
            for offset in joined {
                step.note_id(offset.to_string());
            }
        }
    }
    ConversationResponse {
        conversation_id: run.id.to_string(),
        steps: steps.into_iter().map(Step::finish).collect(),
    }
}

/// The role and content block of a transcript entry of `stream`.
fn block_of(
    id: String,
    stream: String,
    text: String,
) -> (ConversationMessageRole, ConversationContentBlock) {
    match stream.as_str() {
        "agent" | "stdout" => (
            ConversationMessageRole::Assistant,
            ConversationContentBlock::Text {
                message_id: id,
                text,
            },
        ),
        "system" => (
            ConversationMessageRole::System,
            ConversationContentBlock::Text {
                message_id: id,
                text,
            },
        ),
        _ => {
            let mut data = serde_json::Map::new();
            data.insert("text".into(), text.into());
            (
                ConversationMessageRole::System,
                ConversationContentBlock::Event {
                    message_id: id,
                    name: stream,
                    data,
                },
            )
        }
    }
}

/// A step being built.
struct Step {
    execution: u32,
    messages: Vec<(ConversationMessageRole, Timestamp, ConversationMessage)>,
    first: Option<Timestamp>,
    last: Option<Timestamp>,
}

impl Step {
    fn new(execution: u32) -> Step {
        Step {
            execution,
            messages: Vec::new(),
            first: None,
            last: None,
        }
    }

    /// Adds a block: to the last message if it has the same role, else as a new message.
    fn push(
        &mut self,
        role: ConversationMessageRole,
        id: String,
        at: Timestamp,
        block: ConversationContentBlock,
    ) {
        self.first = Some(self.first.map_or(at, |f| f.min(at)));
        self.last = Some(self.last.map_or(at, |l| l.max(at)));
        match self.messages.last_mut() {
            Some((r, _, message)) if *r == role => {
                message.message_ids.push(id);
                message.content.push(block);
            }
            _ => self.messages.push((
                role,
                at,
                ConversationMessage {
                    message_ids: vec![id],
                    role,
                    timestamp: format_time(at),
                    content: vec![block],
                },
            )),
        }
    }

    /// Records one more transcript entry (a piece of a joined line) in the last message.
    fn note_id(&mut self, id: String) {
        if let Some((_, _, message)) = self.messages.last_mut() {
            if !message.message_ids.contains(&id) {
                message.message_ids.push(id);
            }
        }
    }

    fn finish(self) -> ConversationStep {
        ConversationStep {
            id: format!("execution-{}", self.execution),
            started_at: self.first.map(format_time),
            completed_at: self.last.map(format_time),
            messages: self.messages.into_iter().map(|(_, _, m)| m).collect(),
            steps: Vec::new(),
        }
    }
}

/// The conversation of run `id`, if the key's team may see it.
fn conversation_of(
    state: &AppState,
    key: &runledger_runs::api_keys::Key,
    id: RunId,
) -> Result<HttpResponse, ApiError> {
    let run = visible(state, key, id)?;
    let slice = state
        .transcripts
        .tail(id, CONVERSATION_MAX_BYTES)
        .map_err(|e| ApiError::internal(&e))?;
    let start = slice.entries.first().map_or(0, |(offset, _)| *offset);
    // Follow-ups from when the output shown begins (all of them for a whole transcript).
    let since = match slice.entries.first() {
        Some((_, e)) if start > 0 => e.at,
        _ => Timestamp(0),
    };
    let events = state
        .runs
        .durable_events(id, 0)?
        .ok_or_else(|| ApiError::not_found("no run with this id"))?;
    let asked = followups(events, since)?;
    Ok(HttpResponse::Ok().json(conversation(&run, &slice.entries, start, &asked)))
}

/// A run's conversation: its prompt, follow-ups and the agent's output from the latest 1 MiB of
/// its transcript, one step per execution (docs/api.md). The full transcript is
/// `GET /agent/runs/{run_id}/transcript`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}/conversation",
    tag = "agents",
    operation_id = "getRunConversation",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
    ),
    responses(
        (status = 200, description = "The run's conversation", body = ConversationResponse),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn run_conversation(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    conversation_of(&state, &key, id)
}

/// A conversation by its id, which is its run's id: the same answer as the run's conversation.
#[utoipa::path(
    get,
    path = "/api/v1/agent/conversations/{conversation_id}",
    tag = "agents",
    operation_id = "getConversation",
    params(
        ("conversation_id" = String, Path, description = "A run's id; any other value is answered 404."),
    ),
    responses(
        (status = 200, description = "The run's conversation", body = ConversationResponse),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn get_conversation(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    conversation_of(&state, &key, id)
}

/// The run a redirect check names (by its id, or by its `session_id`, the same 128 bits as a
/// UUID), if it is one the caller's team may see. An unknown, malformed or other team's id is
/// no run, and so is every id for a caller without a key: the check then answers that no
/// redirect is needed, the document's only answer, and tells nothing of other teams' runs or
/// of whether a run exists.
fn redirect_run(
    state: &AppState,
    key: Option<&runledger_runs::api_keys::Key>,
    raw: &str,
) -> Result<Option<Run>, ApiError> {
    let Some(key) = key else {
        return Ok(None);
    };
    let id = match raw.parse::<RunId>() {
        Ok(id) => id,
        Err(_) => match uuid::Uuid::try_parse(raw) {
            Ok(uuid) => RunId(uuid.as_u128()),
            Err(_) => return Ok(None),
        },
    };
    Ok(state.runs.get(id)?.filter(|run| run.team == key.team))
}

/// Whether a session should give way to its conversation. A session is a run (its page is
/// `/sessions/{run_id}`; its `session_id` is the run id as a UUID): once the run is finished
/// (a terminal state), the answer names its conversation (the run id); while it goes on, for
/// no such run, or without an API key (the current clients send none), `{}`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/sessions/{session_uuid}/redirect",
    tag = "agents",
    operation_id = "getSessionRedirect",
    params(
        ("session_uuid" = String, Path, description = "A run's `session_id`, or its id."),
    ),
    responses(
        (status = 200, description = "`conversation_id` when the run has finished, else empty",
         body = SessionRedirect),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    ),
    security((), ("bearerAuth" = []))
)]
pub async fn session_redirect(
    path: web::Path<String>,
    state: web::Data<AppState>,
    MaybePrincipal(key): MaybePrincipal,
) -> Result<HttpResponse, ApiError> {
    let run = redirect_run(&state, key.as_ref(), &path)?;
    Ok(HttpResponse::Ok().json(SessionRedirect {
        conversation_id: run
            .filter(|r| r.state.is_terminal())
            .map(|r| r.id.to_string()),
    }))
}

/// Whether a conversation should give way to its live session: while its run is not finished
/// the answer names the session (the run's `session_id`, whose page is `/sessions/{run_id}`);
/// once it is, for no such run, or without an API key, `{}`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/conversations/{conversation_id}/redirect",
    tag = "agents",
    operation_id = "getConversationRedirect",
    params(
        ("conversation_id" = String, Path, description = "A run's id."),
    ),
    responses(
        (status = 200, description = "`session_id` while the run goes on, else empty",
         body = ConversationRedirect),
        (status = 401, response = Unauthorized),
        (status = 500, response = InternalError),
    ),
    security((), ("bearerAuth" = []))
)]
pub async fn conversation_redirect(
    path: web::Path<String>,
    state: web::Data<AppState>,
    MaybePrincipal(key): MaybePrincipal,
) -> Result<HttpResponse, ApiError> {
    let run = match path.parse::<RunId>() {
        Ok(_) => redirect_run(&state, key.as_ref(), &path)?,
        Err(_) => None,
    };
    Ok(HttpResponse::Ok().json(ConversationRedirect {
        session_id: run
            .filter(|r| !r.state.is_terminal())
            .map(|r| session_id(r.id).as_str().to_string()),
    }))
}

/// A run's handoff snapshot files: always none, since runledger's executions upload no
/// snapshots (the files attached at create are the run's `attachments`, not a handoff).
#[utoipa::path(
    get,
    path = "/api/v1/agent/runs/{run_id}/handoff/attachments",
    tag = "agents",
    operation_id = "listHandoffAttachments",
    params(
        ("run_id" = String, Path, description = "The run's id (a ULID); any other value is answered 404."),
    ),
    responses(
        (status = 200, description = "The run's handoff snapshots: an empty list", body = HandoffAttachments),
        (status = 401, response = Unauthorized),
        (status = 404, response = NotFound),
        (status = 500, response = InternalError),
    ),
    security(("bearerAuth" = []))
)]
pub async fn handoff_attachments(
    path: web::Path<String>,
    state: web::Data<AppState>,
    Principal(key): Principal,
) -> Result<HttpResponse, ApiError> {
    let id = run_id(&path)?;
    visible(&state, &key, id)?;
    Ok(HttpResponse::Ok().json(HandoffAttachments {
        attachments: Vec::new(),
    }))
}

/// The answer to every agent identity operation.
fn no_identities() -> ApiError {
    ApiError::not_supported(
        "runledger has no agent identities: an agent acts through an API key of kind 'agent' \
         (POST /api/v1/admin/keys), and its defaults live in the server's environments",
    )
}

/// Agent identities (create, list): not offered. An agent is an API key of kind `agent`.
#[utoipa::path(
    get,
    path = "/api/v1/agent/identities",
    tag = "agents",
    operation_id = "listAgentIdentities",
    responses(
        (status = 401, response = Unauthorized),
        (status = 422, response = NotSupported),
    ),
    security(("bearerAuth" = []))
)]
pub async fn identities(_: Principal) -> Result<HttpResponse, ApiError> {
    Err(no_identities())
}

/// Creating an agent identity: not offered (see `identities`). The body is not read.
#[utoipa::path(
    post,
    path = "/api/v1/agent/identities",
    tag = "agents",
    operation_id = "createAgentIdentity",
    responses(
        (status = 401, response = Unauthorized),
        (status = 422, response = NotSupported),
    ),
    security(("bearerAuth" = []))
)]
pub async fn create_identity(_: Principal) -> Result<HttpResponse, ApiError> {
    Err(no_identities())
}

/// One agent identity (get): not offered (see `identities`).
#[utoipa::path(
    get,
    path = "/api/v1/agent/identities/{uid}",
    tag = "agents",
    operation_id = "getAgentIdentity",
    params(("uid" = String, Path, description = "Any value: there are no identities.")),
    responses(
        (status = 401, response = Unauthorized),
        (status = 422, response = NotSupported),
    ),
    security(("bearerAuth" = []))
)]
pub async fn identity(_: Principal) -> Result<HttpResponse, ApiError> {
    Err(no_identities())
}

/// Updating an agent identity: not offered (see `identities`). The body is not read.
#[utoipa::path(
    put,
    path = "/api/v1/agent/identities/{uid}",
    tag = "agents",
    operation_id = "updateAgentIdentity",
    params(("uid" = String, Path, description = "Any value: there are no identities.")),
    responses(
        (status = 401, response = Unauthorized),
        (status = 422, response = NotSupported),
    ),
    security(("bearerAuth" = []))
)]
pub async fn update_identity(_: Principal) -> Result<HttpResponse, ApiError> {
    Err(no_identities())
}

/// Deleting an agent identity: not offered (see `identities`).
#[utoipa::path(
    delete,
    path = "/api/v1/agent/identities/{uid}",
    tag = "agents",
    operation_id = "deleteAgentIdentity",
    params(("uid" = String, Path, description = "Any value: there are no identities.")),
    responses(
        (status = 401, response = Unauthorized),
        (status = 422, response = NotSupported),
    ),
    security(("bearerAuth" = []))
)]
pub async fn delete_identity(_: Principal) -> Result<HttpResponse, ApiError> {
    Err(no_identities())
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::RunState;

    fn entry(
        offset: u64,
        execution: u32,
        stream: &str,
        text: &str,
        continued: bool,
    ) -> (u64, Entry) {
        (
            offset,
            Entry {
                at: Timestamp(2_000_000 + offset),
                execution,
                stream: stream.into(),
                text: text.into(),
                continued,
            },
        )
    }

    /// (step, role, texts) of every message.
    fn shape(c: &ConversationResponse) -> Vec<(String, ConversationMessageRole, Vec<String>)> {
        c.steps
            .iter()
            .flat_map(|s| {
                s.messages.iter().map(|m| {
                    let texts = m
                        .content
                        .iter()
                        .map(|b| match b {
                            ConversationContentBlock::Text { text, .. } => text.clone(),
                            ConversationContentBlock::Event { name, .. } => format!("<{name}>"),
                        })
                        .collect();
                    (s.id.clone(), m.role, texts)
                })
            })
            .collect()
    }

    fn run() -> Run {
        let mut run = runledger_domain::sample_run(1);
        run.prompt = "fix the build".into();
        run.state = RunState::Succeeded;
        run
    }

    #[test]
    fn readable_output_stands_in_for_raw_json_and_followups_go_where_they_arrived() {
        use ConversationMessageRole::{Assistant, System, User};
        let entries = [
            entry(0, 1, "system", "setup done", false),
            entry(10, 1, "stdout", "{\"raw\":1}", false),
            entry(20, 1, "agent", "looking", false),
            // Where the agent took the follow-up: the history's record stands for it.
            entry(30, 1, "followup", "(plan) and the tests", false),
            entry(40, 1, "stderr", "warn", false),
            entry(50, 1, "agent", "a long ", true),
            entry(60, 1, "agent", "line", false),
            entry(80, 2, "agent", "done", false),
        ];
        let asked = [
            Asked {
                seq: 7,
                at: Timestamp(2_000_025),
                execution: 1,
                message: "and the tests".into(),
            },
            // Resumed the finished run: the first thing of execution 2.
            Asked {
                seq: 12,
                at: Timestamp(2_000_070),
                execution: 2,
                message: "once more".into(),
            },
        ];
        let c = conversation(&run(), &entries, 0, &asked);
        let e1 = "execution-1".to_string();
        let e2 = "execution-2".to_string();
        assert_eq!(
            shape(&c),
            [
                (e1.clone(), User, vec!["fix the build".to_string()]),
                (e1.clone(), System, vec!["setup done".into()]),
                (e1.clone(), Assistant, vec!["looking".into()]),
                (e1.clone(), User, vec!["and the tests".into()]),
                (e1.clone(), System, vec!["<stderr>".into()]),
                (e1, Assistant, vec!["a long line".into()]),
                (e2.clone(), User, vec!["once more".into()]),
                (e2, Assistant, vec!["done".into()]),
            ]
        );
        assert_eq!(c.steps[0].messages[3].message_ids, ["followup-7"]);
        let joined = &c.steps[0].messages[5];
        assert_eq!(joined.message_ids, ["50", "60"]);
        assert_eq!(c.steps[0].started_at, Some(format_time(run().created_at)));
        assert_eq!(
            c.steps[1].started_at,
            Some(format_time(Timestamp(2_000_070)))
        );
        assert_eq!(
            c.steps[1].completed_at,
            Some(format_time(Timestamp(2_000_080)))
        );
    }

    #[test]
    fn a_followup_to_a_run_not_started_again_is_its_own_step() {
        let entries = [entry(0, 1, "stdout", "done", false)];
        let asked = [Asked {
            seq: 9,
            at: Timestamp(2_000_100),
            execution: 2,
            message: "queued".into(),
        }];
        let steps: Vec<String> = conversation(&run(), &entries, 0, &asked)
            .steps
            .into_iter()
            .map(|s| s.id)
            .collect();
        assert_eq!(steps, ["execution-1", "execution-2"]);
    }

    #[test]
    fn a_cut_transcript_says_how_much_was_left_out() {
        let entries = [entry(5_000, 3, "stdout", "tail", false)];
        let c = conversation(&run(), &entries, 5_000, &[]);
        let shape = shape(&c);
        assert_eq!(shape[0].0, "execution-3");
        assert_eq!(shape[1].2, ["<transcript_truncated>"]);
        assert_eq!(shape[2].2, ["tail"]);
    }

    #[test]
    fn followups_go_to_the_execution_they_reach_and_stay_bounded() {
        use runledger_domain::{Event, FollowupMode};
        let run_id = run().id;
        let at = |seq: u64, event: Event| runledger_runs::actor::Envelope {
            run_id,
            seq,
            at: Timestamp(seq * 10),
            event,
        };
        let asked = |message: &str| Event::FollowupReceived {
            message: message.into(),
            mode: FollowupMode::Normal,
            by: "key".into(),
        };
        let big = "x".repeat(CONVERSATION_MAX_BYTES as usize / 2 + 1);
        let history = vec![
            at(1, asked("before the start")),
            at(2, Event::Started { execution: 1 }),
            at(3, asked("while running")),
            at(4, Event::Succeeded { execution: 1 }),
            at(5, asked("resumes it")),
            at(6, asked(&big)),
            at(7, asked(&big)),
        ];
        fn ok(
            events: &[runledger_runs::actor::Envelope],
        ) -> impl Iterator<
            Item = Result<runledger_runs::actor::Envelope, runledger_runs::actor::Error>,
        > + '_ {
            events.iter().cloned().map(Ok)
        }
        let got = followups(ok(&history), Timestamp(0)).expect("history");
        // The two large ones do not fit together: the older is dropped, and so is all before.
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].seq, got[0].execution), (7, 2));
        let small = &history[..5];
        let got: Vec<(u64, u32)> = followups(ok(small), Timestamp(0))
            .expect("history")
            .iter()
            .map(|a| (a.seq, a.execution))
            .collect();
        assert_eq!(got, [(1, 1), (3, 1), (5, 2)]);
        // Only those from when the shown output begins.
        let since = followups(ok(small), Timestamp(30)).expect("history");
        assert_eq!(since.iter().map(|a| a.seq).collect::<Vec<_>>(), [3, 5]);
    }
}
