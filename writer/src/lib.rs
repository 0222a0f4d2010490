//! The shortlink writer: stores links in Redis with the shared key scheme,
//! and generates the VCL Varnish serves them with.

pub mod access;
pub mod clicks;
pub mod config;
pub mod error_code;
pub mod links;
pub mod metrics;
pub mod qr;
pub mod redis;
pub mod titles;
pub mod varnish;
pub mod web;
