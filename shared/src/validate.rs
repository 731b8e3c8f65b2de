//! Field parsers for JSON bodies, shared by businesses and images. They accept what
//! Tastypie accepted from real clients (numbers as strings, ids as numbers) and record a
//! message per field instead of failing at the first problem.

use serde_json::{Map, Value};

use crate::error::{ApiError, FieldErrors, Result};

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
    let value = body.get(name)?;
    let text = match value {
        Value::Null => return Some(None),
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        _ => {
            fields.add(name, "Must be a string or null.");
            return None;
        }
    };
    if text.chars().count() > max_chars {
        fields.add(
            name,
            format!("Ensure this value has at most {max_chars} characters."),
        );
        return None;
    }
    if text.chars().any(char::is_control) {
        fields.add(name, "Must not contain control characters.");
        return None;
    }
    // An empty partner id means "none", as the original service stored it.
    Some((!text.is_empty()).then_some(text))
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
    fn bodies_must_be_utf8_json_objects() {
        assert!(json_object(b"{\"a\": 1}").is_ok());
        for bad in [&b"[1]"[..], b"\"x\"", b"{", b"", b"\xff\xfe", b"null"] {
            assert!(json_object(bad).is_err());
        }
    }
}
