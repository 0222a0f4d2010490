//! The VCL API's documented defaults, and what keeps panics out of Varnish.

use std::time::Duration;

use shortlink_core::settings::ClickQueueMb;
use shortlink_core::{
    AdmissionWindow, ClickBacklog, DomainVisitsKept, FlushInterval, HeaderValue, PoolSize,
    RedirectStatus, ReplicasToAck, Retention, Timeout, Ttl, VisitsKept, DEFAULT_PREFIX,
    DEFAULT_SPLIT,
};

use super::without_panic;

/// A duration as VCL writes it.
fn vcl_duration(duration: Duration) -> String {
    match duration.as_secs() {
        0 if duration.is_zero() => "0s".to_owned(),
        0 => format!("{}ms", duration.as_millis()),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s => format!("{s}s"),
    }
}

/// The VCL API's defaults are literals in the doc comments and
/// `#[default]`s above: they must say what `shortlink_core` holds.
#[test]
fn the_vcl_api_documents_the_shared_defaults() {
    let api = include_str!("../API.md").replace('\n', " ");
    let signature = format!(
        "STRING prefix = \"{DEFAULT_PREFIX}\", INT split = {DEFAULT_SPLIT}, \
         [DURATION connect_timeout], [DURATION command_timeout], INT pool_size = {}, \
         INT status = {}, [DURATION ttl], [DURATION negative_ttl], [DURATION grace], \
         [DURATION admission_window], \
         STRING cache_control = \"{}\", [DURATION flush_interval], INT click_backlog = {}, \
         INT click_queue_mb = {}, [DURATION days_kept], [DURATION hours_kept], STRING geoip = \"\", \
         STRING clicks_redis = \"\", INT replicas_to_ack = {}, INT visits_kept = {}, \
         INT domain_visits_kept = {}, [DURATION visit_days], STRING domains = \"\")",
        PoolSize::DEFAULT,
        RedirectStatus::default(),
        HeaderValue::DEFAULT_CACHE_CONTROL,
        ClickBacklog::DEFAULT,
        ClickQueueMb::DEFAULT,
        ReplicasToAck::DEFAULT,
        VisitsKept::DEFAULT,
        DomainVisitsKept::DEFAULT,
    );
    assert!(api.contains(&signature), "API.md should read {signature}");
    for (parameter, default) in [
        ("connect_timeout", Duration::from(Timeout::CONNECT)),
        ("command_timeout", Duration::from(Timeout::COMMAND)),
        ("ttl", Duration::from(Ttl::FOUND)),
        ("negative_ttl", Duration::from(Ttl::NEGATIVE)),
        ("grace", Duration::from(Ttl::GRACE)),
        ("admission_window", Duration::from(AdmissionWindow::DEFAULT)),
        ("flush_interval", Duration::from(FlushInterval::DEFAULT)),
        ("days_kept", Duration::from(Retention::DAYS)),
        ("hours_kept", Duration::from(Retention::HOURS)),
        ("visit_days", Duration::from(Retention::VISITS)),
    ] {
        let section = api
            .split("* `")
            .find(|s| s.starts_with(&format!("[DURATION {parameter}]`")))
            .unwrap_or_else(|| panic!("API.md has no section for {parameter}"));
        let expected = format!("Default `{}`", vcl_duration(default));
        assert!(
            section.contains(&expected),
            "{parameter}: API.md should say {expected}"
        );
    }
}

#[test]
fn a_panic_becomes_the_fallback_answer() {
    let answer: Result<u8, &str> = without_panic(|| panic!("a bug"), || Err("internal error"));
    assert_eq!(answer, Err("internal error"));
    assert_eq!(without_panic(|| Ok::<u8, &str>(7), || Err("unused")), Ok(7));
}
