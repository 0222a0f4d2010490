//! The shortlink writer: stores links in Redis with the shared key scheme,
//! and generates the VCL Varnish serves them with.

pub mod access;
pub mod bulk;
pub mod clicks;
pub mod config;
pub mod export;
pub mod link_body;
pub mod metrics;
pub mod qr;
pub mod redis;
pub mod shortener;
pub mod store;
pub mod validate;
pub mod varnish;
pub mod web;
