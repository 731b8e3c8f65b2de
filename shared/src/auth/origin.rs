//! The origin-verify secret: proof that a request came through our CloudFront distribution.

use crate::config::OriginSecret;

/// The header CloudFront adds to every request it sends to the API origin (an origin custom
/// header of `template.yaml`), holding the origin-verify secret.
pub const ORIGIN_VERIFY_HEADER: &str = "x-origin-verify";

/// Whether a request's origin-verify header holds the secret, compared in constant time
/// (only a length difference returns early; the generated secret's length is public).
pub fn holds_secret(secret: &OriginSecret, presented: Option<&str>) -> bool {
    use subtle::ConstantTimeEq;
    presented.is_some_and(|p| bool::from(p.trim().as_bytes().ct_eq(secret.expose().as_bytes())))
}
