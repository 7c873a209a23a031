//! `runledger verify` (a stopped store's chains and seals, an export's with `--export`, or one
//! run's proof offline with `--proof` and `--pubkey`) and `runledger audit pubkey`. It prints
//! what was checked, names the first run and event that does not verify and fails then; the
//! checking itself is `runledger_store::seals`'.

use std::path::Path;
use std::time::Instant;

use anyhow::{anyhow, bail, Context as _};

use runledger_store::seals::{parse_public_key, Proof, PUBLIC_KEY_FILE};
use runledger_store::Store;

use crate::commands::Cli;
use crate::open::{held, open, require_store};

pub fn verify(
    cli: &Cli,
    export: Option<&Path>,
    proof: Option<&Path>,
    pubkey: Option<&str>,
) -> anyhow::Result<()> {
    if let (Some(proof), Some(pubkey)) = (proof, pubkey) {
        return verify_proof(proof, pubkey);
    }
    if let Some(export) = export {
        return crate::backup::verify_export(export);
    }
    let config = cli.load_config(None)?;
    require_store(&config)?;
    let store = match open(&config, false) {
        Ok(store) => store,
        Err(runledger_store::Error::Locked(dir)) => return Err(held(&dir)),
        Err(e) => return Err(e.into()),
    };
    let started = Instant::now();
    let result = store.verify()?;
    let unverified = store.imported_unverified()?;
    if let Some(note) = &unverified {
        eprintln!("runledger verify: WARNING: this store was imported from an export that did not verify ({note})");
    }
    match result {
        Ok(report) => {
            crate::backup::print_report(&report, started);
            Ok(())
        }
        Err(failure) => bail!("does not verify: {failure}"),
    }
}

fn verify_proof(path: &Path, pubkey: &str) -> anyhow::Result<()> {
    let key = parse_public_key(pubkey)
        .ok_or_else(|| anyhow!("--pubkey: not 64 hex digits or the base64 of 32 bytes"))?;
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let proof: Proof = serde_json::from_str(&text)
        .with_context(|| format!("{} is not a runledger proof", path.display()))?;
    let seal = proof
        .check(&key)
        .map_err(|e| anyhow!("the proof of run {} does not verify: {e}", proof.run_id))?;
    println!(
        "run {}: events 0 to {} are sealed by seal {} (signed by the given key)",
        proof.run_id,
        proof.leaf_seq.unwrap_or_default(),
        seal.number
    );
    if proof.unsealed_events > 0 {
        println!(
            "{} later events were not sealed when the proof was made",
            proof.unsealed_events
        );
    }
    Ok(())
}

/// `runledger audit pubkey`: the public half of the instance's seal key, in hex or base64.
pub fn audit_pubkey(cli: &Cli, base64: bool) -> anyhow::Result<()> {
    let config = cli.load_config(None)?;
    let key = public_key(&config.data_dir)?;
    if base64 {
        use base64::Engine;
        println!("{}", base64::engine::general_purpose::STANDARD.encode(key));
    } else {
        println!("{}", runledger_format::time::hex(&key));
    }
    Ok(())
}

/// The seal public key: from the store when no server holds it (made there on first use),
/// else from the file the server wrote at start.
fn public_key(data_dir: &Path) -> anyhow::Result<[u8; 32]> {
    if Store::present_in(data_dir) {
        match Store::open(data_dir, &runledger_store::Options::default()) {
            Ok(store) => {
                let key = store.seal_key()?.verifying_key().to_bytes();
                store.sync_blocking()?;
                return Ok(key);
            }
            Err(runledger_store::Error::Locked(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let file = data_dir.join(PUBLIC_KEY_FILE);
    let text = std::fs::read_to_string(&file).map_err(|_| {
        anyhow!(
            "{} holds no store and no {PUBLIC_KEY_FILE}; start the server once",
            data_dir.display()
        )
    })?;
    parse_public_key(&text).ok_or_else(|| anyhow!("{} is not a public key", file.display()))
}
