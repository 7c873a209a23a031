//! TEMPORARY until the run side of schedules is merged: stands in for `domain::RunSchedule`,
//! `Runs::create_scheduled` and `Runs::run_exists`.

use crate::actor::{Error, Outcome, Runs};
use crate::domain::{RunAdmitted, RunId, ScheduleId, Timestamp};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunSchedule {
    pub schedule_id: ScheduleId,
    pub schedule_name: String,
    pub cron_schedule: String,
    pub due: Timestamp,
}

pub trait RunsExt {
    async fn create_scheduled(
        &self,
        id: RunId,
        admitted: RunAdmitted,
        schedule: RunSchedule,
    ) -> Result<Outcome, Error>;
    fn run_exists(&self, id: RunId) -> Result<bool, Error>;
}

impl RunsExt for Runs {
    async fn create_scheduled(
        &self,
        id: RunId,
        admitted: RunAdmitted,
        _schedule: RunSchedule,
    ) -> Result<Outcome, Error> {
        self.create_with_id(id, admitted, Vec::new()).await
    }

    fn run_exists(&self, id: RunId) -> Result<bool, Error> {
        Ok(self.get(id)?.is_some())
    }
}
