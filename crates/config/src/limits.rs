//! `[limits]`: the request rate every API key gets, how many runs may wait in the queues, and
//! the sizes of what an agent may report as artifacts. Checks the table's values and applies
//! the defaults; the HTTP layer, the queues and `exec::report` enforce them.

use crate::error::Error;
use crate::file::LimitsFile;
use crate::range::Range;

/// Per-key rate limit when the file sets none: far above what a person or a well-behaved
/// script sends, low enough that one runaway client loop cannot take the whole server.
pub const DEFAULT_RATE_PER_SEC: f64 = 100.0;

/// Requests a key may send at once when the file sets no `limits.burst`.
pub const DEFAULT_BURST: u32 = 1000;

/// Most runs waiting in one environment's queue, and in one team's queues together, unless
/// configured: far beyond what a single host works through in a day, there to stop one key
/// from filling the store with work that will never start.
pub const DEFAULT_MAX_QUEUED: usize = 10_000;

/// The token bucket every API key gets: `burst` requests at once, refilled at `per_sec`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Positive and finite.
    pub per_sec: f64,
    /// At least 1.
    pub burst: u32,
}

/// The sizes of what an agent may report through `RUNLEDGER_REPORT` (`exec::report`), and how
/// long an artifact's download link is valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArtifactLimits {
    /// Most bytes of one reported file (`limits.artifact_file_mb`, default 100 MiB).
    pub file_bytes: u64,
    /// Most bytes of one screenshot (`limits.artifact_screenshot_mb`, default 20 MiB).
    pub screenshot_bytes: u64,
    /// Most bytes of one plan's Markdown (`limits.artifact_plan_kb`, default 1 MiB).
    pub plan_bytes: u64,
    /// Most bytes of one line of the report file (`limits.artifact_report_line_kb`, default
    /// 2 MiB); a longer line is skipped unread.
    pub line_bytes: u64,
    /// Most bytes of all the artifacts of one run together (`limits.artifact_run_total_mb`,
    /// default 1 GiB).
    pub run_total_bytes: u64,
    /// How long a `download_url` is valid (`limits.artifact_link_secs`, default 900 s).
    pub link_secs: u64,
}

impl Default for ArtifactLimits {
    fn default() -> Self {
        ArtifactLimits {
            file_bytes: 100 << 20,
            screenshot_bytes: 20 << 20,
            plan_bytes: 1 << 20,
            line_bytes: 2 << 20,
            run_total_bytes: 1 << 30,
            link_secs: 900,
        }
    }
}

/// `limits.rate_per_sec`, `limits.burst` and `limits.rate_limit`: `None` when it is off.
pub(crate) fn rate_limit(limits: &LimitsFile) -> Result<Option<RateLimit>, Error> {
    let per_sec = limits.rate_per_sec.unwrap_or(DEFAULT_RATE_PER_SEC);
    // Checked even when the limit is off, so turning it back on cannot reveal an old typo.
    if !per_sec.is_finite() || per_sec <= 0.0 {
        return Err(Error::Invalid(format!(
            "limits.rate_per_sec: {per_sec} must be a positive number of requests per second \
             (to turn rate limiting off, set limits.rate_limit = false)"
        )));
    }
    let burst = Range::at_least(1)
        .because("a key with no burst could never send a request")
        .or_default("limits.burst", limits.burst, DEFAULT_BURST)?;
    Ok(limits
        .rate_limit
        .unwrap_or(true)
        .then_some(RateLimit { per_sec, burst }))
}

/// `limits.max_queued_per_team`, default `DEFAULT_MAX_QUEUED`.
pub(crate) fn max_queued_per_team(limits: &LimitsFile) -> Result<usize, Error> {
    Range::at_least(1).or_default(
        "limits.max_queued_per_team",
        limits.max_queued_per_team,
        DEFAULT_MAX_QUEUED,
    )
}

/// `[limits]`' artifact sizes; each must be at least 1 (0 would refuse every report).
pub(crate) fn artifact_limits(limits: &LimitsFile) -> Result<ArtifactLimits, Error> {
    let d = ArtifactLimits::default();
    let size = |name: &str, given: Option<u64>, unit: u32, default: u64| match given {
        None => Ok(default),
        Some(n) => Range::at_least(1)
            .check(&format!("limits.{name}"), n)?
            .checked_shl(unit)
            .filter(|b| b >> unit == n)
            .ok_or_else(|| Error::Invalid(format!("limits.{name}: {n} is too large"))),
    };
    Ok(ArtifactLimits {
        file_bytes: size(
            "artifact_file_mb",
            limits.artifact_file_mb,
            20,
            d.file_bytes,
        )?,
        screenshot_bytes: size(
            "artifact_screenshot_mb",
            limits.artifact_screenshot_mb,
            20,
            d.screenshot_bytes,
        )?,
        plan_bytes: size(
            "artifact_plan_kb",
            limits.artifact_plan_kb,
            10,
            d.plan_bytes,
        )?,
        line_bytes: size(
            "artifact_report_line_kb",
            limits.artifact_report_line_kb,
            10,
            d.line_bytes,
        )?,
        run_total_bytes: size(
            "artifact_run_total_mb",
            limits.artifact_run_total_mb,
            20,
            d.run_total_bytes,
        )?,
        link_secs: size(
            "artifact_link_secs",
            limits.artifact_link_secs,
            0,
            d.link_secs,
        )?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{load_text, Config, Overrides};

    #[test]
    fn bad_rate_limits_name_the_line_and_field() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("limits.toml");
        for (text, want) in [
            (
                "[server]\nbind = \"127.0.0.1:0\"\n\n[limits]\nburst = 5\nrate_per_sec = 0\n",
                "line 6: limits.rate_per_sec",
            ),
            (
                "[limits]\nrate_per_sec = -1.5\n",
                "line 2: limits.rate_per_sec",
            ),
            (
                "[limits]\nrate_per_sec = nan\n",
                "line 2: limits.rate_per_sec",
            ),
            (
                "[limits]\nrate_per_sec = inf\n",
                "line 2: limits.rate_per_sec",
            ),
            (
                "[limits]\nrate_limit = false\nrate_per_sec = 0\n",
                "line 3: limits.rate_per_sec",
            ),
            ("[limits]\n\nburst = 0\n", "line 3: limits.burst"),
            ("[limits]\nburst = -1\n", "line 2"),
            ("[limits]\nburst = 1.5\n", "line 2"),
            ("[limits]\nrate_per_sec = \"fast\"\n", "line 2"),
            ("[limits]\nrate = 5\n", "line 2"),
        ] {
            std::fs::write(&path, text).expect("write");
            let err = Config::load(Some(&path), &Overrides::default())
                .expect_err(text)
                .to_string();
            assert!(
                err.contains("limits.toml") && err.contains(want),
                "{text:?}: {err}"
            );
        }
    }

    #[test]
    fn rate_limit_defaults_values_and_switch() {
        let default = load_text("").expect("valid").rate_limit;
        assert_eq!(
            default,
            Some(RateLimit {
                per_sec: DEFAULT_RATE_PER_SEC,
                burst: DEFAULT_BURST
            })
        );
        let set = load_text("[limits]\nrate_per_sec = 0.5\nburst = 2\n").expect("valid");
        assert_eq!(
            set.rate_limit,
            Some(RateLimit {
                per_sec: 0.5,
                burst: 2
            })
        );
        // A whole number is accepted for the rate.
        let whole = load_text("[limits]\nrate_per_sec = 3\n").expect("valid");
        assert_eq!(whole.rate_limit.map(|r| r.per_sec), Some(3.0));
        let off = load_text("[limits]\nrate_limit = false\n").expect("valid");
        assert_eq!(off.rate_limit, None);
    }
}
