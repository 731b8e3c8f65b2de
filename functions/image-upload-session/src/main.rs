//! Lambda function for one operation: cold start only, the logic lives in `sitehost`.

use sitehost::api::{lambda, Operation};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    lambda::start(Operation::ImageUploadSession).await
}
