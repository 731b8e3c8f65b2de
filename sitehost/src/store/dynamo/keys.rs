//! Accounts, API keys and nonces.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};

use super::items::{self, get_s, n, s, Seq, KEYS_PK, MAX_KEY_BYTES, PK, SK};
use super::records;
use super::transactions::TxOutcome;
use super::{busy, conditional, log_capacity, write_token, DynamoStore, MAX_ATTEMPTS, WRITTEN_BY};
use crate::domain::account::{Account, ApiKey, NewKey};
use crate::error::{ApiError, Result};
use crate::store::KeyStore;

#[async_trait]
impl KeyStore for DynamoStore {
    async fn ensure_account(&self, name: &str) -> Result<Account> {
        if let Some(item) = self.get_item(items::account_key(name)).await? {
            return records::account_from(&item);
        }
        let account = Account {
            id: self.next_id(Seq::Account).await?,
            name: name.to_string(),
        };
        let put = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(records::account_item(&account)))
            .condition_expression("attribute_not_exists(#pk)")
            .expression_attribute_names("#pk", PK)
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match conditional("PutItem (account)", put)? {
            Some(out) => {
                log_capacity("PutItem", out.consumed_capacity());
                Ok(account)
            }
            None => {
                // Another process created it between our read and write: use theirs (the
                // id we took stays unused).
                let item = self
                    .get_item(items::account_key(name))
                    .await?
                    .ok_or_else(|| ApiError::internal("account vanished after a create race"))?;
                records::account_from(&item)
            }
        }
    }

    async fn create_key(&self, new: NewKey) -> Result<ApiKey> {
        // The key is also the sort key of its listing entry: non-empty, at most 1 KB. Keys
        // are generated (`NewKey::generate`, 20 characters), so another size is our bug.
        if new.key.is_empty() || new.key.len() > MAX_KEY_BYTES {
            return Err(ApiError::internal(format!(
                "a key must have 1 to {MAX_KEY_BYTES} bytes, this one has {}",
                new.key.len()
            )));
        }
        let user_id = match new.user_id {
            Some(id) => id,
            None => self.next_id(Seq::User).await?,
        };
        let key = ApiKey {
            key: new.key,
            secret: new.secret,
            account_id: new.account_id,
            user_id,
            partner_sub_id: new.partner_sub_id,
            revoked: false,
            created: new.created,
        };
        let actions = || {
            Ok(vec![
                self.put_new(records::api_key_item(&key))?,
                self.put(items::key_listing_key(&key.key))?,
            ])
        };
        match self.transact("create key", MAX_ATTEMPTS, actions).await? {
            TxOutcome::Committed => Ok(key),
            TxOutcome::Busy(_) => Err(busy("create key")),
            TxOutcome::Cancelled(codes) if TxOutcome::failed_condition(&codes, 0) => {
                Err(ApiError::Conflict { field: "key" })
            }
            TxOutcome::Cancelled(codes) => Err(ApiError::internal(format!(
                "dynamodb create key cancelled: {codes:?}"
            ))),
        }
    }

    async fn get_key(&self, key: &str) -> Result<Option<ApiKey>> {
        match self.get_item(items::api_key_key(key)).await? {
            Some(item) => records::api_key_from(&item).map(Some),
            None => Ok(None),
        }
    }

    /// Every key, ordered by creation time then key (as the SQLite store lists them).
    async fn list_keys(&self) -> Result<Vec<ApiKey>> {
        let names = self
            .whole_partition(KEYS_PK, SK, "Query (keys)")
            .await?
            .iter()
            .map(|entry| get_s(entry, SK))
            .collect::<Result<Vec<_>>>()?;
        let keys = names.iter().map(|k| items::api_key_key(k)).collect();
        let mut listed = self
            .batch_get(keys)
            .await?
            .iter()
            .map(records::api_key_from)
            .collect::<Result<Vec<_>>>()?;
        listed.sort_by(|a, b| (a.created, &a.key).cmp(&(b.created, &b.key)));
        Ok(listed)
    }

    async fn revoke_key(&self, key: &str) -> Result<bool> {
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::api_key_key(key)))
            .update_expression("SET #r = :t")
            .condition_expression("attribute_exists(#pk)")
            .expression_attribute_names("#r", "revoked")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_values(":t", AttributeValue::Bool(true))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        let revoked = conditional("UpdateItem (revoke)", result)?;
        if let Some(out) = &revoked {
            log_capacity("UpdateItem", out.consumed_capacity());
        }
        Ok(revoked.is_some())
    }

    /// One conditional `PutItem`: it writes when the nonce is new or its previous use has
    /// expired (TTL deletes expired items only eventually, so the condition checks the time).
    /// The item names this call ([`WRITTEN_BY`]): when DynamoDB applied the put but failed
    /// to say so (a 500, a lost answer) and the SDK's retry finds the nonce taken, a
    /// consistent read tells that it was this request's own, not a replay.
    async fn remember_nonce(
        &self,
        key: &str,
        nonce: &str,
        now: i64,
        expires_at: i64,
    ) -> Result<bool> {
        let token = write_token();
        let mut item = items::nonce_key(key, nonce);
        item.insert("expires_at".into(), n(expires_at));
        item.insert(WRITTEN_BY.into(), s(&token));
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(#pk) OR #e < :now")
            .expression_attribute_names("#pk", PK)
            .expression_attribute_names("#e", "expires_at")
            .expression_attribute_values(":now", n(now))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match conditional("PutItem (nonce)", result)? {
            Some(out) => {
                log_capacity("PutItem", out.consumed_capacity());
                Ok(true)
            }
            None => self.written_by(items::nonce_key(key, nonce), &token).await,
        }
    }
}
