//! What the API does, one function per operation: from a caller and its parsed input to
//! a reply, through the store traits. Below the HTTP layer (`api`), above `store` and the
//! domain modules (`account`, `business`, `image`).

pub mod business;
pub mod images;
pub mod listing;
#[cfg(feature = "images")]
pub mod upload;
pub mod upload_stats;

use std::sync::Arc;

use http::StatusCode;
use serde_json::Value;

use crate::clock::Clock;
use crate::config::Config;
use crate::store::files::SharedFiles;
use crate::store::SharedStore;

/// What the operations work with, built once per cold start: the stores, the clock, the
/// configuration and (in a build with uploads) the URL fetcher.
pub struct Services {
    pub store: SharedStore,
    pub files: SharedFiles,
    #[cfg(feature = "images")]
    pub fetcher: crate::image::fetch::Fetcher,
    pub clock: Arc<dyn Clock>,
    pub config: Config,
}

/// An operation's answer: a status, a JSON body, and the new resource's URI for a create.
/// The HTTP layer turns it into a response.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub status: StatusCode,
    pub body: Value,
    pub location: Option<String>,
}

impl Reply {
    pub fn ok(body: Value) -> Self {
        Reply {
            status: StatusCode::OK,
            body,
            location: None,
        }
    }

    pub fn created(body: Value, location: String) -> Self {
        Reply {
            status: StatusCode::CREATED,
            body,
            location: Some(location),
        }
    }
}
