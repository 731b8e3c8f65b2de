//! RFC 5849 signatures, HMAC-SHA1, two-legged (consumer key and secret, no token): what
//! `requests_oauthlib.OAuth1Session(key, client_secret=secret)` sends. Used to verify
//! requests, and by tests and the load generator to sign them.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use hmac::{Hmac, Mac};
use percent_encoding::{percent_decode_str, utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use sha1::Sha1;
use subtle::ConstantTimeEq;

use crate::error::{ApiError, Result};

/// RFC 5849 3.6: everything but ALPHA, DIGIT, '-', '.', '_', '~' is encoded.
const OAUTH_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

pub fn encode(text: &str) -> String {
    utf8_percent_encode(text, OAUTH_ENCODE).to_string()
}

/// Decodes a component of the `Authorization` header (a `+` stays a `+` there).
fn decode(text: &str) -> Result<String> {
    percent_decode_str(text)
        .decode_utf8()
        .map(|s| s.into_owned())
        .map_err(|_| unauthorized("the request has a parameter that is not valid UTF-8"))
}

fn unauthorized(msg: &str) -> ApiError {
    ApiError::Unauthorized(msg.to_string())
}

/// The oauth parameters of an `Authorization: OAuth ...` header (realm dropped).
pub fn parse_authorization(header: &str) -> Result<Vec<(String, String)>> {
    let rest = header
        .trim_start()
        .strip_prefix("OAuth ")
        .or_else(|| header.trim_start().strip_prefix("oauth "))
        .ok_or_else(|| unauthorized("the Authorization header is not an OAuth header"))?;
    let mut params = Vec::new();
    for part in rest.split(',') {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let (name, value) = part
            .split_once('=')
            .ok_or_else(|| unauthorized("the OAuth header is malformed"))?;
        let value = value
            .strip_prefix('"')
            .and_then(|v| v.strip_suffix('"'))
            .ok_or_else(|| unauthorized("the OAuth header has an unquoted value"))?;
        let name = decode(name.trim())?;
        if name != "realm" {
            params.push((name, decode(value)?));
        }
    }
    Ok(params)
}

/// The signature base string: method, base URI, and the normalised parameters
/// (query parameters plus oauth parameters, `oauth_signature` excluded).
pub fn base_string(method: &str, base_uri: &str, params: &[(String, String)]) -> String {
    let mut encoded: Vec<(String, String)> = params
        .iter()
        .filter(|(name, _)| name != "oauth_signature")
        .map(|(n, v)| (encode(n), encode(v)))
        .collect();
    encoded.sort();
    let normalized = encoded
        .iter()
        .map(|(n, v)| format!("{n}={v}"))
        .collect::<Vec<_>>()
        .join("&");
    format!(
        "{}&{}&{}",
        method.to_ascii_uppercase(),
        encode(base_uri),
        encode(&normalized)
    )
}

/// `scheme://host[:port]/path`, lower-case scheme and host, default ports dropped.
pub fn base_uri(scheme: &str, host: &str, path: &str) -> String {
    let scheme = scheme.to_ascii_lowercase();
    let host = host.to_ascii_lowercase();
    let host = match (scheme.as_str(), host.rsplit_once(':')) {
        ("http", Some((h, "80"))) | ("https", Some((h, "443"))) => h.to_string(),
        _ => host,
    };
    format!("{scheme}://{host}{path}")
}

/// HMAC-SHA1 over the base string with key `consumer_secret&` (no token secret).
pub fn sign(consumer_secret: &str, base_string: &str) -> String {
    let key = format!("{}&", encode(consumer_secret));
    let mut mac = Hmac::<Sha1>::new_from_slice(key.as_bytes()).expect("HMAC takes any key length");
    mac.update(base_string.as_bytes());
    BASE64.encode(mac.finalize().into_bytes())
}

/// The oauth parameters of one request, as found in the header or the query.
#[derive(Debug, Clone)]
pub struct SignedRequest {
    pub consumer_key: String,
    pub nonce: String,
    pub timestamp: i64,
    pub signature: String,
    /// Every parameter that is signed: the query's and the oauth ones.
    pub params: Vec<(String, String)>,
}

impl SignedRequest {
    /// Collects the oauth parameters from the `Authorization` header, or else the query.
    pub fn parse(authorization: Option<&str>, query: &[(String, String)]) -> Result<Self> {
        let mut params: Vec<(String, String)> = query.to_vec();
        match authorization {
            Some(header) if !header.trim().is_empty() => {
                params.extend(parse_authorization(header)?)
            }
            _ => {
                if !query.iter().any(|(n, _)| n == "oauth_signature") {
                    return Err(unauthorized(
                        "authentication required: sign the request with OAuth 1.0a (HMAC-SHA1)",
                    ));
                }
            }
        }
        // RFC 5849 3.1: no protocol parameter may appear more than once, optional ones
        // (`oauth_version`, `oauth_token`) and unknown `oauth_*` ones included.
        let mut oauth_names: Vec<&str> = params
            .iter()
            .map(|(n, _)| n.as_str())
            .filter(|n| n.starts_with("oauth_"))
            .collect();
        oauth_names.sort_unstable();
        if let Some(pair) = oauth_names.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(unauthorized(&format!(
                "the request has more than one {}",
                pair[0]
            )));
        }
        let at_most_one = |name: &str| -> Result<Option<String>> {
            let mut values = params
                .iter()
                .filter(|(n, _)| n == name)
                .map(|(_, v)| v.clone());
            let value = values.next();
            if values.next().is_some() {
                return Err(unauthorized(&format!(
                    "the request has more than one {name}"
                )));
            }
            Ok(value)
        };
        let one = |name: &str| -> Result<String> {
            at_most_one(name)?.ok_or_else(|| unauthorized(&format!("the request has no {name}")))
        };
        let method = one("oauth_signature_method")?;
        if method != "HMAC-SHA1" {
            return Err(unauthorized(&format!(
                "unsupported signature method '{method}'; use HMAC-SHA1"
            )));
        }
        if let Some(version) = at_most_one("oauth_version")? {
            if !version_accepted(&version) {
                return Err(unauthorized("unsupported oauth_version; use 1.0"));
            }
        }
        if params
            .iter()
            .any(|(n, v)| n == "oauth_token" && !v.is_empty())
        {
            return Err(unauthorized(
                "this API takes two-legged OAuth: send no oauth_token",
            ));
        }
        let timestamp = one("oauth_timestamp")?
            .parse::<i64>()
            .map_err(|_| unauthorized("oauth_timestamp is not an integer"))?;
        let nonce = one("oauth_nonce")?;
        if nonce.is_empty() || nonce.len() > 128 {
            return Err(unauthorized("oauth_nonce must be 1 to 128 characters"));
        }
        Ok(SignedRequest {
            consumer_key: one("oauth_consumer_key")?,
            nonce,
            timestamp,
            signature: one("oauth_signature")?,
            params,
        })
    }

    /// Whether the signature is right for this base URI, compared in constant time.
    pub fn verify(&self, method: &str, base_uri: &str, consumer_secret: &str) -> bool {
        let expected = sign(
            consumer_secret,
            &base_string(method, base_uri, &self.params),
        );
        expected.as_bytes().ct_eq(self.signature.as_bytes()).into()
    }
}

/// Whether an `oauth_version` is OAuth 1.0: `1.0` as RFC 5849 has it, or `1.0A`/`1.0a`,
/// which node-oauth (the library under passport's OAuth 1.0a strategies) sends when
/// constructed with version `'1.0A'`, as its README shows. The value is signed (it is in
/// the base string as sent), so accepting the spelling costs nothing.
fn version_accepted(version: &str) -> bool {
    matches!(version, "1.0" | "1.0A" | "1.0a")
}

/// Builds an `Authorization` header for a request, as requests_oauthlib does. For tests,
/// examples and the load generator.
pub fn authorization_header(
    method: &str,
    url_base: &str,
    query: &[(String, String)],
    key: &str,
    secret: &str,
    timestamp: i64,
    nonce: &str,
) -> String {
    let oauth = [
        ("oauth_nonce", nonce.to_string()),
        ("oauth_timestamp", timestamp.to_string()),
        ("oauth_version", "1.0".to_string()),
        ("oauth_signature_method", "HMAC-SHA1".to_string()),
        ("oauth_consumer_key", key.to_string()),
    ];
    let mut params = query.to_vec();
    params.extend(oauth.iter().map(|(n, v)| (n.to_string(), v.clone())));
    let signature = sign(secret, &base_string(method, url_base, &params));
    let mut parts: Vec<String> = oauth
        .iter()
        .map(|(n, v)| format!("{n}=\"{}\"", encode(v)))
        .collect();
    parts.push(format!("oauth_signature=\"{}\"", encode(&signature)));
    format!("OAuth {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 5849 section 3.4.1.1's example parameters (the base string part).
    #[test]
    fn base_string_matches_rfc_5849() {
        // The query `b5=%3D%253D&a3=a&c%40=&a2=r%20b`, decoded.
        let params: Vec<(String, String)> = [
            ("b5", "=%3D"),
            ("a3", "a"),
            ("c@", ""),
            ("a2", "r b"),
            ("oauth_consumer_key", "9djdj82h48djs9d2"),
            ("oauth_token", "kkk9d7dh3k39sjv7"),
            ("oauth_signature_method", "HMAC-SHA1"),
            ("oauth_timestamp", "137131201"),
            ("oauth_nonce", "7d8f3e4a"),
            ("c2", ""),
            ("a3", "2 q"),
        ]
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
        let base = base_string(
            "post",
            &base_uri("HTTP", "EXAMPLE.COM:80", "/request"),
            &params,
        );
        assert_eq!(
            base,
            "POST&http%3A%2F%2Fexample.com%2Frequest&a2%3Dr%2520b%26a3%3D2%2520q\
             %26a3%3Da%26b5%3D%253D%25253D%26c%2540%3D%26c2%3D%26oauth_consumer_\
             key%3D9djdj82h48djs9d2%26oauth_nonce%3D7d8f3e4a%26oauth_signature_m\
             ethod%3DHMAC-SHA1%26oauth_timestamp%3D137131201%26oauth_token%3Dkkk\
             9d7dh3k39sjv7"
        );
    }

    /// A signature computed by oauthlib 3.2 for
    /// `OAuth1Session("key", client_secret="secret")` on
    /// GET http://127.0.0.1:3000/api/v2/businesses/?limit=5 with the fixed nonce/timestamp.
    #[test]
    fn signs_like_oauthlib() {
        let query = vec![("limit".to_string(), "5".to_string())];
        let header = authorization_header(
            "GET",
            "http://127.0.0.1:3000/api/v2/businesses/",
            &query,
            "key",
            "secret",
            1_700_000_000,
            "123456789",
        );
        let parsed = SignedRequest::parse(Some(&header), &query).expect("parses");
        assert!(parsed.verify("GET", "http://127.0.0.1:3000/api/v2/businesses/", "secret"));
        assert!(!parsed.verify("GET", "http://127.0.0.1:3000/api/v2/businesses/", "wrong"));
        assert!(!parsed.verify("POST", "http://127.0.0.1:3000/api/v2/businesses/", "secret"));
    }

    #[test]
    fn rejects_other_methods_and_tokens() {
        let header = "OAuth oauth_consumer_key=\"k\", oauth_nonce=\"n\", oauth_timestamp=\"1\", \
                      oauth_signature_method=\"PLAINTEXT\", oauth_signature=\"x\"";
        assert!(
            matches!(SignedRequest::parse(Some(header), &[]), Err(ApiError::Unauthorized(m)) if m.contains("PLAINTEXT"))
        );
        assert!(SignedRequest::parse(Some("garbage"), &[]).is_err());
        assert!(SignedRequest::parse(None, &[]).is_err());
    }

    /// node-oauth sends `oauth_version="1.0A"`: accepted, signed as sent; any other version
    /// is still a 401.
    #[test]
    fn oauth_version_1_0a_is_accepted_and_signed_as_sent() {
        let url = "http://127.0.0.1:3000/api/v2/businesses/";
        let signed_with = |version: &str| {
            let params: Vec<(String, String)> = [
                ("oauth_consumer_key", "key"),
                ("oauth_nonce", "n1"),
                ("oauth_timestamp", "1700000000"),
                ("oauth_signature_method", "HMAC-SHA1"),
                ("oauth_version", version),
            ]
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
            let signature = sign("secret", &base_string("GET", url, &params));
            let header: Vec<String> = params
                .iter()
                .chain(std::iter::once(&("oauth_signature".to_string(), signature)))
                .map(|(n, v)| format!("{n}=\"{}\"", encode(v)))
                .collect();
            SignedRequest::parse(Some(&format!("OAuth {}", header.join(", "))), &[])
        };
        for version in ["1.0", "1.0A", "1.0a"] {
            let parsed = signed_with(version).unwrap_or_else(|e| panic!("{version}: {e:?}"));
            assert!(parsed.verify("GET", url, "secret"), "{version}");
            // The version is part of the base string: changing it breaks the signature.
            let mut altered = parsed.clone();
            for (name, value) in &mut altered.params {
                if name == "oauth_version" {
                    *value = if version == "1.0" { "1.0A" } else { "1.0" }.to_string();
                }
            }
            assert!(!altered.verify("GET", url, "secret"), "{version} altered");
        }
        for version in ["2.0", "1.0B", "1", "1.0 ", ""] {
            assert!(
                matches!(signed_with(version), Err(ApiError::Unauthorized(m)) if m == "unsupported oauth_version; use 1.0"),
                "{version:?} is refused"
            );
        }
    }

    /// RFC 5849 3.1: each protocol parameter at most once, `oauth_version` included (it used
    /// to be read with the duplicate silently accepted).
    #[test]
    fn duplicate_oauth_parameters_are_refused() {
        let header = authorization_header("GET", "http://h/p", &[], "k", "s", 1, "n");
        assert!(SignedRequest::parse(Some(&header), &[]).is_ok());
        for (name, value) in [
            ("oauth_version", "1.0"),
            ("oauth_nonce", "n"),
            ("oauth_token", ""),
            ("oauth_extra", "x"),
        ] {
            let mut doubled = header.clone();
            doubled.push_str(&format!(", {name}=\"{value}\""));
            if name == "oauth_token" || name == "oauth_extra" {
                doubled.push_str(&format!(", {name}=\"{value}\""));
            }
            let result = SignedRequest::parse(Some(&doubled), &[]);
            assert!(
                matches!(&result, Err(ApiError::Unauthorized(m)) if m == &format!("the request has more than one {name}")),
                "{name}: {result:?}"
            );
        }
        // One in the header and one in the query is a duplicate too.
        let query = vec![("oauth_version".to_string(), "1.0".to_string())];
        assert!(matches!(
            SignedRequest::parse(Some(&header), &query),
            Err(ApiError::Unauthorized(m)) if m.contains("more than one oauth_version")
        ));
    }
}
