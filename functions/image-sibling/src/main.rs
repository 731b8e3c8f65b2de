//! Lambda function behind the frontend's image origin group, not the API: makes a variant's
//! WebP or AVIF sibling on its first request. Cold start only; the logic lives in `sitehost`.

use sitehost::api::lambda;

#[tokio::main]
async fn main() -> Result<(), lambda_http::Error> {
    lambda::start_siblings().await
}
