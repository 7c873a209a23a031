//! The `provenance` extension field of a run's `GET` answer: the latest execution's
//! provenance, added to the run's cached JSON (`render.rs`) as its last field. A list leaves it
//! out (it holds the environment's whole definition, which would multiply a page's size), so
//! the cache keeps the shared rendering and this adds the field per `GET`.

use actix_web::web::Bytes;

use runledger_domain::Run;
use runledger_format::events::ProvenanceData;

/// `rendered` (the JSON object of `run`) with `"provenance"` as its last field, when the run
/// recorded one.
pub(crate) fn with_provenance(rendered: Bytes, run: &Run) -> Result<Bytes, serde_json::Error> {
    let Some((execution, provenance)) = &run.provenance else {
        return Ok(rendered);
    };
    let field = serde_json::to_vec(&ProvenanceData::from(*execution, provenance))?;
    // A `RunItem` is an object with fields, so its rendering ends with `}` after at least one.
    let Some(body) = rendered.strip_suffix(b"}") else {
        return Ok(rendered);
    };
    let mut out = Vec::with_capacity(rendered.len() + field.len() + 16);
    out.extend_from_slice(body);
    out.extend_from_slice(b",\"provenance\":");
    out.extend_from_slice(&field);
    out.push(b'}');
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::{
        EnvironmentDefinition, ExecutionProvenance, ProvenanceLimits, RepositoryCommit,
    };

    #[test]
    fn the_field_is_added_last_as_serde_would_write_it() {
        let mut run = runledger_domain::sample_run(3);
        let rendered = Bytes::from_static(br#"{"run_id":"x","state":"SUCCEEDED"}"#);
        assert_eq!(
            with_provenance(rendered.clone(), &run).expect("json"),
            rendered
        );
        let provenance = ExecutionProvenance {
            repositories: vec![RepositoryCommit {
                url: "u".into(),
                path: ".".into(),
                reference: None,
                commit: "c".repeat(40),
            }],
            environment: EnvironmentDefinition {
                id: "e".into(),
                sha256: "d".repeat(64),
                definition: r#"{"id":"e"}"#.into(),
            },
            harness: "command".into(),
            agent_cli: None,
            runledger_version: "0.1.0".into(),
            sandbox: "none".into(),
            network: true,
            limits: ProvenanceLimits::default(),
            model_id: None,
        };
        run.provenance = Some((4, provenance.clone()));
        let out = with_provenance(rendered, &run).expect("json");
        let value: serde_json::Value = serde_json::from_slice(&out).expect("valid JSON");
        assert_eq!(value["state"], "SUCCEEDED");
        assert_eq!(
            value["provenance"],
            serde_json::to_value(ProvenanceData::from(4, &provenance)).expect("json")
        );
    }
}
