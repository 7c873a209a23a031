//! When a schedule is due: its cron expression read in its time zone. The calendar work is
//! croner's (5-field expressions, the `@daily`-style macros, Vixie cron's DST rules) over
//! chrono-tz's IANA database; this module owns what runledger accepts and how it says no.
//!
//! A schedule's time zone is an IANA name, `UTC` unless the expression starts with
//! `CRON_TZ=<zone> ` (or `TZ=<zone> `, the spelling of cronie and Kubernetes), or the request
//! names one in `time_zone`. The prefix is what lets a client that knows only `cron_schedule`
//! (the official ones) choose a zone.
//!
//! DST, as croner implements Vixie cron: a fixed-time expression (`30 2 * * *`) whose time a
//! spring-forward skips fires once, at the first instant after the gap; one whose time a
//! fall-back repeats fires once, at the first of the two. Interval expressions (`*/15 * * * *`,
//! `0 * * * *`) fire at every real instant that matches, so an hourly schedule fires twice in
//! the repeated hour and not at all in the skipped one.

use chrono::TimeZone;
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds};

use runledger_domain::Timestamp;

/// The longest cron expression accepted (with its zone prefix).
pub const MAX_EXPRESSION_BYTES: usize = 256;

/// The macros accepted, with the expression each stands for.
pub const MACROS: [(&str, &str); 7] = [
    ("@yearly", "0 0 1 1 *"),
    ("@annually", "0 0 1 1 *"),
    ("@monthly", "0 0 1 * *"),
    ("@weekly", "0 0 * * 0"),
    ("@daily", "0 0 * * *"),
    ("@midnight", "0 0 * * *"),
    ("@hourly", "0 * * * *"),
];

/// A checked schedule time: the expression and the zone it is read in.
///
/// Only the pattern is kept, and croner parses it again each time a due time is computed
/// (once per firing or change of the schedule, about 20 µs): croner's parsed form holds a
/// bitfield per possible year (5,001 bytes whatever the expression), so keeping it for every
/// schedule made each one cost about 8 KB of resident memory, 78 MB for 10,000, against the
/// server's 150 MB target (docs/performance.md, "Schedules").
#[derive(Debug, Clone)]
pub struct When {
    /// A 5- or 6-field pattern (a macro already expanded) that croner accepted.
    pattern: Box<str>,
    seconds: bool,
    zone: Tz,
}

/// The zone a `CRON_TZ=` / `TZ=` prefix names, and the expression after it.
pub fn split_zone(expression: &str) -> (Option<&str>, &str) {
    let trimmed = expression.trim();
    for prefix in ["CRON_TZ=", "TZ="] {
        if let Some(rest) = trimmed.strip_prefix(prefix) {
            let (zone, cron) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
            return (Some(zone), cron.trim());
        }
    }
    (None, trimmed)
}

/// An IANA time zone name, or why it is not one.
pub fn zone(name: &str) -> Result<Tz, String> {
    name.parse::<Tz>().map_err(|_| {
        let shown: String = name.chars().take(64).collect();
        format!("{shown:?} is not an IANA time zone name (such as UTC or Europe/Berlin)")
    })
}

impl When {
    /// Reads `expression` (5 fields or a macro; 6 fields, seconds first, when `seconds` is
    /// allowed — the test mode) in `zone_name`. The message of an error names the problem.
    pub fn parse(expression: &str, zone_name: &str, seconds: bool) -> Result<When, String> {
        if expression.len() > MAX_EXPRESSION_BYTES {
            return Err(format!("is longer than {MAX_EXPRESSION_BYTES} bytes"));
        }
        let zone = zone(zone_name)?;
        let expression = expression.trim();
        let pattern = if expression.starts_with('@') {
            MACROS
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(expression))
                .map(|(_, pattern)| *pattern)
                .ok_or_else(|| {
                    let names: Vec<&str> = MACROS.iter().map(|(n, _)| *n).collect();
                    format!("unknown macro; use one of {}", names.join(", "))
                })?
        } else {
            let fields = expression.split_whitespace().count();
            let allowed = if seconds { 5..=6 } else { 5..=5 };
            if !allowed.contains(&fields) {
                return Err(format!(
                    "must have 5 fields (minute hour day-of-month month day-of-week) or be a \
                     macro such as @daily; found {fields}"
                ));
            }
            expression
        };
        let cron = parser(seconds)
            .parse(pattern)
            .map_err(|e| format!("is not a valid cron expression: {e}"))?;
        let when = When {
            pattern: pattern.into(),
            seconds,
            zone,
        };
        // With the expression just parsed: a parse costs about 20 µs (croner sets the 5,000
        // year bits one by one), the largest part of a start with 10,000 schedules.
        if when
            .next_with(&cron, runledger_base::clock::now())
            .is_none()
        {
            return Err("never fires (no date matches it)".into());
        }
        Ok(when)
    }

    /// The first due time strictly after `t`, if the expression ever matches again.
    pub fn next_after(&self, t: Timestamp) -> Option<Timestamp> {
        self.next_with(&self.cron()?, t)
    }

    fn next_with(&self, cron: &croner::Cron, t: Timestamp) -> Option<Timestamp> {
        let at = self.at(t)?;
        let next = cron.find_next_occurrence(&at, false).ok()?;
        Some(Timestamp(u64::try_from(next.timestamp_millis()).ok()?))
    }

    /// The latest due time at or before `t`, if the expression ever matched.
    pub fn latest_at_or_before(&self, t: Timestamp) -> Option<Timestamp> {
        let at = self.at(t)?;
        let previous = self.cron()?.find_previous_occurrence(&at, true).ok()?;
        Some(Timestamp(u64::try_from(previous.timestamp_millis()).ok()?))
    }

    /// The pattern parsed; it parsed when the `When` was made, and parses the same again.
    fn cron(&self) -> Option<croner::Cron> {
        parser(self.seconds).parse(&self.pattern).ok()
    }

    fn at(&self, t: Timestamp) -> Option<chrono::DateTime<Tz>> {
        let millis = i64::try_from(t.0).ok()?;
        self.zone.timestamp_millis_opt(millis).single()
    }
}

/// croner's parser for 5-field expressions, or 5 or 6 (seconds first) in the test mode.
fn parser(seconds: bool) -> CronParser {
    CronParser::builder()
        .seconds(if seconds {
            Seconds::Optional
        } else {
            Seconds::Disallowed
        })
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Milliseconds of a UTC date and time.
    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> Timestamp {
        let t = chrono::Utc
            .with_ymd_and_hms(y, mo, d, h, mi, 0)
            .single()
            .expect("a date");
        Timestamp(t.timestamp_millis() as u64)
    }

    fn when(expression: &str, zone: &str) -> When {
        When::parse(expression, zone, false).expect("parses")
    }

    #[test]
    fn five_fields_and_macros_are_read_in_their_zone() {
        let daily = when("0 9 * * *", "UTC");
        assert_eq!(
            daily.next_after(utc(2026, 3, 1, 8, 59)),
            Some(utc(2026, 3, 1, 9, 0))
        );
        assert_eq!(
            daily.next_after(utc(2026, 3, 1, 9, 0)),
            Some(utc(2026, 3, 2, 9, 0)),
            "strictly after"
        );
        assert_eq!(
            daily.latest_at_or_before(utc(2026, 3, 1, 9, 0)),
            Some(utc(2026, 3, 1, 9, 0))
        );
        // 09:00 in Berlin is 08:00 UTC in winter, 07:00 in summer.
        let berlin = when("0 9 * * *", "Europe/Berlin");
        assert_eq!(
            berlin.next_after(utc(2026, 1, 10, 0, 0)),
            Some(utc(2026, 1, 10, 8, 0))
        );
        assert_eq!(
            berlin.next_after(utc(2026, 7, 10, 0, 0)),
            Some(utc(2026, 7, 10, 7, 0))
        );
        assert_eq!(
            when("@daily", "UTC").next_after(utc(2026, 3, 1, 9, 0)),
            Some(utc(2026, 3, 2, 0, 0))
        );
        assert_eq!(
            when("@HOURLY", "UTC").next_after(utc(2026, 3, 1, 9, 0)),
            Some(utc(2026, 3, 1, 10, 0))
        );
        assert_eq!(
            when("0 10 * * MON", "UTC").next_after(utc(2026, 11, 25, 0, 0)),
            Some(utc(2026, 11, 30, 10, 0))
        );
    }

    #[test]
    fn a_time_the_spring_forward_skips_fires_once_right_after_the_gap() {
        // Berlin, 2026-03-29: 02:00 local jumps to 03:00 (01:00 UTC).
        let at_0230 = when("30 2 * * *", "Europe/Berlin");
        assert_eq!(
            at_0230.next_after(utc(2026, 3, 28, 12, 0)),
            Some(utc(2026, 3, 29, 1, 0)),
            "the first instant after the gap (03:00 CEST)"
        );
        assert_eq!(
            at_0230.next_after(utc(2026, 3, 29, 1, 0)),
            Some(utc(2026, 3, 30, 0, 30)),
            "then 02:30 CEST the next day"
        );
        // An hourly expression has no 02:00 that day.
        let hourly = when("0 * * * *", "Europe/Berlin");
        assert_eq!(
            hourly.next_after(utc(2026, 3, 29, 0, 0)),
            Some(utc(2026, 3, 29, 1, 0))
        );
    }

    #[test]
    fn a_time_the_fall_back_repeats_fires_once_and_an_interval_in_both() {
        // Berlin, 2026-10-25: 03:00 CEST (01:00 UTC) goes back to 02:00 CET.
        let at_0230 = when("30 2 * * *", "Europe/Berlin");
        let first = at_0230.next_after(utc(2026, 10, 24, 12, 0));
        assert_eq!(first, Some(utc(2026, 10, 25, 0, 30)), "02:30 CEST");
        assert_eq!(
            at_0230.next_after(utc(2026, 10, 25, 0, 30)),
            Some(utc(2026, 10, 26, 1, 30)),
            "not again at 02:30 CET"
        );
        let hourly = when("0 * * * *", "Europe/Berlin");
        let mut t = utc(2026, 10, 24, 23, 30);
        let mut fired = Vec::new();
        for _ in 0..4 {
            t = hourly.next_after(t).expect("next");
            fired.push(t);
        }
        assert_eq!(
            fired,
            [
                utc(2026, 10, 25, 0, 0),
                utc(2026, 10, 25, 1, 0),
                utc(2026, 10, 25, 2, 0),
                utc(2026, 10, 25, 3, 0)
            ],
            "every real hour, the repeated one included"
        );
    }

    #[test]
    fn bad_expressions_and_zones_are_named() {
        for (expression, wanted) in [
            ("* * * *", "must have 5 fields"),
            ("0 0 9 * * *", "found 6"),
            ("61 * * * *", "not a valid cron expression"),
            ("@reboot", "unknown macro"),
            ("0 0 30 2 *", "never fires"),
            ("", "found 0"),
        ] {
            let error = When::parse(expression, "UTC", false).expect_err(expression);
            assert!(error.contains(wanted), "{expression:?}: {error}");
        }
        let error = When::parse("0 9 * * *", "Mars/Olympus", false).expect_err("zone");
        assert!(error.contains("IANA"), "{error}");
        assert!(When::parse(&"1,".repeat(200), "UTC", false)
            .expect_err("long")
            .contains("longer than"));
        // The test mode reads a leading seconds field.
        let every_2s = When::parse("*/2 * * * * *", "UTC", true).expect("seconds");
        assert_eq!(
            every_2s.next_after(Timestamp(1_000)),
            Some(Timestamp(2_000))
        );
    }

    #[test]
    fn a_zone_prefix_is_split_off() {
        assert_eq!(
            split_zone("CRON_TZ=Europe/Berlin 0 9 * * *"),
            (Some("Europe/Berlin"), "0 9 * * *")
        );
        assert_eq!(split_zone(" TZ=UTC @daily"), (Some("UTC"), "@daily"));
        assert_eq!(split_zone("0 9 * * *"), (None, "0 9 * * *"));
    }
}
