//! Image uploads on the production stores: DynamoDB (a table made from `template.yaml`)
//! and S3, both on moto. Both upload forms, the stored objects' headers, and the two
//! faults: an S3 put failing leaves no record and no objects; the DynamoDB write failing
//! leaves no objects.

use crate::support;

use std::sync::Arc;

use serde_json::json;
use sitehost::account::Caller;
use sitehost::error::ApiError;
use sitehost::image_record::ImageQuery;
use sitehost::s3::S3Files;
use sitehost::store::dynamo::DynamoStore;
use sitehost::store::files::{SharedFiles, CACHE_CONTROL};
use sitehost::store::{SharedStore, Stores};
use support::app::TestApp;
use support::media::{b64, file_server, jpeg, png, FailingFiles};

struct Aws {
    table: support::TestTable,
    s3: aws_sdk_s3::Client,
    bucket: String,
}

impl Aws {
    async fn create() -> Option<Aws> {
        let endpoint = support::aws_endpoint()?;
        let table = support::TestTable::create().await?;
        let s3 = support::s3::client(&endpoint);
        let bucket = support::s3::create_bucket(&s3, "sitehost-test", &table.name).await;
        Some(Aws { table, s3, bucket })
    }

    fn records(&self) -> SharedStore {
        Arc::new(DynamoStore::new(
            self.table.client.clone(),
            self.table.name.clone(),
        ))
    }

    fn files(&self) -> SharedFiles {
        Arc::new(S3Files::new(self.s3.clone(), self.bucket.clone()))
    }

    async fn object_keys(&self) -> Vec<String> {
        let listed = self
            .s3
            .list_objects_v2()
            .bucket(&self.bucket)
            .send()
            .await
            .expect("list objects");
        listed
            .contents()
            .iter()
            .filter_map(|o| o.key().map(str::to_string))
            .collect()
    }
}

#[tokio::test]
async fn both_upload_forms_on_dynamodb_and_s3() {
    let Some(aws) = Aws::create().await else {
        return;
    };
    let host = file_server(jpeg(900, 1200), "image/jpeg").await;
    let server = TestApp::builder()
        .stores(Stores {
            records: aws.records(),
            files: Some(aws.files()),
        })
        .config(|config| config.fetch.allow_hosts = vec![host.clone()])
        .spawn()
        .await;
    let client = server.partner_client(&server.key("aws").await);

    let by_base64 = client
        .post("/api/v2/images/", &json!({"upload": {"filename": "logo.png", "file": format!("data:image/png;base64,{}", b64(&png(300, 300)))}, "site_id": 7}))
        .await
        .expect("upload");
    assert_eq!(by_base64.status, 201, "{}", by_base64.body);
    let by_url = client
        .post(
            "/api/v2/images/",
            &json!({"external_url": format!("http://{host}/shop.jpg"), "site_id": 7}),
        )
        .await
        .expect("upload");
    assert_eq!(by_url.status, 201, "{}", by_url.body);
    assert_eq!(
        (
            by_url.body["width"].as_u64(),
            by_url.body["height"].as_u64()
        ),
        (Some(900), Some(1200))
    );

    let mut keys = aws.object_keys().await;
    keys.sort();
    // Each: the original, five variants and two WebP siblings.
    assert_eq!(keys.len(), 16, "{keys:?}");
    for image in [&by_base64.body, &by_url.body] {
        for size in ["original", "big", "large", "medium", "small", "thumbnail"] {
            let path = image["sizes"][size].as_str().expect("path");
            assert!(keys.iter().any(|k| k == path), "{path} stored");
        }
    }
    let original = by_url.body["image"].as_str().expect("path");
    let head = aws
        .s3
        .head_object()
        .bucket(&aws.bucket)
        .key(original)
        .send()
        .await
        .expect("head");
    assert_eq!(head.content_type(), Some("image/jpeg"));
    assert_eq!(head.cache_control(), Some(CACHE_CONTROL));
    let small = by_url.body["sizes"]["small"].as_str().expect("path");
    let sibling = aws
        .s3
        .head_object()
        .bucket(&aws.bucket)
        .key(format!("{small}.webp"))
        .send()
        .await
        .expect("head of the small variant's WebP sibling");
    assert_eq!(sibling.content_type(), Some("image/webp"));
    assert_eq!(sibling.cache_control(), Some(CACHE_CONTROL));

    let list = client
        .get("/api/v2/images/?site_id=7&order_by=-id")
        .await
        .expect("list");
    assert_eq!(list.body["meta"]["total_count"], 2);
    assert_eq!(list.body["objects"][0]["id"], by_url.body["id"]);
    let id = by_base64.body["id"].as_i64().expect("id");
    let detail = client
        .get(&format!("/api/v2/images/{id}/"))
        .await
        .expect("get");
    assert_eq!(detail.body["image"], by_base64.body["image"]);

    // The medium variant's WebP sibling, made on its first request as the image-sibling
    // function makes it: read from S3, encoded, stored with the files' headers.
    let siblings =
        sitehost::deployment::webp_siblings(Some(&aws.files())).expect("a build with images");
    let medium = by_url.body["sizes"]["medium"].as_str().expect("path");
    let made =
        sitehost::api::siblings::answer(&siblings, &http::Method::GET, &format!("/{medium}.webp"))
            .await;
    assert_eq!(made.status(), 200);
    let webp =
        image::load_from_memory_with_format(made.body(), image::ImageFormat::WebP).expect("a WebP");
    assert_eq!((webp.width(), webp.height()), (480, 640));
    let stored = aws
        .s3
        .head_object()
        .bucket(&aws.bucket)
        .key(format!("{medium}.webp"))
        .send()
        .await
        .expect("head of the medium variant's WebP sibling");
    assert_eq!(stored.content_type(), Some("image/webp"));
    assert_eq!(stored.cache_control(), Some(CACHE_CONTROL));
    // A variant S3 does not have (NoSuchKey, not an error) has no sibling.
    let missing = sitehost::api::siblings::answer(
        &siblings,
        &http::Method::GET,
        &format!("/{}.webp", medium.replace(".medium.", ".large.x")),
    )
    .await;
    assert_eq!(missing.status(), 404);
    // Deleting the image removes the sibling made on request with its other files.
    let deleted = client
        .send(
            "DELETE",
            &format!("/api/v2/images/{}/", by_url.body["id"]),
            None,
        )
        .await
        .expect("delete");
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    let left: Vec<String> = aws.object_keys().await;
    assert_eq!(left.len(), 8, "only the other image's files: {left:?}");
    aws.table.delete().await;
}

#[tokio::test]
async fn an_s3_put_failing_leaves_no_record_and_no_objects() {
    let Some(aws) = Aws::create().await else {
        return;
    };
    let app = TestApp::builder()
        .stores(Stores {
            records: aws.records(),
            files: Some(Arc::new(FailingFiles::new(aws.files(), ".medium."))),
        })
        .build()
        .await;
    let account = app.store.ensure_account("faulty").await.expect("account");
    let caller = Caller {
        account_id: account.id,
        user_id: 1,
        restrict_sub_id: None,
    };
    let body = json!({"upload": {"file": b64(&png(700, 500))}}).to_string();
    let result = app.upload(&caller, body.as_bytes()).await;
    assert!(matches!(result, Err(ApiError::Internal(_))), "{result:?}");
    assert_eq!(aws.object_keys().await, Vec::<String>::new());
    let query = ImageQuery {
        filter: Default::default(),
        descending: false,
        limit: 10,
        offset: 0,
    };
    assert_eq!(
        app.store
            .list_images(account.id, &query)
            .await
            .expect("list")
            .total_count,
        0
    );
    aws.table.delete().await;
}

#[tokio::test]
async fn a_dynamodb_write_failing_leaves_no_objects() {
    let Some(aws) = Aws::create().await else {
        return;
    };
    // A store on a table that does not exist: every write fails.
    let broken: SharedStore = Arc::new(DynamoStore::new(aws.table.client.clone(), "no-such-table"));
    let app = TestApp::builder()
        .stores(Stores {
            records: broken,
            files: Some(aws.files()),
        })
        .build()
        .await;
    let caller = Caller {
        account_id: 1,
        user_id: 1,
        restrict_sub_id: None,
    };
    let body = json!({"upload": {"file": b64(&png(400, 400))}}).to_string();
    let result = app.upload(&caller, body.as_bytes()).await;
    assert!(matches!(result, Err(ApiError::Internal(_))), "{result:?}");
    assert_eq!(aws.object_keys().await, Vec::<String>::new());
    aws.table.delete().await;
}
