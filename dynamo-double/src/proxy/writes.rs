//! The modelled writes: single-item writes and transactions admitted by the ledger (holds,
//! conflicts, partition throughput), answered no earlier than their modelled durations.

use std::sync::Mutex;
use std::time::Instant;

use bytes::Bytes;
use http::Response;
use serde_json::Value;

use super::{lock, sleep_until, Call};
use crate::answers::{self, Reason};
use crate::ledger::{ItemKey, Ledger, SingleAdmission, TransactionAdmission};
use crate::schema::{table_name, write_of, WriteKind};

/// A transaction's holds, released when dropped: also when the client goes away and the
/// connection task is dropped mid-transaction.
struct Hold<'a> {
    ledger: &'a Mutex<Ledger>,
    transaction: u64,
}

impl Drop for Hold<'_> {
    fn drop(&mut self) {
        lock(self.ledger).release(self.transaction);
    }
}

impl Call<'_> {
    pub(super) async fn single_write(&self, kind: WriteKind) -> Response<Bytes> {
        let Some(body) = self.json() else {
            self.wait_call_latency().await;
            return answers::serialization("request body is not JSON");
        };
        let Some(write) = self.modelled_write(kind, &body).await else {
            return self.plain().await;
        };
        let (write, arn) = write;
        let key = ItemKey::new(&self.scope(), &write);
        let admission = lock(&self.shared.ledger).admit_single(&key, write.wcu, Instant::now());
        match admission {
            SingleAdmission::Admitted => {
                self.shared.count(|s| s.wcu += write.wcu);
                self.plain().await
            }
            SingleAdmission::Conflict => {
                self.shared.count(|s| s.single_write_conflicts += 1);
                self.wait_call_latency().await;
                answers::transaction_conflict()
            }
            SingleAdmission::Throttled => {
                self.shared.count(|s| s.throttled += 1);
                self.wait_call_latency().await;
                answers::write_throttled(&arn)
            }
        }
    }

    /// The write of a single-item call and its table's ARN, or `None` when the call cannot
    /// be modelled (unknown table, missing key: moto answers the error).
    async fn modelled_write(
        &self,
        kind: WriteKind,
        body: &Value,
    ) -> Option<(crate::schema::Write, String)> {
        let schema = self.schema(table_name(body)?).await?;
        let write = write_of(&schema, kind, body, false)?;
        Some((write, schema.arn.clone()))
    }

    pub(super) async fn transact_write_items(&self) -> Response<Bytes> {
        let Some(body) = self.json() else {
            self.wait_call_latency().await;
            return answers::serialization("request body is not JSON");
        };
        self.shared.count(|s| s.transactions += 1);
        let token = body
            .get("ClientRequestToken")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(token) = &token {
            if let Some(replayed) = self.shared.injector.replay(token, &self.body) {
                self.shared.count(|s| s.token_replays += 1);
                self.wait_call_latency().await;
                return replayed;
            }
        }
        let response = self.admitted_transaction(&body).await;
        if let Some(token) = &token {
            if response.status().is_success() {
                self.shared.injector.remember(token, &self.body, &response);
            }
        }
        response
    }

    /// A transaction through the ledger: held, conflicting or throttled.
    async fn admitted_transaction(&self, body: &Value) -> Response<Bytes> {
        let Some(items) = self.transaction_items(body).await else {
            return self.plain().await;
        };
        let admission = lock(&self.shared.ledger).admit_transaction(&items, Instant::now());
        match admission {
            TransactionAdmission::Held(transaction) => {
                let hold = Hold {
                    ledger: &self.shared.ledger,
                    transaction,
                };
                let wcu: f64 = items.iter().map(|(_, wcu)| wcu).sum();
                self.shared.count(|s| s.wcu += wcu);
                // The items stay held for the modelled duration, then moto applies the
                // writes (the commit), then the holds end: readers see the old values
                // until then, like DynamoDB's readers during a transaction.
                sleep_until(
                    self.start + self.shared.model.stretched(self.shared.model.transaction),
                )
                .await;
                let response = self.forward().await;
                drop(hold);
                if response.status().is_success() {
                    self.shared.count(|s| s.committed += 1);
                }
                response
            }
            TransactionAdmission::Conflict(conflicts) => {
                self.shared.count(|s| s.transaction_conflicts += 1);
                tracing::debug!(?conflicts, "transaction cancelled: conflict");
                self.wait_call_latency().await;
                answers::transaction_canceled(&reasons(&conflicts, Reason::TransactionConflict))
            }
            TransactionAdmission::Throttled(throttled) => {
                self.shared.count(|s| {
                    s.throttled += 1;
                    s.throttled_transactions += 1;
                });
                tracing::debug!(?throttled, "transaction cancelled: throttled");
                self.wait_call_latency().await;
                answers::transaction_canceled(&reasons(&throttled, Reason::ThrottlingError))
            }
        }
    }

    /// Each action's item and cost, in request order; `None` when any action cannot be
    /// modelled (the whole transaction then goes to moto as it is).
    async fn transaction_items(&self, body: &Value) -> Option<Vec<(ItemKey, f64)>> {
        let actions = body.get("TransactItems")?.as_array()?;
        let scope = self.scope();
        let mut items = Vec::with_capacity(actions.len());
        for action in actions {
            let action = action.as_object().filter(|a| a.len() == 1)?;
            let (name, inner) = action.iter().next()?;
            let kind = match name.as_str() {
                "Put" => WriteKind::Put,
                "Update" => WriteKind::Update,
                "Delete" => WriteKind::Delete,
                "ConditionCheck" => WriteKind::ConditionCheck,
                _ => return None,
            };
            let schema = self.schema(table_name(inner)?).await?;
            let write = write_of(&schema, kind, inner, true)?;
            items.push((ItemKey::new(&scope, &write), write.wcu));
        }
        Some(items)
    }
}

fn reasons(flags: &[bool], reason: Reason) -> Vec<Reason> {
    flags
        .iter()
        .map(|&flagged| if flagged { reason } else { Reason::None })
        .collect()
}
