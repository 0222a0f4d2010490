//! The VCL's arguments to a redirector and its methods, checked against the
//! bounds `shortlink_core` holds for each setting.

use std::time::Duration;

use shortlink_core::SettingError;

use crate::admission;

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
