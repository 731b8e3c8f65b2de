//! Business endpoints.
