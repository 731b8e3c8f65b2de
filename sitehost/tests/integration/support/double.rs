//! A table behind the DynamoDB double (`dynamo-double`): the double in front of this test
//! run's moto, sharing the gate every other moto client of the process takes, and a client
//! for the double.

use aws_sdk_dynamodb::config::retry::RetryConfig;
use aws_sdk_dynamodb::Client;
use dynamo_double::{DoubleHandle, Model};

use super::TestTable;

/// A table made from the template, a double in front of moto, and a client of the double.
///
/// The client takes no gate (the double gates its own requests to moto; a client holding
/// the gate while the double waits for it would never be answered) and no retries, so the
/// tests see the double's raw answers. `None` when the DynamoDB tests are skipped.
pub async fn table_behind_double(model: Model) -> Option<(TestTable, Client, DoubleHandle)> {
    let table = TestTable::create().await?;
    let endpoint = table.endpoint.clone();
    let listen = "127.0.0.1:0".parse().expect("a socket address");
    let double = dynamo_double::start(&endpoint, listen, model, Some(super::gate(&endpoint)))
        .await
        .unwrap_or_else(|e| panic!("cannot start the double in front of {endpoint}: {e:#}"));
    let client = client_without_retries(&double.url());
    Some((table, client, double))
}

/// A client for `endpoint` with the environment's credentials, sending requests as they
/// come and never retrying.
pub fn client_without_retries(endpoint: &str) -> Client {
    let config = super::client_config(endpoint)
        .retry_config(RetryConfig::disabled())
        .build();
    Client::from_conf(config)
}
