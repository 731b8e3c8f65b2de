//! Request authentication (two-legged OAuth 1.0a) against the keys in the store: the
//! signature over the parameters the HTTP layer found in the request, the base URIs it may
//! have been made for, the nonce.

pub mod oauth1;
pub mod origin;

use crate::config::OriginSecret;
use crate::domain::account::Caller;
use origin::ORIGIN_VERIFY_HEADER;

/// How far a request's `oauth_timestamp` may be from our clock.
pub const TIMESTAMP_WINDOW_SECS: i64 = 300;

/// Stored keys have at most this many bytes (the stores' `create_key` refuses longer ones).
pub const MAX_CONSUMER_KEY_BYTES: usize = 512;

/// A request whose signature checked out; its nonce is still to be recorded.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub caller: Caller,
    pub key: String,
    pub nonce: String,
    /// Until when the nonce must be remembered: as long as the timestamp is acceptable.
    pub nonce_expires_at: i64,
}

/// The base URIs a request may have been signed against: the host it was sent to (`Host`,
/// with the default scheme), plus the configured public hosts (frontend host, custom
/// domain). When the request carries the origin-verify secret (it came through our
/// CloudFront), the host and scheme the client called come first, from `X-Forwarded-Host`
/// (set by the CloudFront Function) and `X-Forwarded-Proto`; without the secret, or with no
/// secret configured (`sitehost serve` by default), those headers are ignored.
pub fn candidate_base_uris(
    path: &str,
    header: impl Fn(&str) -> Option<String>,
    default_scheme: &str,
    public_hosts: &[String],
    origin_secret: Option<&OriginSecret>,
) -> Vec<String> {
    let first = |name: &str| {
        header(name)
            .and_then(|v| v.split(',').next().map(|s| s.trim().to_string()))
            .filter(|v| !v.is_empty())
    };
    let via_our_cdn = origin_secret.is_some_and(|secret| {
        origin::holds_secret(secret, header(ORIGIN_VERIFY_HEADER).as_deref())
    });
    let forwarded = |name: &str| if via_our_cdn { first(name) } else { None };
    let scheme = forwarded("x-forwarded-proto").unwrap_or_else(|| default_scheme.to_string());
    let mut hosts: Vec<String> = Vec::new();
    for host in [forwarded("x-forwarded-host"), first("host")]
        .into_iter()
        .flatten()
        .chain(public_hosts.iter().cloned())
    {
        if !hosts.contains(&host) {
            hosts.push(host);
        }
    }
    hosts
        .iter()
        .map(|host| oauth1::base_uri(&scheme, host, path))
        .collect()
}

/// Whether `timestamp` is within [`TIMESTAMP_WINDOW_SECS`] of `now`. Never overflows, so
/// `oauth_timestamp=-9223372036854775808` is a 401 in debug builds too.
pub fn timestamp_acceptable(timestamp: i64, now: i64) -> bool {
    timestamp.abs_diff(now) <= TIMESTAMP_WINDOW_SECS.unsigned_abs()
}

/// Until when a nonce must be remembered: as long as its timestamp is acceptable.
pub fn nonce_expiry(timestamp: i64) -> i64 {
    timestamp.saturating_add(TIMESTAMP_WINDOW_SECS + 1)
}

/// Checks a request's OAuth 1.0a signature against the key store. `params` are the signed
/// non-oauth parameters (the query's and a form body's, which the HTTP layer finds:
/// `api::params::signed`). The nonce is not recorded here ([`record_nonce`]): the API does
/// that as it admits the request.
pub async fn authenticate(
    keys: &dyn crate::store::KeyStore,
    now: i64,
    method: &str,
    base_uris: &[String],
    authorization: Option<&str>,
    params: &[(String, String)],
) -> crate::Result<Authenticated> {
    use crate::error::ApiError;
    let signed = oauth1::SignedRequest::parse(authorization, params)?;
    if !timestamp_acceptable(signed.timestamp, now) {
        return Err(ApiError::Unauthorized(format!(
            "oauth_timestamp is more than {TIMESTAMP_WINDOW_SECS} seconds from the server's clock"
        )));
    }
    // A longer key cannot exist: no lookup (whose item key would then be the digest form the
    // functions' IAM policies do not allow for keys).
    if signed.consumer_key.len() > MAX_CONSUMER_KEY_BYTES {
        return Err(ApiError::Unauthorized(
            "unknown or revoked consumer key".into(),
        ));
    }
    let key = keys
        .get_key(&signed.consumer_key)
        .await?
        .filter(|k| !k.revoked)
        .ok_or_else(|| ApiError::Unauthorized("unknown or revoked consumer key".into()))?;
    if !base_uris
        .iter()
        .any(|uri| signed.verify(method, uri, &key.secret))
    {
        return Err(ApiError::Unauthorized(invalid_signature(method, base_uris)));
    }
    Ok(Authenticated {
        caller: Caller {
            account_id: key.account_id,
            user_id: key.user_id,
            restrict_sub_id: key.partner_sub_id.clone(),
        },
        key: key.key,
        nonce: signed.nonce,
        nonce_expires_at: nonce_expiry(signed.timestamp),
    })
}

/// Whether a request can be signed at all, judged from its head before its form-encoded
/// body is read: with its oauth parameters in the `Authorization` header or the query,
/// they must be whole (RFC 5849 3.1) and fresh (the timestamp window), and the body is
/// read only then; without them, the body may carry them itself (RFC 5849 3.5.2). A head
/// that fails is a 401, its body never read.
pub fn head_may_be_signed(
    authorization: Option<&str>,
    query: &[(String, String)],
    now: i64,
) -> crate::Result<()> {
    let in_head = authorization.is_some_and(|h| !h.trim().is_empty())
        || query.iter().any(|(name, _)| name == "oauth_signature");
    if !in_head {
        return Ok(());
    }
    let signed = oauth1::SignedRequest::parse(authorization, query)?;
    if !timestamp_acceptable(signed.timestamp, now) {
        return Err(crate::error::ApiError::Unauthorized(format!(
            "oauth_timestamp is more than {TIMESTAMP_WINDOW_SECS} seconds from the server's clock"
        )));
    }
    Ok(())
}

/// The 401 of a signature that does not verify: it names the method and the URL(s) the
/// signature was checked against, what a partner compares with their own base string first.
/// Nothing secret: never the key's secret or the signature we expected.
fn invalid_signature(method: &str, base_uris: &[String]) -> String {
    let uris = match base_uris {
        [] => "no URL".to_string(),
        [one] => one.clone(),
        [first @ .., last] => format!("{} or {last}", first.join(", ")),
    };
    format!(
        "invalid signature: checked for {method} {uris} (the method and the URL without its \
         query, as the base string has them) with the query parameters, a form body's \
         parameters and the oauth parameters"
    )
}

/// Records the nonce of an authenticated request; a replay is a 401.
pub async fn record_nonce(
    keys: &dyn crate::store::KeyStore,
    auth: &Authenticated,
    now: i64,
) -> crate::Result<()> {
    if keys
        .remember_nonce(&auth.key, &auth.nonce, now, auth.nonce_expires_at)
        .await?
    {
        Ok(())
    } else {
        Err(crate::error::ApiError::Unauthorized(
            "this oauth_nonce was already used".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_714_564_805;

    #[test]
    fn an_invalid_signature_names_the_method_and_urls_it_was_checked_against() {
        let uris = [
            "http://a/api/v2/x/".to_string(),
            "https://b/api/v2/x/".to_string(),
        ];
        let said = invalid_signature("PUT", &uris);
        assert!(
            said.starts_with(
                "invalid signature: checked for PUT http://a/api/v2/x/ or https://b/api/v2/x/ "
            ),
            "{said}"
        );
        let said = invalid_signature("GET", &uris[..1]);
        assert!(said.contains("GET http://a/api/v2/x/ ("), "{said}");
    }

    fn headers<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(n, _)| n.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn timestamps_at_the_i64_extremes_are_out_of_the_window_without_overflow() {
        for timestamp in [i64::MIN, i64::MIN + 1, i64::MAX, NOW - 301, NOW + 301] {
            assert!(!timestamp_acceptable(timestamp, NOW), "{timestamp}");
        }
        for timestamp in [NOW - 300, NOW, NOW + 300] {
            assert!(timestamp_acceptable(timestamp, NOW), "{timestamp}");
        }
        // Clocks at the extremes too: still no overflow.
        assert!(!timestamp_acceptable(i64::MAX, i64::MIN));
        assert!(!timestamp_acceptable(i64::MIN, i64::MAX));
        assert!(timestamp_acceptable(i64::MAX, i64::MAX - 300));
        assert_eq!(nonce_expiry(NOW), NOW + TIMESTAMP_WINDOW_SECS + 1);
        assert_eq!(nonce_expiry(i64::MAX), i64::MAX);
        assert_eq!(nonce_expiry(i64::MAX - 100), i64::MAX);
    }

    const FRONTEND: &str = "https://d111111abcdef8.cloudfront.net/api/v2/businesses/";
    const API_HOST: &str = "abc123.execute-api.us-east-1.amazonaws.com";

    fn cdn_headers(verify: &str) -> Vec<(&'static str, String)> {
        vec![
            ("host", API_HOST.to_string()),
            ("x-forwarded-host", "d111111abcdef8.cloudfront.net".into()),
            ("x-forwarded-proto", "https".into()),
            ("x-origin-verify", verify.to_string()),
        ]
    }

    fn uris(pairs: &[(&str, String)], secret: Option<&OriginSecret>, scheme: &str) -> Vec<String> {
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(n, v)| (*n, v.as_str())).collect();
        candidate_base_uris(
            "/api/v2/businesses/",
            headers(&pairs),
            scheme,
            &["api.example.com".to_string()],
            secret,
        )
    }

    #[test]
    fn forwarded_headers_count_only_with_the_origin_secret() {
        let secret = OriginSecret::new("s3cr3t-0f-the-distribution").expect("secret");
        // Through our CloudFront: the called host first, then Host, then the public hosts.
        assert_eq!(
            uris(
                &cdn_headers("s3cr3t-0f-the-distribution"),
                Some(&secret),
                "http"
            ),
            vec![
                FRONTEND.to_string(),
                format!("https://{API_HOST}/api/v2/businesses/"),
                "https://api.example.com/api/v2/businesses/".to_string(),
            ]
        );
        let own_host_only = vec![
            format!("http://{API_HOST}/api/v2/businesses/"),
            "http://api.example.com/api/v2/businesses/".to_string(),
        ];
        // A wrong secret, a prefix of it, none at all, or no secret configured (`sitehost
        // serve`): X-Forwarded-Host and X-Forwarded-Proto are ignored, the default scheme
        // and the request's own Host (and the configured hosts) remain.
        for wrong in ["wrong", "s3cr3t-0f-the", "s3cr3t-0f-the-distribution!", ""] {
            assert_eq!(
                uris(&cdn_headers(wrong), Some(&secret), "http"),
                own_host_only,
                "{wrong:?}"
            );
        }
        let mut no_header = cdn_headers("");
        no_header.retain(|(n, _)| *n != "x-origin-verify");
        assert_eq!(uris(&no_header, Some(&secret), "http"), own_host_only);
        assert_eq!(
            uris(&cdn_headers("s3cr3t-0f-the-distribution"), None, "http"),
            own_host_only
        );
    }

    #[test]
    fn the_origin_secret_is_never_printed_and_blank_is_none() {
        assert!(OriginSecret::new("").is_none());
        assert!(OriginSecret::new("   ").is_none());
        let secret = OriginSecret::new("hunter2hunter2").expect("secret");
        assert!(!format!("{secret:?}").contains("hunter2"));
        assert!(origin::holds_secret(&secret, Some("hunter2hunter2")));
        assert!(!origin::holds_secret(&secret, Some("hunter2hunter3")));
        assert!(!origin::holds_secret(&secret, None));
    }

    #[test]
    fn during_a_rotation_both_secrets_are_held_then_only_the_new_one() {
        let rotating = OriginSecret::new("new-secret-0001")
            .expect("secret")
            .with_previous(Some("old-secret-0001"));
        for held in ["new-secret-0001", "old-secret-0001"] {
            assert!(origin::holds_secret(&rotating, Some(held)), "{held}");
            assert!(origin::require_secret(Some(&rotating), Some(held)).is_ok());
        }
        assert!(!origin::holds_secret(&rotating, Some("other-secret-01")));
        let rotated = OriginSecret::new("new-secret-0001")
            .expect("secret")
            .with_previous(Some("  "));
        assert!(origin::holds_secret(&rotated, Some("new-secret-0001")));
        assert!(!origin::holds_secret(&rotated, Some("old-secret-0001")));
        let refused = origin::require_secret(Some(&rotated), None).expect_err("403");
        assert_eq!(refused.status(), 403);
        assert!(
            origin::require_secret(None, None).is_ok(),
            "no secret, no check"
        );
    }
}
