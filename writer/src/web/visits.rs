//! A link's visit log through the native API: its newest visits, a page at
//! a time.

// `#[utoipa::path]` writes the `params(...)` types out with their module
// path, which this lint flags in the code it generates.
#![allow(unused_qualifications)]

use actix_web::http::header;
use actix_web::{web, HttpRequest, HttpResponse};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::access::Gatekeeper;
use crate::clicks::VisitRecord;
use crate::links::shortener::{Shortener, VisitQuery, VisitScope};
use crate::links::validate::{Field, Invalid};
use crate::web::error::{ApiError, ErrorBody};
use crate::web::query;

/// Visits a page holds unless asked otherwise, and at most.
const PER_PAGE: usize = 50;
const PER_PAGE_MAX: usize = 1000;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct VisitsParams {
    /// The link's short domain, by its name or an alias; absent: the
    /// default one.
    domain: Option<String>,
    /// From 1; default 1.
    page: Option<usize>,
    /// 1 to 1000; default 50.
    per_page: Option<usize>,
    /// Only visits at or after this moment (Unix seconds).
    since: Option<u64>,
    /// Only visits at or before this moment (Unix seconds).
    until: Option<u64>,
    /// Leave out crawlers, scripts and `HEAD` requests.
    #[serde(default)]
    exclude_bots: bool,
}

/// One visit the log kept.
#[derive(Debug, Serialize, ToSchema)]
pub struct VisitBody {
    /// Unix seconds.
    pub at: u64,
    pub bot: bool,
    /// ISO 3166 code; absent when not known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// The host of the `Referer`; absent for none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub referrer: Option<String>,
    pub user_agent: String,
    /// The target a link with rules or a split chose (`url`, `r1`, `s2`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Where the visit was sent, as the link reads now (the URL of the
    /// target chosen); absent once the link is gone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redirect_url: Option<String>,
}

impl From<VisitRecord> for VisitBody {
    fn from(visit: VisitRecord) -> Self {
        let some = |text: String| (!text.is_empty()).then_some(text);
        Self {
            at: visit.seconds(),
            bot: visit.bot,
            country: some(visit.country),
            referrer: some(visit.referrer),
            user_agent: visit.agent,
            target: some(visit.target),
            redirect_url: visit.redirect,
        }
    }
}

/// A page of a link's visits, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct VisitsBody {
    pub domain: String,
    pub key: String,
    pub visits: Vec<VisitBody>,
    /// Visits the log holds that match, over every page: at most
    /// `visits_kept`, and fewer than the totals count once a link has had
    /// more visits, or older ones, than the log keeps.
    pub total: usize,
    pub page: usize,
    pub per_page: usize,
}

/// A link's newest visits, for its owner or an admin.
#[utoipa::path(
    get,
    path = "/api/links/{key}/visits",
    tag = "clicks",
    params(("key" = String, Path, description = "The link's key"), VisitsParams),
    responses(
        (status = 200, description = "A page of the link's visits, newest first", body = VisitsBody),
        (status = 401, description = "No access token, or one that is not valid (`WWW-Authenticate` says which)", body = ErrorBody),
        (status = 403, description = "The link belongs to another token (`not-owner`), or the token is limited to other domains (`domain-not-allowed`)", body = ErrorBody),
        (status = 404, description = "No link has this key", body = ErrorBody),
        (status = 422, description = "page or per_page is out of bounds, or the domain is not served here (`unknown-domain`)", body = ErrorBody),
        (status = 503, description = "The store (Redis) is unreachable; try again", body = ErrorBody),
    ),
    security(("token" = []))
)]
pub(crate) async fn link_visits(
    request: HttpRequest,
    shortener: web::Data<Shortener>,
    guard: web::Data<Gatekeeper>,
    key: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let who = guard.identify(&request)?;
    let params = query::<VisitsParams>(
        &request,
        "domain, page, per_page, since, until and exclude_bots",
    )?;
    let domain = shortener.domain(params.domain.as_deref())?;
    let page = params.page.unwrap_or(1);
    let per_page = params.per_page.unwrap_or(PER_PAGE);
    if page == 0 {
        return Err(Invalid::new(Field::Page, "page counts from 1").into());
    }
    if !(1..=PER_PAGE_MAX).contains(&per_page) {
        return Err(Invalid::new(
            Field::PerPage,
            format!("per_page must be 1 to {PER_PAGE_MAX}"),
        )
        .into());
    }
    let visit_query = VisitQuery {
        since: params.since,
        until: params.until,
        exclude_bots: params.exclude_bots,
        page,
        per_page: Some(per_page),
        ..VisitQuery::default()
    };
    let scope = VisitScope::Link { domain, key: &key };
    let found = shortener.visits(&who, scope, &visit_query).await?;
    Ok(HttpResponse::Ok()
        .insert_header((header::CACHE_CONTROL, "no-store"))
        .json(VisitsBody {
            domain: domain.name.clone(),
            key: key.into_inner(),
            visits: found.visits.into_iter().map(VisitBody::from).collect(),
            total: found.total,
            page,
            per_page,
        }))
}
