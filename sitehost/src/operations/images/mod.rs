//! The image endpoints: list, detail and delete (uploads are `upload::Uploads`; a staged
//! upload's session and claim are `staged`). What an
//! image looks like to a client is `view` (a business's detail and an upload's answer
//! show it too), the list's query parameters `params`.

mod params;
pub mod staged;
pub mod view;

use super::{Reply, Services};
use crate::domain::account::Caller;
use crate::domain::image_record::{may_have_siblings, sibling_path, SiblingFormat};
use crate::error::{ApiError, Result};
use crate::operations::listing::{page_envelope, Paging};

pub async fn list(
    services: &Services,
    caller: &Caller,
    query_pairs: &[(String, String)],
) -> Result<Reply> {
    let paging = Paging::parse(query_pairs)?;
    let query = params::query(query_pairs, paging, caller)?;
    let page = services
        .store
        .list_images(caller.account_id, &query)
        .await?;
    Ok(Reply::ok(page_envelope(
        view::LIST_PATH,
        query_pairs,
        paging,
        &page,
        view::image,
    )))
}

pub async fn get(services: &Services, caller: &Caller, id: i64) -> Result<Reply> {
    let image = services
        .store
        .get_image(caller.account_id, id)
        .await?
        .filter(|image| image.visible_to(caller.restrict_sub_id.as_deref()))
        .ok_or_else(|| ApiError::NotFound(format!("no image with id {id}")))?;
    Ok(Reply::ok(view::image(&image)))
}

/// `DELETE /api/v2/images/<id>/`: 204 No Content, as Tastypie answers a delete. The record
/// goes first (refused with 409 while the image is a business's logo), then its files: a
/// record never points at a missing file. A file that cannot be removed is logged and left
/// to `sitehost files sweep`, which removes files whose record is gone; the answer is
/// still 204, since the image is gone for every client of the API.
pub async fn delete(services: &Services, caller: &Caller, id: i64) -> Result<Reply> {
    let image = services
        .store
        .delete_image(caller.account_id, id, caller.restrict_sub_id.as_deref())
        .await?
        .ok_or_else(|| ApiError::NotFound(format!("no image with id {id}")))?;
    match &services.files {
        Some(files) => {
            // Every variant's siblings too, in every format: made at upload or on first
            // request, or never (removing a missing file is not an error).
            let paths = std::iter::once(image.path.clone()).chain(image.variants().flat_map(
                |(_, path, _)| {
                    let formats: &[SiblingFormat] = if may_have_siblings(&path) {
                        &SiblingFormat::ALL
                    } else {
                        &[]
                    };
                    let siblings: Vec<String> =
                        formats.iter().map(|&f| sibling_path(&path, f)).collect();
                    std::iter::once(path).chain(siblings)
                },
            ));
            let removals = paths.map(|path| async move {
                if let Err(err) = files.delete(&path).await {
                    tracing::warn!(
                        image_id = id,
                        path,
                        error = %crate::error::error_chain(&err),
                        "a deleted image's file was not removed; the sweeper will"
                    );
                }
            });
            futures_util::future::join_all(removals).await;
        }
        None => tracing::warn!(
            image_id = id,
            "no file store here: a deleted image's files are left to the sweeper"
        ),
    }
    Ok(Reply::no_content())
}
