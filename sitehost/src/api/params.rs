//! A request's parameters, as `application/x-www-form-urlencoded` text: its query string's,
//! and a form-encoded body's, which OAuth 1.0a signs too (RFC 5849 3.4.1.3.1).
//!
//! Finding them in a request (which part holds them, its `Content-Type`, how large a form
//! body may be) is HTTP work, so it lives here and `auth` verifies a signature over the
//! parameters it is given: `auth` sits below `api` and needs no parser of its own (the
//! `Authorization` header's encoding, which is OAuth's, stays in `auth::oauth1`). Clients
//! that sign a request (`client`, the command's `events sign`, tests) parse its query
//! with [`parse`] as well.

use crate::config::byte_size;
use crate::error::{ApiError, Result};

/// Splits `application/x-www-form-urlencoded` text (a raw query string, a form body) into
/// decoded pairs, keeping order and repeats; `None` when it is not UTF-8 once decoded.
pub fn parse(raw: &str) -> Option<Vec<(String, String)>> {
    // `form_urlencoded` decodes invalid UTF-8 lossily; a signature must not be checked
    // against text the client never sent, so the whole string is checked strictly first.
    // ASCII separators (and `+`, a space) are character boundaries, so every part is valid
    // if the whole is.
    percent_encoding::percent_decode_str(raw)
        .decode_utf8()
        .ok()?;
    Some(
        form_urlencoded::parse(raw.as_bytes())
            .map(|(name, value)| (name.into_owned(), value.into_owned()))
            .collect(),
    )
}

/// The request's query parameters, decoded, in order.
pub fn query(uri: &http::Uri) -> Result<Vec<(String, String)>> {
    parse(uri.query().unwrap_or_default()).ok_or_else(|| {
        ApiError::invalid("The query string is not valid UTF-8 once percent-decoded.")
    })
}

/// Largest form-encoded body whose parameters are signed (RFC 5849 3.4.1.3.1). No
/// operation takes a form body, so this only bounds what parsing one may cost.
pub const MAX_FORM_BODY_BYTES: usize = 64 * 1024;

/// The 413 of a form-encoded body over [`MAX_FORM_BODY_BYTES`].
pub fn form_body_too_large() -> ApiError {
    ApiError::TooLarge(format!(
        "A form-encoded body is signed and may have at most {}; the API takes JSON bodies \
         (Content-Type: application/json).",
        byte_size(MAX_FORM_BODY_BYTES as u64)
    ))
}

/// Whether a request's body is form-encoded (`application/x-www-form-urlencoded`): its
/// parameters are signed, so it is read before the signature is checked.
pub fn is_form(content_type: Option<&str>) -> bool {
    content_type
        .and_then(|v| v.split(';').next())
        .is_some_and(|media| {
            media
                .trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        })
}

/// The non-oauth parameters a request is signed with: the query's, then a form-encoded
/// body's (`Content-Type: application/x-www-form-urlencoded`), as RFC 5849 3.4.1.3.1 and
/// oauthlib have it. Any other body (JSON) is not signed.
pub fn signed(
    query: &[(String, String)],
    content_type: Option<&str>,
    body: &[u8],
) -> Result<Vec<(String, String)>> {
    let mut params = query.to_vec();
    if is_form(content_type) && !body.is_empty() {
        if body.len() > MAX_FORM_BODY_BYTES {
            return Err(form_body_too_large());
        }
        let text = std::str::from_utf8(body).map_err(|_| {
            ApiError::Unauthorized("the form-encoded body is not valid UTF-8".into())
        })?;
        params.extend(parse(text).ok_or_else(|| {
            ApiError::Unauthorized("the request has a parameter that is not valid UTF-8".into())
        })?);
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::oauth1;

    const FORM: Option<&str> = Some("application/x-www-form-urlencoded");

    /// Through `form_urlencoded`: order and repeats kept, `+` a space, empty parts skipped;
    /// invalid UTF-8 is refused, also when its bytes are split across two parameters (each
    /// half alone would be decoded lossily into U+FFFD and signed as text nobody sent).
    #[test]
    fn queries_keep_order_and_refuse_invalid_utf8() {
        let pairs = parse("b=2&&a=x+y&b=1&c&%C3%A9=%E2%82%AC").expect("valid");
        let expected = [("b", "2"), ("a", "x y"), ("b", "1"), ("c", ""), ("é", "€")];
        assert_eq!(
            pairs,
            expected
                .iter()
                .map(|(n, v)| (n.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        );
        for hostile in ["a=%C3", "a=%C3&b=%A9", "a=%FF%FE", "%C3=1"] {
            assert_eq!(parse(hostile), None, "{hostile}");
            // Signed in a form body, such a parameter is a 401.
            let err = signed(&[], FORM, hostile.as_bytes()).expect_err(hostile);
            assert!(
                matches!(err, ApiError::Unauthorized(_)),
                "{hostile}: {err:?}"
            );
        }
    }

    /// `requests.Request("POST", url, data={...}, auth=OAuth1("key", client_secret="secret",
    /// nonce="formnonce42", timestamp="1714564800")).prepare()` with requests-oauthlib 2.0.0
    /// (oauthlib 3.2): the form body's parameters are in the signature base string.
    #[test]
    fn form_encoded_bodies_are_signed_like_oauthlib() {
        let url = "https://d111111abcdef8.cloudfront.net/api/v2/businesses/";
        let query = parse("limit=5").expect("query");
        let body = b"business_name=Harbour+Cafe&note=a%26b%3Dc+%C3%BC~%2A";
        let header = "OAuth oauth_nonce=\"formnonce42\", oauth_timestamp=\"1714564800\", \
                      oauth_version=\"1.0\", oauth_signature_method=\"HMAC-SHA1\", \
                      oauth_consumer_key=\"key\", \
                      oauth_signature=\"XhhgXnr6i2yDrHQI1A8CK7eJFyE%3D\"";
        for content_type in [
            "application/x-www-form-urlencoded",
            "Application/X-WWW-Form-Urlencoded; charset=utf-8",
        ] {
            let params = signed(&query, Some(content_type), body).expect("params");
            assert!(params.contains(&("note".to_string(), "a&b=c ü~*".to_string())));
            let signed = oauth1::SignedRequest::parse(Some(header), &params).expect("parses");
            assert!(signed.verify("POST", url, "secret"), "{content_type}");
        }
        // Leaving the body out of the base string (what the service did) misses it.
        let without_body = oauth1::SignedRequest::parse(Some(header), &query).expect("parses");
        assert!(!without_body.verify("POST", url, "secret"));
        // A JSON body is not signed, whatever it holds.
        let json = signed(&query, Some("application/json"), b"a=1").expect("json");
        assert_eq!(json, query);
        let none = signed(&query, None, b"a=1").expect("no content type");
        assert_eq!(none, query);
    }

    #[test]
    fn form_bodies_are_bounded_and_must_be_utf8() {
        let big = vec![b'a'; MAX_FORM_BODY_BYTES + 1];
        assert!(matches!(
            signed(&[], FORM, &big),
            Err(ApiError::TooLarge(m)) if m.contains("at most 65,536 bytes (65.5 KB)")
        ));
        assert!(signed(&[], FORM, &big[1..]).is_ok());
        assert!(matches!(
            signed(&[], FORM, b"a=%FF"),
            Err(ApiError::Unauthorized(_))
        ));
        assert!(matches!(
            signed(&[], FORM, b"a=\xff"),
            Err(ApiError::Unauthorized(_))
        ));
    }
}
