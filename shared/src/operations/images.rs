//! The image endpoints: list, detail and delete (uploads are `upload::Uploads`).

use super::{Reply, Services};
use crate::account::Caller;
use crate::error::{ApiError, FieldErrors, Result};
use crate::image_record::{Image, ImageFilter, ImageQuery};
use crate::operations::listing::{envelope, Paging};

const LIST_PATH: &str = "/api/v2/images/";

fn parse_query(params: &[(String, String)], caller: &Caller) -> Result<ImageQuery> {
    let paging = Paging::parse(params)?;
    let mut fields = FieldErrors::default();
    let mut filter = ImageFilter::default();
    let mut descending = false;
    for (name, value) in params {
        let id = || crate::validate::parse_id(value);
        match name.as_str() {
            "site_id" => match id() {
                Some(site) => filter.site_id = Some(site),
                None => fields.add("site_id", format!("'{value}' is not a positive integer.")),
            },
            "business_id" => match id() {
                Some(business) => filter.business_id = Some(business),
                None => fields.add(
                    "business_id",
                    format!("'{value}' is not a positive integer."),
                ),
            },
            "order_by" => match value.as_str() {
                "id" => descending = false,
                "-id" => descending = true,
                _ => fields.add(
                    "order_by",
                    format!("'{value}' is not an allowed ordering; use id or -id"),
                ),
            },
            _ => {}
        }
    }
    fields.into_result()?;
    // A restricted key lists its sub id's images only: one more scope term, so still one
    // Query and one counter.
    filter.partner_sub_id = caller.restrict_sub_id.clone();
    Ok(ImageQuery {
        filter,
        descending,
        limit: paging.limit,
        offset: paging.offset,
    })
}

pub async fn list(
    services: &Services,
    caller: &Caller,
    params: &[(String, String)],
) -> Result<Reply> {
    let query = parse_query(params, caller)?;
    let page = services
        .store
        .list_images(caller.account_id, &query)
        .await?;
    let objects = page.items.iter().map(Image::to_json).collect();
    let paging = Paging {
        limit: query.limit,
        offset: query.offset,
    };
    Ok(Reply::ok(envelope(
        LIST_PATH,
        params,
        paging,
        page.total_count,
        objects,
    )))
}

pub async fn get(services: &Services, caller: &Caller, id: i64) -> Result<Reply> {
    let image = services
        .store
        .get_image(caller.account_id, id)
        .await?
        .filter(|image| image.visible_to(caller.restrict_sub_id.as_deref()))
        .ok_or_else(|| ApiError::NotFound(format!("no image with id {id}")))?;
    Ok(Reply::ok(image.to_json()))
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
            // Every variant's WebP sibling too: made at upload or on first request, or never
            // (removing a missing file is not an error).
            let paths = std::iter::once(image.path.clone()).chain(image.variants().flat_map(
                |(_, path, _)| {
                    let sibling = crate::image_record::may_have_webp_sibling(&path)
                        .then(|| crate::image_record::webp_sibling_path(&path));
                    std::iter::once(path).chain(sibling)
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
