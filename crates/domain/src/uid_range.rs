//! The range of uids a root server gives its runs' agents (`server.agent_uids = "START-END"`):
//! how it is written, and the checks a range must pass before any uid of it is handed out.
//!
//! Pure: it never looks at the host's users, and it does not know which uids of the range are
//! taken (the store records that, `store/agent_uids.rs`) or how an agent is dropped to one
//! (`exec/sandbox/`).

use std::ops::RangeInclusive;

/// `server.agent_uids` unless the file says otherwise: far above the uids of system and ordinary
/// users (and of `/etc/subuid` ranges as `useradd` allots them), clear of systemd's dynamic users
/// (61184–65519), of its container ranges (524288–1879048191) and of its foreign range
/// (2147352576–2147418111), and below 2^31, which some programs read as negative. A hundred
/// million uids: a run keeps its uid for its whole life, so none is ever used twice.
pub const DEFAULT: &str = "2000000000-2099999999";

/// The fewest uids a configured range may hold: a uid is never used twice, so a tiny range would
/// soon refuse every new run.
pub const MIN_SIZE: u64 = 1024;

/// The lowest uid a range may start at: below it live root, the system users, ordinary users and
/// `nobody` (65534); 65535 is `(uid16_t) -1`.
const LOWEST: u32 = 65_536;

/// The highest uid a range may end at: above it, some programs read a uid as a negative number
/// (and 4294967295 is `(uid_t) -1`, which means "no change" to `chown` and `setresuid`).
const HIGHEST: u32 = i32::MAX as u32;

/// A checked range of uids, both ends included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UidRange {
    start: u32,
    end: u32,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("server.agent_uids: {0:?} is not of the form \"START-END\" (two decimal uids)")]
    Form(String),
    #[error("server.agent_uids: {start}-{end} starts after it ends")]
    Reversed { start: u32, end: u32 },
    #[error(
        "server.agent_uids: {start}-{end} reaches below {LOWEST}, where root (0), the system and \
         ordinary users and nobody live; choose a range such as {DEFAULT}"
    )]
    TooLow { start: u32, end: u32 },
    #[error(
        "server.agent_uids: {start}-{end} reaches above {HIGHEST}, which some programs read as a \
         negative uid"
    )]
    TooHigh { start: u32, end: u32 },
    #[error(
        "server.agent_uids: {start}-{end} holds {size} uids, fewer than {MIN_SIZE}: each run keeps \
         its uid for good, so a small range soon refuses every new run"
    )]
    TooSmall { start: u32, end: u32, size: u64 },
}

impl UidRange {
    /// The uids, both ends included.
    pub fn uids(&self) -> RangeInclusive<u32> {
        self.start..=self.end
    }

    /// A range without the checks on its ends and size: for tests of what uses it (running out
    /// of uids takes a range of a few).
    #[cfg(any(test, feature = "testing"))]
    pub fn unchecked(start: u32, end: u32) -> UidRange {
        UidRange { start, end }
    }
}

impl Default for UidRange {
    fn default() -> UidRange {
        UidRange {
            start: 2_000_000_000,
            end: 2_099_999_999,
        }
    }
}

impl std::fmt::Display for UidRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.start, self.end)
    }
}

impl std::str::FromStr for UidRange {
    type Err = Error;

    fn from_str(text: &str) -> Result<UidRange, Error> {
        let form = || Error::Form(text.to_string());
        let (start, end) = text.split_once('-').ok_or_else(form)?;
        let number = |s: &str| {
            let s = s.trim();
            // `u32::from_str` takes a leading '+'; a uid is digits only.
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(form());
            }
            s.parse::<u32>().map_err(|_| form())
        };
        let (start, end) = (number(start)?, number(end)?);
        if start > end {
            return Err(Error::Reversed { start, end });
        }
        if start < LOWEST {
            return Err(Error::TooLow { start, end });
        }
        if end > HIGHEST {
            return Err(Error::TooHigh { start, end });
        }
        let size = u64::from(end - start) + 1;
        if size < MIN_SIZE {
            return Err(Error::TooSmall { start, end, size });
        }
        Ok(UidRange { start, end })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<UidRange, Error> {
        text.parse()
    }

    #[test]
    fn the_default_is_a_valid_range() {
        assert_eq!(parse(DEFAULT), Ok(UidRange::default()));
        assert_eq!(UidRange::default().to_string(), DEFAULT);
    }

    #[test]
    fn a_range_is_two_decimal_uids() {
        assert_eq!(
            parse(" 100000 - 101023 ").map(|r| r.uids()),
            Ok(100_000..=101_023)
        );
        for bad in [
            "",
            "100000",
            "100000-",
            "-101023",
            "a-b",
            "+100000-101023",
            "100000-101023-2",
            "0x186a0-101023",
            "100000-99999999999",
        ] {
            assert_eq!(parse(bad), Err(Error::Form(bad.into())), "{bad:?}");
        }
    }

    #[test]
    fn a_reversed_low_high_or_small_range_is_refused_naming_the_field() {
        for (text, error) in [
            (
                "200000-100000",
                Error::Reversed {
                    start: 200_000,
                    end: 100_000,
                },
            ),
            (
                "0-100000",
                Error::TooLow {
                    start: 0,
                    end: 100_000,
                },
            ),
            (
                "60000-70000",
                Error::TooLow {
                    start: 60_000,
                    end: 70_000,
                },
            ),
            (
                "2147483000-4294967295",
                Error::TooHigh {
                    start: 2_147_483_000,
                    end: u32::MAX,
                },
            ),
            (
                "100000-100099",
                Error::TooSmall {
                    start: 100_000,
                    end: 100_099,
                    size: 100,
                },
            ),
        ] {
            let refused = parse(text).expect_err(text);
            assert_eq!(refused, error);
            assert!(
                refused.to_string().starts_with("server.agent_uids: "),
                "{refused}"
            );
        }
    }
}
