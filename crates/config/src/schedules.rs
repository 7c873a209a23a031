//! `[schedules]`: the test mode of cron expressions with a seconds field and the most schedules
//! one team may have. Firing schedules is `runs::schedules`'s.

use crate::error::Error;
use crate::file::SchedulesFile;
use crate::range::Range;

/// The most schedules a team may have unless `schedules.max_per_team` says otherwise.
pub const DEFAULT_MAX_SCHEDULES_PER_TEAM: usize = 10_000;

/// `schedules.max_per_team`, default `DEFAULT_MAX_SCHEDULES_PER_TEAM`.
pub(crate) fn max_per_team(file: &SchedulesFile) -> Result<usize, Error> {
    Range::between(1, 1_000_000, "a number", "").or_default(
        "schedules.max_per_team",
        file.max_per_team,
        DEFAULT_MAX_SCHEDULES_PER_TEAM,
    )
}
