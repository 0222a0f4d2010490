//! The VCL's arguments to a redirector and its methods, checked against the
//! bounds `shortlink_core` holds for each setting.

use std::time::Duration;

use shortlink_core::{DomainVisitsKept, Retention, SettingError, VisitsKept};

use crate::admission;
use crate::clicks::VisitBounds;

/// The admission filter for a window VCL gave (or left out).
pub fn admission_of(window: Option<Duration>, name: &str) -> Result<admission::Admission, String> {
    let window = duration_or(
        window,
        shortlink_core::AdmissionWindow::DEFAULT,
        "admission_window",
        name,
    )?;
    Ok(admission::Admission::new(window))
}

/// `value`, or `default` when VCL left it out, within the bounds of `T`
/// ([`Timeout`], [`Ttl`], [`Retention`]...).
pub fn duration_or<T>(
    value: Option<Duration>,
    default: T,
    what: &str,
    name: &str,
) -> Result<Duration, String>
where
    T: TryFrom<Duration, Error = SettingError> + Into<Duration>,
{
    value
        .map_or(Ok(default), T::try_from)
        .map(Into::into)
        .map_err(|e| format!("shortlink: {name}: {what} {e}"))
}

/// The visit log's bounds from the constructor's arguments.
pub fn visit_bounds(
    per_link: i64,
    per_domain: i64,
    days: Option<Duration>,
    name: &str,
) -> Result<VisitBounds, String> {
    let refused = |what: &str, e: SettingError| format!("shortlink: {name}: {what} {e}");
    Ok(VisitBounds {
        per_link: VisitsKept::try_from(per_link)
            .map_err(|e| refused("visits_kept", e))?
            .get() as usize,
        per_domain: DomainVisitsKept::try_from(per_domain)
            .map_err(|e| refused("domain_visits_kept", e))?
            .get() as usize,
        days: duration_or(days, Retention::VISITS, "visit_days", name)?,
    })
}
