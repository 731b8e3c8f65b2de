//! Every number the reference states, in its prose or as a schema bound, is the code's
//! constant: made from it or compared with it.

use std::collections::BTreeSet;

use serde_json::Value;
use sitehost::api::Operation;

use super::mib;
use crate::support::openapi::document;

/// A constant the crate keeps private (`const NAME: T = value;` in `file`, relative to
/// `sitehost/src`), read from its source: the document's figure is compared with the code's
/// own, not with a copy.
fn source_const(file: &str, name: &str) -> u64 {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("source file");
    let line = text
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("const {name}:")))
        .unwrap_or_else(|| panic!("no const {name} in {file}"));
    let value = line.split('=').nth(1).expect("a value").trim();
    value
        .trim_end_matches(';')
        .replace('_', "")
        .parse()
        .unwrap_or_else(|_| panic!("const {name} in {file} is not a number: {line}"))
}

/// Every figure the reference states, as the phrase it is stated in, made from the code's
/// constants. A figure in the document's prose that none of these (nor the harmless
/// numbers below) accounts for fails `every_figure_the_document_states_is_the_codes`.
// Reads better whole: a list of phrases, one per figure the documents state.
fn stated_figures() -> Vec<String> {
    use sitehost::config::{self, thousands};
    use sitehost::domain::location;
    let fetch = config::FetchConfig::default();
    let pixels = config::ImageLimits::default();
    let window = sitehost::auth::TIMESTAMP_WINDOW_SECS;
    let max_limit = sitehost::operations::listing::MAX_LIMIT;
    let mut figures = vec![
        // A blog post's content.
        format!(
            "{} bytes",
            thousands(sitehost::domain::post::MAX_CONTENT_BYTES as u64)
        ),
        // The request body (`SITEHOST_MAX_BODY_BYTES`).
        mib(config::DEFAULT_MAX_BODY_BYTES as u64),
        // Uploads, fetches and images.
        format!(
            "{} bytes",
            thousands(config::DEFAULT_UPLOAD_MAX_BYTES as u64)
        ),
        format!("{} bytes", thousands(fetch.max_bytes)),
        mib(fetch.max_bytes),
        format!("{} pixels", thousands(pixels.max_pixels)),
        format!("{} pixels a side", thousands(u64::from(pixels.max_side))),
        format!("{} frames", thousands(u64::from(pixels.max_frames))),
        format!(
            "{} pixels in all its frames",
            thousands(pixels.max_animation_pixels)
        ),
        format!("{} s to connect", fetch.connect_timeout.as_secs()),
        format!("{} s in all", fetch.total_timeout.as_secs()),
        format!("{} redirects", fetch.max_redirects),
        // Budgets.
        format!(
            "{} uploads a minute",
            thousands(config::DEFAULT_UPLOADS_PER_MINUTE)
        ),
        format!(
            "{} requests a minute",
            thousands(config::DEFAULT_REQUESTS_PER_MINUTE)
        ),
        // Signatures.
        format!("{window} seconds"),
        format!("{window} s off"),
        // Paging.
        format!("default {}", sitehost::operations::listing::DEFAULT_LIMIT),
        format!("clamped to {max_limit}"),
        format!("`0` means {max_limit}"),
        format!(
            "at most {}",
            sitehost::operations::business::DETAIL_IMAGES_LIMIT
        ),
        // Staged uploads.
        format!(
            "{} minutes",
            sitehost::operations::images::staged::FORM_SECS / 60
        ),
        format!("1 byte to {}", thousands(fetch.max_bytes)),
        // Idempotency keys.
        format!("{} hours", sitehost::store::IDEMPOTENCY_KEY_SECS / 3600),
        // Fields.
        format!(
            "1 to {} characters",
            sitehost::domain::business::MAX_NAME_CHARS
        ),
        // Services and locations (location.rs).
        format!("At most {} locations", location::MAX_LOCATIONS),
        format!("{} phones each", location::MAX_PHONES),
        format!(
            "text fields at most {} characters",
            location::MAX_TEXT_CHARS
        ),
        format!(
            "`description` {}",
            thousands(location::MAX_DESCRIPTION_CHARS as u64)
        ),
        format!(
            "at most {} bytes as stored",
            thousands(location::MAX_LOCATIONS_BYTES as u64)
        ),
        format!(
            "At most {}, each a non-blank string of at most {} characters",
            location::MAX_SERVICES,
            location::MAX_TEXT_CHARS
        ),
        format!(
            "At most {} characters",
            thousands(location::MAX_DESCRIPTION_CHARS as u64)
        ),
        // Locations and their hours (location/hours.rs, operations/locations).
        format!("at most {} locations", location::MAX_LOCATIONS),
        format!(
            "at most {} of them",
            sitehost::operations::locations::MAX_LIST_BUSINESSES
        ),
        format!("1 to {} of `a-z0-9_-`", location::hours::MAX_TYPE_CHARS),
        format!("at most {} types", location::hours::MAX_TYPES),
        format!("`[\"{}\"]`", location::hours::ALL_DAY),
        format!("`{}`", location::hours::END_OF_DAY),
        // What a 400 echoes (error.rs) and DynamoDB's busy answer (store/dynamo).
        format!(
            "at most {} characters",
            source_const("error.rs", "MAX_ECHO_CHARS")
        ),
        format!(
            "at most {} per field",
            source_const("error.rs", "MAX_MESSAGES_PER_FIELD")
        ),
        format!("{} fields", source_const("error.rs", "MAX_FIELDS")),
        format!(
            "{} attempts",
            source_const("store/dynamo/mod.rs", "MAX_ATTEMPTS")
        ),
        format!(
            "`Retry-After: {}`",
            source_const("store/dynamo/mod.rs", "BUSY_RETRY_AFTER_SECS")
        ),
    ];
    // A page of posts, any list's page, and what a post write pays for.
    let stored = sitehost::domain::post::PAGE_STORED_BYTES;
    let largest = (sitehost::domain::post::MAX_CONTENT_BYTES
        + 4 * sitehost::domain::post::MAX_TITLE_CHARS) as u64;
    figures.extend([
        format!("{} bytes", thousands(stored)),
        format!(
            "{} bytes",
            thousands(sitehost::operations::listing::PAGE_MAX_BYTES as u64)
        ),
        format!("the largest posts holds {}", stored / largest),
        format!("per started {} KB", config::STORED_BYTES_PER_REQUEST / 1024),
    ]);
    // The variants' boxes, however a sentence names them.
    for (name, side) in sitehost::domain::image_record::VARIANTS {
        figures.extend([
            format!("`{name}` {side}"),
            format!("{name} {side}"),
            format!("{side}px"),
        ]);
    }
    // How long caches may keep a file (store/files.rs), as the image delete states it.
    figures.push(format!(
        "`Cache-Control: {}`",
        sitehost::store::files::CACHE_CONTROL
    ));
    // The image delete's 409 example is what the store answers (store/rules.rs).
    let shop = sitehost::domain::business::Business {
        id: 1,
        account_id: 1,
        business_name: "Harbour Cafe".into(),
        slug: "harbour-cafe".into(),
        deleted: false,
        partner_business_id: None,
        partner_sub_id: None,
        category_id: None,
        logo_image_id: Some(26),
        user_id: 1,
        added: 0,
        modified: 0,
    };
    match sitehost::store::rules::image_is_logo(26, &shop, None) {
        sitehost::ApiError::StateConflict(message) => figures.push(message),
        other => panic!("{other:?}"),
    }
    // The 413 example is what the upload route answers with the default limits.
    let config = sitehost::config::Config::embedded(std::path::PathBuf::from("unused"));
    match sitehost::api::body::body_too_large_for(&config, Operation::ImageUpload) {
        sitehost::ApiError::TooLarge(message) => figures.push(message),
        other => panic!("{other:?}"),
    }
    figures.sort_by_key(|f| std::cmp::Reverse(f.len()));
    figures
}

/// Numbers in the prose that are no limit: names, formats, examples, booleans.
const HARMLESS: &[&str] = &[
    "version 2",
    "api/v2",
    "RFC 5849",
    "rfc5849",
    "RFC 3986",
    "OAuth 1.0a",
    "HMAC-SHA1",
    "OAuth1Session",
    "64-bit",
    "base64",
    "Base64",
    "UTF-8",
    "`1.0`",
    "`1.0A`",
    "`1.0a`",
    "2013-05-24T11:40:21",
    "`0`",
    "`1`",
    "\"0\"",
    "default 0",
    "no business with id 42",
    "100vw",
    "S3",
    "ISO 8601",
];

/// The prose of the document (descriptions, summaries, titles, example error messages),
/// with its JSON pointer.
fn prose(value: &Value, pointer: String, out: &mut Vec<(String, String)>) {
    match value {
        Value::Object(map) => {
            for (key, value) in map {
                let pointer = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                match value {
                    Value::String(text)
                        if ["description", "summary", "title", "error"].contains(&key.as_str()) =>
                    {
                        out.push((pointer, text.clone()))
                    }
                    _ => prose(value, pointer, out),
                }
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                prose(item, format!("{pointer}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// Every number the reference states, in its prose or as a schema bound, is the code's
/// constant: made from it (`stated_figures`) or compared with it here. A hand-copied number
/// fails: state it through one of the phrases above, or add the phrase made from its constant.
#[test]
fn every_figure_the_document_states_is_the_codes() {
    let doc = document();
    let figures = stated_figures();
    let statuses: BTreeSet<String> = doc["paths"]
        .as_object()
        .expect("paths")
        .values()
        .flat_map(|item| item.as_object().expect("path item").values())
        .filter_map(|operation| operation.get("responses")?.as_object())
        .flat_map(|responses| responses.keys().cloned())
        .chain(["403", "404", "405", "502", "504"].map(String::from))
        .collect();
    let mut texts = Vec::new();
    prose(doc, String::new(), &mut texts);
    let mut unclaimed = Vec::new();
    for (pointer, text) in &texts {
        // The worked signing example is checked against our signer above.
        let mut rest = text
            .split("#### Worked example")
            .next()
            .unwrap_or_default()
            .to_string();
        for phrase in figures
            .iter()
            .map(String::as_str)
            .chain(HARMLESS.iter().copied())
        {
            rest = rest.replace(phrase, " ");
        }
        let mut chars = rest.char_indices().peekable();
        while let Some((start, c)) = chars.next() {
            if !c.is_ascii_digit() {
                continue;
            }
            let mut end = start + 1;
            while let Some((i, c)) = chars.peek().copied() {
                if !(c.is_ascii_digit()
                    || c == ',' && rest[i + 1..].starts_with(|d: char| d.is_ascii_digit()))
                {
                    break;
                }
                end = i + c.len_utf8();
                chars.next();
            }
            let number = &rest[start..end];
            if !statuses.contains(number) {
                let from = rest[..start]
                    .char_indices()
                    .rev()
                    .nth(40)
                    .map_or(0, |(i, _)| i);
                let to = rest[end..]
                    .char_indices()
                    .nth(40)
                    .map_or(rest.len(), |(i, _)| end + i);
                unclaimed.push(format!("{pointer}: {number} in \"{}\"", &rest[from..to]));
            }
        }
    }
    assert!(
        unclaimed.is_empty(),
        "figures in docs/openapi.json made from no constant (state them through \
         stated_figures() in sitehost/tests/integration/openapi/figures.rs):\n{}",
        unclaimed.join("\n")
    );
}

/// The limits a partner needs are stated where they are looked for.
#[test]
fn the_limits_a_partner_needs_are_stated_where_they_are_looked_for() {
    let doc = document();
    let figures = stated_figures();
    let config = sitehost::config::Config::embedded(std::path::PathBuf::from("unused"));
    let upload = doc["paths"]["/api/v2/images/"]["post"]["description"]
        .as_str()
        .expect("upload description");
    for figure in [
        format!(
            "{} bytes",
            sitehost::config::thousands(config.upload_max_bytes as u64)
        ),
        mib(config.fetch.max_bytes),
        format!(
            "{} pixels",
            sitehost::config::thousands(config.image_limits.max_pixels)
        ),
        "429".to_string(),
        "external_url".to_string(),
    ] {
        assert!(
            upload.contains(&figure),
            "the upload description states {figure}"
        );
    }
    let file = doc["components"]["schemas"]["ImageUploadBase64"]["properties"]["upload"]
        ["properties"]["file"]["description"]
        .as_str()
        .expect("file description");
    assert!(file.contains(&format!(
        "{} bytes",
        sitehost::config::thousands(config.upload_max_bytes as u64)
    )));
    let too_large = &doc["components"]["responses"]["TooLarge"];
    assert!(too_large["description"]
        .as_str()
        .is_some_and(|d| d.contains(&mib(config.max_body_bytes as u64))));
    assert!(figures.iter().any(|f| {
        too_large["content"]["application/json"]["example"]["error"].as_str() == Some(f)
    }));
}

/// The schema bounds (`maxLength`, `maximum`, `maxItems`, `default`, ...) are the code's
/// constants; 0 and 1 are structural (non-negative, non-empty) and need none.
// Reads better whole: one walk over the document's bounds, each compared with its constant.
#[test]
fn every_schema_bound_is_the_codes() {
    fn walk(value: &Value, pointer: &str, found: &mut Vec<(String, String, u64)>) {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    if key == "example" || key == "examples" {
                        continue;
                    }
                    let bound = [
                        "maxLength",
                        "minLength",
                        "maximum",
                        "minimum",
                        "maxItems",
                        "minItems",
                        "maxProperties",
                        "minProperties",
                        "default",
                        "exclusiveMaximum",
                        "exclusiveMinimum",
                        "multipleOf",
                    ]
                    .contains(&key.as_str());
                    match value.as_u64() {
                        Some(n) if bound && n > 1 => {
                            found.push((pointer.to_string(), key.clone(), n))
                        }
                        _ => walk(value, &format!("{pointer}/{key}"), found),
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    walk(item, &format!("{pointer}/{i}"), found);
                }
            }
            _ => {}
        }
    }
    use sitehost::domain::location;
    let mut found = Vec::new();
    walk(document(), "", &mut found);
    assert!(found.len() > 20, "{found:?}");
    let max_limit = sitehost::operations::listing::MAX_LIMIT;
    for (pointer, key, value) in found {
        let expected: u64 = match (key.as_str(), pointer.rsplit('/').next().unwrap_or("")) {
            ("maximum", _) if value == i64::MAX as u64 => i64::MAX as u64,
            ("maximum", "limit") => max_limit,
            ("default", "schema") if pointer.contains("/parameters/limit/") => {
                sitehost::operations::listing::DEFAULT_LIMIT
            }
            ("maxLength", "business_name") => sitehost::domain::business::MAX_NAME_CHARS as u64,
            ("maxLength", "name") if pointer.contains("/ImageUploadSessionRequest/") => {
                sitehost::operations::images::staged::MAX_NAME_CHARS as u64
            }
            ("maxLength", "schema") if pointer.contains("/idempotencyKey/") => {
                sitehost::api::idempotency::MAX_KEY_CHARS as u64
            }
            ("maxLength", "partner_business_id" | "partner_sub_id") => {
                sitehost::domain::business::MAX_PARTNER_ID_CHARS as u64
            }
            ("maxItems", "objects") => max_limit,
            ("maxItems", "locations" | "location_ids") if pointer.contains("/Site") => {
                sitehost::domain::site::MAX_SITE_LOCATIONS as u64
            }
            ("maxLength", "title") if pointer.contains("/Post") => {
                sitehost::domain::post::MAX_TITLE_CHARS as u64
            }
            ("maxLength", "title") => sitehost::domain::site::MAX_TITLE_CHARS as u64,
            ("maxLength", "partner_site_id" | "partner_user_id") => {
                sitehost::domain::site::MAX_PARTNER_ID_CHARS as u64
            }
            ("maxItems", "locations") => location::MAX_LOCATIONS as u64,
            ("maxItems", "services") => location::MAX_SERVICES as u64,
            ("maxItems", "phones") => location::MAX_PHONES as u64,
            ("maximum", "lat") => location::MAX_LATITUDE as u64,
            ("maximum", "lon") => location::MAX_LONGITUDE as u64,
            ("maxLength", "description") if pointer.contains("Location") => {
                location::MAX_DESCRIPTION_CHARS as u64
            }
            ("maxLength", _)
                if pointer.contains("Location")
                    || pointer.contains("Phone")
                    || pointer.contains("/services/") =>
            {
                location::MAX_TEXT_CHARS as u64
            }
            ("maxItems", "images") => sitehost::operations::business::DETAIL_IMAGES_LIMIT,
            ("maxItems" | "minItems", _) if pointer.ends_with("/Week") => {
                location::hours::DAYS as u64
            }
            ("maxItems", _) if pointer.contains("/Day/") => location::hours::MAX_RANGES as u64,
            ("minItems", _) if pointer.contains("/Day/") => 2,
            ("maxProperties", "HoursByType") => location::hours::MAX_TYPES as u64,
            ("maxItems", _) if pointer.contains("/ValidationMessages/") => {
                source_const("error.rs", "MAX_MESSAGES_PER_FIELD")
            }
            _ => panic!(
                "{pointer}/{key} = {value} in docs/openapi.json comes from no constant: \
                 compare it with its constant in every_schema_bound_is_the_codes"
            ),
        };
        assert_eq!(value, expected, "{pointer}/{key}");
    }
}
