//! Staged uploads' sessions: one item each (its own partition: the id is random), removed
//! by TTL a day after its form expires (`expires_at` is the table's TTL attribute; TTL
//! deletes late, so a read checks the time itself). Using one is a conditional update.

use async_trait::async_trait;
use aws_sdk_dynamodb::types::{AttributeValue, ReturnConsumedCapacity};

use super::items::{self, get_n, get_s, n, opt_s, s};
use super::{conditional, log_capacity, write_token, DynamoStore, WRITTEN_BY};
use crate::error::{ApiError, Result};
use crate::store::{UploadSession, UploadSessionStore, UPLOAD_SESSION_KEPT_SECS};

/// The attributes of a session item besides its key.
const ACCOUNT_ID: &str = "account_id";
const SUB_ID: &str = "partner_sub_id";
const NAME: &str = "name";
const SIZE: &str = "size";
const FORM_EXPIRES_AT: &str = "form_expires_at";
const USED: &str = "used";
/// The table's TTL attribute: when the item may go.
const EXPIRES_AT: &str = "expires_at";

#[async_trait]
impl UploadSessionStore for DynamoStore {
    async fn create_upload_session(&self, session: &UploadSession, _now: i64) -> Result<()> {
        let mut item = items::upload_session_key(&session.upload_id);
        item.insert(ACCOUNT_ID.into(), n(session.account_id));
        if let Some(sub) = &session.partner_sub_id {
            item.insert(SUB_ID.into(), s(sub.as_str()));
        }
        item.insert(NAME.into(), s(session.name.as_str()));
        item.insert(SIZE.into(), n(session.size));
        item.insert(FORM_EXPIRES_AT.into(), n(session.expires_at));
        item.insert(USED.into(), AttributeValue::Bool(false));
        item.insert(
            EXPIRES_AT.into(),
            n(session.expires_at + UPLOAD_SESSION_KEPT_SECS),
        );
        // Named by this call, so a put DynamoDB applied but answered with an error, found
        // taken when the SDK sends it again, is known for this request's own.
        let token = write_token();
        item.insert(WRITTEN_BY.into(), s(&token));
        let result = self
            .client
            .put_item()
            .table_name(&self.table)
            .set_item(Some(item))
            .condition_expression("attribute_not_exists(pk)")
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match conditional("PutItem (upload session)", result)? {
            Some(out) => log_capacity("PutItem", out.consumed_capacity()),
            None => {
                let key = items::upload_session_key(&session.upload_id);
                if !self.written_by(key, &token).await? {
                    return Err(ApiError::internal(
                        "a new upload session's random id is taken",
                    ));
                }
            }
        }
        Ok(())
    }

    async fn get_upload_session(&self, upload_id: &str, now: i64) -> Result<Option<UploadSession>> {
        let Some(item) = self.get_item(items::upload_session_key(upload_id)).await? else {
            return Ok(None);
        };
        if get_n::<i64>(&item, EXPIRES_AT)? <= now {
            return Ok(None);
        }
        Ok(Some(UploadSession {
            upload_id: upload_id.to_string(),
            account_id: get_n(&item, ACCOUNT_ID)?,
            partner_sub_id: opt_s(&item, SUB_ID)?,
            name: get_s(&item, NAME)?,
            size: get_n(&item, SIZE)?,
            expires_at: get_n(&item, FORM_EXPIRES_AT)?,
            used: items::get_bool(&item, USED)?,
        }))
    }

    async fn use_upload_session(&self, upload_id: &str) -> Result<bool> {
        self.set_used(upload_id, true).await
    }

    async fn release_upload_session(&self, upload_id: &str) -> Result<()> {
        self.set_used(upload_id, false).await.map(|_| ())
    }
}

impl DynamoStore {
    /// Sets `used` to `to` if it was not already: whether this call changed it. The item
    /// records the call ([`WRITTEN_BY`]): an update DynamoDB applied but answered with an
    /// error fails its condition when the SDK sends it again, and is still this call's.
    async fn set_used(&self, upload_id: &str, to: bool) -> Result<bool> {
        let token = write_token();
        let result = self
            .client
            .update_item()
            .table_name(&self.table)
            .set_key(Some(items::upload_session_key(upload_id)))
            .update_expression("SET #u = :to, #w = :token")
            .expression_attribute_names("#w", WRITTEN_BY)
            .expression_attribute_values(":token", s(&token))
            .condition_expression("attribute_exists(pk) AND #u = :from")
            .expression_attribute_names("#u", USED)
            .expression_attribute_values(":to", AttributeValue::Bool(to))
            .expression_attribute_values(":from", AttributeValue::Bool(!to))
            .return_consumed_capacity(ReturnConsumedCapacity::Total)
            .send()
            .await;
        match conditional("UpdateItem (upload session)", result)? {
            Some(out) => {
                log_capacity("UpdateItem", out.consumed_capacity());
                Ok(true)
            }
            None => {
                self.written_by(items::upload_session_key(upload_id), &token)
                    .await
            }
        }
    }
}
