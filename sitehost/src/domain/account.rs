//! Accounts (private labels), their API keys, and the caller a key makes of a request.

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
