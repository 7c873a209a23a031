//! How executions report to runs: `exec`'s `Report` interface, carried out by the `Runs`
//! handle. Living here, beside `Runs`, it keeps `exec` from importing the actors: `exec` knows
//! only the interface, and the actors import `exec`.

use super::{Error, Runs};
use crate::domain::{Command, ExecutionUsage, RunId, StatusMessage};
use crate::exec::{Report, Started};
use crate::store;

impl Report for Runs {
    fn accepts_new_work(&self) -> bool {
        self.accepts_writes()
    }

    async fn start(&self, id: RunId) -> Started {
        match self.execute(id, Command::Start).await {
            Ok(_) => Started::Yes,
            Err(Error::Store(store::Error::Refused(_))) => Started::Deferred,
            Err(_) => Started::Refused,
        }
    }

    async fn finish(&self, id: RunId, execution: u32, outcome: Result<(), StatusMessage>) {
        let finish = Command::Finish { execution, outcome };
        if let Err(e) = self.execute(id, finish).await {
            tracing::debug!(run_id = %id, error = %e, "finish not recorded");
        }
    }

    async fn delivered(&self, id: RunId, execution: u32, count: u32) {
        let delivered = Command::Delivered { execution, count };
        if let Err(e) = self.execute(id, delivered).await {
            tracing::debug!(run_id = %id, error = %e, "delivery not recorded");
        }
    }

    async fn record_usage(&self, id: RunId, execution: u32, usage: ExecutionUsage) {
        let record = Command::RecordUsage { execution, usage };
        if let Err(e) = self.execute(id, record).await {
            tracing::debug!(run_id = %id, error = %e, "usage not recorded");
        }
    }
}
