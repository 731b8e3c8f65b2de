//! The origin-verify secret: proof that a request came through our CloudFront distribution.

use crate::config::OriginSecret;
use crate::error::{ApiError, Result};

/// The header CloudFront adds to every request it sends to the API origin (an origin custom
/// header of `template.yaml`), holding the origin-verify secret.
pub const ORIGIN_VERIFY_HEADER: &str = "x-origin-verify";

/// The 403's message for a request that did not come through the distribution.
pub const NOT_THROUGH_THE_FRONTEND: &str = "call the API through its frontend host (the \
    CloudFront distribution's domain or the custom domain), not the API Gateway endpoint";

/// Whether a request's origin-verify header holds an accepted secret (the current one, or
/// the previous one during a rotation), compared in constant time: every accepted value is
/// compared, whichever matches, and only a length difference returns early (the generated
/// secret's length is public).
pub fn holds_secret(secret: &OriginSecret, presented: Option<&str>) -> bool {
    use subtle::{Choice, ConstantTimeEq};
    let Some(presented) = presented else {
        return false;
    };
    let presented = presented.trim().as_bytes();
    secret
        .accepted()
        .fold(Choice::from(0), |held, accepted| {
            held | presented.ct_eq(accepted.as_bytes())
        })
        .into()
}

/// With a secret configured, a request that does not hold it is refused (403) before it
/// reaches the store: calls around the edge (the `execute-api` URL) would bypass the WAF and
/// the CloudFront function and spend the throttles partners share. Without one (`sitehost
/// serve`), every request passes.
pub fn require_secret(secret: Option<&OriginSecret>, presented: Option<&str>) -> Result<()> {
    match secret {
        Some(secret) if !holds_secret(secret, presented) => {
            Err(ApiError::Forbidden(NOT_THROUGH_THE_FRONTEND.into()))
        }
        _ => Ok(()),
    }
}
