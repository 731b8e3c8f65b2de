//! How a size limit is stated in every refusal and in the documents that quote it.

/// A size limit as every refusal states it: the exact bytes, then the size a file manager
/// or a phone shows (decimal units, rounded down so a file shown at that size is within
/// it): `7,340,032 bytes (7.3 MB)`, `65,536 bytes (65.5 KB)`.
pub fn byte_size(bytes: u64) -> String {
    let tenths = |unit: u64| {
        let tenths = bytes / (unit / 10);
        match tenths % 10 {
            0 => (tenths / 10).to_string(),
            d => format!("{}.{d}", tenths / 10),
        }
    };
    let shown = if bytes >= 1_000_000 {
        format!(" ({} MB)", tenths(1_000_000))
    } else if bytes >= 1_000 {
        format!(" ({} KB)", tenths(1_000))
    } else {
        String::new()
    };
    format!("{} bytes{shown}", thousands(bytes))
}

/// `4669440` as `4,669,440`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// What a partner does with an image over the base64 limit, said by every refusal of one:
/// a staged upload first (a file on the partner's side), `external_url` second.
pub fn larger_images_by_url(fetch_max_bytes: u64) -> String {
    format!(
        "send a larger image as a staged upload (POST /api/v2/images/uploads/, post the file \
         to the form it gives, then POST /api/v2/images/ with its upload_id) or by \
         external_url, which take files up to {}",
        byte_size(fetch_max_bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_stated_in_bytes_and_rounded_down_decimal_units() {
        assert_eq!(byte_size(7_340_032), "7,340,032 bytes (7.3 MB)");
        assert_eq!(byte_size(4_669_440), "4,669,440 bytes (4.6 MB)");
        assert_eq!(byte_size(26_214_400), "26,214,400 bytes (26.2 MB)");
        assert_eq!(byte_size(5_000_000), "5,000,000 bytes (5 MB)");
        assert_eq!(byte_size(65_536), "65,536 bytes (65.5 KB)");
        assert_eq!(byte_size(999), "999 bytes");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(100), "100");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }
}
