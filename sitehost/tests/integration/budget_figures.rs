//! docs/budgets.md states what one key can cost the table at the defaults, and the limits
//! of animations: these tests compute the figures from the code's constants and compare
//! them with the text.

use sitehost::api::budgets::stored_cost;
use sitehost::config::{
    ImageLimits, DEFAULT_REQUESTS_PER_MINUTE, MAX_ANIMATED_SIBLING_PIXELS,
    STORED_BYTES_PER_REQUEST, WRITE_UNITS_PER_REQUEST,
};
use sitehost::domain::business::NewBusiness;
use sitehost::domain::location::MAX_LOCATIONS_BYTES;
use sitehost::domain::post::{MAX_CONTENT_BYTES, MAX_TITLE_CHARS};
use sitehost::store::scope::business_scopes;

// DynamoDB's write-unit rules (docs/dynamodb-design.md, "Consumed capacity"), per write of
// the costliest request that costs one request of budget: a business create.
/// The nonce's `PutItem` and the budget counter's `UpdateItem`, one unit each.
const ADMISSION_UNITS: u64 = 2;
/// The `Idempotency-Key` claim (`PutItem`) and its answer (`UpdateItem`).
const IDEMPOTENCY_UNITS: u64 = 2;
/// The business record, up to 2 KB, written in a transaction (twice a unit per started KB).
const RECORD_UNITS: u64 = 4;
/// The logo image's mark, in the transaction.
const LOGO_UNITS: u64 = 2;
/// Per list scope: the entry and its index entry, and a counter lane, each in the
/// transaction.
const UNITS_PER_SCOPE: u64 = 6;
/// The id sequence, written once per block of ids (rounded up to a unit).
const ID_UNITS: u64 = 1;
/// Transactional: 2 units per started KB.
const UNITS_PER_KB: u64 = 2;

fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/budgets.md");
    let text = std::fs::read_to_string(path).expect("docs/budgets.md");
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The bold number before `what` (`**2,300 write units a second**`), without separators.
fn bold(doc: &str, what: &str) -> String {
    let end = doc
        .find(&format!(" {what}**"))
        .unwrap_or_else(|| panic!("docs/budgets.md states **... {what}**"));
    let start = doc[..end].rfind("**").expect("the figure's opening **") + 2;
    doc[start..end].replace([',', '$'], "")
}

fn scopes_at_most() -> u64 {
    let everything = NewBusiness {
        business_name: "A".into(),
        partner_business_id: Some("p".into()),
        partner_sub_id: Some("s".into()),
        user_id: 1,
        ..Default::default()
    }
    .into_business(1, 1, 1_369_395_621);
    business_scopes(&everything).len() as u64
}

/// What a post record holds besides its title and content, at most: attribute names, keys
/// and numbers (`store::dynamo::site_records::post_item`).
const POST_FIXED_BYTES: u64 = 300;

/// One request of a post create: the admission, the idempotency claim, the post with 4 KB
/// of title and content, its entry, index entry and counter lane in its one scope, an id.
fn post_create_units() -> u64 {
    ADMISSION_UNITS
        + IDEMPOTENCY_UNITS
        + UNITS_PER_KB * (STORED_BYTES_PER_REQUEST + POST_FIXED_BYTES).div_ceil(1024)
        + UNITS_PER_SCOPE
        + ID_UNITS
}

/// One request of a site write: what its transaction may use per request it pays, with the
/// admission, the idempotency claim and an id.
fn site_write_units_per_request() -> u64 {
    WRITE_UNITS_PER_REQUEST + ADMISSION_UNITS + IDEMPOTENCY_UNITS + ID_UNITS
}

#[test]
fn what_one_key_can_cost_the_table_is_what_the_code_allows() {
    let doc = doc();
    let details_units = UNITS_PER_KB * STORED_BYTES_PER_REQUEST.div_ceil(1024);
    let business = ADMISSION_UNITS
        + IDEMPOTENCY_UNITS
        + RECORD_UNITS
        + details_units
        + LOGO_UNITS
        + UNITS_PER_SCOPE * scopes_at_most()
        + ID_UNITS;
    // A further request of budget buys less than the first (4 KB more, or 100 units more of
    // a site's transaction), and posts and sites buy less than a business create.
    let post = post_create_units();
    let site = site_write_units_per_request();
    assert_eq!(bold(&doc, "write units"), business.to_string());
    assert_eq!(
        bold(&doc, "write units per request"),
        WRITE_UNITS_PER_REQUEST.to_string()
    );
    let stated_post = format!("**{post} write units**, and each further request 4 KB more");
    assert!(doc.contains(&stated_post), "{stated_post}");
    let stated_site = format!("and id block: **{site} write units**");
    assert!(doc.contains(&stated_site), "{stated_site}");
    let per_request = [business, post, site, details_units + UNITS_PER_KB]
        .into_iter()
        .max()
        .unwrap_or(0);
    assert_eq!(
        per_request, business,
        "a business create is the costliest request"
    );
    let per_second = DEFAULT_REQUESTS_PER_MINUTE * per_request / 60;
    assert_eq!(bold(&doc, "write units a second"), per_second.to_string());
    let price: f64 = bold(&doc, "per million write request units")
        .parse()
        .expect("a price");
    let per_day = per_second as f64 * 86_400.0 / 1e6 * price;
    assert_eq!(bold(&doc, "a day"), format!("{per_day:.2}"));
    let defaults = format!(
        "one key at {} requests a minute",
        sitehost::config::thousands(DEFAULT_REQUESTS_PER_MINUTE)
    );
    assert!(doc.contains(&defaults), "{defaults}");
}

#[test]
fn the_largest_business_costs_what_the_doc_says() {
    let doc = doc();
    // 50 services of 255 four-byte characters, each with its quotes and separator.
    let services = 50 * (255 * 4 + 3);
    let largest = (MAX_LOCATIONS_BYTES + services) as u64;
    let cost = 1 + stored_cost(largest, DEFAULT_REQUESTS_PER_MINUTE);
    let a_minute = DEFAULT_REQUESTS_PER_MINUTE / cost;
    let stated = format!("costs {cost}, so one key creates at most {a_minute} such businesses");
    assert!(doc.contains(&stated), "{stated}");
}

#[test]
fn the_largest_post_costs_what_the_doc_says() {
    let doc = doc();
    let largest = (MAX_CONTENT_BYTES + 4 * MAX_TITLE_CHARS) as u64;
    let cost = 1 + stored_cost(largest, DEFAULT_REQUESTS_PER_MINUTE);
    let stated = format!(
        "characters, {} bytes) costs {cost} requests",
        sitehost::config::thousands(largest)
    );
    assert!(doc.contains(&stated), "{stated}");
}

#[test]
fn the_largest_site_costs_what_the_doc_says() {
    use sitehost::api::budgets::write_units_cost;
    use sitehost::domain::site::{Address, NewSite, MAX_SITE_LOCATIONS};
    use sitehost::store::sites::site_write_units;
    let long = "\u{10348}".repeat(255);
    let largest = NewSite {
        business_id: 1,
        user_id: 1,
        address: Address {
            domain: "example.com".into(),
            subdomain: "www".into(),
            base_directory: "/".into(),
        },
        title: long.clone(),
        partner_site_id: Some(long.clone()),
        partner_sub_id: Some(long),
        partner_user_id: None,
        theme_id: None,
        published: true,
        www_primary: true,
        location_ids: (1..=MAX_SITE_LOCATIONS as i64).collect(),
    }
    .into_site(1, 1, 1_369_395_621);
    let units = site_write_units(None, &largest);
    let cost = 1 + write_units_cost(units, DEFAULT_REQUESTS_PER_MINUTE);
    let stated = format!("may use {units} write units, and costs {cost}.");
    assert!(doc().contains(&stated), "{stated}");
}

#[test]
fn the_animation_limits_are_the_codes() {
    let doc = doc();
    let limits = ImageLimits::default();
    assert_eq!(bold(&doc, "frames"), limits.max_frames.to_string());
    assert_eq!(
        bold(&doc, "pixels in all its frames"),
        limits.max_animation_pixels.to_string()
    );
    assert_eq!(
        bold(&doc, "pixels in all the variant's frames"),
        MAX_ANIMATED_SIBLING_PIXELS.to_string()
    );
    // As many pixels as a still image may have, as the text says.
    assert_eq!(limits.max_animation_pixels, limits.max_pixels);
}

#[test]
fn the_page_bounds_are_the_codes() {
    use sitehost::domain::post::PAGE_STORED_BYTES;
    use sitehost::operations::listing::PAGE_MAX_BYTES;
    let api = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/api.md"))
        .expect("docs/api.md");
    let api = api.split_whitespace().collect::<Vec<_>>().join(" ");
    let budgets = doc();
    let stored = sitehost::config::thousands(PAGE_STORED_BYTES);
    let response = sitehost::config::thousands(PAGE_MAX_BYTES as u64);
    // The largest post: 100,000 bytes of content and 255 four-byte characters of title.
    let largest = (MAX_CONTENT_BYTES + 4 * MAX_TITLE_CHARS) as u64;
    let holds = PAGE_STORED_BYTES / largest;
    for stated in [
        format!("past {stored} bytes (`PAGE_STORED_BYTES`)"),
        format!("a page of the largest posts holds {holds}"),
        format!("under {response} bytes of objects"),
    ] {
        assert!(api.contains(&stated), "docs/api.md: {stated}");
    }
    for stated in [
        format!("{stored} bytes (at least one post)"),
        format!("{response} bytes (at least one object)"),
    ] {
        assert!(budgets.contains(&stated), "docs/budgets.md: {stated}");
    }
}
