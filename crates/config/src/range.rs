//! The one check of a number a setting holds: that it lies in the range the setting accepts,
//! and, when it does not, the error naming the setting's field (`Config::load` adds the file and
//! the line). It knows no setting: each section states its own range beside its field.

use std::fmt::Display;

use crate::error::Error;

/// The numbers a setting accepts, both ends included.
#[derive(Debug, Clone, Copy)]
pub(super) struct Range<T> {
    least: T,
    /// `None`: no end of its own beyond the type's.
    most: Option<T>,
    /// The kind of number, for the error: `a size`, `a time`.
    what: &'static str,
    /// Its unit, for the error: `MiB`, `seconds`; empty for a plain count.
    unit: &'static str,
    /// Why less than `least` cannot work, said with an "at least" error; empty for none.
    why: &'static str,
}

impl<T: PartialOrd + Display + Copy> Range<T> {
    /// From `least` to `most`: `what` the number is (`a size`) and its `unit` (`MiB`, or empty).
    pub(super) fn between(least: T, most: T, what: &'static str, unit: &'static str) -> Self {
        Range {
            least,
            most: Some(most),
            what,
            unit,
            why: "",
        }
    }

    /// `least` or more.
    pub(super) fn at_least(least: T) -> Self {
        Range {
            least,
            most: None,
            what: "",
            unit: "",
            why: "",
        }
    }

    /// The same range, with the reason an error gives for why less than its least cannot work.
    pub(super) fn because(self, why: &'static str) -> Self {
        Range { why, ..self }
    }

    /// `value` if the range holds it, else the error naming `field` (`server.cache_mb`). A value
    /// that is not comparable (a NaN) is outside every range.
    pub(super) fn check(&self, field: &str, value: T) -> Result<T, Error> {
        let above_least = value >= self.least;
        let below_most = self.most.is_none_or(|most| value <= most);
        if above_least && below_most {
            return Ok(value);
        }
        let message = match self.most {
            None => match self.why {
                "" => format!("{field}: must be at least {}", self.least),
                why => format!("{field}: must be at least {} ({why})", self.least),
            },
            Some(most) => {
                let (what, least) = (self.what, self.least);
                match self.unit {
                    "" => format!("{field}: {value} is not {what} from {least} to {most}"),
                    unit => {
                        format!("{field}: {value} is not {what} from {least} to {most} ({unit})")
                    }
                }
            }
        };
        Err(Error::Invalid(message))
    }

    /// The setting's value, `default` when the file leaves it out, checked.
    pub(super) fn or_default(&self, field: &str, given: Option<T>, default: T) -> Result<T, Error> {
        self.check(field, given.unwrap_or(default))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_inside_passes_and_one_outside_names_the_field_and_the_range() {
        let size = Range::between(1u64, 1024, "a size", "MiB");
        assert_eq!(size.check("server.cache_mb", 1).expect("least"), 1);
        assert_eq!(size.check("server.cache_mb", 1024).expect("most"), 1024);
        for bad in [0, 1025] {
            assert_eq!(
                size.check("server.cache_mb", bad)
                    .expect_err("outside")
                    .to_string(),
                format!("invalid configuration: server.cache_mb: {bad} is not a size from 1 to 1024 (MiB)")
            );
        }
        let count = Range::between(1usize, 256, "a number", "");
        assert!(count
            .check("webhooks[0].max_in_flight", 257)
            .expect_err("above")
            .to_string()
            .ends_with("webhooks[0].max_in_flight: 257 is not a number from 1 to 256"));
    }

    #[test]
    fn an_open_range_says_its_least_and_why() {
        let burst = Range::at_least(1u32).because("a key with no burst could never send");
        assert_eq!(
            burst.check("limits.burst", u32::MAX).expect("no top"),
            u32::MAX
        );
        assert!(burst
            .check("limits.burst", 0)
            .expect_err("zero")
            .to_string()
            .ends_with("limits.burst: must be at least 1 (a key with no burst could never send)"));
        assert!(Range::at_least(8u64)
            .check("environments[0].pids_max", 7)
            .expect_err("below")
            .to_string()
            .ends_with("environments[0].pids_max: must be at least 8"));
    }

    #[test]
    fn a_nan_is_outside_every_range() {
        let price = Range::between(0.0, 1e6, "a price", "US dollars");
        assert!(price.check("prices.x", f64::NAN).is_err());
        assert!(price.check("prices.x", f64::INFINITY).is_err());
        assert_eq!(price.check("prices.x", 0.5).expect("inside"), 0.5);
    }
}
