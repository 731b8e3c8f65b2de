//! How a deployment is composed from the build it runs in: its stores, and the parts that
//! only some builds have. This is the seam between the common crate and its optional parts:
//! `files` (the S3 file store, `store::s3`), `images` (which adds `upload`, with
//! `image_pipeline` and `fetch`) and `local` (the embedded store, for the `sitehost`
//! command). Besides the module declarations (`lib.rs`, `store/mod.rs`), the only module
//! that names a cargo feature. Each function here answers for every build, so callers
//! never need a `cfg` of their own. Most Lambda functions build with no feature;
//! image-delete and image-upload-session with `files`, image-upload and image-sibling
//! with `images`.

use std::sync::Arc;

use crate::config::Config;
use crate::error::Result;
use crate::operations::siblings::Siblings;
use crate::operations::ImageUploads;
use crate::store::dynamo::DynamoStore;
use crate::store::files::SharedFiles;
use crate::store::Stores;

/// The stores a configuration names, either kind (the `sitehost` command's choice).
#[cfg(feature = "local")]
pub async fn open_stores(config: &Config) -> Result<Stores> {
    match &config.store {
        crate::config::StoreKind::Embedded { data_dir } => Stores::embedded(data_dir),
        crate::config::StoreKind::DynamoDb { table } => dynamodb_stores(config, table).await,
    }
}

/// The stores of a DynamoDB deployment: the table, and in a build with the S3 file store
/// (uploads, deletes), the bucket (`SITEHOST_BUCKET`) as the file store. Builds clients
/// only, no network I/O: fit for a Lambda cold start.
pub async fn dynamodb_stores(config: &Config, table: &str) -> Result<Stores> {
    let aws = aws_config::load_defaults(aws_config::BehaviorVersion::latest()).await;
    let records = DynamoStore::new(aws_sdk_dynamodb::Client::new(&aws), table.to_string())
        .with_id_block(config.id_block);
    Ok(Stores {
        records: Arc::new(records),
        files: bucket_files(config, &aws),
    })
}

/// The bucket (`SITEHOST_BUCKET`) as the file store, in a build with the S3 file store,
/// with the staging bucket of staged uploads (`SITEHOST_STAGING_BUCKET`) when there is one.
pub fn bucket_files(config: &Config, aws: &aws_config::SdkConfig) -> Option<SharedFiles> {
    #[cfg(feature = "files")]
    return config.bucket.as_ref().map(|bucket| -> SharedFiles {
        let files = crate::store::s3::S3Files::new(aws_sdk_s3::Client::new(aws), bucket.clone());
        Arc::new(match (&config.staging_bucket, aws.credentials_provider()) {
            (Some(staging), Some(credentials)) => {
                files.with_staging(staging.clone(), aws.endpoint_url(), credentials)
            }
            _ => files,
        })
    });
    #[cfg(not(feature = "files"))]
    {
        let _ = (config, aws);
        None
    }
}

/// Siblings (WebP, AVIF) made on first request, in a build with the pipeline and a
/// deployment with a file store.
pub fn siblings(files: Option<&SharedFiles>) -> Option<Siblings> {
    #[cfg(feature = "images")]
    return files.map(|files| {
        Siblings::new(Arc::clone(files), |source, format| {
            crate::image_pipeline::sibling_of_variant(
                source,
                format,
                &crate::config::ImageLimits::default(),
            )
        })
    });
    #[cfg(not(feature = "images"))]
    {
        let _ = files;
        None
    }
}

/// Image uploads, in a build with the pipeline and a deployment with a file store.
pub fn image_uploads(
    config: &Config,
    files: Option<&SharedFiles>,
) -> Result<Option<Arc<dyn ImageUploads>>> {
    #[cfg(feature = "images")]
    return match files {
        Some(files) => Ok(Some(Arc::new(crate::upload::Uploads::new(
            config,
            Arc::clone(files),
        )?))),
        None => Ok(None),
    };
    #[cfg(not(feature = "images"))]
    {
        let _ = (config, files);
        Ok(None)
    }
}
