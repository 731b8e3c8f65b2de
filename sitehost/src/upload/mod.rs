//! The image upload operation, built with the `images` feature (the `image-upload`
//! function and the `sitehost` command), with the orphan sweeper and the file restore of
//! `sitehost files`. It drives the URL fetcher (`crate::fetch`) and the image pipeline
//! (`crate::image_pipeline`). The rest of the crate reaches it through one trait object,
//! `operations::ImageUploads`, created in `deployment`.
//!
//! `POST /api/v2/images/`: an image by URL or as base64, stored as the original plus its
//! variants, then recorded. [`upload`] reads as its steps: parse the body (`request`), check
//! the business, get the bytes (`content`: fetched or decoded), process them in a pipeline
//! slot, name the files after a newly allocated record id (`naming`), write the files and
//! then the record (`store_writes`). Each stage's time goes to the request log line, failed
//! stages included.
//!
//! Files are written before the record and removed again if anything fails, so a failed
//! upload leaves nothing and a record never points at a missing file. The files are named
//! after the record's id (allocated first), so when the record write ends with an unknown
//! outcome the id is settled (`ImageStore::settle_image`) before any file is removed, and
//! `sitehost files sweep` can tell an orphan from a live file.

use std::time::Instant;

use bytes::Bytes;

use crate::config::{Config, ImageLimits};
use crate::domain::account::Caller;
use crate::domain::business::Business;
use crate::domain::image_record::{Image, NewImage};
use crate::domain::site::Site;
use crate::error::{ApiError, Result};
use crate::fetch::Fetcher;
use crate::image_pipeline::{self, Processed};
use crate::operations::images::{staged, view};
use crate::operations::upload_stats::record_upload;
use crate::operations::{ImageUploads, Reply, Services};
use crate::store::files::SharedFiles;
use crate::store::UploadSession;
use naming::{file_stem, original_path};
use request::{Source, UploadRequest};
use slots::UploadSlots;

mod content;
pub mod naming;
mod request;
pub mod restore;
pub mod slots;
mod store_writes;
pub mod sweep;

/// The upload operation with what it needs beyond [`Services`]: built once per cold start.
pub struct Uploads {
    fetcher: Fetcher,
    files: SharedFiles,
    slots: UploadSlots,
}

impl Uploads {
    pub fn new(config: &Config, files: SharedFiles) -> Result<Self> {
        Ok(Uploads {
            fetcher: Fetcher::new(config.fetch.clone())?,
            files,
            slots: UploadSlots::new(&config.server),
        })
    }
}

#[async_trait::async_trait]
impl ImageUploads for Uploads {
    async fn upload(&self, services: &Services, caller: &Caller, body: &[u8]) -> Result<Reply> {
        let image = upload(self, services, caller, body).await?;
        Ok(Reply::created(
            view::image(&image),
            view::resource_uri(image.id),
        ))
    }
}

/// The upload operation, step by step.
async fn upload(
    uploads: &Uploads,
    services: &Services,
    caller: &Caller,
    body: &[u8],
) -> Result<Image> {
    let request = UploadRequest::from_json(crate::domain::validate::json_object(body)?)?;
    let business = visible_business(services, caller, request.business_id).await?;
    let site = match (request.site_id, &business, &caller.restrict_sub_id) {
        // Only an unrestricted key's upload naming no business takes its sub id from a site.
        (Some(site_id), None, None) => services.store.get_site(caller.account_id, site_id).await?,
        _ => None,
    };
    let partner_sub_id = image_sub_id(caller, business.as_ref(), site.as_ref());
    if let Source::Staged(upload_id) = &request.source {
        let session = staged::claim(services, caller, upload_id).await?;
        let made = async {
            let bytes = staged_content(uploads, services, &session).await?;
            let name = Some(session.name.clone());
            make_image(
                uploads,
                services,
                caller,
                &request,
                partner_sub_id,
                bytes,
                name,
            )
            .await
        }
        .await;
        settle_staged(uploads, services, &session, made.as_ref().err()).await;
        return made;
    }
    let (bytes, name) = content::fetch_or_decode(
        uploads,
        &services.config,
        caller.account_id,
        &request.source,
    )
    .await?;
    make_image(
        uploads,
        services,
        caller,
        &request,
        partner_sub_id,
        bytes,
        name,
    )
    .await
}

/// The pipeline run, the files and the record of an upload's bytes.
async fn make_image(
    uploads: &Uploads,
    services: &Services,
    caller: &Caller,
    request: &UploadRequest,
    partner_sub_id: Option<String>,
    bytes: Bytes,
    name: Option<String>,
) -> Result<Image> {
    let original = bytes.clone();
    let processed = run_pipeline(&uploads.slots, bytes, services.config.image_limits).await?;
    let id = services.store.allocate_image_id().await?;
    let path = original_path(&file_stem(name.as_deref()), id, processed.extension);
    let new = NewImage {
        id: Some(id),
        path: path.clone(),
        mimetype: processed.mimetype.to_string(),
        width: processed.width,
        height: processed.height,
        site_id: request.site_id,
        business_id: request.business_id,
        partner_sub_id,
        user_id: caller.user_id,
    };
    let files = store_writes::upload_files(&path, original, processed);
    let written = store_writes::write_files(&uploads.files, files).await?;
    store_writes::write_record(services, &uploads.files, caller, id, new, &written).await
}

/// A claimed staged upload's file: 400 when nothing was posted yet, 413 over the size
/// declared (the form refuses it already; this holds for any file store).
async fn staged_content(
    uploads: &Uploads,
    services: &Services,
    session: &UploadSession,
) -> Result<Bytes> {
    let started = Instant::now();
    let limit = services.config.fetch.max_bytes.max(session.size);
    let read = uploads
        .files
        .read(&staged::staged_path(&session.upload_id), limit)
        .await;
    record_upload(|stats| stats.fetch = Some(started.elapsed()));
    let bytes = read?.ok_or_else(|| {
        ApiError::field(
            "upload_id",
            "No file was posted for this upload_id yet: post it to the form's url, with its \
             fields and then the file, before this call.",
        )
    })?;
    record_upload(|stats| stats.bytes = Some(bytes.len() as u64));
    if bytes.len() as u64 > session.size {
        return Err(ApiError::TooLarge(format!(
            "The staged file is over the size declared for it, {}.",
            crate::config::byte_size(session.size)
        )));
    }
    Ok(bytes)
}

/// After a staged upload's create: its file is removed once used, whether it made an image
/// or was refused (the upload_id stays used); after a failure of ours, or before any file
/// was posted, the file stays and the upload_id is usable again, for a retry.
async fn settle_staged(
    uploads: &Uploads,
    services: &Services,
    session: &UploadSession,
    error: Option<&ApiError>,
) {
    let retryable = error.is_some_and(|err| {
        err.status() >= 500
            || matches!(err, ApiError::Validation(fields) if fields.contains_key("upload_id"))
    });
    let outcome = if retryable {
        services
            .store
            .release_upload_session(&session.upload_id)
            .await
    } else {
        uploads
            .files
            .delete(&staged::staged_path(&session.upload_id))
            .await
    };
    if let Err(err) = outcome {
        // The staging area's lifecycle removes a file left behind within a day.
        tracing::warn!(error = %crate::error::error_chain(&err), retryable, "a staged upload could not be settled");
    }
}

/// The business the upload names, if any; 404 unless the caller sees it.
async fn visible_business(
    services: &Services,
    caller: &Caller,
    business_id: Option<i64>,
) -> Result<Option<Business>> {
    let Some(business_id) = business_id else {
        return Ok(None);
    };
    let visible = services
        .store
        .get_business(caller.account_id, business_id)
        .await?
        .filter(|b| b.visible_to(caller.restrict_sub_id.as_deref()));
    if visible.is_none() {
        return Err(crate::store::rules::no_such_business(business_id));
    }
    Ok(visible)
}

/// The sub id an uploaded image belongs to, fixed at upload: a restricted key's own; for
/// an unrestricted key, that of the business it names, else that of the site it names when
/// that is a site of the account (so the site's own sub id sees it under `?site_id=`), else
/// none. A `site_id` that names no site of the account is kept as given.
pub fn image_sub_id(
    caller: &Caller,
    business: Option<&Business>,
    site: Option<&Site>,
) -> Option<String> {
    match (&caller.restrict_sub_id, business, site) {
        (Some(sub), _, _) => Some(sub.clone()),
        (None, Some(business), _) => business.partner_sub_id.clone(),
        (None, None, Some(site)) => site.partner_sub_id.clone(),
        (None, None, None) => None,
    }
}

/// Processes the bytes on a blocking thread once a run slot is free (timed for the request
/// log, per stage).
async fn run_pipeline(slots: &UploadSlots, bytes: Bytes, limits: ImageLimits) -> Result<Processed> {
    // Only the pipeline holds a run slot; it is given back when the work ends, even if this
    // request is dropped first.
    let slot = slots.run().await?;
    let started = Instant::now();
    let joined = tokio::task::spawn_blocking(move || {
        let processed = image_pipeline::process(&bytes, &limits);
        drop(slot);
        processed
    })
    .await;
    record_upload(|stats| stats.pipeline = Some(started.elapsed()));
    let processed = match joined {
        Ok(result) => result?,
        // A decoder that panics on hostile input fails this upload only, never the process.
        Err(join) if join.is_panic() => {
            tracing::error!("the image pipeline panicked on an upload");
            return Err(ApiError::field(
                "upload",
                "The image could not be decoded: the file is corrupt.",
            ));
        }
        Err(join) => return Err(ApiError::internal(join)),
    };
    let timings = processed.timings;
    record_upload(|stats| {
        stats.decode = Some(timings.decode);
        stats.resize = Some(timings.resize);
        stats.encode = Some(timings.encode);
    });
    Ok(processed)
}
