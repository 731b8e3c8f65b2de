"""Creates what the functions read and write on a local moto_server (or any DynamoDB/S3
endpoint): the records table, made from template.yaml's own RecordsTable definition, and the
files bucket. Idempotent: what exists is left as it is.

    .venv/bin/python scripts/local_aws.py [--endpoint URL] [--table NAME] [--bucket NAME]

The endpoint defaults to AWS_ENDPOINT_URL, then http://127.0.0.1:5000 (moto_server's
default port); the names default to the ones env-vars.json gives the functions.
"""

import argparse
import os
import pathlib

import boto3
import yaml

TEMPLATE = pathlib.Path(__file__).resolve().parent.parent / "template.yaml"
# The CreateTable parameters a table's template Properties map to one for one; the rest
# (TTL) takes its own call, and deployment settings (PITR, deletion protection) mean
# nothing to moto.
CREATE_TABLE_KEYS = [
    "AttributeDefinitions",
    "KeySchema",
    "LocalSecondaryIndexes",
    "GlobalSecondaryIndexes",
    "BillingMode",
    "ProvisionedThroughput",
]


class TemplateLoader(yaml.SafeLoader):
    """Reads CloudFormation's short-form tags (!Ref, !If, ...) as plain values."""


TemplateLoader.add_multi_constructor(
    "!", lambda loader, suffix, node: None
)


def table_properties():
    template = yaml.load(TEMPLATE.read_text(), Loader=TemplateLoader)
    resource = template["Resources"]["RecordsTable"]
    assert resource["Type"] == "AWS::DynamoDB::Table"
    return resource["Properties"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--endpoint",
        default=os.environ.get("AWS_ENDPOINT_URL", "http://127.0.0.1:5000"),
    )
    parser.add_argument("--table", default="sitehost-local")
    parser.add_argument("--bucket", default="sitehost-local-files")
    args = parser.parse_args()
    session = boto3.session.Session(
        aws_access_key_id=os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        aws_secret_access_key=os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
        region_name=os.environ.get("AWS_REGION", "us-east-1"),
    )
    dynamodb = session.client("dynamodb", endpoint_url=args.endpoint)
    s3 = session.client("s3", endpoint_url=args.endpoint)

    props = table_properties()
    if args.table in dynamodb.list_tables()["TableNames"]:
        print(f"table {args.table} exists")
    else:
        request = {k: props[k] for k in CREATE_TABLE_KEYS if k in props}
        dynamodb.create_table(TableName=args.table, **request)
        dynamodb.get_waiter("table_exists").wait(TableName=args.table)
        ttl = props.get("TimeToLiveSpecification")
        if ttl:
            dynamodb.update_time_to_live(
                TableName=args.table, TimeToLiveSpecification=ttl
            )
        print(f"table {args.table} created from template.yaml's RecordsTable")
    existing = [b["Name"] for b in s3.list_buckets().get("Buckets", [])]
    if args.bucket in existing:
        print(f"bucket {args.bucket} exists")
    else:
        s3.create_bucket(Bucket=args.bucket)
        print(f"bucket {args.bucket} created")


if __name__ == "__main__":
    main()
