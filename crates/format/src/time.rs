//! Times, durations, run ids and hex as the API writes them: RFC 3339 UTC with milliseconds,
//! ISO 8601 durations, and the stack-built `Inline` text that list answers render into without
//! a heap string per field. `parse_exact_time` is the exact inverse of `format_time`, for
//! backups.

use serde::Serialize;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

use runledger_domain::{RunId, Timestamp};

/// A short ASCII string built on the stack and serialised as a JSON string. A list renders
/// the id, times and session id of twenty runs; a heap string for each was a visible share of
/// its CPU.
#[derive(Clone, Copy)]
pub struct Inline<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Default for Inline<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Inline<N> {
    pub fn new() -> Self {
        Inline {
            buf: [0; N],
            len: 0,
        }
    }

    /// Appends an ASCII byte. Callers size `N` for their longest output; a byte past it would
    /// be dropped, never written out of bounds.
    pub fn push(&mut self, byte: u8) {
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
pub const TIME_TEXT: usize = 1 + 20 + 20;

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

pub const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(HEX_DIGITS[usize::from(b >> 4)]));
        out.push(char::from(HEX_DIGITS[usize::from(b & 15)]));
    }
    out
}

/// The 32 bytes whose hex (64 digits) is `s`; `None` for anything else.
pub fn unhex32(s: &str) -> Option<[u8; 32]> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
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
