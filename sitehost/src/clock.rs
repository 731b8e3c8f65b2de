//! Time: a clock that tests can fix, and the contract's timestamp format.

use chrono::{DateTime, NaiveDate};

/// Unix seconds now. Behind a trait so signed sample events verify under a fixed clock.
pub trait Clock: Send + Sync {
    fn now(&self) -> i64;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        chrono::Utc::now().timestamp()
    }
}

pub struct FixedClock(pub i64);

impl Clock for FixedClock {
    fn now(&self) -> i64 {
        self.0
    }
}

/// `2013-05-24T11:40:21`: ISO 8601, UTC, seconds, no zone suffix.
pub fn format_timestamp(unix: i64) -> String {
    DateTime::from_timestamp(unix, 0)
        .unwrap_or_default()
        .format("%Y-%m-%dT%H:%M:%S")
        .to_string()
}

/// The UTC calendar day of a timestamp, for `added__date`.
pub fn utc_date(unix: i64) -> NaiveDate {
    DateTime::from_timestamp(unix, 0)
        .unwrap_or_default()
        .date_naive()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_like_the_contract() {
        assert_eq!(format_timestamp(1_369_395_621), "2013-05-24T11:40:21");
        assert_eq!(utc_date(1_369_395_621).to_string(), "2013-05-24");
    }
}
