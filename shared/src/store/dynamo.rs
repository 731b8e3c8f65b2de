//! The DynamoDB store. See docs/dynamodb-design.md.
