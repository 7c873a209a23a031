//! `Deliveries`: the records of a run's webhook deliveries, as the HTTP edge reads them. It
//! neither writes nor sends deliveries (that is `crate::webhooks`' dispatcher).

use crate::webhooks::{self, Delivery, Webhooks};
use runledger_domain::RunId;

/// A cheap-to-clone handle for `GET /api/v1/agent/runs/{id}/deliveries` (`of_run`).
#[derive(Clone)]
pub struct Deliveries {
    webhooks: Webhooks,
}

impl Deliveries {
    pub(super) fn new(webhooks: &Webhooks) -> Deliveries {
        Deliveries {
            webhooks: webhooks.clone(),
        }
    }

    /// Run `id`'s deliveries with their recorded attempts, in the order of the run's events;
    /// none without configured webhooks.
    pub fn of_run(&self, id: RunId) -> Result<Vec<Delivery>, webhooks::Error> {
        self.webhooks.deliveries(id)
    }
}
