//! Every route of the HTTP API has the throttling of its group (reads, business writes and
//! image deletes, uploads, and the stage default for `$default`), each a parameter with its
//! sized default.

use std::collections::BTreeSet;

use serde_yaml::Value;
use sitehost::api::Operation;

use super::{api_functions, operation_for_dir, str_of, tagged, template};

/// The throttling parameters, each with the default docs/deploy.md ("Capacity and limits")
/// derives: (rate parameter, its default, burst parameter, its default).
const THROTTLES: &[(&str, u64, &str, u64)] = &[
    // Stray requests ($default) and any route without a setting of its own.
    (
        "ApiThrottlingRateLimit",
        100,
        "ApiThrottlingBurstLimit",
        100,
    ),
    // Four accounts reading at 1,000/s, or 200 keys at the default 20/s.
    (
        "ReadThrottlingRateLimit",
        4000,
        "ReadThrottlingBurstLimit",
        4000,
    ),
    // Three accounts at the 1,000 creates/s the store is built to sustain per account.
    (
        "WriteThrottlingRateLimit",
        3000,
        "WriteThrottlingBurstLimit",
        3000,
    ),
    // ImageUploadReservedConcurrency (10) / about 2 s per upload / 2 spellings of the
    // route; burst: half the concurrency (each spelling has one).
    (
        "UploadThrottlingRateLimit",
        2,
        "UploadThrottlingBurstLimit",
        5,
    ),
];

/// API Gateway's default quota per account and region (all APIs): 10,000 requests/s, burst
/// 5,000.
const ACCOUNT_RATE: u64 = 10_000;
const ACCOUNT_BURST: u64 = 5_000;

/// Seconds a typical upload holds an image-upload instance (fetch, decode, five variants,
/// six S3 writes, one transaction): what the upload route's default rate assumes.
const SECONDS_PER_UPLOAD: u64 = 2;

fn parameter_default(template: &Value, name: &str) -> u64 {
    let parameter = &template["Parameters"][name];
    assert_eq!(parameter["Type"].as_str(), Some("Number"), "{name}");
    parameter["Default"]
        .as_u64()
        .unwrap_or_else(|| panic!("{name}: a numeric default"))
}

/// The throttling group of a route: the prefix of its `<group>ThrottlingRateLimit` and
/// `<group>ThrottlingBurstLimit` parameters.
fn throttle_group(operation: Operation) -> &'static str {
    match operation {
        Operation::BusinessList
        | Operation::BusinessGet
        | Operation::ImageList
        | Operation::ImageGet
        | Operation::LocationList
        | Operation::LocationGet
        | Operation::SiteList
        | Operation::SiteGet
        | Operation::PostList
        | Operation::PostGet => "Read",
        Operation::BusinessCreate
        | Operation::BusinessUpdate
        | Operation::ImageDelete
        | Operation::LocationCreate
        | Operation::LocationUpdate
        | Operation::LocationDelete
        | Operation::SiteCreate
        | Operation::SiteUpdate
        | Operation::SiteDelete
        | Operation::PostCreate
        | Operation::PostUpdate => "Write",
        Operation::ImageUpload | Operation::ImageUploadSession => "Upload",
    }
}

/// `{ThrottlingRateLimit: !Ref <group>ThrottlingRateLimit, ThrottlingBurstLimit: !Ref ...}`.
fn assert_throttled_by(settings: &Value, group: &str, what: &str) {
    for (property, suffix) in [
        ("ThrottlingRateLimit", "ThrottlingRateLimit"),
        ("ThrottlingBurstLimit", "ThrottlingBurstLimit"),
    ] {
        assert_eq!(
            tagged(&settings[property], "Ref").and_then(Value::as_str),
            Some(format!("{group}{suffix}").as_str()),
            "{what}: {property} must be !Ref {group}{suffix}"
        );
    }
}

#[test]
fn throttle_parameters_are_sized_from_capacity() {
    let template = template();
    for &(rate, rate_default, burst, burst_default) in THROTTLES {
        for (name, default) in [(rate, rate_default), (burst, burst_default)] {
            let parameter = &template["Parameters"][name];
            assert_eq!(parameter_default(&template, name), default, "{name}");
            // 0 would throttle every request of the route.
            assert_eq!(parameter["MinValue"].as_u64(), Some(1), "{name}");
            assert!(
                parameter["Description"]
                    .as_str()
                    .is_some_and(|d| d.len() > 20),
                "{name}: say what it limits"
            );
        }
        // No one group's route may take most of the account's quota (shared by every API
        // of the account in the region), nor a burst beyond the account's.
        assert!(rate_default <= ACCOUNT_RATE / 2, "{rate}: {rate_default}");
        assert!(burst_default <= ACCOUNT_BURST, "{burst}: {burst_default}");
    }
    // The old single 50/s limit capped every partner together below one account's target.
    for name in ["ReadThrottlingRateLimit", "WriteThrottlingRateLimit"] {
        assert!(
            parameter_default(&template, name) >= 1_000,
            "{name}: at least the 1,000 creates/s one account is built to sustain"
        );
    }
    // Uploads: no more per second than image-upload's reserved concurrency finishes, and
    // no bigger burst than it can start, so the excess is API Gateway's 429 and not a
    // throttled Lambda's 500.
    // API Gateway throttles each route key apart: every spelling of image-upload's route
    // has the group's limits, and all of them together must fit the reservation.
    let concurrency = parameter_default(&template, "ImageUploadReservedConcurrency");
    let upload = api_functions(&template)
        .into_iter()
        .find(|f| f.dir == "image-upload")
        .expect("image-upload");
    let spellings = upload.all_routes().len() as u64;
    assert_eq!(spellings, 2, "POST /api/v2/images/ and POST /api/v2/images");
    assert!(
        spellings * parameter_default(&template, "UploadThrottlingRateLimit") * SECONDS_PER_UPLOAD
            <= concurrency
    );
    assert!(
        spellings * parameter_default(&template, "UploadThrottlingBurstLimit") <= concurrency,
        "a burst on every spelling at once starts no more uploads than image-upload may run"
    );
}

#[test]
fn every_route_is_throttled_by_its_group() {
    let template = template();
    let api = &template["Resources"]["HttpApi"]["Properties"];
    // The stage default: for any route without a setting of its own.
    assert_throttled_by(&api["DefaultRouteSettings"], "Api", "DefaultRouteSettings");

    let settings = api["RouteSettings"]
        .as_mapping()
        .expect("HttpApi.RouteSettings, keyed by route key");
    let mut expected = BTreeSet::new();
    for function in api_functions(&template) {
        let group = throttle_group(operation_for_dir(&function.dir));
        for (method, path) in function.all_routes() {
            // SAM and API Gateway spell route keys `METHOD /path`, and `$default`.
            let (key, group) = if path == "$default" {
                ("$default".to_string(), "Api")
            } else {
                (format!("{method} {path}"), group)
            };
            let setting = settings
                .get(Value::String(key.clone()))
                .unwrap_or_else(|| panic!("RouteSettings has no {key:?} ({})", function.dir));
            assert_throttled_by(setting, group, &key);
            expected.insert(key);
        }
    }
    // A key without a route fails the deployment ("Unable to find Route by key").
    let keys: BTreeSet<String> = settings
        .keys()
        .map(|k| str_of(k, "route key").to_string())
        .collect();
    assert_eq!(
        keys, expected,
        "RouteSettings keys are exactly the API's routes"
    );
    assert!(keys.contains("$default"));
}
