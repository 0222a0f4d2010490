//! `shortlink serve` (the default): the web form and JSON API, after a look
//! at the links' Redis.

use actix_web::{middleware, web, App, HttpServer};
use shortlink_writer::access::Gatekeeper;
use shortlink_writer::config::Settings;
use shortlink_writer::links::shortener::Shortener;
use shortlink_writer::metrics::Metrics;
use shortlink_writer::web as routes;

/// Warns, from what the links' Redis reports at start, when the split
/// would push hashes out of Redis's compact encoding (with the shipped
/// limit if Redis is away), and when Redis has fewer replicas than
/// `replicas_to_ack` waits for: every change would then answer 503.
fn check_store(settings: &Settings) {
    let mut connection = shortlink_writer::redis::master::connect_to_links_redis(settings).ok();
    let limit = connection
        .as_mut()
        .and_then(|connection| {
            redis::cmd("CONFIG")
                .arg("GET")
                .arg("hash-max-listpack-entries")
                .query::<(String, u64)>(connection.as_mut())
                .ok()
        })
        .map_or(512, |(_, limit)| limit);
    if let Some(warning) = settings.listpack_warning(limit) {
        log::warn!("{warning}");
    }
    let wanted = settings.config.redis.replicas_to_ack.get();
    let replicas = connection.as_mut().and_then(|connection| {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(connection.as_mut())
            .ok()?;
        info.lines()
            .find_map(|line| line.strip_prefix("connected_slaves:"))
            .and_then(|n| n.trim().parse::<u32>().ok())
    });
    if let Some(replicas) = replicas.filter(|&replicas| replicas < wanted) {
        log::warn!(
            "redis.replicas_to_ack is {wanted} but the links' Redis has {replicas} replicas \
             connected: changes will answer 503 until enough replicas are; start them, or \
             lower replicas_to_ack"
        );
    }
}

pub fn serve(settings: Settings) -> Result<(), String> {
    if let Some(refusal) = settings.serve_refusal() {
        return Err(refusal);
    }
    check_store(&settings);
    let listen = settings.config.listen;
    let guard = web::Data::new(Gatekeeper::new(&settings)?);
    let metrics = web::Data::new(Metrics::new());
    actix_web::rt::System::new().block_on(async move {
        let checked = web::Data::new(Shortener::new(settings.clone()).map_err(|e| e.to_string())?);
        // Purges a Varnish node missed are sent again for as long as this
        // writer runs (and by every other writer of the same Redis).
        let (purge_queue, nodes) = checked.purge_queue();
        actix_web::rt::spawn(purge_queue.retry_forever(nodes));
        log::info!("writer listening on http://{listen}/");
        let access_log =
            log::log_enabled!(target: "actix_web::middleware::logger", log::Level::Info);
        HttpServer::new(move || {
            // Each worker thread gets a shortener of its own, whose Redis
            // connection and purge lane run on that worker's runtime: their
            // replies wake the worker directly, not through another thread.
            // The same settings opened `checked`, so this cannot fail; if
            // it did, the worker would share that one.
            let shortener =
                Shortener::new(settings.clone()).map_or_else(|_| checked.clone(), web::Data::new);
            App::new()
                .app_data(shortener)
                .app_data(guard.clone())
                .app_data(metrics.clone())
                // The method, path and status only: no header and no query
                // string, so no token (YOURLS' tools send theirs, or a
                // signature, in the query). Off when RUST_LOG hides it: the
                // logger formats every request before `log` drops the line.
                .wrap(middleware::Condition::new(
                    access_log,
                    middleware::Logger::new("%a \"%{request}xi\" %s %b %Dms")
                        .custom_request_replace("request", |request| {
                            format!(
                                "{} {} {:?}",
                                request.method(),
                                request.path(),
                                request.version()
                            )
                        }),
                ))
                .configure(|config| routes::routes(config, &settings))
        })
        .bind(listen)
        .map_err(|e| format!("cannot listen on {listen}: {e}"))?
        .run()
        .await
        .map_err(|e| e.to_string())
    })
}
