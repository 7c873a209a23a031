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
