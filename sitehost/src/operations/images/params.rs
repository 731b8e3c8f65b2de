//! The query parameters of the image list beyond paging (`listing`): the filters `site_id`
//! and `business_id`, and `order_by`. Unknown parameters are ignored.

use crate::domain::account::Caller;
use crate::domain::image_record::{ImageFilter, ImageQuery};
use crate::domain::validate::parse_id;
use crate::error::{FieldErrors, Result};
use crate::operations::listing::Paging;

/// The query of a list request on `paging`, with a restricted key's sub id.
pub fn query(params: &[(String, String)], paging: Paging, caller: &Caller) -> Result<ImageQuery> {
    let mut fields = FieldErrors::default();
    let mut filter = ImageFilter::default();
    let mut descending = false;
    for (name, value) in params {
        let id = || parse_id(value);
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
