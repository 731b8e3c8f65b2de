//! How a scope's list entries and its counter are spread over items and partitions, so that
//! one account's burst of writes neither queues on one counter item nor runs past one
//! partition's write throughput (docs/dynamodb-design.md, "Writes under a burst").
//!
//! - DynamoDB cancels a transaction that touches an item another transaction is writing
//!   (`TransactionConflict`). Every create of an account changes its scopes' counts, so a
//!   count is kept in [`COUNTER_LANES`] items ("lanes"): a write adds to one lane, drawn at
//!   random for each attempt, and a list sums them all. Two transactions conflict only when
//!   they draw the same lane.
//! - One partition key takes at most 1,000 write units a second, and with a local secondary
//!   index an item collection never splits. A create writes each scope's entry (2 units in a
//!   transaction, 2 more for its `by_name` index entry) and a counter lane (2 units), so one
//!   partition per scope would cap an account at about 170 creates a second. Entries go to
//!   one of [`ENTRY_SHARDS`] partitions by a hash of the record's id (an update finds them
//!   again without reading), the lanes to one of [`COUNTER_PARTITIONS`].
//!
//! Changing any of these constants changes where items live: it needs a table migration.

/// Partitions of one scope's list entries. 1,000 creates a second at 4 write units per
/// entry is 500 units a second per shard, half a partition's limit.
pub const ENTRY_SHARDS: u32 = 8;
/// Partitions of one scope's counter lanes: 1,000 creates a second at 2 write units each
/// is 500 units a second per partition. A count reads all of them (one `Query` each).
pub const COUNTER_PARTITIONS: u32 = 4;
/// Counter items of one scope. With ~10 transactions in flight (1,000 a second, 10 ms
/// each), a transaction meets another on its lane about 8% of the time, and a retry draws
/// again; 32 lanes of 70 bytes per partition still read as one 4 KB read unit.
pub const COUNTER_LANES: u32 = 128;

/// The entry shard of a record id: Fibonacci hashing, so that ids handed out in blocks (one
/// block per function instance, with gaps) still spread evenly.
pub fn entry_shard(id: i64) -> u32 {
    let hash = (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((hash >> 32) % u64::from(ENTRY_SHARDS)) as u32
}

/// A counter lane for one write attempt.
pub fn random_lane() -> u32 {
    rand::random_range(0..COUNTER_LANES)
}

/// The partition a lane lives in.
pub fn lane_partition(lane: u32) -> u32 {
    lane % COUNTER_PARTITIONS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_and_strided_ids_spread_over_every_shard() {
        for stride in [1, 8, 20, 100] {
            let mut per_shard = [0u32; ENTRY_SHARDS as usize];
            for n in 0..8_000i64 {
                per_shard[entry_shard(1 + n * stride) as usize] += 1;
            }
            for count in per_shard {
                assert!((800..=1_200).contains(&count), "{stride}: {per_shard:?}");
            }
        }
    }

    #[test]
    fn lanes_cover_every_partition() {
        let partitions: std::collections::BTreeSet<u32> =
            (0..COUNTER_LANES).map(lane_partition).collect();
        assert_eq!(partitions.len(), COUNTER_PARTITIONS as usize);
        assert!((0..1000).all(|_| random_lane() < COUNTER_LANES));
    }
}
