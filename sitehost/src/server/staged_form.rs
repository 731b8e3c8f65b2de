//! `POST /staging/<upload_id>`: the form of a staged upload when `sitehost serve` keeps the
//! files (the embedded store's `staged_upload_form` points here), in the place of S3's
//! presigned POST. It takes what S3 takes: a `multipart/form-data` body with the form's
//! fields, `key` among them, and then the file as `file`, of 1 byte to the size declared,
//! before the session expires, and answers as S3 does by default: 204, no body. The token
//! in the path works once: a second post, a used or expired session is refused, and so is
//! a file over its declared size, before more of it than that is read.
//!
//! What a form can cost is bounded before its body is read: behind the origin check as the
//! API is; one post per session at a time (a claim taken atomically and given back when
//! the post fails), at most [`MAX_FORMS`] being received at once (then 503); the file is
//! streamed to a temporary file under the data directory, never held whole in memory, at
//! the pace `server::paced_body` asks, and linked into place once whole.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use http::header::{HeaderValue, ACCESS_CONTROL_ALLOW_ORIGIN, CONNECTION, CONTENT_TYPE};
use http::request::Parts;
use http::{Method, Response, StatusCode};
use hyper::body::Incoming;

use bytes::Bytes;

use crate::api::{error_response, header, App};
use crate::auth::origin::{require_secret, ORIGIN_VERIFY_HEADER};
use crate::error::{ApiError, Result};
use crate::operations::images::staged::{is_upload_id, staged_path, CREATE_GRACE_SECS, FORM_SECS};
use crate::server::connections::Request as Underway;
use crate::server::paced_body::{PaceError, PacedBody};
use crate::store::disk_files::{IncomingFile, LocalFiles};
use crate::store::files::{FileStore, STAGING_PREFIX};

/// Room for the form's other fields and the multipart framing around the file.
const FIELDS_BYTES: u64 = 64 * 1024;

/// The most forms received at once (and at most an eighth of the connections): each
/// holds a connection that is not evicted, and the rest are kept for signed requests.
pub const MAX_FORMS: usize = 16;

/// How long a staged file is kept: past its form's expiry and the grace a create has after
/// it (`staged::FORM_SECS` + `staged::CREATE_GRACE_SECS` from its session's start, which
/// came before the post), no create can use it. The staging bucket's rule is a day.
pub const STAGED_FILE_KEPT_SECS: i64 = FORM_SECS + CREATE_GRACE_SECS;

/// How often `sitehost serve` sweeps the staged files past [`STAGED_FILE_KEPT_SECS`].
pub const SWEEP_EVERY: Duration = Duration::from_secs(300);

/// Removes the staged files past [`STAGED_FILE_KEPT_SECS`] and what a crash left of files
/// being received; logs how many.
pub async fn sweep(files: &LocalFiles, now: i64) -> Result<(usize, usize)> {
    let files = files.clone();
    let swept = tokio::task::spawn_blocking(move || files.sweep_staged(now, STAGED_FILE_KEPT_SECS))
        .await
        .map_err(ApiError::internal)??;
    if swept != (0, 0) {
        tracing::info!(
            staged = swept.0,
            incoming = swept.1,
            "expired staged files removed"
        );
    }
    Ok(swept)
}

/// Sweeps every [`SWEEP_EVERY`], the first time at once (`sitehost serve`'s own task).
pub async fn sweep_forever(files: LocalFiles, clock: Arc<dyn crate::clock::Clock>) {
    let mut every = tokio::time::interval(SWEEP_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        if let Err(err) = sweep(&files, clock.now()).await {
            tracing::warn!(error = %crate::error::error_chain(&err), "staged files could not be swept");
        }
    }
}

/// The forms at most `max_connections` allow at once.
pub fn max_forms(max_connections: usize) -> usize {
    (max_connections / 8).clamp(1, MAX_FORMS)
}

/// The staged forms being received by this server.
pub struct StagedForms {
    files: Option<LocalFiles>,
    cap: usize,
    /// The upload ids whose form is being received now.
    claims: Arc<Mutex<HashSet<String>>>,
}

/// A session's form being received: the claim is given back when it is dropped.
struct Claim {
    claims: Arc<Mutex<HashSet<String>>>,
    upload_id: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        lock(&self.claims).remove(&self.upload_id);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl StagedForms {
    /// Forms whose files go to `files` (none: no form is taken), at most
    /// [`max_forms`]`(max_connections)` at once.
    pub fn new(files: Option<LocalFiles>, max_connections: usize) -> Self {
        StagedForms {
            files,
            cap: max_forms(max_connections),
            claims: Arc::default(),
        }
    }

    /// Claims `upload_id`'s form: refused while another post of it is being received, or
    /// when as many forms as allowed are.
    fn claim(&self, upload_id: &str) -> Result<Claim> {
        let mut claims = lock(&self.claims);
        if claims.contains(upload_id) {
            return Err(ApiError::StateConflict(
                "A file is being posted for this staged upload already: the form takes one.".into(),
            ));
        }
        if claims.len() >= self.cap {
            return Err(ApiError::Unavailable {
                message: "The server is receiving as many staged uploads as it allows; retry."
                    .into(),
                retry_after_secs: 5,
            });
        }
        claims.insert(upload_id.to_string());
        Ok(Claim {
            claims: Arc::clone(&self.claims),
            upload_id: upload_id.to_string(),
        })
    }

    /// The answer to a request for a staged upload's form, or the body back for any other
    /// request.
    pub async fn receive(
        &self,
        app: &App,
        parts: &Parts,
        body: Incoming,
        timeout: Duration,
        underway: &Underway,
    ) -> std::result::Result<Response<Bytes>, Incoming> {
        let Some(upload_id) = parts
            .uri
            .path()
            .strip_prefix('/')
            .and_then(|p| p.strip_prefix(STAGING_PREFIX))
        else {
            return Err(body);
        };
        let result = if parts.method != Method::POST {
            Err(ApiError::MethodNotAllowed(parts.method.to_string()))
        } else {
            let accepting = self.accept(app, upload_id, parts, body, timeout, underway);
            match tokio::time::timeout(timeout, accepting).await {
                Ok(result) => result,
                Err(_) => Err(PaceError::Deadline(timeout).to_api("The file")),
            }
        };
        let mut response = match result {
            Ok(()) => {
                let mut response = Response::new(Bytes::new());
                *response.status_mut() = StatusCode::NO_CONTENT;
                response
            }
            Err(err) => {
                // The unread rest of the body makes the connection unusable.
                let mut response = error_response(&err);
                response
                    .headers_mut()
                    .insert(CONNECTION, HeaderValue::from_static("close"));
                response
            }
        };
        // As the deployed staging bucket's CORS rule: a page on any origin may post the form
        // with `fetch` and read the answer.
        response
            .headers_mut()
            .insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
        Ok(response)
    }

    /// Checks the session, claims it, streams the form's file to disk and stores it.
    async fn accept(
        &self,
        app: &App,
        upload_id: &str,
        parts: &Parts,
        body: Incoming,
        timeout: Duration,
        underway: &Underway,
    ) -> Result<()> {
        let services = &app.services;
        // As every request to the API: deployed, the form is S3's, reached only directly.
        require_secret(
            services.config.origin_verify.as_ref(),
            header(&parts.headers, ORIGIN_VERIFY_HEADER),
        )?;
        let no_such = || ApiError::NotFound("There is no staged upload at this URL.".into());
        if !is_upload_id(upload_id) {
            return Err(no_such());
        }
        let files = self.files.as_ref().ok_or_else(no_such)?;
        let now = services.clock.now();
        let session = services
            .store
            .get_upload_session(upload_id, now)
            .await?
            .ok_or_else(no_such)?;
        if session.used {
            return Err(ApiError::StateConflict(
                "This staged upload was used already; start another.".into(),
            ));
        }
        if now >= session.expires_at {
            return Err(ApiError::Forbidden(
                "This staged upload's form has expired; start another.".into(),
            ));
        }
        let path = staged_path(upload_id);
        let posted_already = || {
            ApiError::StateConflict(
                "A file was posted for this staged upload already: the form takes one.".into(),
            )
        };
        if files.exists(&path).await? {
            return Err(posted_already());
        }
        let content_type = header(&parts.headers, CONTENT_TYPE.as_str()).unwrap_or_default();
        let boundary = multer::parse_boundary(content_type).map_err(|_| {
            ApiError::invalid("Post the form as multipart/form-data: its fields, then the file.")
        })?;
        let _claim = self.claim(upload_id)?;
        // A post that ended between the check above and the claim.
        if files.exists(&path).await? {
            return Err(posted_already());
        }
        // Claimed, and within the cap: the connection is kept until the answer.
        underway.admitted();
        let mut incoming = files.incoming().await?;
        let body = PacedBody::new(body, timeout);
        read_file_field(body, boundary, session.size, &path, &mut incoming).await?;
        // The pipeline reads the type from the bytes; the name keeps no extension.
        files.store_incoming(&path, incoming).await
    }
}

/// Writes the form's file, of 1 byte to `size`, to `incoming`, after fields of which only
/// `key` means something: it must come first and be `path`, as S3's policy requires. No
/// more of the body than that is read.
async fn read_file_field(
    body: PacedBody,
    boundary: String,
    size: u64,
    path: &str,
    incoming: &mut IncomingFile,
) -> Result<()> {
    let constraints = multer::Constraints::new().size_limit(
        multer::SizeLimit::new()
            .whole_stream(size + FIELDS_BYTES)
            .for_field("file", size),
    );
    let mut form = multer::Multipart::with_constraints(body, boundary, constraints);
    let too_large = || {
        ApiError::TooLarge(format!(
            "The file is over the size declared for this upload, {}.",
            crate::config::byte_size(size)
        ))
    };
    let unreadable = |err: multer::Error| match err {
        multer::Error::FieldSizeExceeded { .. } | multer::Error::StreamSizeExceeded { .. } => {
            too_large()
        }
        multer::Error::StreamReadFailed(cause) => match cause.downcast_ref::<PaceError>() {
            Some(late @ (PaceError::Deadline(_) | PaceError::TooSlow)) => late.to_api("The file"),
            _ => ApiError::invalid("The form could not be read."),
        },
        other => ApiError::invalid(format!("The form could not be read: {other}.")),
    };
    let mut keyed = false;
    while let Some(mut field) = form.next_field().await.map_err(unreadable)? {
        match field.name() {
            Some("file") if !keyed => {
                return Err(ApiError::field(
                    "key",
                    "The form has no key field before the file: send the fields the staged \
                     upload gave, key among them, then the file (S3's policy requires it).",
                ));
            }
            Some("file") => {
                let mut written = 0u64;
                while let Some(chunk) = field.chunk().await.map_err(unreadable)? {
                    written += chunk.len() as u64;
                    incoming.write(&chunk).await?;
                }
                if written == 0 {
                    return Err(ApiError::field("file", "The file is empty."));
                }
                return incoming.finish().await;
            }
            Some("key") => {
                let key = field.text().await.map_err(unreadable)?;
                if key != path {
                    return Err(ApiError::field(
                        "key",
                        "The key field must be the form's own, as the staged upload gave it.",
                    ));
                }
                keyed = true;
            }
            // Fields S3 forms carry (the policy and its signature) mean nothing here.
            _ => {}
        }
    }
    Err(ApiError::field(
        "file",
        "The form has no file: send it last, as the field `file`.",
    ))
}
