//! The alarms watch the right metrics and notify the topic when one is given.

use std::collections::BTreeSet;

use serde_yaml::Value;

use super::{alarms, dimensions, functions, str_of, tagged, template};

/// (namespace, metric name, dimensions) of a metric an alarm reads.
type AlarmMetric = (String, String, BTreeSet<(String, String)>);

/// The metric an alarm watching one metric directly reads.
fn single_metric(alarm: &Value) -> Option<AlarmMetric> {
    let props = &alarm["Properties"];
    Some((
        props["Namespace"].as_str()?.to_string(),
        props["MetricName"].as_str()?.to_string(),
        dimensions(&props["Dimensions"]),
    ))
}

/// The alarms notify `AlarmTopicArn` on ALARM and OK when it is given, and exist without
/// any action when it is empty.
#[test]
fn alarms_notify_the_topic_when_given_and_name_their_docs() {
    let template = template();
    let parameter = &template["Parameters"]["AlarmTopicArn"];
    assert_eq!(parameter["Type"].as_str(), Some("String"));
    assert_eq!(parameter["Default"].as_str(), Some(""), "optional");
    let has_topic = &template["Conditions"]["HasAlarmTopic"];
    let equals = tagged(has_topic, "Not")
        .and_then(|n| n.get(0))
        .and_then(|e| tagged(e, "Equals"))
        .expect("HasAlarmTopic: !Not [!Equals [...]]");
    assert_eq!(
        tagged(&equals[0], "Ref").and_then(Value::as_str),
        Some("AlarmTopicArn")
    );
    assert_eq!(equals[1].as_str(), Some(""));

    let alarms = alarms(&template);
    for (id, alarm) in &alarms {
        let props = &alarm["Properties"];
        // [!If [HasAlarmEmail, !Ref AlarmTopic, NoValue], !If [HasAlarmTopic, !Ref
        // AlarmTopicArn, NoValue]]: the destinations given, none without either.
        for actions in ["AlarmActions", "OKActions"] {
            let list = props[actions]
                .as_sequence()
                .unwrap_or_else(|| panic!("{id}.{actions}: a list"));
            let choices: Vec<(Option<&str>, Option<&str>, Option<&str>)> = list
                .iter()
                .map(|item| {
                    let choice = tagged(item, "If")
                        .and_then(Value::as_sequence)
                        .unwrap_or_else(|| panic!("{id}.{actions}: !If [...]"));
                    (
                        choice[0].as_str(),
                        tagged(&choice[1], "Ref").and_then(Value::as_str),
                        tagged(&choice[2], "Ref").and_then(Value::as_str),
                    )
                })
                .collect();
            assert_eq!(
                choices,
                [
                    (
                        Some("HasAlarmEmail"),
                        Some("AlarmTopic"),
                        Some("AWS::NoValue")
                    ),
                    (
                        Some("HasAlarmTopic"),
                        Some("AlarmTopicArn"),
                        Some("AWS::NoValue")
                    ),
                ],
                "{id}.{actions}"
            );
        }
        assert_eq!(
            props["TreatMissingData"].as_str(),
            Some("notBreaching"),
            "{id}: no traffic is no alarm"
        );
        assert!(
            props["AlarmDescription"]
                .as_str()
                .is_some_and(|d| d.contains("docs/operations.md#")),
            "{id}: the description names its section of docs/operations.md"
        );
    }
}

#[test]
fn the_api_alarm_watches_its_5xx_rate() {
    let template = template();
    let alarms = alarms(&template);
    // The API's 5xx rate: API Gateway's 5xx over its Count, both of this API.
    let api = alarms
        .get("ApiServerErrorRateAlarm")
        .expect("ApiServerErrorRateAlarm");
    let props = &api["Properties"];
    let queries = props["Metrics"].as_sequence().expect("Metrics");
    let stats: BTreeSet<AlarmMetric> = queries
        .iter()
        .filter_map(|q| q.get("MetricStat"))
        .map(|stat| {
            let metric = &stat["Metric"];
            assert_eq!(stat["Stat"].as_str(), Some("Sum"));
            (
                str_of(&metric["Namespace"], "Namespace").to_string(),
                str_of(&metric["MetricName"], "MetricName").to_string(),
                dimensions(&metric["Dimensions"]),
            )
        })
        .collect();
    let api_id = BTreeSet::from([("ApiId".to_string(), "!Ref HttpApi".to_string())]);
    assert_eq!(
        stats,
        BTreeSet::from([
            ("AWS/ApiGateway".into(), "5xx".into(), api_id.clone()),
            ("AWS/ApiGateway".into(), "Count".into(), api_id),
        ])
    );
    let returned: Vec<&Value> = queries
        .iter()
        .filter(|q| q["ReturnData"].as_bool() == Some(true))
        .collect();
    assert_eq!(returned.len(), 1);
    assert!(str_of(&returned[0]["Expression"], "Expression")
        .contains("100 * FILL(errors, 0) / requests"));
    assert_eq!(props["Threshold"].as_f64(), Some(5.0));
    assert_eq!(
        props["ComparisonOperator"].as_str(),
        Some("GreaterThanThreshold")
    );
}

#[test]
fn every_function_has_an_errors_and_a_throttles_alarm() {
    let template = template();
    let alarms = alarms(&template);
    // Every function: Errors and Throttles, at the first one.
    let functions = functions(&template);
    for function in &functions {
        for metric in ["Errors", "Throttles"] {
            let dims = BTreeSet::from([(
                "FunctionName".to_string(),
                format!("!Ref {}", function.logical_id),
            )]);
            let watching: Vec<&Value> = alarms
                .values()
                .filter(|a| {
                    single_metric(a) == Some(("AWS/Lambda".into(), metric.into(), dims.clone()))
                })
                .collect();
            assert_eq!(
                watching.len(),
                1,
                "{}: one {metric} alarm",
                function.logical_id
            );
            let props = &watching[0]["Properties"];
            assert_eq!(props["Statistic"].as_str(), Some("Sum"));
            assert_eq!(props["Threshold"].as_f64(), Some(1.0));
            assert_eq!(
                props["ComparisonOperator"].as_str(),
                Some("GreaterThanOrEqualToThreshold")
            );
        }
    }
}

#[test]
fn the_table_has_a_throttles_and_a_system_errors_alarm() {
    let template = template();
    let alarms = alarms(&template);
    // The table: every operation's ThrottledRequests and SystemErrors (a Metrics Insights
    // query over the table's name), at the first one.
    for metric in ["ThrottledRequests", "SystemErrors"] {
        let watching: Vec<&Value> = alarms
            .values()
            .filter(|a| {
                a["Properties"]["Metrics"]
                    .as_sequence()
                    .into_iter()
                    .flatten()
                    .filter_map(|q| tagged(&q["Expression"], "Sub"))
                    .filter_map(Value::as_str)
                    .any(|e| {
                        e == format!(
                            "SELECT SUM({metric}) FROM SCHEMA(\"AWS/DynamoDB\", Operation, \
                             TableName) WHERE TableName = '${{RecordsTable}}'"
                        )
                    })
            })
            .collect();
        assert_eq!(watching.len(), 1, "one {metric} alarm on RecordsTable");
        let props = &watching[0]["Properties"];
        assert_eq!(props["Threshold"].as_f64(), Some(1.0));
        assert_eq!(
            props["ComparisonOperator"].as_str(),
            Some("GreaterThanOrEqualToThreshold")
        );
    }
}

#[test]
fn cloudfront_has_a_5xx_rate_alarm_in_us_east_1_only() {
    let template = template();
    let alarms = alarms(&template);
    // CloudFront: its metrics live in us-east-1 only, so the alarm exists only there.
    let cloudfront: Vec<&Value> = alarms
        .values()
        .filter(|a| {
            single_metric(a)
                == Some((
                    "AWS/CloudFront".into(),
                    "5xxErrorRate".into(),
                    BTreeSet::from([
                        (
                            "DistributionId".to_string(),
                            "!Ref Distribution".to_string(),
                        ),
                        ("Region".to_string(), "Global".to_string()),
                    ]),
                ))
        })
        .collect();
    assert_eq!(cloudfront.len(), 1, "one CloudFront 5xxErrorRate alarm");
    let condition = str_of(&cloudfront[0]["Condition"], "CloudFront alarm Condition");
    let equals = tagged(&template["Conditions"][condition], "Equals").expect("!Equals");
    assert_eq!(
        tagged(&equals[0], "Ref").and_then(Value::as_str),
        Some("AWS::Region")
    );
    assert_eq!(equals[1].as_str(), Some("us-east-1"));
    assert_eq!(cloudfront[0]["Properties"]["Threshold"].as_f64(), Some(5.0));
}

/// The 4xx rates, of the API and at CloudFront: the outages we can cause ourselves (a
/// rejected origin secret, a lost forwarded host or protocol) answer 4xx to every partner.
/// The baseline: partners' own 4xx are a small share of their requests, so each alarm
/// fires only past half of at least 50 requests, three 5-minute periods in a row.
#[test]
fn the_api_and_cloudfront_4xx_rates_are_watched_above_partners_ordinary_4xx() {
    let template = template();
    let alarms = alarms(&template);
    for (id, metric, namespace) in [
        ("ApiClientErrorRateAlarm", "4xx", "AWS/ApiGateway"),
        ("CloudFront4xxRateAlarm", "4xxErrorRate", "AWS/CloudFront"),
    ] {
        let alarm = alarms.get(id).unwrap_or_else(|| panic!("{id}"));
        let props = &alarm["Properties"];
        let queries = props["Metrics"].as_sequence().expect("Metrics");
        let metrics: BTreeSet<(String, String)> = queries
            .iter()
            .filter_map(|q| q.get("MetricStat"))
            .map(|stat| {
                (
                    str_of(&stat["Metric"]["Namespace"], "Namespace").to_string(),
                    str_of(&stat["Metric"]["MetricName"], "MetricName").to_string(),
                )
            })
            .collect();
        let requests = if namespace == "AWS/ApiGateway" {
            "Count"
        } else {
            "Requests"
        };
        assert_eq!(
            metrics,
            BTreeSet::from([
                (namespace.to_string(), metric.to_string()),
                (namespace.to_string(), requests.to_string()),
            ]),
            "{id}"
        );
        let returned: Vec<&Value> = queries
            .iter()
            .filter(|q| q["ReturnData"].as_bool() == Some(true))
            .collect();
        assert_eq!(returned.len(), 1, "{id}");
        let expression = str_of(&returned[0]["Expression"], "Expression");
        assert!(
            expression.starts_with("IF(requests >= 50, "),
            "{id}: {expression}"
        );
        assert_eq!(props["Threshold"].as_f64(), Some(50.0), "{id}");
        assert_eq!(props["EvaluationPeriods"].as_u64(), Some(3), "{id}");
        assert_eq!(props["DatapointsToAlarm"].as_u64(), Some(3), "{id}");
        assert_eq!(props["TreatMissingData"].as_str(), Some("notBreaching"));
    }
    // CloudFront's metrics are in us-east-1 only, as for its 5xx alarm.
    assert_eq!(
        alarms["CloudFront4xxRateAlarm"]["Condition"].as_str(),
        Some("CloudFrontMetricsHere")
    );
}

/// The alarms are the API's 5xx and 4xx rates, every function's errors and throttles, the
/// table's throttles and system errors, and CloudFront's 5xx and 4xx rates.
#[test]
fn there_is_no_other_alarm() {
    let template = template();
    let alarms = alarms(&template);
    let functions = functions(&template);
    assert_eq!(
        alarms.len(),
        2 + 2 * functions.len() + 2 + 2,
        "an alarm this test does not know: {:?}",
        alarms.keys()
    );
}
