//! HTTP glue: requests and responses independent of Lambda or hyper, routing, paging.
