//! Image uploads on the production stores: DynamoDB (a table made from `template.yaml`)
//! and S3, both on moto. Both upload forms, the stored objects' headers, and the two
//! faults: an S3 put failing leaves no record and no objects; the DynamoDB write failing
//! leaves no objects.

use crate::support;

use std::sync::Arc;

use serde_json::json;
use sitehost::domain::account::Caller;
use sitehost::domain::image_record::ImageQuery;
use sitehost::error::ApiError;
use sitehost::store::dynamo::DynamoStore;
use sitehost::store::files::{SharedFiles, CACHE_CONTROL};
use sitehost::store::s3::S3Files;
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

// Reads better whole: one image on moto through upload, siblings and delete (a table per split).
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
    let siblings = sitehost::deployment::siblings(Some(&aws.files())).expect("a build with images");
    let medium = by_url.body["sizes"]["medium"].as_str().expect("path");
    let made = sitehost::api::sibling_answer::answer(
        &siblings,
        &http::Method::GET,
        &format!("/{medium}.webp"),
        None,
    )
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
    // Its AVIF sibling the same way, stored as image/avif.
    let made = sitehost::api::sibling_answer::answer(
        &siblings,
        &http::Method::GET,
        &format!("/{medium}.avif"),
        None,
    )
    .await;
    assert_eq!(made.status(), 200);
    assert_eq!(made.headers()["content-type"], "image/avif");
    assert_eq!(made.body().get(4..12), Some(&b"ftypavif"[..]));
    let stored = aws
        .s3
        .head_object()
        .bucket(&aws.bucket)
        .key(format!("{medium}.avif"))
        .send()
        .await
        .expect("head of the medium variant's AVIF sibling");
    assert_eq!(stored.content_type(), Some("image/avif"));
    assert_eq!(stored.cache_control(), Some(CACHE_CONTROL));
    // A variant S3 does not have (NoSuchKey, not an error) has no sibling.
    let missing = sitehost::api::sibling_answer::answer(
        &siblings,
        &http::Method::GET,
        &format!("/{}.webp", medium.replace(".medium.", ".large.x")),
        None,
    )
    .await;
    assert_eq!(missing.status(), 404);
    // Deleting the image removes the siblings made on request (WebP, AVIF) with its other
    // files.
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

/// Every object of the bucket with its bytes, by key.
async fn object_bytes(aws: &Aws) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut objects = std::collections::BTreeMap::new();
    for key in aws.object_keys().await {
        let out = aws
            .s3
            .get_object()
            .bucket(&aws.bucket)
            .key(&key)
            .send()
            .await
            .expect("get object");
        let bytes = out.body.collect().await.expect("body").into_bytes();
        objects.insert(key, bytes.to_vec());
    }
    objects
}

/// Every item of the test's table (a point-in-time snapshot, as a restore would make).
async fn table_items(
    aws: &Aws,
) -> Vec<std::collections::HashMap<String, aws_sdk_dynamodb::types::AttributeValue>> {
    let out = aws
        .table
        .client
        .scan()
        .table_name(&aws.table.name)
        .consistent_read(true)
        .send()
        .await
        .expect("scan");
    assert!(out.last_evaluated_key().is_none(), "one page holds them");
    out.items().to_vec()
}

/// The restore drill: an image uploaded, deleted through the API, its records put back as a
/// point-in-time restore's roll back does; `sitehost files restore` then brings its files
/// back from the versioned bucket, byte for byte. A dry run changes nothing, and a file
/// with no earlier version is reported as lost.
// Reads better whole: the restore drill is one sequence, each step on what the last left.
#[tokio::test]
async fn after_a_table_restore_the_deleted_files_come_back_from_their_versions() {
    use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
    use sitehost::upload::restore::restore_files;
    let Some(aws) = Aws::create().await else {
        return;
    };
    aws.s3
        .put_bucket_versioning()
        .bucket(&aws.bucket)
        .versioning_configuration(
            VersioningConfiguration::builder()
                .status(BucketVersioningStatus::Enabled)
                .build(),
        )
        .send()
        .await
        .expect("versioning on");
    let (records, files) = (aws.records(), aws.files());
    let server = TestApp::builder()
        .stores(Stores {
            records: records.clone(),
            files: Some(files.clone()),
        })
        .spawn()
        .await;
    let client = server.partner_client(&server.key("drill").await);
    let upload = client
        .post("/api/v2/images/", &json!({"upload": {"filename": "shop.png", "file": format!("data:image/png;base64,{}", b64(&png(700, 500)))}}))
        .await
        .expect("upload");
    assert_eq!(upload.status, 201, "{}", upload.body);
    let id = upload.body["id"].as_i64().expect("id");
    let uploaded = object_bytes(&aws).await;
    assert_eq!(uploaded.len(), 8, "original, five variants, two siblings");
    let snapshot = table_items(&aws).await;

    let deleted = client
        .send("DELETE", &format!("/api/v2/images/{id}/"), None)
        .await
        .expect("delete");
    assert_eq!(deleted.status, 204, "{}", deleted.body);
    assert!(aws.object_keys().await.is_empty());
    // The roll back: every item of the snapshot written back (table_sync.py).
    for item in snapshot {
        aws.table
            .client
            .put_item()
            .table_name(&aws.table.name)
            .set_item(Some(item))
            .send()
            .await
            .expect("put back");
    }
    assert_eq!(
        client
            .get(&format!("/api/v2/images/{id}/"))
            .await
            .expect("get")
            .status,
        200,
        "the record is back"
    );

    let dry = restore_files(records.as_ref(), files.as_ref(), true)
        .await
        .expect("dry run");
    assert_eq!(dry.images, 1);
    assert_eq!(dry.restored.len(), 8, "{dry:?}");
    assert!(dry.lost.is_empty(), "{dry:?}");
    assert!(
        aws.object_keys().await.is_empty(),
        "a dry run changes nothing"
    );

    let report = restore_files(records.as_ref(), files.as_ref(), false)
        .await
        .expect("restore");
    assert_eq!(report, dry);
    assert_eq!(object_bytes(&aws).await, uploaded, "byte for byte");
    let again = restore_files(records.as_ref(), files.as_ref(), false)
        .await
        .expect("restore again");
    assert_eq!((again.images, again.complete), (1, 1));
    assert!(again.restored.is_empty() && again.lost.is_empty());

    // A file whose every version is gone (expired) cannot be restored, and says so.
    let large = upload.body["sizes"]["large"].as_str().expect("path");
    let history = aws
        .s3
        .list_object_versions()
        .bucket(&aws.bucket)
        .prefix(large)
        .send()
        .await
        .expect("versions");
    let ids = history
        .versions()
        .iter()
        .filter_map(|v| v.version_id())
        .chain(
            history
                .delete_markers()
                .iter()
                .filter_map(|m| m.version_id()),
        );
    for version in ids {
        aws.s3
            .delete_object()
            .bucket(&aws.bucket)
            .key(large)
            .version_id(version)
            .send()
            .await
            .expect("delete version");
    }
    let report = restore_files(records.as_ref(), files.as_ref(), false)
        .await
        .expect("restore");
    assert_eq!(report.lost, vec![large.to_string()]);
    assert!(report.restored.is_empty());
    aws.table.delete().await;
}
