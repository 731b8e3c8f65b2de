//! The model's shared state: which items in-flight transactions hold, and each partition's
//! write tokens. Every decision (conflict, throttle, hold) is taken under one lock, so a
//! transaction's check and its holds are atomic with respect to every other request.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::schema::Write;

/// Where an item lives: the region and account moto keys tables by (taken from the
/// request's credential scope), the table, and the item's primary key.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ItemKey {
    pub scope: String,
    pub table: String,
    pub hash: String,
    pub range: Option<String>,
}

/// A partition: with a local secondary index an item collection never splits, so the limit
/// is per partition key value (see the crate documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionKey {
    pub scope: String,
    pub table: String,
    pub hash: String,
}

impl ItemKey {
    pub fn new(scope: &str, write: &Write) -> ItemKey {
        ItemKey {
            scope: scope.to_owned(),
            table: write.table.clone(),
            hash: write.hash.clone(),
            range: write.range.clone(),
        }
    }

    fn partition(&self) -> PartitionKey {
        PartitionKey {
            scope: self.scope.clone(),
            table: self.table.clone(),
            hash: self.hash.clone(),
        }
    }
}

/// A partition's write budget in real time: `refill_per_sec` is the modelled rate divided
/// by the stretch; `depth` is `burst_secs` of the modelled rate.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    pub refill_per_sec: f64,
    pub depth: f64,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl Bucket {
    fn refilled(self, rates: Rates, now: Instant) -> Bucket {
        let elapsed = now.saturating_duration_since(self.at).as_secs_f64();
        Bucket {
            tokens: (self.tokens + elapsed * rates.refill_per_sec).min(rates.depth),
            at: now,
        }
    }
}

/// Buckets are dropped once full again (a full bucket is what a new one starts as), but
/// only when there are many, and at most once a second: pruning walks them all.
const PRUNE_ABOVE: usize = 10_000;
const PRUNE_EVERY: Duration = Duration::from_secs(1);

/// The answer to a transaction's admission.
#[derive(Debug)]
pub enum TransactionAdmission {
    /// Its items are held under this transaction id until [`Ledger::release`].
    Held(u64),
    /// Per action, in request order: whether its item is held by another transaction.
    Conflict(Vec<bool>),
    /// Per action: whether its partition lacks the write tokens. Nothing was charged.
    Throttled(Vec<bool>),
}

/// The answer to a single-item write's admission.
#[derive(Debug, PartialEq, Eq)]
pub enum SingleAdmission {
    Admitted,
    Conflict,
    Throttled,
}

#[derive(Debug)]
pub struct Ledger {
    rates: Rates,
    held: HashMap<ItemKey, u64>,
    buckets: HashMap<PartitionKey, Bucket>,
    next_transaction: u64,
    last_prune: Instant,
}

impl Ledger {
    pub fn new(rates: Rates) -> Ledger {
        Ledger {
            rates,
            held: HashMap::new(),
            buckets: HashMap::new(),
            next_transaction: 0,
            last_prune: Instant::now(),
        }
    }

    /// How many items in-flight transactions hold now.
    pub fn held_items(&self) -> usize {
        self.held.len()
    }

    /// Conflicts first (a held item cancels the transaction whatever the capacity), then
    /// capacity (all-or-nothing: a throttled transaction charges no partition), then the
    /// holds.
    pub fn admit_transaction(
        &mut self,
        items: &[(ItemKey, f64)],
        now: Instant,
    ) -> TransactionAdmission {
        let conflicts: Vec<bool> = items
            .iter()
            .map(|(key, _)| self.held.contains_key(key))
            .collect();
        if conflicts.iter().any(|&c| c) {
            return TransactionAdmission::Conflict(conflicts);
        }
        let mut demand: HashMap<PartitionKey, f64> = HashMap::new();
        for (key, wcu) in items {
            *demand.entry(key.partition()).or_default() += wcu;
        }
        let short: Vec<PartitionKey> = demand
            .iter()
            .filter(|(partition, wcu)| self.bucket(partition, now).tokens < **wcu)
            .map(|(partition, _)| partition.clone())
            .collect();
        if !short.is_empty() {
            let throttled = items
                .iter()
                .map(|(key, _)| short.contains(&key.partition()))
                .collect();
            return TransactionAdmission::Throttled(throttled);
        }
        for (partition, wcu) in demand {
            self.charge(partition, wcu, now);
        }
        self.next_transaction += 1;
        let id = self.next_transaction;
        for (key, _) in items {
            self.held.insert(key.clone(), id);
        }
        TransactionAdmission::Held(id)
    }

    /// A single-item write holds nothing; it is refused on a held item or an empty bucket.
    pub fn admit_single(&mut self, key: &ItemKey, wcu: f64, now: Instant) -> SingleAdmission {
        if self.held.contains_key(key) {
            return SingleAdmission::Conflict;
        }
        let partition = key.partition();
        if self.bucket(&partition, now).tokens < wcu {
            return SingleAdmission::Throttled;
        }
        self.charge(partition, wcu, now);
        SingleAdmission::Admitted
    }

    /// Ends a transaction's holds.
    pub fn release(&mut self, transaction: u64) {
        self.held.retain(|_, holder| *holder != transaction);
    }

    /// The partition's bucket brought up to `now` (a new partition starts full).
    fn bucket(&self, partition: &PartitionKey, now: Instant) -> Bucket {
        match self.buckets.get(partition) {
            Some(bucket) => bucket.refilled(self.rates, now),
            None => Bucket {
                tokens: self.rates.depth,
                at: now,
            },
        }
    }

    fn charge(&mut self, partition: PartitionKey, wcu: f64, now: Instant) {
        let mut bucket = self.bucket(&partition, now);
        bucket.tokens -= wcu;
        self.buckets.insert(partition, bucket);
        self.prune(now);
    }

    fn prune(&mut self, now: Instant) {
        if self.buckets.len() <= PRUNE_ABOVE || now.duration_since(self.last_prune) < PRUNE_EVERY {
            return;
        }
        self.last_prune = now;
        let rates = self.rates;
        self.buckets
            .retain(|_, bucket| bucket.refilled(rates, now).tokens < rates.depth);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(hash: &str, range: &str) -> ItemKey {
        ItemKey {
            scope: "us-east-1".into(),
            table: "t".into(),
            hash: hash.into(),
            range: Some(range.into()),
        }
    }

    fn ledger(rate: f64, depth: f64) -> Ledger {
        Ledger::new(Rates {
            refill_per_sec: rate,
            depth,
        })
    }

    #[test]
    fn a_held_item_cancels_other_transactions_and_single_writes() {
        let mut ledger = ledger(1000.0, 1000.0);
        let now = Instant::now();
        let first = ledger.admit_transaction(&[(key("a", "1"), 2.0), (key("a", "2"), 2.0)], now);
        let TransactionAdmission::Held(id) = first else {
            panic!("first transaction not admitted: {first:?}");
        };
        match ledger.admit_transaction(&[(key("b", "1"), 2.0), (key("a", "2"), 2.0)], now) {
            TransactionAdmission::Conflict(flags) => assert_eq!(flags, vec![false, true]),
            other => panic!("expected a conflict, got {other:?}"),
        }
        assert_eq!(
            ledger.admit_single(&key("a", "1"), 1.0, now),
            SingleAdmission::Conflict
        );
        ledger.release(id);
        assert_eq!(ledger.held_items(), 0);
        assert_eq!(
            ledger.admit_single(&key("a", "1"), 1.0, now),
            SingleAdmission::Admitted
        );
    }

    #[test]
    fn a_partition_refills_at_its_rate_up_to_its_depth() {
        let mut ledger = ledger(10.0, 3.0);
        let start = Instant::now();
        for _ in 0..3 {
            assert_eq!(
                ledger.admit_single(&key("p", "x"), 1.0, start),
                SingleAdmission::Admitted
            );
        }
        assert_eq!(
            ledger.admit_single(&key("p", "x"), 1.0, start),
            SingleAdmission::Throttled
        );
        // Another partition has its own bucket.
        assert_eq!(
            ledger.admit_single(&key("q", "x"), 1.0, start),
            SingleAdmission::Admitted
        );
        let later = start + Duration::from_millis(100);
        assert_eq!(
            ledger.admit_single(&key("p", "x"), 1.0, later),
            SingleAdmission::Admitted
        );
        assert_eq!(
            ledger.admit_single(&key("p", "x"), 1.0, later),
            SingleAdmission::Throttled
        );
    }

    #[test]
    fn a_throttled_transaction_charges_nothing_and_names_the_short_partitions() {
        let mut ledger = ledger(1.0, 4.0);
        let now = Instant::now();
        let admission = ledger.admit_transaction(
            &[
                (key("p", "1"), 4.0),
                (key("p", "2"), 2.0),
                (key("q", "1"), 2.0),
            ],
            now,
        );
        match admission {
            TransactionAdmission::Throttled(flags) => assert_eq!(flags, vec![true, true, false]),
            other => panic!("expected throttling, got {other:?}"),
        }
        assert_eq!(ledger.held_items(), 0);
        // Nothing was charged: q still has its four tokens, p too.
        assert_eq!(
            ledger.admit_single(&key("q", "9"), 4.0, now),
            SingleAdmission::Admitted
        );
        assert_eq!(
            ledger.admit_single(&key("p", "9"), 4.0, now),
            SingleAdmission::Admitted
        );
    }
}
