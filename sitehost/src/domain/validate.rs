//! Field parsers for JSON bodies, shared by businesses and images. They accept what
//! Tastypie accepted from real clients (numbers as strings, ids as numbers) and record a
//! message per field instead of failing at the first problem.

use serde_json::{Map, Value};
use unicode_normalization::UnicodeNormalization;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};

use crate::error::{ApiError, FieldErrors, Result};

/// The first Unicode format character (general category Cf) in `text`: bidi embeddings,
/// overrides and isolates (U+202A–202E, U+2066–2069), zero-width characters and marks
/// (U+200B–200F), the byte order mark (U+FEFF), the soft hyphen and the rest of Cf. They
/// are invisible: a name holding them displays differently from its bytes (a reversed
/// extension, a look-alike of another business) and sorts apart from its look-alike.
pub fn format_char(text: &str) -> Option<char> {
    text.chars()
        .find(|c| c.general_category() == GeneralCategory::Format)
}

/// The message for a field holding a format character.
pub fn format_char_message(c: char) -> String {
    format!(
        "Must not contain invisible formatting characters (found U+{:04X}).",
        u32::from(c)
    )
}

/// Characters that draw nothing although their category is a letter or a symbol: the
/// Hangul fillers (U+115F, U+1160, U+3164, U+FFA0), the blank Braille pattern (U+2800) and
/// the null notehead (U+1D159).
const BLANK_GLYPHS: [char; 6] = [
    '\u{115F}',
    '\u{1160}',
    '\u{3164}',
    '\u{FFA0}',
    '\u{2800}',
    '\u{1D159}',
];

/// Whether `text` shows nothing a reader could see or tell apart: every character is a
/// space or separator, a format character, a mark with no letter to sit on (categories
/// Mn, Mc, Me) or one of [`BLANK_GLYPHS`]. Such a name looks empty in a listing.
pub fn renders_blank(text: &str) -> bool {
    text.chars().all(|c| {
        c.is_whitespace()
            || BLANK_GLYPHS.contains(&c)
            || c.general_category() == GeneralCategory::Format
            || matches!(
                c.general_category_group(),
                GeneralCategoryGroup::Mark | GeneralCategoryGroup::Separator
            )
    })
}

/// The message for a name that [`renders_blank`].
pub const BLANK_NAME_MESSAGE: &str =
    "This field may not be blank: it must contain a visible letter, digit or symbol.";

/// `text` in Unicode Normalization Form C, so that the same visible text is stored (and
/// sorted, and slugged) the same way however the client composed it.
pub fn nfc(text: &str) -> String {
    text.nfc().collect()
}

/// A positive 64-bit id from a JSON number or a digit string.
pub fn id_value(value: &Value) -> Option<i64> {
    match value {
        Value::Number(n) => n.as_i64().filter(|id| *id > 0),
        Value::String(s) => parse_id(s),
        _ => None,
    }
}

/// A positive 64-bit id from text (a path segment, a query value).
pub fn parse_id(text: &str) -> Option<i64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse::<i64>().ok().filter(|id| *id > 0)
}

pub fn bool_value(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) if n.as_i64() == Some(0) => Some(false),
        Value::Number(n) if n.as_i64() == Some(1) => Some(true),
        Value::String(s) => match s.as_str() {
            "true" | "True" | "1" => Some(true),
            "false" | "False" | "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// A nullable text field: absent is `None`, null is `Some(None)`. Numbers are taken as
/// their text, as partners send numeric ids either way.
pub fn optional_text(
    fields: &mut FieldErrors,
    body: &Map<String, Value>,
    name: &str,
    max_chars: usize,
) -> Option<Option<String>> {
    match text_value(body.get(name)?, max_chars) {
        Ok(text) => Some(text),
        Err(message) => {
            fields.add(name, message);
            None
        }
    }
}

/// A nullable text value, trimmed: null and empty text are `None` (an empty partner id
/// means "none", as the original service stored it); numbers are taken as their text.
/// The error is the message for the field that held it.
pub fn text_value(value: &Value, max_chars: usize) -> std::result::Result<Option<String>, String> {
    checked_text(value, max_chars, false)
}

/// [`text_value`] for prose (a description): line breaks and tabs are allowed.
pub fn prose_value(value: &Value, max_chars: usize) -> std::result::Result<Option<String>, String> {
    checked_text(value, max_chars, true)
}

fn checked_text(
    value: &Value,
    max_chars: usize,
    prose: bool,
) -> std::result::Result<Option<String>, String> {
    let text = match value {
        Value::Null => return Ok(None),
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => return Err("Must be a string or null.".into()),
    };
    if text.chars().count() > max_chars {
        return Err(format!(
            "Ensure this value has at most {max_chars} characters."
        ));
    }
    let refused = |c: char| c.is_control() && !(prose && matches!(c, '\n' | '\r' | '\t'));
    if text.chars().any(refused) {
        return Err("Must not contain control characters.".into());
    }
    // Partner ids are opaque and matched exactly by the list filters, so they are kept as
    // sent (not normalised); only invisible characters are refused.
    if let Some(c) = format_char(&text) {
        return Err(format_char_message(c));
    }
    Ok((!text.is_empty()).then_some(text))
}

/// A nullable id field: absent is `None`, null is `Some(None)`.
pub fn optional_id(
    fields: &mut FieldErrors,
    body: &Map<String, Value>,
    name: &str,
) -> Option<Option<i64>> {
    match body.get(name)? {
        Value::Null => Some(None),
        value => match id_value(value) {
            Some(id) => Some(Some(id)),
            None => {
                fields.add(name, "Must be a positive integer or null.");
                None
            }
        },
    }
}

/// Parses a request body that must be a JSON object.
pub fn json_object(body: &[u8]) -> Result<Map<String, Value>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::invalid(
            "The request body is empty; send a JSON object.",
        ));
    }
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::invalid("The request body is not valid UTF-8."))?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::invalid("The request body must be a JSON object.")),
        Err(err) => Err(ApiError::invalid(format!("Malformed JSON: {err}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ids_must_be_positive_64_bit_integers() {
        assert_eq!(parse_id("42"), Some(42));
        for bad in [
            "",
            "0",
            "-1",
            "1.5",
            "abc",
            "99999999999999999999",
            "+3",
            " 3",
        ] {
            assert_eq!(parse_id(bad), None, "{bad}");
        }
        assert_eq!(id_value(&json!(1.5)), None);
        assert_eq!(id_value(&json!("12")), Some(12));
    }

    #[test]
    fn format_characters_are_found_and_named() {
        for c in [
            '\u{202A}', '\u{202B}', '\u{202C}', '\u{202D}', '\u{202E}', '\u{2066}', '\u{2067}',
            '\u{2068}', '\u{2069}', '\u{200B}', '\u{200C}', '\u{200D}', '\u{200E}', '\u{200F}',
            '\u{FEFF}', '\u{00AD}', '\u{2060}', '\u{061C}',
        ] {
            assert_eq!(format_char(&format!("Cafe{c}gpj.exe")), Some(c), "{c:?}");
        }
        for clean in [
            "Harbour Cafe",
            "Café",
            "日本の店",
            "Joe's Pizza & Grill",
            "مقهى",
        ] {
            assert_eq!(format_char(clean), None, "{clean}");
        }
        assert_eq!(
            format_char_message('\u{202E}'),
            "Must not contain invisible formatting characters (found U+202E)."
        );
    }

    #[test]
    fn names_that_render_blank_are_found() {
        for blank in [
            "\u{3164}",
            "\u{FFA0}",
            "\u{2800}",
            "\u{115F}\u{1160}",
            "\u{1D159}",
            // Combining marks alone: nonspacing, spacing and enclosing.
            "\u{301}",
            "\u{301}\u{308}\u{34F}",
            "\u{903}",
            "\u{20DD}",
            // Variation selectors (marks) and fillers mixed with spaces.
            "\u{FE0F}",
            "\u{3164} \u{2800}\u{3000}\u{A0}",
            "\u{2028}",
            "",
        ] {
            assert!(renders_blank(blank), "{blank:?}");
        }
        for visible in [
            "Harbour Cafe",
            "a",
            "0",
            "日本の店",
            "한국 식당",
            "\u{3164}a",
            "e\u{301}",
            "★",
            "\u{2801}",
            "مقهى",
            "_",
        ] {
            assert!(!renders_blank(visible), "{visible:?}");
        }
    }

    #[test]
    fn nfc_composes_decomposed_text() {
        // "Cafe" + COMBINING ACUTE ACCENT becomes the single code point U+00E9.
        assert_eq!(nfc("Cafe\u{301}"), "Caf\u{E9}");
        assert_eq!(nfc("Caf\u{E9}"), "Caf\u{E9}");
        // Hangul jamo compose into syllables.
        assert_eq!(nfc("\u{1100}\u{1161}"), "\u{AC00}");
    }

    #[test]
    fn partner_ids_refuse_format_characters_and_stay_as_sent() {
        let body = json!({"partner_sub_id": "north\u{200B}", "partner_business_id": "Cafe\u{301}"});
        let body = body.as_object().cloned().unwrap_or_default();
        let mut fields = FieldErrors::default();
        assert_eq!(
            optional_text(&mut fields, &body, "partner_sub_id", 255),
            None
        );
        assert_eq!(
            optional_text(&mut fields, &body, "partner_business_id", 255),
            Some(Some("Cafe\u{301}".to_string()))
        );
        match fields.into_result() {
            Err(ApiError::Validation(map)) => assert_eq!(
                map.get("partner_sub_id"),
                Some(&vec![
                    "Must not contain invisible formatting characters (found U+200B).".to_string()
                ])
            ),
            other => panic!("expected a 400 on partner_sub_id, got {other:?}"),
        }
    }

    #[test]
    fn bodies_must_be_utf8_json_objects() {
        assert!(json_object(b"{\"a\": 1}").is_ok());
        for bad in [&b"[1]"[..], b"\"x\"", b"{", b"", b"\xff\xfe", b"null"] {
            assert!(json_object(bad).is_err());
        }
    }
}
