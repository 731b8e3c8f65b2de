//! Upload files in S3, served publicly through the CloudFront frontend host: the file store
//! of a deployment (the `files` feature, which `images` includes). Uploads write them; a
//! delete removes them. Staged uploads' files (`staging/`) go to a bucket of their own,
//! posted there by the client with a presigned form (`post_form`).

use anyhow::Context;
use async_trait::async_trait;
use aws_sdk_s3::operation::get_object::GetObjectError;
use aws_sdk_s3::operation::head_object::HeadObjectError;
use aws_sdk_s3::primitives::ByteStream;
use bytes::Bytes;

use aws_sdk_s3::config::SharedCredentialsProvider;

use crate::error::{ApiError, Result};
use crate::store::files::{
    FilePage, FileStore, FileVersion, StoredFile, UploadForm, CACHE_CONTROL, STAGING_PREFIX,
};

pub mod post_form;

/// An S3 call's failure, by the one mapping ([`ApiError::from_aws`]): a 503 with
/// `Retry-After` for `InternalError`, `SlowDown`, a 5xx, a timeout; an internal error
/// otherwise.
fn s3_error<E>(operation: &str, err: aws_sdk_s3::error::SdkError<E>) -> ApiError
where
    E: aws_sdk_s3::error::ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
{
    ApiError::from_aws("s3", operation, err)
}

pub struct S3Files {
    client: aws_sdk_s3::Client,
    bucket: String,
    staging: Option<Staging>,
}

/// The bucket of staged uploads' files, the URL clients post their forms to, and the
/// credentials the forms are signed with.
struct Staging {
    bucket: String,
    form_url: String,
    credentials: SharedCredentialsProvider,
}

impl S3Files {
    pub fn new(client: aws_sdk_s3::Client, bucket: impl Into<String>) -> Self {
        S3Files {
            client,
            bucket: bucket.into(),
            staging: None,
        }
    }

    /// Takes staged uploads into `bucket`, posted to the bucket's regional endpoint, or to
    /// `endpoint` (path style) when the clients use one (`AWS_ENDPOINT_URL`: moto), with
    /// forms signed with `credentials` (the client's: the SDK's `Config` no longer hands
    /// them out).
    pub fn with_staging(
        mut self,
        bucket: impl Into<String>,
        endpoint: Option<&str>,
        credentials: SharedCredentialsProvider,
    ) -> Self {
        let bucket = bucket.into();
        let region = self.region();
        let form_url = match endpoint {
            Some(endpoint) => format!("{}/{bucket}", endpoint.trim_end_matches('/')),
            None => format!("https://{bucket}.s3.{region}.amazonaws.com/"),
        };
        self.staging = Some(Staging {
            bucket,
            form_url,
            credentials,
        });
        self
    }

    fn region(&self) -> String {
        self.client
            .config()
            .region()
            .map_or_else(|| "us-east-1".to_string(), ToString::to_string)
    }

    /// The bucket a path lives in: staged files in the staging bucket, the rest in the
    /// files bucket.
    fn bucket_of(&self, path: &str) -> &str {
        match &self.staging {
            Some(staging) if path.starts_with(STAGING_PREFIX) => &staging.bucket,
            _ => &self.bucket,
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
            .map_err(|e| s3_error(&format!("put {path}"), e))?;
        Ok(())
    }

    async fn delete(&self, path: &str) -> Result<()> {
        self.client
            .delete_object()
            .bucket(self.bucket_of(path))
            .key(path)
            .send()
            .await
            .map_err(|e| s3_error(&format!("delete {path}"), e))?;
        Ok(())
    }

    /// `GetObject`; a missing key is `None` (the function may list the bucket, so S3 says
    /// NoSuchKey rather than AccessDenied). The size is checked before the body is read.
    async fn read(&self, path: &str, max_bytes: u64) -> Result<Option<Bytes>> {
        let out = match self
            .client
            .get_object()
            .bucket(self.bucket_of(path))
            .key(path)
            .send()
            .await
        {
            Ok(out) => out,
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(GetObjectError::is_no_such_key) =>
            {
                return Ok(None)
            }
            Err(err) => return Err(s3_error(&format!("get {path}"), err)),
        };
        let size = u64::try_from(out.content_length().unwrap_or_default()).unwrap_or_default();
        if size > max_bytes {
            return Err(ApiError::internal(format!(
                "s3 get {path}: {size} bytes, more than the {max_bytes} allowed"
            )));
        }
        // An answer that broke off is a failure AWS documents as temporary.
        let bytes = out
            .body
            .collect()
            .await
            .map_err(|e| ApiError::Temporary {
                service: "s3",
                operation: format!("get {path}: reading the body"),
                source: anyhow::Error::new(e),
            })?
            .into_bytes();
        Ok(Some(bytes))
    }

    /// A presigned POST onto the staging bucket (`post_form`), signed with the client's
    /// credentials (the function's role: its `s3:PutObject` on `staging/*` is what the form
    /// may do).
    async fn staged_upload_form(
        &self,
        path: &str,
        max_bytes: u64,
        expires_at: i64,
        now: i64,
    ) -> Result<UploadForm> {
        use aws_sdk_s3::config::ProvideCredentials;
        let staging = self
            .staging
            .as_ref()
            .filter(|_| path.starts_with(STAGING_PREFIX))
            .ok_or_else(|| {
                ApiError::internal("no staging bucket for staged uploads (SITEHOST_STAGING_BUCKET)")
            })?;
        let credentials = staging
            .credentials
            .provide_credentials()
            .await
            .context("credentials for a presigned POST")?;
        let region = self.region();
        let fields = post_form::presigned_post_fields(
            &post_form::PostPolicy {
                bucket: &staging.bucket,
                key: path,
                max_bytes,
                expires_at,
            },
            &post_form::Signer {
                access_key_id: credentials.access_key_id(),
                secret_access_key: credentials.secret_access_key(),
                session_token: credentials.session_token(),
                region: &region,
                now,
            },
        )?;
        Ok(UploadForm {
            url: staging.form_url.clone(),
            fields,
        })
    }

    /// `HeadObject`; NotFound is `false`.
    async fn exists(&self, path: &str) -> Result<bool> {
        match self
            .client
            .head_object()
            .bucket(&self.bucket)
            .key(path)
            .send()
            .await
        {
            Ok(_) => Ok(true),
            Err(err)
                if err
                    .as_service_error()
                    .is_some_and(HeadObjectError::is_not_found) =>
            {
                Ok(false)
            }
            Err(err) => Err(s3_error(&format!("head {path}"), err)),
        }
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
            .map_err(|e| s3_error(&format!("list {prefix}"), e))?;
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

    /// S3 keeps versions in a versioned bucket. Not asked of the bucket: in one without
    /// versioning `ListObjectVersions` finds no earlier version of a deleted file, and the
    /// restore reports each such file as lost.
    async fn keeps_versions(&self) -> Result<bool> {
        Ok(true)
    }

    /// `ListObjectVersions`, every page. S3 lists each key's versions newest first; the
    /// delete markers come after all the versions (only their `is_latest` matters).
    async fn versions(&self, prefix: &str) -> Result<Vec<FileVersion>> {
        let mut versions = Vec::new();
        let mut markers = Vec::new();
        let (mut key_marker, mut version_marker) = (None, None);
        loop {
            let out = self
                .client
                .list_object_versions()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_key_marker(key_marker.take())
                .set_version_id_marker(version_marker.take())
                .send()
                .await
                .map_err(|e| s3_error(&format!("list versions {prefix}"), e))?;
            versions.extend(out.versions().iter().filter_map(|v| {
                Some(FileVersion {
                    path: v.key()?.to_string(),
                    version_id: v.version_id()?.to_string(),
                    is_latest: v.is_latest().unwrap_or(false),
                    deleted: false,
                })
            }));
            markers.extend(out.delete_markers().iter().filter_map(|m| {
                Some(FileVersion {
                    path: m.key()?.to_string(),
                    version_id: m.version_id()?.to_string(),
                    is_latest: m.is_latest().unwrap_or(false),
                    deleted: true,
                })
            }));
            if out.is_truncated() != Some(true) {
                break;
            }
            key_marker = out.next_key_marker().map(str::to_string);
            version_marker = out.next_version_id_marker().map(str::to_string);
            if key_marker.is_none() {
                break;
            }
        }
        versions.extend(markers);
        Ok(versions)
    }

    /// `CopyObject` of the version onto its own key: a new current version with the same
    /// bytes and headers (the metadata is copied). Chosen over deleting the delete marker:
    /// the delete stays in the history, and it needs no `s3:DeleteObjectVersion`, the one
    /// permission that could destroy versions.
    async fn restore_version(&self, path: &str, version_id: &str) -> Result<()> {
        use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
        // A copy source is URL-encoded; `/` separates the bucket from the key and stays.
        const KEY: &AsciiSet = &NON_ALPHANUMERIC
            .remove(b'/')
            .remove(b'-')
            .remove(b'_')
            .remove(b'.')
            .remove(b'~');
        let source = format!(
            "{}/{}?versionId={}",
            self.bucket,
            utf8_percent_encode(path, KEY),
            utf8_percent_encode(version_id, NON_ALPHANUMERIC)
        );
        self.client
            .copy_object()
            .bucket(&self.bucket)
            .key(path)
            .copy_source(source)
            .send()
            .await
            .map_err(|e| s3_error(&format!("copy {path} from version {version_id}"), e))?;
        Ok(())
    }
}
