//! What the writer did, for Prometheus: `GET /metrics` in the text
//! exposition format. Writes are counted from their answers, in one place
//! (a middleware), so every door (the JSON API and the form) is counted
//! the same way.

use actix_web::body::MessageBody;
use actix_web::dev::{ServiceRequest, ServiceResponse};
use actix_web::http::{Method, StatusCode};
use actix_web::middleware::Next;
use actix_web::{web, Error, HttpResponse};
use prometheus::{
    Encoder, Gauge, IntCounter, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

use crate::links::shortener::Shortener;

/// The writer's counters, one set per writer, shared by its workers.
pub struct Metrics {
    registry: Registry,
    created: IntCounter,
    edited: IntCounter,
    deleted: IntCounter,
    refused: IntCounterVec,
    purge_failures: IntCounter,
    purges_queued: Gauge,
    flush_lag: Gauge,
    qr_drawing: IntGauge,
    qr_waiting: IntGauge,
}

impl Metrics {
    /// # Panics
    /// Never: the names below are valid and registered once.
    #[must_use]
    pub fn new() -> Self {
        let registry = Registry::new();
        let counter = |name: &str, help: &str| {
            let counter = IntCounter::new(name, help).expect("a valid counter");
            registry
                .register(Box::new(counter.clone()))
                .expect("registered once");
            counter
        };
        let created = counter("shortlink_links_created_total", "Links created");
        let edited = counter("shortlink_links_edited_total", "Links edited");
        let deleted = counter("shortlink_links_deleted_total", "Links deleted");
        let purge_failures = counter(
            "shortlink_purge_failures_total",
            "Changes stored but not purged from Varnish (the answer said so)",
        );
        let refused = IntCounterVec::new(
            Opts::new(
                "shortlink_writes_refused_total",
                "Writes refused, by reason (rate_limited: over the client's rate limit)",
            ),
            &["reason"],
        )
        .expect("a valid counter");
        registry
            .register(Box::new(refused.clone()))
            .expect("registered once");
        let flush_lag = Gauge::new(
            "shortlink_click_flush_lag_seconds",
            "Seconds since a Varnish last sent click counts to Redis (or said it had none); \
             NaN when none ever did or Redis did not answer",
        )
        .expect("a valid gauge");
        registry
            .register(Box::new(flush_lag.clone()))
            .expect("registered once");
        let purges_queued = Gauge::new(
            "shortlink_purges_queued",
            "Purges a Varnish node did not confirm, queued in Redis and sent again until it \
             does or they are moot; NaN when Redis did not answer",
        )
        .expect("a valid gauge");
        registry
            .register(Box::new(purges_queued.clone()))
            .expect("registered once");
        let int_gauge = |name: &str, help: &str| {
            let gauge = IntGauge::new(name, help).expect("a valid gauge");
            registry
                .register(Box::new(gauge.clone()))
                .expect("registered once");
            gauge
        };
        let qr_drawing = int_gauge(
            "shortlink_qr_pngs_drawing",
            "QR code PNGs being drawn now (at most qr::RENDERS_AT_ONCE)",
        );
        let qr_waiting = int_gauge(
            "shortlink_qr_pngs_waiting",
            "QR code PNGs waiting for their turn to be drawn",
        );
        Self {
            registry,
            created,
            edited,
            deleted,
            refused,
            purge_failures,
            purges_queued,
            flush_lag,
            qr_drawing,
            qr_waiting,
        }
    }

    /// A change was stored, but Varnish was not told.
    pub fn purge_failed(&self) {
        self.purge_failures.inc();
    }

    /// Counts a write (`POST`, `PATCH`, `DELETE`) by the status it got.
    fn record(&self, method: &Method, status: StatusCode) {
        if let Some(reason) = refusal_reason(status) {
            self.refused.with_label_values(&[reason]).inc();
        } else if *method == Method::POST && status == StatusCode::CREATED {
            self.created.inc();
        } else if *method == Method::PATCH && status.is_success() {
            self.edited.inc();
        } else if *method == Method::DELETE && status.is_success() {
            self.deleted.inc();
        }
    }

    fn render(&self) -> Result<String, String> {
        let mut text = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut text)
            .map_err(|e| format!("cannot write the metrics: {e}"))?;
        String::from_utf8(text).map_err(|e| e.to_string())
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a write got `status`, as a label; `None` for a success.
fn refusal_reason(status: StatusCode) -> Option<&'static str> {
    Some(match status.as_u16() {
        200..=399 => return None,
        400 | 413 | 415 => "bad_request",
        401 => "unauthorized",
        403 => "forbidden",
        404 => "not_found",
        409 => "key_taken",
        410 => "gone",
        412 => "stale",
        422 => "invalid",
        429 => "rate_limited",
        503 => "store_unavailable",
        _ => "other",
    })
}

/// The middleware that counts every write by its answer.
pub async fn count_writes(
    request: ServiceRequest,
    next: Next<impl MessageBody>,
) -> Result<ServiceResponse<impl MessageBody>, Error> {
    let method = request.method().clone();
    let metrics = request.app_data::<web::Data<Metrics>>().cloned();
    let response = next.call(request).await?;
    if matches!(method, Method::POST | Method::PATCH | Method::DELETE) {
        if let Some(metrics) = metrics {
            metrics.record(&method, response.status());
        }
    }
    Ok(response)
}

/// The writer's counters in Prometheus's text format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "operations",
    responses((status = 200, description = "Prometheus text exposition", content_type = "text/plain; version=0.0.4"))
)]
pub async fn serve_metrics(
    metrics: web::Data<Metrics>,
    shortener: web::Data<Shortener>,
) -> HttpResponse {
    let lag = shortener.click_flush_lag().await.ok().flatten();
    metrics.flush_lag.set(lag.unwrap_or(f64::NAN));
    // Counts of this size are exact in an f64.
    #[allow(clippy::cast_precision_loss)]
    let queued = shortener
        .queued_purges()
        .await
        .map_or(f64::NAN, |queued| queued as f64);
    metrics.purges_queued.set(queued);
    let (drawing, waiting) = crate::qr::RENDERER.load();
    metrics
        .qr_drawing
        .set(i64::try_from(drawing).unwrap_or(i64::MAX));
    metrics
        .qr_waiting
        .set(i64::try_from(waiting).unwrap_or(i64::MAX));
    match metrics.render() {
        Ok(text) => HttpResponse::Ok()
            .content_type("text/plain; version=0.0.4; charset=utf-8")
            .insert_header(("Cache-Control", "no-store"))
            .body(text),
        Err(message) => {
            log::error!("{message}");
            HttpResponse::InternalServerError().body(message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_counted_by_their_answer() {
        let metrics = Metrics::new();
        metrics.record(&Method::POST, StatusCode::CREATED);
        // An existing link is not a new one.
        metrics.record(&Method::POST, StatusCode::OK);
        metrics.record(&Method::PATCH, StatusCode::OK);
        metrics.record(&Method::DELETE, StatusCode::NO_CONTENT);
        metrics.record(&Method::POST, StatusCode::TOO_MANY_REQUESTS);
        metrics.record(&Method::PATCH, StatusCode::PRECONDITION_FAILED);
        metrics.purge_failed();
        let text = metrics.render().unwrap();
        for line in [
            "shortlink_links_created_total 1",
            "shortlink_links_edited_total 1",
            "shortlink_links_deleted_total 1",
            "shortlink_purge_failures_total 1",
            "shortlink_writes_refused_total{reason=\"rate_limited\"} 1",
            "shortlink_writes_refused_total{reason=\"stale\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
