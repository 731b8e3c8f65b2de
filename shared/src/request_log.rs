//! The request log line and the request metrics.
//!
//! Every request is logged as one event on the [`TARGET`] target ([`RequestLog::emit`]):
//! which request (request id; on Lambda API Gateway's request id and the invocation id),
//! what it was (operation, method, path, body size), who made it (the public key, account
//! and user, once the signature checks out), how it went (status, latency; for uploads the
//! image's bytes and the time of each stage) and, for a 5xx, the error's cause chain. Never
//! a secret, a signature, the query string (it may carry the oauth parameters), a header or
//! image bytes. A 5xx is logged at `ERROR`, everything else at `INFO`.
//!
//! On Lambda ([`crate::telemetry::init_lambda`]) that event is written as one JSON object
//! that is also a CloudWatch Embedded Metric Format document: CloudWatch Logs extracts
//! [`METRICS`] from it, per operation, with no API call. `sitehost serve` writes the same
//! fields as a readable line, without metrics (unless `SITEHOST_LOG_FORMAT=json`).

use std::cell::RefCell;
use std::fmt;
use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::{Format, Json, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::api::Operation;

/// The `tracing` target of the request line (`RUST_LOG=sitehost::request=warn` keeps only
/// the 5xx lines; on Lambda the metrics come from these lines, so keep them at `info`).
pub const TARGET: &str = "sitehost::request";
/// The request line's message.
pub const MESSAGE: &str = "request";
/// The CloudWatch namespace of the metrics; the template sets `sitehost/<stack name>`.
pub const NAMESPACE_VAR: &str = "SITEHOST_METRICS_NAMESPACE";
pub const DEFAULT_NAMESPACE: &str = "sitehost";
/// The one dimension of every metric; its values are [`operation_name`]s.
pub const DIMENSION: &str = "operation";

/// A CloudWatch metric of the request line: its name is also the field that holds its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
}

/// 1 on every request line.
pub const REQUESTS: Metric = Metric {
    name: "requests",
    unit: "Count",
};
/// 1 when the status is 400-499, else 0 (its average is the 4xx rate).
pub const STATUS_4XX: Metric = Metric {
    name: "status_4xx",
    unit: "Count",
};
/// 1 when the status is 500 or more, else 0 (its average is the 5xx rate).
pub const STATUS_5XX: Metric = Metric {
    name: "status_5xx",
    unit: "Count",
};
/// From the request's arrival at the handler to its response.
pub const LATENCY: Metric = Metric {
    name: "latency_ms",
    unit: "Milliseconds",
};
/// Uploads only: the image file's size (fetched, or decoded from base64).
pub const UPLOAD_BYTES: Metric = Metric {
    name: "upload_bytes",
    unit: "Bytes",
};
/// Uploads only: decoding, resizing and encoding (wall time on the blocking pool).
pub const PIPELINE_TIME: Metric = Metric {
    name: "pipeline_ms",
    unit: "Milliseconds",
};
pub const METRICS: [Metric; 6] = [
    REQUESTS,
    STATUS_4XX,
    STATUS_5XX,
    LATENCY,
    UPLOAD_BYTES,
    PIPELINE_TIME,
];

/// The `operation` of a request line (the function's name); `unrouted` for a request the
/// router answered itself (an unknown path, 405).
pub fn operation_name(operation: Option<Operation>) -> &'static str {
    match operation {
        Some(Operation::BusinessList) => "business-list",
        Some(Operation::BusinessGet) => "business-get",
        Some(Operation::BusinessCreate) => "business-create",
        Some(Operation::BusinessUpdate) => "business-update",
        Some(Operation::ImageList) => "image-list",
        Some(Operation::ImageGet) => "image-get",
        Some(Operation::ImageUpload) => "image-upload",
        None => UNROUTED,
    }
}
pub const UNROUTED: &str = "unrouted";

/// An id for a request that arrived without one (`sitehost serve`).
pub fn new_request_id() -> String {
    use rand::distr::{Alphanumeric, SampleString};
    Alphanumeric.sample_string(&mut rand::rng(), 16)
}

/// What an upload's stages took; `None` for a stage it did not reach.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UploadStats {
    /// The image file's size: fetched, or decoded from base64.
    pub bytes: Option<u64>,
    /// Fetching `external_url`.
    pub fetch: Option<Duration>,
    /// Decoding the base64 `upload.file`.
    pub base64: Option<Duration>,
    /// The whole pipeline (wall time of its blocking task): decode, resize, encode.
    pub pipeline: Option<Duration>,
    pub decode: Option<Duration>,
    pub resize: Option<Duration>,
    pub encode: Option<Duration>,
    /// Writing the original and its variants to the file store (concurrently).
    pub store: Option<Duration>,
    /// Writing the image record.
    pub record: Option<Duration>,
}

tokio::task_local! {
    static UPLOAD: RefCell<UploadStats>;
}

/// Runs a request's work, collecting what its upload stages note with [`record_upload`].
pub async fn collecting_upload_stats<F: Future>(work: F) -> (F::Output, UploadStats) {
    UPLOAD
        .scope(RefCell::new(UploadStats::default()), async {
            let output = work.await;
            (output, UPLOAD.with(|stats| *stats.borrow()))
        })
        .await
}

/// Notes an upload stage of the current request (nothing outside
/// [`collecting_upload_stats`], e.g. a benchmark calling the upload directly).
pub fn record_upload(note: impl FnOnce(&mut UploadStats)) {
    let _ = UPLOAD.try_with(|stats| note(&mut stats.borrow_mut()));
}

/// One request, as logged.
#[derive(Debug, Clone, Default)]
pub struct RequestLog<'a> {
    /// API Gateway's request id (`$context.requestId`, the `apigw-requestid` response
    /// header); generated by `sitehost serve`.
    pub request_id: &'a str,
    /// The Lambda invocation id (the platform's START/END/REPORT lines carry it).
    pub invocation_id: Option<&'a str>,
    pub operation: Option<Operation>,
    pub method: &'a str,
    /// The path only: the query string may carry the oauth parameters.
    pub path: &'a str,
    pub status: u16,
    pub latency: Duration,
    pub body_bytes: usize,
    /// The public half of the key, set once the signature checked out.
    pub key: Option<&'a str>,
    pub account_id: Option<i64>,
    pub user_id: Option<i64>,
    pub upload: UploadStats,
    /// A 5xx's cause chain ([`crate::telemetry::error_chain`]).
    pub error: Option<String>,
}

/// Milliseconds with microsecond precision.
fn millis(duration: Duration) -> f64 {
    duration.as_micros() as f64 / 1000.0
}

// A `tracing` level is fixed per call site, so the line is written by one of two.
macro_rules! request_event {
    ($level:expr, $log:expr) => {{
        let log = $log;
        let ms = |stage: Option<Duration>| stage.map(millis);
        tracing::event!(
            target: TARGET,
            $level,
            request_id = log.request_id,
            invocation_id = log.invocation_id,
            operation = operation_name(log.operation),
            method = log.method,
            path = log.path,
            status = log.status,
            latency_ms = millis(log.latency),
            body_bytes = log.body_bytes as u64,
            key = log.key,
            account_id = log.account_id,
            user_id = log.user_id,
            upload_bytes = log.upload.bytes,
            fetch_ms = ms(log.upload.fetch),
            base64_ms = ms(log.upload.base64),
            pipeline_ms = ms(log.upload.pipeline),
            decode_ms = ms(log.upload.decode),
            resize_ms = ms(log.upload.resize),
            encode_ms = ms(log.upload.encode),
            store_ms = ms(log.upload.store),
            record_ms = ms(log.upload.record),
            error = log.error.as_deref(),
            "request"
        )
    }};
}

impl RequestLog<'_> {
    pub fn emit(&self) {
        if self.status >= 500 {
            request_event!(Level::ERROR, self);
        } else {
            request_event!(Level::INFO, self);
        }
    }
}

/// The Lambda log format: the request line as its EMF document ([`emf_document`]), every
/// other event as a flat JSON object (`level`, `message`, fields, `target`). No timestamps:
/// CloudWatch adds its own (and EMF's `_aws.Timestamp`).
pub struct LambdaFormat {
    namespace: String,
    other: Format<Json, ()>,
}

impl LambdaFormat {
    pub fn new(namespace: impl Into<String>) -> Self {
        LambdaFormat {
            namespace: namespace.into(),
            other: tracing_subscriber::fmt::format()
                .json()
                .flatten_event(true)
                .without_time()
                .with_current_span(false),
        }
    }
}

impl<S, N> FormatEvent<S, N> for LambdaFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        if event.metadata().target() != TARGET {
            return self.other.format_event(ctx, writer, event);
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let document = emf_document(fields.0, event.metadata().level(), &self.namespace, now);
        writeln!(writer, "{document}")
    }
}

/// An event's fields as JSON values (absent `Option`s are not recorded at all).
#[derive(Default)]
struct Fields(Map<String, Value>);

impl Visit for Fields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), json!(value));
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), json!(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), json!(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), json!(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), json!(value));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), json!(format!("{value:?}")));
    }
}

/// The request line's fields plus the members EMF needs: the count metrics (from
/// `status`), `level`, and the `_aws` block naming the metrics present in this line (an
/// upload's two only on uploads) under the one dimension, `operation`.
pub fn emf_document(
    mut fields: Map<String, Value>,
    level: &Level,
    namespace: &str,
    timestamp_ms: u64,
) -> Value {
    let status = fields.get("status").and_then(Value::as_u64).unwrap_or(0);
    fields.insert(REQUESTS.name.into(), json!(1));
    fields.insert(
        STATUS_4XX.name.into(),
        json!(u8::from((400..500).contains(&status))),
    );
    fields.insert(STATUS_5XX.name.into(), json!(u8::from(status >= 500)));
    let metrics: Vec<Value> = METRICS
        .iter()
        .filter(|metric| fields.get(metric.name).is_some_and(Value::is_number))
        .map(|metric| json!({"Name": metric.name, "Unit": metric.unit}))
        .collect();
    fields.entry(DIMENSION).or_insert_with(|| json!(UNROUTED));
    fields.insert("level".into(), json!(level.as_str()));
    fields.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": namespace,
                "Dimensions": [[DIMENSION]],
                "Metrics": metrics,
            }],
        }),
    );
    Value::Object(fields)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    /// Collects what a subscriber writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    impl Captured {
        fn lines(&self) -> Vec<Value> {
            let bytes = self.0.lock().unwrap_or_else(|p| p.into_inner()).clone();
            String::from_utf8_lossy(&bytes)
                .lines()
                .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
                .collect()
        }
    }

    /// The subscriber `telemetry::init_lambda` installs, writing to `captured`.
    fn lambda_subscriber(captured: &Captured) -> impl Subscriber + Send + Sync {
        tracing_subscriber::registry().with(
            tracing_subscriber::fmt::layer()
                .json()
                .event_format(LambdaFormat::new("sitehost/prod"))
                .with_writer(captured.clone()),
        )
    }

    fn now_ms() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }

    /// Emits on Lambda's subscriber; returns the one line with its timestamp checked and
    /// zeroed.
    fn lambda_line(log: &RequestLog<'_>) -> Value {
        let captured = Captured::default();
        let before = now_ms();
        tracing::subscriber::with_default(lambda_subscriber(&captured), || log.emit());
        let after = now_ms();
        let mut lines = captured.lines();
        assert_eq!(lines.len(), 1, "{lines:?}");
        let mut line = lines.remove(0);
        let timestamp = &mut line["_aws"]["Timestamp"];
        let at = timestamp.as_u64().expect("a Timestamp in milliseconds");
        assert!(
            (before..=after).contains(&at),
            "{at} not in {before}..={after}"
        );
        *timestamp = json!(0);
        line
    }

    fn upload_log() -> RequestLog<'static> {
        RequestLog {
            request_id: "JKJaXmPLvHcESHA=",
            invocation_id: Some("8476a536-e9f4-11e8-9739-2dfe598c3fcd"),
            operation: Some(Operation::ImageUpload),
            method: "POST",
            path: "/api/v2/images/",
            status: 201,
            latency: Duration::from_micros(212_345),
            body_bytes: 1_398_200,
            key: Some("pamuJL7pb1PEYMKig4Tj"),
            account_id: Some(3),
            user_id: Some(77),
            upload: UploadStats {
                bytes: Some(1_048_576),
                fetch: None,
                base64: Some(Duration::from_micros(4_200)),
                pipeline: Some(Duration::from_micros(180_500)),
                decode: Some(Duration::from_micros(60_250)),
                resize: Some(Duration::from_micros(40_125)),
                encode: Some(Duration::from_micros(79_000)),
                store: Some(Duration::from_micros(15_750)),
                record: Some(Duration::from_micros(6_500)),
            },
            error: None,
        }
    }

    #[test]
    fn an_upload_line_on_lambda_is_one_emf_document() {
        assert_eq!(
            lambda_line(&upload_log()),
            json!({
                "_aws": {
                    "Timestamp": 0,
                    "CloudWatchMetrics": [{
                        "Namespace": "sitehost/prod",
                        "Dimensions": [["operation"]],
                        "Metrics": [
                            {"Name": "requests", "Unit": "Count"},
                            {"Name": "status_4xx", "Unit": "Count"},
                            {"Name": "status_5xx", "Unit": "Count"},
                            {"Name": "latency_ms", "Unit": "Milliseconds"},
                            {"Name": "upload_bytes", "Unit": "Bytes"},
                            {"Name": "pipeline_ms", "Unit": "Milliseconds"}
                        ]
                    }]
                },
                "level": "INFO",
                "message": "request",
                "request_id": "JKJaXmPLvHcESHA=",
                "invocation_id": "8476a536-e9f4-11e8-9739-2dfe598c3fcd",
                "operation": "image-upload",
                "method": "POST",
                "path": "/api/v2/images/",
                "status": 201,
                "latency_ms": 212.345,
                "body_bytes": 1_398_200,
                "key": "pamuJL7pb1PEYMKig4Tj",
                "account_id": 3,
                "user_id": 77,
                "upload_bytes": 1_048_576,
                "base64_ms": 4.2,
                "pipeline_ms": 180.5,
                "decode_ms": 60.25,
                "resize_ms": 40.125,
                "encode_ms": 79.0,
                "store_ms": 15.75,
                "record_ms": 6.5,
                "requests": 1,
                "status_4xx": 0,
                "status_5xx": 0
            })
        );
    }

    #[test]
    fn unrouted_4xx_and_5xx_lines_count_themselves_and_name_only_their_metrics() {
        let unrouted = RequestLog {
            request_id: "r1",
            method: "GET",
            path: "/api/v2/nothing/",
            status: 404,
            latency: Duration::from_micros(150),
            ..RequestLog::default()
        };
        let line = lambda_line(&unrouted);
        assert_eq!(line["operation"], "unrouted");
        assert_eq!(line["level"], "INFO");
        assert_eq!(
            (&line["requests"], &line["status_4xx"], &line["status_5xx"]),
            (&json!(1), &json!(1), &json!(0))
        );
        assert_eq!(
            line["_aws"]["CloudWatchMetrics"][0]["Metrics"],
            json!([
                {"Name": "requests", "Unit": "Count"},
                {"Name": "status_4xx", "Unit": "Count"},
                {"Name": "status_5xx", "Unit": "Count"},
                {"Name": "latency_ms", "Unit": "Milliseconds"}
            ])
        );
        for absent in [
            "key",
            "account_id",
            "invocation_id",
            "upload_bytes",
            "error",
        ] {
            assert!(line.get(absent).is_none(), "{absent} in {line}");
        }

        let failed = RequestLog {
            request_id: "r2",
            operation: Some(Operation::BusinessGet),
            method: "GET",
            path: "/api/v2/businesses/7/",
            status: 500,
            error: Some("internal error: timed out".into()),
            ..RequestLog::default()
        };
        let line = lambda_line(&failed);
        assert_eq!(line["level"], "ERROR");
        assert_eq!(line["operation"], "business-get");
        assert_eq!(line["error"], "internal error: timed out");
        assert_eq!(
            (&line["status_4xx"], &line["status_5xx"]),
            (&json!(0), &json!(1))
        );
    }

    #[test]
    fn other_lambda_lines_stay_flat_json_without_metrics() {
        let captured = Captured::default();
        tracing::subscriber::with_default(lambda_subscriber(&captured), || {
            tracing::warn!(image_id = 26, "the image record write reported an error");
        });
        let lines = captured.lines();
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["level"], "WARN");
        assert_eq!(
            lines[0]["message"],
            "the image record write reported an error"
        );
        assert_eq!(lines[0]["image_id"], 26);
        assert!(lines[0].get("_aws").is_none());
    }

    #[test]
    fn every_operation_has_its_function_name() {
        let names: Vec<&str> = Operation::ALL
            .into_iter()
            .map(|op| operation_name(Some(op)))
            .collect();
        assert_eq!(
            names,
            [
                "business-list",
                "business-get",
                "business-create",
                "business-update",
                "image-list",
                "image-get",
                "image-upload"
            ]
        );
    }

    /// On Lambda the line names API Gateway's request id (from the event's request
    /// context) and the invocation id (from the runtime's context).
    #[test]
    fn lambda_requests_carry_both_ids() {
        use lambda_http::RequestExt;
        let event = include_str!("../../events/business-get.json");
        let request = lambda_http::request::from_str(event).expect("an API Gateway event");
        let mut context = lambda_http::Context::default();
        context.request_id = "8476a536-e9f4-11e8-9739-2dfe598c3fcd".into();
        let request = crate::api::lambda::from_lambda(request.with_lambda_context(context));
        assert_eq!(request.request_id.as_deref(), Some("req-fixednonce0002"));
        assert_eq!(
            request.invocation_id.as_deref(),
            Some("8476a536-e9f4-11e8-9739-2dfe598c3fcd")
        );
    }

    /// The whole path on `sitehost serve`'s app: an upload's line has its bytes and every
    /// stage, and the secret, signature and image bytes are nowhere in it.
    #[cfg(all(feature = "images", feature = "local"))]
    #[tokio::test(flavor = "current_thread")]
    async fn an_upload_through_the_app_logs_its_bytes_and_stages() {
        use base64::Engine;

        use crate::api::{ApiRequest, App};
        use crate::auth::{oauth1, NewKey};
        use crate::clock::{Clock, SystemClock};
        use crate::config::Config;
        use crate::store::Stores;

        let dir = tempfile::tempdir().expect("tempdir");
        let stores = Stores::embedded(dir.path()).expect("embedded store");
        let account = stores
            .records
            .ensure_account("acme")
            .await
            .expect("account");
        let key = stores
            .records
            .create_key(NewKey::generate(account.id, None, None, SystemClock.now()))
            .await
            .expect("key");
        let app = App::new(stores, Config::embedded(dir.path().to_path_buf())).expect("app");

        let mut png = Vec::new();
        image::DynamicImage::new_rgb8(64, 48)
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .expect("png");
        let file = base64::engine::general_purpose::STANDARD.encode(&png);
        let body = json!({"upload": {"name": "a.png", "file": file}}).to_string();
        let authorization = oauth1::authorization_header(
            "POST",
            "http://sitehost.test/api/v2/images/",
            &[],
            &key.key,
            &key.secret,
            SystemClock.now(),
            "nonce-upload-log",
        );
        let mut headers = http::HeaderMap::new();
        headers.insert("host", http::HeaderValue::from_static("sitehost.test"));
        headers.insert(
            "authorization",
            authorization.parse().expect("header value"),
        );
        headers.insert(
            "content-type",
            http::HeaderValue::from_static("application/json"),
        );
        let request = ApiRequest {
            method: http::Method::POST,
            path: "/api/v2/images/".into(),
            query: String::new(),
            headers,
            body: body.clone().into(),
            request_id: Some("req-upload-1".into()),
            invocation_id: None,
        };

        let captured = Captured::default();
        let _default = tracing::subscriber::set_default(lambda_subscriber(&captured));
        let response = app.handle(request).await;
        assert_eq!(response.status, 201, "{:?}", response.body);

        let lines = captured.lines();
        let line = lines
            .iter()
            .find(|line| line["message"] == MESSAGE)
            .unwrap_or_else(|| panic!("no request line in {lines:?}"));
        assert_eq!(line["request_id"], "req-upload-1");
        assert_eq!(line["operation"], "image-upload");
        assert_eq!(line["status"], 201);
        assert_eq!(line["key"], key.key.as_str());
        assert_eq!(line["account_id"], key.account_id);
        assert_eq!(line["user_id"], key.user_id);
        assert_eq!(line["body_bytes"], body.len());
        assert_eq!(line["upload_bytes"], png.len());
        for stage in [
            "latency_ms",
            "base64_ms",
            "pipeline_ms",
            "decode_ms",
            "resize_ms",
            "encode_ms",
            "store_ms",
            "record_ms",
        ] {
            assert!(
                line[stage].as_f64().is_some_and(|ms| ms >= 0.0),
                "{stage} in {line}"
            );
        }
        assert!(line.get("fetch_ms").is_none(), "no fetch in {line}");
        let metrics: Vec<&str> = line["_aws"]["CloudWatchMetrics"][0]["Metrics"]
            .as_array()
            .expect("metrics")
            .iter()
            .filter_map(|m| m["Name"].as_str())
            .collect();
        assert_eq!(metrics, METRICS.map(|m| m.name));
        let text = captured
            .lines()
            .iter()
            .map(Value::to_string)
            .collect::<String>();
        assert!(!text.contains(&key.secret), "the secret reached the logs");
        assert!(
            !text.contains("oauth_signature"),
            "a signature reached the logs"
        );
        assert!(!text.contains(&file[..64]), "image bytes reached the logs");
    }
}
