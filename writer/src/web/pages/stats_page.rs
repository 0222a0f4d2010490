//! A link's statistics page: clicks over time as SVG charts, and the top
//! referrers, countries, devices, browsers and systems as bars.
//!
//! Everything shown is drawn here, on the server: the page is a shell whose
//! small script fetches the report (`GET /api/links/{key}/stats/report`)
//! with the management page's token as a bearer, like every other call of
//! that page, and puts it in place. No chart library, nothing from another
//! site; every stored text is escaped.

use std::fmt::Write as _;
use std::sync::LazyLock;

use actix_web::http::StatusCode;
use actix_web::HttpResponse;
use shortlink_core::escape_html as escape;

use super::page::STYLE;
use crate::clicks::{LinkStats, Share, TargetClicks};
use crate::web::html_page;

const STATS_STYLE: &str = r"
main { max-width: 52rem; }
.nav { margin: .25rem 0 1rem; }
.tiles { display: grid; grid-template-columns: repeat(auto-fit, minmax(9rem, 1fr)); gap: .75rem;
         margin: 1rem 0 1.5rem; }
.tile { border: 1px solid var(--line); border-radius: .75rem; padding: .75rem 1rem; }
.tile strong { display: block; font-size: 1.6rem; line-height: 1.2; }
.tile span { font-size: .85rem; opacity: .75; }
.range { display: flex; gap: .5rem; margin: .5rem 0 1rem; }
.range button { padding: .3rem .8rem; font-size: .9rem; background: transparent; color: var(--accent);
                border: 1px solid var(--accent); }
.range button[aria-pressed=true] { background: var(--accent); color: Canvas; }
figure { margin: 0 0 1.75rem; }
figcaption { font-weight: 600; margin-bottom: .4rem; }
svg.chart { width: 100%; height: auto; display: block; }
svg.chart .bar { fill: var(--accent); }
svg.chart .axis { stroke: var(--line); stroke-width: 1; }
svg.chart text { fill: currentColor; font-size: 11px; opacity: .75; }
.shares { display: grid; grid-template-columns: repeat(auto-fit, minmax(15rem, 1fr)); gap: 1.25rem 2rem; }
.shares h3 { font-size: 1rem; margin: 0 0 .4rem; }
.shares table { width: 100%; border-collapse: collapse; font-size: .9rem; }
.shares td { padding: .2rem 0; vertical-align: middle; }
.shares td.name { overflow-wrap: anywhere; padding-right: .5rem; }
.shares td.count { text-align: right; white-space: nowrap; padding-left: .5rem; }
.meter { height: .45rem; border-radius: .25rem; background: var(--accent); min-width: 2px; }
.empty { opacity: .7; font-size: .9rem; }
.target { word-break: break-all; opacity: .8; }
";

/// The page's one script, whose digest its `Content-Security-Policy` allows.
pub const SCRIPT: &str = include_str!("stats.js");

/// The page, the same for every link (its script reads the key and the
/// domain from the address): built once.
pub fn render() -> &'static str {
    static PAGE: LazyLock<String> = LazyLock::new(build);
    &PAGE
}

fn build() -> String {
    let mut page = String::with_capacity(8 * 1024);
    let _ = write!(
        page,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Link statistics</title>\n<style>{STYLE}{STATS_STYLE}</style>\n</head>\n<body>\n<main>\n\
         <h1>Statistics of <span id=\"stats-key\"></span>\
         <span id=\"stats-domain\" hidden> on <span id=\"stats-domain-name\"></span></span></h1>\n\
         <p class=\"nav\"><a href=\"/manage\">Back to your links</a></p>\n\
         <noscript><p class=\"error\">This page needs JavaScript. Without it, use \
         GET /api/links/KEY/stats with your token.</p></noscript>\n\
         <div class=\"range\" role=\"group\" aria-label=\"Days shown\">\
         <button type=\"button\" data-days=\"7\" aria-pressed=\"false\">7 days</button>\
         <button type=\"button\" data-days=\"30\" aria-pressed=\"true\">30 days</button>\
         <button type=\"button\" data-days=\"90\" aria-pressed=\"false\">90 days</button></div>\n\
         <p id=\"status\" role=\"status\" aria-live=\"polite\"></p>\n\
         <div id=\"report\"></div>\n\
         </main>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
    );
    page
}

/// The report for `stats`: what the page shows, as an HTML fragment.
/// `short_url` and `target` head it (`target` is `None` for a deleted link).
pub fn report(stats: &LinkStats, short_url: &str, target: Option<&str>) -> String {
    let mut html = String::with_capacity(16 * 1024);
    let _ = write!(
        html,
        "<p><a href=\"{short}\">{short}</a></p>\n<p class=\"target\">{}</p>\n",
        target.map_or_else(
            || "Deleted: it answers 410 Gone".to_owned(),
            |url| format!("Leads to {}", escape(url))
        ),
        short = escape(short_url),
    );
    let days = stats.days.len();
    html.push_str("<div class=\"tiles\">\n");
    for (value, label) in [
        (stats.clicks, "clicks by people, all time".to_owned()),
        (
            stats.visitors,
            format!(
                "unique visitors, last {days} day{}",
                if days == 1 { "" } else { "s" }
            ),
        ),
        (stats.bots, "requests by bots, all time".to_owned()),
        (stats.gone, "answers after expiry or deletion".to_owned()),
    ]
    .into_iter()
    .chain(
        stats
            .max_clicks
            .zip(stats.clicks_left)
            .map(|(limit, left)| {
                (
                    left,
                    format!("clicks left of its limit of {}", thousands(limit)),
                )
            }),
    ) {
        let _ = writeln!(
            html,
            "<div class=\"tile\"><strong>{}</strong><span>{label}</span></div>",
            thousands(value)
        );
    }
    html.push_str("</div>\n");
    let daily: Vec<Bar> = stats
        .days
        .iter()
        .map(|day| Bar {
            label: day.date.clone(),
            value: day.clicks,
            note: format!(
                "{}: {} clicks, {} visitors",
                day.date,
                thousands(day.clicks),
                thousands(day.visitors)
            ),
        })
        .collect();
    figure(
        &mut html,
        &format!("Clicks per day, last {days} days"),
        &daily,
    );
    let hourly: Vec<Bar> = stats
        .hours
        .iter()
        .map(|hour| {
            // 2026-11-23T14:00Z reads as "11-23 14h".
            let short = hour.hour.get(5..13).unwrap_or(&hour.hour).replace('T', " ") + "h";
            Bar {
                note: format!("{short}: {} clicks", thousands(hour.clicks)),
                label: short,
                value: hour.clicks,
            }
        })
        .collect();
    figure(
        &mut html,
        &format!("Clicks per hour (UTC), last {} hours", hourly.len()),
        &hourly,
    );
    if !stats.targets.is_empty() {
        // Rules and split targets in their order, each with its URL.
        let targets: Vec<Share> = stats.targets.iter().map(target_share).collect();
        html.push_str("<div class=\"shares\" id=\"targets\">\n");
        share_table(&mut html, "Clicks per target (rules and split)", &targets);
        html.push_str("</div>\n");
    }
    html.push_str("<div class=\"shares\">\n");
    for (title, shares) in [
        ("Referrers", &stats.referrers),
        ("Countries", &stats.countries),
        ("Devices", &stats.devices),
        ("Browsers", &stats.browsers),
        ("Systems", &stats.os),
    ] {
        share_table(&mut html, title, shares);
    }
    html.push_str("</div>\n");
    html
}

/// A target's clicks as a row of its table: `rule 1: https://...`.
fn target_share(target: &TargetClicks) -> Share {
    let place = match (target.kind.as_str(), target.number) {
        ("rule", Some(n)) => format!("rule {n}"),
        ("split", Some(n)) => format!("split target {n}"),
        _ => "the link's own URL".to_owned(),
    };
    Share {
        name: match &target.url {
            Some(url) => format!("{place}: {url}"),
            None => format!("{place} (removed since)"),
        },
        clicks: target.clicks,
    }
}

/// One bar of a chart: its axis label, height and tooltip.
struct Bar {
    label: String,
    value: u64,
    note: String,
}

const CHART_WIDTH: u32 = 720;
const CHART_HEIGHT: u32 = 180;
/// Room for the axis labels below the bars and the scale on the left.
const LABELS_BELOW: u32 = 20;
const SCALE_LEFT: u32 = 44;

/// A captioned bar chart of `bars`, oldest on the left, as inline SVG.
// Bars are days or hours kept (thousands at most) and their clicks: far
// inside what an f64 holds exactly.
#[allow(clippy::cast_precision_loss)]
fn figure(html: &mut String, caption: &str, bars: &[Bar]) {
    let _ = write!(
        html,
        "<figure>\n<figcaption>{}</figcaption>\n",
        escape(caption)
    );
    let plot_height = CHART_HEIGHT - LABELS_BELOW;
    let _ = writeln!(
        html,
        "<svg class=\"chart\" viewBox=\"0 0 {CHART_WIDTH} {CHART_HEIGHT}\" role=\"img\" \
         aria-label=\"{}\">",
        escape(caption)
    );
    let top = bars.iter().map(|bar| bar.value).max().unwrap_or(0);
    let scale = nice_ceiling(top);
    // The scale: its top value, and zero at the baseline.
    let _ = write!(
        html,
        "<line class=\"axis\" x1=\"{SCALE_LEFT}\" y1=\"{plot_height}\" x2=\"{CHART_WIDTH}\" \
         y2=\"{plot_height}\"/>\n\
         <line class=\"axis\" x1=\"{SCALE_LEFT}\" y1=\"4\" x2=\"{CHART_WIDTH}\" y2=\"4\" \
         stroke-dasharray=\"3 3\"/>\n\
         <text x=\"{}\" y=\"12\" text-anchor=\"end\">{}</text>\n\
         <text x=\"{}\" y=\"{plot_height}\" text-anchor=\"end\">0</text>\n",
        SCALE_LEFT - 6,
        thousands(scale),
        SCALE_LEFT - 6,
    );
    if !bars.is_empty() {
        let slot = f64::from(CHART_WIDTH - SCALE_LEFT) / bars.len() as f64;
        let width = (slot * 0.8).max(1.0);
        let room = f64::from(plot_height - 4);
        for (n, bar) in bars.iter().enumerate() {
            let height = if scale == 0 {
                0.0
            } else {
                room * bar.value as f64 / scale as f64
            };
            let x = f64::from(SCALE_LEFT) + slot * n as f64 + (slot - width) / 2.0;
            let y = f64::from(plot_height) - height;
            let _ = writeln!(
                html,
                "<rect class=\"bar\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{width:.1}\" \
                 height=\"{height:.1}\" data-value=\"{}\"><title>{}</title></rect>",
                bar.value,
                escape(&bar.note)
            );
        }
        // The first, middle and last labels: enough to read the time axis.
        let last = bars.len() - 1;
        let mut labelled = vec![0, last / 2, last];
        labelled.dedup();
        for n in labelled {
            // The outer labels align with the chart's edges, so they fit.
            let (offset, anchor) = match n {
                0 => (0.0, "start"),
                n if n == last => (1.0, "end"),
                _ => (0.5, "middle"),
            };
            let x = f64::from(SCALE_LEFT) + slot * (n as f64 + offset);
            let _ = writeln!(
                html,
                "<text x=\"{x:.1}\" y=\"{}\" text-anchor=\"{anchor}\">{}</text>",
                CHART_HEIGHT - 4,
                escape(&bars[n].label)
            );
        }
    }
    html.push_str("</svg>\n</figure>\n");
}

/// A round number at or above `value` for the top of a chart's scale:
/// 1, 2 or 5 times a power of ten.
fn nice_ceiling(value: u64) -> u64 {
    if value == 0 {
        return 0;
    }
    let mut power = 1u64;
    loop {
        for step in [1, 2, 5] {
            let candidate = step * power;
            if candidate >= value {
                return candidate;
            }
        }
        match power.checked_mul(10) {
            Some(next) => power = next,
            None => return value,
        }
    }
}

/// The top values of one detail, each with a bar as long as its share.
fn share_table(html: &mut String, title: &str, shares: &[Share]) {
    let _ = write!(html, "<section>\n<h3>{title}</h3>\n");
    if shares.is_empty() {
        html.push_str("<p class=\"empty\">None yet.</p>\n</section>\n");
        return;
    }
    let top = shares.iter().map(|s| s.clicks).max().unwrap_or(1).max(1);
    html.push_str("<table>\n");
    for share in shares {
        #[allow(clippy::cast_precision_loss)]
        let percent = 100.0 * share.clicks as f64 / top as f64;
        let _ = writeln!(
            html,
            "<tr><td class=\"name\">{name}</td><td style=\"width:30%\"><div class=\"meter\" \
             style=\"width:{percent:.0}%\"></div></td><td class=\"count\">{}</td></tr>",
            thousands(share.clicks),
            name = escape(&share.name),
        );
    }
    html.push_str("</table>\n</section>\n");
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A link's statistics page; like the management page, it holds no data
/// and asks the API for everything.
#[utoipa::path(
    get,
    path = "/manage/stats/{key}",
    tag = "pages",
    params(
        ("key" = String, Path, description = "The link's key"),
        ("domain" = Option<String>, Query, description = "The link's short domain; the default one when left out (the page's script reads it)"),
    ),
    responses((status = 200, description = "The statistics page; it asks the API for the counts", content_type = "text/html"))
)]
pub(crate) async fn stats_page() -> HttpResponse {
    html_page(StatusCode::OK, Some(SCRIPT)).body(render())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clicks::{DayCount, HourCount};

    fn stats() -> LinkStats {
        LinkStats {
            key: "Lm25".into(),
            clicks: 1234,
            bots: 5,
            gone: 0,
            max_clicks: None,
            clicks_left: None,
            visitors: 700,
            days: (1..=7)
                .map(|d| DayCount {
                    date: format!("2026-11-{d:02}"),
                    clicks: d * 10,
                    visitors: d,
                })
                .collect(),
            hours: vec![HourCount {
                hour: "2026-11-07T14:00Z".into(),
                clicks: 3,
            }],
            referrers: vec![Share {
                name: "<script>alert(1)</script>".into(),
                clicks: 9,
            }],
            countries: vec![],
            devices: vec![Share {
                name: "mobile".into(),
                clicks: 4,
            }],
            browsers: vec![],
            os: vec![],
            targets: vec![],
        }
    }

    #[test]
    fn targets_show_with_their_urls() {
        let html = report(&stats(), "http://s/l/Lm25", None);
        assert!(!html.contains("Clicks per target"));
        let target = |target: &str, kind: &str, number, url: Option<&str>, clicks| TargetClicks {
            target: target.into(),
            kind: kind.into(),
            number,
            url: url.map(Into::into),
            clicks,
        };
        let with_targets = LinkStats {
            targets: vec![
                target("r1", "rule", Some(1), Some("https://apps.example/<x>"), 12),
                target("url", "url", None, Some("https://example.org/"), 3),
                target("s2", "split", Some(2), None, 1),
            ],
            ..stats()
        };
        let html = report(&with_targets, "http://s/l/Lm25", None);
        assert!(html.contains("Clicks per target"));
        assert!(
            html.contains("rule 1: https://apps.example/&lt;x&gt;"),
            "{html}"
        );
        assert!(
            html.contains("the link&#x27;s own URL: https://example.org/")
                || html.contains("the link&#39;s own URL: https://example.org/")
                || html.contains("the link's own URL: https://example.org/"),
            "{html}"
        );
        assert!(html.contains("split target 2 (removed since)"));
    }

    #[test]
    fn one_bar_per_day_scaled_to_a_round_top() {
        let html = report(
            &stats(),
            "http://s/l/Lm25",
            Some("https://example.org/?a=1&b=2"),
        );
        let chart =
            &html[html.find("Clicks per day").unwrap()..html.find("Clicks per hour").unwrap()];
        assert_eq!(chart.matches("<rect class=\"bar\"").count(), 7);
        // The tallest day (70) under a scale topped at 100.
        assert!(chart.contains(">100</text>"), "{chart}");
        assert!(chart.contains("data-value=\"70\""));
        assert!(chart.contains("2026-11-07: 70 clicks, 7 visitors"));
        assert!(html.contains("<strong>1,234</strong>"));
        assert!(html.contains("Leads to https://example.org/?a=1&amp;b=2"));
        assert!(html.contains("11-07 14h: 3 clicks"));
    }

    #[test]
    fn a_click_limit_shows_the_clicks_left() {
        let html = report(&stats(), "http://s/l/Lm25", None);
        assert!(!html.contains("clicks left"));
        let limited = LinkStats {
            max_clicks: Some(2000),
            clicks_left: Some(766),
            ..stats()
        };
        let html = report(&limited, "http://s/l/Lm25", None);
        assert!(html.contains("<strong>766</strong><span>clicks left of its limit of 2,000</span>"));
    }

    #[test]
    fn stored_text_is_escaped() {
        let html = report(&stats(), "http://s/l/Lm25", None);
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!html.contains("<script>"));
        assert!(html.contains("Deleted"));
        assert!(html.contains("<p class=\"empty\">None yet.</p>"));
    }

    #[test]
    fn scales_end_on_round_numbers() {
        for (value, top) in [
            (0, 0),
            (1, 1),
            (3, 5),
            (7, 10),
            (10, 10),
            (11, 20),
            (4321, 5000),
        ] {
            assert_eq!(nice_ceiling(value), top, "{value}");
        }
        assert_eq!(nice_ceiling(u64::MAX), u64::MAX);
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn the_script_finds_every_element_it_names() {
        let page = render();
        let script = SCRIPT;
        let mut rest = script;
        let mut checked = 0;
        while let Some(at) = rest.find("$('") {
            rest = &rest[at + 3..];
            let id = &rest[..rest.find('\'').unwrap()];
            assert!(page.contains(&format!("id=\"{id}\"")), "no element #{id}");
            checked += 1;
        }
        assert!(checked >= 3, "{checked}");
    }
}
