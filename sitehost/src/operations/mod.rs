//! What the API does, one function per operation: from a caller and its parsed input to
//! a reply, through the store traits. Below the HTTP layer (`api`), above `store` and the
//! domain modules (`account`, `business`, `image_record`). Each resource's HTTP shape (its
//! list's query parameters, its JSON, its paths) is here, in its module (`business`,
//! `images`); the list envelope and paging are `listing`.

pub mod business;
pub mod images;
pub mod list_rules;
pub mod listing;
pub mod locations;
pub mod posts;
pub mod siblings;
pub mod sites;
pub mod upload_stats;

use std::sync::Arc;

use http::StatusCode;
use serde_json::Value;

use crate::clock::Clock;
use crate::config::Config;
use crate::domain::account::Caller;
use crate::error::Result;
use crate::store::files::SharedFiles;
use crate::store::SharedStore;

/// What the operations work with, built once per cold start: the stores, the clock, the
/// configuration and, in a build with them, image uploads.
pub struct Services {
    pub store: SharedStore,
    /// Where upload files go; `None` when this deployment has no file store.
    pub files: Option<SharedFiles>,
    /// `None` in a build without the `images` feature or without a file store.
    pub uploads: Option<Arc<dyn ImageUploads>>,
    pub clock: Arc<dyn Clock>,
    pub config: Config,
}

/// `POST /api/v2/images/`, implemented by `upload::Uploads` (the `images` feature): the
/// one door through which the rest of the crate reaches the image pipeline.
#[async_trait::async_trait]
pub trait ImageUploads: Send + Sync {
    async fn upload(&self, services: &Services, caller: &Caller, body: &[u8]) -> Result<Reply>;
}

/// What a write pays, before it writes, for what it stores (a business's services and
/// locations, a post's title and content): its key's request budget once more per started
/// [`crate::config::STORED_BYTES_PER_REQUEST`] bytes past the first (the HTTP layer, which
/// admitted the request, implements it).
#[async_trait::async_trait]
pub trait WriteBudget: Send + Sync {
    /// Pays for storing `bytes`, or refuses the write (429, saying when to retry).
    async fn pay_for_stored(&self, bytes: u64) -> Result<()>;
    /// Pays for a write that may use `units` DynamoDB write units: once more per started
    /// [`crate::config::WRITE_UNITS_PER_REQUEST`] past the first, or refuses it (429).
    async fn pay_for_write_units(&self, units: u64) -> Result<()>;
}

/// An operation's answer: a status, a JSON body (none for 204), and the new resource's URI
/// for a create. The HTTP layer turns it into a response.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    /// The new resource's URI, answered as the `Location` header.
    pub created_uri: Option<String>,
}

impl Reply {
    pub fn ok(body: Value) -> Self {
        Reply {
            status: StatusCode::OK,
            body,
            created_uri: None,
        }
    }

    /// 204: done, nothing to say (a delete). The HTTP layer sends no body.
    pub fn no_content() -> Self {
        Reply {
            status: StatusCode::NO_CONTENT,
            body: Value::Null,
            created_uri: None,
        }
    }

    pub fn created(body: Value, created_uri: String) -> Self {
        Reply {
            status: StatusCode::CREATED,
            body,
            created_uri: Some(created_uri),
        }
    }
}
