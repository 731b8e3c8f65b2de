//! Test support: the app under test (`app::TestApp`), a DynamoDB client for the endpoint
//! the test run provides (a moto_server), and throwaway tables created from
//! `template.yaml`'s own `RecordsTable` definition, so the tests exercise exactly the table
//! that gets deployed.
//!
//! `SITEHOST_TEST_AWS_ENDPOINT` (e.g. `http://127.0.0.1:5000`) enables the DynamoDB tests.
//! Without it they print "skipped: no moto" and pass, unless `SITEHOST_TEST_REQUIRE_AWS=1`
//! (as `scripts/test` sets), in which case they fail. `SITEHOST_TEST_AWS_ENDPOINTS`, a
//! comma-separated list of moto_servers, spreads the tests' tables over all of them in
//! turn: each moto answers on one core and one request at a time (`OneAtATime`), so two
//! of them halve the suite's wait on moto.

pub mod app;
pub mod double;
pub mod events;
pub mod media;
pub mod node;
pub mod openapi;
pub mod s3;

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use aws_sdk_dynamodb::config::{
    BehaviorVersion, Credentials, Region, StalledStreamProtectionConfig,
};
use aws_sdk_dynamodb::operation::create_table::builders::CreateTableFluentBuilder;
use aws_sdk_dynamodb::types::{
    AttributeDefinition, BillingMode, GlobalSecondaryIndex, KeySchemaElement, KeyType,
    LocalSecondaryIndex, Projection, ProjectionType, ProvisionedThroughput, ScalarAttributeType,
    TableStatus, TimeToLiveSpecification,
};
use aws_sdk_dynamodb::Client;
use aws_smithy_http_client::tls;
use aws_smithy_runtime_api::client::http::{
    HttpClient, HttpConnector, HttpConnectorFuture, HttpConnectorSettings, SharedHttpClient,
    SharedHttpConnector,
};
use aws_smithy_runtime_api::client::orchestrator::HttpRequest;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use serde_yaml::Value;

pub const ENDPOINT_VAR: &str = "SITEHOST_TEST_AWS_ENDPOINT";
pub const ENDPOINTS_VAR: &str = "SITEHOST_TEST_AWS_ENDPOINTS";
pub const REQUIRE_VAR: &str = "SITEHOST_TEST_REQUIRE_AWS";
/// Set to `1` to let requests run concurrently (against real DynamoDB; see `OneAtATime`).
pub const CONCURRENT_VAR: &str = "SITEHOST_TEST_AWS_CONCURRENT";
/// The template resource the tables are made from.
pub const TABLE_RESOURCE: &str = "RecordsTable";

/// What the tests' `tracing` events wrote, as JSON lines.
#[derive(Clone, Default)]
pub struct CapturedLogs(Arc<Mutex<Vec<u8>>>);

impl CapturedLogs {
    /// Where the capture ends now: `since` this reads only what comes later.
    pub fn end(&self) -> usize {
        self.lock().len()
    }

    /// The lines captured after `start` (an `end` taken earlier).
    pub fn since(&self, start: usize) -> String {
        String::from_utf8_lossy(&self.lock()[start..]).into_owned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

// Each event arrives in one `write` call, so lines never interleave.
impl std::io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.lock().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for CapturedLogs {
    type Writer = CapturedLogs;
    fn make_writer(&'a self) -> CapturedLogs {
        self.clone()
    }
}

/// Installs the test binary's one `tracing` subscriber (on first call) and returns what it
/// captured. A subscriber is process-wide and the tests run on parallel threads of one
/// process, so every test shares it: it writes what `RUST_LOG` asks for (e.g. the stores'
/// consumed capacity at `RUST_LOG=sitehost=debug`) to the test output, and keeps every
/// event at INFO and above as a JSON line for the tests that check what the logs say (a
/// per-thread subscriber would lose events to the callsite interest that other tests'
/// threads cache meanwhile).
pub fn init_tracing() -> &'static CapturedLogs {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;
    static CAPTURED: OnceLock<CapturedLogs> = OnceLock::new();
    CAPTURED.get_or_init(|| {
        let captured = CapturedLogs::default();
        let shown: Targets = std::env::var("RUST_LOG")
            .ok()
            .and_then(|directives| directives.parse().ok())
            .unwrap_or_else(|| Targets::new().with_default(LevelFilter::OFF));
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_test_writer()
                    .with_filter(shown),
            )
            .with(
                tracing_subscriber::fmt::layer()
                    .json()
                    .with_writer(captured.clone())
                    .with_filter(LevelFilter::INFO),
            )
            .init();
        captured
    })
}

/// An AWS endpoint of this test run, or `None` (after saying so) when the DynamoDB tests
/// are to be skipped. Panics when they are required but no endpoint is set. With several
/// endpoints (`SITEHOST_TEST_AWS_ENDPOINTS`), each call answers the next one in turn: what
/// must live on one moto (a table and the double in front of it) takes one answer.
pub fn aws_endpoint() -> Option<String> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    static LISTED: OnceLock<Vec<String>> = OnceLock::new();
    let listed = LISTED.get_or_init(|| {
        std::env::var(ENDPOINTS_VAR)
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(String::from)
            .collect()
    });
    if !listed.is_empty() {
        return Some(listed[NEXT.fetch_add(1, Ordering::Relaxed) % listed.len()].clone());
    }
    match std::env::var(ENDPOINT_VAR) {
        Ok(endpoint) if !endpoint.trim().is_empty() => Some(endpoint),
        _ => {
            assert!(
                std::env::var(REQUIRE_VAR).as_deref() != Ok("1"),
                "{REQUIRE_VAR}=1 but {ENDPOINT_VAR} is not set: start a moto_server and point \
                 {ENDPOINT_VAR} at it"
            );
            eprintln!("skipped: no moto ({ENDPOINT_VAR} is not set)");
            None
        }
    }
}

/// Sends the requests of every client of this test process one at a time.
///
/// moto_server handles requests on threads without locking its tables: concurrent
/// `TransactWriteItems` on one table lose `ADD` increments and fail with 500 "dictionary
/// changed size during iteration" (50 concurrent 33-action transactions left a counter at
/// 14 to 17 instead of 50). Real DynamoDB serializes writes per item itself and cancels
/// conflicting transactions with `TransactionConflict`, which the store retries. Serializing
/// at the HTTP layer keeps the stores' own concurrency real (tasks still interleave between
/// requests: a read, another task's write, then a conditional write that fails) while moto
/// only ever sees one request at a time.
#[derive(Debug, Clone)]
struct OneAtATime {
    inner: SharedHttpClient,
    gate: Arc<tokio::sync::Mutex<()>>,
}

#[derive(Debug)]
struct GatedConnector {
    inner: SharedHttpConnector,
    gate: Arc<tokio::sync::Mutex<()>>,
}

/// The process-wide lock every request to the moto at `endpoint` takes (also the DynamoDB
/// double's in front of it, see `double`).
pub fn gate(endpoint: &str) -> Arc<tokio::sync::Mutex<()>> {
    type Gates = Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>;
    static GATES: OnceLock<Gates> = OnceLock::new();
    let mut gates = GATES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    gates.entry(endpoint.to_string()).or_default().clone()
}

impl HttpClient for OneAtATime {
    fn http_connector(
        &self,
        settings: &HttpConnectorSettings,
        components: &RuntimeComponents,
    ) -> SharedHttpConnector {
        SharedHttpConnector::new(GatedConnector {
            inner: self.inner.http_connector(settings, components),
            gate: self.gate.clone(),
        })
    }
}

impl HttpConnector for GatedConnector {
    fn call(&self, request: HttpRequest) -> HttpConnectorFuture {
        let inner = self.inner.clone();
        let gate = self.gate.clone();
        HttpConnectorFuture::new(async move {
            let _turn = gate.lock_owned().await;
            inner.call(request).await
        })
    }
}

/// The configuration of a client for `endpoint` with the credentials of the environment
/// (`testing` by default: moto accepts any).
pub fn client_config(endpoint: &str) -> aws_sdk_dynamodb::config::Builder {
    let var = |name: &str, default: &str| std::env::var(name).unwrap_or_else(|_| default.into());
    let credentials = Credentials::new(
        var("AWS_ACCESS_KEY_ID", "testing"),
        var("AWS_SECRET_ACCESS_KEY", "testing"),
        std::env::var("AWS_SESSION_TOKEN").ok(),
        None,
        "sitehost-tests",
    );
    aws_sdk_dynamodb::Config::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(var("AWS_REGION", "us-east-1")))
        .credentials_provider(credentials)
        // A request queued at its moto's gate (`OneAtATime`) receives nothing while it
        // waits, and the SDK's stalled-stream protection took more than 5 s of that for a
        // dead connection: concurrent tests on a loaded machine failed with "minimum
        // throughput was specified at 1 B/s, but throughput of 0 B/s was observed".
        .stalled_stream_protection(StalledStreamProtectionConfig::disabled())
}

/// A client for `endpoint` (`client_config`) that sends one request at a time (see
/// `OneAtATime`), unless `SITEHOST_TEST_AWS_CONCURRENT=1`.
pub fn client(endpoint: &str) -> Client {
    let config = client_config(endpoint);
    // The SDK's default client: hyper with rustls on aws-lc.
    let http = aws_smithy_http_client::Builder::new()
        .tls_provider(tls::Provider::Rustls(
            tls::rustls_provider::CryptoMode::AwsLc,
        ))
        .build_https();
    let config = if std::env::var(CONCURRENT_VAR).as_deref() == Ok("1") {
        config.http_client(http)
    } else {
        config.http_client(SharedHttpClient::new(OneAtATime {
            inner: http,
            gate: gate(endpoint),
        }))
    }
    .build();
    Client::from_conf(config)
}

/// `RecordsTable`'s `Properties`, read from the workspace's `template.yaml`.
pub fn records_table_properties() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../template.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    table_properties(&text, TABLE_RESOURCE)
}

/// The `Properties` of a table resource of a CloudFormation/SAM template. The template is
/// parsed into `serde_yaml::Value`, which keeps tags such as `!Ref` instead of rejecting them.
pub fn table_properties(template: &str, resource: &str) -> Value {
    let doc: Value = serde_yaml::from_str(template).expect("template.yaml is not valid YAML");
    let resource_value = &doc["Resources"][resource];
    assert_eq!(
        resource_value["Type"].as_str(),
        Some("AWS::DynamoDB::Table"),
        "{resource} is not an AWS::DynamoDB::Table"
    );
    resource_value["Properties"].clone()
}

fn text<'a>(value: &'a Value, what: &str) -> &'a str {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} must be a plain string in the template, got {value:?}"))
}

fn list<'a>(value: &'a Value, what: &str) -> &'a [Value] {
    value
        .as_sequence()
        .map(Vec::as_slice)
        .unwrap_or_else(|| panic!("{what} must be a list in the template, got {value:?}"))
}

fn units(value: &Value, what: &str) -> i64 {
    value
        .as_i64()
        .or_else(|| value.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("{what} must be an integer, got {value:?}"))
}

fn key_schema(value: &Value) -> Vec<KeySchemaElement> {
    list(value, "KeySchema")
        .iter()
        .map(|k| {
            KeySchemaElement::builder()
                .attribute_name(text(&k["AttributeName"], "KeySchema.AttributeName"))
                .key_type(KeyType::from(text(&k["KeyType"], "KeySchema.KeyType")))
                .build()
                .expect("key schema element")
        })
        .collect()
}

fn projection(value: &Value) -> Projection {
    let mut projection = Projection::builder().projection_type(ProjectionType::from(text(
        &value["ProjectionType"],
        "Projection.ProjectionType",
    )));
    if let Some(attributes) = value.get("NonKeyAttributes") {
        for attribute in list(attributes, "NonKeyAttributes") {
            projection = projection.non_key_attributes(text(attribute, "NonKeyAttributes"));
        }
    }
    projection.build()
}

fn throughput(value: &Value) -> ProvisionedThroughput {
    ProvisionedThroughput::builder()
        .read_capacity_units(units(&value["ReadCapacityUnits"], "ReadCapacityUnits"))
        .write_capacity_units(units(&value["WriteCapacityUnits"], "WriteCapacityUnits"))
        .build()
        .expect("provisioned throughput")
}

/// The `CreateTable` call for a table's template `Properties` (attribute definitions, key
/// schema, local and global secondary indexes, billing mode and provisioned throughput).
pub fn create_table_request(
    client: &Client,
    name: &str,
    props: &Value,
) -> CreateTableFluentBuilder {
    let mut request = client.create_table().table_name(name);
    for definition in list(&props["AttributeDefinitions"], "AttributeDefinitions") {
        request = request.attribute_definitions(
            AttributeDefinition::builder()
                .attribute_name(text(&definition["AttributeName"], "AttributeName"))
                .attribute_type(ScalarAttributeType::from(text(
                    &definition["AttributeType"],
                    "AttributeType",
                )))
                .build()
                .expect("attribute definition"),
        );
    }
    request = request.set_key_schema(Some(key_schema(&props["KeySchema"])));
    if let Some(indexes) = props.get("LocalSecondaryIndexes") {
        for index in list(indexes, "LocalSecondaryIndexes") {
            request = request.local_secondary_indexes(
                LocalSecondaryIndex::builder()
                    .index_name(text(&index["IndexName"], "IndexName"))
                    .set_key_schema(Some(key_schema(&index["KeySchema"])))
                    .projection(projection(&index["Projection"]))
                    .build()
                    .expect("local secondary index"),
            );
        }
    }
    if let Some(indexes) = props.get("GlobalSecondaryIndexes") {
        for index in list(indexes, "GlobalSecondaryIndexes") {
            let mut gsi = GlobalSecondaryIndex::builder()
                .index_name(text(&index["IndexName"], "IndexName"))
                .set_key_schema(Some(key_schema(&index["KeySchema"])))
                .projection(projection(&index["Projection"]));
            if let Some(t) = index.get("ProvisionedThroughput") {
                gsi = gsi.provisioned_throughput(throughput(t));
            }
            request = request.global_secondary_indexes(gsi.build().expect("global index"));
        }
    }
    // CloudFormation's default billing mode is PROVISIONED.
    let billing = props
        .get("BillingMode")
        .map_or("PROVISIONED", |b| text(b, "BillingMode"));
    request = request.billing_mode(BillingMode::from(billing));
    if let Some(t) = props.get("ProvisionedThroughput") {
        request = request.provisioned_throughput(throughput(t));
    }
    request
}

/// A table made from the template for one test, under a name no other test uses.
pub struct TestTable {
    pub client: Client,
    pub name: String,
    /// The moto it lives on.
    pub endpoint: String,
}

impl TestTable {
    /// Creates the table, or returns `None` when the DynamoDB tests are skipped.
    pub async fn create() -> Option<TestTable> {
        let endpoint = aws_endpoint()?;
        init_tracing();
        let client = client(&endpoint);
        let name = unique_table_name();
        let props = records_table_properties();
        create_table_request(&client, &name, &props)
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "CreateTable {name}: {}",
                    aws_sdk_dynamodb::error::DisplayErrorContext(e)
                )
            });
        wait_until_active(&client, &name).await;
        if let Some(ttl) = props.get("TimeToLiveSpecification") {
            let spec = TimeToLiveSpecification::builder()
                .attribute_name(text(
                    &ttl["AttributeName"],
                    "TimeToLiveSpecification.AttributeName",
                ))
                .enabled(ttl["Enabled"].as_bool().unwrap_or(false))
                .build()
                .expect("ttl specification");
            client
                .update_time_to_live()
                .table_name(&name)
                .time_to_live_specification(spec)
                .send()
                .await
                .unwrap_or_else(|e| {
                    panic!(
                        "UpdateTimeToLive {name}: {}",
                        aws_sdk_dynamodb::error::DisplayErrorContext(e)
                    )
                });
        }
        Some(TestTable {
            client,
            name,
            endpoint,
        })
    }

    pub async fn delete(self) {
        if let Err(e) = self
            .client
            .delete_table()
            .table_name(&self.name)
            .send()
            .await
        {
            eprintln!(
                "could not delete test table {}: {}",
                self.name,
                aws_sdk_dynamodb::error::DisplayErrorContext(e)
            );
        }
    }
}

fn unique_table_name() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!(
        "sitehost-test-{}-{}-{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// moto creates tables ACTIVE at once; real DynamoDB takes a few seconds.
async fn wait_until_active(client: &Client, name: &str) {
    for _ in 0..120 {
        let described = client
            .describe_table()
            .table_name(name)
            .send()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "DescribeTable {name}: {}",
                    aws_sdk_dynamodb::error::DisplayErrorContext(e)
                )
            });
        if described.table().and_then(|t| t.table_status()) == Some(&TableStatus::Active) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("table {name} did not become ACTIVE");
}
