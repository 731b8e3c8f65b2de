//! The dashboard shows the metrics the code emits, and every resource's own AWS figures.

use serde_yaml::Value;
use sitehost::api::Operation;

use super::{functions, globals_value, tagged, template};

/// One metric row of a dashboard widget: namespace, name, dimension pairs and its stat
/// (the row's own or the widget's).
struct DashboardMetric {
    namespace: String,
    name: String,
    dimensions: Vec<(String, String)>,
    stat: String,
    region: String,
}

fn dashboard_metrics(template: &Value) -> (Vec<DashboardMetric>, Vec<String>) {
    let body = tagged(
        &template["Resources"]["Dashboard"]["Properties"]["DashboardBody"],
        "Sub",
    )
    .and_then(Value::as_str)
    .expect("Dashboard.DashboardBody: !Sub \"...\"");
    let body: serde_json::Value = serde_json::from_str(body).expect("the dashboard is JSON");
    let mut metrics = Vec::new();
    let mut expressions = Vec::new();
    for widget in body["widgets"].as_array().expect("widgets") {
        let props = &widget["properties"];
        for row in props["metrics"].as_array().into_iter().flatten() {
            let row = row.as_array().expect("a metric row is an array");
            let strings: Vec<String> = row
                .iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect();
            let options = row.iter().find(|v| v.is_object());
            if let Some(expression) = options.and_then(|o| o["expression"].as_str()) {
                expressions.push(expression.to_string());
                continue;
            }
            assert!(
                strings.len() >= 2 && strings.len().is_multiple_of(2),
                "{row:?}"
            );
            metrics.push(DashboardMetric {
                namespace: strings[0].clone(),
                name: strings[1].clone(),
                dimensions: strings[2..]
                    .chunks(2)
                    .map(|pair| (pair[0].clone(), pair[1].clone()))
                    .collect(),
                stat: options
                    .and_then(|o| o["stat"].as_str())
                    .or(props["stat"].as_str())
                    .expect("a stat")
                    .to_string(),
                region: props["region"].as_str().expect("a region").to_string(),
            });
        }
    }
    (metrics, expressions)
}

/// The dashboard reads the metrics the code emits (names, units' namespace, the operation
/// dimension and its values all come from `sitehost::api::request_log`), in the namespace the
/// functions are given.
#[test]
fn the_dashboard_shows_the_metrics_the_code_emits() {
    use sitehost::api::request_log::{self, operation_name, DIMENSION, METRICS};
    use sitehost::config::METRICS_NAMESPACE_VAR;
    let template = template();
    let namespace = tagged(&globals_value(&template, METRICS_NAMESPACE_VAR), "Sub")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| panic!("Globals sets {METRICS_NAMESPACE_VAR} with !Sub"));
    assert_eq!(
        namespace, "sitehost/${AWS::StackName}",
        "one namespace per stack"
    );
    let operations: Vec<&str> = Operation::ALL
        .into_iter()
        .map(|op| {
            // The dimension value is the function's name.
            assert_eq!(operation_name(Some(op)), op.function_name());
            operation_name(Some(op))
        })
        .collect();

    let (metrics, _) = dashboard_metrics(&template);
    let ours: Vec<&DashboardMetric> = metrics
        .iter()
        .filter(|m| m.namespace.starts_with("sitehost"))
        .collect();
    for metric in &ours {
        assert_eq!(metric.namespace, namespace);
        assert!(
            METRICS.iter().any(|m| m.name == metric.name),
            "the dashboard reads {}, which the code does not emit",
            metric.name
        );
        assert_eq!(metric.dimensions.len(), 1, "{}", metric.name);
        let (key, value) = &metric.dimensions[0];
        assert_eq!(key, DIMENSION);
        assert!(
            operations.contains(&value.as_str()) || value == request_log::UNROUTED,
            "{value} is no operation"
        );
        assert_eq!(metric.region, "${AWS::Region}");
    }
    let shows = |name: &str, operation: &str, stat: &str| {
        ours.iter()
            .any(|m| m.name == name && m.dimensions[0].1 == operation && m.stat == stat)
    };
    for operation in &operations {
        for (metric, stat) in [
            (request_log::REQUESTS, "Sum"),
            (request_log::STATUS_4XX, "Sum"),
            (request_log::STATUS_5XX, "Sum"),
            (request_log::LATENCY, "p50"),
            (request_log::LATENCY, "p99"),
        ] {
            assert!(
                shows(metric.name, operation, stat),
                "no {stat} of {} for {operation}",
                metric.name
            );
        }
    }
    for metric in [request_log::UPLOAD_BYTES, request_log::PIPELINE_TIME] {
        for stat in ["p50", "p99"] {
            assert!(
                shows(metric.name, "image-upload", stat),
                "{stat} {}",
                metric.name
            );
        }
    }
}

/// The dashboard shows every function's, the table's, the API's and CloudFront's own figures.
#[test]
fn the_dashboard_shows_the_aws_figures_of_every_resource() {
    let template = template();
    let (metrics, expressions) = dashboard_metrics(&template);
    let has = |namespace: &str, name: &str, dimension: (&str, &str)| {
        metrics.iter().any(|m| {
            m.namespace == namespace
                && m.name == name
                && m.dimensions == [(dimension.0.to_string(), dimension.1.to_string())]
        })
    };
    for function in functions(&template) {
        let reference = format!("${{{}}}", function.logical_id);
        for name in ["Errors", "Throttles", "Duration"] {
            assert!(
                has("AWS/Lambda", name, ("FunctionName", &reference)),
                "no {name} of {}",
                function.logical_id
            );
        }
    }
    for name in ["ConsumedReadCapacityUnits", "ConsumedWriteCapacityUnits"] {
        assert!(
            has("AWS/DynamoDB", name, ("TableName", "${RecordsTable}")),
            "{name}"
        );
    }
    for name in ["ThrottledRequests", "SystemErrors"] {
        assert!(
            expressions
                .iter()
                .any(|e| e.contains(&format!("SUM({name})"))
                    && e.contains("WHERE TableName = '${RecordsTable}'")),
            "no {name} of the table in {expressions:?}"
        );
    }
    for name in ["Count", "4xx", "5xx"] {
        assert!(
            has("AWS/ApiGateway", name, ("ApiId", "${HttpApi}")),
            "{name}"
        );
    }
    let cloudfront = metrics
        .iter()
        .find(|m| m.namespace == "AWS/CloudFront" && m.name == "5xxErrorRate")
        .expect("CloudFront 5xxErrorRate");
    assert_eq!(
        cloudfront.region, "us-east-1",
        "CloudFront's metrics live there only"
    );
    assert_eq!(
        cloudfront.dimensions,
        [
            ("DistributionId".to_string(), "${Distribution}".to_string()),
            ("Region".to_string(), "Global".to_string())
        ]
    );
}
