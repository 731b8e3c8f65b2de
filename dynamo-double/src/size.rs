//! Item sizes and write capacity units, by DynamoDB's published rules
//! (<https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/CapacityUnitCalculations.html>):
//! an item is the sum of its attribute names' and values' sizes.
//!
//! | type | size |
//! |---|---|
//! | `S` | UTF-8 bytes |
//! | `N` | 1 byte per two significant digits (rounded up) + 1 (the docs' "approximately") |
//! | `B` | raw bytes (the base64 text's decoded length) |
//! | `BOOL`, `NULL` | 1 |
//! | `L`, `M` | 3 + per element 1 + the element's size (`M` elements add their name) |
//! | `SS`, `NS`, `BS` | the sum of the elements (the docs give no set overhead; none assumed) |
//!
//! A value that is not a well-formed `AttributeValue` counts 0: the request is forwarded and
//! moto rejects it, so its cost never matters.

use serde_json::{Map, Value};

/// One write capacity unit covers a write of up to 1 KB.
pub const WRITE_UNIT_BYTES: u64 = 1024;

/// The size in bytes of an item (a map of attribute names to `AttributeValue` JSON).
pub fn item_size(item: &Map<String, Value>) -> u64 {
    item.iter()
        .map(|(name, value)| name.len() as u64 + value_size(value))
        .sum()
}

/// The write capacity units of one write of an item of `size` bytes: one per started KB,
/// at least one.
pub fn write_units(size: u64) -> u64 {
    size.div_ceil(WRITE_UNIT_BYTES).max(1)
}

/// The size of one `AttributeValue` (`{"S": "..."}`, `{"M": {...}}`, ...), name excluded.
pub fn value_size(value: &Value) -> u64 {
    let Some((kind, inner)) = value.as_object().and_then(|o| o.iter().next()) else {
        return 0;
    };
    match (kind.as_str(), inner) {
        ("S", Value::String(s)) => s.len() as u64,
        ("N", Value::String(n)) => number_size(n),
        ("B", Value::String(b)) => base64_decoded_len(b),
        ("BOOL", _) | ("NULL", _) => 1,
        ("SS", Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(|s| s.len() as u64)
            .sum(),
        ("NS", Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(number_size)
            .sum(),
        ("BS", Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(base64_decoded_len)
            .sum(),
        ("L", Value::Array(items)) => 3 + items.iter().map(|v| 1 + value_size(v)).sum::<u64>(),
        ("M", Value::Object(map)) => {
            3 + map
                .iter()
                .map(|(name, v)| 1 + name.len() as u64 + value_size(v))
                .sum::<u64>()
        }
        _ => 0,
    }
}

/// A number's size: its significant digits (sign, point, exponent, leading and trailing
/// zeros dropped), one byte per two, plus one.
fn number_size(number: &str) -> u64 {
    let mantissa = number.split(['e', 'E']).next().unwrap_or_default();
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0').trim_end_matches('0').len() as u64;
    significant.div_ceil(2) + 1
}

/// The decoded length of base64 text, without decoding it.
fn base64_decoded_len(text: &str) -> u64 {
    (text.trim_end_matches('=').len() as u64 * 3) / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn size_of(item: Value) -> u64 {
        item_size(item.as_object().expect("an object"))
    }

    #[test]
    fn scalars_follow_the_documented_rules() {
        // "pk" + "BUSINESS#1", "n" + 12345 (three digit pairs + 1), "ok" + 1, "gone" + 1,
        // "b" + "hello" (5 raw bytes).
        let item = json!({
            "pk": {"S": "BUSINESS#1"},
            "n": {"N": "12345"},
            "ok": {"BOOL": true},
            "gone": {"NULL": true},
            "b": {"B": "aGVsbG8="},
        });
        assert_eq!(
            size_of(item),
            (2 + 10) + (1 + 4) + (2 + 1) + (4 + 1) + (1 + 5)
        );
    }

    #[test]
    fn numbers_count_significant_digits_only() {
        assert_eq!(number_size("0"), 1);
        assert_eq!(number_size("-000120.500"), 3); // 1205: two pairs
        assert_eq!(number_size("1E+3"), 2);
        assert_eq!(number_size("123"), 3);
    }

    #[test]
    fn lists_and_maps_carry_their_overhead() {
        // "l" + 3 + (1 + 1) + (1 + 2); "m" + 3 + (1 + "k" + 1 "x")
        let item = json!({
            "l": {"L": [{"S": "a"}, {"S": "bc"}]},
            "m": {"M": {"k": {"S": "x"}}},
        });
        assert_eq!(size_of(item), (1 + 3 + 2 + 3) + (1 + 3 + 3));
    }

    #[test]
    fn units_are_per_started_kilobyte() {
        assert_eq!(write_units(0), 1);
        assert_eq!(write_units(1024), 1);
        assert_eq!(write_units(1025), 2);
    }

    #[test]
    fn malformed_values_count_nothing() {
        assert_eq!(value_size(&json!("plain")), 0);
        assert_eq!(value_size(&json!({"S": 5})), 0);
    }
}
