//! Accounts, API keys, and request authentication (two-legged OAuth 1.0a).

pub mod oauth1;

/// A private label. Everything its keys create belongs to it.
#[derive(Debug, Clone, PartialEq)]
pub struct Account {
    pub id: i64,
    pub name: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiKey {
    pub key: String,
    pub secret: String,
    pub account_id: i64,
    pub user_id: i64,
    /// When set, the key sees and creates only businesses with this sub id.
    pub partner_sub_id: Option<String>,
    pub revoked: bool,
    pub created: i64,
}

/// A key to create: the store allocates `user_id` when it is `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewKey {
    pub key: String,
    pub secret: String,
    pub account_id: i64,
    pub user_id: Option<i64>,
    pub partner_sub_id: Option<String>,
    pub created: i64,
}

impl NewKey {
    /// A fresh random key pair for an account.
    pub fn generate(
        account_id: i64,
        user_id: Option<i64>,
        partner_sub_id: Option<String>,
        now: i64,
    ) -> Self {
        NewKey {
            key: random_token(20),
            secret: random_token(40),
            account_id,
            user_id,
            partner_sub_id,
            created: now,
        }
    }
}

fn random_token(len: usize) -> String {
    use rand::distr::{Alphanumeric, SampleString};
    Alphanumeric.sample_string(&mut rand::rng(), len)
}

/// Who is calling, as far as the API cares: whose data it may touch and what it imposes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Caller {
    pub account_id: i64,
    pub user_id: i64,
    /// A sub-restricted key sees and creates only businesses with this sub id.
    pub restrict_sub_id: Option<String>,
}

/// How far a request's `oauth_timestamp` may be from our clock.
pub const TIMESTAMP_WINDOW_SECS: i64 = 300;

/// A request whose signature checked out; its nonce is still to be recorded.
#[derive(Debug, Clone)]
pub struct Authenticated {
    pub caller: Caller,
    pub key: String,
    pub nonce: String,
    /// Until when the nonce must be remembered: as long as the timestamp is acceptable.
    pub nonce_expires_at: i64,
}

/// The base URIs a request may have been signed against: the scheme the client used
/// (`X-Forwarded-Proto` behind API Gateway and CloudFront) with the host it called
/// (`X-Forwarded-Host`, set by the CloudFront function, or `Host`), plus the configured
/// public hosts (frontend host, custom domain).
pub fn candidate_base_uris(
    path: &str,
    header: impl Fn(&str) -> Option<String>,
    default_scheme: &str,
    public_hosts: &[String],
) -> Vec<String> {
    let first = |name: &str| {
        header(name)
            .and_then(|v| v.split(',').next().map(|s| s.trim().to_string()))
            .filter(|v| !v.is_empty())
    };
    let scheme = first("x-forwarded-proto").unwrap_or_else(|| default_scheme.to_string());
    let mut hosts: Vec<String> = Vec::new();
    for host in [first("x-forwarded-host"), first("host")]
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

/// Checks a request's OAuth 1.0a signature against the key store. The nonce is not
/// recorded here: the caller does that before a write, or alongside a read.
pub async fn authenticate(
    keys: &dyn crate::store::KeyStore,
    now: i64,
    method: &str,
    base_uris: &[String],
    authorization: Option<&str>,
    query: &[(String, String)],
) -> crate::Result<Authenticated> {
    use crate::error::ApiError;
    let signed = oauth1::SignedRequest::parse(authorization, query)?;
    if (signed.timestamp - now).abs() > TIMESTAMP_WINDOW_SECS {
        return Err(ApiError::Unauthorized(format!(
            "oauth_timestamp is more than {TIMESTAMP_WINDOW_SECS} seconds from the server's clock"
        )));
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
        return Err(ApiError::Unauthorized("invalid signature".into()));
    }
    Ok(Authenticated {
        caller: Caller {
            account_id: key.account_id,
            user_id: key.user_id,
            restrict_sub_id: key.partner_sub_id.clone(),
        },
        key: key.key,
        nonce: signed.nonce,
        nonce_expires_at: signed.timestamp + TIMESTAMP_WINDOW_SECS + 1,
    })
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
