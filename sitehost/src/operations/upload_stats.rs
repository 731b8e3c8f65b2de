//! What an upload's stages took, noted as they run and read by the request log line: a
//! task-local scoped around each request, so no operation signature carries it.

use std::cell::RefCell;
use std::future::Future;
use std::time::Duration;

/// What an upload's stages took; `None` for a stage it did not reach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UploadStats {
    /// The image file's size: fetched, or decoded from base64.
    pub bytes: Option<u64>,
    /// Fetching `external_url`.
    pub fetch: Option<Duration>,
    /// Decoding the base64 `upload.file`.
    pub base64: Option<Duration>,
    /// The whole pipeline (wall time of its blocking task): decode, resize, encode.
    pub pipeline: Option<Duration>,
    pub decode: Option<Duration>,
    pub resize: Option<Duration>,
    pub encode: Option<Duration>,
    /// Writing the original and its variants to the file store (concurrently).
    pub store: Option<Duration>,
    /// Writing the image record.
    pub record: Option<Duration>,
}

tokio::task_local! {
    static UPLOAD: RefCell<UploadStats>;
}

/// Runs a request's work, collecting what its upload stages note with [`record_upload`].
pub async fn collecting_upload_stats<F: Future>(work: F) -> (F::Output, UploadStats) {
    UPLOAD
        .scope(RefCell::new(UploadStats::default()), async {
            let output = work.await;
            (output, UPLOAD.with(|stats| *stats.borrow()))
        })
        .await
}

/// Notes an upload stage of the current request (nothing outside
/// [`collecting_upload_stats`], e.g. a benchmark calling the upload directly).
pub fn record_upload(note: impl FnOnce(&mut UploadStats)) {
    let _ = UPLOAD.try_with(|stats| note(&mut stats.borrow_mut()));
}
