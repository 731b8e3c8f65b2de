//! Request bodies: the one trait both adapters supply them through, and the 413 of a body
//! over its limit.

use std::sync::Arc;

use bytes::Bytes;

use crate::api::Operation;
use crate::config::{byte_size, larger_images_by_url, Config};
use crate::error::{ApiError, Result};

/// A request's body as an adapter supplies it: already in memory (Lambda), or still to be
/// read from the connection (`sitehost serve`).
#[async_trait::async_trait]
pub trait RequestBody: Send {
    /// The length when known before reading (the bytes held, or a `Content-Length`).
    fn known_len(&self) -> Option<u64>;
    /// The whole body; one longer than `limit` is refused (413) without being buffered.
    async fn read(self, limit: usize) -> Result<Bytes>;
}

#[async_trait::async_trait]
impl RequestBody for Bytes {
    fn known_len(&self) -> Option<u64> {
        Some(self.len() as u64)
    }

    async fn read(self, limit: usize) -> Result<Bytes> {
        if self.len() > limit {
            return Err(body_too_large(limit));
        }
        Ok(self)
    }
}

/// Told, through a request's extensions, once the app has admitted the request (signature,
/// nonce and budget checked) and before it reads a body that is not form-encoded:
/// `sitehost serve` may drop a connection whose request is not admitted yet when it needs
/// the room, never one whose request is (`server::connections`).
#[derive(Clone)]
pub struct OnAdmitted(pub Arc<dyn Fn() + Send + Sync>);

impl OnAdmitted {
    /// Tells the adapter, when it asked to be told.
    pub fn notify(extensions: &http::Extensions) {
        if let Some(hook) = extensions.get::<OnAdmitted>() {
            (hook.0)();
        }
    }
}

/// The 413 of a body over `limit` bytes, as an adapter reading it answers; the app
/// restates it for the route ([`body_too_large_for`]).
pub fn body_too_large(limit: usize) -> ApiError {
    ApiError::TooLarge(format!(
        "The request body is over the limit of {}.",
        byte_size(limit as u64)
    ))
}

/// The 413 of a body over the configured limit. On the upload route it says what a base64
/// upload may hold and that a larger image goes by `external_url`: a phone photo of a few
/// MB is over the body limit once base64-encoded.
pub fn body_too_large_for(config: &Config, operation: Operation) -> ApiError {
    if operation != Operation::ImageUpload {
        return body_too_large(config.max_body_bytes);
    }
    ApiError::TooLarge(format!(
        "The request body is over the limit of {}. A base64 upload may hold at most {} \
         once decoded; {}.",
        byte_size(config.max_body_bytes as u64),
        byte_size(config.upload_max_bytes as u64),
        larger_images_by_url(config.fetch.max_bytes)
    ))
}
