//! Lambda function for one operation: cold start only, the logic lives in `sitehost`.

use sitehost::http::{lambda, Operation};

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    lambda::start(Operation::ImageUpload).await
}
