//! S3 on the test run's moto_server, beside the DynamoDB tables of `support`.

use aws_sdk_s3::config::{BehaviorVersion, Credentials, Region};

/// An S3 client for `endpoint` (moto accepts any credentials; paths, not virtual hosts).
pub fn client(endpoint: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new("us-east-1"))
        .credentials_provider(Credentials::new("testing", "testing", None, None, "tests"))
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// Creates a bucket for one test, named `<prefix>-<its table's name>` (unique per test, in
/// the characters bucket names allow); returns the name.
pub async fn create_bucket(s3: &aws_sdk_s3::Client, prefix: &str, table: &str) -> String {
    let bucket = format!("{prefix}-{}", table.to_ascii_lowercase().replace('_', "-"));
    s3.create_bucket()
        .bucket(&bucket)
        .send()
        .await
        .expect("create bucket");
    bucket
}
