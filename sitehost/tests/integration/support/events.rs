//! The fixture behind the Lambda event tests (`lambda_events/`, `cloudfront_events.rs`):
//! an app on an embedded store holding one key, one business and one image, whose clock
//! stands just after the time the events were signed.

use std::path::PathBuf;

use http::HeaderMap;
use serde_json::Value;

use sitehost::api::Operation;
use sitehost::config::OriginSecret;
use sitehost::domain::account::NewKey;

use super::app::TestApp;

/// 2024-05-01T12:00:00Z: when the events were signed.
pub const SIGNED_AT: i64 = 1_714_564_800;

/// The deployment's origin-verify secret (`SITEHOST_ORIGIN_VERIFY`, from the template's
/// generated `OriginVerifySecret`): CloudFront sends it in `X-Origin-Verify`.
pub const ORIGIN_SECRET: &str = "fixtureOriginVerify0secret0of0the0distribution1";

/// The key the events are signed with.
pub struct FixtureKey {
    pub account: &'static str,
    pub key: &'static str,
    pub secret: &'static str,
}

/// A fresh store with the key (user 42), business 1 with location 1, and image 1, and an app on it whose
/// clock is 5 s after `SIGNED_AT`. The scheme defaults to https, as on Lambda
/// (`Config::from_env("dynamodb")`); `public_hosts` is `SITEHOST_PUBLIC_HOSTS`;
/// `origin_secret` is `SITEHOST_ORIGIN_VERIFY` (the template sets [`ORIGIN_SECRET`]'s kind).
pub async fn fixture_app(
    fixture: &FixtureKey,
    public_hosts: &[&str],
    origin_secret: Option<&str>,
) -> TestApp {
    fixture_app_at(SIGNED_AT + 5, fixture, public_hosts, origin_secret).await
}

/// [`fixture_app`] with its clock at `now`.
pub async fn fixture_app_at(
    now: i64,
    fixture: &FixtureKey,
    public_hosts: &[&str],
    origin_secret: Option<&str>,
) -> TestApp {
    let secret = origin_secret.and_then(OriginSecret::new);
    fixture_app_with_secret(now, fixture, public_hosts, secret).await
}

/// [`fixture_app_at`] with a whole origin secret (one during a rotation, say).
// Reads better whole: one fixture data set, written out.
pub async fn fixture_app_with_secret(
    now: i64,
    fixture: &FixtureKey,
    public_hosts: &[&str],
    origin_secret: Option<OriginSecret>,
) -> TestApp {
    let app = TestApp::builder()
        .config(|config| {
            config.default_scheme = "https".into();
            config.public_hosts = public_hosts.iter().map(|h| h.to_string()).collect();
            config.origin_verify = origin_secret;
        })
        .clock(now)
        .build()
        .await;
    let store = &app.store;
    let account = store
        .ensure_account(fixture.account)
        .await
        .expect("account");
    store
        .create_key(NewKey {
            key: fixture.key.into(),
            secret: fixture.secret.into(),
            account_id: account.id,
            user_id: Some(42),
            partner_sub_id: None,
            created: SIGNED_AT,
        })
        .await
        .expect("key");
    let new = sitehost::domain::business::NewBusiness {
        business_name: "Existing".into(),
        partner_business_id: None,
        partner_sub_id: None,
        category_id: None,
        logo_image_id: None,
        user_id: 42,
        locations: vec![sitehost::domain::location::NewLocation {
            id: None,
            fields: sitehost::domain::location::LocationFields {
                location_name: Some("Quay".into()),
                street: Some("1 Quay St".into()),
                city: Some("Wellington".into()),
                state: Some("WGN".into()),
                postal_code: Some("6011".into()),
                country: Some("NZ".into()),
                ..Default::default()
            },
            hours_given: false,
        }],
        ..Default::default()
    };
    store
        .create_business(account.id, new, SIGNED_AT - 60)
        .await
        .expect("business");
    let site = sitehost::domain::site::NewSite {
        business_id: 1,
        user_id: 42,
        address: sitehost::domain::site::Address {
            domain: "harbourcafe.com".into(),
            subdomain: "www".into(),
            base_directory: "/".into(),
        },
        title: "Harbour Cafe".into(),
        partner_site_id: None,
        partner_sub_id: None,
        partner_user_id: None,
        theme_id: None,
        published: true,
        www_primary: true,
        location_ids: vec![],
    };
    store
        .create_site(account.id, site, SIGNED_AT - 50)
        .await
        .expect("site");
    let post = sitehost::domain::post::NewPost {
        site_id: 1,
        title: "Welcome".into(),
        content: "<p>Welcome to the Harbour Cafe.</p>".into(),
        date: None,
    };
    store
        .create_post(account.id, post, SIGNED_AT - 40)
        .await
        .expect("post");
    let image = sitehost::domain::image_record::NewImage {
        id: None,
        path: "img/upload/existing-abc.png".into(),
        mimetype: "image/png".into(),
        width: 10,
        height: 10,
        site_id: Some(12345),
        business_id: None,
        partner_sub_id: None,
        user_id: 42,
    };
    store
        .create_image(account.id, image, SIGNED_AT - 30)
        .await
        .expect("image");
    app
}

/// `events/`, where the sample events are kept.
pub fn events_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../events")
}

/// Asserts what an operation answers on the fixture store (see [`fixture_app`]) to the
/// sample events: the records the events create, read or change.
// Reads better whole: one event's answer compared field by field with its fixture.
pub fn assert_fixture_answer(operation: Operation, body: &Value, headers: &HeaderMap) {
    match operation {
        Operation::BusinessList => assert_eq!(body["meta"]["total_count"], 1),
        Operation::BusinessGet => assert_eq!(body["business_name"], "Existing"),
        Operation::BusinessCreate => {
            assert_eq!(body["business_name"], "Harbour Cafe");
            assert_eq!(body["user_id"], 42);
            assert_eq!(
                headers["location"],
                format!("/api/v2/businesses/{}/", body["id"])
            );
        }
        Operation::BusinessUpdate => assert_eq!(body["deleted"], true),
        Operation::ImageList => assert_eq!(body["meta"]["total_count"], 1),
        Operation::ImageGet => assert_eq!(body["image"], "img/upload/existing-abc.png"),
        // 204 No Content.
        Operation::ImageDelete => assert_eq!(body, &Value::Null),
        Operation::LocationList => {
            assert_eq!(body["meta"]["total_count"], 1);
            assert_eq!(body["objects"][0]["location_name"], "Quay");
        }
        Operation::LocationGet => {
            assert_eq!(body["location_name"], "Quay");
            assert_eq!(body["business_id"], 1);
        }
        Operation::LocationCreate => {
            assert_eq!(body["location_name"], "Harbour Cafe Quay");
            assert_eq!(body["business_id"], 1);
            assert_eq!(
                headers["location"],
                format!("/api/v2/locations/{}/", body["id"])
            );
        }
        Operation::LocationUpdate => assert_eq!(body["location_name"], "Quay North"),
        // 204 No Content.
        Operation::LocationDelete => assert_eq!(body, &Value::Null),
        Operation::SiteList => {
            assert_eq!(body["meta"]["total_count"], 1);
            assert_eq!(
                body["objects"][0]["formatted_url"],
                "http://www.harbourcafe.com/"
            );
        }
        Operation::SiteGet => {
            assert_eq!(body["title"], "Harbour Cafe");
            assert_eq!(body["business"]["business_name"], "Existing");
        }
        Operation::SiteCreate => {
            assert_eq!(body["subdomain"], "shop");
            assert_eq!(body["location_ids"], serde_json::json!([1]));
            assert_eq!(
                headers["location"],
                format!("/api/v2/sites/{}/", body["id"])
            );
        }
        Operation::SiteUpdate => assert_eq!(body["title"], "Harbour Cafe Online"),
        // 204 No Content: the site is disabled, not removed.
        Operation::SiteDelete => assert_eq!(body, &Value::Null),
        Operation::PostList => {
            assert_eq!(body["meta"]["total_count"], 1);
            assert_eq!(body["objects"][0]["title"], "Welcome");
        }
        Operation::PostGet => assert_eq!(body["content"], "<p>Welcome to the Harbour Cafe.</p>"),
        Operation::PostCreate => {
            assert_eq!(body["site_id"], 1);
            assert_eq!(
                headers["location"],
                format!("/api/v2/posts/{}/", body["id"])
            );
        }
        Operation::PostUpdate => {
            assert_eq!(body["title"], "Opening day, again");
            assert_eq!(body["content"], "<p>Welcome to the Harbour Cafe.</p>");
        }
        Operation::ImageUpload => {
            assert_eq!(
                (body["width"].as_u64(), body["height"].as_u64()),
                (Some(2), Some(2))
            );
            assert_eq!(body["business_id"], 1);
            assert_eq!(
                headers["location"],
                format!("/api/v2/images/{}/", body["id"])
            );
        }
        Operation::ImageUploadSession => {
            assert_eq!(body["method"], "POST");
            assert_eq!(body["max_bytes"], 5_508_789);
            let staged = format!(
                "/staging/{}",
                body["upload_id"].as_str().unwrap_or_default()
            );
            assert!(
                body["url"]
                    .as_str()
                    .is_some_and(|url| url.ends_with(&staged)),
                "{body}"
            );
        }
    }
}
