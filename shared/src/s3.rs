//! Upload files in S3, served publicly through the CloudFront frontend host: the file store
//! of a deployment (the `files` feature, which `images` includes). Uploads write them; a
//! delete removes them.

use anyhow::Context;
use async_trait::async_trait;
use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;

use crate::error::Result;
use crate::store::files::{FilePage, FileStore, StoredFile, CACHE_CONTROL};

pub struct S3Files {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl S3Files {
    pub fn new(client: aws_sdk_s3::Client, bucket: impl Into<String>) -> Self {
        S3Files {
            client,
            bucket: bucket.into(),
        }
    }
}

#[async_trait]
impl FileStore for S3Files {
    async fn put(&self, path: &str, bytes: Bytes, content_type: &str) -> Result<()> {
        self.client
            .put_object()
            .bucket(&self.bucket)
            .key(path)
            .content_type(content_type)
            .cache_control(CACHE_CONTROL)
            .body(ByteStream::from(bytes))
            .send()
            .await
            .with_context(|| format!("s3 put {path}"))?;
        Ok(())
    }

    async fn delete(&self, path: &str) -> Result<()> {
        self.client
            .delete_object()
            .bucket(&self.bucket)
            .key(path)
            .send()
            .await
            .with_context(|| format!("s3 delete {path}"))?;
        Ok(())
    }

    /// One `ListObjectsV2` page (up to 1,000 keys, in key order) with `LastModified`.
    async fn list(&self, prefix: &str, next: Option<String>) -> Result<FilePage> {
        let out = self
            .client
            .list_objects_v2()
            .bucket(&self.bucket)
            .prefix(prefix)
            .set_continuation_token(next)
            .send()
            .await
            .with_context(|| format!("s3 list {prefix}"))?;
        let files = out
            .contents()
            .iter()
            .filter_map(|object| {
                Some(StoredFile {
                    path: object.key()?.to_string(),
                    modified: object.last_modified()?.secs(),
                })
            })
            .collect();
        let next = match out.is_truncated() {
            Some(true) => out.next_continuation_token().map(str::to_string),
            _ => None,
        };
        Ok(FilePage { files, next })
    }
}
