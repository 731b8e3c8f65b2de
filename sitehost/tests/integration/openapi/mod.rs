//! The API reference, `docs/openapi.json`, against the code: the router serves exactly the
//! documented operations, the route table (`sitehost::api::ROUTES`) names them with their
//! operation ids, the signing example is what our signer computes, the response check the
//! HTTP tests run refuses replies the document does not describe, and every figure the
//! reference states is the code's. Each file is one subject; this module holds what they
//! share.

mod figures;
mod limits;
mod operations;
mod reply_check;
mod signing;

use serde_json::{json, Value};

fn business(id: i64) -> Value {
    json!({"id": id, "business_name": "Cafe", "slug": "cafe", "deleted": false,
           "partner_business_id": null, "partner_sub_id": null, "category_id": null,
           "logo_image_id": null, "user_id": 1, "added": "2026-11-22T00:31:10",
           "modified": "2026-11-22T00:31:10", "resource_uri": format!("/api/v2/businesses/{id}/")})
}

/// `n` bytes as whole MiB (`7 MiB`), where they are whole.
fn mib(n: u64) -> String {
    assert_eq!(n % (1 << 20), 0, "{n} bytes are not whole MiB");
    format!("{} MiB", n >> 20)
}
