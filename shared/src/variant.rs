//! The seam between the common crate and its two optional parts: the only module besides
//! `lib.rs` that names a cargo feature. `images` adds `upload` (pipeline, fetcher, S3),
//! `local` adds `local` (SQLite store, local server, partner client); six of the seven
//! Lambda functions build with neither, which keeps them small. Each function here answers
//! for both builds, so callers never need a `cfg` of their own.

use std::path::Path;
use std::sync::Arc;

use crate::config::Config;
use crate::error::Result;
use crate::operations::ImageUploads;
use crate::store::files::SharedFiles;
use crate::store::Stores;

/// The embedded store under `data_dir` (SQLite and files).
pub fn embedded_stores(data_dir: &Path) -> Result<Stores> {
    #[cfg(feature = "local")]
    return Stores::embedded(data_dir);
    #[cfg(not(feature = "local"))]
    {
        let _ = data_dir;
        Err(crate::error::ApiError::internal(
            "this build has no embedded store: set SITEHOST_STORE=dynamodb",
        ))
    }
}

/// The S3 file store of a DynamoDB deployment: only a build that uploads writes files.
pub fn bucket_files(aws: &aws_config::SdkConfig, bucket: Option<&str>) -> Option<SharedFiles> {
    #[cfg(feature = "images")]
    return bucket.map(|bucket| -> SharedFiles {
        Arc::new(crate::upload::s3::S3Files::new(
            aws_sdk_s3::Client::new(aws),
            bucket.to_string(),
        ))
    });
    #[cfg(not(feature = "images"))]
    {
        let _ = (aws, bucket);
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
