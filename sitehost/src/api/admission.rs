//! Admission: what an authenticated request passes before its operation runs (and before a
//! body other than a form's is read): its nonce is recorded, then its key's budgets are
//! drawn ([`crate::api::budgets`]).
//!
//! The order keeps a replay or a flood cheap: a budget this process already saw spent
//! refuses at once, recording nothing; the nonce is recorded next, so a replay is a 401
//! that spends no budget; the budget is drawn last. Every operation, a read too, runs only
//! after all three (a list may read thousands of items). This costs one more store round
//! trip than drawing the budget alongside the nonce, where the budget is drawn from the
//! store at all (the embedded store counts in memory; DynamoDB instances draw large
//! budgets in chunks).

use crate::api::budgets::Budgets;
use crate::api::Operation;
use crate::auth::{self, Authenticated};
use crate::config::RequestBudgets;
use crate::error::Result;
use crate::store::Store;

/// What an [`crate::api::App`] keeps between requests to admit them: the budgets this
/// process saw spent.
#[derive(Default)]
pub struct Admission {
    budgets: Budgets,
}

impl Admission {
    /// Admits an authenticated request of `operation` under `settings`, or answers why not
    /// (401 for a replayed nonce, 429 over a budget).
    pub async fn admit(
        &self,
        store: &dyn Store,
        settings: RequestBudgets,
        auth: &Authenticated,
        operation: Operation,
        now: i64,
    ) -> Result<()> {
        self.budgets
            .refuse_if_spent(settings, &auth.key, operation, now)?;
        auth::record_nonce(store, auth, now).await?;
        self.budgets
            .draw(store, settings, auth, operation, now)
            .await
    }
}
